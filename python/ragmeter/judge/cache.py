"""Persistent cache of successful judge calls (SQLite in WAL mode).

The key is the SHA-256 of a canonical JSON document holding the endpoint
(without any user:password part; its query parameters as written, a
credential's name without its value), the model, the request
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

Faults. A file that cannot be opened, is not a cache (a garbage header), is
truncated or fails SQLite's ``quick_check`` raises :class:`CacheError` (a user
error, exit status 2) when the cache is opened, before any call is sent; so
does a location that cannot be written (checked with one empty write
transaction). :func:`repair` salvages every readable entry into a new file. A
single entry whose value does not decode is a cache miss with a warning; so is one the engine finds is not a
reply (JSON of another shape, :meth:`Cache.reject`), never read as the judge's words. A
commit that fails during the run (a full disk) raises :class:`CacheWriteError`
to every waiter; the entries that could not be committed are kept in
:attr:`Cache.unsaved` so the caller can write them elsewhere.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
import urllib.parse
from collections import Counter
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Set, Tuple, Union

from ragmeter.errors import InputError
from ragmeter._front import no_cache, option

from . import _json
from .urls import public_endpoint, public_query

__all__ = ["Cache", "CacheError", "CacheWriteError", "cache_key", "key_hasher", "messages_json", "public_endpoint",
           "repair"]

SCHEMA_VERSION = 1
SQLITE_MAGIC = b"SQLite format 3\x00"
#: a key no SHA-256 hex digest can equal: the write check inserts and deletes it
_PROBE_KEY = "ragmeter:write-check"

log = logging.getLogger("ragmeter.judge")


class CacheError(InputError):
    """The cache cannot be used as it is (damaged, not a cache, not writable): one line naming the file and the
    way out; the command line exits with status 2 before any call is sent."""

    exit_code = 2


class CacheWriteError(Exception):
    """A commit failed during the run (a full disk, the file went read-only); ``reason`` is one line."""

    def __init__(self, path: Optional[Path], cause: BaseException) -> None:
        self.path = path
        self.cause = cause
        self.reason = _describe(cause)
        super().__init__(f"{path}: cannot write the judge cache ({self.reason})")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _damaged(path: Path, detail: str) -> CacheError:
    return CacheError(f"{path}: the judge cache is damaged ({detail}); pass {no_cache()}, or run: "
                      f"ragmeter cache repair {path}")


def _not_writable(path: Path, detail: str) -> CacheError:
    return CacheError(f"{path}: the judge cache cannot be written ({detail}); make it writable, pass another "
                      f"{option('cache', 'PATH')}, or {no_cache()}")


def _check_header(path: Path) -> None:
    """Cheap checks before SQLite opens the file: its magic, and a size that holds every page the header counts."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(100)
        size = path.stat().st_size
    except FileNotFoundError:
        return
    except OSError as exc:
        raise CacheError(f"{path}: cannot read the judge cache ({_describe(exc)}); pass {no_cache()} or another "
                         f"{option('cache', 'PATH')}") from None
    if not head:
        return  # an empty file is a new cache
    if head[:16] != SQLITE_MAGIC:
        # not _damaged: `cache repair` refuses a file SQLite cannot open (nothing in it can be salvaged)
        raise CacheError(f"{path}: not a judge cache (not an SQLite file, so nothing in it can be read); pass "
                         f"{no_cache()} or another {option('cache', 'PATH')}")
    if len(head) < 100:
        raise _damaged(path, "truncated header")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    # the header's page count is valid when its change counter matches (SQLite >= 3.7.0 writes both)
    valid = head[24:28] == head[92:96]
    wal = Path(str(path) + "-wal")
    if valid and pages and not wal.exists() and size < pages * page_size:
        raise _damaged(path, f"truncated: {size} bytes, the header counts {pages} pages of {page_size}")


