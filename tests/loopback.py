"""An aiohttp application served on 127.0.0.1 from a background thread: for tests that need a server of their own
shape (the judge's and the collect tests' scripted servers cover the usual ones)."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable


class LoopbackApp:
    """``with LoopbackApp(add_routes) as app:`` serves the routes ``add_routes(web.Application)`` adds, at
    ``http://127.0.0.1:{app.port}``, until the block ends."""

    def __init__(self, add_routes: Callable[[Any], None]) -> None:
        self._add_routes = add_routes
        self.port = 0

    def __enter__(self) -> "LoopbackApp":
        from aiohttp import web

        ready = threading.Event()
        self.loop = asyncio.new_event_loop()

        def main() -> None:
            asyncio.set_event_loop(self.loop)
            app = web.Application()
            self._add_routes(app)
            runner = web.AppRunner(app, access_log=None)
            self.loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)
            self.loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()
            self.loop.run_forever()
            self.loop.run_until_complete(runner.cleanup())

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
