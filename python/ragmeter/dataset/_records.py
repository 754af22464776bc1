"""Reading a source (a file, a frame, a list of dicts) as records, with each one's file and line."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import polars as pl

from ragmeter import _sniff
from ragmeter._parquet_ahead import is_parquet as _is_parquet
from ragmeter.dataset._names import Source
from ragmeter.dataset._problems import _Problems, _kind
from ragmeter.errors import InputError


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
        raise _sniff.parquet_read_error(path, exc) from None
    if df.height == 0:
        raise InputError(f"{path}: has no rows")
    return [(f"{path}: row {i}", i, rec) for i, rec in enumerate(df.iter_rows(named=True), start=1)]


def _is_dataframe(source: Any) -> bool:
    if isinstance(source, pl.DataFrame):
        return True
    # a DataFrame, not a Series (which has to_dict too, and is one column)
    return type(source).__module__.split(".")[0] == "pandas" and hasattr(source, "columns")


def polars_from_pandas(frame: Any, name: str) -> pl.DataFrame:
    """A pandas DataFrame as a Polars one; what Polars or pyarrow cannot convert (a column name used twice, an
    object column mixing strings and numbers) is an :class:`InputError` naming ``name``, the column and the row."""
    frame = _with_named_index(frame)
    repeated = [str(column) for column in frame.columns[frame.columns.duplicated()]]
    if repeated:
        raise InputError(f"{name}: column {repeated[0]!r} appears twice; give each column its own name")
    try:
        return pl.from_pandas(frame)
    except Exception as exc:  # noqa: BLE001 - pyarrow and polars raise several types (ArrowTypeError, ...)
        raise InputError(f"{name}: {_unconvertible(frame, exc)}") from None


def _with_named_index(frame: Any) -> Any:
    """``frame`` with its named index as columns (``df.set_index("id")`` keeps its ids: Polars drops an index);
    an unnamed one (0, 1, ... or what a filter left) is a row number, not a field, and is dropped as before."""
    names = list(frame.index.names)
    columns = {str(column) for column in frame.columns}
    if all(n is not None for n in names) and not any(str(n) in columns for n in names):
        return frame.reset_index()
    return frame


def _unconvertible(frame: Any, exc: Exception) -> str:
    """Which column of ``frame`` Polars cannot convert, and why (for :func:`polars_from_pandas`)."""
    for column in frame.columns:
        try:
            pl.from_pandas(frame[[column]])
        except Exception:  # noqa: BLE001 - as above
            return f"column {str(column)!r} {_mixed_types(frame[column].tolist())}"
    return f"cannot be read as a table ({type(exc).__name__}: {exc})"


def _mixed_types(values: List[Any]) -> str:
    """``mixes types: row 3 holds a number (5) where row 0 holds a string``, from the first value whose kind
    differs from the first non-missing one."""
    first: Optional[Tuple[int, Any]] = None
    for row, value in enumerate(values):
        if value is None or type(value).__name__ == "NAType" or (isinstance(value, float) and value != value):
            continue  # missing (None, pd.NA, NaN): read as null
        if first is None:
            first = (row, value)
        elif _kind(value) != _kind(first[1]):
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            return (f"mixes types: row {row} holds {_kind(value)} ({shown}) where row {first[0]} holds "
                    f"{_kind(first[1])}")
    return "cannot be read as one type"


def _to_polars(source: Any, name: str) -> pl.DataFrame:
    if isinstance(source, pl.DataFrame):
        return source
    return polars_from_pandas(source, name)


def _memory_records(source: Any, name: str, problems: _Problems) -> List[Record]:
    if _is_dataframe(source):
        rows: Sequence[Any] = _to_polars(source, name).to_dicts()
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


def _label(source: Any, name: str) -> str:
    return str(source) if _is_path(source) else name
