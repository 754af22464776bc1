"""Review session 28 of the judge engine: each defect with the test that failed before its fix."""
from __future__ import annotations

import json

import pytest

from ragmeter.judge import JudgeConfig, run_sync
from ragmeter.judge.retry import RetryPolicy, classify

CASES = [{"id": f"c{i}", "question": f"Which colour is item {i}?", "reference_answer": "blue", "answer": "blue"}
         for i in range(3)]


def _config(server, tmp_path, fast_retry, **options) -> JudgeConfig:
    return JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                       cache=tmp_path / "c.sqlite", retry=fast_retry, progress=False, **options)


# -- a throttle sent in a 200's error object moves the rate controller as a 429 does ---------------------------------
def _in_a_200(error: dict) -> dict:
    return {"status": 200, "body": json.dumps({"error": error})}


THROTTLES = {
    "429 status": 429,
    "200 carrying code 429": _in_a_200({"message": "Rate limit reached", "code": 429}),
    "200 carrying code '429'": _in_a_200({"message": "Rate limit reached", "code": "429"}),
    "200 carrying rate_limit_exceeded": _in_a_200({"message": "Rate limit reached for requests",
                                                   "type": "requests", "code": "rate_limit_exceeded"}),
}


@pytest.mark.parametrize("throttle", list(THROTTLES.values()), ids=list(THROTTLES))
@pytest.mark.parametrize("control", ["adaptive", "fixed"])
def test_a_throttle_in_a_200_body_counts_as_a_throttle(tmp_path, server, fast_retry, throttle, control):
    # every case's first attempt is throttled, the second answers
    server.rules = [(lambda info: server.count_by_key[info["key"]] == 1, throttle)]
    res = run_sync(CASES, _config(server, tmp_path, fast_retry, rate_control=control))
    assert [r["status"] for r in res.rows] == ["ok"] * 3 and server.requests == 6
    outcomes = [a["outcome"] for r in res.rows for a in json.loads(r["attempt_log"])]
    assert outcomes.count("rate_limit") == 3
    # before: a 200 carrying the throttle was an answer to the rate controller (throttled 0), and one carrying
    # rate_limit_exceeded was not even read as a rate limit (bad_response)
    assert res.summary["rate"]["throttled"] == 3


def test_classify_reads_a_named_rate_limit_in_a_200_as_a_429():
    body = json.dumps({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}})
    d = classify(attempt=1, policy=RetryPolicy(), status=200, body=body)
    assert (d.kind, d.retry) == ("rate_limit", True) and d.message.startswith("HTTP 200 with error 429")


def test_a_200_reply_is_its_own_status_to_the_rate_controller():
    from ragmeter.judge.retry import reply_status

    ok = json.dumps({"choices": [{"message": {"content": "{\"error\": 429}"}}]})
    assert reply_status(200, ok) == 200
    assert reply_status(200, json.dumps({"error": {"code": 429}})) == 429
    assert reply_status(200, json.dumps({"error": {"code": 503}})) == 503
    assert reply_status(500, json.dumps({"error": {"code": 429}})) == 500  # only a 2xx carries another status
    assert reply_status(200, None) == 200 and reply_status(200, "<html>") == 200


@pytest.mark.parametrize("throttle", list(THROTTLES.values()), ids=list(THROTTLES))
def test_throttles_in_200_bodies_cut_the_adaptive_rate_as_429s_do(tmp_path, server, fast_retry, throttle):
    server.rules = [(lambda info: server.count_by_key[info["key"]] == 1, throttle)]
    cases = [dict(CASES[0], id=f"q{i}", question=f"Which colour is item {i}?") for i in range(20)]
    res = run_sync(cases, _config(server, tmp_path, fast_retry, concurrency=16))
    rate = res.summary["rate"]
    # before: with the throttles in 200 bodies the rate was never cut (cuts 0, min_rps null) and the concurrency
    # shrank instead, the throttles read as slow answers
    assert rate["throttled"] == 20 and rate["cuts"] >= 1 and rate["min_rps"] is not None


# -- a reply with reasoning text and no answer -------------------------------------------------------------------------
THOUGHTS = "Let me think step by step about this. " * 20  # 760 characters
VERDICT = json.dumps({"reason": "matches", "score": 5, "correct": True})


def _thinking_only(content, finish, completion_tokens=200, reasoning=THOUGHTS, field="reasoning_content") -> dict:
    message = {"role": "assistant", "content": content, field: reasoning}
    return {"status": 200, "body": json.dumps({
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 50, "completion_tokens": completion_tokens}})}


