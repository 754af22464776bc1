"""Replies the judge client must not pay for again: an empty reply the model ended itself (no budget doubling)."""
from __future__ import annotations

import json

import pytest

from ragmeter.judge import JudgeCallError

from test_client import chat  # noqa: E402 (tests/judge is on sys.path: conftest.py)


# -- an empty reply: double the budget only when the budget may be why ---------------------------------------
@pytest.mark.parametrize("finish", ["stop", "eos"])
def test_an_empty_reply_the_model_ended_itself_fails_at_once(server, fast_retry, finish):
    server.rules = [(lambda info: True, {"content": "", "finish_reason": finish})]
    with pytest.raises(JudgeCallError) as ei:
        chat(server, policy=fast_retry, max_tokens=2000, cap=8000)
    # before: 2000, 4000 and 8000 were each sent (and paid) for the same empty reply
    assert [r["max_tokens"] for r in server.log] == [2000]
    err = ei.value
    assert err.kind == "empty"
    assert f"finish_reason {finish}" in str(err) and "larger budget would not change it" in str(err)
    assert [a["outcome"] for a in err.attempts] == ["empty"]
    # the one billed attempt is still counted
    assert err.prompt_tokens == err.attempts[0]["prompt_tokens"] > 0
    assert err.completion_tokens == err.attempts[0]["completion_tokens"] > 0


def test_whitespace_only_content_counts_as_empty(server, fast_retry):
    server.rules = [(lambda info: True, {"content": " \n ", "finish_reason": "stop"})]
    with pytest.raises(JudgeCallError) as ei:
        chat(server, policy=fast_retry, max_tokens=2000, cap=8000)
    assert ei.value.kind == "empty" and server.requests == 1


@pytest.mark.parametrize("reply", [
    {"content": "", "finish_reason": None},                            # the server gives no finish_reason
    {"content": "", "finish_reason": "stop", "completion_tokens": 2000},  # ...or says stop, yet used the budget
])
def test_an_empty_reply_that_may_have_run_out_of_budget_still_doubles(server, fast_retry, reply):
    server.script = [reply, "ok"]
    res = chat(server, policy=fast_retry, max_tokens=2000, cap=8000)
    assert [r["max_tokens"] for r in server.log] == [2000, 4000]
    assert res.max_tokens == 4000 and json.loads(res.content)["score"] == 5
    assert [a["outcome"] for a in res.attempts] == ["empty", "ok"]


def test_an_empty_reply_cut_at_length_still_doubles_to_the_cap(server, fast_retry):
    server.rules = [(lambda info: True, {"content": "", "finish_reason": "length"})]
    with pytest.raises(JudgeCallError) as ei:
        chat(server, policy=fast_retry, max_tokens=2000, cap=8000)
    assert [r["max_tokens"] for r in server.log] == [2000, 4000, 8000]
    assert ei.value.kind == "empty" and "--max-retry-tokens" in str(ei.value)
