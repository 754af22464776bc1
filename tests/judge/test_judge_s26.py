"""Review session 26 of the judge: defects found scripting OpenAI-compatible endpoints, each with the test that
failed before its fix."""
from __future__ import annotations

import json
import sqlite3

import polars as pl
import pytest
from fakeserver import FakeServer

from ragmeter.judge import JudgeConfig, run_sync

CASES = [{"id": f"c{i}", "question": f"Which colour is item {i}?", "reference_answer": "blue",
          "answer": "blue"} for i in range(3)]


# -- a short API key (llama.cpp's --api-key k) does not garble the replies ---------------------------------------
@pytest.mark.parametrize("key", ["k", "to", "ey", "sk-1"])
def test_a_short_key_does_not_garble_the_replies(tmp_path, fast_retry, key):
    # before: the key was masked as text in the raw body before it was parsed, so with the key "k" the usage
    # block's "prompt_tokens" became "prompt_to***ens" (every reply's cost read as an estimate) and the
    # verdict's reason "key facts" became "***ey facts". A short key that stands as a word of its own is still
    # masked (the next test): a reason saying "ok" with the key "ok" loses that word
    verdict = {"reason": "looks ok: key facts match the token list", "score": 5, "correct": True}
    with FakeServer(api_key=key) as server:
        server.script = [{"content": json.dumps(verdict)}] * len(CASES)
        res = run_sync(CASES, JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                                          cache=tmp_path / "c.sqlite", retry=fast_retry, api_key=key,
                                          concurrency=1, progress=False))
        assert server.requests == len(CASES)
    assert [r["status"] for r in res.rows] == ["ok"] * len(CASES)
    assert [r["reason"] for r in res.rows] == [verdict["reason"]] * len(CASES)
    assert res.summary["usage_estimated_requests"] == 0


@pytest.mark.parametrize("key", ["k", "sk-1"])
def test_a_short_key_echoed_as_a_word_is_still_masked(tmp_path, fast_retry, key):
    reply = {"reason": f"checked with Authorization: Bearer {key} (key: '{key}')", "score": 5, "correct": True}
    with FakeServer(api_key=key) as server:
        server.script = [{"content": json.dumps(reply)}]
        cache = tmp_path / "c.sqlite"
        res = run_sync(CASES[:1], JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                                              cache=cache, retry=fast_retry, api_key=key, progress=False))
    assert res.rows[0]["reason"] == "checked with Authorization: Bearer *** (key: '***')"
    with sqlite3.connect(cache) as db:
        stored = " ".join(str(row) for row in db.execute("select * from judge_cache"))
    assert f"Bearer {key} " not in stored and "Bearer ***" in stored