def _attempts(row) -> list:
    return [(a.get("max_tokens"), a.get("outcome")) for a in json.loads(row["attempt_log"])]


def test_reasoning_that_used_the_whole_budget_is_a_truncation(tmp_path, server, fast_retry):
    server.rules = [(lambda info: True, "empty")]  # reasoning_content only, finish_reason length, every time
    res = run_sync(CASES[:1], _config(server, tmp_path, fast_retry, max_tokens=500, max_retry_tokens=2000))
    row = res.rows[0]
    # before: outcomes "empty", and the row failed "output empty at max_tokens=2000 (the --max-retry-tokens cap)"
    assert _attempts(row) == [(500, "truncated"), (1000, "truncated"), (2000, "truncated")]
    assert row["status"] == "failed" and row["error_kind"] == "truncated"
    assert "reasoning" in row["error"] and "760 characters" in row["error"] and "max_retry_tokens=" in row["error"]
    assert "thinking off" in row["error"]


def test_reasoning_that_used_the_budget_then_an_answer_scores(tmp_path, server, fast_retry):
    server.script = ["empty", {"content": VERDICT}]
    res = run_sync(CASES[:1], _config(server, tmp_path, fast_retry, max_tokens=500))
    row = res.rows[0]
    assert row["status"] == "ok" and row["score"] == 5.0
    assert _attempts(row) == [(500, "truncated"), (1000, "ok")]


def test_reasoning_at_the_budget_with_stop_is_a_truncation_too(tmp_path, server, fast_retry):
    # finish_reason stop, but usage says the whole budget went (some servers say stop at the budget)
    server.script = [_thinking_only("", "stop", completion_tokens=500), {"content": VERDICT}]
    res = run_sync(CASES[:1], _config(server, tmp_path, fast_retry, max_tokens=500))
    assert res.rows[0]["status"] == "ok" and _attempts(res.rows[0]) == [(500, "truncated"), (1000, "ok")]


@pytest.mark.parametrize("content", [None, "", "  \n"])
@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_a_reply_with_only_reasoning_says_so_and_what_to_do(tmp_path, server, fast_retry, content, field):
    # the verdict sits in the reasoning: it is never read as the verdict
    server.rules = [(lambda info: True, _thinking_only(content, "stop", reasoning=THOUGHTS + VERDICT, field=field))]
    res = run_sync(CASES[:1], _config(server, tmp_path, fast_retry, max_tokens=500))
    row = res.rows[0]
    assert server.requests == 1 and row["status"] == "failed" and row["score"] is None
    assert row["error_kind"] == "empty"
    # before: "output empty: the model returned no output with finish_reason stop at max_tokens=500; a larger
    # budget would not change it", no word of the reasoning nor of what to do
    n = len(THOUGHTS + VERDICT)
    assert f"only reasoning text ({n} characters)" in row["error"] and "no answer" in row["error"]
    assert "thinking off" in row["error"] and "max_tokens=" in row["error"]


def test_an_empty_reply_without_reasoning_keeps_its_message(tmp_path, server, fast_retry):
    server.rules = [(lambda info: True, {"content": "", "finish_reason": "stop"})]
    res = run_sync(CASES[:1], _config(server, tmp_path, fast_retry, max_tokens=500))
    row = res.rows[0]
    assert row["error_kind"] == "empty" and "reasoning" not in row["error"]
    assert "a larger budget would not change it" in row["error"]


# -- custom metrics, as a user writes them ------------------------------------------------------------------------------
def test_a_metric_file_table_other_than_metrics_is_named_not_ignored(tmp_path):
    from ragmeter.errors import InputError
    from ragmeter.judge.custom import load_metric_file

    path = tmp_path / "m.toml"
    # a typo'd table beside a good one: before, 'grounded' was silently not judged
    path.write_text('[metrics.tone]\ncriteria = "Is the answer polite?"\n\n'
                    '[metric.grounded]\ncriteria = "Is the answer grounded?"\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"m\.toml: unknown table or key 'metric' .*\[metrics\.<name>\]"):
        load_metric_file(path)


@pytest.mark.parametrize("suffix,text", [(".json", '{"metrics": {"tone": {"criteria": "x"}}}'),
                                         (".yaml", "metrics:\n  tone:\n    criteria: x\n")])
def test_a_json_or_yaml_metric_file_is_told_the_file_is_read_as_toml(tmp_path, suffix, text):
    from ragmeter.errors import InputError
    from ragmeter.judge.custom import load_metric_file

    path = tmp_path / f"m{suffix}"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=r"--metric-file reads TOML"):
        load_metric_file(path)


