"""Calling the system once per golden case (``repeat`` times) and keeping every outcome.

The first case is sent alone: its response is checked (JSON, every mapping path matches) before the rest of the
golden set is launched, so a wrong target costs one call. The others go through the judge's engine pieces: the
same retry classification (:func:`ragmeter.judge.retry.classify`: 429/5xx/time-outs retried with back-off and
Retry-After; 401/403/404 and exhausted quotas stop the run, exit 2), the same breakers (transport failures, and
cases given up on 5xx one after another: :class:`~ragmeter.judge.stop.ServerErrors`), concurrency and
requests-per-minute limits, and a persistent cache (:mod:`ragmeter.collect.cache`).

Outcomes, none dropped: a collected case is the system's record (``retrieval_mode`` ``unknown`` when the response
does not say); an empty answer is asked once more and kept as it comes the second time; a case that still fails
(time-outs, 5xx past the retries, a callable that raised) is a record with ``error`` and ``error_kind``, no answer
and an empty ``retrieved``, which ``eval`` scores as an empty retrieval with no answer.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import logging
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ragmeter._aio import run_blocking
from ragmeter._front import arg, no_cache, no_limit, option
from ragmeter._secrets import Masker, mask_decoded
from ragmeter.errors import InputError
from ragmeter.judge.limits import check_rpm
from ragmeter.judge.retry import RetryPolicy, classify
from ragmeter.judge.stop import FATAL_KINDS, TRANSPORT_KINDS, Breaker, Halt, RunStop, ServerErrors
from ragmeter.judge.urls import public_endpoint, query_credentials, scrub_urls

from ragmeter.judge.cache import CacheWriteError

from .cache import DEFAULT_PATH, SpillPlaces, collect_key, keep_unsaved, open_cache, read_back_unsaved
from .mapping import is_scalar, keys_of, to_record, unmatched_paths
from .target import CallableTarget, HttpTarget, resolve_target

__all__ = ["collect", "CollectResult", "CollectStopped", "write_run", "DEFAULT_PATH"]


#: more calls at once than a process has threads or sockets for turns into failed cases, not speed
MAX_CONCURRENCY = 1000
#: repeats measure generation variance; a few dozen settle it
MAX_REPEAT = 1000


class _SameError:
    """Cases in a row whose Python function raised the same error, nothing answered between: five such stop the
    run. An error in the function's own setup (a key not set, a service not started) fails every case alike, and
    running the rest of the set only repeats it, paying for whatever each call did before it raised; errors that
    differ, or answers between them, are cases failing on their own."""

    def __init__(self, calls: int = 5) -> None:
        self.calls = calls
        self.text: Optional[str] = None
        self.count = 0

    def answered(self) -> None:
        self.text, self.count = None, 0

    def failed(self, text: str) -> bool:
        """Record a case failed with ``text``; True when the run should stop."""
        self.count = self.count + 1 if text == self.text else 1
        self.text = text
        return self.count >= self.calls


class CollectStopped(InputError):
    """The system refused the run (key, route, quota, unreachable): one line, exit 2; finished replies are cached."""

    exit_code = 2

    def __init__(self, message: str, kind: str = "stopped") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class CollectResult:
    records: List[Dict[str, Any]]   #: golden order, repeat 1 first; failed cases included
    summary: Dict[str, Any]
    warnings: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def incomplete(self) -> bool:
        """Failed cases, or cases outside ``expect_mode``: results written, exit status 3."""
        expect = self.summary.get("expect_mode")
        return bool(self.summary["n_failed"]) or bool(expect and expect["n_other"])

    def write(self, path: Union[str, Path]) -> Path:
        return write_run(self.records, path)


@dataclass
class _Options:
    concurrency: int
    rpm: Optional[float]
    timeout: float
    refresh: bool
    policy: RetryPolicy
    rate_control: str = "adaptive"


class _Run:
    """The state shared by the workers of one collection."""

    def __init__(self, target: Union[HttpTarget, CallableTarget], opts: _Options, cache: Any, repeats: int) -> None:
        self.target, self.opts, self.cache, self.repeats = target, opts, cache, repeats
        self.limits = _limits(opts.concurrency, opts.rpm, opts.rate_control)
        self.stop = RunStop()
        self.breaker = Breaker()
        self.server_errors = ServerErrors()  #: cases given up on 5xx / unusable replies, none answered between
        self.same_error = _SameError()  #: cases in a row whose function raised the same error
        self.session: Any = None
        self.headers: Dict[str, str] = {}
        self.url = getattr(target, "url", "")  #: an HttpTarget's url with its ${VAR} read (in memory only)
        self.secrets: List[str] = []    #: header values and url credentials, masked everywhere (:func:`_mask`)
        self.pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self.late: List["_LateCall"] = []  #: calls of a sync function cut off by a cancellation, still running
        self.calls = 0          #: calls started (for the breaker)
        self.requests = 0       #: requests sent to the system
        self.cached = 0
        self.empty_retried = 0
        self.echoed: set = set()  #: (case id, repeat) whose reply held a header value, masked before it was kept
        self.done = 0           #: cases finished (collected or failed)
        self.jobs = 0
        #: where replies whose commit failed (a full disk) are written, and what became of them ("" when none)
        self.spill = SpillPlaces(getattr(cache, "path", None))
        self.unsaved_note = ""


def _limits(concurrency: int, rpm: Optional[float], control: str = "adaptive") -> Any:
    """The one place collect builds the judge's rate limits (concurrency, requests per minute, and the rate
    control: adaptive learns the system's limit from what :func:`_attempt` reports, see ragmeter.judge.rate)."""
    from ragmeter.judge.limits import RATE_CONTROLS, Limits

    if control not in RATE_CONTROLS:
        raise InputError(f"{arg('rate_control')}: choose {' or '.join(RATE_CONTROLS)}, not {control!r}")
    return Limits(concurrency=concurrency, rpm=rpm, control=control)


