"""A scripted local RAG system for collect tests: ``POST /ask`` (and ``GET /ask``) on 127.0.0.1.

It answers each question from the bundled example run (``python/ragmeter/_example/run.jsonl``), by case id; an id
the run does not hold gets an empty retrieval and a fixed answer. ``script`` maps a case id to the actions its
successive requests take (then ``"ok"``): ``"ok"``, an int status (``429``, ``500``, ``401``...), a dict
``{"status": 429, "headers": {...}}`` (with ``"echo": True`` a text body showing the request's Authorization
header, as debug pages do), ``"empty"`` (a blank answer), ``"timeout"`` (sleeps ``timeout_sleep``
seconds first), ``"hang"`` (waits until :meth:`release`; :meth:`kill` cuts it off unanswered), ``"garbage"`` (a 200 whose body is not JSON), ``"wrongshape"`` (a JSON object without the
record's fields), ``"latin1"`` / ``"not_utf8"`` (the record in Latin-1 bytes, with / without
``charset=iso-8859-1``). ``api_key``: requests without
``Authorization: Bearer <key>`` get 401. ``modes``: None keeps each record's mode; otherwise the mode reported
is ``modes[0]`` for the first ``degrade_after`` answered cases and ``modes[1]`` after (``degrade_after`` None: always
``modes[0]``). ``shape="nested"`` wraps the record the way many services do: ``{"data": {"output": {"text"},
"docs": [{"page_content", "metadata": {"source", "id"}, "relevance"}]}, "meta": {"mode"}}``.

``records`` replaces the example run (case id -> run record). ``vary`` maps a case id to per-request overrides of
its record: the n-th request for that case is answered with ``vary[id][n - 1]`` merged into the record (None or
a short list: the record as it is), so with ``collect --repeat N --concurrency 1`` repeat n gets the n-th entry.

``ok_status``: the HTTP status of the answers (200; a service may say 201 Created).

``echo_url``: every answer ends with the request's url and Authorization header, as a debug field would show
them (the ``echo`` error page shows the url too).

``requests`` counts the requests per case id (every request, whatever its answer).
"""
from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from aiohttp import web

RUN = Path(__file__).resolve().parents[2] / "python" / "ragmeter" / "_example" / "run.jsonl"
GOLDEN = RUN.with_name("golden.jsonl")


def example_records() -> Dict[str, Dict[str, Any]]:
    return {r["id"]: r for r in (json.loads(line) for line in RUN.read_text(encoding="utf-8").splitlines() if line)}