def _scorer(reply, case):
    return 1.0 if reply["blue"] else 0.0


def _decorate(**options):
    from ragmeter.judge import metric

    return metric("says_blue", prompt='Does "answer" say blue?', schema={"blue": bool}, fields=("answer",),
                  **options)(_scorer)


@pytest.mark.parametrize("scale", [("a", "b"), (1,), "0-1", (0, float("inf")), (float("nan"), 1), (True, 2),
                                   (1, 1), (2, 1), None])
def test_a_decorated_metric_scale_must_be_two_finite_numbers_low_first(scale):
    from ragmeter.errors import InputError

    # before: ValueError or TypeError tracebacks ("could not convert string to float: 'a'"), or an infinite scale kept
    with pytest.raises(InputError, match=r"metric 'says_blue': scale must be two finite numbers \(low, high\)"):
        _decorate(scale=scale)


@pytest.mark.parametrize("threshold", ["high", True, 7, -1, float("nan")])
def test_a_decorated_metric_pass_threshold_must_be_a_number_on_its_scale(threshold):
    from ragmeter.errors import InputError

    # before: accepted, to crash or mislead at the end of the run
    with pytest.raises(InputError, match=r"metric 'says_blue': pass_threshold"):
        _decorate(pass_threshold=threshold)


def test_a_decorated_metric_pass_threshold_decides_the_pass_rate(tmp_path, server, fast_retry):
    from ragmeter.judge.metrics import MetricResult

    blue = _decorate(pass_threshold=0.5)

    @__import__("ragmeter.judge", fromlist=["metric"]).metric(
        "says_blue_own", prompt='Does "answer" say blue?', schema={"blue": bool}, fields=("answer",),
        pass_threshold=0.5)
    def own(reply, case):  # its own verdict on passing wins
        return MetricResult(score=1.0, correct=False)

    server.replies["custom-says-blue"] = lambda payload: {"blue": True}
    server.replies["custom-says-blue-own"] = lambda payload: {"blue": True}
    res = run_sync(CASES, JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=[blue, own],
                                      cache=tmp_path / "c.sqlite", retry=fast_retry, progress=False))
    rows = {m: [r for r in res.rows if r["metric"] == m] for m in ("says_blue", "says_blue_own")}
    assert [r["score"] for r in rows["says_blue"]] == [1.0] * 3
    # before: every case scored 1.0 at a threshold of 0.5, and the pass rate said 0% (correct never set)
    assert [r["correct"] for r in rows["says_blue"]] == [True] * 3
    assert res.summary["metrics"]["says_blue"]["pass_rate"] == 1.0
    assert res.summary["metrics"]["says_blue_own"]["pass_rate"] == 0.0


def test_a_score_description_naming_a_field_the_metric_lacks_is_refused():
    from ragmeter.errors import InputError
    from ragmeter.judge import RubricMetric

    # before: accepted; the judge read "{policy}" literally, the policy itself never sent
    with pytest.raises(InputError, match=r"metric 'tone': the prompt references field 'policy'"):
        RubricMetric("tone", criteria="Is the answer polite?", fields=("answer",),
                     score_descriptions={5: "follows {policy}", 1: "ignores it"})


def test_a_numpy_number_from_a_scoring_function_is_a_score(tmp_path, server, fast_retry):
    np = pytest.importorskip("numpy")
    from ragmeter.judge import metric

    @metric("blue_count", prompt='Does "answer" say blue?', schema={"blue": bool}, fields=("answer",))
    def blue_count(reply, case):
        return np.sum([reply["blue"]])  # numpy.int64, as a count taken with numpy is

    server.replies["custom-blue-count"] = lambda payload: {"blue": True}
    res = run_sync(CASES[:1], JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=[blue_count],
                                          cache=tmp_path / "c.sqlite", retry=fast_retry, progress=False))
    # before: failed as metric_error, "the scoring function returned 1, not a finite number"
    assert res.rows[0]["status"] == "ok" and res.rows[0]["score"] == 1.0


