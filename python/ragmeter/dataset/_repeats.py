"""Runs with collected repeats (``ragmeter collect --repeat N``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import polars as pl

from ragmeter._parquet_ahead import is_parquet as _is_parquet
from ragmeter.dataset._names import Source, _ID_NAMES
from ragmeter.dataset._problems import _Problems, _kind
from ragmeter.dataset._records import Record, _is_dataframe, _is_path, _label, _parquet_records, _records
from ragmeter.dataset._run import _run_from_records
from ragmeter.errors import InputError


class RunRepeat(NamedTuple):
    """One collected repeat of a run: its frame (as :func:`load_run` returns it; ``line`` is the line in the
    file) and its records as given (for the fields the loader does not keep, e.g. a custom metric's)."""

    frame: pl.DataFrame
    records: List[Dict[str, Any]]


def _may_have_repeats(source: Any) -> bool:
    """A cheap look for a ``repeat`` field, so a plain run is not parsed twice."""
    if _is_path(source):
        path = Path(source)
        try:
            if _is_parquet(path):
                return "repeat" in pl.read_parquet_schema(path)
            raw = path.read_bytes()
        except Exception:  # noqa: BLE001 - load_run reports an unreadable file
            return False
        return raw.startswith((b"\xff\xfe", b"\xfe\xff")) or b'"repeat"' in raw  # UTF-16: look inside
    if _is_dataframe(source):
        return "repeat" in list(source.columns)
    if isinstance(source, (list, tuple)):
        return any(isinstance(r, dict) and r.get("repeat") is not None for r in source)
    return False


def _repeat_number(value: Any, where: str, problems: _Problems) -> Optional[int]:
    if value is None:
        problems.add(where, "missing 'repeat' (other records of this run have one; collect --repeat writes it on "
                            "every record)")
        return None
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole:
        problems.add(where, f"'repeat' must be a whole number (1, 2, ...), got {_kind(value)} ({value!r})")
        return None
    if value < 1:
        problems.add(where, f"'repeat' must be 1 or more, got {value!r}")
        return None
    return int(value)


def _check_repeat_column(path: Path) -> None:
    """A Parquet ``repeat`` column of another type is one diagnosis, not one line per row."""
    dtype = pl.read_parquet_schema(path)["repeat"]
    if not (dtype.is_integer() or dtype.is_float() or dtype == pl.Null):
        raise InputError(f"{path}: column 'repeat' has type {dtype}, expected whole numbers (1, 2, ...)")


def load_run_repeats(source: Source, *, name: str = "run") -> Optional[List[RunRepeat]]:
    """The repeats of a run collected with ``collect --repeat N`` (records carrying ``repeat``, 1..N, each case
    id at most once per repeat), repeat 1 first; None for a plain run (no record has a ``repeat``, or every
    record says 1), which :func:`load_run` reads as before.

    Input errors, all reported at once as ``file:line: ...``: a record without ``repeat`` among records with
    one, a ``repeat`` that is not a whole number >= 1, an id twice in one repeat, repeat numbers with a gap,
    records without ids (repeats pair by id), and every problem :func:`load_run` reports. A case missing from
    some repeats is not an error here (the evaluation warns and counts it unscored there).
    """
    if not _may_have_repeats(source):
        return None
    label = _label(source, name)
    problems = _Problems(label)
    if _is_path(source) and _is_parquet(Path(source)):
        _check_repeat_column(Path(source))
        records = _parquet_records(Path(source), problems)
    else:
        records = _records(source, name, problems, "run files")
    if not any(rec.get("repeat") is not None for _w, _l, rec in records):
        return None
    if not any(any(rec.get(n) is not None for n in _ID_NAMES) for _w, _l, rec in records):
        raise InputError(f"{label}: records carry 'repeat' but no 'id': the repeats of a run are paired by case "
                         f"id; give every record the id of its golden case")
    by_repeat: Dict[int, List[Record]] = {}
    first_at: Dict[Tuple[str, int], str] = {}
    for where, line, rec in records:
        number = _repeat_number(rec.get("repeat"), where, problems)
        raw_id = next((rec[n] for n in _ID_NAMES if rec.get(n) is not None), None)
        if number is None:
            continue
        key = (str(raw_id), number)
        if raw_id is not None and key in first_at:
            problems.add(where, f"duplicate id {key[0]!r} in repeat {number} (first at {first_at[key]})")
            continue
        first_at.setdefault(key, where)
        by_repeat.setdefault(number, []).append((where, line, rec))
    found = sorted(by_repeat)
    if found and not problems and found != list(range(1, found[-1] + 1)):
        gaps = [str(r) for r in range(1, found[-1] + 1) if r not in by_repeat]
        problems.add(label, f"repeat numbers must run 1..N without a gap: found {', '.join(map(str, found))}, no "
                            f"record has repeat {', '.join(gaps)}")
    frames = [_run_from_records(by_repeat[r], problems, False)[0] for r in found]
    problems.raise_if_any()
    if len(found) < 2:
        return None
    return [RunRepeat(frame, [rec for _w, _l, rec in by_repeat[r]]) for frame, r in zip(frames, found)]
