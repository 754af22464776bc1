"""Loading a golden set (:func:`load_golden`) and reusing its load within one command."""
from __future__ import annotations

import contextlib
import contextvars
import json
import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import polars as pl

from ragmeter import _sniff
from ragmeter._parquet_ahead import is_parquet as _is_parquet
from ragmeter.dataset._fields import (
    _check_duplicates,
    _check_field_present,
    _check_not_swapped,
    _check_not_wrapped,
    _id,
    _ids_from_lines,
    _line_id,
    _opt_str,
    _pick,
    _str_list,
)
from ragmeter.dataset._names import (
    GOLDEN_SCHEMA,
    Source,
    UNCATEGORISED,
    _GOLDEN_ALIASES,
    _ID_NAMES,
    _QUESTION_NAMES,
    _RETRIEVED_NAMES,
)
from ragmeter.dataset._problems import _Problems, _kind
from ragmeter.dataset._records import (
    _file_records,
    _is_path,
    _label,
    _memory_records,
    _parquet_records,
    _read_bytes,
    _utf8_payload,
    _without_surrogates,
    raw_records,
)


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
    category, src = _name_or_none(category), _name_or_none(src)
    return (case_id, question, files, evidence, reference, category if category else default_category(case_id), src, tags, labeled)


def _name_or_none(value: Optional[str]) -> Optional[str]:
    """A category's or source's name without the spaces around it (' fact ' is 'fact'); None when blank."""
    return (value.strip() or None) if value is not None else None


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

    def name_column(n: str) -> pl.Expr:  # as _name_or_none: stripped, null when blank
        stripped = column(n, pl.String).str.strip_chars(_PY_WHITESPACE)
        return pl.when(stripped != "").then(stripped)

    empty = pl.lit([], dtype=pl.List(pl.String))
    out = df.select(
        pl.col("id"), pl.col("question"),
        pick("expected_files", pl.List(pl.String)).fill_null(empty).alias("expected_files"),
        pick("expected_evidence", pl.List(pl.String)).fill_null(empty).alias("expected_evidence"),
        pick("reference_answer", pl.String).alias("reference_answer"),
        pl.when(name_column("category").is_not_null())
        .then(name_column("category"))
        .otherwise(pl.col("id").str.splitn("-", 2).struct.field("field_0")).alias("category"),
        name_column("source").alias("source"),
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
        category = _name_or_none(_opt_str(rec.get("category"), "category", where, problems))
        src = _name_or_none(_opt_str(rec.get("source"), "source", where, problems))
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
