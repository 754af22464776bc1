"""Running ragmeter's asyncio work from synchronous code."""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Awaitable, Callable, TypeVar

T = TypeVar("T")


def run_blocking(make: Callable[[], Awaitable[T]], thread_name: str = "ragmeter") -> T:
    """``asyncio.run(make())``, also inside a running event loop (Jupyter, an async web app), where
    ``asyncio.run`` refuses: there on a private loop in a helper thread, blocking until done. ``make`` builds the
    coroutine where it runs, so none is left unawaited when the call cannot start."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())  # type: ignore[arg-type]
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=thread_name) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()  # type: ignore[arg-type]
