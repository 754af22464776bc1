"""Custom judge metrics (RubricMetric, @metric) on the engine: the same guarantees as the built-in ones."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from fakeserver import storm  # noqa: E402 (tests/judge is on sys.path: conftest.py)

from ragmeter.errors import InputError
from ragmeter.judge import JudgeConfig, JudgeStopped, RubricMetric, metric, run_sync
from ragmeter.judge.metrics import METRICS

ROOT = Path(__file__).resolve().parents[2]


def cases(n=6):
    return [{"id": f"c{i}", "question": f"What colour is item {i}?", "reference_answer": f"Item {i} is blue",
             "answer": f"Item {i} is blue." if i % 2 == 0 else f"Item {i} is red.", "contexts": [f"item {i} is blue"],
             "category": "fact", "policy": "be polite"} for i in range(n)]


def tone(**kw):
    spec = dict(name="tone_check", criteria="Is the answer polite and on topic?", scale=(1, 5), pass_threshold=4,
                fields=("question", "answer"), steps=("Read the answer", "Judge its tone"),
                score_descriptions={5: "polite and on topic", 1: "rude or off topic"})
    spec.update(kw)
    return RubricMetric(**spec)


def cfg(server, tmp_path, fast_retry, **kw):
    base = dict(base_url=server.base_url, model="gpt-4o-mini", cache=tmp_path / "cache.sqlite", retry=fast_retry,
                timeout=0.5, concurrency=4, metrics=[tone()])
    base.update(kw)
    return JudgeConfig(**base)


def test_rubric_scores_on_its_scale_mapped_to_0_1_with_a_pass_rate(server, tmp_path, fast_retry):
    res = run_sync(cases(4), cfg(server, tmp_path, fast_retry))
    df = res.frame()
    assert df["metric"].unique().to_list() == ["tone_check"] and df["status"].to_list() == ["ok"] * 4
    # the fake judge gives 4 to answers mentioning blue (c0, c2), 2 otherwise: (4-1)/4 and (2-1)/4
    assert df["score"].to_list() == [0.75, 0.25, 0.75, 0.25]
    assert df["correct"].to_list() == [True, False, True, False]
    assert json.loads(df["verdicts"][0]) == [{"score": 4, "scale": [1, 5], "pass_threshold": 4}]
    assert df["prompt_version"][0].startswith("custom-tone-check@v1-")
    m = res.summary["metrics"]["tone_check"]
    assert m["n_scored"] == 4 and m["mean"] == 0.5 and m["pass_rate"] == 0.5 and m["pass_rate_denominator"] == 4
    assert m["scale"] == "0-1 (rubric 1-5)"
    assert res.summary["prompts"]["tone_check"] == df["prompt_version"][0]
    system = tone().prompts[0].system("en")
    assert "2. Judge its tone" in system and "5 = polite and on topic" in system and "integer 1-5" in system
    assert set(server.log[0]["payload"]) == {"question", "answer"}


def test_rubric_fault_matrix_every_row_ok_or_explicit(server, tmp_path, fast_retry):
    # the built-in metrics' storm (test_runner.test_every_case_ends_ok_or_explicit_failure), with a rubric metric
    # judged beside a built-in one: the same guarantees must hold for both
    actions = storm(server)
    res = run_sync(cases(30), cfg(server, tmp_path, fast_retry, max_retry_tokens=4000, concurrency=8, timeout=0.3,
                                  metrics=[tone(), "correctness"]))
    df = res.frame()
    assert df.height == 60 and set(df["status"].unique()) <= {"ok", "failed"}
    scripted = {a if isinstance(a, (int, str)) else json.dumps(a, sort_keys=True) for a in actions} | {400}
    met = {r["action"] for r in server.log if r["task"] == "custom-tone-check"}
    assert scripted <= met, scripted - met  # the rubric metric's requests met every fault
    for name in ("tone_check", "correctness"):
        sub = df.filter(pl.col("metric") == name)
        failed, ok = sub.filter(pl.col("status") == "failed"), sub.filter(pl.col("status") == "ok")
        assert sub["id"].n_unique() == 30, name  # no case lost
        assert sub.filter(pl.col("id") == "c7")["error_kind"].to_list() == ["client"], name
        assert failed["score"].null_count() == failed.height, name  # never scored
        assert failed["error"].null_count() == 0 and failed["error_kind"].null_count() == 0, name
        assert set(failed["error_kind"].unique()) <= {"client", "empty", "truncated", "unparsable"}, name
        assert (sub["attempts"] >= 1).all() and ok["attempts"].max() >= 3, name  # retried and recovered
        m = res.summary["metrics"][name]
        assert m["n_total"] == 30 and m["n_failed"] == failed.height and m["n_scored"] == ok.height, name
        assert sum(g["count"] for g in m["failures"].values()) == m["n_failed"], name
        assert m["mean"] == pytest.approx(ok["score"].mean(), abs=1e-6), name  # a failure is not averaged as 0
    m = res.summary["metrics"]["tone_check"]
    assert m["pass_rate_denominator"] == m["n_scored"] + m["n_failed"]  # a failed row did not pass
    corr = res.summary["metrics"]["correctness"]
    assert corr["correct_rate_denominator"] == corr["n_scored"] + corr["n_failed"]


def test_rubric_repeats_ask_again_and_report_flips(server, tmp_path, fast_retry):
    from ragmeter.evaluation import evaluate

    asked: dict = {}

    def flipping(payload):  # the third case's verdict flips on the second judgement
        n = asked[payload["question"]] = asked.get(payload["question"], 0) + 1
        flip = "item 2?" in payload["question"] and n == 2
        return {"score": 1 if flip else 5, "reason": "scripted"}

    server.replies["custom-tone-check"] = flipping
    data = cases(4)
    golden = [{k: c[k] for k in ("id", "question", "reference_answer", "category")} for c in data]
    run = [{"id": c["id"], "answer": c["answer"], "retrieved": [{"file": "kb.md", "text": c["contexts"][0]}]}
           for c in data]
    result = evaluate(golden, run, judge=cfg(server, tmp_path, fast_retry), repeat=3)
    judge = result.judge
    assert judge.height == 3 * 4 and sorted(judge["repeat"].unique().to_list()) == [1, 2, 3]
    assert set(asked.values()) == {3}  # every repeat asked the judge; none replayed from the cache
    rep = result.summary["repeats"]["metrics"]["tone_check"]
    assert rep["n_compared"] == 4 and rep["n_flipped"] == 1 and rep["std"] > 0
    assert rep["per_repeat"][0] == rep["per_repeat"][2] != rep["per_repeat"][1]


def test_truncated_reply_doubles_the_budget(server, tmp_path, fast_retry):
    server.script = ["truncated"]
    res = run_sync(cases(1), cfg(server, tmp_path, fast_retry, max_tokens=500, max_retry_tokens=4000))
    assert res.rows[0]["status"] == "ok"
    assert [r["max_tokens"] for r in server.log[:2]] == [500, 1000]


def test_unparsable_then_repaired_and_off_scale_gets_the_repair_turn(server, tmp_path, fast_retry):
    server.script = ["malformed"]
    res = run_sync(cases(1), cfg(server, tmp_path, fast_retry))
    assert res.rows[0]["status"] == "ok" and res.rows[0]["calls"] == 2 and server.log[1]["repair"]
    server.replies["custom-tone-check"] = lambda payload: {"score": 9, "reason": "off the scale"}
    res = run_sync(cases(1), cfg(server, tmp_path, fast_retry, cache=None))
    row = res.rows[0]
    assert row["status"] == "failed" and row["error_kind"] == "unparsable" and "1-5" in row["error"]
    assert row["calls"] == 2  # one repair turn, then an explicit failure with the raw output kept
    assert json.loads(row["raw_output"])["score"] == 9


def test_refused_key_fails_fast(server, tmp_path, fast_retry):
    server.rules = [(lambda info: True, 401)]
    with pytest.raises(JudgeStopped, match="refused the API key"):
        run_sync(cases(10), cfg(server, tmp_path, fast_retry))
    assert server.requests == 1


def test_cache_replays_and_the_prompt_text_is_part_of_the_key(server, tmp_path, fast_retry):
    run_sync(cases(3), cfg(server, tmp_path, fast_retry))
    first = server.requests
    again = run_sync(cases(3), cfg(server, tmp_path, fast_retry))
    assert server.requests == first and again.summary["cached_calls"] == 3
    edited = run_sync(cases(3), cfg(server, tmp_path, fast_retry, metrics=[tone(criteria="Is it concise?")]))
    assert server.requests == first + 3 and edited.summary["cached_calls"] == 0
    assert edited.rows[0]["prompt_version"] != again.rows[0]["prompt_version"]


def test_dry_run_estimates_custom_metrics_and_sends_nothing(server, tmp_path, fast_retry):
    est = run_sync(cases(4), cfg(server, tmp_path, fast_retry, dry_run=True)).estimate
    assert est["calls"] == 4 and est["per_metric"]["tone_check"]["calls"] == 4 and server.requests == 0
    run_sync(cases(4), cfg(server, tmp_path, fast_retry))
    est = run_sync(cases(4), cfg(server, tmp_path, fast_retry, dry_run=True)).estimate
    assert est["calls"] == 0 and est["cached_calls"] == 4


def test_budget_covers_custom_metrics(server, tmp_path, fast_retry):
    res = run_sync(cases(6), cfg(server, tmp_path, fast_retry, budget=0.0, prices={"gpt-4o-mini": [0.15, 0.6]}))
    assert [r["error_kind"] for r in res.rows] == ["budget"] * 6 and server.requests == 0


def test_decorated_metric_single_prompt_and_multi_step(server, tmp_path, fast_retry):
    @metric(prompt='Does the field "answer" say a colour? Schema: {"colour": "<text>"}', schema={"colour": str},
            fields=("answer",))
    def says_blue(reply, case):
        return 1.0 if reply["colour"] == "blue" else 0.0

    @metric(prompts={"find": ('List the colours named in "answer".', {"colours": list}),
                     "check": ('For each of "colours", is it in "contexts"?', {"supported": int})},
            fields=("answer", "contexts"))
    async def colours_supported(ask, case):
        found = await ask("find")
        if not found["colours"]:
            return None, "no colour named"
        checked = await ask("check", {"colours": found["colours"], "contexts": case.contexts})
        return checked["supported"] / len(found["colours"]), f"{checked['supported']} supported"

    server.replies["custom-says-blue"] = lambda p: {"colour": "blue" if "blue" in p["answer"] else "red"}
    server.replies["custom-colours-supported-find"] = lambda p: {"colours": ["blue"] if "blue" in p["answer"] else []}
    server.replies["custom-colours-supported-check"] = lambda p: {"supported": 1}
    res = run_sync(cases(2), cfg(server, tmp_path, fast_retry, metrics=[says_blue, colours_supported]))
    df = res.frame().sort("metric", "id")
    assert df.filter(pl.col("metric") == "says_blue")["score"].to_list() == [1.0, 0.0]
    cs = df.filter(pl.col("metric") == "colours_supported")
    assert cs["score"].to_list() == [1.0, None] and cs["outcome"].to_list() == ["scored", "no_score"]
    assert cs["calls"].to_list() == [2, 1]
    assert res.summary["metrics"]["colours_supported"]["n_scored"] == 1
    assert "says_blue" in METRICS and METRICS["says_blue"] is says_blue  # one registration, by name


def test_scoring_function_that_raises_on_a_real_reply_fails_its_row(server, tmp_path, fast_retry):
    @metric(prompt='Rate "answer". Schema: {"rating": <integer>}', schema={"rating": int}, fields=("answer",))
    def picky(reply, case):
        if reply["rating"] != 1:
            raise RuntimeError("unexpected rating")
        return 1.0

    server.replies["custom-picky"] = lambda p: {"rating": 3}
    res = run_sync(cases(2), cfg(server, tmp_path, fast_retry, metrics=[picky]))
    assert [r["status"] for r in res.rows] == ["failed"] * 2
    assert res.rows[0]["error_kind"] == "metric_error" and "picky" in res.rows[0]["error"]


def test_a_bare_coroutine_in_METRICS_no_longer_breaks_the_runner(server, tmp_path, fast_retry):
    from ragmeter.judge import prompts as P
    from ragmeter.judge.metrics import MetricResult

    async def length_ok(engine, case, stats, opts):
        return MetricResult(score=1.0 if len(case.answer or "") < 100 else 0.0)

    METRICS["length_ok"] = length_ok
    try:
        res = run_sync(cases(2), cfg(server, tmp_path, fast_retry, metrics=["length_ok"]))
        assert [r["score"] for r in res.rows] == [1.0, 1.0] and res.rows[0]["prompt_version"] == "custom"
        est = run_sync(cases(2), cfg(server, tmp_path, fast_retry, metrics=["length_ok"], dry_run=True)).estimate
        assert "not estimated" in est["note"] and "length_ok" in est["note"]
    finally:
        del METRICS["length_ok"]


# -- bad input: named, before any call --------------------------------------------------------------------
def test_invalid_schema_names_the_metric_and_field():
    with pytest.raises(InputError, match=r"metric 'bad'.*field 'score' has type 'decimal'"):
        metric("bad", prompt="x", schema={"score": "decimal"})(lambda r, c: 0.0)
    with pytest.raises(InputError, match=r"metric 'bad'.*schema"):
        metric("bad", prompt="x", schema={})(lambda r, c: 0.0)


def test_invalid_rubrics_are_named():
    with pytest.raises(InputError, match="metric 'tone_check': scale"):
        tone(scale=(5, 1))
    with pytest.raises(InputError, match="pass_threshold 7"):
        tone(pass_threshold=7)
    with pytest.raises(InputError, match="references field 'policy'"):
        tone(criteria="Does the answer follow {policy}?")
    with pytest.raises(InputError, match="built-in"):
        JudgeConfig(base_url="http://127.0.0.1:9/v1", model="m", metrics=[tone(name="faithfulness")])


def test_field_the_data_lacks_and_raising_scorer_stop_before_any_call(server, tmp_path, fast_retry):
    with pytest.raises(InputError, match=r"metric 'tone_check': field 'tone_rules' is in none of the 3 cases"):
        run_sync(cases(3), cfg(server, tmp_path, fast_retry, metrics=[tone(fields=("answer", "tone_rules"))]))
    ok = run_sync(cases(1), cfg(server, tmp_path, fast_retry, metrics=[tone(fields=("answer", "policy"))]))
    assert ok.rows[0]["status"] == "ok" and server.log[-1]["payload"]["policy"] == "be polite"
    before = server.requests

    @metric(prompt='Rate "answer". Schema: {"rating": <integer>}', schema={"rating": int}, fields=("answer",))
    def broken(reply, case):
        return reply["grade"]  # not in the schema: a KeyError on every reply

    for dry in (True, False):
        with pytest.raises(InputError, match=r"metric 'broken': the scoring function raised KeyError"):
            run_sync(cases(3), cfg(server, tmp_path, fast_retry, metrics=[broken], dry_run=dry))
    assert server.requests == before


def test_metric_file_and_module_from_the_cli(server, tmp_path, api_key):
    golden, run = ROOT / "python/ragmeter/_example/golden.jsonl", ROOT / "python/ragmeter/_example/run.jsonl"
    toml = tmp_path / "metrics.toml"
    toml.write_text('[metrics.tone_check]\ncriteria = "Is the answer polite?"\nscale = [1, 5]\npass_threshold = 4\n'
                    'fields = ["question", "answer"]\n[metrics.tone_check.score_descriptions]\n5 = "polite"\n')
    out = tmp_path / "out"
    env = {"PYTHONPATH": str(ROOT / "python"), "RAGMETER_API_KEY": api_key, "PATH": "/usr/bin:/bin"}
    base = [sys.executable, "-m", "ragmeter", "eval", "--golden", str(golden), "--run", str(run), "--base-url",
            server.base_url, "--model", "gpt-4o-mini", "--cache", str(tmp_path / "c.sqlite")]
    proc = subprocess.run(base + ["--metrics", "faithfulness", "--metric-file", str(toml), "--out", str(out)],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    judge = pl.read_parquet(out / "judge.parquet")
    assert set(judge["metric"].unique()) == {"faithfulness", "tone_check"}
    cases_ = pl.read_parquet(out / "cases.parquet")
    assert "tone_check_score" in cases_.columns and "tone_check_status" in cases_.columns
    summary = json.loads((out / "summary.json").read_text())
    assert "tone_check" in summary["judge"]["metrics"]
    assert "Tone check" in (out / "report.md").read_text()
    # compare and gate rules know the custom metric like a built-in one
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "compare", str(out), str(out), "--gate",
                           "tone_check>=-5pp,tone_check>=0.99"], capture_output=True, text=True, env=env)
    assert proc.returncode == 1, proc.stderr
    assert re.search(r"^tone_check +0\.\d+ +0\.\d+ +\+0\.000", proc.stdout, re.M), proc.stdout
    assert "ok: tone_check>=-5pp" in proc.stdout and "gate failed: tone_check>=0.99" in proc.stderr
    assert "unknown metric" not in proc.stderr
    # a rubric file with a bad field: one line naming file, metric and field, exit 2, nothing sent
    bad = tmp_path / "bad.toml"
    bad.write_text('[metrics.tone_check]\ncriteria = "x"\nscale = [1, 5]\npass_treshold = 4\n')
    sent = server.requests
    proc = subprocess.run(base + ["--metric-file", str(bad), "--out", str(tmp_path / "bad")],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "bad.toml: metric 'tone_check': unknown field 'pass_treshold'" in proc.stderr
    assert "Traceback" not in proc.stderr and server.requests == sent
    module = tmp_path / "my_metrics.py"
    module.write_text("from ragmeter.judge import metric\n"
                      "@metric(prompt='Rate \"answer\". Schema: {\"rating\": <integer>}', schema={'rating': int},"
                      " fields=('answer',))\n"
                      "def broken(reply, case):\n    return reply['grade']\n")
    proc = subprocess.run(base + ["--metric-module", str(module), "--out", str(tmp_path / "mod")],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "metric 'broken': the scoring function raised KeyError" in proc.stderr
    assert server.requests == sent and not (tmp_path / "mod" / "summary.json").exists()


@pytest.mark.parametrize("dry_run", [False, True])
def test_bad_custom_metrics_from_the_cli_exit_2_naming_metric_and_field(server, tmp_path, api_key, dry_run):
    """An invalid schema, a prompt field the data lacks: one line naming the metric and the field, exit 2,
    nothing sent and nothing written, with or without --dry-run."""
    golden, run = ROOT / "python/ragmeter/_example/golden.jsonl", ROOT / "python/ragmeter/_example/run.jsonl"
    env = {"PYTHONPATH": str(ROOT / "python"), "RAGMETER_API_KEY": api_key, "PATH": "/usr/bin:/bin"}
    base = [sys.executable, "-m", "ragmeter", "eval", "--golden", str(golden), "--run", str(run), "--base-url",
            server.base_url, "--model", "gpt-4o-mini", "--no-cache"] + (["--dry-run"] if dry_run else [])
    schema = tmp_path / "schema_metrics.py"
    schema.write_text("from ragmeter.judge import metric\n"
                      "@metric(prompt='Rate \"answer\".', schema={'rating': 'decimal'}, fields=('answer',))\n"
                      "def rated(reply, case):\n    return reply['rating']\n")
    lacking = tmp_path / "lacking.toml"
    lacking.write_text('[metrics.policy_check]\ncriteria = "Does the answer follow the policy?"\nscale = [1, 5]\n'
                       'pass_threshold = 4\nfields = ["answer", "policy"]\n')
    for option, path, expected in (
            ("--metric-module", schema, r"metric 'rated'.*field 'rating' has type 'decimal'"),
            ("--metric-file", lacking, r"metric 'policy_check': field 'policy' is in none of the \d+ cases")):
        out = tmp_path / f"out-{path.stem}"
        proc = subprocess.run(base + [option, str(path), "--out", str(out)], capture_output=True, text=True, env=env)
        assert proc.returncode == 2, (option, proc.stderr)
        assert re.search(expected, proc.stderr), proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.startswith("ragmeter: error:")]
        assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert server.total_requests == 0 and not (out / "summary.json").exists()
