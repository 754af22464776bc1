"""Persistent cache of successful judge calls (SQLite in WAL mode).

The key is the SHA-256 of a canonical JSON document holding the endpoint
(without any user:password part or query string), the model, the request
parameters, the prompt name and version, and the inputs (the messages sent).
The API key is never part of it and never written. Each entry is committed as
soon as the call succeeds, so a run killed mid-way (even with SIGKILL) keeps
every finished call and a rerun sends none of them again. Several processes
may share one file: WAL lets readers and one writer work together and
``busy_timeout`` makes writers wait for each other.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Optional, Union
from urllib.parse import urlsplit, urlunsplit

__all__ = ["Cache", "cache_key", "messages_json", "public_endpoint"]

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
    head = {"v": SCHEMA_VERSION, "endpoint": public_endpoint(endpoint), "model": model, "params": dict(params),
            "prompt": prompt}
    text = json.dumps(head, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    body = inputs_json if inputs_json is not None else messages_json(inputs)
    h = hashlib.sha256(text.encode("utf-8"))
    h.update(b"\n")
    h.update(body.encode("utf-8"))
    return h.hexdigest()


def messages_json(inputs: Any) -> str:
    """The one JSON encoding of request inputs, shared by the cache key and the request body."""
    return json.dumps(inputs, ensure_ascii=False, separators=(",", ":"))


class Cache:
    """A key -> JSON value store. ``Cache(None)`` is a disabled cache."""

    def __init__(self, path: Union[str, os.PathLike, None]) -> None:
        self.path = None if path is None else Path(path)
        self._lock = threading.Lock()
        self._conn: Optional[sqlite3.Connection] = None
        self.hits = 0
        self.misses = 0
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

    def get(self, key: str) -> Optional[dict]:
        if self._conn is None:
            return None
        with self._lock:
            row = self._conn.execute("SELECT value FROM judge_cache WHERE key = ?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return json.loads(row[0])

    def contains(self, key: str) -> bool:
        if self._conn is None:
            return False
        with self._lock:
            return self._conn.execute("SELECT 1 FROM judge_cache WHERE key = ?", (key,)).fetchone() is not None

    def put(self, key: str, value: Mapping[str, Any], *, prompt: str = "", model: str = "") -> None:
        """Store and commit at once (autocommit), so the entry survives a kill right after."""
        if self._conn is None:
            return
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO judge_cache (key, value, prompt, model, created) VALUES (?, ?, ?, ?, ?)",
                (key, text, prompt, model, time.time()),
            )

    def __len__(self) -> int:
        if self._conn is None:
            return 0
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0])

    def close(self) -> None:
        if self._conn is not None:
            with self._lock:
                self._conn.close()
            self._conn = None

    def __enter__(self) -> "Cache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
