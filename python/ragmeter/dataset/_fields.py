"""Reading one field of a record, and the checks that name a record's problems."""
from __future__ import annotations

import difflib
import logging
import math
import re
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ragmeter import _sniff
from ragmeter.dataset._names import _ID_NAMES, FIELD_NAMES, GOLDEN_SCHEMA, RUN_SCHEMA
from ragmeter.dataset._problems import _Problems, _kind, _place, _place_words
from ragmeter.dataset._records import Record, _is_path
from ragmeter.errors import NOTES_LOGGER, InputError


def _pick(record: Dict[str, Any], names: Sequence[str], where: str, problems: _Problems,
          field: Optional[str] = None) -> Any:
    """Value of the first spelling present; two different spellings with different values is a problem (about
    ``field``, default the canonical spelling ``names[0]``)."""
    present = [n for n in names if record.get(n) is not None]  # null counts as absent (DataFrame rows)
    if len(present) > 1 and any(record[n] != record[present[0]] for n in present[1:]):
        problems.add(where, f"both {present[0]!r} and {present[1]!r} given with different values", field or names[0])
    return record[present[0]] if present else None


def _id(record: Dict[str, Any], where: str, problems: _Problems) -> Optional[str]:
    value = _pick(record, _ID_NAMES, where, problems)
    if value is None:
        problems.add(where, "missing 'id'", "id")
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        problems.add(where, f"'id' must be a string, got {_kind(value)}", "id")
        return None
    value = str(value)
    if not value.strip():
        problems.add(where, "'id' is empty", "id")
        return None
    return value


def _line_id(where: str, line: Optional[int]) -> str:
    """The id of a record in a file without ids: ``line-N`` (``row-N`` for in-memory row N)."""
    if line is not None:
        return f"line-{line}"
    place = _place(where)
    return f"row-{place[2] if place else where}"


#: Field names that suggest a misnamed required field.
_LOOKALIKES = {
    # question_id, questionId, case-id, qid, uuid, key (not "paid" or "is_valid").
    "id": re.compile(r"(?i:(?:^|[_\-\s])(?:id|uuid|key)$|^q?id$|^uuid$|^key$)|[a-z]I[dD]$"),
    "question": re.compile(r"(?i)question|query|prompt|input|ask"),
    "retrieved": re.compile(r"(?i)retriev|context|chunk|doc|passage|result|hits"),
}


#: Fields ragmeter reads under their own name: never a misnamed other one (retrieval_mode is not 'retrieved').
_KNOWN_FIELDS = frozenset({*GOLDEN_SCHEMA, *RUN_SCHEMA, *(n for names in FIELD_NAMES.values() for n in names)})


def _lookalike(record: Dict[str, Any], field: str, names: Sequence[str]) -> Optional[str]:
    """The field of ``record`` most like a misnamed ``field`` (closest spelling first), or None."""
    pattern = _LOOKALIKES[field]
    candidates = [k for k in record if isinstance(k, str) and k not in names and k not in _KNOWN_FIELDS
                  and pattern.search(k)]
    if not candidates:
        return None
    return max(candidates, key=lambda k: difflib.SequenceMatcher(None, field, k.lower()).ratio())


def _check_field_present(records: List[Record], field: str, names: Sequence[str], label: str) -> bool:
    """Whether some record has ``field`` under an accepted name.

    When none has it and the first record has a look-alike field, that is one
    InputError naming it (instead of the same problem on every line).
    """
    if not records or any(any(rec.get(n) is not None for n in names) for _w, _l, rec in records):
        return True
    where, _line, first = records[0]
    lookalike = _lookalike(first, field, names)
    if lookalike is not None:
        raise InputError(f"{label}: no {field!r} field; {_place_words(where)} has {lookalike!r}: accepted names are {', '.join(names)}")
    return False


def _check_not_wrapped(records: List[Record], source: Any, names: Sequence[str], what: str) -> None:
    """A file whose only record lacks the required field but holds a list of objects: one line saying so."""
    if len(records) != 1 or not _is_path(source) or any(n in records[0][2] for n in names):
        return
    shape = _sniff.wrapped_records_diagnosis(Path(source), records[0][2], what)
    if shape:
        raise InputError(shape)


