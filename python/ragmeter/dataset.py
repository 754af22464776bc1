"""Loading golden sets and retrieval runs.

Golden set (JSON Lines, one case per line; blank lines and lines starting with
``#`` or ``//`` are skipped; a JSON array of objects and Parquet are read too)::

    {"id": "fact-04-frontend-stack", "question": "...",
     "expectedFileNames": ["architecture.md"], "expectedEvidence": ["React 18"],
     "referenceAnswer": "...", "category": "fact", "source": "...", "tags": ["..."]}

``expected_files``, ``expected_evidence`` and ``reference_answer`` are accepted
too, and so are ragas' and DeepEval's names (see :data:`FIELD_NAMES`).
``category`` defaults to the id's prefix before the first ``-``.

Run (JSON Lines, a JSON array or Parquet)::

    {"id": "fact-04-frontend-stack",
     "retrieved": [{"file": "architecture.md", "chunk_id": "c12", "text": "...", "score": 0.83}],
     "contexts": ["..."], "answer": "...", "retrieval_mode": "hybrid",
     "latency_ms": 412, "usage": {"prompt_tokens": 1200, "completion_tokens": 80}, "cost": 0.0012}

A retrieved item may be a plain string (its text) and may omit ``file``
(``file`` is then null and the scorer decides relevance by evidence alone).
A file in which no line has an id gets ids from its line numbers
(``line-12``; ``row-3`` for in-memory rows), flagged in ``id_from_line``: a
golden set and a run join by line number only when neither has ids.

Every problem in an input is collected and reported at once, each as
``file:line: what is wrong`` (``name[row]`` for in-memory rows, ``file: row N``
for Parquet), in one :class:`ragmeter.errors.InputError`; the same problem on
many lines is one line (``51 lines: missing 'question' (lines 1, 2, ...)``),
and a file in the wrong shape (CSV, gzip, a pretty-printed object...) gets one
line saying what it looks like.
"""
from __future__ import annotations

import contextlib
import contextvars
import difflib
import json
import logging
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import polars as pl

from ragmeter import _dictionary_texts, _parquet_ahead, _sniff
from ragmeter._parquet_ahead import is_parquet as _is_parquet
from ragmeter.errors import NOTES_LOGGER, InputError

__all__ = [
    "load_golden",
    "load_run",
    "check_run_against_golden",
    "GOLDEN_SCHEMA",
    "RUN_SCHEMA",
    "RETRIEVED_DTYPE",
    "MAX_REPORTED",
    "FIELD_NAMES",
    "ID_NAMES",
    "QUESTION_NAMES",
    "GOLDEN_ALIASES",
    "RETRIEVED_NAMES",
    "ANSWER_NAMES",
    "RUN_ALIASES",
    "CHUNK_ALIASES",
    "golden_fingerprint",
    "check_id_sources",
    "RecordProblem",
    "run_record_problems",
]

#: At most this many problems are listed in one error message.
MAX_REPORTED = 50

CHUNK_DTYPE = pl.Struct({"file": pl.String, "chunk_id": pl.String, "text": pl.String, "score": pl.Float64})
RETRIEVED_DTYPE = pl.List(CHUNK_DTYPE)

GOLDEN_SCHEMA: Dict[str, Any] = {
    "id": pl.String,
    "question": pl.String,
    "expected_files": pl.List(pl.String),
    "expected_evidence": pl.List(pl.String),
    "reference_answer": pl.String,
    "category": pl.String,
    "source": pl.String,
    "tags": pl.List(pl.String),
    "labeled": pl.Boolean,
    "line": pl.Int64,
    "id_from_line": pl.Boolean,
}

RUN_SCHEMA: Dict[str, Any] = {
    "id": pl.String,
    "retrieved": RETRIEVED_DTYPE,
    "contexts": pl.List(pl.String),
    "answer": pl.String,
    "retrieval_mode": pl.String,
    "latency_ms": pl.Float64,
    "prompt_tokens": pl.Int64,
    "completion_tokens": pl.Int64,
    "cost": pl.Float64,
    "run_error": pl.String,
    "line": pl.Int64,
    "id_from_line": pl.Boolean,
}

# Accepted spellings, canonical name first (ragas' and DeepEval's names included). Public for the readers of
# records outside this module (``ragmeter.judge.Case.from_record``, ``judge --cases``); the private names are
# the same objects, kept for the code that uses them.
ID_NAMES = ("id", "case_id", "sample_id")
QUESTION_NAMES = ("question", "user_input", "input", "query")
#: golden-set fields (other than id and question) -> spellings
GOLDEN_ALIASES = {
    "expected_files": ("expectedFileNames", "expected_files", "expected_file_names", "expectedFiles"),
    "expected_evidence": ("expectedEvidence", "expected_evidence", "reference_contexts", "context"),
    "reference_answer": ("referenceAnswer", "reference_answer", "reference", "expected_output", "ground_truth"),
}
RETRIEVED_NAMES = _parquet_ahead.RETRIEVED_NAMES
ANSWER_NAMES = ("answer", "response", "actual_output")
#: run fields (other than id, retrieved and answer) -> spellings
RUN_ALIASES = {
    "retrieval_mode": ("retrieval_mode", "retrievalMode"),
    "latency_ms": ("latency_ms", "latencyMs"),
}
#: fields of one retrieved item -> spellings
CHUNK_ALIASES = {
    "file": ("file", "fileName", "file_name"),
    "chunk_id": ("chunk_id", "chunkId"),
    "text": _parquet_ahead.TEXT_NAMES,
    "score": ("score",),
}
_ID_NAMES, _QUESTION_NAMES, _GOLDEN_ALIASES = ID_NAMES, QUESTION_NAMES, GOLDEN_ALIASES
_RETRIEVED_NAMES, _ANSWER_NAMES, _RUN_ALIASES, _CHUNK_ALIASES = RETRIEVED_NAMES, ANSWER_NAMES, RUN_ALIASES, CHUNK_ALIASES

#: Every accepted field name, canonical first: (file kind, field) -> names.
FIELD_NAMES: Dict[Tuple[str, str], Tuple[str, ...]] = {
    ("golden, run", "id"): _ID_NAMES,
    ("golden", "question"): _QUESTION_NAMES,
    ("golden", "expected_files"): _GOLDEN_ALIASES["expected_files"],
    ("golden", "expected_evidence"): _GOLDEN_ALIASES["expected_evidence"],
    ("golden", "reference_answer"): _GOLDEN_ALIASES["reference_answer"],
    ("run", "retrieved"): _RETRIEVED_NAMES,
    ("run", "answer"): _ANSWER_NAMES,
    ("run", "retrieval_mode"): _RUN_ALIASES["retrieval_mode"],
    ("run", "latency_ms"): _RUN_ALIASES["latency_ms"],
    ("retrieved item", "file"): _CHUNK_ALIASES["file"],
    ("retrieved item", "chunk_id"): _CHUNK_ALIASES["chunk_id"],
    ("retrieved item", "text"): _CHUNK_ALIASES["text"],
}

#: Category of cases whose ids were made from line numbers and that name none.
UNCATEGORISED = "uncategorised"

Source = Union[str, "os.PathLike[str]", Sequence[Dict[str, Any]], Any]


# ---------------------------------------------------------------------------
# Problem collection
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Reading sources
# ---------------------------------------------------------------------------


def _is_path(source: Any) -> bool:
    return isinstance(source, (str, os.PathLike))


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None


def read_text(path: Path, what: str = "text files") -> str:
    """A text file as ``str`` (byte-order mark dropped, UTF-16 transcoded); one-line InputError naming the
    file when it is missing, binary or not UTF-8."""
    return _sniff.to_utf8(path, _read_bytes(path), what)[1]


def raw_records(source: Source, *, name: str = "golden", what: str = "golden sets") -> List[Dict[str, Any]]:
    """The records of a golden set or run as given, field names unresolved (any shape :func:`load_golden`
    reads: JSON Lines, a JSON array, Parquet, a list of dicts or a DataFrame); for fields the loaders do not
    keep (``difficulty``, ``keyPoints``, a user's own ``--by`` field)."""
    problems = _Problems(_label(source, name))
    if _is_path(source) and _is_parquet(Path(source)):
        records = _parquet_records(Path(source), problems)
    else:
        records = _records(source, name, problems, what)
    problems.raise_if_any()
    return [record for _where, _line, record in records]


def _utf8_payload(path: Path, raw: bytes, what: str) -> Tuple[bytes, str]:
    """The file as UTF-8 bytes (BOM dropped, UTF-16 transcoded) and as text; one-line InputError for empty or binary files."""
    data, text = _sniff.to_utf8(path, raw, what)
    if not data or data.isspace():
        raise InputError(f"{path}: is empty; {what} are JSON Lines (one object per line), {_sniff.FORMATS_HINT}")
    return data, text


Record = Tuple[str, Optional[int], Dict[str, Any]]


def _file_records(path: Path, text: str, problems: _Problems, what: str) -> List[Record]:
    """``(where, line, record)`` for each JSON object of a JSON Lines file (or a whole-file JSON array).

    Problems are collected per line; a file whose lines are mostly not JSON
    gets one diagnosis of its shape instead (CSV, TSV, YAML, pretty-printed JSON).
    """
    records = _parsed_records(path, text, problems, what)
    # Only a \\uD8xx-\\uDFxx escape decodes to a surrogate: the records are looked at closer only when the
    # text has one (one scan of the text, no per-string check on the usual path).
    return _without_surrogates(records, problems) if _SURROGATE_ESCAPE.search(text) else records


