"""Persistent cache of successful judge calls (SQLite in WAL mode).

The key is the SHA-256 of a canonical JSON document holding the endpoint
(without any user:password part or query string), the model, the request
parameters, the prompt name and version, and the inputs (the messages sent).
The API key is never part of it and never written. Each entry is committed
before the reply is handed back, so a run killed mid-way (even with SIGKILL)
keeps every finished call and a rerun sends none of them again. Several
processes may share one file: WAL lets readers and one writer work together
and ``busy_timeout`` makes writers wait for each other.

Group commit. The engine writes through :meth:`Cache.commit`, which queues the
entry and returns only once the transaction holding it is committed. The
queue is written in one transaction ``flush_interval`` after its first entry
(default 25 ms) or as soon as it holds ``flush_rows`` entries (default 256).

A call is *finished* when its reply is committed. Nothing downstream (parsing,
the next step of a metric, the row, the progress bar, the outputs) sees a
reply before that, so a SIGKILL can only lose replies that no part of the run
had used yet, as with one commit per call; a rerun re-sends exactly those.
What changes is the window between a response arriving and its commit: at
most ``flush_interval`` instead of microseconds. In exchange the cost of a
commit (WAL frames, checksums, shm locks) is shared by every entry of the
batch. :meth:`get` also sees queued entries, and :meth:`close` (reached on
errors and cancellation too) writes whatever is still queued.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union
from urllib.parse import urlsplit, urlunsplit

from . import _json

__all__ = ["Cache", "cache_key", "key_hasher", "messages_json", "public_endpoint"]

SCHEMA_VERSION = 1


def public_endpoint(url: str) -> str:
    """``url`` without credentials, query or fragment (safe to store and report)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid url>"
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


def cache_key(*, endpoint: str, model: str, params: Mapping[str, Any], prompt: str, inputs: Any = None,
              inputs_json: Optional[str] = None) -> str:
    """SHA-256 hex digest of everything that determines a response.

    The digest covers a canonical JSON header (schema version, endpoint without
    credentials, model, parameters, prompt id) and the JSON of the inputs; pass
    ``inputs_json`` when the caller already encoded them (it must be
    ``messages_json(inputs)``), so the hot path encodes the messages once.
    """
    body = inputs_json if inputs_json is not None else messages_json(inputs)
    h = key_hasher(endpoint=endpoint, model=model, params=params, prompt=prompt)
    h.update(body.encode("utf-8"))
    return h.hexdigest()


