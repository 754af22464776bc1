"""ragmeter eval --repeat N against the local fake judge server: spread, flips, cache bypass."""
from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from dataclasses import replace
import polars as pl
import pytest
from evalcli import EXAMPLES as EX
from evalcli import eval_cli

from ragmeter.evaluation import run_eval
from ragmeter.judge import JudgeConfig
from ragmeter.repeats import repeat_summary


def _flips(question: str) -> bool:
    """About a quarter of the questions get an unstable judge (deterministic)."""
    return hashlib.sha256(question.encode("utf-8")).digest()[0] % 4 == 0


def _script_flipping_judge(server) -> Counter:
    """Correctness replies: flipping questions get the opposite verdict on every 2nd request (1st, 3rd: the
    default verdict; 2nd, 4th: the opposite). Other metrics answer as usual."""
    from fakeserver import default_reply

    seen: Counter = Counter()
    lock = threading.Lock()

    def correctness(payload):
        reply = default_reply("correctness", payload)
        q = payload.get("question") or ""
        with lock:
            k = seen[q]
            seen[q] += 1
        if _flips(q) and k % 2 == 1:
            ok = not reply["correct"]
            reply = {"reason": "flipped", "score": 5 if ok else 2, "correct": ok}
        return reply

    server.replies["correctness"] = correctness
    return seen


def _cfg(server, tmp_path, fast_retry) -> JudgeConfig:
    return JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness", "faithfulness"],
                       cache=tmp_path / "cache.sqlite", retry=fast_retry, timeout=5.0, concurrency=4)


def test_repeat_reports_spread_and_flips_and_bypasses_the_cache(server, tmp_path, fast_retry):
    seen = _script_flipping_judge(server)
    out = tmp_path / "ev"
    summary = run_eval(EX / "golden.jsonl", EX / "run.jsonl", out, judge=_cfg(server, tmp_path, fast_retry),
                       repeat=3, reports=True)
    judge = pl.read_parquet(out / "judge.parquet")
    cases = pl.read_parquet(out / "cases.parquet")
    n = cases.height
    assert judge.height == 3 * n * 2 and sorted(judge["repeat"].unique().to_list()) == [1, 2, 3]
    assert judge.group_by("repeat", "metric").len()["len"].to_list() == [n] * 6

    corr = judge.filter(pl.col("metric") == "correctness")
    ok_ids = (corr.filter(pl.col("status") == "ok").group_by("id").len().filter(pl.col("len") >= 2)["id"].to_list())
    questions = dict(zip(cases["id"].to_list(), cases["question"].to_list()))
    expected_flips = sorted(i for i in ok_ids if _flips(questions[i] or ""))
    assert 0 < len(expected_flips) < len(ok_ids)
    # every question's correctness was asked once per repeat (3 requests, none from the cache)
    asked = [seen[questions[i]] for i in ok_ids]
    assert set(asked) == {3}

    rep = summary["repeats"]
    assert rep["n"] == 3 and json.loads((out / "summary.json").read_text())["repeats"] == rep
    assert summary["settings"]["repeat"] == 3
    c = rep["metrics"]["correct"]
    assert (c["n_compared"], c["n_flipped"]) == (len(ok_ids), len(expected_flips))
    assert c["flip_rate"] == pytest.approx(len(expected_flips) / len(ok_ids), abs=1e-6)
    flipped = sorted(corr.filter((pl.col("status") == "ok")).group_by("id").agg(pl.col("correct").n_unique())
                     .filter(pl.col("correct") > 1)["id"].to_list())
    assert flipped == expected_flips
    # per-repeat means from the rows; repeats 1 and 3 agree, repeat 2 differs; spread from those
    per = []
    for r in (1, 2, 3):
        rows = corr.filter((pl.col("repeat") == r) & (pl.col("status") == "ok") & pl.col("correct").is_not_null())
        per.append(round(rows["correct"].cast(pl.Float64).mean(), 6))
    assert c["per_repeat"] == per and per[0] == per[2] != per[1]
    assert c["min"] == min(per) and c["max"] == max(per) and c["std"] > 0
    assert c["mean"] == pytest.approx(sum(per) / 3, abs=1e-6)
    score = rep["metrics"]["correctness"]
    assert score["n_flipped"] == len(expected_flips)  # the score flips with the verdict (5 <-> 2)
    faith = rep["metrics"]["faithfulness"]
    assert faith["n_flipped"] == 0 and faith["std"] == 0.0 and faith["n_compared"] > 0

    # cases.parquet and the diagnosis use repeat 1
    first = corr.filter(pl.col("repeat") == 1).select("id", pl.col("correct").alias("c1"))
    joined = cases.select("id", "correct").join(first, on="id")
    assert joined.filter(pl.col("correct").ne_missing(pl.col("c1"))).height == 0

    runs = rep["runs"]
    assert [r["repeat"] for r in runs] == [1, 2, 3]
    assert all(r["cached_calls"] == 0 for r in runs) and all(r["calls"] > 0 for r in runs)

    md = (out / "report.md").read_text()
    assert "Repeat runs (3 judgements per case)" in md and "correct" in md
    assert f"{len(expected_flips)}/{len(ok_ids)}" in md
    html = (out / "report.html").read_text()
    assert 'id="repeats"' in html

    # a rerun: repeat 1 comes from the cache, repeats 2..N are asked again (bypass) and not cached
    before = server.requests
    summary2 = run_eval(EX / "golden.jsonl", EX / "run.jsonl", tmp_path / "ev2",
                        judge=_cfg(server, tmp_path, fast_retry), repeat=3, reports=False)
    runs2 = summary2["repeats"]["runs"]
    assert runs2[0]["cached_calls"] > 0 and runs2[0]["calls"] == runs2[0]["requests"] == 0
    assert runs2[1]["cached_calls"] == 0 and runs2[2]["cached_calls"] == 0
    assert server.requests - before == runs2[1]["requests"] + runs2[2]["requests"] > 0
    # repeat 1 replays the cached first judgement: same verdicts as the first run's repeat 1
    j2 = pl.read_parquet(tmp_path / "ev2" / "judge.parquet")
    a = corr.filter(pl.col("repeat") == 1).select("id", "correct").sort("id")
    b = j2.filter((pl.col("repeat") == 1) & (pl.col("metric") == "correctness")).select("id", "correct").sort("id")
    assert a.equals(b)