def _refuse_other_database(path: Path, conn: sqlite3.Connection) -> None:
    """A :class:`CacheError` when ``path`` is an SQLite database holding tables but no judge_cache (another
    program's database given as ``--cache``), before anything is written to it: a run would add its table and
    switch the file to WAL journaling. ``cache repair`` refuses the same file."""
    tables = sorted(name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    if not tables or "judge_cache" in tables:
        return
    shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
    raise CacheError(f"{path}: not a judge cache: an SQLite database with other tables ({shown}); pass another "
                     f"--cache PATH or --no-cache")


def _check_report(report: object) -> str:
    """SQLite's ``quick_check`` report on one line: it heads it ``*** in database main ***`` and puts each
    problem on a line of its own."""
    lines = [line.strip() for line in str(report).splitlines()]
    return "; ".join(line for line in lines if line and line != "*** in database main ***")


def _holds_anything(path: Path) -> bool:
    """Whether there is a file at ``path`` with something in it (opening one writes its header); one that cannot
    be looked at counts as there, so that opening it says why."""
    try:
        return path.stat().st_size > 0
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True


def _sqlite_error(path: Path, exc: sqlite3.Error) -> CacheError:
    name = getattr(exc, "sqlite_errorname", "") or ""
    detail = str(exc)
    if name.startswith("SQLITE_READONLY") or name.startswith("SQLITE_CANTOPEN") or name.startswith("SQLITE_PERM"):
        return _not_writable(path, detail)
    if name.startswith("SQLITE_NOTADB") or name.startswith("SQLITE_CORRUPT"):
        return _damaged(path, detail)
    if name.startswith("SQLITE_FULL"):
        return _not_writable(path, detail)
    return CacheError(f"{path}: cannot open the judge cache ({detail}); pass {no_cache()} or another "
                      f"{option('cache', 'PATH')}")


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout=30000")
    return conn


#: seconds before opening a busy cache again, doubled each time (:data:`BUSY_TRIES` times in all)
BUSY_PAUSE = 0.1
BUSY_TRIES = 8


class _Busy(Exception):
    """Another connection held the cache while it was opened (``database is locked``)."""

    def __init__(self, error: sqlite3.Error) -> None:
        super().__init__(str(error))
        self.error = error


def _open(path: Path, writable: bool) -> Optional[sqlite3.Connection]:
    """Open (or create) the cache at ``path``, checked; :class:`CacheError` when it cannot serve a run.

    ``writable=False`` (a dry run) reads it as it is, creating and changing nothing, so a cache on a read-only
    path serves it too; None when the file holds no judge_cache table yet (nothing is cached). A cache another
    run holds as it is opened is opened again a while later: SQLite answers ``database is locked`` at once,
    without waiting, to a connection switching the journal mode then (two evals started together)."""
    for attempt in range(BUSY_TRIES):
        try:
            return _open_once(path, writable)
        except _Busy as busy:
            if attempt == BUSY_TRIES - 1:
                raise _sqlite_error(path, busy.error) from None
            time.sleep(BUSY_PAUSE * 2 ** attempt)
    raise AssertionError("unreachable")  # pragma: no cover


def _is_busy(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "database is locked" in str(exc)


def _open_once(path: Path, writable: bool) -> Optional[sqlite3.Connection]:
    if writable:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _not_writable(path, f"cannot create {path.parent}: {_describe(exc)}") from None
    _check_header(path)
    conn = None
    try:
        if writable:
            conn = _connect(path)
            _refuse_other_database(path, conn)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS judge_cache ("
                " key TEXT PRIMARY KEY, value TEXT NOT NULL, prompt TEXT, model TEXT, created REAL NOT NULL)"
            )
        else:
            conn = _read_only(path)
            conn.execute("PRAGMA busy_timeout=30000")
            if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'judge_cache'"
                            ).fetchone() is None:
                conn.close()
                return None
        check = conn.execute("PRAGMA quick_check(1)").fetchone()
        if check is None or check[0] != "ok":
            raise _damaged(path, _check_report(check[0]) if check else "quick_check gave no answer")
        if writable:
            # one real write now, so a read-only file or folder is found before the first paid call
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(_INSERT, (_PROBE_KEY, "null", "", "", 0.0))
            conn.execute("DELETE FROM judge_cache WHERE key = ?", (_PROBE_KEY,))
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        if conn is not None:
            conn.close()
        if _is_busy(exc):
            raise _Busy(exc) from None
        raise _sqlite_error(path, exc) from None
    except CacheError:
        if conn is not None:
            conn.close()
        raise
    return conn


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
    query = public_query(endpoint)
    if query:  # a gateway may pick the deployment by it; an endpoint without one keeps the key it always had
        head["query"] = query
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
    :meth:`commit`; :meth:`put` always commits at once. ``writable=False`` skips the write check (a dry run
    only reads), and a cache that does not exist yet (or is an empty file) is then not created: it is disabled.
    """

    def __init__(self, path: Union[str, os.PathLike, None], *, flush_interval: float = 0.025,
                 flush_rows: int = 256, writable: bool = True) -> None:
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
        self.written = 0       #: entries committed by this instance (distinct keys)
        #: replies stored under a key this instance had already queued or committed (identical requests: one entry)
        self.shared = 0
        self._committed: Set[str] = set()
        self.undecodable = 0   #: entries whose stored value did not decode (served as misses)
        self.unsaved: List[Tuple[str, str, str, str, float]] = []  #: entries whose commit failed
        self.write_error: Optional[CacheWriteError] = None  #: the first failed commit
        if self.path is not None and (writable or _holds_anything(self.path)):
            self._conn = _open(self.path, writable)

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
            text: Any = queued[1]
        else:
            try:
                with self._lock:
                    row = self._conn.execute("SELECT value FROM judge_cache WHERE key = ?", (key,)).fetchone()
            except sqlite3.DatabaseError as exc:
                return self._undecodable(key, str(exc))
            text = None if row is None else row[0]
        if text is None:
            self.misses += 1
            return None
        try:
            value = _json.loads(text)
        except (ValueError, TypeError) as exc:
            return self._undecodable(key, f"value is not JSON: {exc}")
        if not isinstance(value, dict):
            return self._undecodable(key, "value is not a JSON object")
        self.hits += 1
        return value

    def reject(self, key: str, why: str) -> None:
        """An entry :meth:`get` served that its reader found is not what it stores (JSON of another shape): a miss
        with a warning, counted with the undecodable ones; the reply asked again replaces it."""
        self.hits = max(0, self.hits - 1)
        self._undecodable(key, why)

    def _undecodable(self, key: str, why: str) -> None:
        """One unreadable entry: a miss (the call is sent again and its reply replaces the entry), with a warning."""
        self.undecodable += 1
        self.misses += 1
        if self.undecodable <= 3:
            log.warning("%s: cache entry %s… cannot be read (%s); asking the endpoint again", self.path, key[:12], why)
        return None

    def contains(self, key: str) -> bool:
        """Whether :meth:`get` would serve ``key`` (an entry that does not decode would not)."""
        return self.get(key) is not None

    def _row(self, key: str, value: Mapping[str, Any], prompt: str, model: str) -> Tuple[str, str, str, str, float]:
        return (key, _json.dumps(value).decode("utf-8"), prompt, model, time.time())

    def put(self, key: str, value: Mapping[str, Any], *, prompt: str = "", model: str = "") -> None:
        """Store and commit at once (with anything :meth:`commit` queued), so it survives a kill right after."""
        if self._conn is None:
            return
        self._queue(key, self._row(key, value, prompt, model))
        self.flush()

    async def commit(self, key: str, value: Mapping[str, Any], *, prompt: str = "", model: str = "") -> None:
        """Store ``value``; return once the transaction holding it is committed (group commit, see above)."""
        if self._conn is None:
            return
        self._queue(key, self._row(key, value, prompt, model))
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

    def _queue(self, key: str, row: Tuple[str, str, str, str, float]) -> None:
        if key in self._pending:  # an identical request's reply, queued in the same transaction
            self.shared += 1
        self._pending[key] = row

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
            for row in rows:
                if row[0] in self._committed:  # an identical request's reply, committed before
                    self.shared += 1
                else:
                    self._committed.add(row[0])
                    self.written += 1
        except (sqlite3.Error, OSError) as exc:
            error = CacheWriteError(self.path, exc)
            self.unsaved.extend(rows)
            if self.write_error is None:
                self.write_error = error
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

    def read_back(self, path: Path) -> int:
        """Commit the entries of a ``CACHE.unsaved-*.jsonl`` file (the paid replies a full disk kept out of the
        cache) in one transaction, then delete the file; the number read back. A line that is not an entry is
        skipped; a file that cannot be read is left alone (0). A commit that fails raises
        :class:`CacheWriteError` and leaves the file."""
        if self._conn is None:
            return 0
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("%s: cannot read the replies kept there (%s); they stay there", path, _describe(exc))
            return 0
        rows = []
        for line in text.splitlines():
            try:
                entry = json.loads(line)
                key, value = entry["key"], entry["value"]
                if not (isinstance(key, str) and len(key) == 64 and isinstance(value, dict)):
                    continue
                created = entry.get("created")
                rows.append((key, _json.dumps(value).decode("utf-8"), str(entry.get("prompt") or ""),
                             str(entry.get("model") or ""),
                             float(created) if isinstance(created, (int, float)) else time.time()))
            except (ValueError, TypeError, KeyError):
                continue
        if rows:
            try:
                with self._lock:
                    self._conn.execute("BEGIN IMMEDIATE")
                    try:
                        self._conn.executemany(_INSERT, rows)
                        self._conn.execute("COMMIT")
                    except BaseException:
                        if self._conn.in_transaction:
                            self._conn.execute("ROLLBACK")
                        raise
            except (sqlite3.Error, OSError) as exc:
                raise CacheWriteError(self.path, exc) from None
            self.transactions += 1
        with suppress(OSError):
            path.unlink()
        return len(rows)

    def __len__(self) -> int:
        if self._conn is None:
            return 0
        self.flush()
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0])

    def close(self) -> None:
        """Write whatever is queued and close; a failed write is left in :attr:`unsaved`, not raised."""
        if self._conn is not None:
            try:
                self.flush()
            except CacheWriteError:
                pass
            finally:
                with self._lock:
                    self._conn.close()
                self._conn = None

    def __enter__(self) -> "Cache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- repair ----------------------------------------------------------------------------------------------
_COLUMNS = "key, value, prompt, model, created"


#: the ``prompt`` column of the entries that are not judge chat replies: each kind stores a value of its own shape
_EMBEDDINGS_PROMPT, _COLLECT_PROMPT = "embeddings", "collect"


def _why_unreadable(row: Tuple[Any, ...]) -> Optional[str]:
    """Why a run would not serve this entry (it would ask again), or None. The value's kind is told by the
    ``prompt`` column: collect's replies must hold their ``response`` (whether it is a usable record depends on
    the target, which a repair does not know); a judge chat reply needs its text (:func:`not_a_reply`);
    embeddings are only required to be a JSON object (their count depends on the texts asked)."""
    from ragmeter.judge.engine import not_a_reply

    key, value, prompt = row[0], row[1], row[2]
    if not isinstance(key, str) or not isinstance(value, str):
        return "key or value is not text"
    try:
        decoded = _json.loads(value)
    except (ValueError, TypeError):
        return "value is not JSON"
    if not isinstance(decoded, dict):
        return "value is not a JSON object"
    if prompt == _COLLECT_PROMPT:
        return None if "response" in decoded else "no response in it"
    if prompt == _EMBEDDINGS_PROMPT:
        return None
    return not_a_reply(decoded)


def _salvage(path: Path) -> Tuple[Dict[str, Tuple[Any, ...]], Dict[Any, str], List[str]]:
    """Every entry SQLite can still read from ``path``: in table order, then by rowid past a damaged page, then
    through the key index. Returns (entries by key, the reason each entry dropped as unreadable was dropped by
    key, the errors met)."""
    found: Dict[str, Tuple[Any, ...]] = {}
    dropped: Dict[Any, str] = {}
    errors: List[str] = []
    try:
        conn = _read_only(path)
        # lets SQLite read a file shorter than its header says (a truncated cache) instead of refusing it whole
        conn.execute("PRAGMA writable_schema=ON")
    except sqlite3.Error as exc:
        return found, {}, [str(exc)]

    def take(row: Tuple[Any, ...]) -> None:
        key = row[0]
        if key == _PROBE_KEY:
            return
        why = _why_unreadable(row)
        if why is None:
            found[key] = tuple(row)
            dropped.pop(key, None)
        elif key not in found:
            dropped[key] = why

    last = 0
    try:
        for rowid, *row in conn.execute(f"SELECT rowid, {_COLUMNS} FROM judge_cache ORDER BY rowid"):
            take(tuple(row))
            last = rowid
    except sqlite3.Error as exc:
        errors.append(str(exc))
        # past the damaged page: probe rowids at growing distances until one reads again
        try:
            top = conn.execute("SELECT max(rowid) FROM judge_cache").fetchone()[0] or 0
        except sqlite3.Error:
            top = last + 1_000_000
        nxt, step = last + 1, 1
        while nxt <= top:
            try:
                rows = conn.execute(f"SELECT rowid, {_COLUMNS} FROM judge_cache WHERE rowid >= ? ORDER BY rowid "
                                    f"LIMIT 256", (nxt,)).fetchall()
            except sqlite3.Error:
                nxt, step = nxt + step, step * 2
                continue
            if not rows:
                break
            for rowid, *row in rows:
                take(tuple(row))
            nxt, step = rows[-1][0] + 1, 1
        try:  # the key index is a second path to rows whose table page is unreadable in order
            keys = [k for (k,) in conn.execute("SELECT key FROM judge_cache ORDER BY key")]
        except sqlite3.Error as exc2:
            keys = []
            errors.append(str(exc2))
        for key in keys:
            if key in found:
                continue
            try:
                row = conn.execute(f"SELECT {_COLUMNS} FROM judge_cache WHERE key = ?", (key,)).fetchone()
            except sqlite3.Error:
                dropped[key] = "its row cannot be read"
                continue
            if row is not None:
                take(tuple(row))
    finally:
        conn.close()
    return found, dropped, errors


def _read_only(path: Path) -> sqlite3.Connection:
    """A connection that reads ``path`` and creates nothing beside it.

    Without a ``-wal`` file every entry is in the main file and no run has it open (a cache is in WAL mode, whose
    ``-wal`` lasts as long as a connection), so it is opened ``immutable``: SQLite then takes no lock and makes
    no ``-shm``/``-wal`` (a read-only open of a WAL database makes both, and they were left
    beside the file). With one, the entries it holds are read through it (``mode=ro``), and the ``-shm`` that
    makes is removed by :func:`_drop_created_shm`."""
    quoted = urllib.parse.quote(str(path))  # a '?' or '#' in the name would end the path of the URI
    mode = "mode=ro" if Path(str(path) + "-wal").exists() else "immutable=1"
    return sqlite3.connect(f"file:{quoted}?{mode}", uri=True, isolation_level=None, check_same_thread=False)


@contextmanager
def _drop_created_shm(path: Path) -> Iterator[None]:
    """Remove the ``-shm`` index of ``path`` if reading it made one (SQLite rebuilds it from the ``-wal``)."""
    shm = Path(str(path) + "-shm")
    existed = shm.exists()
    try:
        yield
    finally:
        if not existed:
            with suppress(OSError):
                shm.unlink()


def _open_elsewhere(path: Path) -> bool:
    """Whether another process has the cache at ``path`` open. Every connection to a WAL database holds a shared
    lock on byte 128 of its ``-shm`` file (SQLite's "dead man switch") for as long as it is open, so an exclusive
    lock there is refused. POSIX only (elsewhere False: Windows refuses to rename an open file anyway). Closing the
    descriptor drops this process's locks on the file: call it with no connection of this process open on it."""
    try:
        import fcntl
    except ImportError:
        return False
    try:
        fd = os.open(str(path) + "-shm", os.O_RDWR)
    except OSError:  # no -shm: no connection has it open in WAL mode
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 128, os.SEEK_SET)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def _check_cache(path: Path) -> Tuple[Optional[str], bool, bool]:
    """(why ``path`` is not a judge cache, or None; whether it passes the checks a run makes when it opens it;
    whether it is an intact SQLite database without any table, which a run opens as a new, empty cache)."""
    try:
        _check_header(path)
        header_ok = True
    except CacheError:
        header_ok = False
    try:
        conn = _read_only(path)
    except sqlite3.Error:
        return None, False, False
    try:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error:
        conn.close()
        return None, False, False  # the schema itself is damaged: a cache to salvage, as far as anyone can tell
    try:
        if tables and "judge_cache" not in tables:
            return "no judge_cache table", False, False
        check = conn.execute("PRAGMA quick_check(1)").fetchone()
        intact = header_ok and check is not None and check[0] == "ok"
        # no table at all (a run stopped between creating the file and its table): a run makes its table
        return None, intact, intact and not tables
    except sqlite3.Error:
        return None, False, False
    finally:
        conn.close()