def test_a_long_key_is_masked_inside_words_and_json_escapes(tmp_path, fast_retry, api_key):
    # a key with a '/' that the server's JSON escapes as '\\/': the raw body never holds the key as written
    key = api_key + "/x"
    reply = {"reason": f"token={key};prefix{key}", "score": 5, "correct": True}
    body = json.dumps({"choices": [{"message": {"content": json.dumps(reply)}, "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 9, "completion_tokens": 4}}).replace("/", "\\/")
    with FakeServer(api_key=key) as server:
        server.script = [{"status": 200, "body": body}]
        res = run_sync(CASES[:1], JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                                              cache=tmp_path / "c.sqlite", retry=fast_retry, api_key=key,
                                              progress=False))
    assert res.rows[0]["reason"] == "token=***;prefix***"
    assert res.summary["usage_estimated_requests"] == 0


# -- an endpoint that fails every call with server errors stops the run --------------------------------------------
def test_an_endpoint_failing_every_call_with_5xx_stops_the_run(tmp_path, server, api_key):
    from test_cli import cli, write_cases
    from test_edges import finish

    cases = write_cases(tmp_path / "cases.jsonl", 40)
    server.rules = [(lambda info: True, 503)]
    code, _, err = finish(cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness",
                              "--concurrency", "2", key=api_key))
    # before: every one of the 40 calls spent its 6 attempts (240 requests), then exit 3 with 40 failed rows
    assert code == 2, err
    assert server.requests <= 6 * 8, server.requests
    said = " ".join(err.split())
    assert "5 calls in a row failed on server errors" in said and "HTTP 503" in said
    assert "a rerun with the same --cache resumes" in said
    assert api_key not in err and not (tmp_path / "out").exists()


def test_server_errors_on_some_inputs_fail_those_rows_only(tmp_path, server, api_key):
    from test_cli import cli, write_cases
    from test_edges import finish

    cases = write_cases(tmp_path / "cases.jsonl", 24)
    # one case in three always crashes the server (a prompt it cannot take): the others answer in between
    server.rules = [(lambda info: any(f"product {i} " in json.dumps(info.get("payload", {}))
                                      for i in (0, 6, 12, 18)), 500),
                    (lambda info: any(f"\\u7b2c{i}\\u53f7" in json.dumps(info.get("payload", {}))
                                      for i in (3, 9, 15, 21)), 500)]
    code, _, err = finish(cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness",
                              "--concurrency", "2", key=api_key))
    assert code == 3, err  # results written, 8 rows failed
    rows = pl.read_parquet(tmp_path / "out" / "judge.parquet")
    failed = rows.filter(pl.col("status") != "ok")
    assert failed.height == 8 and set(failed["error_kind"]) == {"server"}


def test_give_up_rule():
    from ragmeter.judge.stop import ServerErrors

    s = ServerErrors(calls=3)
    assert not s.gave_up("server") and not s.gave_up("bad_response")
    s.answered()
    assert not s.gave_up("server") and not s.gave_up("server")
    assert not s.gave_up("rate_limit") and not s.gave_up("client")  # not the endpoint failing: not counted
    assert s.gave_up("server")


# -- --budget holds through budget doubling --------------------------------------------------------------------------
def _billed(content: str, finish: str, completion_tokens: int) -> dict:
    return {"status": 200, "body": json.dumps({
        "choices": [{"message": {"content": content}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 600, "completion_tokens": completion_tokens}})}


def _cut_then_answered(server, tmp_path, fast_retry, budget):
    """One correctness call whose first reply is cut at max_tokens=100; the doubled attempt would answer."""
    server.script = [_billed('{"reason": "cut', "length", 100),
                     _billed('{"reason": "fine", "score": 5, "correct": true}', "stop", 40)]
    return run_sync(CASES[:1], JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                                           cache=tmp_path / "c.sqlite", retry=fast_retry, progress=False,
                                           prices={"gpt-4o-mini": (100.0, 100.0)}, max_tokens=100, budget=budget))


def test_a_doubled_attempt_that_would_pass_the_budget_is_not_sent(server, tmp_path, fast_retry):
    # $100 per million tokens: the call reserves about (prompt estimate + 100) x 1e-4 before it is sent; the
    # endpoint bills 600 + 100 tokens ($0.07) for an output cut at max_tokens, and doubling would send 600 + 200
    # more ($0.08): $0.15 against a --budget of $0.08
    res = _cut_then_answered(server, tmp_path, fast_retry, budget=0.08)
    # before: the doubled attempt was sent and the run spent $0.134 of its $0.08
    assert server.requests == 1
    row = res.rows[0]
    assert (row["status"], row["error_kind"]) == ("skipped", "budget")
    assert "max_tokens=200" in row["error"] and "budget=" in row["error"]  # a Python run: its argument
    assert row["cost_usd"] == pytest.approx(0.07)  # what the cut reply cost is still counted
    assert res.summary["budget_reached"] and res.summary["judge_cost_usd"] == pytest.approx(0.07)
    assert res.summary["incomplete"]["skipped_budget"] == 1


def test_a_doubled_attempt_within_the_budget_is_sent(server, tmp_path, fast_retry):
    res = _cut_then_answered(server, tmp_path, fast_retry, budget=1.0)
    assert server.requests == 2 and res.rows[0]["status"] == "ok"
    assert res.summary["judge_cost_usd"] == pytest.approx(0.07 + 0.064) and not res.summary["budget_reached"]


# -- a lone UTF-16 surrogate in a judge case is malformed input, not a traceback ----------------------------------
def test_a_lone_surrogate_in_a_case_file_names_its_line_and_field(tmp_path):
    import subprocess
    import sys

    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"id": "a-1", "question": "q", "answer": "a", "reference_answer": "r"}\n'
                     '{"id": "a-2", "question": "cut \\udc00 emoji", "answer": "a", "reference_answer": "r"}\n',
                     encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "judge", "--cases", str(cases), "--base-url",
                           "http://127.0.0.1:9/v1", "--model", "m", "--dry-run"], capture_output=True, text=True,
                          timeout=120)
    # before: a UnicodeEncodeError traceback (exit 1) when the request was encoded
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{cases}:2:" in proc.stderr and "'question' holds a lone UTF-16 surrogate" in proc.stderr


def test_a_lone_surrogate_in_a_case_record_is_an_input_error(tmp_path, server, fast_retry):
    from ragmeter.errors import InputError

    with pytest.raises(InputError, match=r"record 2: 'answer' holds a lone UTF-16 surrogate"):
        run_sync([{"id": "a", "question": "q", "answer": "a"}, {"id": "b", "question": "q", "answer": "x\ud800"}],
                 JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["faithfulness"],
                             cache=tmp_path / "c.sqlite", retry=fast_retry, progress=False))
    assert server.requests == 0
