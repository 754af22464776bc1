"""Review session 27 of the judge engine: defects found scripting OpenAI-compatible endpoints, each with the test
that failed before its fix."""
from __future__ import annotations

import json

import pytest

from ragmeter.judge import JudgeConfig, JudgeStopped, run_sync
from ragmeter.judge.engine import ParseError, parse_json_object
from ragmeter.judge.retry import RetryPolicy, classify

CASES = [{"id": f"c{i}", "question": f"Which colour is item {i}?", "reference_answer": "blue", "answer": "blue"}
         for i in range(3)]
WRONG = {"reason": "differs", "score": 1, "correct": False}
RIGHT = {"reason": "matches", "score": 5, "correct": True}


def _fence(obj: dict) -> str:
    return "```json\n" + json.dumps(obj) + "\n```"


# -- a reply with two fenced JSON objects is not guessed at -----------------------------------------------------
@pytest.mark.parametrize("text", [
    _fence(WRONG) + "\nWait, I misread the reference. Corrected:\n" + _fence(RIGHT),
    "My verdict:\n" + _fence(WRONG) + "\n\nOn reflection:\n" + _fence(RIGHT),
])
def test_two_fenced_objects_are_not_guessed_at(text):
    # before: the first fence was read as the verdict (score 1) without a word, while two objects outside fences
    # ("{...}\n{...}") were refused as a guess
    with pytest.raises(ParseError):
        parse_json_object(text)


def test_one_fenced_object_among_other_fences_and_prose_is_still_read():
    assert parse_json_object("Here it is:\n" + _fence(RIGHT) + "\nThanks.") == RIGHT
    assert parse_json_object(_fence(RIGHT)) == RIGHT
    # the same object twice is no guess
    assert parse_json_object(_fence(RIGHT) + "\nAgain:\n" + _fence(RIGHT)) == RIGHT


def test_two_fenced_verdicts_get_the_repair_turn_in_a_run(tmp_path, server, fast_retry):
    server.script = [{"content": _fence(WRONG) + "\nCorrection:\n" + _fence(RIGHT)}, {"content": json.dumps(RIGHT)}]
    res = run_sync(CASES[:1], JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                                          cache=tmp_path / "c.sqlite", retry=fast_retry, progress=False))
    # before: scored 1 (the first fence), one request; now the repair turn asks for one object
    assert server.requests == 2
    assert res.rows[0]["status"] == "ok" and res.rows[0]["score"] == 5.0


# -- a 2xx whose body is an error object is classified by that error ---------------------------------------------
def _error_200(error: dict) -> dict:
    return {"status": 200, "body": json.dumps({"error": error})}


QUOTA_200 = {"message": "You exceeded your current quota, please check your plan and billing details.",
             "type": "insufficient_quota", "code": "insufficient_quota"}


@pytest.mark.parametrize("error,kind,retry", [
    (QUOTA_200, "quota", False),
    ({"message": "Incorrect API key provided", "code": 401}, "auth", False),
    ({"message": "invalid token", "status": "403"}, "auth", False),
    ({"message": "model not found", "code": 404}, "not_found", False),
    ({"message": "Rate limit reached", "code": 429}, "rate_limit", True),
    ({"message": "upstream overloaded", "code": 503}, "server", True),
    ({"message": "upstream overloaded"}, "bad_response", True),       # no status said: retried as before
    ({"message": "try again", "code": 1234}, "bad_response", True),    # an application code is not a status
])
def test_classify_reads_the_error_a_200_carries(error, kind, retry):
    d = classify(attempt=1, policy=RetryPolicy(), status=200, body=json.dumps({"error": error}))
    # before: every 2xx was bad_response, retried --retry-attempts times whatever its error said
    assert (d.kind, d.retry) == (kind, retry)
    assert kind == "bad_response" or d.message.startswith("HTTP 200 with ")


UNKNOWN_MODEL_200 = {"message": "The model `gpt-4o-mini` does not exist or you do not have access to it.", "code": 400}


@pytest.mark.parametrize("error,kind,said", [(QUOTA_200, "quota", "quota"),
                                             (UNKNOWN_MODEL_200, "not_found", "unknown model")])
def test_a_fatal_error_sent_with_a_200_stops_the_run_at_once(tmp_path, server, fast_retry, error, kind, said):
    server.rules = [(lambda info: True, _error_200(error))]
    cases = [dict(c, id=f"q{i}") for i, c in enumerate(CASES * 4)]
    with pytest.raises(JudgeStopped) as ei:
        run_sync(cases, JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                                    cache=tmp_path / "c.sqlite", retry=fast_retry, progress=False))
    # before: a quota: each call retried 5 times as an unreadable reply, and the run stopped as server_errors after
    # 25 requests (6 attempts x 5 calls by default), its reason "the endpoint is failing"; an unknown model: a
    # client error failing every row
    assert ei.value.kind == kind and said in str(ei.value)
    assert server.requests == 1


