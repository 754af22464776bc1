"""The runner end to end against the local server."""
from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from fakeserver import storm  # noqa: E402 (tests/judge is on sys.path: conftest.py)

from ragmeter.judge import Cache, JudgeConfig, cache_key, run, run_sync

REQUIRED = ["id", "metric", "status", "score", "correct", "reason", "error", "attempts", "prompt_tokens",
            "completion_tokens", "cost_usd", "latency_ms", "cached", "outcome", "claims", "verdicts", "questions",
            "ar_hard", "ar_ragas", "ar_soft", "cp_ap", "cp_precision"]


def cases(n=6):
    out = []
    for i in range(n):
        out.append({"id": f"c{i}", "question": f"What colour is item {i}?", "reference_answer": f"Item {i} is blue",
                    "answer": f"Item {i} is blue. It ships in {i} days.",
                    "contexts": ["noise", f"useful: item {i} is blue", "useful: more"], "category": "fact",
                    "cost": 0.001})
    return out


def cfg(server, tmp_path, fast_retry, **kw):
    base = dict(base_url=server.base_url, model="gpt-4o-mini", cache=tmp_path / "cache.sqlite", retry=fast_retry,
                timeout=0.5, concurrency=4)
    base.update(kw)
    return JudgeConfig(**base)


def test_all_rows_ok_and_columns(server, tmp_path, fast_retry):
    res = run_sync(cases(3), cfg(server, tmp_path, fast_retry))
    df = res.frame()
    assert df.height == 3 * 5 and set(REQUIRED) <= set(df.columns)
    assert df["status"].to_list() == ["ok"] * 15
    cp = df.filter(pl.col("metric") == "context_precision")
    assert cp["cp_ap"].to_list() == pytest.approx([(1 / 2 + 2 / 3) / 2] * 3)  # verdicts [0, 1, 1]
    assert cp["cp_precision"].to_list() == pytest.approx([2 / 3] * 3)
    corr = df.filter(pl.col("metric") == "correctness")
    assert corr["correct"].to_list() == [True] * 3 and corr["score"].to_list() == [5.0] * 3
    faith = df.filter(pl.col("metric") == "faithfulness")
    assert faith["score"].to_list() == [0.5] * 3  # "It ships in i days" is not in the contexts
    assert json.loads(faith["claims"][0]) == ["Item 0 is blue", "It ships in 0 days"]
    s = res.summary
    assert s["judge_cost_usd"] > 0 and s["system_cost_usd"] == pytest.approx(0.003)
    assert s["metrics"]["faithfulness"]["band"] == "<70%"
    assert s["metrics"]["correctness"]["latency_ms_p50"] is not None


def test_every_case_ends_ok_or_explicit_failure(server, tmp_path, fast_retry):
    # a storm of misbehaviour across 40 cases x 5 metrics
    storm(server)
    res = run_sync(cases(40), cfg(server, tmp_path, fast_retry, max_retry_tokens=4000, concurrency=16, timeout=0.3))
    df = res.frame()
    assert df.height == 200
    assert set(df["status"].unique()) <= {"ok", "failed"}
    failed = df.filter(pl.col("status") == "failed")
    assert failed.height >= 5  # item 7's 400s, at least
    assert failed["error"].null_count() == 0 and failed["error_kind"].null_count() == 0
    assert failed["score"].null_count() == failed.height  # never scored
    assert df.filter(pl.col("id") == "c7")["error_kind"].to_list() == ["client"] * 5
    assert (failed["attempts"] >= 1).all()
    # outputs still empty at the --max-retry-tokens cap fail explicitly, everything else recovered
    assert set(failed["error_kind"].unique()) <= {"client", "empty", "truncated", "unparsable"}
    assert df.filter(pl.col("status") == "ok")["attempts"].max() >= 3
    # a failed row is counted, never averaged as 0: mean = sum(scores) / scored rows
    for metric, m in res.summary["metrics"].items():
        sub = df.filter(pl.col("metric") == metric)
        ok = sub.filter((pl.col("status") == "ok") & pl.col("score").is_not_null())
        assert m["n_total"] == 40 and m["n_failed"] == sub.filter(pl.col("status") == "failed").height
        assert m["n_scored"] == ok.height
        assert sum(g["count"] for g in m["failures"].values()) == m["n_failed"]
        if m["mean"] is not None:
            assert m["mean"] == pytest.approx(ok["score"].sum() / ok.height, abs=1e-6)
    corr = res.summary["metrics"]["correctness"]
    assert corr["correct_rate_denominator"] == corr["n_scored"] + corr["n_failed"]
    assert corr["correct_rate"] == pytest.approx(corr["n_correct"] / corr["correct_rate_denominator"])


def test_unparsable_twice_fails_with_raw_output_kept(server, tmp_path, fast_retry):
    server.script = ["malformed", "malformed"]
    res = run_sync(cases(1), cfg(server, tmp_path, fast_retry, metrics=["correctness"]))
    row = res.rows[0]
    assert row["status"] == "failed" and row["error_kind"] == "unparsable"
    assert row["raw_output"].startswith("Sure!") and row["calls"] == 2
    assert server.log[1]["repair"]


