"""``ragmeter judge`` and ``ragmeter eval`` against llama.cpp's server (see conftest.py and ggufmodels.py).

The scripted model gives every built-in metric a known value through the real server, the embedding model
answer_relevancy's cosine (computed here from its weights); the trigger words and the random-weight model
drive the failure paths: truncation and budget doubling, the repair turn,
unusable output recorded as failed, the context window, a server killed mid-run.
"""
from __future__ import annotations

import asyncio
import json
import time

import numpy as np
import polars as pl
import pytest

from llamaserver import ragmeter, write_cases
from ggufmodels import EXPECTED, LOOP_TEXT, REPLIES
from ragmeter.judge import JudgeCallError

#: fast back-off: the failures here are scripted, not transient
QUICK = ["--no-progress", "--retry-base-delay", "0.05", "--retry-max-delay", "0.2", "--timeout", "60"]
CONTEXTS = ["Paris is the capital of France.", "The Seine flows through Paris."]


def case(i: int, question: str = "What is the capital of France?") -> dict:
    return {"id": f"c{i}", "question": question, "reference_answer": "Paris.", "answer": "Paris is the capital.",
            "contexts": CONTEXTS}


def judge(server, cases_path, out, *extra: str, timeout: float = 240.0):
    res = ragmeter("judge", "--cases", str(cases_path), "--base-url", server.base_url, "--model", "judge",
                   "--out", str(out), *QUICK, *extra, timeout=timeout)
    summary_path = out / "judge_summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else None
    return res, summary


def rows(out) -> list:
    return pl.read_parquet(out / "judge.parquet").to_dicts()


def attempts(row: dict) -> list:
    return json.loads(row["attempt_log"] or "[]")


def test_every_metric_gets_its_known_score_and_a_cached_replay_sends_nothing(servers, tmp_path):
    server = servers("scripted")
    cases = write_cases(tmp_path / "cases.jsonl", [case(i) for i in range(3)])
    cache = str(tmp_path / "cache.sqlite")
    res, s = judge(server, cases, tmp_path / "out", "--cache", cache, "--max-tokens", "256")
    assert res.returncode == 0, res.stderr
    want = {"correctness": EXPECTED["correctness"], "faithfulness": EXPECTED["faithfulness"],
            "answer_relevancy": EXPECTED["answer_relevancy_graded"],
            "context_precision": EXPECTED["context_precision"], "context_recall": EXPECTED["context_recall"]}
    for metric, value in want.items():
        m = s["metrics"][metric]
        assert (m["n_scored"], m["n_total"], m["n_failed"]) == (3, 3, 0), (metric, m)
        assert m["mean"] == pytest.approx(value), metric
    # token counts are the server's (usage), and every reply ended on its own (finish_reason stop)
    for row in rows(tmp_path / "out"):
        log = attempts(row)
        assert log and all(a["finish_reason"] == "stop" and a["prompt_tokens"] > 100 for a in log), row["metric"]
    posts = server.posts()

    res2, s2 = judge(server, cases, tmp_path / "again", "--cache", cache, "--max-tokens", "256")
    assert res2.returncode == 0, res2.stderr
    assert server.posts() == posts and s2["requests"] == 0
    assert {k: m["mean"] for k, m in s2["metrics"].items()} == {k: m["mean"] for k, m in s["metrics"].items()}


def embed(server, *requests, max_attempts: int = 2):
    """Each list of texts in ``requests`` embedded in turn by one client: (vectors, attempts) per request."""
    from ragmeter.judge import ClientConfig, JudgeClient, RetryPolicy

    async def go():
        cfg = ClientConfig(base_url=server.base_url, model="judge", embeddings_model="embed", timeout=60,
                           policy=RetryPolicy(max_attempts=max_attempts, base_delay=0.01, max_delay=0.05))
        async with JudgeClient(cfg) as client:
            return [(res.vectors, res.attempts) for res in [await client.embed(texts) for texts in requests]]
    return asyncio.run(go())


@pytest.fixture(scope="session")
def pooled(models):
    """text -> the mean-pooled vector the embedding model gives it, from the weights in its GGUF."""
    import llama_cpp
    from ggufmodels import mean_pooled

    vocab = llama_cpp.Llama(str(models["embedder"]), vocab_only=True, verbose=False)  # the server's tokeniser
    return lambda text: mean_pooled(models["embedder"], vocab.tokenize(text.encode("utf-8")))


def cosine(a, b) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_per_token_embeddings_fail_with_one_clear_line(servers):
    server = servers("embed_tokens")
    before = server.posts()
    with pytest.raises(JudgeCallError) as ei:
        embed(server, ["What is the capital of France?"])
    assert ei.value.kind == "bad_embeddings"
    assert "the embeddings endpoint must return one vector per input" in str(ei.value)
    assert server.posts() == before + 1  # not retried: the same server answers the same way