# -- one call ----------------------------------------------------------------------------------------------
_REDIRECTS = (301, 302, 303, 307, 308)
#: redirects followed on the target's own host before a reply counts as unusable
MAX_REDIRECTS = 10


class _CrossOrigin(str):
    """A redirect to another host (scheme, host or port), not followed: the request's headers hold credentials."""


async def _send_http(run: _Run, case: Dict[str, Any]) -> Tuple[Optional[int], Any, str]:
    """One request, following redirects on the target's own host only. aiohttp followed any redirect with every
    header but Authorization, so an X-Api-Key went to whatever host a redirect named."""
    from yarl import URL

    target = run.target
    assert isinstance(target, HttpTarget)
    request = target.request(case)
    url = URL(run.url, encoded=False)
    params: Optional[Dict[str, str]] = None
    if target.method == "GET":
        params = {k: v if isinstance(v, str) else json.dumps(v) for k, v in request.items()}
    for _ in range(MAX_REDIRECTS + 1):
        body = None if target.method == "GET" else request
        async with run.session.request(target.method, url, params=params, json=body, headers=run.headers,
                                       allow_redirects=False) as resp:
            location = resp.headers.get("Location") if resp.status in _REDIRECTS else None
            if location is None:
                return resp.status, resp.headers, _decode(await resp.read(), resp.charset)
            following = resp.url.join(URL(location))
            if following.origin() != resp.url.origin():
                return resp.status, resp.headers, _CrossOrigin(public_endpoint(str(following)))
        # the same host: the url's user and password go along, the query parameters are in the location
        url, params = following.with_user(url.user).with_password(url.password), None
    return resp.status, resp.headers, f"more than {MAX_REDIRECTS} redirects"


class _Undecoded(str):
    """A body that is not text in its declared charset: kept with replacement characters for messages, and a
    200 never parsed (decoding it anyway put U+FFFD into answers and chunk texts without a word)."""

    reason = ""


def _decode(raw: bytes, charset: Optional[str]) -> str:
    """The body as text in the charset its Content-Type declares (JSON's UTF-8 when it declares none)."""
    import codecs

    try:
        name = codecs.lookup(charset or "utf-8").name
    except LookupError:
        name = "utf-8"
    try:
        return raw.decode("utf-8-sig" if name == "utf-8" else name)  # a byte-order mark is not the JSON
    except UnicodeDecodeError as exc:
        body = _Undecoded(raw.decode(name, "replace"))
        body.reason = (f"not {name} text (byte {raw[exc.start]:#04x} at offset {exc.start}; declare the charset "
                       f"in Content-Type)")
        return body


class _Escaped(Exception):
    """What the function raised that cannot cross a thread or a task as it is: carried as an ordinary exception
    whose message is the case's error, as it stands."""


class _Exited(_Escaped):
    """The function called ``sys.exit()``: that case's failure. A ``SystemExit`` let through a worker thread or a
    task escaped the event loop: a traceback and exit status 1 with nothing written, whatever had been collected."""

    def __init__(self, code: Any) -> None:
        super().__init__(f"SystemExit({code!r}): the function called sys.exit()")


class _StopIterationRaised(_Escaped):
    """The function raised ``StopIteration`` (a ``next()`` on an exhausted iterator): that case's failure. asyncio
    cannot put a StopIteration into a Future, so the call never came back: a traceback on stderr per attempt and
    the case failed as a time-out."""

    def __init__(self, exc: StopIteration) -> None:
        super().__init__(f"StopIteration: {exc}" if str(exc) else "StopIteration")


def _no_exit(fn: Any, arg: Any) -> Any:
    try:
        return fn(arg)
    except SystemExit as exc:
        raise _Exited(exc.code) from None
    except StopIteration as exc:
        raise _StopIterationRaised(exc) from None


async def _no_exit_async(awaitable: Any) -> Any:
    try:
        return await awaitable
    except SystemExit as exc:
        raise _Exited(exc.code) from None


async def _call_python(run: _Run, case: Dict[str, Any]) -> Any:
    target = run.target
    assert isinstance(target, CallableTarget)
    arg = dict(case)
    if inspect.iscoroutinefunction(target.fn):
        return await asyncio.wait_for(_no_exit_async(_no_exit(target.fn, arg)), run.opts.timeout)
    assert run.pool is not None
    call = run.pool.submit(_no_exit, target.fn, arg)
    try:
        value = await asyncio.wait_for(asyncio.wrap_future(call), run.opts.timeout)
    except asyncio.CancelledError:  # Ctrl-C or a stop: a running thread goes on, and its reply is kept
        run.late.append(_LateCall(call, case))
        raise
    if inspect.isawaitable(value):  # a sync wrapper that returns a coroutine
        value = await asyncio.wait_for(_no_exit_async(value), run.opts.timeout)
    return value


class _LateCall:
    """A sync function's call still running when its case was cancelled (Ctrl-C, SIGTERM, a stop): a thread
    cannot be stopped and the process waits for it at exit, so its reply is kept (:func:`_keep_late_replies`)
    rather than paid for again by the rerun."""

    def __init__(self, call: "concurrent.futures.Future[Any]", case: Dict[str, Any]) -> None:
        self.call, self.case, self.finished = call, case, 0.0
        self.started = time.monotonic()
        call.add_done_callback(self._note_finish)

    def _note_finish(self, _call: Any) -> None:
        self.finished = time.monotonic()


