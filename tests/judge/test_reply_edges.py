"""Replies the judge client must not pay for again: an empty reply the model ended itself (no budget doubling);
and a 200 with no choices, a malformed reply retried with back-off like any unreadable 200."""
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
    assert ei.value.kind == "empty" and "max_retry_tokens=" in str(ei.value)


# -- a 200 with no choices: a malformed reply, retried ----------------------------------------------------------
NO_CHOICES = {"status": 200, "body": json.dumps({"id": "x", "choices": [],
                                                 "usage": {"prompt_tokens": 7, "completion_tokens": 0}})}


@pytest.mark.parametrize("body", ['{"id":"x","choices":[]}', '{"id":"x"}'])
def test_a_reply_with_no_choices_is_retried_like_an_unreadable_200(server, fast_retry, body):
    server.script = [{"status": 200, "body": body}] * 2 + ["ok"]
    res = chat(server, policy=fast_retry)
    assert server.requests == 3 and json.loads(res.content)["score"] == 5
    assert [a["outcome"] for a in res.attempts] == ["bad_response", "bad_response", "ok"]
    assert all(a["retry_in_s"] >= 0 for a in res.attempts[:2])  # each retry went through the back-off


def test_tokens_billed_by_a_no_choices_reply_are_counted(server, fast_retry):
    server.script = [NO_CHOICES, NO_CHOICES, "ok"]
    res = chat(server, policy=fast_retry)
    ok_tokens = res.attempts[-1]["prompt_tokens"]
    assert res.prompt_tokens == 7 + 7 + ok_tokens


def test_always_no_choices_ends_as_bad_response_after_max_attempts(server, fast_retry):
    server.rules = [(lambda info: True, NO_CHOICES)]
    with pytest.raises(JudgeCallError) as ei:
        chat(server, policy=fast_retry)
    err = ei.value
    assert err.kind == "bad_response" and server.requests == fast_retry.max_attempts
    assert "no choices" in str(err) and f"gave up after {fast_retry.max_attempts} attempts" in str(err)
    assert len(err.attempts) == fast_retry.max_attempts
    assert err.prompt_tokens == 7 * fast_retry.max_attempts


# -- embeddings: a reply without its vectors is malformed, retried as any unreadable 200 ----------------------
@pytest.mark.parametrize("body", [{"object": "list"}, {"object": "list", "data": [{"index": 0, "embedding": [0.1]}]}])
def test_an_embeddings_reply_without_its_vectors_is_retried_then_fails_as_bad_response(server, fast_retry, body):
    import asyncio

    from ragmeter.judge import ClientConfig, JudgeClient

    async def go():
        cfg = ClientConfig(base_url=server.base_url, model="m", policy=fast_retry, embeddings_model="e")
        async with JudgeClient(cfg) as client:
            return await client.embed(["a b", "c"])
    bad = {"status": 200, "body": json.dumps(body)}
    server.script = [bad, bad]
    res = asyncio.run(go())  # two malformed replies, then the vectors
    assert len(res.vectors) == 2 and [a["outcome"] for a in res.attempts] == ["bad_response", "bad_response", "ok"]
    server.script = [bad] * fast_retry.max_attempts
    with pytest.raises(JudgeCallError) as ei:
        asyncio.run(go())
    assert ei.value.kind == "bad_response" and "expected 2 vectors" in str(ei.value)
    assert len(ei.value.attempts) == fast_retry.max_attempts
