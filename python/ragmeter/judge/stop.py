"""Stopping a whole run when nothing more can succeed.

Some failures are not the row's: a refused key (401/403), an exhausted quota,
an unknown model or route (404), an endpoint that cannot be reached at all, a
cache that can no longer be written. Retrying them row by row only spends time
and money on answers that are known in advance. The first one trips the run's
:class:`RunStop`: no further request is sent, the runner stops its workers and
raises :class:`JudgeStopped` (a user error, exit status 2) with the reason in
one line. Replies already received are in the cache, so a rerun resumes.

:class:`Breaker` trips the stop after repeated transport failures (connection
refused, DNS, TLS, time-outs) spread over different calls with no answer from
the endpoint in between; one slow call that recovers on retry does not trip it.
:class:`ServerErrors` trips it when call after call gives up on server errors (5xx, unreadable replies) with
no usable reply in between: an endpoint that is down behind its gateway answers every request, only never
with an answer.
"""
from __future__ import annotations

from typing import Dict, Optional

from ragmeter.errors import InputError

__all__ = ["RunStop", "Halt", "JudgeStopped", "Breaker", "ServerErrors", "FATAL_KINDS", "TRANSPORT_KINDS",
           "SERVER_KINDS"]

#: failure kinds (see :func:`ragmeter.judge.retry.classify`) that no other request can escape
FATAL_KINDS = frozenset({"auth", "quota", "not_found"})
#: failure kinds where the endpoint was not heard from at all
TRANSPORT_KINDS = frozenset({"connection", "timeout"})
#: failure kinds where the endpoint answered, but with an error of its own (5xx) or nothing readable
SERVER_KINDS = frozenset({"server", "bad_response"})


class JudgeStopped(InputError):
    """The run was stopped before it finished; ``kind`` says why (auth, quota, not_found, unreachable,
    server_errors, cache_write) and the message is the one line for the user. Nothing is marked as scored."""

    exit_code = 2

    def __init__(self, message: str, kind: str = "stopped") -> None:
        super().__init__(message)
        self.kind = kind


class Halt(Exception):
    """Internal: raised in a worker once the run's stop is tripped; the runner turns it into JudgeStopped."""


class RunStop:
    """The first reason to stop the run, shared by the client, the engine and the runner."""

    def __init__(self) -> None:
        self.kind: Optional[str] = None
        self.reason: Optional[str] = None

    @property
    def stopped(self) -> bool:
        return self.reason is not None

    def trip(self, kind: str, reason: str) -> None:
        if self.reason is None:  # the first cause is the one reported
            self.kind, self.reason = kind, reason

    def check(self) -> None:
        """Raise :class:`Halt` when tripped: called before anything that would send a request."""
        if self.reason is not None:
            raise Halt(self.reason)


class Breaker:
    """Counts transport failures since the endpoint last answered anything (any HTTP status resets it).

    Trips once the failures come from at least ``min_calls`` (2) different calls and one call has failed
    ``per_call`` (2) times (its retry, after back-off, failed too), with no answer from the endpoint in between.
    A dead or unreachable endpoint fails every call in flight and every retry; one flaky connection fails one
    call, and the other calls' answers reset the count. A rerun resumes from the cache either way.

    Once the endpoint has answered in this run, one call must have failed ``per_call + 1`` times: at the end of
    a run the only calls left may be the few whose requests hang, with nothing else in flight to answer in
    between, and two hung attempts each would read a live endpoint as a dead one. An endpoint that dies
    mid-run still trips it within a retry more.
    """

    def __init__(self, min_calls: int = 2, per_call: int = 2) -> None:
        self.min_calls = max(1, min_calls)
        self.per_call = max(1, per_call)
        self.failures = 0
        self.ever_answered = False
        self._by_call: Dict[int, int] = {}

    def answered(self) -> None:
        self.failures = 0
        self.ever_answered = True
        self._by_call.clear()

    def failed(self, call: int) -> bool:
        """Record one transport failure of call ``call``; True when the breaker trips."""
        self.failures += 1
        self._by_call[call] = self._by_call.get(call, 0) + 1
        per_call = self.per_call + (1 if self.ever_answered else 0)
        return len(self._by_call) >= self.min_calls and max(self._by_call.values()) >= per_call


class ServerErrors:
    """Counts calls that gave up on a server error (:data:`SERVER_KINDS`) after all their attempts, since the
    endpoint last gave a usable reply; :meth:`gave_up` is True once ``calls`` (5) of them come in a row.

    Each counted call has already spent its retries (6 attempts by default), so five in a row with nothing
    usable in between is an outage, not a prompt the server cannot take: such prompts fail their own rows
    while the others' answers reset the count. Without it a dead endpoint cost every remaining row its
    retries and back-off (hours on a large run) for a run that then failed anyway.
    """

    def __init__(self, calls: int = 5) -> None:
        self.calls = max(1, calls)
        self.count = 0

    def answered(self) -> None:
        self.count = 0

    def gave_up(self, kind: str) -> bool:
        """Record a call that gave up on ``kind``; True when the run should stop."""
        if kind not in SERVER_KINDS:
            return False
        self.count += 1
        return self.count >= self.calls