# -- an embeddings reply without usage is counted as estimated, as a chat reply is ----------------------------------
def test_an_embeddings_reply_without_usage_says_its_tokens_are_estimated(tmp_path, server, fast_retry):
    from fakeserver import embed_vector

    def no_usage(info):
        return info.get("kind") == "embeddings"

    body = json.dumps({"object": "list", "data": [{"object": "embedding", "index": i, "embedding": embed_vector(f"t{i}")}
                                                  for i in range(4)]})
    server.rules = [(no_usage, {"status": 200, "body": body})]
    res = run_sync(CASES[:1], JudgeConfig(base_url=server.base_url, model="gpt-4o-mini",
                                          embeddings_model="text-embedding-3-small", metrics=["answer_relevancy"],
                                          cache=tmp_path / "c.sqlite", retry=fast_retry, progress=False))
    row = res.rows[0]
    assert row["status"] == "ok" and res.summary["requests"] == 2
    log = json.loads(row["attempt_log"])
    embed = [a for a in log if a["prompt"] == "embeddings"]
    # before: its tokens (and so its cost) were an estimate, but neither the attempt nor the summary said so
    # (usage_estimated_requests 0: the cost line claimed every request's usage came from the endpoint)
    assert embed and embed[0].get("usage_estimated") is True
    assert res.summary["usage_estimated_requests"] == 1


# -- a Retry-After that is not a finite number is unreadable, not an endless wait written as Infinity ---------------
@pytest.mark.parametrize("headers", [{"Retry-After": "1e400"}, {"Retry-After": "inf"}, {"retry-after-ms": "Infinity"},
                                     {"Retry-After": "nan"}])
def test_a_retry_after_that_is_not_a_finite_number_is_ignored(headers):
    from ragmeter.judge.retry import parse_retry_after

    assert parse_retry_after(headers) is None


def test_a_row_after_an_infinite_retry_after_has_strict_json_attempts(tmp_path, server, fast_retry):
    server.script = [{"status": 429, "headers": {"Retry-After": "1e400"}}, "ok"]
    res = run_sync(CASES[:1], JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                                          cache=tmp_path / "c.sqlite", retry=fast_retry, progress=False))
    text = res.rows[0]["attempt_log"]
    # before: '"retry_after_s": Infinity', which strict JSON readers (jq, JavaScript) refuse
    json.loads(text, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
    assert res.rows[0]["status"] == "ok" and server.requests == 2


# -- a reasoning model's thoughts whose opening <think> was in the prompt are not read as a second verdict ------------
@pytest.mark.parametrize("tag", ["think", "thinking"])
def test_thoughts_without_their_opening_tag_are_dropped(tag):
    # DeepSeek-R1 and QwQ chat templates end the prompt with "<think>\n": a server without a reasoning parser
    # returns the thoughts and "</think>" in the content, the opening tag never in it
    text = (f"Okay, the reference says blue. A first draft: {json.dumps(WRONG)}; no, the answer matches.\n"
            f"</{tag}>\n\n{json.dumps(RIGHT)}")
    # before: ParseError ("invalid JSON"): the draft and the verdict were two objects, the reply got the repair turn
    # (and a model answering the same way again failed the row as unparsable)
    assert parse_json_object(text) == RIGHT


def test_a_verdict_that_quotes_a_closing_tag_is_read_whole():
    reply = {"reason": "the answer ends with a stray </think> tag", "score": 4, "correct": True}
    assert parse_json_object(json.dumps(reply)) == reply


# -- two runs sharing a cache spill their unsaved replies to two files, not one over the other ----------------------
def test_two_spills_in_the_same_second_keep_both_files(tmp_path, monkeypatch):
    import time as _time

    from ragmeter.judge import Cache
    from ragmeter.judge import runner as R

    monkeypatch.setattr(_time, "strftime", lambda fmt, *a: "20270101-000000")  # both in the same second
    cfg = JudgeConfig(base_url="http://127.0.0.1:9/v1", model="m", cache=tmp_path / "cache.sqlite",
                      metrics=["correctness"])
    paths = []
    for i in range(2):  # two processes (or two runs of one process) whose commits a full disk refused
        cache = Cache(tmp_path / "cache.sqlite")
        cache.unsaved = [(f"{i:064x}", json.dumps({"content": f"reply {i}"}), "correctness@v1", "m", 1.0)]
        spilled = R._spill(cache, cfg)
        cache.close()
        assert spilled is not None
        paths.append(spilled[0])
    # before: both were written to cache.sqlite.unsaved-20270101-000000.jsonl, the second over the first: the first
    # run's paid reply was lost although its message said it was kept
    assert len(set(paths)) == 2
    cache = Cache(tmp_path / "cache.sqlite")
    R._read_back_unsaved(cache, cfg)
    assert cache.get(f"{0:064x}") == {"content": "reply 0"} and cache.get(f"{1:064x}") == {"content": "reply 1"}
    cache.close()


# -- a non-empty output without a finish_reason that used the whole budget is cut, as an empty one is ---------------
def test_an_output_without_finish_reason_that_used_the_budget_doubles(tmp_path, server, fast_retry):
    half = json.dumps(RIGHT)[:20]
    server.script = [{"content": half, "finish_reason": None, "completion_tokens": 2000}]
    res = run_sync(CASES[:1], JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                                          cache=tmp_path / "c.sqlite", retry=fast_retry, progress=False,
                                          max_tokens=2000))
    # before: read as a complete reply and parsed: ParseError, then a repair turn at the same 2000-token budget
    # (max_tokens [2000, 2000]); now it is a truncated output and the budget doubles, as for an empty one
    assert [r["max_tokens"] for r in server.log] == [2000, 4000]
    row = res.rows[0]
    assert row["status"] == "ok" and row["score"] == 5.0
    assert [a["outcome"] for a in json.loads(row["attempt_log"])] == ["truncated", "ok"]


