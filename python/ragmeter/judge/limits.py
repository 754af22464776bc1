"""Client-side limits: concurrent requests, requests per minute, tokens per minute.

Requests per minute are smoothed: a burst of at most ``rpm * period / 60``
requests (``period`` defaults to 1 s), then a steady rate of ``rpm`` minus that
burst per minute, so that no 60-second window ever holds more than ``rpm``
requests. With ``rpm=600``: 10 at once, then 590 a minute (98.3%), rather than
600 at once. Tokens per minute use aiolimiter's weighted
``acquire`` with the request's estimated tokens (prompt estimate plus
``max_tokens``) over a one-minute bucket, as providers count them. These are the
user's ceilings.

Within them, ``control="adaptive"`` (the default) lets a
:class:`~ragmeter.judge.rate.RateController` learn the provider's limit: a
token bucket cut on throttles (429, 529, 503 with Retry-After) and regrown on
success, and a concurrency lowered when answers queue or time out. A
throttle's Retry-After holds the other requests only briefly.
``control="fixed"`` is the policy before it: fixed concurrency, and a response
with a Retry-After pauses every new request for the full Retry-After.
"""
from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, Mapping, Optional

from aiolimiter import AsyncLimiter

from .rate import RateController, is_throttle

__all__ = ["Limits", "RATE_CONTROLS", "MIN_RPM", "check_rpm"]

RATE_CONTROLS = ("adaptive", "fixed")
#: the slowest --rpm taken (judge and collect): a slower rate leaves a run waiting for hours between two calls, a
#: mistyped flag, not an endpoint's limit (1e-300 passed a > 0 check, then hung after the first call)
MIN_RPM = 0.1


def check_rpm(rpm: float) -> None:
    """``rpm`` (given, finite and > 0 already): at least :data:`MIN_RPM`, else an InputError naming the option."""
    from ragmeter._front import arg
    from ragmeter.errors import InputError

    if rpm < MIN_RPM:
        raise InputError(f"{arg('rpm')}: must be at least {MIN_RPM:g} (one request every {1 / MIN_RPM:g} minutes), "
                         f"got {rpm!r}")


class Limits:
    def __init__(self, concurrency: int = 8, rpm: Optional[float] = None, tpm: Optional[float] = None,
                 period: float = 1.0, *, control: str = "adaptive",
                 clock: Callable[[], float] = time.monotonic) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if control not in RATE_CONTROLS:
            raise ValueError(f"rate control must be one of {', '.join(RATE_CONTROLS)}")
        self.concurrency = concurrency
        self.rpm = rpm
        self.tpm = tpm
        self.control = control
        self.controller: Optional[RateController] = (
            RateController(concurrency, ceiling_rps=rpm / 60.0 if rpm else None, clock=clock)
            if control == "adaptive" else None)
        self._gate = _Gate(concurrency)
        self._rpm = _rpm_limiter(rpm, period) if rpm else None
        self._tpm = AsyncLimiter(float(tpm), 60.0) if tpm else None
        self._resume_at = 0.0
        self.in_flight = 0
        self.throttled = 0   #: throttled answers (429, 529, 503 with Retry-After), either policy
        self.pauses = 0      #: global pauses (fixed policy)

    def pause(self, seconds: float) -> None:
        """Fixed policy: hold back every new request for ``seconds`` (the server asked us to slow down).

        The adaptive policy ignores it: its controller already reacted to the answer (see :meth:`_Slot.answer`)."""
        if self.controller is not None:
            return
        self.pauses += 1
        self._resume_at = max(self._resume_at, time.monotonic() + seconds)

    def rate(self) -> Optional[float]:
        """Requests per second the adaptive bucket allows now; None when not limited (or the fixed policy)."""
        return None if self.controller is None else self.controller.current_rate()

    def summary(self) -> Dict[str, Any]:
        """The ``rate`` section of judge_summary.json."""
        if self.controller is None:
            return {"policy": "fixed", "final_rps": None, "min_rps": None, "throttled": self.throttled,
                    "pauses": self.pauses, "concurrency": self.concurrency}
        return {**self.controller.summary(), "throttled": self.throttled}

    async def _wait_resume(self) -> None:
        while True:
            wait = self._resume_at - time.monotonic()
            if wait <= 0:
                return
            await asyncio.sleep(wait)

    def slot(self, tokens: int = 0, *, retry: bool = False) -> "_Slot":
        """Hold one request slot: wait for concurrency, pauses, the rpm and tpm buckets.

        Use as ``async with limits.slot(tokens) as slot:`` and report the outcome with ``slot.answer(status,
        headers)`` or ``slot.timed_out()``. ``retry=True`` (an attempt after a throttle's Retry-After) goes
        ahead of the first attempts waiting for a place: a case that waited out a Retry-After is not queued
        again behind new cases, which would lengthen the end of a run by a queue's depth per retry.
        """
        return _Slot(self, tokens, retry)


