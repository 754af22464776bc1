"""Loading a run (:func:`load_run`), a Parquet run a slice at a time (:class:`ParquetRun`), and checking a
run against its golden set."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import polars as pl

from ragmeter import _dictionary_texts, _parquet_ahead, _sniff
from ragmeter._parquet_ahead import is_parquet as _is_parquet
from ragmeter.dataset._fields import (
    _check_duplicates,
    _check_field_present,
    _check_not_swapped,
    _check_not_wrapped,
    _id,
    _ids_from_lines,
    _line_id,
    _note,
    _opt_int,
    _opt_number,
    _opt_str,
    _pick,
    _str_list,
    refuse_collected_repeats,
)
from ragmeter.dataset._names import (
    RETRIEVED_DTYPE,
    RUN_SCHEMA,
    Source,
    _ANSWER_NAMES,
    _CHUNK_ALIASES,
    _GOLDEN_ALIASES,
    _ID_NAMES,
    _QUESTION_NAMES,
    _RETRIEVED_NAMES,
    _RUN_ALIASES,
)
from ragmeter.dataset._problems import _GROUP_SHOWN, _Problems, _kind
from ragmeter.dataset._records import Record, _is_path, _label, _records, _without_surrogates
from ragmeter.errors import InputError


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
        retrieved_null = raw is None
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
        rows["retrieved_null"].append(retrieved_null)
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
        raise _sniff.parquet_read_error(path, exc) from None
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
        elif schema["usage"] != pl.Null:  # null in every row (every case failed when collected): no usage
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
        # null in every row, or [] (and null) in every row: a Parquet writer keeps no element type for it
        if dtype == pl.Null or dtype == pl.List(pl.Null):
            df = df.with_columns(pl.col("retrieved").cast(RETRIEVED_DTYPE))
            dtype = RETRIEVED_DTYPE
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
        was_null = pl.col("retrieved").is_null()
        if df.schema.get("retrieved_null") == pl.Boolean:  # a frame load_run gave: its lists are filled
            was_null = was_null | pl.col("retrieved_null").fill_null(False)
        df = df.with_columns(was_null.alias("retrieved_null"),
                             pl.col("retrieved").fill_null(pl.lit([], dtype=RETRIEVED_DTYPE)))
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
            raise _sniff.parquet_read_error(path, exc) from None
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
            raise _sniff.parquet_read_error(self.path, exc) from None

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
    # an in-memory golden set is named by its argument, "golden": "the golden set golden" said it twice
    named = "" if golden_source == "golden" else f" {golden_source}"
    return (f"{run_source}: {len(ids)} ids are not in the golden set{named} ({n_golden} cases): "
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
