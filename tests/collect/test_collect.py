"""ragmeter collect against a scripted local RAG system (loopback only)."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from collect_helpers import FAST, GOLDEN, PYTHON_DIR, cli, golden_ids, no_traceback, write_target
from ragserver import RagServer, example_records

import ragmeter
from ragmeter.collect.cache import collect_key
from ragmeter.dataset import load_run
from ragmeter.errors import InputError
from ragmeter.judge.cache import Cache

A, B, C, D = "fact-01-frontend-stack", "fact-02-primary-database", "fact-03-p1-ack-time", "multihop-01-shanghai-hotel-claim"


def test_misbehaving_system_every_case_collected_or_recorded_failed(tmp_path):
    ids = golden_ids()
    assert C in ids and D in ids
    script = {A: [{"status": 429, "headers": {"Retry-After": "0"}}, 500], B: ["empty"], C: ["timeout"] * 5,
              D: [503, 503, 503]}
    with RagServer(script=script, timeout_sleep=1.0, modes=None) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        result = ragmeter.collect(GOLDEN, target=target, out=tmp_path / "run.jsonl", timeout=0.3, policy=FAST)
        requests = dict(s.requests)
    records = {r["id"]: r for r in result.records}
    assert [r["id"] for r in result.records] == ids  # golden order, none dropped
    assert requests[A] == 3 and records[A]["answer"] == example_records()[A]["answer"]
    assert requests[B] == 2 and records[B]["answer"]  # the empty answer was asked once more
    for failed in (C, D):  # past the retries: recorded, never dropped
        assert requests[failed] == FAST.max_attempts
        assert records[failed]["answer"] is None and records[failed]["retrieved"] == []
        assert records[failed]["retrieval_mode"] is None
    assert records[C]["error_kind"] == "timeout" and "timed out" in records[C]["error"]
    assert records[D]["error_kind"] == "server" and "503" in records[D]["error"]
    s_ = result.summary
    assert (s_["n_collected"], s_["n_failed"], s_["n_empty_retried"]) == (len(ids) - 2, 2, 1)
    assert result.incomplete
    assert all(r["latency_ms"] is not None and r["latency_ms"] >= 0 for r in result.records)
    # the example's usage and cost come through as the system reported them
    assert records[A]["usage"] == example_records()[A]["usage"] and records[A]["cost"] == example_records()[A]["cost"]
    # the file loads as a run; eval scores the failed cases as empty retrievals with no answer
    run = load_run(tmp_path / "run.jsonl")
    assert run.height == len(ids)
    cases = ragmeter.score(GOLDEN, tmp_path / "run.jsonl").cases
    failed_rows = cases.filter(pl.col("id").is_in([C, D]))
    assert failed_rows["empty_retrieval"].to_list() == [True, True]


def test_mode_degrading_half_way_warns_with_count_and_first_case(tmp_path):
    ids = golden_ids()
    with RagServer(modes=("hybrid", "bm25"), degrade_after=25) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        proc = cli("collect", "--golden", str(GOLDEN), "--target", str(target), "--out", "run.jsonl",
                   "--concurrency", "1", "--no-cache", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        no_traceback(proc)
        out = " ".join(proc.stdout.split())
        assert f"warning: {len(ids) - 25} of {len(ids)} collected case(s) ran in another retrieval mode" in out
        assert f"from case {ids[25]} (bm25) on" in out
        modes = [json.loads(line)["retrieval_mode"] for line in (tmp_path / "run.jsonl").read_text().splitlines()]
        assert modes == ["hybrid"] * 25 + ["bm25"] * (len(ids) - 25)
        # --expect-mode: the run file is written and the exit status says a case ran in another mode
        s.answered = 0
        proc = cli("collect", "--golden", str(GOLDEN), "--target", str(target), "--out", "run2.jsonl",
                   "--concurrency", "1", "--no-cache", "--expect-mode", "hybrid", cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    no_traceback(proc)
    assert (tmp_path / "run2.jsonl").is_file()
    assert f"{len(ids) - 25} case(s) ran in another mode than --expect-mode hybrid, first {ids[25]} (bm25)" \
        in proc.stderr


def test_expect_mode_met_exits_0_and_unmapped_mode_is_unknown(tmp_path):
    with RagServer(modes=("hybrid", "hybrid")) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        ok = ragmeter.collect(GOLDEN, target=target, expect_mode="hybrid")
        assert not ok.incomplete and ok.summary["expect_mode"]["n_other"] == 0
        mapped = write_target(tmp_path / "m.toml", s.url, '[response]\nanswer = "answer"\nretrieved = "retrieved"\n')
        unknown = ragmeter.collect(GOLDEN, target=mapped)
    assert {r["retrieval_mode"] for r in unknown.records} == {"unknown"}
    assert unknown.summary["warnings"] == []


def test_refused_key_stops_after_the_first_response_exit_2_secret_nowhere(tmp_path):
    secret = "tok-SECRET-123"
    with RagServer(api_key=secret) as s:
        target = write_target(tmp_path / "t.toml", s.url, 'headers = { Authorization = "Bearer ${RAG_TOKEN}" }\n')
        proc = cli("collect", "--golden", str(GOLDEN), "--target", str(target), "--out", "run.jsonl",
                   "--cache", "c.sqlite", cwd=tmp_path, env={"RAG_TOKEN": "wrong"})
        assert proc.returncode == 2, proc.stderr
        no_traceback(proc)
        assert sum(s.requests.values()) == 1  # the first case goes alone: the rest is never sent
        assert proc.stderr.count("\n") == 1 and "HTTP 401" in proc.stderr and str(target) in proc.stderr
        assert not (tmp_path / "run.jsonl").exists()
        proc = cli("collect", "--golden", str(GOLDEN), "--target", str(target), "--out", "run.jsonl",
                   "--cache", "c.sqlite", cwd=tmp_path, env={"RAG_TOKEN": secret})
        assert proc.returncode == 0, proc.stderr
        assert set(s.auth_headers[1:]) == {f"Bearer {secret}"}
    for path in tmp_path.iterdir():  # the token is never written: not in the cache, the run file, the output
        assert secret.encode() not in path.read_bytes(), path
    assert secret not in proc.stdout + proc.stderr


def test_unset_environment_variable_and_404_are_usage_errors(tmp_path):
    with RagServer() as s:
        target = write_target(tmp_path / "t.toml", s.url, 'headers = { Authorization = "Bearer ${NOT_SET_VAR}" }\n')
        proc = cli("collect", "--golden", str(GOLDEN), "--target", str(target), "--out", "r.jsonl", "--no-cache",
                   cwd=tmp_path)
        assert proc.returncode == 2 and "headers.Authorization" in proc.stderr and "NOT_SET_VAR" in proc.stderr
        wrong = write_target(tmp_path / "w.toml", s.url.replace("/ask", "/nope"))
        proc = cli("collect", "--golden", str(GOLDEN), "--target", str(wrong), "--out", "r.jsonl", "--no-cache",
                   cwd=tmp_path)
    assert proc.returncode == 2 and "HTTP 404" in proc.stderr and "check url" in proc.stderr
    no_traceback(proc)


@pytest.mark.parametrize("content, words", [
    ('url = "http://x\n', ["t.toml", "not valid TOML", "line 1"]),
    ('url = "ftp://x"\n', ["t.toml", "url"]),
    ('url = "http://127.0.0.1:1/ask"\n[response]\nanswr = "a"\n', ["t.toml", "response.answr", "not a field"]),
])
def test_target_file_that_does_not_parse(tmp_path, content, words):
    (tmp_path / "t.toml").write_text(content)
    proc = cli("collect", "--golden", str(GOLDEN), "--target", "t.toml", "--out", "r.jsonl", "--no-cache",
               cwd=tmp_path)
    assert proc.returncode == 2
    no_traceback(proc)
    assert proc.stderr.count("\n") == 1 and all(w in proc.stderr for w in words), proc.stderr


def test_first_response_checked_before_the_rest_is_sent(tmp_path):
    ids = golden_ids()
    with RagServer(script={ids[0]: ["garbage"]}) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        proc = cli("collect", "--golden", str(GOLDEN), "--target", str(target), "--out", "r.jsonl", "--no-cache",
                   cwd=tmp_path)
        assert proc.returncode == 2 and "not JSON" in proc.stderr and ids[0] in proc.stderr
        assert sum(s.requests.values()) == 1
        bad = write_target(tmp_path / "m.toml", s.url, '[response]\nanswer = "data.output.text"\n')
        proc = cli("collect", "--golden", str(GOLDEN), "--target", str(bad), "--out", "r.jsonl", "--no-cache",
                   cwd=tmp_path)
        assert sum(s.requests.values()) == 2
    assert proc.returncode == 2
    no_traceback(proc)
    assert "m.toml" in proc.stderr and "response.answer" in proc.stderr and "data.output.text" in proc.stderr
    assert ids[0] in proc.stderr and not (tmp_path / "r.jsonl").exists()


def test_nested_response_mapping_and_get(tmp_path):
    mapping = ('method = "GET"\nbody = { case = "{id}", q = "{question}", k = 5 }\n[response]\n'
               'answer = "data.output.text"\nretrieved = "data.docs"\nretrieval_mode = "meta.mode"\n'
               'usage = "usage"\ncost = "cost"\n'
               '[response.retrieved_item]\nfile = "metadata.source"\nchunk_id = "metadata.id"\ntext = "page_content"\n'
               'score = "relevance"\n')
    with RagServer(shape="nested", modes=None) as s:
        target = write_target(tmp_path / "t.toml", s.url, mapping)
        result = ragmeter.collect(GOLDEN, target=target)
        sent = s.bodies[0]
    ex = example_records()
    assert sent == {"case": A, "q": _question(A), "k": "5"}
    rec = result.records[0]
    assert rec["answer"] == ex[A]["answer"] and rec["retrieval_mode"] == ex[A]["retrieval_mode"]
    assert rec["retrieved"] == ex[A]["retrieved"]


def test_string_items_are_chunk_texts():
    async def fn(case):
        return {"answer": "x", "retrieved": ["React 18 and TypeScript 5, bundled with Vite"]}

    result = ragmeter.collect(GOLDEN, target=fn)
    assert result.records[0]["retrieved"] == [{"file": "", "chunk_id": None,
                                               "text": "React 18 and TypeScript 5, bundled with Vite", "score": None}]


def _example_answer(case):
    rec = dict(example_records().get(case["id"]) or {"retrieved": [], "answer": "none"})
    rec.pop("id", None)
    return rec


def test_callable_sync_and_async(tmp_path):
    seen = []

    def sync_fn(case):
        seen.append((case["id"], case["category"], case["repeat"]))
        if case["id"] == C:
            raise RuntimeError("vector store down")
        return _example_answer(case)

    async def async_fn(case):
        await asyncio.sleep(0.001)
        return _example_answer(case)

    ids = golden_ids()
    for fn in (sync_fn, async_fn):
        result = ragmeter.collect(GOLDEN, target=fn, out=tmp_path / "run.parquet", concurrency=4)
        assert [r["id"] for r in result.records] == ids
        good = [r for r in result.records if r["id"] != C]
        assert all(r["answer"] == _example_answer({"id": r["id"]})["answer"] for r in good)
        assert load_run(tmp_path / "run.parquet").height == len(ids)
    failed = [r for r in ragmeter.collect(GOLDEN, target=sync_fn).records if "error" in r]
    assert [(r["id"], r["error_kind"]) for r in failed] == [(C, "exception")]
    assert "vector store down" in failed[0]["error"]
    assert (A, "fact", 1) in seen
    with pytest.raises(InputError, match="returned str"):
        ragmeter.collect(GOLDEN, target=lambda case: "not a record")


def test_cli_module_function_target(tmp_path):
    (tmp_path / "myrag.py").write_text(
        "import json, pathlib\n"
        f"RUN = {{json.loads(l)['id']: json.loads(l) for l in pathlib.Path({str(GOLDEN.with_name('run.jsonl'))!r})"
        ".read_text().splitlines()}\n"
        "def ask(case):\n    return RUN.get(case['id'], {'retrieved': [], 'answer': 'none'})\n")
    proc = cli("collect", "--golden", str(GOLDEN), "--target", "myrag:ask", "--out", "run.jsonl", "--no-cache",
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert len((tmp_path / "run.jsonl").read_text().splitlines()) == len(golden_ids())
    proc = cli("collect", "--golden", str(GOLDEN), "--target", "nosuchmod:ask", "--out", "run.jsonl",
               "--no-cache", cwd=tmp_path)
    assert proc.returncode == 2 and "cannot import nosuchmod" in proc.stderr
    no_traceback(proc)


def test_cache_replays_and_refresh_calls_again(tmp_path):
    with RagServer() as s:
        target = write_target(tmp_path / "t.toml", s.url)
        ragmeter.collect(GOLDEN, target=target, cache=tmp_path / "c.sqlite")
        n = sum(s.requests.values())
        again = ragmeter.collect(GOLDEN, target=target, cache=tmp_path / "c.sqlite")
        assert sum(s.requests.values()) == n and again.summary["n_cached"] == n
        ragmeter.collect(GOLDEN, target=target, cache=tmp_path / "c.sqlite", refresh=True)
        assert sum(s.requests.values()) == 2 * n


def test_sigkill_mid_run_resumes_without_calling_finished_cases_again(tmp_path):
    ids = golden_ids()
    with RagServer(delay=0.08, modes=None) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        args = [sys.executable, "-m", "ragmeter", "collect", "--golden", str(GOLDEN), "--target", str(target),
                "--out", "run.jsonl", "--cache", "c.sqlite", "--concurrency", "2"]
        env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR)}
        proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while sum(s.requests.values()) < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        before = dict(s.requests)
        assert not (tmp_path / "run.jsonl").exists()  # nothing half-written
        identity = ragmeter.collect.load_target(target).identity
        with Cache(tmp_path / "c.sqlite") as cache:
            done = [i for i in ids if cache.get(collect_key(identity, {"id": i, "question": _question(i)}, i, 1))]
        assert 10 <= len(done) < len(ids)
        rerun = cli("collect", "--golden", str(GOLDEN), "--target", str(target), "--out", "run.jsonl",
                    "--cache", "c.sqlite", "--concurrency", "2", cwd=tmp_path)
        assert rerun.returncode == 0, rerun.stderr
        after = dict(s.requests)
    assert all(after[i] == before[i] for i in done)  # finished cases: not a single call again
    assert sum(after.values()) - sum(before.values()) == len(ids) - len(done)
    assert [json.loads(line)["id"] for line in (tmp_path / "run.jsonl").read_text().splitlines()] == ids


def _question(case_id):
    from ragmeter.dataset import load_golden

    g = load_golden(GOLDEN)
    return g.filter(pl.col("id") == case_id)["question"][0]


def test_repeat_column_and_eval_scores_every_repeat(tmp_path):
    ids = golden_ids()
    with RagServer(modes=None) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        proc = cli("collect", "--golden", str(GOLDEN), "--target", str(target), "--out", "run.jsonl",
                   "--repeat", "2", "--no-cache", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert set(s.requests.values()) == {2}
    rows = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert [(r["id"], r["repeat"]) for r in rows] == [(i, 1) for i in ids] + [(i, 2) for i in ids]
    proc = cli("eval", "--golden", str(GOLDEN), "--run", "run.jsonl", "--out", "res", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    no_traceback(proc)
    assert "2 collected repeats" in " ".join(proc.stdout.split())
    assert pl.read_parquet(tmp_path / "res" / "cases.parquet").height == len(ids)
    per_repeat = pl.read_parquet(tmp_path / "res" / "repeats.parquet")
    assert sorted(per_repeat.select("id", "repeat").rows()) == sorted((i, r) for i in ids for r in (1, 2))


def test_eval_target_equals_collect_then_eval(tmp_path):
    with RagServer(modes=None) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        one = cli("eval", "--golden", str(GOLDEN), "--target", str(target), "--out", "one", "--no-cache",
                  cwd=tmp_path)
        assert one.returncode == 0, one.stderr
        no_traceback(one)
        col = cli("collect", "--golden", str(GOLDEN), "--target", str(target), "--out", "run.jsonl", "--no-cache",
                  cwd=tmp_path)
        two = cli("eval", "--golden", str(GOLDEN), "--run", "run.jsonl", "--out", "two", cwd=tmp_path)
        assert col.returncode == 0 and two.returncode == 0, col.stderr + two.stderr
    assert (tmp_path / "one" / "run.jsonl").is_file()
    a = pl.read_parquet(tmp_path / "one" / "cases.parquet").drop("latency_ms")
    b = pl.read_parquet(tmp_path / "two" / "cases.parquet").drop("latency_ms")
    assert a.columns == b.columns and a.height == len(golden_ids())
    assert a.equals(b)
    summary = json.loads((tmp_path / "one" / "summary.json").read_text())
    # the example run has 3 bm25 cases among hybrid ones: the later eval's summary.json carries it
    assert "mode_fallback" in {w["code"] for w in summary["warnings"]}
    assert summary["inputs"]["run"]["path"].endswith("run.jsonl")
    assert summary["retrieval"]["retrieval_modes"] == json.loads(
        (tmp_path / "two" / "summary.json").read_text())["retrieval"]["retrieval_modes"]


def test_rpm_paces_the_calls():
    golden = [{"id": f"q{i}", "question": f"question {i}?"} for i in range(6)]
    stamps = []

    def fn(case):
        stamps.append(time.monotonic())
        return {"answer": "a", "retrieved": []}

    ragmeter.collect(golden, target=fn, rpm=120, concurrency=6)
    # 120 a minute: a burst of 2, then about one every 0.5 s, whatever the concurrency
    assert len(stamps) == 6 and stamps[-1] - stamps[0] >= 1.5
    stamps.clear()
    ragmeter.collect(golden, target=fn, concurrency=6)
    assert stamps[-1] - stamps[0] < 1.0


def test_documented_framework_shapes_map(tmp_path):
    """Every TOML example in docs/collect.md parses; each framework example maps its sample response."""
    import re

    from ragmeter.collect.mapping import to_record, unmatched_paths

    doc = (PYTHON_DIR.parent / "docs" / "collect.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```(toml|json)\n(.*?)```", doc, re.S)
    pairs = [(blocks[i][1], blocks[i + 1][1]) for i in range(len(blocks) - 1)
             if blocks[i][0] == "toml" and blocks[i + 1][0] == "json"]
    assert len(pairs) == 3  # LangChain, LlamaIndex, ragas
    for n, (_, toml_text) in enumerate(b for b in blocks if b[0] == "toml"):
        ragmeter.collect.load_target(_write(tmp_path / f"{n}.toml", toml_text))
    for n, (toml_text, json_text) in enumerate(pairs):
        target = ragmeter.collect.load_target(_write(tmp_path / f"p{n}.toml", toml_text))
        response = json.loads(json_text)
        assert unmatched_paths(response, target.response, target.item) == []
        rec = to_record(response, target.response, target.item)
        assert rec["answer"] == "PostgreSQL 15."
        assert rec["retrieved"][0]["text"] == "The primary database is PostgreSQL 15"
        assert rec["retrieved"][0]["file"] in ("handbook.md", "")


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_later_reply_without_the_mapped_answer_is_retried_then_failed(tmp_path):
    mapping = '[response]\nanswer = "data.output.text"\nretrieved = "data.docs"\n'
    with RagServer(shape="nested", script={B: ["wrongshape"] * 5, C: ["wrongshape", "garbage"]}) as s:
        target = write_target(tmp_path / "t.toml", s.url, mapping)
        result = ragmeter.collect(GOLDEN, target=target, policy=FAST)
        requests = dict(s.requests)
    records = {r["id"]: r for r in result.records}
    assert requests[B] == FAST.max_attempts and records[B]["error_kind"] == "bad_response"
    assert "response.answer = 'data.output.text' matches nothing" in records[B]["error"]
    assert requests[C] == 3 and records[C]["answer"] == example_records()[C]["answer"]  # recovered on retry
    assert result.summary["n_failed"] == 1


def test_interrupt_says_how_far_it_got(tmp_path):
    with RagServer(delay=0.1) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR)}
        proc = subprocess.Popen([sys.executable, "-m", "ragmeter", "collect", "--golden", str(GOLDEN), "--target",
                                 str(target), "--out", "run.jsonl", "--cache", "c.sqlite", "--concurrency", "2"],
                                cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while sum(s.requests.values()) < 6 and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        err = proc.communicate(timeout=30)[1]
    assert proc.returncode == 130
    assert "Traceback" not in err and "cases finished, nothing written" in err and "a rerun resumes" in err
    assert not (tmp_path / "run.jsonl").exists()


def test_unreachable_system_is_exit_2_at_once(tmp_path):
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    target = write_target(tmp_path / "t.toml", f"http://127.0.0.1:{port}/ask")
    started = time.monotonic()
    proc = cli("collect", "--golden", str(GOLDEN), "--target", str(target), "--out", "run.jsonl", "--no-cache",
               cwd=tmp_path)
    assert proc.returncode == 2 and "cannot reach the system" in proc.stderr and "check url" in proc.stderr
    no_traceback(proc)
    assert time.monotonic() - started < 30 and not (tmp_path / "run.jsonl").exists()


def test_the_rate_controller_sees_every_outcome_of_collect(tmp_path):
    ids = golden_ids()
    throttle = {"status": 429, "headers": {"Retry-After": "0"}}
    script = {i: [throttle] for i in ids}  # every case refused once, then answered
    script[C] = [throttle, "timeout", "timeout"]
    runs = {}
    for control in ("adaptive", "fixed"):
        with RagServer(script={k: list(v) for k, v in script.items()}, timeout_sleep=1.0, modes=None) as s:
            target = write_target(tmp_path / "t.toml", s.url)
            result = ragmeter.collect(GOLDEN, target=target, timeout=0.3, policy=FAST, concurrency=8,
                                      rate_control=control)
        runs[control] = result.summary["rate"]
        assert result.summary["n_failed"] == 1  # C: past its three attempts
    adaptive, fixed = runs["adaptive"], runs["fixed"]
    assert adaptive["policy"] == "adaptive" and adaptive["throttled"] == len(ids)
    assert adaptive["timeouts"] == 2 and adaptive["min_concurrency"] < 8  # a time-out halves the concurrency
    assert fixed["policy"] == "fixed" and fixed["throttled"] == fixed["pauses"] == len(ids)
    with pytest.raises(InputError):
        ragmeter.collect(GOLDEN, target=target, rate_control="bogus")


def test_a_later_reply_that_would_not_load_names_the_mapping_it_came_from(tmp_path):
    """The failed case's error names the field as the loader does and the target mapping it was read through."""
    mapping = ('[response]\nanswer = "data.output.text"\nretrieved = "data.docs"\nretrieval_mode = "meta.mode"\n'
               '[response.retrieved_item]\nfile = "metadata.source"\ntext = "page_content"\nscore = "relevance"\n')
    ids = golden_ids()
    records = example_records()
    bad_score = dict(records[ids[1]], retrieved=[dict(c, score="high") for c in records[ids[1]]["retrieved"]])
    bad_answer = dict(records[ids[2]], answer=["not", "text"])
    records.update({ids[1]: bad_score, ids[2]: bad_answer})
    with RagServer(shape="nested", modes=None, records=records) as s:
        target = write_target(tmp_path / "t.toml", s.url, mapping)
        result = ragmeter.collect(GOLDEN, target=target, policy=FAST)
    errors = {r["id"]: r.get("error") for r in result.records}
    assert errors[ids[1]].endswith("'retrieved[0].score' must be a number, got a string "
                                   "(from response.retrieved_item.score = 'relevance') (gave up after 3 attempts)"), errors[ids[1]]
    assert "'answer' must be a string, got a list (from response.answer = 'data.output.text')" in errors[ids[2]]
    assert errors[ids[0]] is None and result.summary["n_failed"] == 2


def test_run_record_problems_names_each_field():
    from ragmeter.dataset import RecordProblem, run_record_problems

    assert run_record_problems({"id": "a", "retrieved": [{"text": "t"}], "answer": "x"}) == []
    found = run_record_problems({"id": "a", "retrieved": [{"text": "t"}, {"file": "f.md"}, {"text": 3}],
                                 "answer": 5, "retrieval_mode": "hybrid", "latency_ms": "slow"})
    assert [p.field for p in found] == ["retrieved[1].text", "retrieved[2].text", "answer", "latency_ms"]
    assert found[0] == RecordProblem("retrieved[1].text", "retrieved[1]: missing 'text'")
    assert [p.field for p in run_record_problems({"id": "a"})] == ["retrieved"]
    assert [p.field for p in run_record_problems({"retrieved": []})] == ["id"]