def test_mean_pooled_vectors_and_a_rejected_batch_sent_one_input_at_a_time(servers, pooled):
    # llama-cpp-python 0.3.16 puts the inputs of one request in one batch of a one-sequence context
    # (n_seq_max 1, not settable there): 500 "llama_decode returned -1". The client resends them one by one
    # and keeps doing so for the rest of the run
    server = servers("embed")
    before = server.statuses("embeddings")
    first, second = ["What is the capital of France?", "q?"], ["Which river flows through Paris?", "Seine?"]
    (v1, log1), (v2, log2) = embed(server, first, second)
    for texts, vectors in ((first, v1), (second, v2)):
        assert len(vectors) == len(texts)
        for text, vector in zip(texts, vectors):
            assert np.asarray(vector) == pytest.approx(pooled(text), abs=1e-5), text
    assert [(a["status"], a["outcome"]) for a in log1] == [(500, "batch_rejected"), (200, "ok"), (200, "ok")]
    assert [(a["status"], a["outcome"]) for a in log2] == [(200, "ok"), (200, "ok")]  # remembered
    # with no retries allowed, the batch's 500 is its last attempt: split all the same
    [(v3, log3)] = embed(server, first, max_attempts=1)
    assert [(a["status"], a["outcome"]) for a in log3] == [(500, "batch_rejected"), (200, "ok"), (200, "ok")]
    assert np.asarray(v3) == pytest.approx(np.asarray(v1), abs=1e-6)
    after = server.statuses("embeddings")
    assert (after[500] - before[500], after[200] - before[200]) == (2, 6)


def test_answer_relevancy_gets_the_cosine_of_the_pooled_vectors(servers, pooled, tmp_path):
    chat, emb = servers("scripted"), servers("embed")
    cases = write_cases(tmp_path / "cases.jsonl", [case(i) for i in range(3)])
    before = emb.statuses("embeddings")
    question = case(0)["question"]
    generated = REPLIES["answer-relevancy-questions"]["questions"][0]["question"]
    want = cosine(pooled(question), pooled(generated))  # one committal question: every variant is the cosine
    res, s = judge(chat, cases, tmp_path / "out", "--no-cache", "--metrics", "answer_relevancy",
                   "--embeddings-model", "embed", "--embeddings-base-url", emb.base_url)
    assert res.returncode == 0, res.stderr
    m = s["metrics"]["answer_relevancy"]
    assert (m["n_scored"], m["n_total"], m["n_failed"]) == (3, 3, 0)
    assert m["mean"] == pytest.approx(want, abs=1e-5)
    out = rows(tmp_path / "out")
    assert [r["score"] for r in out] == pytest.approx([want] * 3, abs=1e-5)
    # each row's embeddings: its own one-input requests, after at most one rejected batch (rows run
    # concurrently, so more than one row may send a batch before the first is answered)
    embeds = [[a for a in attempts(r) if a["prompt"] == "embeddings"] for r in out]
    rejected = sum(a["outcome"] == "batch_rejected" for log in embeds for a in log)
    assert 1 <= rejected <= 3
    for log in embeds:
        assert [a["status"] for a in log if a["outcome"] != "batch_rejected"] == [200, 200]
    after = emb.statuses("embeddings")
    assert (after[500] - before[500], after[200] - before[200]) == (rejected, 6)


def test_truncation_doubles_the_budget_then_fails_and_a_bad_reply_gets_one_repair(servers, tmp_path):
    server = servers("scripted")
    cases = write_cases(tmp_path / "cases.jsonl", [case(0), case(1, "@@LOOP@@ capital?"),
                                                   case(2, "@@SCHEMA@@ capital?")])
    res, s = judge(server, cases, tmp_path / "out", "--no-cache", "--metrics", "correctness",
                   "--max-tokens", "16", "--max-retry-tokens", "64")
    assert res.returncode == 3, res.stderr  # results written, two rows failed, --max-failed 0
    m = s["metrics"]["correctness"]
    assert (m["n_scored"], m["n_failed"], m["n_total"]) == (1, 2, 3)
    by_id = {r["id"]: r for r in rows(tmp_path / "out")}
    assert by_id["c0"]["status"] == "ok" and by_id["c0"]["score"] == REPLIES["correctness"]["score"]

    loop = by_id["c1"]
    assert loop["status"] == "failed" and loop["error_kind"] == "truncated"
    assert [a["max_tokens"] for a in attempts(loop)] == [16, 32, 64]
    assert all(a["finish_reason"] == "length" and a["completion_tokens"] == a["max_tokens"] for a in attempts(loop))
    assert LOOP_TEXT in (loop["raw_output"] or "")

    bad = by_id["c2"]
    assert bad["status"] == "failed" and bad["calls"] == 2  # the call and its one repair turn
    assert [a["prompt"] for a in attempts(bad)] == ["correctness@v1", "correctness@v1+repair"]
    assert '"verdict": "maybe"' in bad["raw_output"] and "repair" in bad["error"]


