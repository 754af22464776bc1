"""The one retry layer of the judge client, as pure functions.

:func:`classify` looks at what came back from one HTTP attempt (status, headers,
body, or the exception raised) and returns a :class:`Decision`: retry or not,
how long to wait, and why. It has no side effects and takes its randomness as
an argument, so it is tested without a server.

:func:`next_max_tokens` is the budget-doubling rule for outputs cut short
(``finish_reason == "length"``, a reply that is all reasoning at the budget
included: reasoning models that spent the whole budget thinking) or empty
because the budget may have run out: an empty output is
re-sent with a larger budget when its ``finish_reason`` is ``"length"`` or
missing, or when ``usage.completion_tokens`` shows the whole budget was used.
An empty output the model ended itself below the budget (``finish_reason``
``"stop"``, ``"eos"`` or any other) fails at once with kind ``empty``: a larger
budget would not change it, and its billed tokens are still counted.
"""
from __future__ import annotations

import asyncio
import email.utils
import json
import math
import random
import re
import time
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Optional

from ragmeter._front import option, spelled

from .urls import scrub_urls

__all__ = ["RetryPolicy", "Decision", "classify", "is_context_overflow", "is_unknown_model", "backoff_delay",
           "parse_retry_after", "next_max_tokens", "reply_status", "MAX_ATTEMPTS", "check_retry_attempts"]

#: Statuses retried with back-off. 5xx are all retried except 501 (not implemented).
RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
#: Error codes in a body meaning the account is out of quota or credit: retrying cannot help.
QUOTA_CODES = ("insufficient_quota", "billing_hard_limit_reached", "insufficient_balance", "insufficient balance")
#: Wording that means the same unless the answer says when to come back (some APIs word rate limits so).
QUOTA_WORDS = ("quota_exceeded", "quota exceeded", "exceeded your current quota")
#: Wording of a 5xx that means prompt + output did not fit the model's context (llama.cpp answers 500
#: ``llama_decode returned 1``, no room left in its KV cache, after generating for a while): the same request
#: fails the same way again. (``llama_decode returned -1`` is a batch it cannot take, not a full context.)
_LLAMA_DECODE_FULL = re.compile(r"llama_decode returned 1\b")
CONTEXT_WORDS = ("context length", "context_length", "n_ctx", "exceed context window",
                 "context window", "context size", "maximum context")


#: Wording of a 400/422 that means the model asked for is not served (DeepSeek "Model Not Exist", LiteLLM
#: "Invalid model name", OpenAI-style "model_not_found" sent as 400): every request would get it.
_UNKNOWN_MODEL = re.compile(r"model_not_found|model[ _]not[ _]exist|no such model|(?:invalid|unknown) model"
                            r"|model\b[^.;]{0,80}?\b(?:does not exist|not found|doesn't exist)", re.I)


def is_unknown_model(status: Optional[int], body: Optional[str]) -> bool:
    """A 400/422 whose error body says the model asked for does not exist (OpenAI-compatible servers that do
    not answer 404 for it), also when a gateway sends it in a 2xx's error object."""
    if status is not None:
        status = reply_status(status, body)
    return status in (400, 422) and bool(_UNKNOWN_MODEL.search(_error_text(body)))


def reply_status(status: int, body: Optional[str]) -> int:
    """The HTTP status an answer stands for: a 2xx whose body is an error object naming an HTTP error status (or
    an exhausted quota, or a rate limit by name) stands for that status, a gateway answering everything 200;
    any other answer for its own. :func:`classify` decides by it, and the rate controller is told it, so that a
    throttle is a throttle however it is carried."""
    if 200 <= status < 300:
        return _carried_status(body) or status
    return status


#: the most attempts per call: beyond, one call failing for good (a 500 every time) keeps a run busy for hours
#: at the back-off's cap, a typo rather than a policy
MAX_ATTEMPTS = 100


def check_retry_attempts(value: object) -> int:
    """``--retry-attempts`` (judge, eval, collect) as an int from 1 to :data:`MAX_ATTEMPTS`, else an InputError
    naming the flag."""
    from ragmeter.errors import InputError

    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ATTEMPTS:
        raise InputError(f"--retry-attempts: must be an integer between 1 and {MAX_ATTEMPTS} (the first attempt "
                         f"included), got {value!r}")
    return value


