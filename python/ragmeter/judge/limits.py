"""Client-side limits: concurrent requests, requests per minute, tokens per minute.

Requests per minute are smoothed over ``period`` seconds (default 1 s): with
``rpm=600`` at most 10 requests start in any second after an initial burst of
10, rather than 600 at once. Tokens per minute use aiolimiter's weighted
``acquire`` with the request's estimated tokens (prompt estimate plus
``max_tokens``) over a one-minute bucket, as providers count them. A 429 with a
Retry-After pauses every new request, not only the one that was refused.
"""
from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from typing import AsyncIterator, Optional

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
        self._rpm = AsyncLimiter(max(1.0, rpm * period / 60.0), period) if rpm else None
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

    @asynccontextmanager
    async def slot(self, tokens: int = 0) -> AsyncIterator[None]:
        """Hold one request slot: wait for concurrency, pauses, the rpm and tpm buckets."""
        async with self._sem:
            await self._wait_resume()
            if self._tpm is not None and tokens > 0:
                await self._tpm.acquire(min(float(tokens), self._tpm.max_rate))
            if self._rpm is not None:
                await self._rpm.acquire(1)
            await self._wait_resume()
            self.in_flight += 1
            try:
                yield
            finally:
                self.in_flight -= 1
