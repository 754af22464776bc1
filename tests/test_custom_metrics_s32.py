"""Custom judge metrics end to end (s32): definitions, results, reports, compare and the cache."""
from __future__ import annotations

import html
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "judge"))

from fakeserver import FakeServer  # noqa: E402

from ragmeter.errors import InputError  # noqa: E402
from ragmeter.judge import JudgeConfig, RubricMetric  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = [{"id": f"c{i}", "question": f"What colour is item {i}?", "expected_files": ["kb.md"],
           "reference_answer": f"Item {i} is blue"} for i in range(1, 5)]
RUN = [{"id": f"c{i}", "answer": f"Item {i} is {'blue' if i % 2 else 'red'}.",
        "retrieved": [{"file": "kb.md", "text": f"item {i} is blue", "score": 0.9}]} for i in range(1, 5)]


@pytest.fixture()
def server():
    s = FakeServer()
    s.start()
    yield s
    s.stop()


@pytest.fixture()
def inputs(tmp_path):
    golden, run = tmp_path / "golden.jsonl", tmp_path / "run.jsonl"
    golden.write_text("".join(json.dumps(r) + "\n" for r in GOLDEN))
    run.write_text("".join(json.dumps(r) + "\n" for r in RUN))
    return golden, run


def ragmeter(*args, cwd=None):
    env = {"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "ragmeter", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=cwd)


def eval_args(server, inputs, out, *extra):
    golden, run = inputs
    return ["eval", "--golden", golden, "--run", run, "--base-url", server.base_url, "--model", "gpt-4o-mini",
            "--metrics", "faithfulness", "--no-cache", "--out", out, *extra]


# -- a name compare and gate rules already read as something else ------------------------------------------
@pytest.mark.parametrize("name", ["hit", "mrr", "correct", "refusal", "regressions", "wins", "tone_wins"])
def test_a_custom_metric_named_like_a_compare_measure_is_refused(name):
    # before, RubricMetric("hit") was judged and written (hit_score, hit_status), but compare showed the
    # retrieval Hit@k under that name and a gate rule "hit>=-2pp" limited Hit@k, never the custom metric
    with pytest.raises(InputError, match=rf"metric '{name}': .*(built-in|gate rules)"):
        JudgeConfig(base_url="http://127.0.0.1:9/v1", model="m",
                    metrics=[RubricMetric(name, criteria="Is it polite?", scale=(1, 5))])


@pytest.mark.parametrize("name", ["hit", "refusal", "hit_regressions"])
def test_a_metric_file_naming_a_compare_measure_exits_2_naming_file_and_metric(server, inputs, tmp_path, name):
    toml = tmp_path / "metrics.toml"
    toml.write_text(f'[metrics.{name}]\ncriteria = "Is it polite?"\nscale = [1, 5]\n')
    proc = ragmeter(*eval_args(server, inputs, tmp_path / "out", "--metric-file", toml))
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ragmeter: error:")]
    assert len(errors) == 1 and f"metrics.toml: metric '{name}':" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr and server.requests == 0
    assert not (tmp_path / "out").exists()


def test_a_metric_module_naming_a_compare_measure_exits_2_naming_file_and_metric(server, inputs, tmp_path):
    module = tmp_path / "my_metrics.py"
    module.write_text("from ragmeter.judge import RubricMetric\n"
                      "correct = RubricMetric('correct', criteria='Is it right?', scale=(1, 5))\n")
    proc = ragmeter(*eval_args(server, inputs, tmp_path / "out", "--metric-module", module))
    assert proc.returncode == 2, proc.stderr
    assert "my_metrics.py: metric 'correct':" in proc.stderr and "Traceback" not in proc.stderr
    assert server.requests == 0


# -- the pass rate of a rubric with a pass_threshold, in the reports as on the terminal ---------------------
TONE = ('[metrics.tone_check]\ncriteria = "Is the answer polite?"\nscale = [1, 5]\npass_threshold = 4\n'
        'fields = ["question", "answer"]\n')


def test_the_pass_rate_of_a_custom_metric_is_in_report_md_and_html_as_on_the_terminal(server, inputs, tmp_path):
    # before, the terminal said "pass 50.0% (2 of 4 at >= 4; ...)" and summary.json held pass_rate, but
    # report.md and report.html showed the mean alone: a reader of the PR comment never saw the pass rate
    toml = tmp_path / "metrics.toml"
    toml.write_text(TONE)
    out = tmp_path / "out"
    proc = ragmeter(*eval_args(server, inputs, out, "--metric-file", toml))
    assert proc.returncode == 0, proc.stderr
    said = "pass 50.0% (2 of 4 at >= 4; a failed row did not pass)"
    assert said in proc.stdout
    assert f"Tone check: {said}" in shown_md(out / "report.md")
    assert f"Tone check: {said}" in html.unescape((out / "report.html").read_text())
    # the report command, rebuilding them from the folder, says the same
    (out / "report.md").unlink()
    assert ragmeter("report", out).returncode == 0
    assert f"Tone check: {said}" in shown_md(out / "report.md")


def shown_md(path):
    """report.md's text as a Markdown viewer shows it (escapes undone)."""
    return html.unescape(path.read_text().replace("\\_", "_"))


def test_a_pass_rate_with_no_row_scored_says_n_a_on_the_terminal_as_correct_rate_does():
    from ragmeter.cli.judge import judge_lines

    entry = {"n_total": 4, "n_scored": 0, "n_failed": 4, "n_skipped": 0, "mean": None, "scale": "0-1",
             "failures": {}, "skips": {}, "pass_threshold": 1, "n_pass": 0, "pass_rate_denominator": 4,
             "pass_rate": None}
    assert "    pass n/a (no row scored, 4 failed)" in judge_lines({"metrics": {"says_blue": entry}})


# -- compare: a custom metric defined otherwise in the two runs ---------------------------------------------
def test_compare_refuses_a_custom_metric_whose_rubric_changed_between_the_runs(server, inputs, tmp_path):
    # before, the baseline's tone_check (one criterion) and the candidate's (another) were compared as one
    # metric and the gate passed or failed on the rubric edit, as a judge model change would, which is refused
    base_toml, cand_toml = tmp_path / "base.toml", tmp_path / "cand.toml"
    base_toml.write_text(TONE)
    cand_toml.write_text(TONE.replace("Is the answer polite?", "Is the answer short?"))
    for toml, out in ((base_toml, tmp_path / "base"), (base_toml, tmp_path / "same"), (cand_toml, tmp_path / "cand")):
        assert ragmeter(*eval_args(server, inputs, out, "--metric-file", toml)).returncode == 0
    proc = ragmeter("compare", tmp_path / "base", tmp_path / "cand", "--gate", "tone_check>=-5pp")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "tone_check" in proc.stderr and "definition differs" in proc.stderr and "Traceback" not in proc.stderr
    forced = ragmeter("compare", tmp_path / "base", tmp_path / "cand", "--gate", "tone_check>=-5pp", "--force")
    assert forced.returncode in (0, 1) and "definition differs" in forced.stderr, forced.stderr
    # the same rubric evaluated twice compares as before
    same = ragmeter("compare", tmp_path / "base", tmp_path / "same", "--gate", "tone_check>=-5pp")
    assert same.returncode == 0 and "ok: tone_check>=-5pp" in same.stdout, same.stderr


# -- a gate value written on the rubric's own scale ----------------------------------------------------------
def test_a_gate_value_on_the_rubric_scale_suggests_the_0_1_value_it_means(server, inputs, tmp_path):
    # before: "'tone_check>=4' can never pass: ... did you mean tone_check>=4%?": 4% is 0.04, a gate that passes
    # nearly always, where a 4 on the rubric's 1-5 scale is 0.75 on the 0-1 scale the score is mapped onto
    toml = tmp_path / "metrics.toml"
    toml.write_text(TONE)
    out = tmp_path / "out"
    assert ragmeter(*eval_args(server, inputs, out, "--metric-file", toml)).returncode == 0
    proc = ragmeter("compare", out, out, "--gate", "tone_check>=4")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "did you mean tone_check>=0.75?" in proc.stderr and "4 on the rubric's 1-5 scale" in proc.stderr, proc.stderr
    assert "tone_check>=4%" not in proc.stderr

    from ragmeter.api import EvalResult
    from ragmeter.gate import GateError
    from ragmeter.report.data import METRICS
    from ragmeter.testing import assert_no_regression, assert_scores

    # in memory too, with the metric known from the results alone (as in a fresh process)
    METRICS.pop("tone_check", None)
    with pytest.raises(GateError, match=r"did you mean tone_check>=0\.75\?"):
        assert_no_regression(EvalResult.load(out), EvalResult.load(out), gate="tone_check>=4")
    METRICS.pop("tone_check", None)
    with pytest.raises(InputError, match=r"did you mean >=0\.75\? \(4 on the rubric's 1-5 scale"):
        assert_scores(EvalResult.load(out), {"tone_check": ">=4"})


# -- the cache: an edited rubric is asked again; a new pass threshold re-reads the cached verdicts ------------
def test_an_edited_rubric_scale_steps_or_descriptions_is_not_replayed_from_the_cache(server, tmp_path):
    from ragmeter.judge import run_sync

    cases = [{"id": f"c{i}", "question": f"What colour is item {i}?", "answer": f"Item {i} is blue."}
             for i in range(3)]
    base = dict(name="tone_check", criteria="Is the answer polite?", scale=(1, 5), pass_threshold=4)

    def judged(**edit):
        cfg = JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", cache=tmp_path / "cache.sqlite",
                          metrics=[RubricMetric(**{**base, **edit})])
        return run_sync(cases, cfg)

    first = judged()
    assert first.summary["cached_calls"] == 0 and judged().summary["cached_calls"] == 3
    for edit in ({"scale": (1, 10)}, {"steps": ("Read the answer",)}, {"score_descriptions": {5: "polite"}},
                 {"fields": ("answer",)}, {"version": "v2"}):
        again = judged(**edit)
        assert again.summary["cached_calls"] == 0, edit
        assert again.rows[0]["prompt_version"] != first.rows[0]["prompt_version"], edit
    # the threshold is not in the prompt: the cached verdicts (4 of 5) are re-read against the new one
    stricter = judged(pass_threshold=5)
    assert stricter.summary["cached_calls"] == 3
    assert [r["correct"] for r in first.rows] == [True] * 3 and [r["correct"] for r in stricter.rows] == [False] * 3