def key_hasher(*, endpoint: str, model: str, params: Mapping[str, Any], prompt: str) -> "hashlib._Hash":
    """The SHA-256 state of :func:`cache_key` after the header: ``.copy()`` it and ``update`` it with the
    UTF-8 JSON of the inputs (:func:`messages_bytes`) to get the same digest without rebuilding the header."""
    head = {"v": SCHEMA_VERSION, "endpoint": public_endpoint(endpoint), "model": model, "params": dict(params),
            "prompt": prompt}
    text = json.dumps(head, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    h = hashlib.sha256(text.encode("utf-8"))
    h.update(b"\n")
    return h


def messages_json(inputs: Any) -> str:
    """The one JSON encoding of request inputs, shared by the cache key and the request body."""
    return _json.messages_bytes(inputs).decode("utf-8")


#: the same encoding as UTF-8 bytes (what the hot path hashes and sends)
messages_bytes = _json.messages_bytes

_INSERT = "INSERT OR REPLACE INTO judge_cache (key, value, prompt, model, created) VALUES (?, ?, ?, ?, ?)"


class Cache:
    """A key -> JSON value store. ``Cache(None)`` is a disabled cache.

    ``flush_interval`` (seconds) and ``flush_rows`` tune the group commit of
    :meth:`commit`; :meth:`put` always commits at once.
    """

    def __init__(self, path: Union[str, os.PathLike, None], *, flush_interval: float = 0.025,
                 flush_rows: int = 256) -> None:
        self.path = None if path is None else Path(path)
        self.flush_interval = float(flush_interval)
        self.flush_rows = max(1, int(flush_rows))
        self._lock = threading.Lock()
        self._conn: Optional[sqlite3.Connection] = None
        self._pending: Dict[str, Tuple[str, str, str, str, float]] = {}
        self._waiters: List["asyncio.Future[None]"] = []
        self._timer: Optional[asyncio.TimerHandle] = None
        self.hits = 0
        self.misses = 0
        self.transactions = 0  #: write transactions committed (group commits and puts)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS judge_cache ("
                " key TEXT PRIMARY KEY, value TEXT NOT NULL, prompt TEXT, model TEXT, created REAL NOT NULL)"
            )
            self._conn = conn

    @property
    def enabled(self) -> bool:
        return self._conn is not None

    @property
    def pending(self) -> int:
        """Entries queued by :meth:`commit` and not yet committed."""
        return len(self._pending)

    def get(self, key: str) -> Optional[dict]:
        if self._conn is None:
            return None
        queued = self._pending.get(key)
        if queued is not None:
            text: Optional[str] = queued[1]
        else:
            with self._lock:
                row = self._conn.execute("SELECT value FROM judge_cache WHERE key = ?", (key,)).fetchone()
            text = None if row is None else row[0]
        if text is None:
            self.misses += 1
            return None
        self.hits += 1
        return _json.loads(text)

    def contains(self, key: str) -> bool:
        if self._conn is None:
            return False
        if key in self._pending:
            return True
        with self._lock:
            return self._conn.execute("SELECT 1 FROM judge_cache WHERE key = ?", (key,)).fetchone() is not None

    def _row(self, key: str, value: Mapping[str, Any], prompt: str, model: str) -> Tuple[str, str, str, str, float]:
        return (key, _json.dumps(value).decode("utf-8"), prompt, model, time.time())

    def put(self, key: str, value: Mapping[str, Any], *, prompt: str = "", model: str = "") -> None:
        """Store and commit at once (with anything :meth:`commit` queued), so it survives a kill right after."""
        if self._conn is None:
            return
        self._pending[key] = self._row(key, value, prompt, model)
        self.flush()

    async def commit(self, key: str, value: Mapping[str, Any], *, prompt: str = "", model: str = "") -> None:
        """Store ``value``; return once the transaction holding it is committed (group commit, see above)."""
        if self._conn is None:
            return
        self._pending[key] = self._row(key, value, prompt, model)
        loop = asyncio.get_running_loop()
        fut: "asyncio.Future[None]" = loop.create_future()
        self._waiters.append(fut)
        if len(self._pending) >= self.flush_rows or self.flush_interval <= 0:
            try:
                self.flush()
            except Exception:  # delivered through fut
                pass
        elif self._timer is None:
            self._timer = loop.call_later(self.flush_interval, self._flush_soon)
        await fut

    def _flush_soon(self) -> None:
        self._timer = None
        try:
            self.flush()
        except Exception:  # already handed to every waiter
            pass

    def flush(self) -> None:
        """Commit every queued entry in one transaction and wake their :meth:`commit` callers."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._pending:
            return
        rows = list(self._pending.values())
        waiters = self._waiters
        self._waiters = []
        error: Optional[BaseException] = None
        try:
            with self._lock:
                conn = self._conn
                if conn is None:
                    raise sqlite3.ProgrammingError("cache is closed")
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany(_INSERT, rows)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            self.transactions += 1
        except Exception as exc:
            error = exc
        finally:
            # committed or failed for good: either way these rows leave the queue (a failure reaches every waiter)
            for row in rows:
                if self._pending.get(row[0]) is row:
                    del self._pending[row[0]]
        for fut in waiters:
            if not fut.done():
                if error is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(error)
        if error is not None:
            raise error

    def __len__(self) -> int:
        if self._conn is None:
            return 0
        self.flush()
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0])

    def close(self) -> None:
        if self._conn is not None:
            try:
                self.flush()
            finally:
                with self._lock:
                    self._conn.close()
                self._conn = None

    def __enter__(self) -> "Cache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