async def _keep_late_replies(run: "_Run") -> None:
    """Wait for the calls cut off by a cancellation and cache each usable reply, as a finished case's is (a
    second Ctrl-C stops waiting). Before, the process waited for them all the same, then threw them away."""
    for late in run.late:
        if late.call.cancelled():  # still queued when cancelled: never called
            continue
        try:
            value = await asyncio.shield(asyncio.wrap_future(late.call))
        except Exception:  # noqa: BLE001 - a failed call: the rerun asks again
            continue
        if not isinstance(value, dict) or _unusable(run, value) is not None or \
                _blank(_record_of(run, value).get("answer")):
            continue
        reply = {"response": value, "latency_ms": round((late.finished - late.started) * 1000.0, 3),
                 "attempts": 1}
        try:
            await run.cache.commit(_cache_key(run, late.case, late.case["repeat"]), reply, prompt="collect",
                                   model=run.target.label)
        except CacheWriteError:
            return
        run.done += 1


def _secrets(headers: Dict[str, str], url: Optional[str] = None, from_environment: Sequence[str] = ()) -> List[str]:
    """The header values to mask, longest first: each whole value and each long word of it (the token of
    ``Bearer <token>``, which a server may echo alone), the credentials ``url`` carries (:func:`_url_secrets`)
    and the values its ``${VAR}`` read from the environment. Short values (``X-Tenant = "eval"``) are left
    alone: masking them would garble messages, and no credential is that short."""
    values = [*headers.values(), *(_url_secrets(url) if url else []), *from_environment]
    found = {v for value in values for v in (value, *value.split()) if len(v) >= 8}
    return sorted(found, key=len, reverse=True)




def _url_secrets(url: str) -> List[str]:
    """The credentials in a target's url: its user and password (raw and decoded), the ``Basic`` value the
    client sends for them, and the values of query parameters named like a credential. A system that echoes
    its request url or headers (a debug field, an error page) returned them, and they went into the run file,
    the cache and messages unmasked: only header values were masked."""
    import base64
    from urllib.parse import unquote, urlsplit

    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return []
    out: List[str] = []
    if user is not None or password is not None:
        plain_user, plain_password = unquote(user or ""), unquote(password or "")
        out += [user or "", password or "", plain_user, plain_password,
                base64.b64encode(f"{plain_user}:{plain_password}".encode("latin-1", "replace")).decode("ascii")]
    out += query_credentials(url)
    return [v for v in out if v]


def _mask(run: "_Run", text: str) -> str:
    """``text`` with every header value replaced by ``***``: a system that echoes the request's headers in an
    error body (debug pages, proxies) must not put the token into the run file, the cache or a message."""
    return Masker(run.secrets, short_as_words=False).text(text) if run.secrets else text


def _scrub(run: "_Run", value: Any) -> Tuple[Any, bool]:
    """A decoded reply with every header value masked in its strings (keys too), and whether one was found. A
    system that echoes the caller's token in a successful answer or chunk (a debug field, a prompt template
    quoted back) must not put it into the run file or the cache. The decoded value is walked, not the body's
    text: JSON may escape a token's characters (``\\/``, ``\\u...``) so that the raw text would not match."""
    if not run.secrets:
        return value, False
    return mask_decoded(value, lambda text: _mask(run, text))


def _blank(answer: Any) -> bool:
    return answer is None or (isinstance(answer, str) and not answer.strip())


def _where(run: _Run) -> str:
    target = run.target
    return target.source if isinstance(target, HttpTarget) else option("target", target.name)


def _check_first(run: _Run, data: Any, case_id: str) -> None:
    """The first response must be usable as it is mapped: otherwise one line, exit 2, nothing else sent."""
    target = run.target
    if isinstance(target, CallableTarget):
        if not isinstance(data, dict):
            raise InputError(f"{_where(run)}: returned {type(data).__name__} for case {case_id}, expected a run "
                             f"record (a dict with answer, retrieved, ...)")
        problem = _load_problem(run, data)
        if problem is not None:
            raise InputError(f"{_where(run)}: returned a record for case {case_id} that is not a run record: "
                             f"{problem}")
        return
    if not isinstance(data, dict):
        raise InputError(f"{target.source}: the response to case {case_id} is JSON but not an object "
                         f"({type(data).__name__})")
    misses = unmatched_paths(data, target.response, target.item)
    if misses:
        name, path = misses[0]
        raise InputError(f"{target.source}: {name} = {path!r} matches nothing in the response to case {case_id} "
                         f"(its keys: {keys_of(data)})")
    if not target.response and "retrieved" not in data:
        raise InputError(f"{target.source}: the response to case {case_id} is not a run record (no retrieved; "
                         f"its keys: {keys_of(data)}); map its fields in a [response] table")
    problem = _load_problem(run, data)
    if problem is not None:
        raise InputError(f"{target.source}: the response to case {case_id} does not make a run record: {problem}")


def _record_of(run: _Run, data: Any) -> Dict[str, Any]:
    target = run.target
    if isinstance(target, CallableTarget):
        rec = to_record(data, {}, {})
    else:
        rec = to_record(data, target.response, target.item)
    mode = rec.get("retrieval_mode")
    if mode is None or (isinstance(mode, str) and not mode.strip()):
        rec["retrieval_mode"] = "unknown"
    elif is_scalar(mode):  # an object or a list is left as it is, for the run loader's check to name
        rec["retrieval_mode"] = str(mode)
    return rec


def _stop_message(run: _Run, kind: str, status: Optional[int], message: str, case_id: str) -> str:
    target = run.target
    where = f"{target.source} ({public_endpoint(target.url)})" if isinstance(target, HttpTarget) else _where(run)
    if kind == "auth":
        return (f"{where}: HTTP {status}, the system refused the request for case {case_id}: check the "
                f"credentials in headers (and that the environment variables they name are set)")
    if kind == "not_found":
        return f"{where}: HTTP 404 for case {case_id}, no such route: check url"
    return f"{where}: {message} (case {case_id})"