def _check_not_swapped(records: List[Record], label: str, needed: Sequence[str], other: Sequence[str], looks_like: str) -> None:
    """No record has the field this kind of file needs, and the first has the other kind's: one line saying so."""
    if not records or any(any(rec.get(n) is not None for n in needed) for _w, _l, rec in records):
        return
    where, _line, first = records[0]
    found = next((n for n in other if n in first), None)
    if found is not None:
        from ragmeter._front import option

        raise InputError(f"{label}: no {needed[0]!r} field, and {_place_words(where)} has {found!r}: this looks like "
                         f"{looks_like} ({option('golden')} and {option('run')} swapped?)")


def _ids_from_lines(records: List[Record], label: str, note: bool = True) -> bool:
    """True when the records' ids are (or are to be) made from line numbers.

    That is when no record has an id (and none has a field that looks like a
    misnamed id), or when every record says so (a frame from this module).
    ``note``: say so in a note (:func:`_note`; not for a file about to be
    refused as the wrong shape: one diagnosis, not a note before it).
    """
    if records and all(rec.get("id_from_line") is True for _w, _l, rec in records):
        return True
    if _check_field_present(records, "id", _ID_NAMES, label):
        return False
    examples = ", ".join(_line_id(where, line) for where, line, _rec in records[:2]) + (", ..." if len(records) > 2 else "")
    unit = "line" if records[0][1] is not None else "row"
    if note:
        _note(f"{label}: no ids; each case is named by its {unit} number ({examples}), "
              f"which joins it only to a file that has no ids either")
    return True


#: the notes' logger (the command line prints what it logs)
NOTES = logging.getLogger(NOTES_LOGGER)


def _note(message: str) -> None:
    """A note about how an input was read (not an error), logged at INFO on the ``ragmeter.notes`` logger: a
    library call prints nothing (an application shows the notes with ``logging``); the command line prints each
    note once as ``ragmeter: note: ...`` on stderr, however many times the command reads the same input
    (``score`` reads the golden set again for its audit pointer)."""
    NOTES.info("%s", message)


def _opt_str(value: Any, field: str, where: str, problems: _Problems) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    problems.add(where, f"{field!r} must be a string, got {_kind(value)}", field)
    return None


def _str_list(value: Any, field: str, where: str, problems: _Problems) -> List[str]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        problems.add(where, f"{field!r} must be a list of strings, got {_kind(value)}", field)
        return []
    out: List[str] = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            problems.add(where, f"{field}[{i}] must be a string, got {_kind(item)}", f"{field}[{i}]")
        else:
            out.append(item)
    return out


def _opt_number(value: Any, field: str, where: str, problems: _Problems) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        problems.add(where, f"{field!r} must be a number, got {_kind(value)}", field)
        return None
    if isinstance(value, float) and not math.isfinite(value):
        problems.add(where, f"{field!r} must be a finite number, got {value}", field)
        return None
    return float(value)


def _opt_int(value: Any, field: str, where: str, problems: _Problems) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        problems.add(where, f"{field!r} must be an integer, got {_kind(value)}", field)
        return None
    return value


def _check_duplicates(ids: List[Tuple[Optional[str], str]], problems: _Problems) -> bool:
    """Add ``where: duplicate id ...`` for each repeated id; True when there was one."""
    first: Dict[str, str] = {}
    found = False
    for case_id, where in ids:
        if case_id is None:
            continue
        if case_id in first:
            problems.add(where, f"duplicate id {case_id!r} (first at {first[case_id]})")
            found = True
        else:
            first[case_id] = where
    return found


def refuse_collected_repeats(where: str, repeats: Iterable[Any]) -> None:
    """Raise one line for a run collected with ``collect --repeat N`` given where one run is read: its ids
    repeat once per repeat, and a ``duplicate id`` per row would hide why. Called only when ids repeat."""
    numbers = {r for r in repeats if r is not None}
    if len(numbers) > 1:
        from ragmeter._front import spelled

        every = spelled(cli="`ragmeter eval --run`", python="ragmeter.evaluate(golden, run)")
        here = spelled(cli="this command", python="this function")
        raise InputError(f"{where}: a run collected with repeats ('repeat' takes {len(numbers)} values), where one "
                         f"run is read: {every} scores and judges every repeat; for {here} keep the records of one "
                         f"repeat")


