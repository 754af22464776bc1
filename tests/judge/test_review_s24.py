"""Review session 24 of the judge: defects found scripting a flaky OpenAI-compatible endpoint against
``ragmeter judge``, each with the test that failed before its fix."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ragmeter.judge import JudgeCallError, JudgeConfig, run_sync
from ragmeter.judge.engine import ParseError, parse_json_object
from ragmeter.judge.retry import RetryPolicy, classify

from test_client import chat  # noqa: E402 (tests/judge is on sys.path: conftest.py)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for loopback
from loopback import LoopbackApp  # noqa: E402

VERDICT = {"reason": "matches", "score": 5, "correct": True}


def _reply(status: int, content: str = json.dumps(VERDICT)) -> dict:
    return {"status": status, "body": json.dumps({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7}})}


# -- a 2xx other than 200 (a proxy's 201/203) is an answer, not a rejected request -------------------------------
@pytest.mark.parametrize("status", [201, 203])
def test_a_2xx_reply_other_than_200_is_read_as_the_answer(server, fast_retry, status):
    server.script = [_reply(status)]
    res = chat(server, policy=fast_retry)
    # before: "chat failed: HTTP 203, request rejected", the row failed and the paid reply was thrown away
    assert json.loads(res.content) == VERDICT
    assert server.requests == 1 and res.attempts[0]["status"] == status
    assert res.prompt_tokens == 11 and res.completion_tokens == 7


def test_an_unreadable_2xx_is_retried_like_an_unreadable_200(server, fast_retry):
    server.script = [{"status": 204, "body": ""}, {"status": 202, "body": '{"id": "job-1"}'}, "ok"]
    res = chat(server, policy=fast_retry)
    assert server.requests == 3 and json.loads(res.content)["score"] == 5
    assert [a["outcome"] for a in res.attempts] == ["bad_response", "bad_response", "ok"]


def test_classify_reads_any_2xx_as_an_unreadable_answer():
    d = classify(attempt=1, policy=RetryPolicy(), status=206, body="<html>")
    assert d.kind == "bad_response" and d.retry


# -- one failed_in_run warning for score, sweep and judge (each says what it did with the cases) -----------------
def test_judge_and_score_share_the_failed_in_run_warning(capsys):
    from ragmeter.cli.judge import _warn_failed_in_run
    from ragmeter.retrieval import failed_in_run_warning

    assert _warn_failed_in_run([("q1", "timeout"), ("q2", "http_500")]) == 3
    said = " ".join(capsys.readouterr().err.split())
    assert "2 case(s) failed when the run was collected (the run file keeps their error): they have no answer to " \
           "judge; rerun `ragmeter collect` for them" in said and "q1 (timeout)" in said
    scored = failed_in_run_warning(["q1"], ["timeout"])
    assert scored["code"] == "failed_in_run" and "scored from what the run holds for them" in scored["message"]
    assert _warn_failed_in_run([]) == 0


# -- Case.from_record reads dataset.py's public spelling tables, not its private ones ----------------------------
def test_case_reads_the_public_spelling_tables_of_dataset():
    import inspect

    from ragmeter import dataset as D
    from ragmeter.judge import metrics

    for name in ("ID_NAMES", "QUESTION_NAMES", "GOLDEN_ALIASES", "RETRIEVED_NAMES", "ANSWER_NAMES", "CHUNK_ALIASES"):
        assert name in D.__all__ and getattr(D, name) is getattr(D, "_" + name)  # the private names stay
    assert "D._" not in inspect.getsource(metrics.Case.from_record)
    case = metrics.Case.from_record({"sample_id": "s1", "user_input": "q?", "ground_truth": "r",
                                     "actual_output": "a", "retrieved": [{"page_content": "ctx"}]})
    assert (case.id, case.question, case.reference_answer, case.answer, case.contexts) == ("s1", "q?", "r", "a",
                                                                                           ["ctx"])


# -- a reply holding one JSON object among other text is read, not repaired (and paid) again ----------------------
V = json.dumps(VERDICT)


@pytest.mark.parametrize("content", [
    "Here is my verdict:\n" + V + "\nHope this helps!",
    V + "\n\nNote: the answer matches the reference.",
    "<think>The answer says {blue}; so it matches.</think>\n" + V,  # a reasoning model's thoughts in content
])
def test_one_json_object_among_other_text_is_read_without_a_repair_turn(server, fast_retry, tmp_path, content):
    server.rules = [(lambda info: True, {"content": content})]  # the repair turn would get the same prose
    res = run_sync([{"id": "c1", "question": "q?", "reference_answer": "a", "answer": "a"}],
                   JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                               cache=tmp_path / "c.sqlite", retry=fast_retry, progress=False))
    m = res.summary["metrics"]["correctness"]
    # before: a repair turn was paid for every such reply, and a model that always adds prose failed every row
    assert (m["n_scored"], m["n_failed"], m["mean"]) == (1, 0, 5.0)
    assert server.requests == 1


@pytest.mark.parametrize("text", [
    '{"a": 1} or maybe {"a": 2}',      # two objects: which one the model meant is a guess
    "Sure! {\"a\": 1",                 # cut short
    "<think>{\"a\": 1}</think>",       # only in the thoughts
    "{score: 5}",
    # an outer object cut short: the complete object nested inside it is a field, not the verdict
    '{"score": 4, "reason": {"verdict": "no"}, "extra": "trunc',
    'Verdict: {"correct": false, "detail": {"score": 5}',
    '{"claims": [{"verdict": "yes"}], "score": ',
])
def test_text_without_exactly_one_json_object_still_fails_to_parse(text):
    with pytest.raises(ParseError):
        parse_json_object(text)


def test_one_object_in_prose_and_after_thoughts_parses():
    assert parse_json_object('Verdict: {"a": {"b": [1, "}"]}} done') == {"a": {"b": [1, "}"]}}
    assert parse_json_object('<think>\n{"draft": 1}\n</think>\n```json\n{"a": 3}\n```') == {"a": 3}
    # prose braces that are not JSON, closed before the object, do not hide it
    assert parse_json_object('The answer says {blue} so: {"score": 4}') == {"score": 4}
    assert parse_json_object('set {"x", "y"} then {"score": 2, "r": "a{b"}') == {"score": 2, "r": "a{b"}


# -- a usage block the client cannot read does not throw a good reply away ---------------------------------------
def _with_usage(usage) -> dict:
    return {"status": 200, "body": json.dumps({"choices": [{"message": {"content": V}, "finish_reason": "stop"}],
                                               "usage": usage})}


@pytest.mark.parametrize("usage", [{"prompt_tokens": "12", "completion_tokens": "n/a"}, "unknown",
                                   {"prompt_tokens": [1], "completion_tokens": {"n": 2}}])
def test_an_unreadable_usage_block_keeps_the_reply_and_estimates_the_tokens(server, fast_retry, usage):
    server.rules = [(lambda info: True, _with_usage(usage))]
    res = chat(server, policy=fast_retry)
    # before: the reply was read as unreadable and paid again max_attempts times, then the row failed
    assert server.requests == 1 and json.loads(res.content) == VERDICT
    assert res.prompt_tokens > 0 and res.completion_tokens > 0
    assert res.attempts[0]["usage_estimated"] is True


def test_a_numeric_string_usage_is_read_as_the_number(server, fast_retry):
    server.rules = [(lambda info: True, _with_usage({"prompt_tokens": "12", "completion_tokens": 3.0}))]
    res = chat(server, policy=fast_retry)
    assert (res.prompt_tokens, res.completion_tokens) == (12, 3) and "usage_estimated" not in res.attempts[0]


def test_a_cost_from_estimated_tokens_says_so(server, fast_retry, tmp_path):
    body = {"status": 200, "body": json.dumps({"choices": [{"message": {"content": V}, "finish_reason": "stop"}]})}
    server.rules = [(lambda info: "q2" in json.dumps(info.get("payload")), body)]
    cases = [{"id": f"c{i}", "question": f"q{i}?", "reference_answer": "a", "answer": "a"} for i in range(3)]
    res = run_sync(cases, JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                                      cache=tmp_path / "c.sqlite", retry=fast_retry, progress=False))
    s = res.summary
    # before: a judge_cost_usd partly made of estimates read as a measured cost
    assert s["usage_estimated_requests"] == 1 and s["requests"] == 3 and s["judge_cost_usd"] > 0
    from ragmeter.cli.judge import cost_lines

    said = " ".join(" ".join(cost_lines(s)).split())
    assert "1 of 3 requests" in said and "estimated" in said
    assert all(len(line) <= 80 for line in cost_lines(s))


# -- an unknown model answered with 400 (DeepSeek, LiteLLM) stops the run as a 404 does --------------------------
@pytest.mark.parametrize("message", ["Model Not Exist",                                          # DeepSeek
                                     "Invalid model name passed in model=gpt-5-nano",             # LiteLLM
                                     "The model `gpt-x` does not exist or you do not have access to it."])
def test_a_400_naming_an_unknown_model_stops_the_run_after_one_request(server, fast_retry, tmp_path, message):
    from ragmeter.judge import JudgeStopped

    server.rules = [(lambda info: True, {"status": 400, "body": json.dumps(
        {"error": {"message": message, "type": "invalid_request_error"}})})]
    cases = [{"id": f"c{i}", "question": f"q{i}?", "reference_answer": "a", "answer": "a"} for i in range(5)]
    with pytest.raises(JudgeStopped) as ei:
        run_sync(cases, JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                                    cache=tmp_path / "c.sqlite", retry=fast_retry, progress=False))
    # before: every row was sent and failed as 'client', exit 3 with results that measure nothing
    assert ei.value.kind == "not_found" and message in str(ei.value) and "model=" in str(ei.value)  # a Python call: its argument (session 33)
    assert server.requests == 1


def test_a_400_about_the_request_is_still_one_failed_row(server, fast_retry):
    server.script = [{"status": 400, "body": json.dumps({"error": {
        "message": "This model's maximum context length is 8192 tokens", "type": "invalid_request_error"}})}]
    with pytest.raises(JudgeCallError) as ei:
        chat(server, policy=fast_retry)
    assert ei.value.kind == "client"


def test_max_failed_nan_percent_is_refused():
    import argparse

    from ragmeter.cli.judge import MaxFailed

    # before: accepted, and a run with no failed row exited 3 ('0 of 3 ... more than --max-failed nan% allows')
    for bad in ("nan%", "NaN%", "-nan%"):
        with pytest.raises(argparse.ArgumentTypeError):
            MaxFailed(bad)
    assert MaxFailed("100%").allows(3, 3) and MaxFailed("0%").allows(0, 3) and not MaxFailed("0").allows(1, 3)


# -- the paid replies a full disk left in CACHE.unsaved-*.jsonl are read back by the rerun, not paid again --------
def test_a_rerun_reads_back_the_replies_a_full_disk_could_not_cache(tmp_path, server, api_key, capsys,
                                                                     monkeypatch, caplog):
    import sqlite3

    import ragmeter.judge.cache as cache_mod
    from ragmeter.cli import main

    from test_cli import write_cases
    from test_edges import _FullDisk

    real = cache_mod._open
    monkeypatch.setattr(cache_mod, "_open", lambda path, writable: _FullDisk(real(path, writable), ok=3))
    cases = write_cases(tmp_path / "cases.jsonl", 20)
    args = ["judge", "--base-url", server.base_url, "--model", "gpt-4o-mini", "--cases", str(cases),
            "--cache", str(tmp_path / "cache.sqlite"), "--out", str(tmp_path / "res" / "out"), "--no-progress",
            "--concurrency", "2", "--metrics", "correctness"]
    assert main(args) == 2
    err = capsys.readouterr().err
    spills = list(tmp_path.glob("cache.sqlite.unsaved-*.jsonl"))
    assert len(spills) == 1 and "a rerun with the same --cache reads them back" in " ".join(err.split())
    spilled = {json.loads(line)["key"] for line in spills[0].read_text().splitlines()}
    with sqlite3.connect(tmp_path / "cache.sqlite") as conn:
        cached = conn.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0]
    assert spilled and cached
    monkeypatch.setattr(cache_mod, "_open", real)  # space freed
    before = server.requests
    assert main(args) == 0
    # before: the spilled replies were paid again (the file was never read)
    assert server.requests - before == 20 - cached - len(spilled)
    assert f"{len(spilled)} paid replies of an earlier run read back from {spills[0]}" in caplog.text
    assert not spills[0].exists()  # in the cache now: not read back twice
    with sqlite3.connect(tmp_path / "cache.sqlite") as conn:
        keys = {k for (k,) in conn.execute("SELECT key FROM judge_cache")}
    assert spilled <= keys and len(keys) == 20


# -- a metric module that exits while imported is an input error, not a silent exit status -----------------------
@pytest.mark.parametrize("code", ["sys.exit(3)", "sys.exit(0)", "raise SystemExit('bye')"])
def test_a_metric_module_calling_sys_exit_is_an_input_error(server, tmp_path, api_key, code):
    import os
    import subprocess
    import sys

    module = tmp_path / "mymetrics.py"
    module.write_text(f"import sys\n{code}\n")
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "c1", "question": "q?", "reference_answer": "a", "answer": "a"}) + "\n")
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "judge", "--cases", str(cases), "--base-url",
                           server.base_url, "--model", "gpt-4o-mini", "--metrics", "correctness", "--no-progress",
                           "--metric-module", str(module), "--cache", str(tmp_path / "c.sqlite"),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120,
                          env={**os.environ})
    # before: exit 3 (or 0) with no word: 'done, results written' when nothing was judged or written
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert f"{module}: importing the metric module raised SystemExit" in proc.stderr and "Traceback" not in proc.stderr
    assert server.total_requests == 0 and not (tmp_path / "out").exists()


def test_a_scoring_function_calling_sys_exit_is_refused_before_any_call(server, tmp_path):
    from ragmeter.errors import InputError
    from ragmeter.judge import metric

    @metric(prompt="Is the answer polite?", schema={"polite": bool}, fields=("answer",))
    def polite_exit(reply, case):
        raise SystemExit(3)

    with pytest.raises(InputError, match="the scoring function raised SystemExit"):
        run_sync([{"id": "c1", "question": "q?", "answer": "a"}],
                 JudgeConfig(base_url=server.base_url, model="m", metrics=[polite_exit], cache=None, progress=False))
    assert server.total_requests == 0


# -- a reply body in the charset its Content-Type declares, or with a byte-order mark -----------------------------
class _RawServer(LoopbackApp):
    """A loopback endpoint whose chat replies are ``encode(body_text)`` bytes with ``content_type`` as given."""

    def __init__(self, encoding: str, content_type: str, bom: bytes = b"") -> None:
        self.encoding, self.content_type, self.bom = encoding, content_type, bom
        self.requests = 0
        super().__init__(self._routes)

    def _routes(self, app):
        from aiohttp import web

        async def models(request):
            return web.json_response({"data": [{"id": "m"}]})

        async def chat(request):
            self.requests += 1
            body = json.dumps({"choices": [{"message": {"content": json.dumps(
                {"reason": "答案与参考一致", "score": 5, "correct": True}, ensure_ascii=False)},
                "finish_reason": "stop"}], "usage": {"prompt_tokens": 5, "completion_tokens": 5}},
                ensure_ascii=False)
            return web.Response(body=self.bom + body.encode(self.encoding),
                                headers={"Content-Type": self.content_type})

        app.router.add_get("/v1/models", models)
        app.router.add_post("/v1/chat/completions", chat)


@pytest.mark.parametrize("encoding, content_type, bom", [
    ("gbk", "application/json; charset=gbk", b""),
    ("utf-8", "application/json", b"\xef\xbb\xbf"),
])
def test_a_reply_in_its_declared_charset_or_with_a_bom_is_read(fast_retry, encoding, content_type, bom):
    import asyncio

    from ragmeter.judge import ClientConfig, JudgeClient, Limits

    from test_client import MSGS

    async def go(port):
        cfg = ClientConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout=5, policy=fast_retry)
        async with JudgeClient(cfg, Limits(concurrency=1)) as client:
            return await client.chat(MSGS)

    with _RawServer(encoding, content_type, bom) as srv:
        res = asyncio.run(go(srv.port))
        # before: GBK was read as UTF-8 (the reason garbled); a BOM made every reply unreadable, paid 5 times
        assert json.loads(res.content)["reason"] == "答案与参考一致" and srv.requests == 1


# -- a judge run with nothing to judge is refused, not reported as done -----------------------------------------
def _judge(server, tmp_path, *args):
    import os
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "ragmeter", "judge", "--base-url", server.base_url, "--model",
                           "gpt-4o-mini", "--no-progress", "--cache", str(tmp_path / "c.sqlite"),
                           "--out", str(tmp_path / "out"), *map(str, args)],
                          capture_output=True, text=True, timeout=120, env={**os.environ})


@pytest.mark.parametrize("text, said", [("", "is empty"), ("\n\n", "is empty"),
                                        ("# a comment\n// another\n", "no cases (the file has only comments)")])
def test_an_empty_cases_file_is_refused(server, tmp_path, api_key, text, said):
    cases = tmp_path / "cases.jsonl"
    cases.write_text(text)
    proc = _judge(server, tmp_path, "--cases", cases)
    # before: exit 0 with every metric 'scored 0/0' and a results folder
    assert proc.returncode == 2 and f"{cases}: {said}" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and not (tmp_path / "out").exists() and server.total_requests == 0


def test_a_run_where_every_row_lacks_its_input_is_refused(server, tmp_path, api_key):
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"id": f"q{i}", "question": "q?"}) + "\n" for i in range(3)))
    proc = _judge(server, tmp_path, "--cases", cases, "--metrics", "correctness,context_recall")
    # before: exit 0, 'scored 0/3' for every metric: nothing was measured
    assert proc.returncode == 2, proc.stderr
    err = " ".join(proc.stderr.split())
    assert "nothing to judge: all 6 judge rows (3 cases x 2 metrics) lack their input" in err
    assert "the run has no answer for this case" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists() and server.requests == 0


def test_a_run_with_some_rows_to_judge_still_exits_0(server, tmp_path, api_key):
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "q0", "question": "q?"}) + "\n" + json.dumps(
        {"id": "q1", "question": "q?", "answer": "a", "reference_answer": "a"}) + "\n")
    proc = _judge(server, tmp_path, "--cases", cases, "--metrics", "correctness")
    assert proc.returncode == 0, proc.stderr
    assert "scored 1/2" in proc.stdout and (tmp_path / "out" / "judge.parquet").exists()


def test_a_run_whose_every_case_failed_when_collected_keeps_exit_3(server, tmp_path, api_key):
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(json.dumps({"id": f"q{i}", "question": "q?", "expectedFileNames": ["f.md"],
                                          "expectedEvidence": ["x"], "referenceAnswer": "a"}) + "\n"
                              for i in range(2)))
    run = tmp_path / "run.jsonl"
    run.write_text("".join(json.dumps({"id": f"q{i}", "retrieved": [], "answer": None, "error": "boom",
                                       "error_kind": "timeout"}) + "\n" for i in range(2)))
    proc = _judge(server, tmp_path, "--golden", golden, "--run", run, "--metrics", "correctness")
    assert proc.returncode == 3, proc.stderr
    assert "2 case(s) failed when the run was collected" in " ".join(proc.stderr.split())
    assert (tmp_path / "out" / "judge.parquet").exists() and server.requests == 0


# -- a --base-url with a query string (Azure's ?api-version=, a proxy's ?key=) ------------------------------------
def test_a_base_url_with_a_query_string_reaches_the_routes_and_the_query_is_never_shown(server, tmp_path, api_key):
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "q1", "question": "q?", "answer": "a", "reference_answer": "a"}) + "\n")
    secret = "QUERYSECRET123"
    url = f"{server.base_url}?api-version=2024-06-01&key={secret}"
    proc = _judge(server, tmp_path, "--cases", cases, "--metrics", "correctness", "--base-url", url, "-v")
    # before: the routes were appended after the query ('/v1?api-version=...&key=.../chat/completions'): 404, exit 2
    assert proc.returncode == 0, proc.stderr
    assert server.models_requests == 1 and server.requests == 1
    assert secret not in proc.stdout + proc.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_endpoint_url_puts_the_route_before_the_query():
    from ragmeter.judge.urls import endpoint_url

    assert endpoint_url("http://h/v1", "/models") == "http://h/v1/models"
    assert endpoint_url("http://h/v1/", "/chat/completions") == "http://h/v1/chat/completions"
    assert endpoint_url("https://h/openai/deployments/d?api-version=1", "/chat/completions") == \
        "https://h/openai/deployments/d/chat/completions?api-version=1"


# -- a --base-url that is not an http(s) URL is named as such, and a query never shows in an error ----------------
@pytest.mark.parametrize("url", ["localhost:8000/v1", "api.openai.com/v1", "ftp://h/v1", "http:///v1"])
def test_a_base_url_without_http_scheme_and_host_is_refused_naming_the_option(server, tmp_path, api_key, url):
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "q1", "question": "q?", "answer": "a", "reference_answer": "a"}) + "\n")
    proc = _judge(server, tmp_path, "--cases", cases, "--metrics", "correctness", "--base-url", url)
    # before: 'localhost:8000/v1: cannot connect (localhost:8000/v1/models); check --base-url ...'
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--base-url: expected an http:// or https:// URL" in proc.stderr, proc.stderr
    assert server.total_requests == 0


def test_a_query_secret_in_a_malformed_base_url_stays_out_of_the_error(server, tmp_path, api_key):
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "q1", "question": "q?", "answer": "a", "reference_answer": "a"}) + "\n")
    proc = _judge(server, tmp_path, "--cases", cases, "--metrics", "correctness",
                  "--base-url", "http://[::1/v1?key=QUERYSECRET123")
    assert proc.returncode == 2 and "QUERYSECRET123" not in proc.stderr + proc.stdout, proc.stderr


# -- a retry delay or cap that is not a finite number is refused ------------------------------------------------
@pytest.mark.parametrize("flag", ["--retry-after-cap", "--retry-base-delay", "--retry-max-delay"])
@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_retry_delay_that_is_not_finite_is_refused(server, tmp_path, api_key, flag, value):
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "q1", "question": "q?", "answer": "a", "reference_answer": "a"}) + "\n")
    proc = _judge(server, tmp_path, "--cases", cases, "--metrics", "correctness", flag, value)
    # before: accepted; --retry-after-cap nan left a server's Retry-After uncapped (min(3600, nan) is 3600)
    assert proc.returncode == 2 and "retry settings: delays must be finite numbers >= 0" in proc.stderr
    assert server.total_requests == 0


# -- embeddings that cannot give a cosine (NaN, a zero vector, mixed dimensions) fail the row ----------------------
def _embeddings_reply(vectors) -> dict:
    return {"status": 200, "body": json.dumps({"data": [{"index": i, "embedding": v} for i, v in enumerate(vectors)],
                                               "usage": {"prompt_tokens": 3}})}


@pytest.mark.parametrize("first, said", [
    ([1.0, float("nan")], "not a finite number"),   # a broken fp16 model's overflow
    ([0.0, 0.0], "all zeros"),
    ([1.0, 0.0, 0.0], "dimensions"),
])
def test_embeddings_without_a_cosine_fail_the_row_not_the_run_or_the_mean(server, fast_retry, first, said):
    server.rules = [(lambda info: info["kind"] == "embeddings",
                     _embeddings_reply([first, [1.0, 0.0], [1.0, 0.0], [1.0, 0.0]]))]
    res = run_sync([{"id": "c1", "question": "What colour?", "answer": "Blue."},
                    {"id": "c2", "question": "What size?", "answer": "Big."}],
                   JudgeConfig(base_url=server.base_url, model="m", embeddings_model="e",
                               metrics=["answer_relevancy"], cache=None, progress=False, retry=fast_retry))
    # before: NaN was a scored row and made the mean NaN; a zero vector scored 0.0; mixed dimensions raised
    # ValueError out of the whole run
    m = res.summary["metrics"]["answer_relevancy"]
    assert (m["n_scored"], m["n_failed"], m["mean"]) == (0, 2, None)
    assert list(m["failures"]) == ["bad_embeddings"] and said in m["failures"]["bad_embeddings"]["example"]


@pytest.mark.parametrize("a, b", [([0.0, 0.0], [1.0, 0.0]), ([1.0, None], [1.0, 0.0]), ([1.0], [1.0, 0.0])])
def test_a_cosine_of_cached_unusable_vectors_fails_instead_of_scoring_0(a, b):
    from ragmeter.judge.metrics import _cosine

    with pytest.raises(JudgeCallError) as ei:
        _cosine(a, b)  # before: 0.0, NaN or a ValueError
    assert ei.value.kind == "bad_embeddings"
    assert _cosine([1.0, 0.0], [2.0, 0.0]) == pytest.approx(1.0)


# -- judge --cases: an id that is not a string or integer, a duplicate id, a question that is not text -------------
@pytest.mark.parametrize("second, said", [
    ('{"id": "a", "question": "q2?", "answer": "x"}', ":2: duplicate id 'a' (first at {cases}:1)"),
    ('{"id": {"x": 1}, "question": "q2?", "answer": "x"}', ":2: 'id' must be a string or an integer, got an object"),
    ('{"id": true, "question": "q2?", "answer": "x"}', ":2: 'id' must be a string or an integer, got a boolean"),
    ('{"id": "b", "question": ["q2?"], "answer": "x"}', ":2: 'question' must be a string, got a list"),
])
def test_a_bad_case_record_names_file_and_line(server, tmp_path, api_key, second, said):
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"id": "a", "question": "q1?", "answer": "x"}\n' + second + "\n")
    proc = _judge(server, tmp_path, "--cases", cases, "--metrics", "correctness")
    # before: 'case 1: duplicate id' (no file, no line), or the record judged under the id "{'x': 1}" / "True"
    assert proc.returncode == 2 and f"{cases}{said.format(cases=cases)}" in proc.stderr, proc.stderr
    assert server.total_requests == 0 and not (tmp_path / "out").exists()


def test_a_duplicate_id_in_python_records_is_numbered_from_1():
    from ragmeter.errors import InputError

    with pytest.raises(InputError, match=r"records 1 and 3: duplicate id 'a'"):
        run_sync([{"id": "a", "question": "q"}, {"id": "b", "question": "q"}, {"id": "a", "question": "q"}],
                 JudgeConfig(base_url="http://127.0.0.1:9/v1", model="m", cache=None, progress=False))


# -- a 200 carrying "error": null beside its choices is an answer ---------------------------------------------------
def test_a_reply_with_a_null_error_field_is_read(server, fast_retry):
    server.script = [{"status": 200, "body": json.dumps({
        "error": None, "choices": [{"message": {"content": V}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5}})}]
    res = chat(server, policy=fast_retry)
    # before: read as an error reply, paid again --retry-attempts times, then failed as bad_response
    assert json.loads(res.content) == VERDICT and server.requests == 1


def test_a_200_whose_error_is_set_is_still_retried(server, fast_retry):
    server.script = [{"status": 200, "body": json.dumps({"error": {"message": "upstream overloaded"}})}, "ok"]
    res = chat(server, policy=fast_retry)
    assert server.requests == 2 and [a["outcome"] for a in res.attempts] == ["bad_response", "ok"]


# -- a key in --embeddings-base-url is the embeddings endpoint's key; the chat key does not go to its host ----------
def test_a_key_in_the_embeddings_url_is_used_there_and_the_chat_key_stays_home(server, api_key, tmp_path):
    import os
    import subprocess
    import sys

    from fakeserver import FakeServer

    emb_key = "sk-EMBEDDINGS-KEY-987654321"
    with FakeServer(api_key=emb_key) as emb:
        cases = tmp_path / "cases.jsonl"
        cases.write_text(json.dumps({"id": "q1", "question": "What colour?", "answer": "Blue."}) + "\n")
        url = emb.base_url.replace("http://", f"http://user:{emb_key}@")
        proc = subprocess.run([sys.executable, "-m", "ragmeter", "judge", "--cases", str(cases), "--base-url",
                               server.base_url, "--model", "gpt-4o-mini", "--embeddings-model", "e",
                               "--embeddings-base-url", url, "--metrics", "answer_relevancy", "--no-progress",
                               "--cache", str(tmp_path / "c.sqlite"), "--out", str(tmp_path / "out"), "-v"],
                              capture_output=True, text=True, timeout=120, env={**os.environ})
        assert proc.returncode == 0, proc.stderr
        # before: the password of --embeddings-base-url was dropped and the chat key sent to the embeddings host
        assert emb.log and all(r["auth_ok"] for r in emb.log)
        assert server.log and all(r["auth_ok"] for r in server.log)
    assert emb_key not in proc.stdout + proc.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert emb_key.encode() not in path.read_bytes(), path
