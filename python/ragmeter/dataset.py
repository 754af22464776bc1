"""Loading golden sets and retrieval runs.

Golden set (JSONL, one case per line; blank lines and lines starting with
``#`` or ``//`` are skipped)::

    {"id": "fact-04-frontend-stack", "question": "...",
     "expectedFileNames": ["architecture.md"], "expectedEvidence": ["React 18"],
     "referenceAnswer": "...", "category": "fact", "source": "...", "tags": ["..."]}

``expected_files``, ``expected_evidence`` and ``reference_answer`` are accepted
too. ``category`` defaults to the id's prefix before the first ``-``.

Run (JSONL or Parquet)::

    {"id": "fact-04-frontend-stack",
     "retrieved": [{"file": "architecture.md", "chunk_id": "c12", "text": "...", "score": 0.83}],
     "contexts": ["..."], "answer": "...", "retrieval_mode": "hybrid",
     "latency_ms": 412, "usage": {"prompt_tokens": 1200, "completion_tokens": 80}, "cost": 0.0012}

Every problem in an input is collected and reported at once, each as
``file:line: what is wrong`` (``name[row]`` for in-memory rows, ``file: row N``
for Parquet), in one :class:`ragmeter.errors.InputError`.
"""
from __future__ import annotations

import json
import math
import re
import os
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import polars as pl

from ragmeter.errors import InputError

__all__ = [
    "load_golden",
    "load_run",
    "check_run_against_golden",
    "GOLDEN_SCHEMA",
    "RUN_SCHEMA",
    "RETRIEVED_DTYPE",
    "MAX_REPORTED",
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
    "line": pl.Int64,
}

# Accepted spellings, canonical name first.
_GOLDEN_ALIASES = {
    "expected_files": ("expectedFileNames", "expected_files", "expected_file_names", "expectedFiles"),
    "expected_evidence": ("expectedEvidence", "expected_evidence"),
    "reference_answer": ("referenceAnswer", "reference_answer"),
}
_RUN_ALIASES = {
    "retrieval_mode": ("retrieval_mode", "retrievalMode"),
    "latency_ms": ("latency_ms", "latencyMs"),
}
_CHUNK_ALIASES = {
    "file": ("file", "fileName", "file_name"),
    "chunk_id": ("chunk_id", "chunkId"),
    "text": ("text",),
    "score": ("score",),
}

Source = Union[str, "os.PathLike[str]", Sequence[Dict[str, Any]], Any]


# ---------------------------------------------------------------------------
# Problem collection
# ---------------------------------------------------------------------------