def test_an_output_that_says_stop_at_the_budget_is_still_read(tmp_path, server, fast_retry):
    server.script = [{"content": json.dumps(RIGHT), "finish_reason": "stop", "completion_tokens": 2000}]
    res = run_sync(CASES[:1], JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                                          cache=tmp_path / "c.sqlite", retry=fast_retry, progress=False,
                                          max_tokens=2000))
    assert server.requests == 1 and res.rows[0]["score"] == 5.0


# -- digits that are not ASCII -------------------------------------------------------------------------------------
@pytest.mark.parametrize("score", ["²", "4.5", "five"])
def test_a_score_in_other_digits_is_a_parse_error_not_a_crash(tmp_path, server, fast_retry, score):
    # "²".isdigit() is True and int("²") a ValueError: the run crashed with a traceback
    server.script = [{"content": json.dumps(dict(RIGHT, score=score))}, {"content": json.dumps(RIGHT)}]
    res = run_sync(CASES[:1], JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                                          cache=tmp_path / "c.sqlite", retry=fast_retry, progress=False))
    assert server.requests == 2  # the repair turn
    assert res.rows[0]["status"] == "ok" and res.rows[0]["score"] == 5.0


@pytest.mark.parametrize("score,read", [("4", 4.0), (" 4 ", 4.0), ("4.0", 4.0), ("５", 5.0)])
def test_a_score_written_as_a_whole_number_text_is_read(tmp_path, server, fast_retry, score, read):
    server.script = [{"content": json.dumps(dict(RIGHT, score=score))}]
    res = run_sync(CASES[:1], JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                                          cache=tmp_path / "c.sqlite", retry=fast_retry, progress=False))
    assert server.requests == 1 and res.rows[0]["score"] == read


def test_an_error_code_in_other_digits_is_no_status():
    d = classify(attempt=1, policy=RetryPolicy(), status=200, body=json.dumps({"error": {"message": "x", "code": "⁴⁰⁴"}}))
    assert (d.kind, d.retry) == ("bad_response", True)


def test_score_descriptions_keyed_by_other_digits_are_refused_not_a_traceback():
    from ragmeter.errors import InputError
    from ragmeter.judge import RubricMetric

    # "²".isdigit() is True and int("²") a ValueError from inside the metric's checks
    with pytest.raises(InputError, match="is not an integer score"):
        RubricMetric(name="tone", criteria="polite", fields=["answer"], score_descriptions={"²": "great"})
    metric = RubricMetric(name="tone", criteria="polite", fields=["answer"],
                          score_descriptions={"5": "polite", 1: "rude", " 3 ": "so so"})
    assert metric.score_descriptions  # whole-number texts, and ints, are scores


# -- a Retry-After of hours is a usage cap, not a passing limit ------------------------------------------------------
@pytest.mark.parametrize("wait,kind,retry", [("86400", "quota", False), ("3600", "quota", False),
                                             ("900", "rate_limit", True), ("20", "rate_limit", True)])
def test_a_retry_after_of_hours_is_a_usage_cap(wait, kind, retry):
    d = classify(attempt=1, policy=RetryPolicy(), status=429, headers={"Retry-After": wait}, body="{}")
    # before: every 429 was a rate limit: each call waited the 60 s cap, 6 times, then failed, call after call
    assert (d.kind, d.retry) == (kind, retry)
    if kind == "quota":
        assert "Retry-After" in d.message and "cache" in d.message


def test_a_daily_cap_stops_the_run_at_once(tmp_path, server, fast_retry):
    server.rules = [(lambda info: True, {"status": 429, "headers": {"Retry-After": "86400"},
                                         "body": json.dumps({"error": {"message": "Daily request limit reached"}})})]
    cases = [dict(c, id=f"q{i}") for i, c in enumerate(CASES * 4)]
    with pytest.raises(JudgeStopped) as ei:
        run_sync(cases, JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                                    cache=tmp_path / "c.sqlite", retry=fast_retry, progress=False))
    assert ei.value.kind == "quota" and server.requests == 1