def _rpm_limiter(rpm: float, period: float) -> AsyncLimiter:
    burst = max(1.0, rpm * period / 60.0)
    per_minute = max(rpm - burst, rpm / 2.0)  # burst + per_minute <= rpm in any minute
    return AsyncLimiter(burst, burst * 60.0 / per_minute)


class _Gate:
    """A semaphore whose limit can move (the controller's concurrency); FIFO, except that a retry may go first."""

    __slots__ = ("limit", "held", "_waiters")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self._waiters: Deque["asyncio.Future[None]"] = deque()

    async def acquire(self, first: bool = False) -> None:
        """Wait for a place; ``first``: ahead of the others waiting."""
        if self.held < self.limit and not self._waiters:
            self.held += 1
            return
        fut: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        if first:
            self._waiters.appendleft(fut)
        else:
            self._waiters.append(fut)
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                self.release()  # woken and cancelled at once: hand the place on
            else:
                try:
                    self._waiters.remove(fut)
                except ValueError:
                    pass
            raise

    def release(self) -> None:
        self.held -= 1
        self.wake()

    def wake(self) -> None:
        while self._waiters and self.held < self.limit:
            fut = self._waiters.popleft()
            if not fut.done():
                self.held += 1
                fut.set_result(None)


class _Slot:
    """The async context manager of :meth:`Limits.slot` (a class: cheaper than a generator per request).

    The caller reports the answer with :meth:`answer` (status and headers), or a time-out with
    :meth:`timed_out`; a time-out raised through the ``async with`` is seen on the way out. They go to the
    adaptive controller, which moves the rate and the concurrency. Any other failure (a dropped connection)
    is reported by nothing: it says nothing about the rate."""

    __slots__ = ("_limits", "_tokens", "_retry", "sent_at", "_reported")

    def __init__(self, limits: Limits, tokens: int, retry: bool = False) -> None:
        self._limits = limits
        self._tokens = tokens
        self._retry = retry
        self.sent_at = 0.0
        self._reported = False

    async def __aenter__(self) -> "_Slot":
        lim = self._limits
        ctl = lim.controller
        if ctl is not None and ctl.concurrency != lim._gate.limit:
            lim._gate.limit = ctl.concurrency
            lim._gate.wake()
        await lim._gate.acquire(self._retry)
        try:
            await lim._wait_resume()
            if lim._tpm is not None and self._tokens > 0:
                await lim._tpm.acquire(min(float(self._tokens), lim._tpm.max_rate))
            if lim._rpm is not None:
                await lim._rpm.acquire(1)
            while ctl is not None:
                schedule = ctl.schedule
                wait = ctl.reserve()  # this request's place in the bucket's schedule
                if wait <= 0:
                    break
                await asyncio.sleep(wait)
                if ctl.schedule == schedule:
                    break  # (a cut while it waited: its place was at the old rate, it takes a new one)
            await lim._wait_resume()
        except BaseException:
            lim._gate.release()
            raise
        lim.in_flight += 1
        self.sent_at = ctl.sent() if ctl is not None else time.monotonic()
        return self

    def timed_out(self) -> None:
        """The request got no answer within its time-out (for callers that catch the time-out inside the slot;
        one raised through the ``async with`` is seen on the way out)."""
        lim = self._limits
        if self._reported:
            return
        self._reported = True
        if lim.controller is not None:
            lim.controller.timed_out(self.sent_at)

    def answer(self, status: int, headers: Optional[Mapping[str, str]]) -> None:
        """The server answered ``status``: a throttle cuts the rate, any other answer is a latency sample. (The
        judge client passes the status the answer stands for, :func:`~ragmeter.judge.retry.reply_status`: a 200
        carrying a 429 in its error object is a 429.)"""
        from .retry import parse_retry_after

        lim = self._limits
        self._reported = True
        retry_after = parse_retry_after(headers) if status in (429, 503, 529) else None
        if is_throttle(status, retry_after):
            lim.throttled += 1
            if lim.controller is not None:  # a cut also holds the others briefly (the bucket's schedule)
                lim.controller.throttle(self.sent_at, retry_after)
        elif lim.controller is not None:
            lim.controller.answered(self.sent_at, lim.controller.clock() - self.sent_at)

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        lim = self._limits
        lim.in_flight -= 1
        if (lim.controller is not None and not self._reported and exc_type is not None
                and issubclass(exc_type, (asyncio.TimeoutError, TimeoutError))):
            lim.controller.timed_out(self.sent_at)
        ctl = lim.controller
        if ctl is not None and ctl.concurrency != lim._gate.limit:
            lim._gate.limit = ctl.concurrency
        lim._gate.release()