class _Problems:
    """Collects ``where: message`` lines and raises them as one InputError."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.items: List[str] = []
        self._keys: List[float] = []

    def add(self, where: str, message: str) -> None:
        """Record a problem; the report is ordered by the line/row number in ``where``."""
        self.items.append(f"{where}: {message}")
        m = _WHERE_NUMBER.search(where)
        self._keys.append(float(m.group(1)) if m else -1.0)

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self) -> None:
        if not self.items:
            return
        n = len(self.items)
        order = sorted(range(n), key=lambda i: self._keys[i])  # stable: same line keeps its order
        shown = [self.items[i] for i in order[:MAX_REPORTED]]
        lines = [f"{n} problem{'s' if n != 1 else ''} in {self.label}:"]
        lines += [f"  {item}" for item in shown]
        if n > MAX_REPORTED:
            lines.append(f"  ... and {n - MAX_REPORTED} more")
        raise InputError("\n".join(lines))


_WHERE_NUMBER = re.compile(r"(?::|\[|row )(\d+)\]?$")


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


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(f"{path}:{line}: not valid UTF-8 (byte {exc.start})") from None


def _jsonl_records(path: Path, problems: _Problems) -> Iterator[Tuple[str, int, Dict[str, Any]]]:
    """Yield ``(where, line, record)`` for each JSON object line; problems collected."""
    text = _read_text(path)
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped.startswith("//"):
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(stripped)
        except json.JSONDecodeError as exc:
            problems.add(where, f"invalid JSON: {exc.msg} (column {exc.colno})")
            continue
        if not isinstance(record, dict):
            problems.add(where, f"expected a JSON object, got {_kind(record)}")
            continue
        yield where, number, record


def _is_dataframe(source: Any) -> bool:
    if isinstance(source, pl.DataFrame):
        return True
    return type(source).__module__.split(".")[0] == "pandas" and hasattr(source, "to_dict")


def _to_polars(source: Any) -> pl.DataFrame:
    if isinstance(source, pl.DataFrame):
        return source
    return pl.from_pandas(source)


def _memory_records(source: Any, name: str, problems: _Problems) -> Iterator[Tuple[str, Optional[int], Dict[str, Any]]]:
    if _is_dataframe(source):
        rows: Sequence[Any] = _to_polars(source).to_dicts()
    elif isinstance(source, (list, tuple)):
        rows = source
    else:
        raise InputError(f"{name}: expected a path, a list of dicts or a DataFrame, got {type(source).__name__}")
    for i, record in enumerate(rows):
        where = f"{name}[{i}]"
        if not isinstance(record, dict):
            problems.add(where, f"expected an object (dict), got {_kind(record)}")
            continue
        yield where, None, record


# ---------------------------------------------------------------------------
# Field helpers
# ---------------------------------------------------------------------------


def _pick(record: Dict[str, Any], names: Sequence[str], where: str, problems: _Problems) -> Any:
    """Value of the first spelling present; two different spellings with different values is a problem."""
    present = [n for n in names if record.get(n) is not None]  # null counts as absent (DataFrame rows)
    if len(present) > 1 and any(record[n] != record[present[0]] for n in present[1:]):
        problems.add(where, f"both {present[0]!r} and {present[1]!r} given with different values")
    return record[present[0]] if present else None


def _id(record: Dict[str, Any], where: str, problems: _Problems) -> Optional[str]:
    if "id" not in record or record["id"] is None:
        problems.add(where, "missing 'id'")
        return None
    value = record["id"]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        problems.add(where, f"'id' must be a string, got {_kind(value)}")
        return None
    value = str(value)
    if not value.strip():
        problems.add(where, "'id' is empty")
        return None
    return value


def _opt_str(value: Any, field: str, where: str, problems: _Problems) -> Optional[str]:
    if value is None or isinstance(value, str):
        return value
    problems.add(where, f"{field!r} must be a string, got {_kind(value)}")
    return None


def _str_list(value: Any, field: str, where: str, problems: _Problems) -> List[str]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        problems.add(where, f"{field!r} must be a list of strings, got {_kind(value)}")
        return []
    out: List[str] = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            problems.add(where, f"{field}[{i}] must be a string, got {_kind(item)}")
        else:
            out.append(item)
    return out


def _opt_number(value: Any, field: str, where: str, problems: _Problems) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        problems.add(where, f"{field!r} must be a number, got {_kind(value)}")
        return None
    if isinstance(value, float) and not math.isfinite(value):
        problems.add(where, f"{field!r} must be a finite number, got {value}")
        return None
    return float(value)


def _opt_int(value: Any, field: str, where: str, problems: _Problems) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        problems.add(where, f"{field!r} must be an integer, got {_kind(value)}")
        return None
    return value


def _check_duplicates(ids: List[Tuple[Optional[str], str]], problems: _Problems) -> None:
    first: Dict[str, str] = {}
    for case_id, where in ids:
        if case_id is None:
            continue
        if case_id in first:
            problems.add(where, f"duplicate id {case_id!r} (first at {first[case_id]})")
        else:
            first[case_id] = where


def _label(source: Any, name: str) -> str:
    return str(source) if _is_path(source) else name


# ---------------------------------------------------------------------------
# Golden set
# ---------------------------------------------------------------------------


def default_category(case_id: str) -> str:
    """The id's prefix before the first ``-`` (the whole id when it has none)."""
    return case_id.split("-", 1)[0]


