"""What local servers (llama.cpp's among them) do that hosted APIs do not, replayed by the scripted server:
context overflow after generating, validation errors as 500/422, per-token embeddings, context-window metadata."""
from __future__ import annotations

import argparse
import asyncio
import json

import pytest

from ragmeter.judge import ClientConfig, JudgeCallError, JudgeClient, Limits
from ragmeter.judge.client import models_context_size
from ragmeter.judge.retry import classify

MSGS = [{"role": "system", "content": "Task: correctness (prompt v1)\nx"},
        {"role": "user", "content": json.dumps({"question": "q", "reference_answer": "a", "answer": "a"})}]

#: what llama-cpp-python's server answers when generation runs past n_ctx
LLAMA_DECODE = json.dumps({"error": {"message": "llama_decode returned 1", "type": "internal_server_error"}})


def chat(server, policy, *, max_tokens=2000, cap=8000, context_size=None):
    async def go():
        cfg = ClientConfig(base_url=server.base_url, model="m", timeout=5.0, policy=policy, max_retry_tokens=cap,
                           context_size=context_size)
        async with JudgeClient(cfg, Limits(concurrency=2)) as client:
            return await client.chat(MSGS, max_tokens=max_tokens)
    return asyncio.run(go())


@pytest.mark.parametrize("body", [LLAMA_DECODE, "Requested tokens (600) exceed context window of 512",
                                  '{"error": "n_ctx exceeded"}',
                                  "This model's maximum context length is 4096 tokens"])
def test_context_overflow_5xx_is_final(fast_retry, body):
    d = classify(attempt=1, policy=fast_retry, status=500, body=body)
    assert not d.retry and d.kind == "context_overflow" and "context window" in d.message


@pytest.mark.parametrize("body", ['{"error": "worker crashed"}', "llama_decode returned -1", "llama_decode returned 10"])
def test_other_500s_are_still_retried(fast_retry, body):
    assert classify(attempt=1, policy=fast_retry, status=500, body=body).kind == "server"


def test_context_overflow_500_is_sent_once(server, fast_retry):
    server.script = [{"status": 500, "body": LLAMA_DECODE}] * 6
    with pytest.raises(JudgeCallError) as ei:
        chat(server, fast_retry)
    assert server.requests == 1
    assert ei.value.kind == "context_overflow" and "llama_decode returned 1" in str(ei.value)


def test_doubling_stops_at_the_context_size(server, fast_retry):
    server.script = ["truncated"] * 6
    with pytest.raises(JudgeCallError) as ei:
        chat(server, fast_retry, max_tokens=2000, cap=8000, context_size=3050)
    # the fake server bills 50 prompt tokens here: 2000, then what the context leaves (3000), then stop
    assert [r["max_tokens"] for r in server.log] == [2000, 3000]
    assert ei.value.kind == "truncated" and "3050-token context window" in str(ei.value)


def test_context_size_from_models_metadata(server, fast_retry):
    server.models_action = {"object": "list", "data": [{"id": "other", "max_model_len": 99},
                                                       {"id": "m", "object": "model", "max_model_len": 2550}]}
    server.script = ["truncated"] * 6
    with pytest.raises(JudgeCallError):
        chat(server, fast_retry, max_tokens=2000)
    assert [r["max_tokens"] for r in server.log] == [2000, 2500]


def test_models_context_size_fields():
    one = lambda entry: json.dumps({"data": [entry]})  # noqa: E731
    assert models_context_size(one({"id": "x", "context_length": 8192}), "m") == 8192  # the only entry
    assert models_context_size(one({"id": "x", "meta": {"n_ctx": 512, "n_ctx_train": 4096}}), "x") == 512
    assert models_context_size(one({"id": "x", "meta": {"n_ctx_train": 4096}}), "x") is None
    assert models_context_size(json.dumps({"data": [{"id": "a", "max_model_len": 1}, {"id": "b"}]}), "m") is None
    assert models_context_size("<html>", "m") is None


@pytest.mark.parametrize("status", [400, 422, 500])
def test_json_mode_dropped_when_rejected_with_any_validation_status(server, fast_retry, status):
    body = json.dumps({"error": {"message": "response_format: json_schema is not supported"}})
    server.script = [{"status": status, "body": body}]
    res = chat(server, fast_retry)
    assert [r["json_mode"] for r in server.log] == [True, False]
    assert json.loads(res.content)["score"] == 5


def test_per_token_embeddings_fail_with_one_clear_line(server, fast_retry):
    per_token = {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [[0.1, 0.2]] * 3}],
                 "usage": {"prompt_tokens": 3, "total_tokens": 3}}
    server.script = [{"status": 200, "body": json.dumps(per_token)}] * 6

    async def go():
        cfg = ClientConfig(base_url=server.base_url, model="m", policy=fast_retry, embeddings_model="e")
        async with JudgeClient(cfg) as client:
            return await client.embed(["a b c"])
    with pytest.raises(JudgeCallError) as ei:
        asyncio.run(go())
    assert server.requests == 1  # not retried: the same server answers the same way
    assert ei.value.kind == "bad_embeddings"
    assert "the embeddings endpoint must return one vector per input" in str(ei.value)


def _parse(*argv):
    from ragmeter.cli import judge as judge_cli

    parser = argparse.ArgumentParser()
    judge_cli.configure(parser)
    args = parser.parse_args(["--cases", "c.jsonl", "--base-url", "http://127.0.0.1:1/v1", "--model", "m", *argv])
    return judge_cli.build_config(args)


def test_preset_local_and_explicit_options():
    plain = _parse()
    assert (plain.concurrency, plain.max_tokens, plain.max_retry_tokens, plain.timeout) == (8, 2000, 8000, 120.0)
    local = _parse("--preset", "local")
    assert (local.concurrency, local.max_tokens, local.max_retry_tokens, local.timeout) == (1, 512, 2048, 600.0)
    assert local.retry.max_attempts == 3
    mixed = _parse("--preset", "local", "--concurrency", "2", "--context-size", "4096")
    assert mixed.concurrency == 2 and mixed.max_tokens == 512 and mixed.context_size == 4096
    assert mixed.client_config().context_size == 4096


def test_output_cut_below_the_budget_is_not_doubled(server, fast_retry):
    # llama.cpp's server lowers max_tokens to what the context leaves and reports finish_reason "length"
    server.script = [{"content": '{"reason": "la la', "finish_reason": "length", "completion_tokens": 25}] * 4
    with pytest.raises(JudgeCallError) as ei:
        chat(server, fast_retry, max_tokens=2000)
    assert server.requests == 1
    assert ei.value.kind == "truncated" and "below the budget" in str(ei.value)
