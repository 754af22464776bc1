"""The collect cache: the system's finished replies, in the judge's SQLite cache format (its own file by default).

Entries live in the judge cache's table (``prompt`` column ``"collect"``) under keys of their own: the SHA-256 of
``{"v", "kind": "collect", "target", "request", "case", "repeat"}``, where ``target`` is the target's identity
(endpoint without credentials, method, header *names*; or ``module:function``) and ``request`` the body sent. The
judge's key format is not touched and the two kinds of keys cannot meet. Each reply is committed before the case
counts as done, so a run killed mid-way resumes without calling the system again for finished cases. Failed
cases and empty answers are not stored: a rerun asks again.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, Optional

from ragmeter.judge.cache import Cache, CacheError
from ragmeter.judge.runner import SpillPlaces, _keep_unsaved, _read_back_unsaved

__all__ = ["COLLECT_SCHEMA", "DEFAULT_PATH", "collect_key", "open_cache", "read_back_unsaved", "keep_unsaved",
           "Cache", "CacheError", "SpillPlaces"]

COLLECT_SCHEMA = 1
DEFAULT_PATH = ".ragmeter/collect.sqlite"


def collect_key(target: Mapping[str, Any], request: Any, case_id: str, repeat: int) -> str:
    doc = {"v": COLLECT_SCHEMA, "kind": "collect", "target": dict(target), "request": request, "case": case_id,
           "repeat": repeat}
    text = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def open_cache(path: Optional[str]) -> Cache:
    """``Cache(path)``; None is a disabled cache. A damaged or unwritable file raises :class:`CacheError` (exit 2)
    before anything is sent."""
    try:
        return Cache(path)
    except CacheError as exc:
        raise CacheError(_collect_wording(str(exc))) from None


def read_back_unsaved(cache: Cache, places: SpillPlaces) -> None:
    """Commit the paid replies an earlier run could not cache (``CACHE.unsaved-*.jsonl``, spilled by
    :func:`keep_unsaved`) before anything is asked, so the rerun does not pay for them again; a cache that still
    cannot take them raises :class:`CacheError` (exit 2) before the first call."""
    try:
        _read_back_unsaved(cache, places)
    except CacheError as exc:
        cache.close()
        raise CacheError(_collect_wording(str(exc))) from None


def keep_unsaved(cache: Cache, places: SpillPlaces) -> str:
    """Write the replies whose commit failed (a full disk) beside the cache, else in ``places.spill_dir``, as the
    judge does; "; what became of them" to add to the run's last message ("" when every reply was cached)."""
    return _keep_unsaved(cache, places)


def _collect_wording(message: str) -> str:
    """The judge cache's message, for this cache."""
    return message.replace("the judge cache", "the collect cache").replace("not a judge cache", "not a collect cache")