def test_a_metric_bound_to_two_names_in_a_module_is_one_metric(tmp_path):
    from ragmeter.judge.custom import load_metric_module

    module = tmp_path / "aliased.py"
    module.write_text('from ragmeter.judge import RubricMetric\n'
                      'tone = RubricMetric("tone", criteria="Is the answer polite?", fields=("answer",))\n'
                      'TONE = tone  # an alias, as a module exporting a constant does\n', encoding="utf-8")
    # before: listed twice, and the command refused it: "metric 'tone' is also defined in aliased.py"
    assert [m.name for m in load_metric_module(module)] == ["tone"]


# -- thoughts in the content with no answer after them: reasoning, never the verdict ---------------------------------
DRAFT = json.dumps({"reason": "a first draft", "score": 1, "correct": False})
THOUGHTS_ONLY = [
    f"<think>The reference says blue. A draft: {DRAFT}</think>",    # the thoughts, closed, nothing after
    f"The reference says blue. A draft: {DRAFT}\n</think>",         # opening tag in the prompt (DeepSeek-R1, QwQ)
    f"<think>The reference says blue. A draft: {DRAFT} and then",   # opened, never closed
]


@pytest.mark.parametrize("text", THOUGHTS_ONLY)
def test_thoughts_with_no_answer_after_them_are_not_parsed_as_the_verdict(text):
    from ragmeter.judge.engine import ParseError, parse_json_object

    # before: the draft inside the thoughts was read as the verdict (score 1) for the last two
    with pytest.raises(ParseError, match="only reasoning"):
        parse_json_object(text)


@pytest.mark.parametrize("text", THOUGHTS_ONLY)
def test_a_reply_of_thoughts_alone_fails_saying_so_without_a_repair_turn(tmp_path, server, fast_retry, text):
    server.rules = [(lambda info: True, {"content": text, "finish_reason": "stop"})]
    res = run_sync(CASES[:1], _config(server, tmp_path, fast_retry, max_tokens=500))
    row = res.rows[0]
    # before: scored 1 from the draft, or a repair turn paid for and the row failed "unparsable: empty reply"
    assert server.requests == 1 and row["status"] == "failed" and row["error_kind"] == "empty"
    assert f"only reasoning text ({len(text.strip())} characters)" in row["error"]


def test_an_answer_after_closed_thoughts_is_still_read(tmp_path, server, fast_retry):
    server.rules = [(lambda info: True, {"content": f"<think>A draft: {DRAFT}</think>\n{VERDICT}"})]
    res = run_sync(CASES[:1], _config(server, tmp_path, fast_retry))
    assert res.rows[0]["status"] == "ok" and res.rows[0]["score"] == 5.0 and server.requests == 1


def test_reasoning_that_fills_the_context_window_is_not_told_to_raise_the_cap(tmp_path, server, fast_retry):
    server.rules = [(lambda info: True, "empty")]
    res = run_sync(CASES[:1], _config(server, tmp_path, fast_retry, max_tokens=500, max_retry_tokens=8000,
                                      context_size=1200))
    error = res.rows[0]["error"]
    # the context window, not the cap, stopped the doubling: a larger cap would not help
    assert "context window" in error and "only reasoning text" in error and "max_retry_tokens" not in error
    assert "thinking off" in error


# -- reasoning the endpoint hides (OpenAI's o-series: only a count in usage.completion_tokens_details) ---------------
def _hidden_reasoning(finish: str, completion_tokens: int, reasoning_tokens: int) -> dict:
    return {"status": 200, "body": json.dumps({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 50, "completion_tokens": completion_tokens,
                  "completion_tokens_details": {"reasoning_tokens": reasoning_tokens}}})}


def test_an_empty_reply_after_hidden_reasoning_says_the_tokens_went_to_reasoning(tmp_path, server, fast_retry):
    server.rules = [(lambda info: True, _hidden_reasoning("stop", 320, 320))]
    res = run_sync(CASES[:1], _config(server, tmp_path, fast_retry, max_tokens=500))
    row = res.rows[0]
    assert server.requests == 1 and row["status"] == "failed" and row["error_kind"] == "empty"
    # before: "output empty: the model returned no output ...", with no word of the 320 tokens of reasoning
    assert "320 reasoning tokens" in row["error"] and "no answer" in row["error"]
    assert "thinking off" in row["error"] or "reasoning effort" in row["error"]


def test_hidden_reasoning_that_used_the_whole_budget_doubles_it_and_says_so_at_the_cap(tmp_path, server, fast_retry):
    server.rules = [(lambda info: True, _hidden_reasoning("length", 10**6, 10**6))]
    res = run_sync(CASES[:1], _config(server, tmp_path, fast_retry, max_tokens=500))
    row = res.rows[0]
    assert row["status"] == "failed" and row["error_kind"] == "truncated" and server.requests > 1
    assert "reasoning tokens" in row["error"] and "max_retry_tokens=" in row["error"]


