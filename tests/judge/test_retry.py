"""The retry policy is a pure function: no server needed."""
from __future__ import annotations

import asyncio
import email.utils
import json

import aiohttp
import pytest
from hypothesis import given, strategies as st

from ragmeter.judge.retry import RetryPolicy, backoff_delay, classify, next_max_tokens, parse_retry_after

P = RetryPolicy(max_attempts=4, base_delay=1.0, max_delay=8.0, max_retry_after=30.0)


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 408])
def test_transient_statuses_are_retried(status):
    d = classify(attempt=1, policy=P, status=status, body="{}", rand=lambda: 0.5)
    assert d.retry and d.delay == pytest.approx(0.5)


@pytest.mark.parametrize("status,kind", [(400, "client"), (401, "auth"), (403, "auth"), (404, "not_found"),
                                         (422, "client"), (501, "client")])
def test_client_errors_fail_at_once(status, kind):
    body = json.dumps({"error": {"message": "bad thing", "type": "invalid_request_error"}})
    d = classify(attempt=1, policy=P, status=status, body=body)
    assert not d.retry and d.delay == 0 and d.kind == kind
    assert "bad thing" in d.message and str(status) in d.message


def test_quota_exhaustion_is_not_retried_even_as_429():
    body = json.dumps({"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}})
    d = classify(attempt=1, policy=P, status=429, headers={"Retry-After": "1"}, body=body)
    assert not d.retry and d.kind == "quota"


@pytest.mark.parametrize("exc,kind", [(asyncio.TimeoutError(), "timeout"),
                                      (aiohttp.ServerDisconnectedError(), "connection"),
                                      (aiohttp.ClientPayloadError("cut"), "connection"),
                                      (ConnectionResetError(), "connection")])
def test_exceptions(exc, kind):
    d = classify(attempt=2, policy=P, exc=exc, rand=lambda: 1.0)
    assert d.retry and d.kind == kind and d.delay == pytest.approx(2.0)


def test_unknown_exception_is_not_retried():
    assert not classify(attempt=1, policy=P, exc=RuntimeError("bug")).retry


def test_gives_up_after_max_attempts():
    d = classify(attempt=4, policy=P, status=503)
    assert not d.retry and "4 attempts" in d.message and d.kind == "server"


def test_retry_after_seconds_ms_and_date_honoured_under_cap():
    assert classify(attempt=1, policy=P, status=429, headers={"Retry-After": "7"}).delay == 7.0
    assert classify(attempt=1, policy=P, status=429, headers={"retry-after-ms": "250"}).delay == 0.25
    # retry-after-ms wins over Retry-After (more precise)
    assert classify(attempt=1, policy=P, status=503, headers={"Retry-After": "3", "retry-after-ms": "1500"}).delay == 1.5
    assert classify(attempt=1, policy=P, status=429, headers={"Retry-After": "600"}).delay == 30.0  # the cap
    # (from 30 minutes on it is a usage cap, which stops the run: test_judge_engine_s27)
    date = email.utils.formatdate(1_000_010.0, usegmt=True)
    assert parse_retry_after({"Retry-After": date}, now=1_000_000.0) == pytest.approx(10.0)
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None
    d = classify(attempt=1, policy=P, status=429, headers={"Retry-After": "2"})
    assert d.retry_after == 2.0


@given(attempt=st.integers(1, 50), r=st.floats(0, 1))
def test_full_jitter_is_bounded_by_the_capped_exponential(attempt, r):
    d = backoff_delay(attempt, P, lambda: r)
    assert 0 <= d <= min(P.max_delay, P.base_delay * 2 ** (attempt - 1)) + 1e-12


def test_budget_doubling_sequence_and_cap():
    seq = [2000]
    while (nxt := next_max_tokens(seq[-1], 8000)) is not None:
        seq.append(nxt)
    assert seq == [2000, 4000, 8000]
    seq = [2000]
    while (nxt := next_max_tokens(seq[-1], 5000)) is not None:
        seq.append(nxt)
    assert seq == [2000, 4000, 5000]
    assert next_max_tokens(8000, 8000) is None


def test_200_with_unreadable_body_is_retried():
    d = classify(attempt=1, policy=P, status=200, body="<html>", rand=lambda: 0.0)
    assert d.retry and d.kind == "bad_response"


def test_a_quota_worded_429_that_says_when_to_retry_is_a_rate_limit():
    body = json.dumps({"error": {"message": "Quota exceeded for metric: requests per minute", "code": 429}})
    assert classify(attempt=1, policy=RetryPolicy(), status=429, body=body).kind == "quota"
    d = classify(attempt=1, policy=RetryPolicy(), status=429, body=body, headers={"Retry-After": "7"})
    assert d.retry and d.kind == "rate_limit" and d.delay == 7
    with_delay = json.dumps({"error": {"message": "Quota exceeded", "details": [{"retryDelay": "42s"}]}})
    assert classify(attempt=1, policy=RetryPolicy(), status=429, body=with_delay).kind == "rate_limit"