async def _attempt(run: _Run, case: Dict[str, Any],
                   waited: bool = False) -> Tuple[Optional[int], Any, Any, Optional[BaseException], float]:
    """One attempt inside a limits slot: (status, headers, body or returned value, exception, latency ms). The
    outcome (an HTTP status, or a time-out) goes to the rate controller. ``waited``: the attempt follows a
    Retry-After waited out, and goes ahead of first attempts."""
    async with run.limits.slot(retry=waited) as slot:
        if run.stop.stopped:
            raise Halt(run.stop.reason)
        run.requests += 1
        t0 = time.monotonic()
        try:
            if isinstance(run.target, HttpTarget):
                status, headers, body = await _send_http(run, case)
                slot.answer(status, headers)
                return status, headers, body, None, (time.monotonic() - t0) * 1000.0
            value = await _call_python(run, case)
            slot.answer(200, None)
            return 200, None, value, None, (time.monotonic() - t0) * 1000.0
        except (asyncio.TimeoutError, OSError) as exc:
            if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
                slot.timed_out()
            return None, None, None, exc, (time.monotonic() - t0) * 1000.0
        except Exception as exc:  # aiohttp errors; or whatever a callable raised (a failed case)
            return None, None, None, exc, (time.monotonic() - t0) * 1000.0


async def _call(run: _Run, case: Dict[str, Any], first: bool) -> Dict[str, Any]:
    """The system's reply to ``case``: ``{"response" or "record", "latency_ms"}``, or ``{"error", ...}``."""
    run.calls += 1
    call, transient, empty_asked, waited = run.calls, 0, False, False
    started = time.monotonic()
    while True:
        transient += 1
        status, headers, body, exc, latency = await _attempt(run, case, waited)
        if status is not None and isinstance(run.target, HttpTarget):
            run.breaker.answered()
        if exc is None and status is not None and 200 <= status < 300:  # 201 Created is an answer too
            data = body
            if isinstance(run.target, HttpTarget):
                if isinstance(body, _Undecoded):
                    if first:
                        raise InputError(f"{_where(run)}: the response to case {case['id']} is {body.reason}")
                    data, body = _NOT_JSON, body.reason
                else:
                    try:
                        data = json.loads(body)
                    except ValueError:
                        if first:
                            raise InputError(f"{_where(run)}: the response to case {case['id']} is not JSON "
                                             f"(HTTP {status}, starts {_mask(run, body)[:60]!r})") from None
                        data = _NOT_JSON
                    else:
                        data, echoed = _scrub(run, data)
                        if echoed:
                            run.echoed.add((case["id"], case.get("repeat")))
            if data is not _NOT_JSON:
                if first:
                    _check_first(run, data, case["id"])
                problem = _unusable(run, data)
                if problem is not None:
                    body = problem  # a later reply without its answer or retrieval: retried, then this case fails
                elif isinstance(data, dict):
                    answer = _record_of(run, data).get("answer")
                    if _blank(answer) and not empty_asked:
                        empty_asked = True  # reasoning models sometimes answer nothing: ask once more
                        run.empty_retried += 1
                        transient -= 1
                        continue
                    run.server_errors.answered()
                    run.same_error.answered()
                    return {"response": data, "latency_ms": round(latency, 3), "attempts": transient + empty_asked}
        if isinstance(body, _CrossOrigin):
            moved = _mask(run, f"{_where(run)}: case {case['id']} is redirected (HTTP {status}) to another host, "
                                f"{body}, where the request's headers are not sent: put that address in url")
            if first:
                raise InputError(moved)
            return {"error": moved, "error_kind": "client", "attempts": transient,
                    "latency_ms": round((time.monotonic() - started) * 1000.0, 3)}
        answered = status is not None and 200 <= status < 300  # an unreadable 2xx: retried as an unreadable 200
        shown = _mask(run, body) if isinstance(body, str) else None
        if shown is not None and shown != body:  # an error page that echoed a credential: the warning names it
            run.echoed.add((case["id"], case.get("repeat")))
        decision = classify(attempt=transient, policy=run.opts.policy, status=200 if answered else status,
                            headers=headers, body=shown, exc=exc)
        decision = replace(decision, message=_mask(run, decision.message))
        if isinstance(run.target, CallableTarget) and decision.kind == "bad_response":  # no endpoint: a function
            decision = replace(decision, message=decision.message.replace("unreadable response from the endpoint",
                                                                          "unusable return value of the function"))
        if isinstance(run.target, CallableTarget) and exc is not None and decision.kind == "client":
            text = str(exc) if isinstance(exc, _Escaped) else f"{type(exc).__name__}: {exc}"
            # one line, as a failed case's error is everywhere (an exception's message may hold line breaks)
            decision = type(decision)(False, 0.0, "exception", " ".join(scrub_urls(text).split())[:300])
            if run.same_error.failed(decision.message):
                run.stop.trip("exception", f"{_where(run)}: the function raised the same error for "
                              f"{run.same_error.count} cases in a row, nothing answered between "
                              f"({decision.message}); fix it and rerun")  # what a cache keeps is said with the stop
                raise Halt(run.stop.reason)
        if decision.kind in FATAL_KINDS and not decision.retry:
            run.stop.trip(decision.kind, _stop_message(run, decision.kind, status, decision.message, case["id"]))
            raise Halt(run.stop.reason)
        if first and not decision.retry and decision.kind == "client" and status is not None:
            raise InputError(f"{_where(run)}: the system rejected the request for case {case['id']} "
                             f"({decision.message}); check url, method and body")
        if first and decision.kind == "connection" and transient >= 2:
            # nothing has answered yet and the first case cannot connect even on retry: the system is not there
            run.stop.trip("unreachable", f"{_where(run)}: cannot reach the system for case {case['id']} "
                          f"({decision.message}); check url and that the system is up")
            raise Halt(run.stop.reason)
        if decision.kind in TRANSPORT_KINDS and isinstance(run.target, HttpTarget) and run.breaker.failed(call):
            run.stop.trip("unreachable", f"{_where(run)}: {run.breaker.failures} transport failures in a row "
                          f"across different cases, no answer in between (last: {decision.message}); check url and "
                          f"that the system is up (raise {option('timeout')} if it is only slow)")
            raise Halt(run.stop.reason)
        if (not decision.retry and isinstance(run.target, HttpTarget) and run.server_errors.gave_up(decision.kind)):
            run.stop.trip("server_errors", f"{_where(run)}: {run.server_errors.count} cases in a row failed on server "
                          f"errors or unusable replies after {transient} attempts each, with no usable reply in "
                          f"between (last: "
                          f"{decision.message}); the system is failing: check its status")
            raise Halt(run.stop.reason)
        if not decision.retry:
            return {"error": decision.message, "error_kind": decision.kind, "attempts": transient,
                    "latency_ms": round((time.monotonic() - started) * 1000.0, 3)}
        waited = decision.retry_after is not None
        if waited:
            run.limits.pause(decision.delay)  # the fixed policy's global pause (adaptive: no-op)
        if decision.delay > 0:
            await asyncio.sleep(decision.delay)