_GOLDEN_FAST_STR = ("reference_answer", "category", "source")


def _fast_golden(rec: Dict[str, Any]) -> Optional[Tuple[Any, ...]]:
    """The row of a well-formed golden record, or None to take the validating path.

    Accepts only what :func:`load_golden`'s checks accept and returns the same
    values: string id and question (non-blank), at most one spelling of each
    aliased field, lists of plain strings, optional strings. Anything else
    (including every record with a problem) returns None, and the full
    validation then reports it with its file and line.
    """
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
        "labeled": pa.bool_(), "line": pa.int64(),
    }
    table = pa.table({k: pa.array(rows[k], type=arrow[k]) for k in GOLDEN_SCHEMA})
    return pl.from_arrow(table).cast(GOLDEN_SCHEMA)  # type: ignore[union-attr]


#: Every character Python's ``str.strip()`` removes (for column-wise checks with its semantics).
_PY_WHITESPACE = "".join(c for c in map(chr, range(0x110000)) if c.isspace())
#: Line breaks of ``str.splitlines`` other than LF (UTF-8): files with any take the per-record path.
_OTHER_LINE_BREAKS = (b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\xc2\x85", b"\xe2\x80\xa8", b"\xe2\x80\xa9")
#: A line that may be blank or a comment starts with one of these (checked after each LF).
_MAYBE_SKIPPED_LINE = (b"\n", b"#", b"/", b" ", b"\t")


def _golden_jsonl_columnar(path: Path) -> Optional[pl.DataFrame]:
    """Read a well-formed golden JSONL file with Arrow's JSON reader and check it column-wise.

    Returns None whenever anything is unusual (unreadable or invalid UTF-8, a
    parse error, an unexpected type, a null where a value is required, two
    spellings of a field in one record, a duplicate id, an integer id, line
    breaks other than LF...): the caller then takes the per-record path, which
    reports every problem with its file and line. For the files it accepts,
    the result equals that path's.
    """
    import io

    import pyarrow as pa
    import pyarrow.json as pj

    try:
        raw = path.read_bytes()
        if raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        raw.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if any(b in raw for b in _OTHER_LINE_BREAKS):
        return None
    body = raw[:-1] if raw.endswith(b"\n") else raw
    if not body:
        return None
    if body[:1] in _MAYBE_SKIPPED_LINE or any(b"\n" + b in body for b in _MAYBE_SKIPPED_LINE):
        lines = body.split(b"\n")
        keep = [i for i, line in enumerate(lines) if (t := line.decode("utf-8").strip()) and not t.startswith("#") and not t.startswith("//")]
        if not keep:
            return None
        payload = b"\n".join(lines[i] for i in keep)
        line_numbers = pl.Series("line", keep, dtype=pl.Int64) + 1
    else:
        payload = body
        line_numbers = pl.int_range(1, body.count(b"\n") + 2, dtype=pl.Int64, eager=True).alias("line")
    try:
        table = pj.read_json(io.BytesIO(payload))
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

    out = out.with_columns((any_text("expected_files") | any_text("expected_evidence")).alias("labeled"), line_numbers)
    return out.select([pl.col(n).cast(t) for n, t in GOLDEN_SCHEMA.items()])


def load_golden(source: Source, *, name: str = "golden") -> pl.DataFrame:
    """Load a golden set from a JSONL path, a list of dicts or a Polars/pandas DataFrame.

    Returns one row per case with columns ``id``, ``question``,
    ``expected_files`` (list[str]), ``expected_evidence`` (list[str]),
    ``reference_answer``, ``category``, ``source``, ``tags`` (list[str]),
    ``labeled`` (has expected files or evidence) and ``line`` (source line,
    null for in-memory input). Raises :class:`InputError` listing every problem.
    """
    problems = _Problems(_label(source, name))
    if _is_path(source):
        columnar = _golden_jsonl_columnar(Path(source))
        if columnar is not None:
            return columnar
        records: Iterator[Tuple[str, Optional[int], Dict[str, Any]]] = _jsonl_records(Path(source), problems)
    else:
        records = _memory_records(source, name, problems)

    rows: Dict[str, List[Any]] = {k: [] for k in GOLDEN_SCHEMA}
    fast_columns = [rows[k] for k in ("id", "question", "expected_files", "expected_evidence", "reference_answer", "category", "source", "tags", "labeled")]
    seen: List[Tuple[Optional[str], str]] = []
    for where, line, rec in records:
        fast = _fast_golden(rec)
        if fast is not None:
            for column, value in zip(fast_columns, fast):
                column.append(value)
            rows["line"].append(line)
            seen.append((fast[0], where))
            continue
        n_before = len(problems.items)
        case_id = _id(rec, where, problems)
        question = rec.get("question")
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
        rows["category"].append(category if category else default_category(case_id))
        rows["source"].append(src)
        rows["tags"].append(tags)
        rows["labeled"].append(any(f.strip() for f in files) or any(e.strip() for e in evidence))
        rows["line"].append(line)
    _check_duplicates(seen, problems)
    if _is_path(source) and not seen and not problems:
        problems.add(str(source), "no cases (the file is empty or has only comments)")
    problems.raise_if_any()
    return _golden_frame(rows)


# ---------------------------------------------------------------------------
# Run
# ---------------------------------------------------------------------------


def _chunk(item: Any, i: int, where: str, problems: _Problems) -> Optional[Dict[str, Any]]:
    field = f"retrieved[{i}]"
    if not isinstance(item, dict):
        problems.add(where, f"{field} must be an object with file, chunk_id, text, score; got {_kind(item)}")
        return None
    n_before = len(problems.items)
    file = _pick(item, _CHUNK_ALIASES["file"], where, problems)
    text = _pick(item, _CHUNK_ALIASES["text"], where, problems)
    chunk_id = _pick(item, _CHUNK_ALIASES["chunk_id"], where, problems)
    score = _pick(item, _CHUNK_ALIASES["score"], where, problems)
    if not isinstance(file, str):
        problems.add(where, f"{field}.file must be a string, got {_kind(file)}" if file is not None else f"{field}: missing 'file'")
    if not isinstance(text, str):
        problems.add(where, f"{field}.text must be a string, got {_kind(text)}" if text is not None else f"{field}: missing 'text'")
    if chunk_id is not None:
        if isinstance(chunk_id, bool) or not isinstance(chunk_id, (str, int)):
            problems.add(where, f"{field}.chunk_id must be a string, got {_kind(chunk_id)}")
        else:
            chunk_id = str(chunk_id)
    score = _opt_number(score, f"{field}.score", where, problems)
    if len(problems.items) > n_before:
        return None
    return {"file": file, "chunk_id": chunk_id, "text": text, "score": score}


def _run_from_records(records: Iterator[Tuple[str, Optional[int], Dict[str, Any]]], problems: _Problems) -> Tuple[pl.DataFrame, List[Tuple[Optional[str], str]]]:
    rows: Dict[str, List[Any]] = {k: [] for k in RUN_SCHEMA}
    seen: List[Tuple[Optional[str], str]] = []
    for where, line, rec in records:
        n_before = len(problems.items)
        case_id = _id(rec, where, problems)
        if "retrieved" not in rec:
            problems.add(where, "missing 'retrieved' (use [] for an empty retrieval)")
            raw: Any = []
        else:
            raw = rec["retrieved"]
        retrieved: List[Dict[str, Any]] = []
        if raw is None:
            raw = []
        if not isinstance(raw, (list, tuple)):
            problems.add(where, f"'retrieved' must be a list of chunks, got {_kind(raw)}")
        else:
            for i, item in enumerate(raw):
                chunk = _chunk(item, i, where, problems)
                if chunk is not None:
                    retrieved.append(chunk)
        if rec.get("contexts") is None:
            contexts = [c["text"] for c in retrieved]
        else:
            contexts = _str_list(rec.get("contexts"), "contexts", where, problems)
        answer = _opt_str(rec.get("answer"), "answer", where, problems)
        mode = _opt_str(_pick(rec, _RUN_ALIASES["retrieval_mode"], where, problems), "retrieval_mode", where, problems)
        latency = _opt_number(_pick(rec, _RUN_ALIASES["latency_ms"], where, problems), "latency_ms", where, problems)
        usage = rec.get("usage")
        if usage is None:
            usage = {k: rec.get(k) for k in ("prompt_tokens", "completion_tokens")}
        elif not isinstance(usage, dict):
            problems.add(where, f"'usage' must be an object with prompt_tokens and completion_tokens, got {_kind(usage)}")
            usage = {}
        prompt = _opt_int(usage.get("prompt_tokens"), "usage.prompt_tokens", where, problems)
        completion = _opt_int(usage.get("completion_tokens"), "usage.completion_tokens", where, problems)
        cost = _opt_number(rec.get("cost"), "cost", where, problems)
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
        rows["line"].append(line)
    return pl.DataFrame(rows, schema=RUN_SCHEMA), seen


def _numeric(dtype: Any) -> bool:
    return dtype.is_numeric() and dtype != pl.Boolean


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
    where = str(path)
    schema = df.schema

    def at_rows(rows: List[int], message: str) -> None:
        for r in rows:
            problems.add(f"{where}: row {r + 1}", message)

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
    for canonical, names in _RUN_ALIASES.items():
        for alt in names[1:]:
            if alt in df.schema and canonical not in df.schema:
                df = df.rename({alt: canonical})
    schema = df.schema

    exprs: List[pl.Expr] = []
    if "id" not in schema:
        problems.add(where, "missing column 'id'")
    elif schema["id"] == pl.String or schema["id"].is_integer():
        exprs.append(pl.col("id").cast(pl.String))
    else:
        problems.add(where, f"column 'id' has type {schema['id']}, expected string")

    retrieved_ok = False
    if "retrieved" not in schema:
        problems.add(where, "missing column 'retrieved'")
    else:
        dtype = schema["retrieved"]
        inner = dtype.inner if isinstance(dtype, (pl.List, pl.Array)) else None
        if not isinstance(inner, pl.Struct):
            problems.add(where, f"column 'retrieved' has type {dtype}, expected list of struct{{file, chunk_id, text, score}}")
        else:
            fields = {f.name: f.dtype for f in inner.fields}
            parts: List[pl.Expr] = []
            for name, want in (("file", pl.String), ("chunk_id", pl.String), ("text", pl.String), ("score", pl.Float64)):
                got = fields.get(name)
                if got is None:
                    if name in ("file", "text"):
                        problems.add(where, f"column 'retrieved' has no field {name!r}")
                    parts.append(pl.lit(None, dtype=want).alias(name))
                elif got == want or (name == "chunk_id" and got.is_integer()) or (name == "score" and _numeric(got)) or got == pl.Null:
                    parts.append(pl.element().struct.field(name).cast(want).alias(name))
                else:
                    problems.add(where, f"field retrieved.{name} has type {got}, expected {want}")
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
    for name in ("answer", "retrieval_mode"):
        if name in schema and schema[name] not in (pl.String, pl.Null):
            problems.add(where, f"column {name!r} has type {schema[name]}, expected string")
    for name in ("latency_ms", "cost", "prompt_tokens", "completion_tokens"):
        if name in schema and not (_numeric(schema[name]) or schema[name] == pl.Null):
            problems.add(where, f"column {name!r} has type {schema[name]}, expected a number")
    problems.raise_if_any()

    df = df.with_columns(exprs)
    # Value-level checks, vectorised.
    at_rows(_rows_where(df, pl.col("id").is_null() | (pl.col("id").str.strip_chars() == "")), "missing 'id'")
    if retrieved_ok:
        df = df.with_columns(pl.col("retrieved").fill_null(pl.lit([], dtype=RETRIEVED_DTYPE)))
        for name in ("file", "text"):
            bad = pl.col("retrieved").list.eval(pl.element().struct.field(name).is_null()).list.any()
            at_rows(_rows_where(df, bad), f"a retrieved chunk has no {name!r}")
    dup = _rows_where(df, pl.col("id").is_duplicated() & pl.col("id").is_not_null())
    if dup:
        first: Dict[str, int] = {}
        ids = df["id"].gather(dup).to_list()
        for r, case_id in zip(dup, ids):
            if case_id in first:
                problems.add(f"{where}: row {r + 1}", f"duplicate id {case_id!r} (first at row {first[case_id] + 1})")
            else:
                first[case_id] = r
    problems.raise_if_any()

    n = df.height
    out = []
    for name, dtype in RUN_SCHEMA.items():
        if name == "line":
            out.append(pl.int_range(1, n + 1, dtype=pl.Int64).alias("line"))
        elif name == "contexts" and "contexts" not in df.schema:
            out.append(pl.col("retrieved").list.eval(pl.element().struct.field("text")).alias("contexts"))
        elif name in df.schema:
            out.append(pl.col(name).cast(dtype))
        else:
            out.append(pl.lit(None, dtype=dtype).alias(name))
    df = df.select(out)
    # Missing contexts in some rows default to that row's retrieved texts.
    return df.with_columns(
        pl.when(pl.col("contexts").is_null())
        .then(pl.col("retrieved").list.eval(pl.element().struct.field("text")))
        .otherwise(pl.col("contexts"))
        .alias("contexts")
    ) if df["contexts"].null_count() else df


def load_run(source: Source, *, name: str = "run") -> pl.DataFrame:
    """Load a retrieval run from a JSONL or Parquet path, a list of dicts or a DataFrame.

    Returns one row per case with columns ``id``, ``retrieved``
    (list[struct{file, chunk_id, text, score}], in rank order), ``contexts``
    (list[str], defaults to the retrieved texts), ``answer``,
    ``retrieval_mode``, ``latency_ms``, ``prompt_tokens``,
    ``completion_tokens``, ``cost`` and ``line`` (JSONL line, Parquet row
    number, null for in-memory input). A Parquet file is validated column by
    column. Raises :class:`InputError` listing every problem.
    """
    problems = _Problems(_label(source, name))
    if _is_path(source):
        path = Path(source)
        if path.suffix.lower() in (".parquet", ".pq"):
            return _run_from_parquet(path, problems)
        df, seen = _run_from_records(_jsonl_records(path, problems), problems)
        if not seen and not problems:
            problems.add(str(source), "no cases (the file is empty or has only comments)")
    else:
        df, seen = _run_from_records(_memory_records(source, name, problems), problems)
    _check_duplicates(seen, problems)
    problems.raise_if_any()
    return df


def check_run_against_golden(golden: pl.DataFrame, run: pl.DataFrame, *, run_source: str = "run") -> List[str]:
    """Raise :class:`InputError` listing every run id absent from the golden set.

    ``run_source`` names the run in messages (``run.jsonl:12: id 'x' is not in
    the golden set``). Returns the golden ids missing from the run: not an input
    error but a failure of the run, which the scorer counts as empty retrievals
    and warns about.
    """
    problems = _Problems(run_source)
    extra = run.filter(~pl.col("id").is_in(golden["id"].implode()))
    for case_id, line in zip(extra["id"].to_list(), extra["line"].to_list() if "line" in extra.columns else [None] * extra.height):
        where = f"{run_source}:{line}" if line is not None else run_source
        problems.add(where, f"id {case_id!r} is not in the golden set")
    problems.raise_if_any()
    run_ids = set(run["id"].to_list())
    return [i for i in golden["id"].to_list() if i not in run_ids]


# Data from ragas, DeepEval and Hugging Face datasets (see ragmeter.ecosystem): (golden, run) record lists.
from ragmeter.ecosystem import from_deepeval, from_hf, from_ragas  # noqa: E402,F401