def _parsed_records(path: Path, text: str, problems: _Problems, what: str) -> List[Record]:
    """:func:`_file_records` before the check for lone surrogates."""
    items = _sniff.json_array_items(path, text)
    if items is not None:
        return _objects(((f"{path}:{line}", line, item) for line, item in items), problems)
    shape = _sniff.spread_object_diagnosis(path, text, what)
    if shape:
        raise InputError(shape)
    records: List[Record] = []
    n_lines = n_invalid = 0
    first_line: Optional[str] = None
    first_invalid = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped.startswith("//"):
            continue
        n_lines += 1
        is_first = first_line is None
        if is_first:
            first_line = stripped
        where = f"{path}:{number}"
        if _sniff.depth_exceeded_at(stripped) is not None:
            problems.add(where, _sniff.too_deep_message())
            continue
        try:
            record = json.loads(stripped)
        except json.JSONDecodeError as exc:
            n_invalid += 1
            first_invalid = first_invalid or is_first
            problems.add(where, f"invalid JSON: {exc.msg} (column {exc.colno})")
            continue
        if not isinstance(record, dict):
            problems.add(where, f"expected a JSON object, got {_kind(record)}")
            continue
        records.append((where, number, record))
    if first_invalid and first_line is not None and n_invalid * 2 >= n_lines:
        shape = _sniff.text_shape_diagnosis(path, first_line, what)
        if shape:
            raise InputError(shape)
    return records


