"""From a system's response to a run record.

A path is dotted: ``data.output.text``; a number picks a list item (``choices.0.message.content``). Without a
``[response]`` table the response is taken as a run record. A ``retrieved`` item may be an object (mapped by
``[response.retrieved_item]``, else read as ``{file, chunk_id, text, score}`` with the loader's aliases) or a plain
string, which is the chunk's text (its ``file`` is then empty, so file-level metrics cannot match it; evidence
phrases still can).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

__all__ = ["MISSING", "get_path", "to_record", "unmatched_paths"]

MISSING = object()

#: where a run record keeps each field when no mapping is given (the loader's spellings)
_DEFAULT_ITEM = {"file": ("file", "fileName", "file_name"), "chunk_id": ("chunk_id", "chunkId"),
                 "text": ("text", "content", "page_content"), "score": ("score",)}
_RECORD_FIELDS = ("answer", "retrieved", "contexts", "retrieval_mode", "usage", "cost")


def get_path(data: Any, path: str) -> Any:
    """The value at dotted ``path`` in ``data``, or :data:`MISSING`."""
    node = data
    for part in path.split("."):
        if isinstance(node, Mapping):
            if part not in node:
                return MISSING
            node = node[part]
        elif isinstance(node, list) and part.lstrip("-").isdigit():
            i = int(part)
            if not -len(node) <= i < len(node):
                return MISSING
            node = node[i]
        else:
            return MISSING
    return node


def is_scalar(value: Any) -> bool:
    """A number or a text: what a run's text fields take written as text (a chunk id 7 is "7")."""
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def _item(raw: Any, fields: Mapping[str, str]) -> Dict[str, Any]:
    if isinstance(raw, str):
        return {"file": "", "chunk_id": None, "text": raw, "score": None}
    out: Dict[str, Any] = {}
    for name in ("file", "chunk_id", "text", "score"):
        value: Any = MISSING
        if name in fields:
            value = get_path(raw, fields[name])
        elif isinstance(raw, Mapping):
            value = next((raw[a] for a in _DEFAULT_ITEM[name] if a in raw), MISSING)
        out[name] = None if value is MISSING else value
    if is_scalar(out["chunk_id"]):  # an object or a list is left as it is, for the run loader's check to name
        out["chunk_id"] = str(out["chunk_id"])
    if out["file"] is None:
        out["file"] = ""
    return out


def to_record(data: Any, mapping: Mapping[str, str], item: Mapping[str, str]) -> Dict[str, Any]:
    """The run record (without ``id``) read from response ``data``; unmapped or absent fields are None."""
    record: Dict[str, Any] = {}
    for name in _RECORD_FIELDS:
        if name in mapping:
            value = get_path(data, mapping[name])
        else:
            value = data.get(name, MISSING) if isinstance(data, Mapping) and not mapping else MISSING
            if value is MISSING and isinstance(data, Mapping) and not mapping and name == "retrieval_mode":
                value = data.get("retrievalMode", MISSING)
        record[name] = None if value is MISSING else value
    retrieved = record["retrieved"]
    if isinstance(retrieved, list):
        record["retrieved"] = [_item(r, item) for r in retrieved]
    elif retrieved is None:
        record["retrieved"] = []
    if isinstance(record["answer"], (int, float)) and not isinstance(record["answer"], bool):
        record["answer"] = str(record["answer"])
    return record


def unmatched_paths(data: Any, mapping: Mapping[str, str], item: Mapping[str, str]) -> List[Tuple[str, str]]:
    """``(field, path)`` of each mapping path that matches nothing in ``data`` (per-item paths are checked on the
    first retrieved item, when there is one)."""
    misses = [(f"response.{name}", path) for name, path in mapping.items() if get_path(data, path) is MISSING]
    items = get_path(data, mapping["retrieved"]) if "retrieved" in mapping else MISSING
    if items is not MISSING and not isinstance(items, list):
        misses.append(("response.retrieved", f"{mapping['retrieved']} (not a list)"))
    elif isinstance(items, list) and items and isinstance(items[0], (Mapping, list)):
        misses += [(f"response.retrieved_item.{name}", path) for name, path in item.items()
                   if get_path(items[0], path) is MISSING]
    return misses


def keys_of(data: Any) -> Optional[str]:
    """The top-level keys of a response, to say what was there instead."""
    if isinstance(data, Mapping):
        return ", ".join(list(map(str, data))[:8]) or "(none)"
    return None