_NOT_JSON = object()


def _unusable(run: _Run, data: Any) -> Optional[str]:
    """Why a reply after the first cannot be this case's record (None when it can): not an object, the mapped
    ``answer``/``retrieved`` path matches nothing (a missing ``retrieval_mode`` is ``unknown``), or the record
    would not load as a run record (:func:`_load_problem`)."""
    if not isinstance(data, dict):
        return f"the response is {type(data).__name__}, not an object"
    target = run.target
    if isinstance(target, HttpTarget) and target.response:
        essential = {k: v for k, v in target.response.items() if k in ("answer", "retrieved")}
        misses = unmatched_paths(data, essential, {})
        if misses:
            return f"{misses[0][0]} = {misses[0][1]!r} matches nothing in the response"
    return _load_problem(run, data)


def _load_problem(run: _Run, data: Dict[str, Any]) -> Optional[str]:
    """What ragmeter's run loader would refuse in the record made of ``data`` (its first problem, naming the
    field and the mapping path it came from), None when it loads. Without this, collect wrote (exit 0) run files
    that ``score`` and ``eval`` then refused, and a reply without its chunk list became a silent empty retrieval
    that scores as a miss."""
    from ragmeter.dataset import run_record_problems

    target = run.target
    if isinstance(target, CallableTarget) or not target.response:  # a mapped path is checked as a list
        if "retrieved" not in data:
            return "no 'retrieved' (a run record needs it: [] for an empty retrieval)"
        if data["retrieved"] is None:  # read as [], a lost chunk list scored as one that found nothing
            return "'retrieved' is null, not a list ([] for an empty retrieval)"
    problems = run_record_problems({"id": "case", **_record_of(run, data)})
    if not problems:
        return None
    first = problems[0]
    mapped = _mapping_of(target, first.field) if isinstance(target, HttpTarget) else None
    return first.message + (f" (from {mapped[0]} = {mapped[1]!r})" if mapped else "")


def _mapping_of(target: HttpTarget, field: Optional[str]) -> Optional[Tuple[str, str]]:
    """The target's mapping (its name in the target file, its path) that a run record's ``field`` was read
    through: ``retrieved[2].text`` -> ``response.retrieved_item.text``, ``answer`` -> ``response.answer``."""
    if not field:
        return None
    top, _, rest = field.partition(".")
    if top.startswith("retrieved[") and rest:
        key = rest.split(".")[0]
        return (f"response.retrieved_item.{key}", target.item[key]) if key in target.item else None
    name = top.split("[")[0]
    return (f"response.{name}", target.response[name]) if name in target.response else None


def _cache_key(run: _Run, case: Dict[str, Any], repeat: int) -> str:
    target = run.target
    request = target.request(case) if isinstance(target, HttpTarget) else {"id": case["id"],
                                                                            "question": case["question"]}
    return collect_key(target.identity, request, case["id"], repeat)


async def _job(run: _Run, case: Dict[str, Any], repeat: int, first: bool) -> Dict[str, Any]:
    target = run.target
    key = _cache_key(run, case, repeat)
    reply = None if run.opts.refresh else run.cache.get(key)
    if reply is not None and "response" in reply and not first and _unusable(run, reply["response"]) is not None:
        reply = None  # cached by a version that did not check the record: ask again
    if reply is not None and "response" in reply:
        run.cached += 1
        reply["response"], echoed = _scrub(run, reply["response"])  # cached by a version that did not mask
        if echoed:
            run.echoed.add((case["id"], repeat))
        if first:
            _check_first(run, reply["response"], case["id"])
    else:
        reply = await _call(run, dict(case, repeat=repeat), first)
        if "response" in reply and not _blank(_record_of(run, reply["response"]).get("answer")):
            try:
                await run.cache.commit(key, reply, prompt="collect", model=target.label)
            except CacheWriteError as exc:  # a full disk: stop, what was committed stays
                run.stop.trip("cache_write", f"{exc.path}: cannot write the collect cache ({exc.reason}); free "
                              f"space, pass another {option('cache', 'PATH')}, or {no_cache()}")
                raise Halt(run.stop.reason) from None
    run.done += 1
    return _final_record(run, case["id"], repeat, reply)