class RagServer:
    def __init__(self, *, script: Optional[Dict[str, Sequence[Any]]] = None, api_key: Optional[str] = None,
                 modes: Optional[Sequence[str]] = ("hybrid", "bm25"), degrade_after: Optional[int] = None,
                 shape: str = "run", delay: float = 0.0, timeout_sleep: float = 2.0,
                 records: Optional[Dict[str, Dict[str, Any]]] = None,
                 vary: Optional[Dict[str, Sequence[Optional[Dict[str, Any]]]]] = None, echo_url: bool = False,
                 ok_status: int = 200) -> None:
        self.echo_url, self.ok_status = echo_url, ok_status
        self.records = example_records() if records is None else dict(records)
        self.vary = {k: list(v) for k, v in (vary or {}).items()}
        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.api_key, self.modes, self.degrade_after = api_key, modes, degrade_after
        self.shape, self.delay, self.timeout_sleep = shape, delay, timeout_sleep
        self.requests: Counter = Counter()
        self.answered = 0
        self.bodies: List[Dict[str, Any]] = []
        self.auth_headers: List[Optional[str]] = []
        self._lock = threading.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._release: Optional[asyncio.Event] = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/ask"

    def _record(self, case_id: str) -> Dict[str, Any]:
        rec = dict(self.records.get(case_id) or {"id": case_id, "retrieved": [], "answer": "Not in the documents.",
                                                   "retrieval_mode": "hybrid"})
        if self.modes is not None:
            with self._lock:
                n = self.answered
                self.answered += 1
            late = self.degrade_after is not None and n >= self.degrade_after
            rec["retrieval_mode"] = self.modes[1] if late else self.modes[0]
        return rec

    def _wrap(self, rec: Dict[str, Any]) -> Dict[str, Any]:
        if self.shape == "run":
            return rec
        docs = [{"page_content": c["text"], "metadata": {"source": c["file"], "id": c.get("chunk_id")},
                 "relevance": c.get("score")} for c in rec.get("retrieved", [])]
        return {"data": {"output": {"text": rec.get("answer")}, "docs": docs}, "meta": {"mode": rec["retrieval_mode"]},
                "usage": rec.get("usage"), "cost": rec.get("cost")}

    async def _ask(self, request: web.Request) -> web.StreamResponse:
        if request.method == "GET":
            payload: Dict[str, Any] = dict(request.query)
        else:
            payload = await request.json()
        case_id = str(payload.get("id") or payload.get("case") or "")
        with self._lock:
            self.requests[case_id] += 1
            nth = self.requests[case_id]
            self.bodies.append(payload)
            self.auth_headers.append(request.headers.get("Authorization"))
            queue = self.script.get(case_id)
            action: Any = queue.pop(0) if queue else "ok"
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return web.json_response({"error": {"message": "invalid token"}}, status=401)
        if isinstance(action, int):
            return web.json_response({"error": {"message": f"scripted {action}"}}, status=action)
        if isinstance(action, dict) and action.get("echo"):  # a debug page showing the request's headers
            return web.Response(text=f"upstream error; request headers: Authorization: "
                                     f"{request.headers.get('Authorization')}; url: {request.url}",
                                status=action["status"])
        if isinstance(action, dict):
            return web.json_response({"error": {"message": "scripted"}}, status=action["status"],
                                     headers=action.get("headers"))
        if action == "timeout":
            await asyncio.sleep(self.timeout_sleep)
        if action == "hang":
            assert self._release is not None
            await self._release.wait()
        if action == "garbage":
            return web.Response(text="<html>upstream error</html>", content_type="text/html", status=self.ok_status)
        if action == "wrongshape":
            return web.json_response({"status": "degraded", "detail": "try later"})
        if action in ("latin1", "not_utf8"):  # the record in Latin-1, its charset declared or not
            body = json.dumps(self._record(case_id), ensure_ascii=False).encode("latin-1", "replace")
            return web.Response(body=body, headers={"Content-Type": "application/json" + (
                "; charset=iso-8859-1" if action == "latin1" else "")})
        rec = self._record(case_id)
        overrides = self.vary.get(case_id) or []
        rec.update(overrides[nth - 1] if nth <= len(overrides) and overrides[nth - 1] else {})
        if action == "empty":
            rec["answer"] = ""
        elif self.echo_url:
            rec["answer"] = f"{rec.get('answer')} (asked {request.url} with {request.headers.get('Authorization')})"
        return web.json_response(self._wrap(rec), status=self.ok_status)

    # -- lifecycle ------------------------------------------------------------------------------------
    def release(self) -> None:
        """Let every ``hang`` request go on."""
        if self._loop is not None and self._release is not None:
            self._loop.call_soon_threadsafe(self._release.set)

    def kill(self) -> None:
        """Go away as a crashed system does: the requests held (``hang``) are cut off unanswered."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def start(self, port: int = 0) -> "RagServer":
        """Serve from a background thread, on ``port`` (0: any free one; a killed server's to come back)."""
        ready = threading.Event()

        async def setup() -> web.AppRunner:
            self._release = asyncio.Event()
            app = web.Application()
            app.router.add_post("/ask", self._ask)
            app.router.add_get("/ask", self._ask)
            runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", port)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            return runner

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            runner = loop.run_until_complete(setup())
            ready.set()
            loop.run_forever()
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]  # requests held when killed
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=main, daemon=True, name="fake-rag")
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        self.release()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> "RagServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