#: A JSON escape that decodes to a UTF-16 surrogate (``\\ud800``-``\\udfff``); a text without one cannot give a
#: string holding a lone surrogate (the file itself was decoded strictly)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _lone_surrogate(value: Any, field: str = "") -> Optional[Tuple[str, str, int]]:
    """``(field, the surrogate as \\uXXXX, its 1-based character position)`` of the first string in ``value`` (a
    record, nested lists and objects) that holds a lone UTF-16 surrogate, else None. A JSON writer that cut a
    character outside the Basic Multilingual Plane (an emoji) in half writes one (``"\\udc00"``); it is no
    Unicode character, and UTF-8 (Arrow, Parquet, the results files) cannot hold it."""
    stack: List[Tuple[str, Any]] = [(field, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                return where, f"\\u{ord(item[exc.start]):04x}", exc.start + 1
        elif isinstance(item, dict):
            for key, member in reversed(list(item.items())):  # the record's own order, first problem first
                name = f"{where}.{key}" if where else str(key)
                bad_key = _lone_surrogate(str(key), f"a field name in {where}" if where else "a field name")
                if bad_key is not None:
                    return bad_key
                stack.append((name, member))
        elif isinstance(item, (list, tuple)):
            stack.extend((f"{where}[{i}]", member) for i, member in reversed(list(enumerate(item))))
    return None


def _surrogate_message(found: Tuple[str, str, int]) -> str:
    field, code, position = found
    return (f"{field if field.startswith('a field name') else repr(field)} holds a lone UTF-16 surrogate ({code} at "
            f"character {position}), which is not valid Unicode (a writer that cut a character such as an emoji in "
            "half); fix or drop that character")


def _without_surrogates(records: List[Record], problems: _Problems) -> List[Record]:
    """``records`` without those holding a string with a lone surrogate, each of which is a problem naming its
    record and field (see :func:`_lone_surrogate`)."""
    kept: List[Record] = []
    for where, line, record in records:
        found = _lone_surrogate(record)
        if found is None:
            kept.append((where, line, record))
        else:
            problems.add(where, _surrogate_message(found), found[0])
    return kept


def _objects(items: Iterator[Record], problems: _Problems) -> List[Record]:
    out: List[Record] = []
    for where, line, item in items:
        if isinstance(item, dict):
            out.append((where, line, item))
        else:
            problems.add(where, f"expected a JSON object, got {_kind(item)}")
    return out


def _parquet_records(path: Path, problems: _Problems) -> List[Record]:
    """Records of a Parquet file, one per row (``file: row N``, line = N)."""
    try:
        df = pl.read_parquet(path)
    except Exception as exc:  # polars raises several types for unreadable files
        raise InputError(f"{path}: cannot read as Parquet: {exc}") from None
    if df.height == 0:
        raise InputError(f"{path}: has no rows")
    return [(f"{path}: row {i}", i, rec) for i, rec in enumerate(df.iter_rows(named=True), start=1)]


def _is_dataframe(source: Any) -> bool:
    if isinstance(source, pl.DataFrame):
        return True
    return type(source).__module__.split(".")[0] == "pandas" and hasattr(source, "to_dict")


def _to_polars(source: Any) -> pl.DataFrame:
    if isinstance(source, pl.DataFrame):
        return source
    return pl.from_pandas(source)


def _memory_records(source: Any, name: str, problems: _Problems) -> List[Record]:
    if _is_dataframe(source):
        rows: Sequence[Any] = _to_polars(source).to_dicts()
    elif isinstance(source, (list, tuple)):
        rows = source
    else:
        raise InputError(f"{name}: expected a path, a list of dicts or a DataFrame, got {type(source).__name__}")
    out: List[Record] = []
    for i, record in enumerate(rows):
        where = f"{name}[{i}]"
        if not isinstance(record, dict):
            problems.add(where, f"expected an object (dict), got {_kind(record)}")
            continue
        out.append((where, None, record))
    return out


def _records(source: Any, name: str, problems: _Problems, what: str) -> List[Record]:
    """The records of an in-memory source or a JSON Lines (or JSON array) file."""
    if not _is_path(source):
        return _memory_records(source, name, problems)
    path = Path(source)
    return _file_records(path, _utf8_payload(path, _read_bytes(path), what)[1], problems, what)


# ---------------------------------------------------------------------------
# Field helpers
# ---------------------------------------------------------------------------


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


def _lookalike(record: Dict[str, Any], field: str, names: Sequence[str]) -> Optional[str]:
    """The field of ``record`` most like a misnamed ``field`` (closest spelling first), or None."""
    pattern = _LOOKALIKES[field]
    candidates = [k for k in record if isinstance(k, str) and k not in names and pattern.search(k)]
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
        raise InputError(f"{label}: no {needed[0]!r} field, and {_place_words(where)} has {found!r}: this looks like "
                         f"{looks_like} (--golden and --run swapped?)")


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
        raise InputError(f"{where}: a run collected with repeats ('repeat' takes {len(numbers)} values), where one "
                         f"run is read: `ragmeter eval --run` scores and judges every repeat; for this command keep "
                         f"the records of one repeat")


def _label(source: Any, name: str) -> str:
    return str(source) if _is_path(source) else name


# ---------------------------------------------------------------------------
# Golden set
# ---------------------------------------------------------------------------


def default_category(case_id: str) -> str:
    """The id's prefix before the first ``-`` (the whole id when it has none)."""
    return case_id.split("-", 1)[0]


_GOLDEN_FAST_STR = ("reference_answer", "category", "source")
_ALIASES_OF_ID_AND_QUESTION = (*_ID_NAMES[1:], *_QUESTION_NAMES[1:])


def _fast_golden(rec: Dict[str, Any]) -> Optional[Tuple[Any, ...]]:
    """The row of a well-formed golden record, or None to take the validating path.

    Accepts only what :func:`load_golden`'s checks accept and returns the same
    values: string id and question (non-blank), at most one spelling of each
    aliased field, lists of plain strings, optional strings. Anything else
    (including every record with a problem) returns None, and the full
    validation then reports it with its file and line.
    """
    for alias in _ALIASES_OF_ID_AND_QUESTION:
        if alias in rec:
            return None
    case_id = rec.get("id")
    question = rec.get("question")
    if type(case_id) is not str or type(question) is not str or not case_id.strip() or not question.strip():
        return None
    picked: List[Any] = []
    for names in (_GOLDEN_ALIASES["expected_files"], _GOLDEN_ALIASES["expected_evidence"], _GOLDEN_ALIASES["reference_answer"]):
        value = None
        for n in names:
            v = rec.get(n)
            if v is not None:
                if value is not None:
                    return None  # two spellings: let the validating path compare them
                value = v
        picked.append(value)
    files, evidence, reference = picked
    tags = rec.get("tags")
    lists = []
    for value in (files, evidence, tags):
        if value is None:
            lists.append([])
        elif type(value) is list and all(type(x) is str for x in value):
            lists.append(value)
        else:
            return None
    category = rec.get("category")
    src = rec.get("source")
    for value in (reference, category, src):
        if value is not None and type(value) is not str:
            return None
    files, evidence, tags = lists
    labeled = any(f.strip() for f in files) or any(e.strip() for e in evidence)
    return (case_id, question, files, evidence, reference, category if category else default_category(case_id), src, tags, labeled)


def _golden_frame(rows: Dict[str, List[Any]]) -> pl.DataFrame:
    """Build the golden DataFrame through Arrow (Polars' per-value construction
    of list columns from Python lists is slow)."""
    import pyarrow as pa

    string, strings = pa.large_string(), pa.large_list(pa.large_string())
    arrow = {
        "id": string, "question": string, "expected_files": strings, "expected_evidence": strings,
        "reference_answer": string, "category": string, "source": string, "tags": strings,
        "labeled": pa.bool_(), "line": pa.int64(), "id_from_line": pa.bool_(),
    }
    table = pa.table({k: pa.array(rows[k], type=arrow[k]) for k in GOLDEN_SCHEMA})
    return pl.from_arrow(table).cast(GOLDEN_SCHEMA)  # type: ignore[union-attr]


#: Every character Python's ``str.strip()`` removes (for column-wise checks with its semantics).
_PY_WHITESPACE = "".join(c for c in map(chr, range(0x3001)) if c.isspace())  # U+3000 is the last
#: Line breaks of ``str.splitlines`` other than LF (UTF-8): files with any take the per-record path.
_OTHER_LINE_BREAKS = (b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\xc2\x85", b"\xe2\x80\xa8", b"\xe2\x80\xa9")
#: A whole-file JSON array (read element by element on the per-record path).
_STARTS_AS_ARRAY = re.compile(rb"\s*\[")
#: A line that may be blank or a comment starts with one of these (checked after each LF).
_MAYBE_SKIPPED_LINE = (b"\n", b"#", b"/", b" ", b"\t")
#: An LF followed by one of them: one regular-expression scan (its literal LF prefix is searched fast), not five.
_LF_THEN_MAYBE_SKIPPED = re.compile(rb"\n[\n#/ \t]")


def _golden_jsonl_columnar(raw: bytes) -> Optional[Tuple[pl.DataFrame, Any]]:
    """Read a well-formed golden JSONL file with Arrow's JSON reader and check it column-wise.

    Returns None whenever anything is unusual (unreadable or invalid UTF-8, a
    parse error, an unexpected type, a null where a value is required, two
    spellings of a field in one record, a duplicate id, an integer id, line
    breaks other than LF...): the caller then takes the per-record path, which
    reports every problem with its file and line. For the files it accepts,
    the frame equals that path's; beside it comes the Arrow table of the fields
    the frame does not keep (``difficulty``, a user's own), row for row.
    ``raw`` is the file as UTF-8 without a BOM.
    """
    import io

    import pyarrow as pa
    import pyarrow.json as pj

    if _STARTS_AS_ARRAY.match(raw) or any(b in raw for b in _OTHER_LINE_BREAKS):
        return None
    if _sniff.deep_lines(raw):
        return None  # pyarrow's reader would overflow the stack on them
    body = raw[:-1] if raw.endswith(b"\n") else raw
    if not body:
        return None
    if body[:1] in _MAYBE_SKIPPED_LINE or _LF_THEN_MAYBE_SKIPPED.search(body):
        lines = body.split(b"\n")
        keep = [i for i, line in enumerate(lines) if (t := line.decode("utf-8").strip()) and not t.startswith("#") and not t.startswith("//")]
        if not keep:
            return None
        payload = b"\n".join(lines[i] for i in keep)
        line_numbers = pl.Series("line", keep, dtype=pl.Int64) + 1
    else:
        payload = body
        line_numbers = pl.int_range(1, body.count(b"\n") + 2, dtype=pl.Int64, eager=True).alias("line")
    from ragmeter._io import slice_memory_pool

    try:
        # Into the pool a Parquet run's slices are decoded into: the reader's blocks, freed once the table is
        # built, are then reused by the slices instead of kept by the default pool (16-20 MB of a 100,000-case
        # golden set's load, benches/RESULTS_score.md, 2026-12-03).
        table = pj.read_json(io.BytesIO(payload), memory_pool=slice_memory_pool())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != len(line_numbers):
        return None
    names = set(table.column_names)
    string_ok = (pa.string(), pa.large_string(), pa.null())
    list_ok = (pa.list_(pa.string()), pa.list_(pa.null()), pa.null())
    list_fields = [*_GOLDEN_ALIASES["expected_files"], *_GOLDEN_ALIASES["expected_evidence"], "tags"]
    str_fields = [*_GOLDEN_ALIASES["reference_answer"], "category", "source"]
    for n in ("id", "question"):
        if n not in names or table.schema.field(n).type != pa.string():
            return None
    if any(n in names for n in _ALIASES_OF_ID_AND_QUESTION):
        return None
    for n in list_fields:
        if n in names and table.schema.field(n).type not in list_ok:
            return None
    for n in str_fields:
        if n in names and table.schema.field(n).type not in string_ok:
            return None
    wanted = [n for n in table.column_names if n in ("id", "question", *list_fields, *str_fields)]
    df = pl.from_arrow(table.select(wanted))
    assert isinstance(df, pl.DataFrame)
    df = df.with_columns([pl.col(n).cast(pl.List(pl.String)) for n in list_fields if n in names]
                         + [pl.col(n).cast(pl.String) for n in str_fields if n in names])
    checks = [
        pl.col("id").is_null().any() | pl.col("question").is_null().any(),
        (pl.col("id").str.strip_chars(_PY_WHITESPACE) == "").any(),
        (pl.col("question").str.strip_chars(_PY_WHITESPACE) == "").any(),
        pl.col("id").is_duplicated().any(),
    ]
    for n in list_fields:
        if n in names:
            checks.append(pl.col(n).list.eval(pl.element().is_null()).list.any().any())
    groups = {}
    for canonical, spellings in _GOLDEN_ALIASES.items():
        present = [n for n in spellings if n in names]
        groups[canonical] = present
        if len(present) > 1:
            checks.append((pl.sum_horizontal([pl.col(n).is_not_null().cast(pl.Int32) for n in present]) > 1).any())
    if any(df.select([c.alias(f"check{i}") for i, c in enumerate(checks)]).row(0)):
        return None

    def pick(canonical: str, dtype: Any) -> pl.Expr:
        present = groups[canonical]
        if not present:
            return pl.lit(None, dtype=dtype)
        return pl.coalesce([pl.col(n) for n in present]) if len(present) > 1 else pl.col(present[0])

    def column(n: str, dtype: Any) -> pl.Expr:
        return pl.col(n) if n in names else pl.lit(None, dtype=dtype)

    empty = pl.lit([], dtype=pl.List(pl.String))
    out = df.select(
        pl.col("id"), pl.col("question"),
        pick("expected_files", pl.List(pl.String)).fill_null(empty).alias("expected_files"),
        pick("expected_evidence", pl.List(pl.String)).fill_null(empty).alias("expected_evidence"),
        pick("reference_answer", pl.String).alias("reference_answer"),
        pl.when(column("category", pl.String).is_not_null() & (column("category", pl.String) != ""))
        .then(column("category", pl.String))
        .otherwise(pl.col("id").str.splitn("-", 2).struct.field("field_0")).alias("category"),
        column("source", pl.String).alias("source"),
        column("tags", pl.List(pl.String)).fill_null(empty).alias("tags"),
    )
    def any_text(n: str) -> pl.Expr:  # some item is not blank by str.strip()
        return pl.col(n).list.eval(pl.element().str.strip_chars(_PY_WHITESPACE) != "").list.any().fill_null(False)

    out = out.with_columns((any_text("expected_files") | any_text("expected_evidence")).alias("labeled"), line_numbers,
                           pl.lit(False).alias("id_from_line"))
    return out.select([pl.col(n).cast(t) for n, t in GOLDEN_SCHEMA.items()]), table.drop_columns(wanted)


def load_golden(source: Source, *, name: str = "golden") -> pl.DataFrame:
    """Load a golden set from a path (JSON Lines, a JSON array or Parquet), a list of dicts or a Polars/pandas DataFrame.

    Returns one row per case with columns ``id``, ``question``,
    ``expected_files`` (list[str]), ``expected_evidence`` (list[str]),
    ``reference_answer``, ``category``, ``source``, ``tags`` (list[str]),
    ``labeled`` (has expected files or evidence), ``line`` (source line or
    Parquet row, null for in-memory input) and ``id_from_line`` (the file had
    no ids: they are ``line-N``, and its category defaults to
    ``uncategorised``). Raises :class:`InputError` listing every problem, or
    one line when the whole file is in the wrong shape.
    """
    raw = _read_bytes(Path(source)) if _is_path(source) else None
    key, reused = (str(source), name), _reused_golden.get()
    if raw is not None and reused is not None and key in reused and reused[key][0] == raw:
        return reused[key][1].clone()
    frame, others = _load_golden(source, name, raw)
    _refuse_reserved_category(frame, source, name, raw)
    frame = _without_blank_labels(frame)
    if raw is not None and reused is not None:
        reused[key] = (raw, frame.clone(), others)
    return frame


#: A phrase with a letter, digit, mark, punctuation or symbol keeps something through the matcher's
#: normalisation; only the others (white space, format characters such as U+200B) are normalised to find out,
#: so the matcher's own list of removed characters (``ragmeter.evidence``) decides, not a copy of it
_KEEPS_SOMETHING = r"[\p{L}\p{N}\p{M}\p{P}\p{S}]"


#: the category of the overall row in every table and file (``score``, ``sweep``, ``eval``): no case may have it
OVERALL = "ALL"


def _refuse_reserved_category(frame: pl.DataFrame, source: Source, name: str, raw: Optional[bytes]) -> None:
    """An :class:`InputError` naming each case (file and line) whose category is :data:`OVERALL`, given or taken
    from its id's prefix (``ALL-3``): its rows read as the overall row's (two ``"category": "ALL"`` rows per
    threshold in ``sweep --json``, in ``--out`` files and in the score table)."""
    if not (frame["category"] == OVERALL).any():
        return
    label = _label(source, name)
    problems = _Problems(label)
    parquet = raw is not None and _is_parquet(Path(source), raw)
    rows = frame.with_row_index("_i").filter(pl.col("category") == OVERALL)
    for i, case_id, line in rows.select("_i", "id", "line").iter_rows():
        where = (f"{label}: row {line}" if parquet else f"{label}:{line}") if line is not None else f"{name}[{i}]"
        how = "category" if not case_id.startswith(OVERALL + "-") else f"category (the prefix of id {case_id!r})"
        problems.add(where, f"{how} {OVERALL!r} is reserved for the overall row of every table; give the case "
                            "another category")
    problems.raise_if_any()


def _without_blank_labels(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` without the blank entries of its expected files (``[""]``) and the evidence phrases that the
    matcher's normalisation makes empty (``""``, ``"\u200b"``): they name nothing, and kept they made the
    matcher count the case as labelled (``score`` exited 0 with nothing measured where a golden set of blank
    phrases is refused) and report the phrase as never found. ``labeled`` then says whether anything is left."""
    from ragmeter.evidence import normalize

    blank_file = pl.element().str.strip_chars() == ""
    maybe_empty = ~pl.element().str.contains(_KEEPS_SOMETHING)
    has = lambda c, e: pl.col(c).list.eval(e).list.any().fill_null(False)  # noqa: E731
    if not frame.select(has("expected_files", blank_file).any() | has("expected_evidence", maybe_empty).any()).item():
        return frame
    candidates = frame.select(pl.col("expected_evidence").explode()).to_series().drop_nulls().unique()
    candidates = candidates.filter(~candidates.str.contains(_KEEPS_SOMETHING))
    empty = [p for p in candidates.to_list() if not normalize(p)]  # only the few that may be empty
    keep_file = pl.element().filter(~blank_file)
    keep_phrase = pl.element().filter(~pl.element().is_in(pl.lit(pl.Series(empty, dtype=pl.String)).implode()))
    out = frame.with_columns(pl.col("expected_files").list.eval(keep_file),
                             pl.col("expected_evidence").list.eval(keep_phrase))
    return out.with_columns(pl.col("labeled") & ((pl.col("expected_files").list.len() > 0)
                                                 | (pl.col("expected_evidence").list.len() > 0)).fill_null(False))


#: (path, name) -> (the file's bytes, its frame, the Arrow table of the fields it does not keep or None)
#: while :func:`reusing_golden_loads` is in effect, else None; a context variable, so that a command in
#: another thread (an embedding platform's, a test's server) neither sees nor ends this one's
_reused_golden: contextvars.ContextVar[Optional[Dict[Tuple[str, str], Tuple[bytes, pl.DataFrame, Any]]]] = \
    contextvars.ContextVar("ragmeter_reused_golden", default=None)

#: Arrow types whose values ``to_pylist`` gives exactly as ``json.loads`` would (a double column may hold
#: integers the reader widened, a string column never holds anything but strings)
_PLAIN_JSON_TYPES = ("string", "large_string", "null", "bool", "int64")


def golden_fields(source: Source, frame: pl.DataFrame, names: Sequence[str], *, name: str = "golden") -> Dict[str, List[Any]]:
    """Fields :func:`load_golden` does not keep (``difficulty``, an audit's ``--by`` field), row for row with
    ``frame`` (``load_golden(source)``); None where a case lacks one. From the columns Arrow's reader parsed
    with the golden set when it could (the same values ``json.loads`` gives), else record by record."""
    others = _other_fields(source, name)
    if others is not None and others.num_rows == frame.height and all(
            n not in others.column_names or str(others.schema.field(n).type) in _PLAIN_JSON_TYPES for n in names):
        return {n: others.column(n).to_pylist() if n in others.column_names else [None] * frame.height for n in names}
    by_id = {str(r.get("id")): r for r in raw_records(source, name=name)}
    return {n: [by_id.get(case_id, {}).get(n) for case_id in frame["id"].to_list()] for n in names}


def _other_fields(source: Source, name: str) -> Any:
    """The Arrow table of a JSONL golden set's unkept fields, from this command's earlier load or a new read;
    None when the file is not one the columnar reader takes."""
    if not _is_path(source):
        return None
    raw = _read_bytes(Path(source))
    loads = _reused_golden.get()
    reused = loads.get((str(source), name)) if loads is not None else None
    if reused is not None and reused[0] == raw:
        return reused[2]
    if _is_parquet(Path(source), raw):
        return None
    columnar = _golden_jsonl_columnar(_utf8_payload(Path(source), raw, "golden sets")[0])
    return None if columnar is None else columnar[1]


@contextlib.contextmanager
def reusing_golden_loads() -> Iterator[None]:
    """Within it, :func:`load_golden` of a file it loaded before, whose bytes are still the same, gives a copy
    of that frame instead of parsing the file again (``ragmeter score`` loads the golden set to score the run
    and again to audit it: 0.3 s at 100,000 cases)."""
    outer = _reused_golden.get()
    token = _reused_golden.set(outer if outer is not None else {})
    try:
        yield
    finally:
        _reused_golden.reset(token)


def _load_golden(source: Source, name: str, raw: Optional[bytes]) -> Tuple[pl.DataFrame, Any]:
    """:func:`load_golden`, and the Arrow table of the fields it does not keep when the columnar reader read
    them (else None); ``raw``: the bytes of the file ``source`` names (None for data in memory)."""
    label = _label(source, name)
    problems = _Problems(label)
    if raw is not None:
        path = Path(source)
        if _is_parquet(path, raw):
            records = _parquet_records(path, problems)
        else:
            data, text = _utf8_payload(path, raw, "golden sets")
            columnar = _golden_jsonl_columnar(data)
            if columnar is not None:
                return columnar
            records = _file_records(path, text, problems, "golden sets")
    else:
        records = _memory_records(source, name, problems)
    _check_not_wrapped(records, source, _QUESTION_NAMES, "golden sets")
    _check_not_swapped(records, label, _QUESTION_NAMES, _RETRIEVED_NAMES, "a run")
    has_questions = _check_field_present(records, "question", _QUESTION_NAMES, label)
    from_lines = _ids_from_lines(records, label, note=has_questions)

    rows: Dict[str, List[Any]] = {k: [] for k in GOLDEN_SCHEMA}
    fast_columns = [rows[k] for k in ("id", "question", "expected_files", "expected_evidence", "reference_answer", "category", "source", "tags", "labeled")]
    seen: List[Tuple[Optional[str], str]] = []
    for where, line, rec in records:
        fast = None if from_lines else _fast_golden(rec)
        if fast is not None:
            for column, value in zip(fast_columns, fast):
                column.append(value)
            rows["line"].append(line)
            seen.append((fast[0], where))
            continue
        n_before = len(problems.items)
        case_id = _line_id(where, line) if from_lines and _pick(rec, _ID_NAMES, where, problems) is None else _id(rec, where, problems)
        question = _pick(rec, _QUESTION_NAMES, where, problems)
        if question is None:
            problems.add(where, "missing 'question'")
        elif not isinstance(question, str):
            problems.add(where, f"'question' must be a string, got {_kind(question)}")
        elif not question.strip():
            problems.add(where, "'question' is empty")
        files_key = next((n for n in _GOLDEN_ALIASES["expected_files"] if rec.get(n) is not None), "expectedFileNames")
        evidence_key = next((n for n in _GOLDEN_ALIASES["expected_evidence"] if rec.get(n) is not None), "expectedEvidence")
        files = _str_list(_pick(rec, _GOLDEN_ALIASES["expected_files"], where, problems), files_key, where, problems)
        evidence = _str_list(_pick(rec, _GOLDEN_ALIASES["expected_evidence"], where, problems), evidence_key, where, problems)
        reference = _opt_str(_pick(rec, _GOLDEN_ALIASES["reference_answer"], where, problems), "referenceAnswer", where, problems)
        category = _opt_str(rec.get("category"), "category", where, problems)
        src = _opt_str(rec.get("source"), "source", where, problems)
        tags = _str_list(rec.get("tags"), "tags", where, problems)
        seen.append((case_id, where))
        if len(problems.items) > n_before or case_id is None:
            continue
        rows["id"].append(case_id)
        rows["question"].append(question)
        rows["expected_files"].append(files)
        rows["expected_evidence"].append(evidence)
        rows["reference_answer"].append(reference)
        rows["category"].append(category if category else UNCATEGORISED if from_lines else default_category(case_id))
        rows["source"].append(src)
        rows["tags"].append(tags)
        rows["labeled"].append(any(f.strip() for f in files) or any(e.strip() for e in evidence))
        rows["line"].append(line)
    rows["id_from_line"] = [from_lines] * len(rows["id"])
    _check_duplicates(seen, problems)
    if _is_path(source) and not seen and not problems:
        problems.add(str(source), "no cases (the file has only comments)")
    problems.raise_if_any()
    try:
        return _golden_frame(rows), None
    except UnicodeEncodeError:  # records in memory (a file's are checked when read): a lone surrogate
        _without_surrogates(records, problems)
        problems.raise_if_any()
        raise


#: What makes two golden sets the same set of cases (not the file's bytes, comments or field spellings).
_FINGERPRINT_COLUMNS = ("id", "question", "expected_files", "expected_evidence", "reference_answer", "category")


def golden_fingerprint(golden: pl.DataFrame) -> str:
    """SHA-256 of a loaded golden set's cases (ids, questions, labels, reference answers, categories), in id order.

    Equal for the same cases however the file is written (comment lines,
    blank lines, field spellings, line order, JSON Lines or Parquet), so two
    runs can be compared on their cases rather than on the golden file's bytes.
    """
    import hashlib

    rows = golden.select(_FINGERPRINT_COLUMNS).sort("id").rows()
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


# ---------------------------------------------------------------------------
# Run
# ---------------------------------------------------------------------------


def _chunk(item: Any, i: int, where: str, problems: _Problems) -> Optional[Dict[str, Any]]:
    """A retrieved item: an object (``file`` optional) or a plain string, its text (as in ragas' ``retrieved_contexts``)."""
    field = f"retrieved[{i}]"
    if isinstance(item, str):
        return {"file": None, "chunk_id": None, "text": item, "score": None}
    if not isinstance(item, dict):
        problems.add(where, f"{field} must be an object with text and optional file, chunk_id, score, or a string; got {_kind(item)}", field)
        return None
    n_before = len(problems.items)
    file, text, chunk_id, score = (_pick(item, _CHUNK_ALIASES[k], where, problems, f"{field}.{k}")
                                   for k in ("file", "text", "chunk_id", "score"))
    if file is not None and not isinstance(file, str):
        problems.add(where, f"{field}.file must be a string, got {_kind(file)}", f"{field}.file")
    if not isinstance(text, str):
        problems.add(where, f"{field}.text must be a string, got {_kind(text)}" if text is not None else f"{field}: missing 'text'",
                     f"{field}.text")
    if chunk_id is not None:
        if isinstance(chunk_id, bool) or not isinstance(chunk_id, (str, int)):
            problems.add(where, f"{field}.chunk_id must be a string, got {_kind(chunk_id)}", f"{field}.chunk_id")
        else:
            chunk_id = str(chunk_id)
    score = _opt_number(score, f"{field}.score", where, problems)
    if len(problems.items) > n_before:
        return None
    return {"file": file, "chunk_id": chunk_id, "text": text, "score": score}


def _run_from_records(records: List[Record], problems: _Problems, from_lines: bool) -> Tuple[pl.DataFrame, List[Tuple[Optional[str], str]]]:
    rows: Dict[str, List[Any]] = {k: [] for k in RUN_SCHEMA}
    seen: List[Tuple[Optional[str], str]] = []
    for where, line, rec in records:
        n_before = len(problems.items)
        case_id = _line_id(where, line) if from_lines and _pick(rec, _ID_NAMES, where, problems) is None else _id(rec, where, problems)
        if not any(n in rec for n in _RETRIEVED_NAMES):
            problems.add(where, "missing 'retrieved' (use [] for an empty retrieval)", "retrieved")
        raw: Any = _pick(rec, _RETRIEVED_NAMES, where, problems)
        retrieved: List[Dict[str, Any]] = []
        if raw is None:
            raw = []
        if not isinstance(raw, (list, tuple)):
            problems.add(where, f"'retrieved' must be a list of chunks, got {_kind(raw)}", "retrieved")
        else:
            for i, item in enumerate(raw):
                chunk = _chunk(item, i, where, problems)
                if chunk is not None:
                    retrieved.append(chunk)
        if rec.get("contexts") is None:
            contexts = [c["text"] for c in retrieved]
        else:
            contexts = _str_list(rec.get("contexts"), "contexts", where, problems)
        answer = _opt_str(_pick(rec, _ANSWER_NAMES, where, problems, "answer"), "answer", where, problems)
        mode = _opt_str(_pick(rec, _RUN_ALIASES["retrieval_mode"], where, problems, "retrieval_mode"), "retrieval_mode",
                        where, problems)
        latency = _opt_number(_pick(rec, _RUN_ALIASES["latency_ms"], where, problems, "latency_ms"), "latency_ms",
                              where, problems)
        usage = rec.get("usage")
        if usage is None:
            usage = {k: rec.get(k) for k in ("prompt_tokens", "completion_tokens")}
        elif not isinstance(usage, dict):
            problems.add(where, f"'usage' must be an object with prompt_tokens and completion_tokens, got {_kind(usage)}",
                         "usage")
            usage = {}
        prompt = _opt_int(usage.get("prompt_tokens"), "usage.prompt_tokens", where, problems)
        completion = _opt_int(usage.get("completion_tokens"), "usage.completion_tokens", where, problems)
        cost = _opt_number(rec.get("cost"), "cost", where, problems)
        run_error = _run_error(rec.get("error_kind"), rec.get("error"), where, problems)
        seen.append((case_id, where))
        if len(problems.items) > n_before or case_id is None:
            continue
        rows["id"].append(case_id)
        rows["retrieved"].append(retrieved)
        rows["contexts"].append(contexts)
        rows["answer"].append(answer)
        rows["retrieval_mode"].append(mode)
        rows["latency_ms"].append(latency)
        rows["prompt_tokens"].append(prompt)
        rows["completion_tokens"].append(completion)
        rows["cost"].append(cost)
        rows["run_error"].append(run_error)
        rows["line"].append(line)
        rows["id_from_line"].append(from_lines)
    try:
        return pl.DataFrame(rows, schema=RUN_SCHEMA), seen
    except UnicodeEncodeError:  # records in memory (a file's are checked when read): a lone surrogate
        _without_surrogates(records, problems)
        if not problems:
            raise
        return pl.DataFrame(schema=RUN_SCHEMA), seen


@dataclass(frozen=True)
class RecordProblem:
    """One reason :func:`load_run` would refuse a run record."""

    field: Optional[str]  #: what it is about, as the record names it: ``answer``, ``retrieved``, ``retrieved[2].text``
    message: str          #: the loader's own words (what a run file gets after ``FILE:LINE:``)


def run_record_problems(record: Dict[str, Any]) -> List[RecordProblem]:
    """Why :func:`load_run` would refuse ``record`` (one run record, a dict as a JSONL line holds it), in the
    loader's order; empty when it loads. For a program that makes run records (``ragmeter collect``) and must
    not write one that ``score`` refuses."""
    problems = _Problems("record")
    _run_from_records([("record", None, record)], problems, False)
    return [RecordProblem(field, message) for (_where, message), field in zip(problems.items, problems.fields)]


def _run_error(kind: Any, message: Any, where: str, problems: _Problems) -> Optional[str]:
    """The kind of failure a record carries (``collect`` keeps a failed case with ``error`` and ``error_kind``),
    ``"error"`` when only the message is there; None for a case that did not fail."""
    if isinstance(message, bool):  # a script's own flag: true = failed, false = fine
        message = "error" if message else None
    kind = _opt_str(kind, "error_kind", where, problems)
    message = _opt_str(message, "error", where, problems)
    if kind is not None and kind.strip():
        return kind.strip()
    return "error" if message is not None and message.strip() else None


def _numeric(dtype: Any) -> bool:
    return dtype.is_numeric() and dtype != pl.Boolean


def _one_spelling(df: pl.DataFrame, names: Sequence[str], where: str, problems: _Problems,
                  at_rows: Callable[[List[int], str], None]) -> pl.DataFrame:
    """``df`` with the spellings of one field (``names``, canonical first) as one column under the canonical
    name: per row the first spelling that is not null, as :func:`_pick` takes it from a record, and a row
    where two spellings hold different values is a problem there, as it is for a record."""
    present = [n for n in names if n in df.columns]
    if not present:
        return df
    first = present[0]
    try:
        for other in present[1:]:
            differ = pl.col(first).is_not_null() & pl.col(other).is_not_null() & (pl.col(first) != pl.col(other))
            at_rows(_rows_where(df, differ), f"both {first!r} and {other!r} given with different values")
        if len(present) > 1:
            df = df.with_columns(pl.coalesce([pl.col(n) for n in present]).alias(first))
    except pl.exceptions.PolarsError:  # types that cannot be compared cannot hold the same value either
        problems.add(where, f"both columns {first!r} and {other!r} given, of types {df.schema[first]} and "
                            f"{df.schema[other]}; keep one")
    df = df.drop(present[1:])
    return df.rename({first: names[0]}) if first != names[0] else df


def _strings_for_categoricals(dtype: Any) -> Any:
    """``dtype`` with String for every Categorical or Enum in it (nested ones included)."""
    if isinstance(dtype, (pl.Categorical, pl.Enum)):
        return pl.String
    if isinstance(dtype, pl.List):
        return pl.List(_strings_for_categoricals(dtype.inner))
    if isinstance(dtype, pl.Array):
        return pl.Array(_strings_for_categoricals(dtype.inner), dtype.shape)
    if isinstance(dtype, pl.Struct):
        return pl.Struct([pl.Field(f.name, _strings_for_categoricals(f.dtype)) for f in dtype.fields])
    return dtype


def _categoricals_as_strings(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with its Categorical and Enum columns (and fields) as strings: a string column a file stores as a
    dictionary in its Arrow schema (pandas' category, Polars' Categorical, a pyarrow dictionary array) is its
    strings, as the same run written as JSON Lines."""
    casts = {name: want for name, dtype in df.schema.items() if (want := _strings_for_categoricals(dtype)) != dtype}
    return df.cast(casts) if casts else df


def _item_type_ok(name: str, got: Any, want: Any) -> bool:
    """May a retrieved item's field ``name`` of Polars type ``got`` be read as ``want``?"""
    return got == want or (name == "chunk_id" and got.is_integer()) or (name == "score" and _numeric(got)) \
        or got == pl.Null


def _widened(value: pl.Expr, dtype: Any, want: Any) -> pl.Expr:
    """``value`` (of type ``dtype``) cast to ``want``; a float32 score through its shortest decimal, so that it
    reads as written: 0.7 stored as float32 is 0.699999988 as a float64, which a threshold of 0.7 dropped (a
    Parquet run swept to Hit 0% where the same run as JSON Lines gave 100%). The shortest decimals of float32
    values keep their order, and equal float32 values stay equal."""
    if dtype == pl.Float32 and want == pl.Float64:
        return value.cast(pl.String).cast(pl.Float64)
    return value.cast(want)


def _non_finite_scores(df: pl.DataFrame, add: Callable[[int, str], None]) -> None:
    """``add(row, message)`` for each row of a run's columns whose first NaN or infinite chunk score is named, as
    a JSON Lines record's is refused (``'retrieved[1].score' must be a finite number, got nan``): a Parquet run
    or a frame let ``score`` take one that the same run as JSON Lines was refused for. Looked at row by row only
    when the column holds one."""
    scores = pl.col("retrieved").list.eval(pl.element().struct.field("score"))
    bad = df.select(scores.list.eval(pl.element().is_finite().not_()).alias("bad"))["bad"]
    if not bad.list.any().fill_null(False).any():
        return
    rows = bad.list.any().fill_null(False).arg_true().to_list()
    for row in rows:
        flags = bad[row].to_list()
        i = flags.index(True)
        add(row, f"'retrieved[{i}].score' must be a finite number, got {df['retrieved'][row][i]['score']}")


def _rows_where(df: pl.DataFrame, mask: pl.Expr) -> List[int]:
    return df.with_row_index("__row").filter(mask)["__row"].to_list()


def _read_parquet(path: Path) -> pl.DataFrame:
    """``pl.read_parquet``, reading row groups on several threads for large files.

    Polars decodes a list-of-struct column (``retrieved``) on one thread, so a
    large run file is read as one slice per row group, in parallel (Polars
    releases the GIL), then re-chunked (string views are concatenated, the
    text buffers shared, not copied).
    """
    import concurrent.futures

    import pyarrow.parquet as pq

    threads = os.cpu_count() or 1
    if threads < 2 or path.stat().st_size < (32 << 20):
        return pl.read_parquet(path)
    meta = pq.ParquetFile(path).metadata
    bounds = [0]
    for i in range(meta.num_row_groups):
        bounds.append(bounds[-1] + meta.row_group(i).num_rows)
    if len(bounds) < 3:
        return pl.read_parquet(path)

    def part(i: int) -> pl.DataFrame:
        return pl.scan_parquet(path).slice(bounds[i], bounds[i + 1] - bounds[i]).collect()

    with concurrent.futures.ThreadPoolExecutor(min(threads, len(bounds) - 1)) as pool:
        parts = list(pool.map(part, range(len(bounds) - 1)))
    return pl.concat(parts, rechunk=True)


def _run_from_parquet(path: Path, problems: _Problems) -> pl.DataFrame:
    """Validate and convert a Parquet run column by column (no per-row Python)."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    try:
        df = _read_parquet(path)
    except Exception as exc:  # polars raises several types for unreadable files
        raise InputError(f"{path}: cannot read as Parquet: {exc}") from None
    if not df.height:  # as ParquetRun refuses it
        raise InputError(f"{path}: {NO_ROWS}")
    return _run_from_columns(df, str(path), problems)


#: why a Parquet run of no row is refused (the streamed and the whole-file reading say the same)
NO_ROWS = "no cases (the file has 0 rows)"


def _columnar_run(source: Any) -> bool:
    """An in-memory table that is already a run's columns (an ``id`` and a ``retrieved`` list of structs or
    strings, as from Parquet or an Arrow batch): validated column by column like a Parquet file, not per row."""
    if not isinstance(source, pl.DataFrame) or "id" not in source.columns or "retrieved" not in source.columns:
        return False
    dtype = source.schema["retrieved"]
    return isinstance(dtype, pl.List) and (isinstance(dtype.inner, pl.Struct) or dtype.inner == pl.String)


def _run_from_columns(df: pl.DataFrame, where: str, problems: _Problems, *, first_row: int = 1,
                      ids_from_lines: Optional[bool] = None, batch: bool = False) -> pl.DataFrame:
    """Validate and convert a run's columns (a Parquet file's, or an in-memory table's) without per-row Python;
    problems are reported as ``where: row N``.

    ``batch``: ``df`` is one slice of a file whose row ``first_row`` is its first row (see
    :class:`ParquetRun`): problems of its values are collected, not raised, duplicate ids are left to the
    caller (they span slices), ``contexts`` is left null and ``ids_from_lines`` says whether the whole file's
    ``id_from_line`` column said so. Problems of the columns' types are raised at once either way.
    """
    df = _categoricals_as_strings(df)
    schema = df.schema
    offset = first_row - 1

    def at_rows(rows: List[int], message: str) -> None:
        for r in rows:
            problems.add(f"{where}: row {r + 1 + offset}", message)

    # Usage may be a struct column or flattened columns.
    if "usage" in schema:
        if isinstance(schema["usage"], pl.Struct):
            fields = {f.name for f in schema["usage"].fields}
            df = df.with_columns(
                [pl.col("usage").struct.field(k).alias(k) for k in ("prompt_tokens", "completion_tokens") if k in fields and k not in schema]
            )
        else:
            problems.add(where, f"column 'usage' has type {schema['usage']}, expected a struct of prompt_tokens, completion_tokens")
        df = df.drop("usage")
    # Rows where two spellings differ are problems of the values: added once the types are checked (in a slice,
    # they are collected with the other slices', not raised with the types).
    differing: List[Tuple[List[int], str]] = []
    for names in (*_RUN_ALIASES.values(), _ID_NAMES, _RETRIEVED_NAMES, _ANSWER_NAMES):
        df = _one_spelling(df, names, where, problems, lambda rows, message: differing.append((rows, message)))
    schema = df.schema

    exprs: List[pl.Expr] = []
    from_lines = "id_from_line" in schema and schema["id_from_line"] == pl.Boolean and bool(df["id_from_line"].all())
    if ids_from_lines is not None:
        from_lines = ids_from_lines
    if "id" not in schema:
        # A column that looks like a misnamed id is an error; otherwise rows are numbered.
        _check_field_present([(f"{where}: row 1", 1, dict.fromkeys(schema))], "id", _ID_NAMES, where)
        from_lines = True
        ids = pl.format("line-{}", pl.int_range(first_row, df.height + first_row, dtype=pl.Int64))
        df = df.with_columns(ids.alias("id"))
        if "retrieved" in schema:  # else the file is refused below: one diagnosis, not a note before it
            _note(f"{where}: no ids; each case is named by its row number (line-1, line-2, ...), "
                  f"which joins it only to a file that has no ids either")
        schema = df.schema
    if schema["id"] == pl.String or schema["id"].is_integer():
        exprs.append(pl.col("id").cast(pl.String))
    else:
        problems.add(where, f"column 'id' has type {schema['id']}, expected string")

    retrieved_ok = False
    spelled: List[Tuple[pl.Expr, str]] = []  # rows whose items give two spellings of a field different values
    if "retrieved" not in schema:
        _check_field_present([(f"{where}: row 1", 1, dict.fromkeys(schema))], "retrieved", _RETRIEVED_NAMES, where)
        problems.add(where, "missing column 'retrieved'")
    else:
        dtype = schema["retrieved"]
        if isinstance(dtype, pl.Array) and len(dtype.shape) == 1:  # a fixed-size list: the same items
            df = df.with_columns(pl.col("retrieved").arr.to_list())
            dtype = df.schema["retrieved"]
        inner = dtype.inner if isinstance(dtype, (pl.List, pl.Array)) else None
        if inner == pl.String:  # plain texts, as ragas' retrieved_contexts
            df = df.with_columns(pl.col("retrieved").list.eval(pl.struct(
                pl.lit(None, dtype=pl.String).alias("file"), pl.lit(None, dtype=pl.String).alias("chunk_id"),
                pl.element().alias("text"), pl.lit(None, dtype=pl.Float64).alias("score"),
            )))
            dtype = df.schema["retrieved"]
            inner = dtype.inner if isinstance(dtype, pl.List) else None
        if not isinstance(inner, pl.Struct):
            problems.add(where, f"column 'retrieved' has type {dtype}, expected list of struct{{file, chunk_id, text, score}}")
        else:
            fields = {f.name: f.dtype for f in inner.fields}
            parts: List[pl.Expr] = []
            for name, want in (("file", pl.String), ("chunk_id", pl.String), ("text", pl.String), ("score", pl.Float64)):
                # the item's spellings of the field (README "Formats"), as a JSON Lines item's are read
                spellings = [n for n in _CHUNK_ALIASES[name] if n in fields]
                if not spellings:
                    if name == "text":
                        problems.add(where, f"column 'retrieved' has no field {name!r}")
                    parts.append(pl.lit(None, dtype=want).alias(name))
                    continue
                wrong = [n for n in spellings if not _item_type_ok(name, fields[n], want)]
                for n in wrong:
                    problems.add(where, f"field retrieved.{n} has type {fields[n]}, expected {want}")
                if wrong:
                    continue
                values = [_widened(pl.element().struct.field(n), fields[n], want) for n in spellings]
                parts.append((values[0] if len(values) == 1 else pl.coalesce(values)).alias(name))
                for n, other in zip(spellings[1:], values[1:]):  # per row, as _pick per record
                    differ = values[0].is_not_null() & other.is_not_null() & (values[0] != other)
                    spelled.append((pl.col("retrieved").list.eval(differ).list.any(),
                                    f"both 'retrieved.{spellings[0]}' and 'retrieved.{n}' given with different values"))
            if not problems:
                retrieved_ok = True
                if dtype != RETRIEVED_DTYPE:
                    exprs.append(pl.col("retrieved").list.eval(pl.struct(parts)).cast(RETRIEVED_DTYPE))
                else:
                    exprs.append(pl.col("retrieved"))

    if "contexts" in schema:
        if schema["contexts"] in (pl.List(pl.String), pl.List(pl.Null)):
            exprs.append(pl.col("contexts").cast(pl.List(pl.String)))
        else:
            problems.add(where, f"column 'contexts' has type {schema['contexts']}, expected list of strings")
    for name in ("answer", "retrieval_mode", "error", "error_kind", "run_error"):
        flag = name == "error" and schema.get(name) == pl.Boolean  # see _run_error_column
        if name in schema and schema[name] not in (pl.String, pl.Null) and not flag:
            problems.add(where, f"column {name!r} has type {schema[name]}, expected string")
    if "error" in schema or "error_kind" in schema:
        exprs.append(_run_error_column(schema))
    for name in ("latency_ms", "cost", "prompt_tokens", "completion_tokens"):
        if name in schema and not (_numeric(schema[name]) or schema[name] == pl.Null):
            problems.add(where, f"column {name!r} has type {schema[name]}, expected a number")
    problems.raise_if_any()

    for rows, message in differing:
        at_rows(rows, message)
    for differ, message in spelled:
        at_rows(_rows_where(df, differ), message)
    df = df.with_columns(exprs)
    # Value-level checks, vectorised.
    at_rows(_rows_where(df, pl.col("id").is_null() | (pl.col("id").str.strip_chars() == "")), "missing 'id'")
    if retrieved_ok:
        df = df.with_columns(pl.col("retrieved").fill_null(pl.lit([], dtype=RETRIEVED_DTYPE)))
        bad = pl.col("retrieved").list.eval(pl.element().struct.field("text").is_null()).list.any()
        at_rows(_rows_where(df, bad), "a retrieved chunk has no 'text'")
        _non_finite_scores(df, lambda row, message: problems.add(f"{where}: row {row + 1 + offset}", message))
    if batch:
        if problems:
            return pl.DataFrame(schema=RUN_SCHEMA)  # the caller raises once every slice is read
    else:
        if check_duplicate_ids(df["id"], where, problems) and "repeat" in df.columns:
            refuse_collected_repeats(where, df["repeat"].unique().to_list())
        problems.raise_if_any()

    n = df.height
    out = []
    for name, dtype in RUN_SCHEMA.items():
        if name == "line":
            out.append(pl.int_range(first_row, n + first_row, dtype=pl.Int64).alias("line"))
        elif name == "id_from_line":
            out.append(pl.lit(from_lines).alias("id_from_line"))
        elif name == "contexts" and batch:
            out.append(pl.lit(None, dtype=dtype).alias(name))  # the texts are read for scoring, not kept
        elif name == "contexts" and "contexts" not in df.schema:
            out.append(pl.col("retrieved").list.eval(pl.element().struct.field("text")).alias("contexts"))
        elif name in df.schema:
            out.append(pl.col(name).cast(dtype))
        else:
            out.append(pl.lit(None, dtype=dtype).alias(name))
    df = df.select(out)
    if batch:
        return df
    # Missing contexts in some rows default to that row's retrieved texts.
    return df.with_columns(
        pl.when(pl.col("contexts").is_null())
        .then(pl.col("retrieved").list.eval(pl.element().struct.field("text")))
        .otherwise(pl.col("contexts"))
        .alias("contexts")
    ) if df["contexts"].null_count() else df


def _run_error_column(schema: Any) -> pl.Expr:
    """:func:`_run_error` over a run's ``error_kind`` and ``error`` columns."""
    def text(name: str) -> pl.Expr:
        present = name in schema and schema[name] == pl.String
        return pl.col(name).str.strip_chars() if present else pl.lit(None, dtype=pl.String)

    kind, message = text("error_kind"), text("error")
    if "error" in schema and schema["error"] == pl.Boolean:  # a script's own flag: true = failed
        message = pl.when(pl.col("error")).then(pl.lit("error")).otherwise(pl.lit(None, dtype=pl.String))
    return (pl.when(kind.is_not_null() & (kind != "")).then(kind)
            .when(message.is_not_null() & (message != "")).then(pl.lit("error"))
            .otherwise(pl.lit(None, dtype=pl.String)).alias("run_error"))


def check_duplicate_ids(ids: pl.Series, where: str, problems: _Problems) -> bool:
    """Add ``where: row N: duplicate id ...`` for each repeated id of a run's ``id`` column (row 1 first); True
    when there was one."""
    dup = ids.is_duplicated() & ids.is_not_null()
    if not dup.any():
        return False
    rows = dup.arg_true().to_list()
    first: Dict[str, int] = {}
    for r, case_id in zip(rows, ids.gather(rows).to_list()):
        if case_id in first:
            problems.add(f"{where}: row {r + 1}", f"duplicate id {case_id!r} (first at row {first[case_id] + 1})")
        else:
            first[case_id] = r
    return True


class ParquetRun:
    """A Parquet run read slice by slice (a few thousand rows at a time, whatever its row groups), each slice
    validated as :func:`load_run` validates the whole file, so that the chunk texts never all sit in memory.

    Iterate for ``(pyarrow batch, frame)`` pairs (frames as :func:`load_run` returns them, ``contexts`` null);
    problems of the values are collected in ``problems``; :meth:`finish` then adds the duplicate ids (which
    span slices) and raises every problem at once, as :func:`load_run` would have.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)
        self.problems = _Problems(self.where)
        if not path.exists():
            raise InputError(f"{path}: no such file")
        try:
            self._file = _parquet_ahead.open_run(path)
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for unreadable files
            raise InputError(f"{path}: cannot read as Parquet: {exc}") from None
        self.n_rows = self._file.metadata.num_rows
        if not self.n_rows:  # a run of no case measures nothing: refused, as an empty JSON Lines run is
            raise InputError(f"{path}: {NO_ROWS}")
        self.batch_rows = _parquet_ahead.slice_rows(self._file.metadata)  # the sizes: _parquet_ahead's
        #: the slices the command began decoding before it got here (:func:`ragmeter._parquet_ahead.start`)
        self._early: Optional[_parquet_ahead.ReadAhead] = _parquet_ahead.take(path, self.batch_rows)
        self._ids: List[pl.Series] = []
        names = self._file.schema_arrow.names
        self._ids_from_lines: Optional[bool] = None
        if "id_from_line" in names:
            column = pl.from_arrow(self._file.read(columns=["id_from_line"]))
            if isinstance(column, pl.DataFrame) and column.schema["id_from_line"] == pl.Boolean:
                self._ids_from_lines = bool(column["id_from_line"].all())

    def batches(self, columns: Optional[List[str]] = None) -> Iterator[Tuple[int, Any]]:
        """``(first_row, pyarrow.RecordBatch)`` of the file's rows, in order; the next slice is decoded on
        another thread while the caller works on this one (pyarrow decodes a column on one thread)."""
        for first, batch, _ in self._slices(columns):
            yield first, batch

    def _slices(self, columns: Optional[List[str]] = None, prepare: Optional[Callable[[Any, int], Any]] = None
                ) -> Iterator[Tuple[int, Any, Any]]:
        """``(first_row, batch, made)`` per slice, in order: ``made`` is what ``prepare(batch, first_row)``
        returned on the read-ahead thread, or None for a slice decoded before ``prepare`` was handed over
        (an early reader's first slices)."""
        reader, self._early = self._early, None  # the early reader reads every column
        if reader is not None and columns is not None:
            reader.close()
            reader = None
        hook = None if prepare is None else (lambda batch, first: self._prepared(batch, first, prepare))
        if reader is None:
            slices = _parquet_ahead.Prepared(_parquet_ahead.slices(self._file, self.path, self.batch_rows, columns))
            slices.prepare = hook  # before the reader begins: every slice is prepared on its thread
            reader = _parquet_ahead.ReadAhead(slices)
        elif hook is not None and isinstance(reader.items, _parquet_ahead.Prepared):
            reader.items.prepare = hook  # from its next slice on: those it made already are checked here
        try:
            for first, batch, made in reader:
                yield first, batch if made is not None else _texts_with_lists(batch), made
        except (OSError, ValueError, TypeError, ArithmeticError) as exc:  # pyarrow's errors for corrupt pages
            raise InputError(f"{self.path}: cannot read as Parquet: {exc}") from None

    @staticmethod
    def _prepared(batch: Any, first_row: int, prepare: Callable[[Any, int], Any]) -> Tuple[Any, Any]:
        """On the read-ahead thread: the slice as :meth:`batches` gives it (its errors are the file's, as
        there), and what ``prepare`` makes of it, or the exception it raised (raised where the slice is used)."""
        batch = _texts_with_lists(batch)
        try:
            return batch, prepare(batch, first_row)
        except Exception as exc:  # noqa: BLE001 - raised in the reader's thread by __iter__
            return batch, _Failed(exc)

    def __iter__(self) -> Iterator[Tuple[Any, pl.DataFrame]]:
        """``(batch, frame)`` per slice. Each slice is checked on the read-ahead thread, while the caller
        matches the one before: the checks were 0.1 of 0.7 s of ``ragmeter score`` of 20,000 cases, and 0.5 of
        2.5 s at 100,000, on the caller's thread, the command's critical path; moved, the command is 3-7%
        faster on ASCII text at 20,000 cases, no slower elsewhere (two cores already busy; 2026-12-05)."""
        seen = False
        for first, batch, checked in self._slices(prepare=self._check):
            seen = True
            yield batch, self._recorded(checked if checked is not None else self._check(batch, first))
        if not seen:  # no rows: the columns' types are still checked (on a batch: a table's columns are chunked)
            import pyarrow as pa

            self.frame(pa.RecordBatch.from_pylist([], schema=self._file.schema_arrow), 1)

    def frame(self, batch: Any, first_row: int, record: bool = True) -> pl.DataFrame:
        """One slice as :func:`load_run`'s frame (empty when it has problems; :meth:`finish` raises them).
        ``record=False``: a slice read again, whose problems and ids were recorded the first time."""
        checked = self._check(batch, first_row)
        return self._recorded(checked) if record else _raised(checked)[0]

    def _check(self, batch: Any, first_row: int) -> Tuple[pl.DataFrame, "_Problems", pl.DataFrame]:
        """A slice's frame, the problems of its values, and the columns it was made from (for the ids of a
        slice with problems); problems of the types are raised (the same in every slice: at the first).
        Reads nothing this reader changes, so it may run on the read-ahead thread."""
        df = pl.from_arrow(_dictionary_texts.texts_left_out(batch))  # the texts go to the matcher from the batch
        assert isinstance(df, pl.DataFrame)
        local = _Problems(self.where)
        frame = _run_from_columns(df, self.where, local, first_row=first_row, ids_from_lines=self._ids_from_lines,
                                  batch=True)
        return frame, local, df

    def _recorded(self, checked: Any) -> pl.DataFrame:
        """The frame of a checked slice, its problems and ids added to those of the file (in the file's order,
        on the caller's thread)."""
        frame, local, df = _raised(checked)
        self.problems.items += local.items
        self._ids.append(_slice_ids(df) if self.problems else frame["id"])
        return frame

    def finish(self) -> None:
        """Raise every problem of the file (duplicate ids included) in one :class:`InputError`."""
        if self._ids and check_duplicate_ids(pl.concat(self._ids), self.where, self.problems) \
                and "repeat" in self._file.schema_arrow.names:
            refuse_collected_repeats(self.where, self._file.read(columns=["repeat"]).column(0).unique().to_pylist())
        self.problems.raise_if_any()


class _Failed:
    """An exception a slice's check raised on the read-ahead thread, to be raised where the slice is used."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _raised(checked: Any) -> Any:
    """``checked``, unless it is a :class:`_Failed`, whose exception is raised."""
    if isinstance(checked, _Failed):
        raise checked.error
    return checked


def _texts_with_lists(batch: Any) -> Any:
    """A slice whose dictionary-encoded texts (:mod:`ragmeter._dictionary_texts`) stay so only where every list
    is valid: a null list may span texts, which :func:`arrow_chunk_texts` then leaves to the frame."""
    found = _parquet_ahead.chunk_texts(batch)
    if found is None or not found[0].null_count:
        return batch
    return _dictionary_texts.plain_texts(batch)


def arrow_chunk_texts(batch: Any, frame: pl.DataFrame) -> Optional[Tuple[Any, Any]]:
    """The chunk texts of a Parquet slice straight from its Arrow batch (no copy): ``(group offsets, texts)``,
    texts a pyarrow string array (or a dictionary array of strings: :mod:`ragmeter._dictionary_texts`), for the
    rows of ``frame`` (the slice as :meth:`ParquetRun.frame` read it).
    None when the batch's layout is not the plain one (the caller then takes the texts from ``frame``)."""
    import numpy as np
    import pyarrow as pa

    found = _parquet_ahead.chunk_texts(batch)
    if found is None or frame.height != batch.num_rows:
        return None
    column, child = found
    large = pa.types.is_large_list(column.type)
    dictionary = pa.types.is_dictionary(child.type)
    kind = child.type.value_type if dictionary else child.type
    if not (pa.types.is_large_string(kind) or pa.types.is_string(kind)):
        return None
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int64 if large else np.int32,
                            count=len(column) + 1 + column.offset)[column.offset:].astype(np.int64)
    lengths = frame["retrieved"].list.len().to_numpy()
    if not np.array_equal(np.diff(offsets), lengths):  # a null list over values: take the frame's
        return None
    texts = child.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    return offsets - offsets[0], texts


def _slice_ids(df: pl.DataFrame) -> pl.Series:
    """The ids of a slice that has problems, for the duplicate-id check (as the whole-file check sees them)."""
    df = _categoricals_as_strings(df)
    names = [n for n in _ID_NAMES if n in df.columns]
    if not names or not (df.schema[names[0]] == pl.String or df.schema[names[0]].is_integer()):
        return pl.Series("id", [None] * df.height, dtype=pl.String)
    return df[names[0]].cast(pl.String).alias("id")


def load_run(source: Source, *, name: str = "run") -> pl.DataFrame:
    """Load a retrieval run from a path (JSON Lines, a JSON array or Parquet), a list of dicts or a DataFrame.

    Returns one row per case with columns ``id``, ``retrieved``
    (list[struct{file, chunk_id, text, score}], in rank order; ``file`` null
    when the retriever gave none), ``contexts`` (list[str], defaults to the
    retrieved texts), ``answer``, ``retrieval_mode``, ``latency_ms``,
    ``prompt_tokens``, ``completion_tokens``, ``cost``, ``line`` (JSONL line,
    Parquet row number, null for in-memory input) and ``id_from_line``. A
    Parquet file is validated column by column. Raises :class:`InputError`
    listing every problem.
    """
    label = _label(source, name)
    problems = _Problems(label)
    if _is_path(source) and _is_parquet(Path(source)):
        return _run_from_parquet(Path(source), problems)
    if _columnar_run(source):
        # in-memory input has no file lines (see the docstring)
        return _run_from_columns(source, label, problems).with_columns(pl.lit(None, dtype=pl.Int64).alias("line"))
    records = _records(source, name, problems, "run files")
    _check_not_wrapped(records, source, _RETRIEVED_NAMES, "run files")
    _check_not_swapped(records, label, _RETRIEVED_NAMES, (*_QUESTION_NAMES, *_GOLDEN_ALIASES["expected_evidence"][:2]), "a golden set")
    has_retrieved = not records or _check_field_present(records, "retrieved", _RETRIEVED_NAMES, label)
    df, seen = _run_from_records(records, problems, _ids_from_lines(records, label, note=has_retrieved))
    if _is_path(source) and not seen and not problems:
        problems.add(label, "no cases (the file has only comments)")
    if _check_duplicates(seen, problems):
        refuse_collected_repeats(label, (rec.get("repeat") for _w, _l, rec in records))
    problems.raise_if_any()
    return df


def _ids_made_from_lines(frame: pl.DataFrame) -> bool:
    return "id_from_line" in frame.columns and frame.height > 0 and bool(frame["id_from_line"].all())


def check_id_sources(golden: pl.DataFrame, run: pl.DataFrame, golden_source: str, run_source: str) -> None:
    """Raise :class:`InputError` unless the two frames may be joined on ``id``.

    Files join by line number (ids made from it, ``id_from_line``) only when
    neither has ids, and then only when their cases sit on the same lines; a
    note on stderr says they were. Any join of a golden set with a run on
    ``id`` should call this first (:func:`check_run_against_golden` does).
    """
    golden_lines, run_lines = _ids_made_from_lines(golden), _ids_made_from_lines(run)
    if golden_lines and not run_lines:
        raise InputError(f"{run_source}: has ids but {golden_source} has none, so they cannot be joined; "
                         f"add the same ids to {golden_source} (or drop them from {run_source} to join by line number)")
    if run_lines and not golden_lines:
        raise InputError(f"{run_source}: has no ids but {golden_source} has, so they cannot be joined; "
                         f"give each run line the id of its golden case")
    if golden_lines and run_lines:
        if set(golden["id"].to_list()) != set(run["id"].to_list()):
            raise InputError(f"{run_source}: neither it nor {golden_source} has ids, and their cases are not on the same "
                             f"lines ({_span(run)} vs {_span(golden)}); files without ids join by line number only when "
                             f"the lines match: add ids to both")
        unit = "line" if str(golden["id"][0]).startswith("line-") else "row"
        _note(f"neither {golden_source} nor {run_source} has ids: their cases are joined by {unit} number")


def _span(frame: pl.DataFrame) -> str:
    ids = frame["id"].to_list()
    return f"{ids[0]} to {ids[-1]}" if len(ids) > 1 else ids[0]


def _not_in_golden(extra: pl.DataFrame, run_source: str, golden_source: str, n_golden: int) -> str:
    """One line for run ids absent from the golden set, however many: the first few with their lines."""
    ids = extra["id"].to_list()
    lines = extra["line"].to_list() if "line" in extra.columns else [None] * len(ids)
    if len(ids) == 1:
        where = f"{run_source}:{lines[0]}" if lines[0] is not None else run_source
        return f"{where}: id {ids[0]!r} is not in the golden set"
    shown = ", ".join(f"{i!r}" + (f" (line {n})" if n is not None else "")
                      for i, n in zip(ids[:_GROUP_SHOWN], lines[:_GROUP_SHOWN]))
    more = f" and {len(ids) - _GROUP_SHOWN} more" if len(ids) > _GROUP_SHOWN else ""
    return (f"{run_source}: {len(ids)} ids are not in the golden set {golden_source} ({n_golden} cases): "
            f"{shown}{more}; is the run for another golden set?")


def check_run_against_golden(golden: pl.DataFrame, run: pl.DataFrame, *, run_source: str = "run",
                             golden_source: str = "golden") -> List[str]:
    """Raise :class:`InputError` listing every run id absent from the golden set.

    ``run_source`` names the run in messages (``run.jsonl:12: id 'x' is not in
    the golden set``). Returns the golden ids missing from the run: not an input
    error but a failure of the run, which the scorer counts as empty retrievals
    and warns about. When either file had no ids (``id_from_line``), both must
    lack them and hold the same lines.
    """
    check_id_sources(golden, run, golden_source, run_source)
    extra = run.filter(~pl.col("id").is_in(golden["id"].implode()))
    if extra.height:
        raise InputError(_not_in_golden(extra, run_source, golden_source, golden.height))
    run_ids = set(run["id"].to_list())
    return [i for i in golden["id"].to_list() if i not in run_ids]


# Data from ragas, DeepEval and Hugging Face datasets (see ragmeter.ecosystem): (golden, run) record lists.
from ragmeter.ecosystem import from_deepeval, from_hf, from_ragas, to_deepeval, to_ragas  # noqa: E402,F401


# ---------------------------------------------------------------------------
# Runs with collected repeats (``ragmeter collect --repeat N``)
# ---------------------------------------------------------------------------

from typing import NamedTuple  # noqa: E402


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