def test_one_repair_fixes_bad_json(server, tmp_path, fast_retry):
    server.script = ["malformed"]
    res = run_sync(cases(1), cfg(server, tmp_path, fast_retry, metrics=["correctness"]))
    assert res.rows[0]["status"] == "ok" and res.rows[0]["score"] == 5.0 and res.rows[0]["calls"] == 2


def test_no_claims_is_its_own_outcome(server, tmp_path, fast_retry):
    server.replies["faithfulness-statements"] = lambda payload: {"statements": []}
    c = cases(1)
    c[0]["answer"] = "I don't know."
    res = run_sync(c, cfg(server, tmp_path, fast_retry, metrics=["faithfulness"]))
    row = res.rows[0]
    assert row["status"] == "ok" and row["outcome"] == "no_claims" and row["score"] is None
    m = res.summary["metrics"]["faithfulness"]
    assert m["mean"] is None and m["n_scored"] == 0 and m["outcomes"] == {"no_claims": 1}
    assert len(server.by_task("faithfulness-verdicts")) == 0


def test_answer_relevancy_with_embeddings_and_honest_no_answer(server, tmp_path, fast_retry):
    c = cases(2)
    c[1].update(category="no_answer", answer="The material does not say.")
    res = run_sync(c, cfg(server, tmp_path, fast_retry, metrics=["answer_relevancy"], embeddings_model="emb"))
    r0, r1 = res.rows
    assert r0["ar_similarity"] == "cosine" and 0 < r0["score"] <= 1 and r0["outcome"] == "scored"
    assert r1["outcome"] == "honest_no_answer" and r1["score"] == 1.0 and r1["ar_noncommittal"] == 1.0
    assert len(json.loads(r0["questions"])) == 3 and len(server.by_task("embeddings")) == 2
    # strict mode: the same non-committal answer scores 0 under ragas (all noncommittal)
    res2 = run_sync(c, cfg(server, tmp_path, fast_retry, metrics=["answer_relevancy"], embeddings_model="emb",
                           honest_no_answer=False))
    assert res2.rows[1]["score"] == 0.0 and res2.rows[1]["outcome"] == "scored"


def test_answer_relevancy_graded_without_embeddings(server, tmp_path, fast_retry):
    server.replies["answer-relevancy-questions"] = lambda p: {"questions": [
        {"question": "a", "noncommittal": False}, {"question": "b", "noncommittal": True},
        {"question": "c", "noncommittal": False}]}
    server.replies["answer-relevancy-graded"] = lambda p: {"grades": [
        {"index": 0, "grade": "same"}, {"index": 1, "grade": "partial"}, {"index": 2, "grade": "different"}]}
    res = run_sync(cases(1), cfg(server, tmp_path, fast_retry, metrics=["answer_relevancy"], relevancy_variant="soft"))
    r = res.rows[0]
    assert r["ar_similarity"] == "graded"
    assert r["ar_hard"] == 0.0 and r["ar_ragas"] == pytest.approx(0.5) and r["ar_soft"] == pytest.approx(0.5 * 2 / 3)
    assert r["score"] == r["ar_soft"] and r["ar_variant"] == "soft"


def test_skipped_when_input_missing(server, tmp_path, fast_retry):
    c = cases(1)
    c[0].update(answer=None, reference_answer=None)
    res = run_sync(c, cfg(server, tmp_path, fast_retry))
    assert {r["status"] for r in res.rows} == {"skipped"} and all(r["error"] for r in res.rows)
    assert server.requests == 0


def test_budget_stops_launching_and_marks_rest_skipped(server, tmp_path, fast_retry):
    res = run_sync(cases(20), cfg(server, tmp_path, fast_retry, metrics=["correctness"], concurrency=1,
                                  prices={"gpt-4o-mini": (100.0, 100.0)}, max_tokens=100, budget=0.1))
    statuses = [r["status"] for r in res.rows]
    assert "skipped" in statuses and "ok" in statuses and "failed" not in statuses
    skipped = [r for r in res.rows if r["status"] == "skipped"]
    assert all(r["error_kind"] == "budget" and "budget=" in r["error"] for r in skipped)
    assert server.requests == statuses.count("ok")
    assert res.summary["budget_reached"] and res.summary["judge_cost_usd"] <= 0.1
    assert res.summary["metrics"]["correctness"]["n_skipped_budget"] == len(skipped)


def test_budget_needs_a_price():
    from ragmeter.errors import InputError

    with pytest.raises(InputError, match="price"):
        run_sync(cases(1), base_url="http://127.0.0.1:9/v1", model="my-local-model", budget=1.0, cache=None)


def test_dry_run_sends_nothing_and_counts_cached(server, tmp_path, fast_retry):
    c = cfg(server, tmp_path, fast_retry)
    est = run_sync(cases(4), c, dry_run=True).estimate
    assert server.requests == 0
    assert est["calls"] == 4 * 7 and est["cached_calls"] == 0 and est["cost_usd"] > 0
    assert est["cost_usd_max"] >= est["cost_usd"]
    run_sync(cases(2), c)
    sent = server.requests
    est2 = run_sync(cases(4), c, dry_run=True).estimate
    # every call of the 2 judged cases, second steps included (their first steps' cached replies say what the
    # second steps send); the 2 others are still to send
    assert est2["cached_calls"] == sent == 2 * 7 and est2["calls"] == 2 * 7