# -- columns and dtypes: the same whether a custom metric's rows are scored, failed or skipped ---------------
def test_custom_metric_columns_keep_their_dtypes_when_every_row_failed_or_was_skipped(server, inputs, tmp_path):
    import polars as pl

    golden, run = inputs
    without_policy = tmp_path / "golden-policy.jsonl"
    without_policy.write_text("".join(json.dumps({**r, "policy": ""}) + "\n" for r in GOLDEN))
    module = tmp_path / "yes_no.py"
    module.write_text("from ragmeter.judge import metric\n"
                      "@metric(prompt='Does the field \"answer\" say blue? Schema: {\"blue\": <true or false>}',\n"
                      "        schema={'blue': bool}, fields=('answer',), pass_threshold=1)\n"
                      "def says_blue(reply, case):\n    return 1.0 if reply['blue'] else 0.0\n")
    toml = tmp_path / "metrics.toml"
    toml.write_text(TONE + '[metrics.policy_check]\ncriteria = "Does it follow the policy?"\nscale = [1, 5]\n'
                    'fields = ["answer", "policy"]\n')
    server.replies["custom-says-blue"] = lambda payload: {"reason": "no blue field"}  # unusable: every row fails
    out = tmp_path / "out"
    proc = ragmeter(*eval_args(server, (without_policy, run), out, "--metric-file", toml, "--metric-module", module))
    assert proc.returncode == 3, proc.stderr  # the failed rows are counted against --max-failed 0
    cases = pl.read_parquet(out / "cases.parquet")
    for name, status in (("tone_check", "ok"), ("policy_check", "skipped"), ("says_blue", "failed")):
        assert cases.schema[f"{name}_score"] == pl.Float64 and cases.schema[f"{name}_status"] == pl.String, name
        assert cases[f"{name}_status"].unique().to_list() == [status], name
    summary = json.loads((out / "summary.json").read_text())["judge"]["metrics"]
    assert (summary["says_blue"]["n_failed"], summary["says_blue"]["n_total"]) == (4, 4)
    assert (summary["policy_check"]["n_skipped"], summary["policy_check"]["n_total"]) == (4, 4)
    builtin_only = tmp_path / "builtin"
    assert ragmeter(*eval_args(server, inputs, builtin_only)).returncode == 0
    assert pl.read_parquet_schema(out / "judge.parquet") == pl.read_parquet_schema(builtin_only / "judge.parquet")


