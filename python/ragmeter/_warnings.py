"""Warnings that are counted, not listed.

A warning is a dict ``{"code", "message", "count", "cases"}``: a stable
``code`` per kind (``mode_fallback``, ``missing_from_run``,
``evidence_never_found``, ``resolution``, ``non_finite``, ...), a one-line
human ``message`` that says how many cases it covers and names the first
:data:`SHOWN`, the ``count`` and the affected case ids (``details`` adds a
label per item when the ids alone do not say enough, e.g. the phrase that was
never found).

In memory (``ScoreResult.summary``, the summary ``run_eval`` returns) ``cases``
and ``details`` are complete; ``summary.json`` keeps the first :data:`SHOWN`
of each and ``warnings.json`` holds the complete lists, so a 60,000-case run
gives a few lines, not thousands.
"""
from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional, Sequence

__all__ = ["SHOWN", "SHOWN_CHARS", "cut", "warning", "brief", "message", "normalise", "messages", "for_disk", "full_list"]

#: case ids named in a warning's message (and kept in summary.json)
SHOWN = 5


#: characters of a user's text (an evidence phrase) a warning's message shows; ``details`` keep it whole
SHOWN_CHARS = 80


def cut(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` quoted (``repr``), its first ``limit`` characters and ``...`` with its full length when longer:
    a 100,000-character phrase made a console warning of 1,426 lines."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit] + '...'!r} ({len(text):,} characters)"


def warning(code: str, head: str, cases: Sequence[Any], labels: Optional[Sequence[str]] = None,
            count: Optional[int] = None, shown_labels: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """``head`` is the message without its count, e.g. ``"golden case(s) missing from the run"``;
    ``labels`` (one per case, default the ids) are what the message names, and are kept as ``details``;
    ``shown_labels``, when given, are named in the message instead (shorter forms of long labels)."""
    ids = [str(c) for c in cases]
    shown = list(shown_labels if shown_labels is not None else labels if labels is not None else ids)
    n = len(ids) if count is None else count
    text = f"{n} {head}"
    if shown:
        more = len(labels if labels is not None else ids) - SHOWN
        text += ": " + ", ".join(shown[:SHOWN]) + (f" and {more} more" if more > 0 else "")
    entry: Dict[str, Any] = {"code": code, "message": text, "count": n, "cases": ids}
    if labels is not None:
        entry["details"] = list(labels)
    return entry


def normalise(item: Any) -> Dict[str, Any]:
    """A warning as a dict, also for plain strings (results folders of earlier versions)."""
    if isinstance(item, dict) and "message" in item:
        return item
    return {"code": "note", "message": str(item), "count": None, "cases": []}


def message(item: Any) -> str:
    return str(normalise(item)["message"])


def messages(items: Optional[Sequence[Any]]) -> List[str]:
    return [message(w) for w in items or [] if w is not None]


def brief(item: Any) -> Dict[str, Any]:
    """The warning with at most :data:`SHOWN` case ids (and details)."""
    w = dict(normalise(item))
    for key in ("cases", "details"):
        if isinstance(w.get(key), list):
            w[key] = w[key][:SHOWN]
    return w


def for_disk(summary: Dict[str, Any]) -> Dict[str, Any]:
    """A copy of ``summary`` whose warnings (top level and ``retrieval``) are brief."""
    out = copy.copy(summary)
    if isinstance(out.get("warnings"), list):
        out["warnings"] = [brief(w) for w in out["warnings"]]
    retrieval = out.get("retrieval")
    if isinstance(retrieval, dict) and isinstance(retrieval.get("warnings"), list):
        out["retrieval"] = {**retrieval, "warnings": [brief(w) for w in retrieval["warnings"]]}
    return out


def full_list(summary: Dict[str, Any]) -> Dict[str, Any]:
    """The content of ``warnings.json``: every warning with all its cases."""
    items = [normalise(w) for w in summary.get("warnings") or []]
    return {"warnings": items, "n_warnings": len(items)}