def repair(path: Union[str, os.PathLike]) -> Dict[str, Any]:
    """Salvage every readable entry of the cache at ``path`` into a new file at ``path``.

    The damaged file (and its ``-wal``/``-shm`` companions) is renamed to ``PATH.damaged-<timestamp>`` and kept.
    Returns ``{"path", "damaged", "salvaged", "dropped", "dropped_reasons", "errors", "healthy"}``: entries
    copied, entries found but unreadable or that a run would not serve (a value that is not a JSON object, a judge
    entry without its reply text, a collect entry without its response), how many were dropped for each reason,
    and the errors SQLite reported while reading.

    A cache with nothing to repair (empty: an empty file, or an SQLite file without any table, as a run stopped
    before it made its table leaves it; or every entry readable and SQLite's checks passed) is left as it is:
    ``healthy`` is True, ``damaged`` None and ``salvaged`` its number of entries. A file that is not an SQLite
    database, or one without the cache's table, is refused with :class:`InputError` and left untouched: a
    mistyped path must not be moved aside and replaced by an empty cache.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such cache file")
    try:
        with open(path, "rb") as fh:
            head = fh.read(100)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the cache ({_describe(exc)}); nothing changed") from None
    if not head:  # a run opens an empty file as a new, empty cache
        return _nothing_to_repair(path, 0)
    if head[:16] != SQLITE_MAGIC:  # SQLite cannot open such a file, so there would be nothing to salvage anyway
        raise InputError(f"{path} does not look like a ragmeter cache, judge or collect (not an SQLite file); "
                         "nothing changed")
    with _drop_created_shm(path):
        foreign, passes, new = _check_cache(path)
        if foreign:
            raise InputError(f"{path} does not look like a ragmeter cache, judge or collect ({foreign}); "
                             "nothing changed")
        if new:  # nothing in it to salvage, nothing to repair: a run opens it as it opens an empty file
            return _nothing_to_repair(path, 0)
        # read before anything is moved: a healthy cache is then left exactly as it was
        found, dropped, errors = _salvage(path)
    if passes and not dropped and not errors:
        return _nothing_to_repair(path, len(found))
    if _open_elsewhere(path):  # its writes would go on into the file moved aside, lost to the new cache
        raise InputError(f"{path} is in use by another process (a running judge, eval or collect?); stop it, "
                         "then repair again; nothing changed")
    # the new cache is written beside the damaged one first: a full disk then changes nothing
    new = path.with_name(f"{path.name}.repairing-{os.getpid()}")
    try:
        fresh = Cache(new)
        try:
            assert fresh._conn is not None
            with fresh._lock:
                fresh._conn.execute("BEGIN IMMEDIATE")
                fresh._conn.executemany(_INSERT, [tuple(r) for r in found.values()])
                fresh._conn.execute("COMMIT")
                fresh._conn.execute("PRAGMA journal_mode=DELETE")  # every entry in the one file, no -wal
        finally:
            fresh.close()
    except BaseException as exc:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with suppress(OSError):
                os.unlink(str(new) + suffix)
        if isinstance(exc, (sqlite3.Error, OSError, InputError)):
            raise InputError(f"{path}: cannot write the repaired cache beside it ({_describe(exc)}); "
                             "nothing changed") from None
        raise
    stamp = time.strftime("%Y%m%d-%H%M%S")
    damaged = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while damaged.exists():
        n += 1
        damaged = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    try:
        path.rename(damaged)
        for suffix in ("-wal", "-shm"):
            companion = Path(str(path) + suffix)
            if companion.exists():
                companion.rename(str(damaged) + suffix)
        new.rename(path)
    except OSError as exc:
        with suppress(OSError):
            new.unlink()
        raise InputError(f"{path}: cannot move the damaged cache aside ({_describe(exc)})") from None
    return {"path": str(path), "damaged": str(damaged), "salvaged": len(found), "dropped": len(dropped),
            "dropped_reasons": dict(Counter(dropped.values()).most_common()), "errors": errors, "healthy": False}


def _nothing_to_repair(path: Path, entries: int) -> Dict[str, Any]:
    """:func:`repair`'s result for a cache left as it is."""
    return {"path": str(path), "damaged": None, "salvaged": entries, "dropped": 0, "dropped_reasons": {},
            "errors": [], "healthy": True}