def test_rerun_is_served_from_cache(server, tmp_path, fast_retry):
    c = cfg(server, tmp_path, fast_retry)
    first = run_sync(cases(5), c)
    n = server.requests
    second = run_sync(cases(5), c)
    assert server.requests == n
    assert all(r["cached"] and r["attempts"] == 0 and r["cost_usd"] == 0 for r in second.rows)
    assert [r["score"] for r in first.rows] == [r["score"] for r in second.rows]
    assert second.summary["requests"] == 0


def test_cache_key_changes_with_inputs_not_with_api_key(monkeypatch, server, tmp_path, fast_retry):
    c = cfg(server, tmp_path, fast_retry, metrics=["correctness"])
    run_sync(cases(1), c)
    monkeypatch.setenv("RAGMETER_API_KEY", "another-key")
    server.api_key = "another-key"
    run_sync(cases(1), c)
    assert server.requests == 1
    run_sync(cases(1), c, temperature=0.5)
    assert server.requests == 2
    k1 = cache_key(endpoint="http://u:pw@h/v1?x=1", model="m", params={}, prompt="p@v1", inputs=[1])
    k2 = cache_key(endpoint="http://h/v1?x=1", model="m", params={}, prompt="p@v1", inputs=[1])
    assert k1 == k2 and k1 != cache_key(endpoint="http://h/v1", model="m", params={}, prompt="p@v2", inputs=[1])


WRITER = """
import sys
from ragmeter.judge.cache import Cache
path, start, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with Cache(path) as cache:
    for i in range(start, start + n):
        cache.put(f"k{i}", {"content": str(i)})
"""


def test_cache_is_safe_under_concurrent_processes(tmp_path):
    path = tmp_path / "shared.sqlite"
    Cache(path).close()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(k * 200), "200"]) for k in range(4)]
    assert [p.wait(60) for p in procs] == [0, 0, 0, 0]
    with Cache(path) as cache:
        assert len(cache) == 800 and cache.get("k799") == {"content": "799"}
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_api_key_never_written_or_logged(server, tmp_path, fast_retry, api_key, caplog):
    # a misbehaving server echoing the key in an error body must not leak it either
    server.script = [{"status": 503, "body": json.dumps({"error": {"message": f"bad key {api_key}"}})},
                     {"status": 400, "body": json.dumps({"error": {"message": f"rejected {api_key}"}})}]
    caplog.set_level(logging.DEBUG)
    c = cfg(server, tmp_path, fast_retry)
    res = run_sync(cases(3), c)
    res.write(tmp_path / "out")
    assert any(r["status"] == "failed" and "***" in r["error"] for r in res.rows)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name.startswith("cache.sqlite") for p in files) and (tmp_path / "out" / "judge.parquet").exists()
    for p in files:
        assert api_key.encode() not in p.read_bytes(), p
    assert api_key not in caplog.text and "***" in caplog.text
    assert api_key not in repr(c) and api_key not in repr(res.summary)


def test_run_sync_inside_a_running_loop(server, tmp_path, fast_retry):
    async def notebook_cell():
        return run_sync(cases(1), cfg(server, tmp_path, fast_retry, metrics=["correctness"]))
    res = asyncio.run(notebook_cell())
    assert res.rows[0]["status"] == "ok"


def test_async_run(server, tmp_path, fast_retry):
    res = asyncio.run(run(cases(2), cfg(server, tmp_path, fast_retry, metrics=["context_recall"])))
    assert [r["score"] for r in res.rows] == [1.0, 1.0]


def test_write_outputs(server, tmp_path, fast_retry):
    res = run_sync(cases(2), cfg(server, tmp_path, fast_retry))
    out = res.write(tmp_path / "o")
    df = pl.read_parquet(out / "judge.parquet")
    assert df.height == 10 and set(REQUIRED) <= set(df.columns)
    summary = json.loads((out / "judge_summary.json").read_text())
    for m in summary["metrics"].values():
        assert {"n_scored", "n_total", "mean", "cost_usd", "latency_ms_p50", "latency_ms_p95"} <= set(m)


def test_progress_bar_runs_on_a_terminal_within_80_columns(server, tmp_path, fast_retry, capsys, monkeypatch):
    server.script = [503]
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    res = run_sync(cases(2), cfg(server, tmp_path, fast_retry, metrics=["correctness"], progress=True))
    assert [r["status"] for r in res.rows] == ["ok", "ok"]
    err = capsys.readouterr().err
    assert "retry 1" in err and "$" in err and "tok" in err
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", err)
    assert max(len(line.rstrip()) for line in re.split(r"[\r\n]", shown)) <= 80


def test_no_progress_bar_when_stderr_is_not_a_terminal(server, tmp_path, fast_retry, capsys, monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    run_sync(cases(1), cfg(server, tmp_path, fast_retry, metrics=["correctness"], progress=True))
    assert capsys.readouterr().err == ""
