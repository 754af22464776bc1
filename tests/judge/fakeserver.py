"""A scripted local OpenAI-compatible server for judge tests and benchmarks.

Serves ``POST /v1/chat/completions`` and ``POST /v1/embeddings`` on 127.0.0.1
from a background thread (``FakeServer().start()``) or as a process
(``python tests/judge/fakeserver.py --latency 0.2``, which prints its port).

Each request takes the next scripted action from ``script`` (a list consumed in
order), else the first matching ``rules`` entry (predicate on the request),
else ``"ok"``. Actions: ``"ok"``, ``"malformed"`` (content that is not JSON),
``"empty"`` (empty content, reasoning content, finish_reason length),
``"truncated"`` (half a JSON object, finish_reason length), ``"timeout"``
(sleeps ``timeout_sleep`` s before answering), ``"drop"`` (closes the
connection), ``"hang"`` (waits until :meth:`release`), ``"garbage"`` (a 200
whose body is not JSON), ``"fenced"`` (valid JSON in a code fence), an int
status (``429``, ``500``, ``503``, ``400``...), or a dict ``{"status": 429,
"headers": {...}, "body": "..."}``, or ``{"content": "..."}`` (optionally with ``finish_reason``,
``completion_tokens`` and ``refusal``: OpenAI's ``message.refusal``, sent with ``"content": None``; a reply
cut at ``length`` bills the whole ``max_tokens`` unless told otherwise).

Load modes, applied to requests whose action is ``"ok"`` (for the rate-control tests and
benchmarks): ``random_429`` (that share of requests answered 429 with ``Retry-After: 1``
at once, whatever the load; seeded by ``seed``), ``bucket_rps`` (a hidden token bucket of
that many requests per second, ``bucket_burst`` deep: a request finding it empty is
answered 429 with ``Retry-After: 1``), ``serialise`` (one request processed at a time,
like a local server with one slot; a request the client gave up on is still processed to
the end, as llama.cpp's server does). ``throttled`` counts the 429s these modes sent.

``GET /v1/models`` (the client's preflight) answers ``models_action``: ``"ok"``
(a model list), a dict (sent as the JSON body), an int status, ``"hang"`` or ``"drop"``; it is counted in
``models_requests``, not in ``requests`` (which counts the POSTs).

Everything is recorded in ``log`` (one dict per request: arrival/finish times,
task, prompt key, max_tokens, action, whether the Authorization header matched).
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import re
import sys
import threading
import time
from collections import Counter
from typing import Any, Callable, Dict, List, Optional, Tuple

from aiohttp import web

TASK = re.compile(r"^Task: ([a-z0-9-]+) \(prompt (v[^)]+)\)")


def prompt_key(messages: List[Dict[str, str]]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def _split(text: str) -> List[str]:
    return [s.strip() for s in re.split(r"[.。!?！？\n]+", text or "") if s.strip()]


def default_reply(task: str, payload: Dict[str, Any]) -> Dict[str, Any]:
    """A well-formed judge answer computed from the payload (deterministic)."""
    if task == "correctness":
        ans, ref = payload.get("answer") or "", payload.get("reference_answer") or ""
        ok = ref.strip().lower() in ans.lower() if ref else False
        return {"reason": "matches the reference" if ok else "differs from the reference",
                "score": 5 if ok else 2, "correct": ok}
    if task == "faithfulness-statements":
        return {"statements": _split(payload.get("answer", ""))}
    if task == "faithfulness-verdicts":
        ctx = " ".join(payload.get("contexts") or []).lower()
        return {"verdicts": [{"index": i, "reason": "r", "verdict": int(s.lower() in ctx)}
                             for i, s in enumerate(payload.get("statements") or [])]}
    if task == "answer-relevancy-questions":
        ans = payload.get("answer") or ""
        nc = any(w in ans.lower() for w in ("don't know", "does not say", "not sure")) or "没有提到" in ans
        return {"questions": [{"question": f"{ans[:40]}?", "noncommittal": nc} for _ in range(payload.get("n", 3))]}
    if task == "answer-relevancy-graded":
        return {"grades": [{"index": i, "grade": "same" if q.rstrip("?") in payload.get("question", "") else "partial"}
                           for i, q in enumerate(payload.get("generated_questions") or [])]}
    if task == "context-precision":
        return {"verdicts": [{"index": c["index"], "reason": "r", "verdict": int("useful" in c["text"])}
                             for c in payload.get("chunks") or []]}
    if task == "context-recall":
        ctx = " ".join(payload.get("contexts") or []).lower()
        return {"statements": [{"statement": s, "reason": "r", "attributed": int(s.lower() in ctx)}
                               for s in _split(payload.get("reference_answer", ""))]}
    if task.startswith("custom-"):  # a custom rubric metric: 4 when the payload mentions "blue", else 2
        return {"reason": "fake rubric verdict", "score": 4 if "blue" in json.dumps(payload).lower() else 2}
    return {"echo": True}


def embed_vector(text: str, dim: int = 16) -> List[float]:
    v = [0.0] * dim
    for ch in text.lower():
        v[ord(ch) % dim] += 1.0
    return v


Action = Any


class FakeServer:
    def __init__(self, *, latency: float = 0.0, api_key: Optional[str] = None, timeout_sleep: float = 2.0,
                 record: bool = True, random_429: float = 0.0, bucket_rps: Optional[float] = None,
                 bucket_burst: Optional[float] = None, serialise: bool = False, seed: int = 0) -> None:
        self.random_429 = random_429
        self.bucket_rps = bucket_rps
        self.bucket_burst = bucket_burst
        self.serialise = serialise
        self.throttled = 0
        self.ok_times: List[float] = []  #: time.time() of every answer that was not a throttle or an error
        self.abandoned = 0   #: serialised requests whose client had gone when they finished
        self._rand = random.Random(seed)
        self._tokens: Optional[float] = None
        self._refilled = 0.0
        self._serial: Optional[asyncio.Lock] = None
        self.latency = latency
        self.api_key = api_key
        self.timeout_sleep = timeout_sleep
        self.record = record
        self.script: List[Action] = []
        self.rules: List[Tuple[Callable[[Dict[str, Any]], bool], Action]] = []
        self.replies: Dict[str, Callable[[Dict[str, Any]], Any]] = {}  # task -> payload -> reply dict or str
        self.log: List[Dict[str, Any]] = []
        self.count_by_key: Counter = Counter()
        self.requests = 0
        self.models_action: Action = "ok"
        self.models_requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.port = 0
        self._lock = threading.Lock()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._release: Optional[asyncio.Event] = None
        self._thread: Optional[threading.Thread] = None
        self._runner: Optional[web.AppRunner] = None

    # -- control ------------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def release(self) -> None:
        """Let every ``hang`` request (present and future) go on."""
        if self._loop is not None and self._release is not None:
            self._loop.call_soon_threadsafe(self._release.set)

    def _next_action(self, info: Dict[str, Any]) -> Action:
        with self._lock:
            if self.script:
                return self.script.pop(0)
        for pred, action in self.rules:
            if pred(info):
                return action
        return "ok"

    # -- app --------------------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_get("/v1/models", self._models)
        return app

    @property
    def total_requests(self) -> int:
        """Every request received: the POSTs and the preflight GETs."""
        return self.requests + self.models_requests

    async def _models(self, request: web.Request) -> web.StreamResponse:
        self.models_requests += 1
        action = self.models_action
        if action == "hang":
            assert self._release is not None
            await self._release.wait()
        if action == "drop":
            request.transport.close()  # type: ignore[union-attr]
            raise asyncio.CancelledError()
        if isinstance(action, int):
            body = json.dumps({"error": {"message": f"scripted {action}", "type": "test", "code": action}})
            return web.Response(status=action, text=body, content_type="application/json")
        if isinstance(action, dict):  # a scripted model list (e.g. with context-window metadata)
            return web.json_response(action)
        return web.json_response({"object": "list", "data": [{"id": "gpt-4o-mini", "object": "model"}]})

    async def _common(self, request: web.Request, kind: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        body = await request.json()
        info: Dict[str, Any] = {"t_in": time.monotonic(), "wall_in": time.time(), "kind": kind,
                                "auth_ok": self.api_key is None or
                                request.headers.get("Authorization") == f"Bearer {self.api_key}"}
        if kind == "chat":
            msgs = body.get("messages") or []
            m = TASK.match(msgs[0]["content"]) if msgs else None
            info["task"] = m.group(1) if m else None
            info["repair"] = len(msgs) > 2
            info["key"] = prompt_key(msgs)
            info["max_tokens"] = body.get("max_tokens")
            info["json_mode"] = "response_format" in body
            try:
                info["payload"] = json.loads(msgs[1]["content"]) if len(msgs) > 1 else {}
            except ValueError:
                info["payload"] = {}
        else:
            info["task"] = "embeddings"
            info["key"] = prompt_key([{"input": body.get("input")}])
            info["payload"] = body
        self.requests += 1
        self.count_by_key[info["key"]] += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        if self.record:
            self.log.append(info)
        return body, info

    def _load_action(self, action: Action) -> Action:
        """The load modes: a 429 from the hidden bucket or the random share, else ``action`` unchanged."""
        if action != "ok":
            return action
        if self.bucket_rps:
            now = time.monotonic()
            burst = self.bucket_burst if self.bucket_burst is not None else self.bucket_rps
            if self._tokens is None:
                self._tokens, self._refilled = burst, now
            self._tokens = min(burst, self._tokens + (now - self._refilled) * self.bucket_rps)
            self._refilled = now
            if self._tokens < 1.0:
                self.throttled += 1
                return {"status": 429, "headers": {"Retry-After": "1"}}
            self._tokens -= 1.0
        if self.random_429 and self._rand.random() < self.random_429:
            self.throttled += 1
            return {"status": 429, "headers": {"Retry-After": "1"}}
        return action

    async def _serial_work(self) -> None:
        if self._serial is None:
            self._serial = asyncio.Lock()
        async with self._serial:
            await asyncio.sleep(self.latency)

    async def _act(self, request: web.Request, info: Dict[str, Any], make_ok: Callable[[], Dict[str, Any]]):
        action = self._load_action(self._next_action(info))
        info["action"] = action if isinstance(action, (str, int)) else json.dumps(action, sort_keys=True)
        try:
            if isinstance(action, dict) and action.get("status") == 429 and (self.bucket_rps or self.random_429):
                pass  # a throttle is answered at once
            elif self.serialise:
                work = asyncio.ensure_future(self._serial_work())
                try:
                    await asyncio.shield(work)  # the client leaving does not stop the work (llama.cpp)
                except asyncio.CancelledError:
                    self.abandoned += 1
                    raise
            elif self.latency:
                await asyncio.sleep(self.latency)
            if action == "timeout":
                await asyncio.sleep(self.timeout_sleep)
            if action == "hang":
                assert self._release is not None
                await self._release.wait()
                action = "ok"
            if action == "drop":
                request.transport.close()  # type: ignore[union-attr]
                raise asyncio.CancelledError()
            if action == "garbage":
                return web.Response(status=200, text="<html>bad gateway</html>", content_type="text/html")
            if isinstance(action, int) or (isinstance(action, dict) and "status" in action):
                status = action if isinstance(action, int) else action["status"]
                headers = {} if isinstance(action, int) else action.get("headers", {})
                body = action.get("body") if isinstance(action, dict) else None
                if body is None:
                    body = json.dumps({"error": {"message": f"scripted {status}", "type": "test", "code": status}})
                return web.Response(status=status, text=body, headers=headers, content_type="application/json")
            self.ok_times.append(time.time())
            return web.json_response(make_ok_action(action, info, make_ok))
        finally:
            self.in_flight -= 1
            info["t_out"] = time.monotonic()

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body, info = await self._common(request, "chat")

        def make_ok() -> Dict[str, Any]:
            task = info.get("task") or ""
            custom = self.replies.get(task)
            reply = custom(info["payload"]) if custom else default_reply(task, info["payload"])
            return reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)

        return await self._act(request, info, make_ok)

    async def _embeddings(self, request: web.Request) -> web.StreamResponse:
        body, info = await self._common(request, "embeddings")
        inputs = body.get("input") or []
        if isinstance(inputs, str):
            inputs = [inputs]

        def make_ok() -> Dict[str, Any]:
            return {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": embed_vector(t)}
                                               for i, t in enumerate(inputs)],
                    "model": body.get("model"), "usage": {"prompt_tokens": sum(len(t) // 4 + 1 for t in inputs),
                                                          "total_tokens": 0}}

        return await self._act(request, info, make_ok)

    # -- lifecycle --------------------------------------------------------------------------------------
    async def _start(self, port: int = 0) -> None:
        self._release = asyncio.Event()
        self._runner = web.AppRunner(self.app(), access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def start(self, port: int = 0) -> "FakeServer":
        """Serve from a background thread, on ``port`` (0: any free one; a killed server's to come back)."""
        ready = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            loop.run_until_complete(self._start(port))
            ready.set()
            loop.run_forever()
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]  # serialised work left behind
            for t in pending:
                t.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(self._runner.cleanup())  # type: ignore[union-attr]
            loop.close()

        self._thread = threading.Thread(target=main, daemon=True, name="fake-openai")
        self._thread.start()
        ready.wait(10)
        return self

    def kill(self) -> None:
        """Go away as a crashed endpoint does: the requests held (``hang``) are cut off unanswered."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def stop(self) -> None:
        if self._loop is not None:
            self.release()
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> "FakeServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def by_task(self, task: str) -> List[Dict[str, Any]]:
        return [r for r in self.log if r.get("task") == task]


def make_ok_action(action: Action, info: Dict[str, Any], make_ok: Callable[[], Any]) -> Dict[str, Any]:
    """The 200 body for ok-ish actions (ok, malformed, empty, truncated, fenced, custom content)."""
    if info["kind"] == "embeddings":
        return make_ok()
    finish = "stop"
    reasoning = None
    if isinstance(action, dict) and "content" in action:
        content = action["content"]
        finish = action.get("finish_reason", "stop")
    elif action == "malformed":
        content = "Sure! Here is my evaluation: {score: five,"
    elif action == "empty":
        content, finish, reasoning = "", "length", "Let me think step by step about this. " * 20
    elif action == "truncated":
        full = make_ok()
        content, finish, reasoning = full[: max(1, len(full) // 2)], "length", "thinking..."
    elif action == "fenced":
        content = "```json\n" + make_ok() + "\n```"
    else:
        content = make_ok()
    message: Dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if isinstance(action, dict) and "refusal" in action:
        message["refusal"] = action["refusal"]
    pt = sum(len(str(v)) for v in info.get("payload", {}).values()) // 4 + 50
    ct = len(content or "") // 4 + (len(reasoning) // 4 if reasoning else 0) + 1
    if finish == "length" and info.get("max_tokens"):
        ct = int(info["max_tokens"])  # as real servers bill a cut output: the whole budget
    if isinstance(action, dict) and "completion_tokens" in action:
        ct = int(action["completion_tokens"])
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()), "model": "fake",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}}


#: every fault the scripted server can play, for the storm tests
STORM_ACTIONS = [429, 500, 503, "timeout", "drop", "empty", "truncated", "malformed", "garbage", "fenced", "ok",
                 {"status": 429, "headers": {"retry-after-ms": "5"}}]


def storm(server: "FakeServer") -> list:
    """Each request key misbehaves (one of STORM_ACTIONS, by key) on its first two attempts, then answers;
    item 7 always gets a 400. Returns the actions."""
    server.rules = [(lambda info, i=i: int(info["key"][:8], 16) % 13 == i and server.count_by_key[info["key"]] <= 2, a)
                    for i, a in enumerate(STORM_ACTIONS)]
    server.rules.insert(0, (lambda info: "item 7 " in json.dumps(info.get("payload", {})).lower(), 400))
    return STORM_ACTIONS


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--random-429", type=float, default=0.0)
    ap.add_argument("--bucket-rps", type=float, default=None)
    ap.add_argument("--bucket-burst", type=float, default=None)
    ap.add_argument("--serialise", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    server = FakeServer(latency=args.latency, record=False, random_429=args.random_429, bucket_rps=args.bucket_rps,
                        bucket_burst=args.bucket_burst, serialise=args.serialise, seed=args.seed)

    async def serve() -> None:
        import signal

        await server._start(args.port)
        print(server.port, flush=True)
        done = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, done.set)
        await done.wait()
        # the benchmarks read what the server saw from its last line
        print(json.dumps({"requests": server.requests, "throttled": server.throttled,
                          "abandoned": server.abandoned, "ok_times": server.ok_times}), flush=True)

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