def _final_record(run: _Run, case_id: str, repeat: int, reply: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {"id": case_id}
    if run.repeats > 1:  # one run file per repeat would lose the pairing: a column instead
        out["repeat"] = repeat
    if "response" in reply:
        rec = _record_of(run, reply["response"])
        out.update(retrieved=rec["retrieved"], answer=rec["answer"])
        if rec.get("contexts") is not None:
            out["contexts"] = rec["contexts"]
        out.update(retrieval_mode=rec["retrieval_mode"], latency_ms=reply.get("latency_ms"), usage=rec["usage"],
                   cost=rec["cost"])
        return out
    out.update(retrieved=[], answer=None, retrieval_mode=None, latency_ms=reply.get("latency_ms"), usage=None,
               cost=None, error=reply["error"], error_kind=reply["error_kind"], attempts=reply.get("attempts"))
    return out


# -- the whole run -----------------------------------------------------------------------------------------
async def _collect(cases: List[Dict[str, Any]], run: _Run, repeat: int) -> List[Dict[str, Any]]:
    jobs = [(case, r) for r in range(1, repeat + 1) for case in cases]
    run.jobs = len(jobs)
    results: List[Optional[Dict[str, Any]]] = [None] * len(jobs)
    try:
        if isinstance(run.target, HttpTarget):
            import aiohttp

            run.headers = run.target.resolved_headers()
            run.url, from_environment = run.target.resolved_url()
            run.secrets = _secrets(run.headers, run.url, from_environment)
            run.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=run.opts.timeout),
                                                connector=aiohttp.TCPConnector(limit=run.opts.concurrency))
        else:
            run.pool = concurrent.futures.ThreadPoolExecutor(max_workers=run.opts.concurrency)
        results[0] = await _job(run, jobs[0][0], jobs[0][1], first=True)
        queue = iter(range(1, len(jobs)))

        async def worker() -> None:
            for i in queue:
                if run.stop.stopped:
                    return
                results[i] = await _job(run, jobs[i][0], jobs[i][1], first=False)

        from ragmeter.judge.runner import STOP_GRACE, _grace_after_interrupt, _until_done_or_stopped

        tasks = [asyncio.ensure_future(worker()) for _ in range(min(run.opts.concurrency, len(jobs) - 1))]
        grace = min(run.opts.timeout, STOP_GRACE)
        try:
            # a stop or an interrupt lets the calls in flight come back and be cached, as the judge's do:
            # cancelled at once, their replies were lost and the rerun asked for them again
            try:
                await _until_done_or_stopped(tasks, run.stop, grace)
            except asyncio.CancelledError:  # Ctrl-C or SIGTERM; without a cache no reply could be kept
                await _grace_after_interrupt(tasks, run.stop, grace if run.cache.path is not None else 0.0)
                raise
            for t in tasks:
                if t.done() and not t.cancelled() and t.exception() is not None and \
                        not isinstance(t.exception(), Halt):
                    raise t.exception()  # type: ignore[misc]  # a bug, not a stop
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    except Halt:
        pass
    finally:
        if run.session is not None:
            await run.session.close()
        if run.pool is not None:
            run.pool.shutdown(wait=False, cancel_futures=True)
            await _keep_late_replies(run)
        run.cache.close()
        run.unsaved_note = keep_unsaved(run.cache, run.spill)  # paid for: written elsewhere, never dropped
    if run.stop.stopped:
        done = sum(r is not None for r in results)
        answered = sum(r is not None and "error" not in r for r in results)  # a failed case is never cached
        if not answered:  # every case so far failed: no reply for any cache to keep
            kept = " (none answered)"
        elif run.cache.path is not None:
            kept = f" ({answered} answered, cached: a rerun asks only the rest)"
        else:
            kept = f" ({answered} answered; no cache kept them)"
        after = f"; stopped after {done} of {len(jobs)} cases{kept}" if done else ""
        raise CollectStopped(f"{run.stop.reason}{after}{run.unsaved_note}", run.stop.kind or "stopped")
    if run.unsaved_note:  # a last commit that failed after every case was done
        logging.getLogger("ragmeter.collect").warning("%s", run.unsaved_note.lstrip("; "))
    return [r for r in results if r is not None]


def _golden_cases(golden: Any) -> Tuple[List[Dict[str, Any]], frozenset]:
    """The cases as the target gets them, and the ids of those without expected files or evidence."""
    import polars as pl

    from ragmeter.api import case_source
    from ragmeter.dataset import load_golden

    frame = load_golden(case_source(golden, "golden"))  # none at all: refused here, was an IndexError in the run
    cases = [{"id": r["id"], "question": r["question"], "category": r["category"]}
             for r in frame.select("id", "question", "category").iter_rows(named=True)]
    return cases, frozenset(frame.filter(~pl.col("labeled"))["id"].to_list())