@dataclass(frozen=True)
class RetryPolicy:
    """Back-off settings. Times are in seconds; tests use milliseconds."""

    max_attempts: int = 6          #: attempts per call for transient failures (first try included)
    base_delay: float = 0.5        #: back-off before the second attempt (upper bound of the jitter)
    max_delay: float = 30.0        #: cap of the exponential back-off
    max_retry_after: float = 60.0  #: cap applied to a server's Retry-After / retry-after-ms

    def __post_init__(self) -> None:
        if not 1 <= self.max_attempts <= MAX_ATTEMPTS:
            raise ValueError(f"max_attempts must be between 1 and {MAX_ATTEMPTS}")
        # NaN too: min(retry_after, nan) is retry_after, so a NaN cap would leave a server's Retry-After uncapped
        if not all(isinstance(d, (int, float)) and math.isfinite(d) and d >= 0
                   for d in (self.base_delay, self.max_delay, self.max_retry_after)):
            raise ValueError("delays must be finite numbers >= 0")


@dataclass(frozen=True)
class Decision:
    retry: bool
    delay: float   #: seconds to wait before the next attempt (0 when not retrying)
    kind: str      #: rate_limit, server, timeout, connection, bad_response, client, auth, not_found, quota,
    #: context_overflow, exhausted
    message: str   #: one line for the user; never contains request headers
    retry_after: Optional[float] = None  #: the server's own hint, before the cap


def parse_retry_after(headers: Optional[Mapping[str, str]], now: Optional[float] = None) -> Optional[float]:
    """Seconds the server asked us to wait, from ``retry-after-ms`` or ``Retry-After``.

    ``Retry-After`` may be a number of seconds or an HTTP date. Returns None when
    absent or unreadable (a value that is not a finite number, such as ``inf``, too); negative values become 0.
    """
    if not headers:
        return None
    lower = {str(k).lower(): v for k, v in headers.items()}
    raw_ms = lower.get("retry-after-ms")
    if raw_ms is not None:
        ms = _finite(raw_ms)
        if ms is not None:
            return max(0.0, ms / 1000.0)
    raw = lower.get("retry-after")
    if raw is None:
        return None
    raw = str(raw).strip()
    seconds = _finite(raw)  # "inf", "nan", "1e400": no wait can be read from it (Infinity is not JSON either)
    if seconds is not None:
        return max(0.0, seconds)
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    now = time.time() if now is None else now
    return max(0.0, when.timestamp() - now)