def test_repeat_one_keeps_the_plain_layout(server, tmp_path, fast_retry):
    out = tmp_path / "ev"
    summary = run_eval(EX / "golden.jsonl", EX / "run.jsonl", out, judge=_cfg(server, tmp_path, fast_retry),
                       reports=False)
    assert "repeats" not in summary and summary["settings"]["repeat"] == 1
    judge = pl.read_parquet(out / "judge.parquet")
    assert judge["repeat"].unique().to_list() == [1]


def test_repeat_summary_counts_only_scored_rows():
    f1 = pl.DataFrame({"id": ["a", "b", "c"], "metric": ["correctness"] * 3, "status": ["ok", "ok", "failed"],
                       "score": [5.0, 2.0, None], "correct": [True, False, None]})
    f2 = pl.DataFrame({"id": ["a", "b", "c"], "metric": ["correctness"] * 3, "status": ["ok", "failed", "ok"],
                       "score": [2.0, None, 5.0], "correct": [False, None, True]})
    rep = repeat_summary([f1, f2])
    c = rep["metrics"]["correct"]
    assert c["per_repeat"] == [0.5, 0.5] and c["n_scored"] == [2, 2]
    assert (c["n_compared"], c["n_flipped"]) == (1, 1)  # only a is scored twice, and it flips
    assert c["std"] == 0.0 and c["min"] == c["max"] == 0.5
    assert rep["metrics"]["correctness"]["per_repeat"] == [3.5, 3.5]


def test_cli_repeat(server, tmp_path, api_key):
    out = tmp_path / "ev"
    proc = eval_cli("--metrics", "correctness", "--cache", str(tmp_path / "cache.sqlite"), "--repeat", "2",
                    "--out", str(out), server=server)
    assert proc.returncode == 0, proc.stderr
    assert "repeats: 2" in proc.stdout and "flipped cases" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["repeats"]["metrics"]["correct"]["n_flipped"] == 0  # the default fake judge is stable
    proc = eval_cli("--repeat", "0", "--out", str(tmp_path / "bad"))
    assert proc.returncode != 0 and "--repeat" in proc.stderr + proc.stdout


def test_dry_run_estimates_every_repeat_and_sends_nothing(server, tmp_path, fast_retry):
    from ragmeter.errors import InputError
    from ragmeter.evaluation import estimate_eval

    cfg = _cfg(server, tmp_path, fast_retry)
    run_eval(EX / "golden.jsonl", EX / "run.jsonl", tmp_path / "warm", judge=cfg, reports=False)  # fills the cache
    before = server.requests
    one = estimate_eval(EX / "golden.jsonl", EX / "run.jsonl", cfg)
    est = estimate_eval(EX / "golden.jsonl", EX / "run.jsonl", cfg, repeat=3)
    assert server.requests == before  # nothing sent
    first, further = est["per_repeat"]["first"], est["per_repeat"]["each_further"]
    assert first == {n: one[n] for n in first} and one["repeat"] == 1
    # repeat 1 replays the cached first steps; repeats 2..3 bypass the cache, so they send those too
    assert first["cached_calls"] > 0 and further["cached_calls"] == 0
    assert further["calls"] == first["calls"] + first["cached_calls"]
    assert est["calls"] == first["calls"] + 2 * further["calls"] and est["cached_calls"] == first["cached_calls"]
    assert est["prompt_tokens"] == first["prompt_tokens"] + 2 * further["prompt_tokens"]
    assert sum(m["calls"] for m in est["per_metric"].values()) == est["calls"]
    assert est["repeat"] == 3 and est["cost_usd"] is not None and est["cost_usd"] > one["cost_usd"]
    # run_eval does not take a dry run: it would write a results folder without judgements
    with pytest.raises(InputError, match="dry run"):
        run_eval(EX / "golden.jsonl", EX / "run.jsonl", tmp_path / "dry", judge=replace(cfg, dry_run=True))
    assert not (tmp_path / "dry").exists()


def test_cli_dry_run_with_repeat_writes_nothing(server, tmp_path, api_key):
    out = tmp_path / "ev"
    proc = eval_cli("--dry-run", "--out", str(out), "--price", "0.15,0.6", "--metrics", "correctness", "--repeat", "3",
                    server=server)
    assert proc.returncode == 0, proc.stderr
    assert "x 3 repeats:" in proc.stdout and "repeats 2..3 bypass the cache" in proc.stdout and "$" in proc.stdout
    assert server.requests == 0 and not out.exists()
    proc = eval_cli("--dry-run", "--out", str(out))  # no endpoint: nothing to estimate
    assert proc.returncode == 2 and "--base-url" in proc.stderr and "Traceback" not in proc.stderr
