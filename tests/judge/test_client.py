"""The client against the scripted local server: retries, doubling, limits."""
from __future__ import annotations

import asyncio
import json
import time

import pytest

from ragmeter.judge import ClientConfig, JudgeCallError, JudgeClient, Limits, RetryPolicy

MSGS = [{"role": "system", "content": "Task: correctness (prompt v1)\nx"},
        {"role": "user", "content": json.dumps({"question": "q", "reference_answer": "a", "answer": "a"})}]


def chat(server, *, policy, max_tokens=2000, cap=8000, limits=None, timeout=5.0, json_mode="auto", n=1):
    async def go():
        cfg = ClientConfig(base_url=server.base_url, model="m", timeout=timeout, policy=policy,
                           max_retry_tokens=cap, json_mode=json_mode)
        async with JudgeClient(cfg, limits or Limits(concurrency=4)) as client:
            if n == 1:
                return await client.chat(MSGS, max_tokens=max_tokens)
            return await asyncio.gather(*(client.chat(MSGS, max_tokens=max_tokens) for _ in range(n)),
                                        return_exceptions=True)
    return asyncio.run(go())


def test_ok_and_api_key_sent_only_in_header(server, fast_retry):
    res = chat(server, policy=fast_retry)
    assert json.loads(res.content)["score"] == 5
    assert server.log[0]["auth_ok"] and server.log[0]["json_mode"]
    assert len(res.attempts) == 1 and res.attempts[0]["status"] == 200


@pytest.mark.parametrize("failure", [500, 503, "timeout", "drop", "garbage",
                                     {"status": 429, "headers": {"retry-after-ms": "20"}}])
def test_transient_failures_are_retried(server, fast_retry, failure):
    server.script = [failure, failure, "ok"]
    res = chat(server, policy=fast_retry, timeout=0.3)
    assert json.loads(res.content)["correct"] is True
    assert [a.get("status") for a in res.attempts][-1] == 200
    assert len(res.attempts) == 3 and server.requests == 3


def test_gives_up_with_explicit_error(server, fast_retry):
    server.script = [503] * 10
    with pytest.raises(JudgeCallError) as ei:
        chat(server, policy=fast_retry)
    assert ei.value.kind == "server" and len(ei.value.attempts) == fast_retry.max_attempts
    assert server.requests == fast_retry.max_attempts


def test_400_fails_at_once(server, fast_retry):
    server.script = [{"status": 400, "body": json.dumps({"error": {"message": "bad request: messages"}})}]
    with pytest.raises(JudgeCallError) as ei:
        chat(server, policy=fast_retry)
    assert ei.value.kind == "client" and "bad request" in str(ei.value)
    assert server.requests == 1


@pytest.mark.parametrize("status,kind", [(401, "auth"), (404, "not_found")])
def test_auth_and_not_found_fail_at_once(server, fast_retry, status, kind):
    server.script = [status]
    with pytest.raises(JudgeCallError) as ei:
        chat(server, policy=fast_retry)
    assert ei.value.kind == kind and server.requests == 1


def test_quota_429_fails_at_once(server, fast_retry):
    server.script = [{"status": 429, "headers": {"Retry-After": "1"},
                      "body": json.dumps({"error": {"code": "insufficient_quota", "message": "quota"}})}]
    with pytest.raises(JudgeCallError) as ei:
        chat(server, policy=fast_retry)
    assert ei.value.kind == "quota" and server.requests == 1


def test_retry_after_is_honoured(server, fast_retry):
    server.script = [{"status": 429, "headers": {"Retry-After": "1"}}, {"status": 503, "headers": {"retry-after-ms": "300"}}]
    chat(server, policy=fast_retry)
    t = [r["t_in"] for r in server.log]
    assert len(t) == 3
    assert t[1] - t[0] >= 1.0
    assert t[2] - t[1] >= 0.3