# -- an unusable rubric score: the repair turn and the error name the scale, as correctness's do -------------
@pytest.mark.parametrize("score", [None, True, "four", 4.5])
def test_a_rubric_score_of_the_wrong_type_is_repaired_and_failed_naming_the_scale(server, tmp_path, score):
    from ragmeter.judge import run_sync

    server.replies["custom-tone-check"] = lambda payload: {"score": score, "reason": "scripted"}
    cfg = JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", cache=None,
                      metrics=[RubricMetric("tone_check", criteria="Is the answer polite?", scale=(1, 5))])
    row = run_sync([{"id": "c1", "question": "q?", "answer": "a."}], cfg).rows[0]
    # before: '"score" must be int, got None': the judge, asked to repair, was not told the scale
    assert row["status"] == "failed" and row["error_kind"] == "unparsable" and row["calls"] == 2
    assert '"score" must be an integer 1-5' in row["error"], row["error"]


# -- a metric module importing a module beside it -----------------------------------------------------------
def test_a_metric_module_imports_a_module_beside_it_as_python_would(server, inputs, tmp_path):
    # before: "my_metrics.py: importing the metric module raised ModuleNotFoundError: No module named
    # 'team_prompts'", where `python my_metrics.py` finds it (the script's folder is on sys.path)
    folder = tmp_path / "metrics"
    folder.mkdir()
    (folder / "team_prompts.py").write_text("POLITE = 'Is the answer polite?'\n")
    (folder / "my_metrics.py").write_text("from team_prompts import POLITE\nfrom ragmeter.judge import RubricMetric\n"
                                         "tone_check = RubricMetric('tone_check', criteria=POLITE, scale=(1, 5))\n")
    out = tmp_path / "out"
    proc = ragmeter(*eval_args(server, inputs, out, "--metric-module", folder / "my_metrics.py"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "tone_check" in json.loads((out / "summary.json").read_text())["judge"]["metrics"]


def test_loading_a_metric_module_leaves_sys_path_as_it_was(tmp_path):
    from ragmeter.judge.custom import load_metric_module

    (tmp_path / "m.py").write_text("from ragmeter.judge import RubricMetric\n"
                                  "polite = RubricMetric('polite', criteria='Is it polite?', scale=(1, 5))\n")
    before = list(sys.path)
    assert [m.name for m in load_metric_module(tmp_path / "m.py")] == ["polite"]
    assert sys.path == before


# -- a pass threshold every case meets ----------------------------------------------------------------------
@pytest.mark.parametrize("make", ["rubric", "decorated"])
def test_a_pass_threshold_at_the_bottom_of_the_scale_is_refused_naming_it(make):
    # before: accepted, and pass_rate was 100% whatever the judge said (a rule that can never fail, which
    # compare --gate and assert_scores refuse)
    from ragmeter.judge import metric

    with pytest.raises(InputError, match=r"metric 'polite': pass_threshold .* the bottom of the scale"):
        if make == "rubric":
            RubricMetric("polite", criteria="Is it polite?", scale=(1, 5), pass_threshold=1)
        else:
            metric("polite", prompt='Is "answer" polite? Schema: {"polite": <true or false>}', schema={"polite": bool},
                   fields=("answer",), pass_threshold=0)(lambda reply, case: float(reply["polite"]))


def test_a_metric_file_with_a_pass_threshold_every_case_meets_exits_2(server, inputs, tmp_path):
    toml = tmp_path / "metrics.toml"
    toml.write_text(TONE.replace("pass_threshold = 4", "pass_threshold = 1"))
    proc = ragmeter(*eval_args(server, inputs, tmp_path / "out", "--metric-file", toml))
    assert proc.returncode == 2 and "metrics.toml: metric 'tone_check': pass_threshold 1" in proc.stderr, proc.stderr
    assert server.requests == 0