def collect(golden: Any, target: Any, out: Union[str, Path, None] = None, *, concurrency: int = 8,
            rpm: Optional[float] = None, repeat: int = 1, cache: Union[str, Path, None] = None,
            timeout: float = 60.0, refresh: bool = False, expect_mode: Optional[str] = None,
            policy: Optional[RetryPolicy] = None, rate_control: str = "adaptive") -> CollectResult:
    """Call ``target`` once per golden case (``repeat`` times) and return (and write to ``out``) the run.

    ``target`` is a TOML file, ``"module:function"``, or a callable ``fn(case)`` (sync or async) that returns a run
    record; ``case`` holds ``id``, ``question``, ``category`` and ``repeat``. ``cache`` is the path of the collect
    cache (None: no cache). ``rate_control``: ``adaptive`` (learn the system's limit) or ``fixed`` (see
    :class:`ragmeter.judge.limits.Limits`); ``concurrency`` and ``rpm`` are ceilings either way. Raises
    :class:`InputError` for a bad target or first response, :class:`OSError` for an ``out`` that cannot be
    written (both before any call) and :class:`CollectStopped` when the system refuses the run; otherwise every
    case is in the result, collected or failed. Inside a running event loop (Jupyter) the collection runs on a
    private loop in a helper thread, and an async ``target`` is awaited there.
    """
    from ragmeter._args import check_arg, check_cache_path, positive_number

    # bounded above: --repeat 100000000 built every (case, repeat) job first and ran the machine out of memory
    concurrency = check_arg(arg("concurrency"), concurrency, "int", low=1, high=MAX_CONCURRENCY)
    repeat = check_arg(arg("repeat"), repeat, "int", low=1, high=MAX_REPEAT)
    # NaN or infinity would not mean "no time-out" or "no limit" to the user, but did: --rpm -5, nan or inf hung
    # before the second case, --timeout inf failed every case ('float infinity to integer'), nan waited forever;
    # --rpm 0 meant no limit. Leaving the option out is how to say no limit (the judge's rule)
    # nor is a bool a number of seconds (positive_number), or "no" a flag (refresh="no" refreshed)
    if not positive_number(timeout):
        raise InputError(f"{arg('timeout')}: must be a number of seconds > 0, got {timeout!r}")
    if rpm is not None and not positive_number(rpm):
        raise InputError(f"{arg('rpm')}: must be a number > 0 ({no_limit('rpm')} for no limit), got {rpm!r}")
    if rpm is not None:
        check_rpm(rpm)
    refresh = check_arg(arg("refresh"), refresh, "bool")
    check_arg(arg("expect_mode"), expect_mode, "text", optional=True)
    check_cache_path(cache)
    if policy is not None and not isinstance(policy, RetryPolicy):  # a dict was taken: its first retry failed
        from ragmeter._args import _shown

        raise InputError(f"{arg('policy')} must be a ragmeter.judge.RetryPolicy or None, got {_shown(policy)}")
    resolved = resolve_target(target)
    cases, unlabelled = _golden_cases(golden)
    made: List[Path] = []
    if out is not None:
        _check_not_an_input(Path(out), golden=golden, target=resolved, cache=cache)
        made = _check_writable(Path(out))
    try:
        return _collect_into(out, cache, cases, unlabelled, resolved, repeat, expect_mode,
                             _Options(concurrency, rpm, float(timeout), refresh, policy or RetryPolicy(), rate_control))
    except BaseException:
        _remove_if_empty(made)  # a run refused (a foreign cache) or stopped leaves no empty folder behind
        raise


def _collect_into(out: Any, cache: Any, cases: Any, unlabelled: frozenset, resolved: Any, repeat: int,
                  expect_mode: Optional[str], opts: "_Options") -> "CollectResult":
    """:func:`collect` once its arguments are checked: ask, summarise, write ``out``."""
    run = _Run(resolved, opts, open_cache(None if cache is None else str(cache)), repeat)
    run.spill = SpillPlaces(run.cache.path, Path(out).resolve().parent if out is not None else None)
    read_back_unsaved(run.cache, run.spill)
    started = time.monotonic()
    try:
        records = run_blocking(lambda: _collect(cases, run, repeat), "ragmeter-collect")
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM: say how far it got (cli._guarded prints it)
        kept = "the collected replies are cached: a rerun resumes" if run.cache.path is not None else \
            "no cache: a rerun starts over"
        raise KeyboardInterrupt(f"{run.done} of {run.jobs} cases finished, nothing written; {kept}"
                                f"{run.unsaved_note}") from None
    summary, warnings = _summarise(records, run, len(cases), repeat, expect_mode, time.monotonic() - started,
                                   unlabelled)
    result = CollectResult(records, summary, warnings)
    if out is not None:
        result.write(out)
    return result


# -- summary -----------------------------------------------------------------------------------------------
def _percentile(values: Sequence[float], q: float) -> Optional[float]:
    """The same latency percentile as the judge's summary (linear interpolation, 3 decimals)."""
    from ragmeter.judge.runner import _percentile as judge_percentile

    return judge_percentile(list(values), q)