@pytest.mark.parametrize("version", ["", "  ", 3, None])
def test_a_decorated_metric_version_must_be_a_non_empty_text_as_a_rubrics_must(version):
    from ragmeter.errors import InputError
    from ragmeter.judge import metric

    # before: accepted, and '3' or '' became part of the prompt version recorded in judge.parquet
    with pytest.raises(InputError, match=r"metric 'cited': version must be a non-empty text"):
        metric("cited", prompt='Does the answer cite? Schema: {"cited": <true or false>}', schema={"cited": bool},
               version=version)(lambda reply, case: 1.0)


@pytest.mark.parametrize("rpm", [1e-300, 0.05])
def test_an_rpm_that_would_never_send_the_second_call_is_refused_as_collect_refuses_it(rpm):
    from ragmeter.errors import InputError

    # before: accepted (> 0), and the run hung after the first call, as `collect --rpm 1e-300` did
    with pytest.raises(InputError, match=r"^rpm: must be at least 0\.1 \(one request every 10 minutes\)"):
        JudgeConfig(base_url="http://127.0.0.1:9/v1", model="m", metrics=["correctness"], rpm=rpm)
    JudgeConfig(base_url="http://127.0.0.1:9/v1", model="m", metrics=["correctness"], rpm=0.1)  # the floor is kept


@pytest.mark.parametrize("attempts", [101, 10**9])
def test_retry_attempts_beyond_a_hundred_are_refused_naming_the_flag(attempts, tmp_path, capsys):
    from ragmeter.cli import main
    from ragmeter.judge.retry import RetryPolicy

    # before: taken as given; one case answered 500 forever retried for practically ever (back-off capped at 30 s)
    with pytest.raises(ValueError, match="max_attempts must be between 1 and 100"):
        RetryPolicy(max_attempts=attempts)
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "q1", "question": "Why?", "answer": "Because.", "reference_answer": "So."})
                     + "\n", encoding="utf-8")
    for argv in (["judge", "--cases", str(cases), "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                  "--out", str(tmp_path / "j")],
                 ["collect", "--golden", str(tmp_path / "absent.jsonl"), "--target", "nomodule:ask",
                  "--out", str(tmp_path / "run.jsonl")]):
        assert main(argv + ["--retry-attempts", str(attempts)]) == 2
        err = capsys.readouterr().err
        assert "error: --retry-attempts: must be an integer between 1 and 100" in err and "Traceback" not in err


# -- Ctrl-C: the calls in flight are paid for; their replies come back and are kept ---------------------------------
def test_ctrl_c_gives_the_calls_in_flight_time_to_come_back_and_caches_their_replies(tmp_path, server, api_key):
    import os
    import signal
    import sqlite3
    import time

    from test_cli import cli, write_cases

    cases = write_cases(tmp_path / "cases.jsonl", 8)
    served = 6
    server.timeout_sleep = 1.5  # the calls after the first `served` take 1.5 s: in flight at the interrupt
    server.rules = [(lambda info: server.requests > served, "timeout")]
    p = cli(tmp_path, server, "--cases", str(cases), "--concurrency", "3", key=api_key)
    deadline = time.monotonic() + 30
    while server.requests < served + 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "Traceback" not in err, err
    with sqlite3.connect(tmp_path / "cache.sqlite") as conn:
        n = conn.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0]
    # before: the three calls in flight were cancelled at once, their replies lost, a rerun paid for them again
    assert n == served + 3, err
    assert "waiting" in err and f"{n} replies are cached" in err.strip().splitlines()[-1]


def test_ctrl_c_without_a_cache_does_not_wait_for_replies_it_could_not_keep(tmp_path, server, api_key):
    import os
    import signal
    import time

    from test_cli import cli, write_cases

    cases = write_cases(tmp_path / "cases.jsonl", 8)
    server.rules = [(lambda info: server.requests > 2, "hang")]
    p = cli(tmp_path, server, "--cases", str(cases), "--concurrency", "3", "--no-cache", key=api_key)
    deadline = time.monotonic() + 30
    while server.requests < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=60)
    server.release()
    # with --no-cache a reply that comes back is kept nowhere: waiting for it (and saying it is cached) was wrong
    assert p.returncode == 130 and "waiting" not in err and "cached" not in err.split("interrupted: ")[-1], err
