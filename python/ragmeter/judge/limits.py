"""Client-side limits: concurrent requests, requests per minute, tokens per minute.

Requests per minute are smoothed: a burst of at most ``rpm * period / 60``
requests (``period`` defaults to 1 s), then a steady rate of ``rpm`` minus that
burst per minute, so that no 60-second window ever holds more than ``rpm``
requests. With ``rpm=600``: 10 at once, then 590 a minute (98.3%), rather than
600 at once. Tokens per minute use aiolimiter's weighted
``acquire`` with the request's estimated tokens (prompt estimate plus
``max_tokens``) over a one-minute bucket, as providers count them. A 429 with a
Retry-After pauses every new request, not only the one that was refused.
"""
from __future__ import annotations

import asyncio
import time
from typing import Optional

from aiolimiter import AsyncLimiter

__all__ = ["Limits"]


class Limits:
    def __init__(self, concurrency: int = 8, rpm: Optional[float] = None, tpm: Optional[float] = None,
                 period: float = 1.0) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.concurrency = concurrency
        self.rpm = rpm
        self.tpm = tpm
        self._sem = asyncio.Semaphore(concurrency)
        self._rpm = _rpm_limiter(rpm, period) if rpm else None
        self._tpm = AsyncLimiter(float(tpm), 60.0) if tpm else None
        self._resume_at = 0.0
        self.in_flight = 0

    def pause(self, seconds: float) -> None:
        """Hold back every new request for ``seconds`` (server asked us to slow down)."""
        self._resume_at = max(self._resume_at, time.monotonic() + seconds)

    async def _wait_resume(self) -> None:
        while True:
            wait = self._resume_at - time.monotonic()
            if wait <= 0:
                return
            await asyncio.sleep(wait)

    def slot(self, tokens: int = 0) -> "_Slot":
        """Hold one request slot: wait for concurrency, pauses, the rpm and tpm buckets.

        Use as ``async with limits.slot(tokens):``.
        """
        return _Slot(self, tokens)


def _rpm_limiter(rpm: float, period: float) -> AsyncLimiter:
    burst = max(1.0, rpm * period / 60.0)
    per_minute = max(rpm - burst, rpm / 2.0)  # burst + per_minute <= rpm in any minute
    return AsyncLimiter(burst, burst * 60.0 / per_minute)


class _Slot:
    """The async context manager of :meth:`Limits.slot` (a class: cheaper than a generator per request)."""

    __slots__ = ("_limits", "_tokens")

    def __init__(self, limits: Limits, tokens: int) -> None:
        self._limits = limits
        self._tokens = tokens

    async def __aenter__(self) -> None:
        lim = self._limits
        await lim._sem.acquire()
        try:
            await lim._wait_resume()
            if lim._tpm is not None and self._tokens > 0:
                await lim._tpm.acquire(min(float(self._tokens), lim._tpm.max_rate))
            if lim._rpm is not None:
                await lim._rpm.acquire(1)
            await lim._wait_resume()
        except BaseException:
            lim._sem.release()
            raise
        lim.in_flight += 1

    async def __aexit__(self, *exc: object) -> None:
        self._limits.in_flight -= 1
        self._limits._sem.release()