def test_retry_after_is_capped(server):
    policy = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05, max_retry_after=0.2)
    server.script = [{"status": 429, "headers": {"Retry-After": "30"}}]
    res = chat(server, policy=policy)
    t = [r["t_in"] for r in server.log]
    assert 0.2 <= t[1] - t[0] < 2.0
    assert res.attempts[0]["retry_after_s"] == 30.0 and res.attempts[0]["retry_in_s"] == 0.2


def test_empty_reasoning_output_doubles_budget_up_to_cap_then_fails(server, fast_retry):
    server.script = ["empty"] * 10
    with pytest.raises(JudgeCallError) as ei:
        chat(server, policy=fast_retry, max_tokens=2000, cap=8000)
    assert [r["max_tokens"] for r in server.log] == [2000, 4000, 8000]
    err = ei.value
    # reasoning that ran out of budget is a reply cut short (session 28: it was "empty", with no word of why)
    assert err.kind == "truncated" and "8000" in str(err) and "only reasoning text" in str(err)
    assert [a["max_tokens"] for a in err.attempts] == [2000, 4000, 8000]
    assert all(a["finish_reason"] == "length" and a["reasoning_chars"] > 0 for a in err.attempts)
    assert err.completion_tokens > 0  # truncated attempts are billed and reported


def test_truncated_output_doubles_then_succeeds(server, fast_retry):
    server.script = ["truncated", "ok"]
    res = chat(server, policy=fast_retry, max_tokens=2000, cap=8000)
    assert [r["max_tokens"] for r in server.log] == [2000, 4000]
    assert res.max_tokens == 4000 and json.loads(res.content)["score"] == 5
    assert [a["outcome"] for a in res.attempts] == ["truncated", "ok"]


def test_doubling_capped_by_max_retry_tokens(server, fast_retry):
    server.script = ["empty"] * 10
    with pytest.raises(JudgeCallError):
        chat(server, policy=fast_retry, max_tokens=2000, cap=5000)
    assert [r["max_tokens"] for r in server.log] == [2000, 4000, 5000]


def test_json_mode_dropped_when_unsupported(server, fast_retry):
    server.script = [{"status": 400, "body": json.dumps({"error": {"message": "response_format is not supported"}})}]
    res = chat(server, policy=fast_retry)
    assert [r["json_mode"] for r in server.log] == [True, False]
    assert res.content


def test_concurrency_limit_respected(server, fast_retry):
    server.latency = 0.05
    chat(server, policy=fast_retry, limits=Limits(concurrency=3), n=12)
    assert server.requests == 12 and server.max_in_flight == 3


def test_rpm_limit_respected_by_request_timestamps(server, fast_retry, monkeypatch):
    from ragmeter.judge import limits as limits_module

    # The limiter's own release times: the server's arrival times add the loopback's and the event loop's
    # jitter, which bunches requests together under load and is not the client's to control.
    released = []
    enter = limits_module._Slot.__aenter__

    async def recorded(slot):
        entered = await enter(slot)
        released.append(time.monotonic())
        return entered

    monkeypatch.setattr(limits_module._Slot, "__aenter__", recorded)
    rpm = 1200  # 20 per second, burst of 20 per 1-second period
    chat(server, policy=fast_retry, limits=Limits(concurrency=50, rpm=rpm), n=50)
    assert len(server.log) == 50
    arrived = sorted(r["wall_in"] for r in server.log)
    # after the first burst of 20, the remaining 30 need about 1.5 s (delays only lengthen it)
    assert arrived[-1] - arrived[0] >= 30 / 20 * 0.9
    t = sorted(released)
    assert len(t) == 50
    assert t[-1] - t[0] >= 30 / 20 * 0.9
    # no sliding one-second window holds more than burst + rate
    for i, t0 in enumerate(t):
        assert sum(1 for x in t[i:] if x < t0 + 1.0) <= 40
    # after the burst, releases are paced: no window of 0.5 s after t0+1 holds more than 10 + 1
    later = [x for x in t if x >= t[0] + 1.0]
    for i, t0 in enumerate(later):
        assert sum(1 for x in later[i:] if x < t0 + 0.5) <= 11