def _finite(text: object) -> Optional[float]:
    """``text`` as a finite number; None when it is not one."""
    try:
        value = float(str(text).strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def backoff_delay(attempt: int, policy: RetryPolicy, rand: Callable[[], float] = random.random) -> float:
    """Full jitter: uniform in [0, min(max_delay, base_delay * 2 ** (attempt - 1))]."""
    exp = min(policy.max_delay, policy.base_delay * (2.0 ** max(0, attempt - 1)))
    return rand() * exp


def _error_text(body: Optional[str]) -> str:
    """A short message from an error body (OpenAI style ``{"error": {"message": ...}}`` or plain text)."""
    if not body:
        return ""
    try:
        data = json.loads(body)
    except (ValueError, TypeError):
        return " ".join(str(body).split())[:300]
    err = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(err, dict):
        parts = [str(err.get(k)) for k in ("message", "code", "type") if err.get(k)]
        return "; ".join(parts)[:300]
    return str(err)[:300]


#: ``code``, ``type`` or ``status`` values of an error object that name a throttle without its number (OpenAI's
#: ``rate_limit_exceeded``, Anthropic's ``rate_limit_error`` and ``overloaded_error``): the status each stands for
_NAMED_THROTTLES = {"rate_limit_exceeded": 429, "rate_limit_error": 429, "too_many_requests": 429,
                    "overloaded_error": 529}


def _carried_status(body: Optional[str]) -> Optional[int]:
    """The HTTP status a 2xx body's error object stands for: 429 when it says the quota or credit is exhausted,
    else its ``code`` or ``status`` when that is an HTTP error status (400-599), else the status a throttle it
    names stands for (``rate_limit_exceeded``: 429); None otherwise (no error object, or an application's own
    code)."""
    if not body or '"error"' not in body:
        return None  # no error object (the usual reply, read on every answer): not worth decoding again
    try:
        data = json.loads(body or "")
    except (ValueError, TypeError):
        return None
    err = data.get("error") if isinstance(data, dict) else None
    if not isinstance(err, dict):
        return None
    text = json.dumps(err, ensure_ascii=False).lower()
    if any(code in text for code in QUOTA_CODES) or any(words in text for words in QUOTA_WORDS):
        return 429  # read as a 429 worded so: a quota, unless it says when to come back
    for name in ("code", "status"):
        value = err.get(name)
        if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():  # not "⁴⁰⁴"
            value = int(value.strip())
        if isinstance(value, int) and not isinstance(value, bool) and 400 <= value <= 599:
            return value
    for name in ("code", "type", "status"):
        value = err.get(name)
        if isinstance(value, str) and value.strip().lower() in _NAMED_THROTTLES:
            return _NAMED_THROTTLES[value.strip().lower()]
    return None


def _is_quota(status: int, headers: Optional[Mapping[str, str]], body: Optional[str]) -> bool:
    """Quota or credit exhausted (retrying cannot help), told apart from a rate limit: an explicit code decides;
    a 429 merely worded so that says when to come back (Retry-After, retry-after-ms, a retryDelay in the body)
    is a rate limit."""
    text = (body or "").lower()
    if any(code in text for code in QUOTA_CODES):
        return True
    if not any(words in text for words in QUOTA_WORDS):
        return False
    return status != 429 or (parse_retry_after(headers) is None and "retrydelay" not in text)


def is_context_overflow(body: Optional[str]) -> bool:
    """The error body says the request did not fit the model's context window."""
    text = (body or "").lower()
    return any(words in text for words in CONTEXT_WORDS) or bool(_LLAMA_DECODE_FULL.search(text))


#: a 429 whose Retry-After asks for this long or longer (seconds) is a usage cap (a daily or hourly quota), which
#: stops the run: waiting --retry-after-cap per attempt, call after call, would grind for hours and then fail
USAGE_CAP_WAIT = 1800.0


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def _where_the_key_comes_from() -> str:
    """How to give the key: a Python caller may pass it (``api_key=``), the command line reads the environment."""
    variables = "RAGMETER_API_KEY or OPENAI_API_KEY"
    return spelled(cli=f"set {variables}", python=f"pass api_key= or set {variables}")


def classify(
    *,
    attempt: int,
    policy: RetryPolicy,
    status: Optional[int] = None,
    headers: Optional[Mapping[str, str]] = None,
    body: Optional[str] = None,
    exc: Optional[BaseException] = None,
    rand: Callable[[], float] = random.random,
    now: Optional[float] = None,
) -> Decision:
    """Decide what to do after attempt number ``attempt`` (1-based) failed.

    Pass either ``exc`` (the request raised) or ``status``/``headers``/``body``
    (the server answered with an error status). Retryable: 408/409/425/429, 5xx
    except 501, time-outs, connection errors and unreadable 200 responses
    (``kind="bad_response"``, passed as ``status=200``, or any other 2xx). A 2xx whose body is an error object
    that names an HTTP error status (``code`` or ``status`` 400-599) or an exhausted quota is classified as that
    status (a gateway answering everything 200). Not retryable:
    400/401/403/404 and every other 4xx, quota or credit exhaustion even when
    sent as 429, and a 5xx whose body names a context overflow
    (``kind="context_overflow"``: resending it fails the same way, each attempt as
    slow as the first). When ``attempt`` has reached ``policy.max_attempts`` the
    decision is not to retry (``kind`` keeps the last cause, the message says
    how many attempts were made).
    """
    retry_after: Optional[float] = None
    if exc is not None:
        import aiohttp

        if isinstance(exc, (asyncio.TimeoutError, TimeoutError, aiohttp.ServerTimeoutError)):
            kind, retry, message = "timeout", True, "request timed out"
        elif isinstance(exc, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, ConnectionError)):
            detail = " ".join(str(exc).split())[:200]
            kind, retry, message = "connection", True, f"connection error: {type(exc).__name__}" + (
                f" ({scrub_urls(detail)})" if detail else "")
        elif isinstance(exc, aiohttp.ClientResponseError):
            return classify(attempt=attempt, policy=policy, status=exc.status, headers=exc.headers, body=exc.message,
                            rand=rand, now=now)
        else:
            kind, retry, message = "client", False, f"{type(exc).__name__}: {exc}"
    else:
        code = int(status or 0)
        detail = _error_text(body)
        suffix = f": {detail}" if detail else ""
        carried = reply_status(code, body)
        if carried != code:
            # a gateway that answers every request 200 and puts the real answer in an error object: that
            # answer decides (an exhausted quota or a refused key stops the run; retrying cannot help)
            d = classify(attempt=attempt, policy=policy, status=carried, headers=headers, body=body, rand=rand,
                         now=now)
            said = "a quota error" if carried == 429 and _is_quota(429, None, body) else f"error {carried}"
            message = f"HTTP {code} with {said} in its body" + d.message[len(f"HTTP {carried}"):] \
                if d.message.startswith(f"HTTP {carried}") else d.message
            return replace(d, message=message)
        if 200 <= code < 300:  # a 2xx whose body is not a usable reply (a proxy may answer 201/203)
            status_note = "" if code == 200 else f" (HTTP {code})"
            kind, retry, message = "bad_response", True, f"unreadable response from the endpoint{status_note}{suffix}"
        elif code in (400, 402, 403, 429) and _is_quota(code, headers, body):
            kind, retry, message = "quota", False, f"HTTP {code}, quota or credit exhausted{suffix}"
        elif code == 402:
            kind, retry, message = "quota", False, f"HTTP 402 payment required{suffix}"
        elif code in (401, 403):
            kind, retry, message = "auth", False, (
                f"HTTP {code}, the endpoint refused the API key ({_where_the_key_comes_from()}){suffix}")
        elif code == 404:
            kind, retry, message = "not_found", False, f"HTTP 404, wrong {option('base_url')} or {option('model')}{suffix}"
        elif code == 429:
            kind, retry, message = "rate_limit", True, f"HTTP 429 rate limited{suffix}"
        elif 500 <= code <= 599 and is_context_overflow(body):
            kind, retry, message = "context_overflow", False, (
                f"HTTP {code}, prompt + max_tokens exceed the model's context window (lower {option('max_tokens')} "
                f"and {option('max_retry_tokens')}, or give the server a larger context){suffix}")
        elif code in RETRYABLE_STATUS or (500 <= code <= 599 and code != 501):
            kind, retry, message = "server", True, f"HTTP {code}{suffix}"
        else:
            kind, retry, message = "client", False, f"HTTP {code}, request rejected{suffix}"
        if retry:
            retry_after = parse_retry_after(headers, now=now)
        if kind == "rate_limit" and retry_after is not None and retry_after >= USAGE_CAP_WAIT:
            kind, retry, message = "quota", False, (
                f"HTTP 429, the endpoint asks to wait {_hours(retry_after)} (Retry-After): a usage cap, not a "
                f"passing rate limit; rerun once it lifts (the replies received are in the cache){suffix}")
    if not retry:
        return Decision(False, 0.0, kind, message, retry_after)
    if attempt >= policy.max_attempts:
        return Decision(False, 0.0, kind, f"{message} (gave up after {attempt} attempts)", retry_after)
    if retry_after is not None:
        delay = min(retry_after, policy.max_retry_after)
    else:
        delay = backoff_delay(attempt, policy, rand)
    return Decision(True, delay, kind, message, retry_after)


def next_max_tokens(current: int, cap: int) -> Optional[int]:
    """The output budget for the retry after a truncated output, or an empty one that may have run out of budget
    (see the module docstring: an empty output ended by the model itself is not retried).

    Doubles ``current``, capped at ``cap``; None when ``current`` already reached
    the cap (the call then fails, with every attempt recorded). 2000 with cap
    8000 gives 4000, then 8000, then None.
    """
    if current >= cap:
        return None
    return min(cap, max(1, current) * 2)