def test_prose_without_json_mode_is_recorded_as_failed(servers, tmp_path):
    server = servers("scripted")
    cases = write_cases(tmp_path / "cases.jsonl", [case(0, "@@PROSE@@ capital?"), case(1)])
    res, s = judge(server, cases, tmp_path / "out", "--no-cache", "--metrics", "correctness", "--json-mode", "off")
    assert res.returncode == 3, res.stderr
    by_id = {r["id"]: r for r in rows(tmp_path / "out")}
    assert by_id["c0"]["status"] == "failed" and by_id["c0"]["raw_output"] == "I would say it is fine."
    assert by_id["c1"]["status"] == "ok"


def test_context_size_stops_the_doubling(servers, tmp_path):
    server = servers("scripted")
    cases = write_cases(tmp_path / "cases.jsonl", [case(0, "@@LOOP@@ capital?")])
    judge(server, cases, tmp_path / "probe", "--no-cache", "--metrics", "correctness", "--max-tokens", "16",
          "--max-retry-tokens", "16")
    prompt_tokens = attempts(rows(tmp_path / "probe")[0])[0]["prompt_tokens"]
    res, s = judge(server, cases, tmp_path / "out", "--no-cache", "--metrics", "correctness", "--max-tokens", "16",
                   "--max-retry-tokens", "512", "--context-size", str(prompt_tokens + 40))
    assert res.returncode == 3, res.stderr
    row = rows(tmp_path / "out")[0]
    assert [a["max_tokens"] for a in attempts(row)] == [16, 32, 40]
    assert "context window" in row["error"]


def test_random_weights_every_row_accounted_for(servers, tmp_path):
    server = servers("random")
    cases = write_cases(tmp_path / "cases.jsonl", [case(i) for i in range(4)])
    res, s = judge(server, cases, tmp_path / "out", "--no-cache", "--max-tokens", "24", "--max-retry-tokens", "48",
                   "--max-failed", "100%")
    assert res.returncode == 0, res.stderr
    out = rows(tmp_path / "out")
    assert len(out) == 4 * 5 and {r["status"] for r in out} <= {"ok", "failed", "skipped"}
    for metric, m in s["metrics"].items():
        assert m["n_scored"] + m["n_failed"] + m["n_skipped"] == m["n_total"] == 4, metric
    for r in out:
        if r["status"] == "ok":
            assert r["score"] is not None
        else:
            assert r["score"] is None and r["error_kind"] and r["error"]
        assert all(a["max_tokens"] <= 48 for a in attempts(r) if "max_tokens" in a)


def test_eval_against_the_real_server(servers, tmp_path):
    server = servers("scripted")
    golden = write_cases(tmp_path / "golden.jsonl", [
        {"id": f"c{i}", "question": "What is the capital of France?", "reference_answer": "Paris.",
         "expected_files": ["a.md"]} for i in range(2)])
    run = write_cases(tmp_path / "run.jsonl", [
        {"id": f"c{i}", "answer": "Paris is the capital.",
         "retrieved": [{"file": "a.md", "text": CONTEXTS[0]}, {"file": "b.md", "text": CONTEXTS[1]}]}
        for i in range(2)])
    res = ragmeter("eval", "--golden", str(golden), "--run", str(run), "--base-url", server.base_url,
                   "--model", "judge", "--no-cache", "--out", str(tmp_path / "eval"), *QUICK)
    assert res.returncode == 0, res.stderr
    judged = pl.read_parquet(next((tmp_path / "eval").rglob("judge.parquet")))
    scores = {r["metric"]: r["score"] for r in judged.to_dicts()}
    assert scores["faithfulness"] == pytest.approx(EXPECTED["faithfulness"])
    assert scores["context_precision"] == pytest.approx(EXPECTED["context_precision"])
    assert set(judged["status"]) == {"ok"}


def test_server_killed_mid_run_never_exits_0(own_server, tmp_path):
    import subprocess
    import sys

    server = own_server("scripted")
    cases = write_cases(tmp_path / "cases.jsonl", [case(i, f"@@LOOP@@ {i}?") for i in range(40)])
    cmd = [sys.executable, "-m", "ragmeter", "judge", "--cases", str(cases), "--base-url", server.base_url,
           "--model", "judge", "--no-cache", "--out", str(tmp_path / "out"), "--metrics", "correctness",
           "--concurrency", "1", "--max-tokens", "256", "--max-retry-tokens", "256", "--retry-attempts", "2",
           *QUICK]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while server.posts() < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before the server was killed"
    server.kill()
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode in (2, 3), err