def test_tpm_limit_weighted_by_estimated_tokens(server, fast_retry):
    # each request is weighted ~ prompt estimate + max_tokens (500); tpm 6000 = one minute bucket of 6000
    # tokens: about 11 requests fit at once, the rest would need to wait for the bucket to drain
    async def go():
        limits = Limits(concurrency=50, tpm=6000)
        cfg = ClientConfig(base_url=server.base_url, model="m", policy=fast_retry)
        async with JudgeClient(cfg, limits) as client:
            tasks = [asyncio.ensure_future(client.chat(MSGS, max_tokens=500)) for _ in range(20)]
            await asyncio.sleep(1.0)
            done = sum(t.done() for t in tasks)
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            return done
    done = asyncio.run(go())
    assert 8 <= done <= 12


def test_embeddings(server, fast_retry):
    async def go():
        cfg = ClientConfig(base_url=server.base_url, model="m", policy=fast_retry, embeddings_model="e")
        async with JudgeClient(cfg) as client:
            return await client.embed(["a b", "c"])
    server.script = [503]
    res = asyncio.run(go())
    assert len(res.vectors) == 2 and len(res.vectors[0]) == 16 and len(res.attempts) == 2


def test_a_500_to_several_embedding_inputs_falls_back_to_one_input_per_request(server, fast_retry):
    """llama-cpp-python's server answers 500 to a multi-input batch; the client resends one input at a time."""
    server.rules = [(lambda info: info["task"] == "embeddings" and len(info["payload"].get("input") or []) > 1, 500)]

    async def go():
        cfg = ClientConfig(base_url=server.base_url, model="m", policy=fast_retry, embeddings_model="e")
        async with JudgeClient(cfg) as client:
            return await client.embed(["a b", "c"]), await client.embed(["d", "e f"])
    first, second = asyncio.run(go())
    assert len(first.vectors) == 2 and len(second.vectors) == 2
    assert [(a.get("status"), a.get("outcome")) for a in first.attempts][0] == (500, "batch_rejected")
    assert [a.get("status") for a in first.attempts][1:] == [200, 200]
    # the fallback is remembered: the second call never sends a batch
    assert [a.get("status") for a in second.attempts] == [200, 200]
    sizes = [len(e["payload"]["input"]) for e in server.log]
    assert sizes == [2, 1, 1, 1, 1]


def test_a_500_to_one_embedding_input_is_not_a_batch_fallback(server, fast_retry):
    server.rules = [(lambda info: info["task"] == "embeddings", 500)]

    async def go():
        cfg = ClientConfig(base_url=server.base_url, model="m", policy=fast_retry, embeddings_model="e")
        async with JudgeClient(cfg) as client:
            return await client.embed(["a b"])
    with pytest.raises(JudgeCallError):
        asyncio.run(go())
    assert all(len(e["payload"]["input"]) == 1 for e in server.log) and len(server.log) == fast_retry.max_attempts


def test_a_server_failing_every_embeddings_request_is_not_taken_for_a_batch_limit(server, fast_retry):
    """A 500 that single inputs get too is the server failing: the call fails, and once the server is back
    the next call sends its inputs in one request again (the one-input fallback is kept only when it worked)."""
    down = {"now": True}
    server.rules = [(lambda info: info["task"] == "embeddings" and down["now"], 500)]

    async def go():
        cfg = ClientConfig(base_url=server.base_url, model="m", policy=fast_retry, embeddings_model="e")
        async with JudgeClient(cfg) as client:
            with pytest.raises(JudgeCallError):
                await client.embed(["a b", "c"])
            down["now"] = False
            return await client.embed(["d", "e f"])
    second = asyncio.run(go())
    assert len(second.vectors) == 2 and [a.get("status") for a in second.attempts] == [200]
    assert len(server.log[-1]["payload"]["input"]) == 2