def mode_change(records: Sequence[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """Collected cases (in the order sent) whose mode differs from the first collected case's; None if none."""
    from ragmeter._warnings import warning

    modes = [(r["id"], r["retrieval_mode"], r.get("repeat")) for r in records if "error" not in r]
    if not modes:
        return None
    start = modes[0][1]
    other = [(i, m, rep) for i, m, rep in modes if m != start]
    if not other:
        return None
    first_id, first_mode, _ = other[0]
    labels = [f"{i} ({m})" + (f" repeat {rep}" if rep else "") for i, m, rep in other]
    return warning("mode_changed", f"of {len(modes)} collected case(s) ran in another retrieval mode than the "
                   f"run began with ('{start}'), from case {first_id} ({first_mode}) on",
                   [i for i, _, _ in other], labels)


def _echo_warning(records: Sequence[Dict[str, Any]], echoed: set) -> Dict[str, Any]:
    from ragmeter._warnings import warning

    hits = [(r["id"], r.get("repeat")) for r in records if (r["id"], r.get("repeat", 1)) in echoed]
    labels = [f"{i} repeat {rep}" if rep else str(i) for i, rep in hits]
    return warning("credential_echoed", "collected case(s) came back with a value of a request header (a "
                   "credential), or a credential of the url, in the reply; it is masked as *** in the run file "
                   "and the cache, and the system should not echo it", [i for i, _ in hits], labels)


def _summarise(records: List[Dict[str, Any]], run: _Run, n_cases: int, repeat: int, expect_mode: Optional[str],
               seconds: float, unlabelled: frozenset = frozenset()) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """``unlabelled``: ids of the golden cases without expected files or evidence, whose empty retrieval is no
    miss (score leaves them out of retrieval)."""
    failed = [r for r in records if "error" in r]
    ok = [r for r in records if "error" not in r]
    modes: Dict[str, int] = {}
    for r in ok:
        modes[r["retrieval_mode"]] = modes.get(r["retrieval_mode"], 0) + 1
    failures: Dict[str, Dict[str, Any]] = {}
    for r in failed:
        f = failures.setdefault(r["error_kind"], {"count": 0, "example": r["error"], "first_case": r["id"]})
        f["count"] += 1
    costs = [r["cost"] for r in ok if isinstance(r.get("cost"), (int, float))]
    summary: Dict[str, Any] = {
        "target": run.target.label, "n_cases": n_cases, "repeat": repeat, "n_records": len(records),
        "n_collected": len(ok), "n_failed": len(failed), "failures": failures, "n_cached": run.cached,
        "n_requests": run.requests, "n_empty_retried": run.empty_retried,
        "n_empty_answers": sum(_blank(r.get("answer")) for r in ok),
        "n_empty_retrievals": sum(not r["retrieved"] for r in ok),
        "n_empty_retrievals_unlabelled": sum(not r["retrieved"] and r["id"] in unlabelled for r in ok),
        "retrieval_modes": modes,
        "latency_ms": {"p50": _percentile([r["latency_ms"] for r in ok], 0.5),
                       "p95": _percentile([r["latency_ms"] for r in ok], 0.95), "n": len(ok)},
        "system_cost_usd": round(sum(costs), 8) if costs else None, "n_with_cost": len(costs),
        "seconds": round(seconds, 3), "rate": run.limits.summary(),
    }
    warnings = []
    change = mode_change(records)
    if change is not None:
        warnings.append(change)
    if run.echoed:
        warnings.append(_echo_warning(records, run.echoed))
    if expect_mode is not None:
        other = [r for r in ok if r["retrieval_mode"] != expect_mode]
        summary["expect_mode"] = {"mode": expect_mode, "n_other": len(other),
                                  "first_case": other[0]["id"] if other else None,
                                  "first_mode": other[0]["retrieval_mode"] if other else None}
    summary["warnings"] = warnings
    return summary, warnings


# -- output ------------------------------------------------------------------------------------------------
def _check_not_an_input(out: Path, *, golden: Any, target: Any, cache: Any) -> None:
    """:class:`InputError` when ``out`` is the golden set, the target file or the cache: the run file replaced it
    when the run ended (``--out golden.jsonl`` lost the golden set, ``--out`` on the cache every paid reply)."""
    from ragmeter._io import input_overwritten

    inputs = [(f"the golden set ({option('golden')})", golden), (f"the collect cache ({option('cache')})", cache)]
    if isinstance(target, HttpTarget):
        inputs.insert(1, (f"the target file ({option('target')})", target.source))
    what = input_overwritten(out, inputs)
    if what is not None:
        raise InputError(f"{option('out', out)}: is {what}; writing the run there would replace it, choose another "
                         f"{option('out')}")


def _check_writable(path: Path) -> List[Path]:
    """:class:`OSError` naming ``path`` when the run file could not be written there (a folder in its place, a
    file where a folder must be, no permission): said before the first call, not after the last, when without a
    cache every reply would be lost. A missing folder is made; returns the folders made, innermost first."""
    import errno

    from ragmeter._io import _new_temporary_file, output_path_problem

    if path.is_dir():
        raise OSError(errno.EISDIR, "is a folder, not a file", str(path))
    problem = output_path_problem(path, folder=False)  # a file where a folder must be: 'File exists' said nothing
    if problem is not None:
        raise OSError(errno.ENOTDIR, problem, str(path))
    made = [folder for folder in path.absolute().parents if not folder.exists()]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # as score, sweep and compare make their --out's folder
        _new_temporary_file(path).unlink()
    except OSError as exc:
        _remove_if_empty(made)
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    return made


def _remove_if_empty(folders: List[Path]) -> None:
    """Remove the folders a refused or stopped run made for its run file (innermost first), those still empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return  # not empty (a spilled reply is kept there), or gone: leave it and its parents


def write_run(records: List[Dict[str, Any]], path: Union[str, Path]) -> Path:
    """Write a run file atomically: Parquet for ``.parquet``/``.pq``, JSONL otherwise."""
    from ragmeter._io import atomic_file, strict_json, write_frame, write_text

    path = Path(path)
    with atomic_file(path) as tmp:
        if path.suffix.lower() in (".parquet", ".pq"):
            write_frame(_frame(records), tmp)
        else:
            write_text(tmp, "".join(strict_json(r, indent=None) + "\n" for r in records))
    return path


def _frame(records: List[Dict[str, Any]]) -> Any:
    import polars as pl

    from ragmeter.dataset import RETRIEVED_DTYPE

    usage = pl.Struct({"prompt_tokens": pl.Int64, "completion_tokens": pl.Int64, "total_tokens": pl.Int64})
    schema: Dict[str, Any] = {"id": pl.String}
    if any("repeat" in r for r in records):
        schema["repeat"] = pl.Int64
    schema.update({"retrieved": RETRIEVED_DTYPE, "contexts": pl.List(pl.String), "answer": pl.String,
                   "retrieval_mode": pl.String, "latency_ms": pl.Float64, "usage": usage, "cost": pl.Float64,
                   "error": pl.String, "error_kind": pl.String, "attempts": pl.Int64})  # the JSONL record's fields

    def row(r: Dict[str, Any]) -> Dict[str, Any]:
        u = r.get("usage") if isinstance(r.get("usage"), dict) else None
        return {**{k: r.get(k) for k in schema},
                "usage": {k: u.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")} if u else None,
                "contexts": r.get("contexts")}

    return pl.DataFrame([row(r) for r in records], schema=schema, strict=False)
