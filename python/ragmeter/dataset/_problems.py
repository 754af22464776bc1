"""Problems in an input, collected and raised as one :class:`ragmeter.errors.InputError`."""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from ragmeter.dataset._names import MAX_REPORTED
from ragmeter.errors import InputError


class _Problems:
    """Collects ``where: message`` problems and raises them as one InputError.

    The same message on several lines of one file is reported once, with the
    count and the first few line numbers; a single problem is the whole message.
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self.items: List[Tuple[str, str]] = []
        self.fields: List[Optional[str]] = []  #: per item, the field it is about (see RecordProblem.field)

    def add(self, where: str, message: str, field: Optional[str] = None) -> None:
        self.items.append((where, message))
        self.fields.append(field)

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self) -> None:
        if not self.items:
            return
        entries = self._entries()
        if len(entries) == 1:
            raise InputError(entries[0][1])
        n = len(self.items)
        lines = [f"{n} problem{'s' if n != 1 else ''} in {self.label}:"]
        lines += [f"  {text}" for _key, text in entries[:MAX_REPORTED]]
        if len(entries) > MAX_REPORTED:
            lines.append(f"  ... and {len(entries) - MAX_REPORTED} more")
        raise InputError("\n".join(lines))

    def _entries(self) -> List[Tuple[float, str]]:
        """``(first line number, text)`` per problem or group of equal problems, ordered by line."""
        groups: Dict[Tuple[str, str, str], List[Tuple[int, str, str]]] = {}
        entries: List[Tuple[float, str]] = []
        for where, message in self.items:
            place = _place(where)
            if place is None:
                entries.append((-1.0, f"{where}: {message}"))
                continue
            base, unit, number = place
            key = _ITEM_INDEX.sub("[*]", _COLUMN_DETAIL.sub("", message))
            groups.setdefault((base, unit, key), []).append((number, where, message))
        for (base, unit, key), members in groups.items():
            numbers = sorted({m[0] for m in members})
            if len(numbers) == 1:  # one line: its problems as they are
                entries += [(float(number), f"{where}: {message}") for number, where, message in members]
                continue
            shown = ", ".join(str(x) for x in numbers[:_GROUP_SHOWN]) + (", ..." if len(numbers) > _GROUP_SHOWN else "")
            count = f"{len(numbers)} {unit}s" if len(numbers) == len(members) else f"{len(members)} times on {len(numbers)} {unit}s"
            entries.append((float(numbers[0]), f"{base}: {count}: {key} ({unit}s {shown})"))
        entries.sort(key=lambda e: e[0])  # stable: one line's problems keep their order
        return entries


#: Line numbers named in a group of equal problems.
_GROUP_SHOWN = 5
# Details that differ between lines with the same problem: ignored when grouping.
_COLUMN_DETAIL = re.compile(r" \(column \d+\)$")
_ITEM_INDEX = re.compile(r"\[\d+\]")
_WHERE = re.compile(r"^(?P<base>.*?)(?::(?P<line>\d+)|: row (?P<row>\d+)|\[(?P<index>\d+)\])$")


def _place(where: str) -> Optional[Tuple[str, str, int]]:
    """``(file or name, "line" or "row", number)`` of a ``where``, or None when it names no line."""
    m = _WHERE.match(where)
    if m is None:
        return None
    if m.group("line") is not None:
        return m.group("base"), "line", int(m.group("line"))
    return m.group("base"), "row", int(m.group("row") if m.group("row") is not None else m.group("index"))


def _place_words(where: str) -> str:
    """``line 3`` / ``row 2`` for messages about one record."""
    place = _place(where)
    return f"{place[1]} {place[2]}" if place else where


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
