"""trec_eval-compatible evaluation from Python.

``evaluate(qrels, run, measures=...)`` returns a Polars DataFrame with one row
per query (column ``query``) and one column per measure value, the numbers
trec_eval prints (same tie-breaking, same edge cases). Inputs may be file
paths, Polars / pandas / pyarrow tables, or the ``{query: {doc: value}}``
dictionaries that pytrec_eval and ranx use.
"""
from __future__ import annotations

import os
from itertools import chain
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ragmeter._trec_files import INT64, check_file_head
from ragmeter.errors import InputError

__all__ = ["evaluate", "known_measures"]

PathLike = Union[str, "os.PathLike[str]"]
DEFAULT_MEASURES = ("map", "recip_rank", "ndcg_cut.10", "P.5", "recall.10", "success.5")


def known_measures() -> list:
    from ragmeter import _core

    return list(_core.trec_known_measures())


def evaluate(
    qrels: Any,
    run: Any,
    measures: Union[str, Sequence[str]] = DEFAULT_MEASURES,
    *,
    per_query: bool = True,
    relevance_level: int = 1,
    max_docs: Optional[int] = None,
    complete: bool = False,
    judged_only: bool = False,
    num_docs_in_coll: int = 0,
    run_id: str = "run",
) -> Any:
    """Evaluate ``run`` against ``qrels`` with trec_eval 10's definitions.

    Each of ``qrels`` and ``run`` is a TREC file path, a Polars / pandas / pyarrow
    table (query, document and relevance or score columns; ``query_id``/``qid``,
    ``doc_id``/``docno`` and similar names are accepted, and ranx's frames: ``q_id``, ``doc_id``,
    ``score``, the grade in a qrels frame), the dict of dicts ``{query: {doc: value}}`` that pytrec_eval
    and ranx take, or ranx's ``Qrels`` and ``Run`` (read as their ``to_dict()``). A path and a table
    may be mixed; files are parsed in Rust. Errors name the file and line (a file beside a table or dict too: the
    line in the file, as when both are files), or the input (``qrels``, ``run``) and the 1-based row. Relevance
    grades are integers: in a table or a dict a whole-number float (``1.0``, as pandas and JSON give) is its
    integer and ``0.5`` is refused naming the row, never truncated; so in a qrels file (``1.0`` is read as 1, as
    trec_eval reads it; ``0.5`` stops naming the line). A grade above 1,000,000 is refused (measures count the judgements at each grade up to the highest).

    ``measures`` takes trec_eval's ``-m`` syntax (``"all_trec"``, ``"P.5,10"``,
    ``"ndcg.1=3,2=9"``), and pytrec_eval's names of a measure at a cut-off (``"P_5"``
    is ``"P.5"``). ``complete=True`` is ``-c``: qrels queries missing
    from the run count as empty rankings (otherwise they are an error). A query whose
    ranking is an empty dict (``{"q2": {}}``) is such a query, as a TREC file has no
    empty rankings: pass ``complete=True`` to count it.
    With ``per_query=False`` the result is one row, ``query == "all"``, with
    trec_eval's summary (means; sums for counts; geometric means for gm_*).

    Ids in files are bytes, as trec_eval reads them. When a file is not UTF-8 (Latin-1 ids), both files are read
    byte for byte (the UTF-8 one too, so the same bytes still match; ties go in ``strcmp`` order), and ids come
    back as text with one character per byte (Latin-1): a query ``caf`` + byte 0xE9 is ``"caf\xe9"`` in the
    ``query`` column, and ``query.encode("latin-1")`` gives its bytes. A note saying which file is not UTF-8 at
    which line is logged at INFO on the ``ragmeter.notes`` logger. A file given beside a table or dict is read
    the same way, its ids matched against the table's as those characters (a Shift-JIS file's ``東京`` is not a
    dict's ``"東京"``; a judged non-ASCII query then missing from the run is an error naming that file and saying
    to convert it to UTF-8). Errors quote the ids and fields of files read as bytes as those bytes: printable ASCII
    as it is, any other byte as ``\\xNN`` (a Shift-JIS query ``質問`` is ``\\x8e\\xbf\\x96\\xe2``).
    """
    import polars as pl

    from ragmeter import _core
    from ragmeter._args import check_arg

    measures = [measures] if isinstance(measures, str) else check_arg("measures", measures, "texts")
    measures = _in_trec_syntax(measures)
    # trec_eval's own ranges (a negative -M or -l is its business); the types are Python's, and the engine's
    # 64-bit integers (2**63 was an OverflowError from the binding)
    relevance_level = check_arg("relevance_level", relevance_level, "int")
    max_docs = check_arg("max_docs", max_docs, "int", optional=True)
    num_docs_in_coll = check_arg("num_docs_in_coll", num_docs_in_coll, "int")
    for name, value in (("relevance_level", relevance_level), ("max_docs", max_docs),
                        ("num_docs_in_coll", num_docs_in_coll)):
        if value is not None and not INT64[0] <= value <= INT64[1]:
            raise InputError(f"{name} must be a 64-bit integer (trec_eval's C long), got {value}")
    per_query, complete, judged_only = (check_arg(name, value, "bool") for name, value in
                                        (("per_query", per_query), ("complete", complete), ("judged_only", judged_only)))
    run_id = check_arg("run_id", run_id, "text")
    qrels, run = _ranx_as_dict(qrels), _ranx_as_dict(run)
    opts = _core.TrecOptions(relevance_level=relevance_level, max_docs=max_docs, complete=complete,
                             judged_only=judged_only, num_docs_in_coll=num_docs_in_coll)
    try:
        if _is_path(qrels) and _is_path(run):
            check_file_head(qrels)
            check_file_head(run)
            result = _core.trec_evaluate_files(os.fspath(qrels), os.fspath(run), measures, opts)
            if result["not_utf8"] is not None:
                path, line = result["not_utf8"]
                _note_bytes_read(path, line, (os.fspath(qrels), os.fspath(run)))
        else:
            *q, qrels_groups, qrels_file = _qrels_columns(qrels)
            *r, run_groups, run_file = _run_columns(run)
            # a file's errors name it and its lines, as when both inputs are files
            result = _core.trec_evaluate_columns(*q, *r, run_id, measures, opts,
                                                 qrels_groups=qrels_groups, run_groups=run_groups,
                                                 qrels_file=qrels_file, run_file=run_file)
    except InputError as exc:
        raise _in_python_terms(exc, {"qrels": qrels, "run": run}) from None
    return _frame(pl, result, per_query)


def _in_trec_syntax(measures: Sequence[str]) -> List[str]:
    """Each measure in trec_eval's ``-m`` syntax, pytrec_eval's spelling read (:func:`pytrec_eval_spelling`)."""
    known = set(known_measures())
    return [pytrec_eval_spelling(name, known) or name for name in measures]


def pytrec_eval_spelling(name: str, known: Iterable[str]) -> Optional[str]:
    """``name`` in trec_eval's ``-m`` syntax when it is pytrec_eval's spelling of a measure at its parameters, else
    None. pytrec_eval also takes the name of a result, ``P_5``, ``ndcg_cut_10``, ``iprec_at_recall_0.10`` (its users
    write ``{"P_5", "map"}``, and they are the columns of our result): a name whose measure is unknown but whose
    part before the last ``_`` is one, followed by a number, is that measure with the number as parameters
    (``P.5``). Known names are not: ``ndcg_cut.10`` is ndcg_cut, ``set_P`` is set_P."""
    known = set(known)
    base, _, params = name.rpartition("_")
    # parameters are numbers (cut-offs, recall points): 'map_foo' stays a name to refuse as it was written
    if name.split(".", 1)[0] not in known and base in known and params[:1] in set("0123456789."):
        return f"{base}.{params}"
    return None


def _in_python_terms(exc: InputError, inputs: Optional[Mapping[str, Any]] = None) -> InputError:
    """The engine's messages name the command line's flags; from Python, name the keyword argument. Its ``run:3:``
    and ``(first at line 2)`` count the entries of a ``{query: {doc: value}}`` dict across its queries: there, name
    the query and document instead (a table's are its 1-based rows)."""
    import re

    text = str(exc)
    where = re.match(r"(qrels|run):(\d+): ", text)
    source = (inputs or {}).get(where.group(1)) if where else None
    if where and isinstance(source, Mapping):
        text = f"{where.group(1)}: {_dict_entry(source, int(where.group(2)) - 1)}: {text[where.end():]}"
        text = re.sub(r"\(first at line (\d+)\)$", lambda m: f"(first at {_dict_entry(source, int(m.group(1)) - 1)})",
                      text)
    text = text.replace(_CLI_COMPLETE_HINT, "pass complete=True to")
    return exc if text == str(exc) else InputError(text)


def _dict_entry(x: Mapping, i: int) -> str:
    """``query 'q1', document 'd2'``: entry ``i`` (0-based, counted across the queries) of a dict of dicts."""
    rest = i
    for q, docs in x.items():
        if rest < len(docs):
            return f"query {q!r}, document {list(docs)[rest]!r}"
        rest -= len(docs)
    return f"entry {i + 1}"


_CLI_COMPLETE_HINT = "pass -c to"  # the engine's advice for a judged query the run lacks


def _frame(pl: Any, result: Dict[str, Any], per_query: bool) -> Any:
    names, kinds = result["names"], result["kinds"]
    if not per_query:
        row: Dict[str, Any] = {"query": ["all"]}
        for i, (name, kind) in enumerate(zip(names, kinds)):
            if kind == "runid":
                row[name] = [result["run_id"]]
            elif kind == "long":
                row[name] = [int(result["summary"][i])]
            elif kind != "relstring":
                row[name] = [float(result["summary"][i])]
        return pl.DataFrame(row)
    values = result["values"]
    cols: Dict[str, Any] = {"query": result["qids"]}
    for i, (name, kind) in enumerate(zip(names, kinds)):
        if kind in ("summary_only", "runid"):
            continue
        if kind == "relstring":
            cols[name] = result["relstrings"]
        elif kind == "long":
            cols[name] = values[:, i].astype("int64")
        else:
            cols[name] = values[:, i]
    cols["missing_from_run"] = result["missing"]
    return pl.DataFrame(cols)


def _note_bytes_read(path: str, line: int, files: Tuple[str, ...]) -> None:
    """Log (on :data:`ragmeter.errors.NOTES_LOGGER`, as every note on how an input was read) that ``files`` were
    read as bytes because ``path`` is not UTF-8 at ``line``."""
    import logging

    from ragmeter._trec_files import bytes_note
    from ragmeter.errors import NOTES_LOGGER

    logging.getLogger(NOTES_LOGGER).info("%s", bytes_note(path, line, files, python=True))


def _is_path(x: Any) -> bool:
    return isinstance(x, (str, os.PathLike))


def _table(x: Any, what: str, columns: Sequence[str]) -> Tuple[Any, str]:
    """A Polars DataFrame from a Polars/pandas/pyarrow table or a dict of dicts, with the name of the column its
    values (``columns[2]``) came from, for messages."""
    import polars as pl

    if isinstance(x, Mapping):
        rows = [(str(q), str(d), v) for q, docs in x.items() for d, v in _items(docs, what, q)]
        return pl.DataFrame(rows, schema=[columns[0], columns[1], columns[2]], orient="row"), columns[2]
    if isinstance(x, pl.DataFrame):
        df = x
    elif type(x).__module__.startswith("pandas"):
        df = pl.from_pandas(x)
    elif type(x).__module__.startswith("pyarrow"):
        df = pl.from_arrow(x)
    else:
        raise InputError(f"{what}: expected a file path, a dict of dicts, or a Polars/pandas/pyarrow table, got {type(x).__name__}")
    aliases = {columns[0]: ("query_id", "qid", "query", "q_id"), columns[1]: ("doc_id", "docno", "doc", "document"),
               # ranx's Qrels frame names the grade "score" (Qrels.from_df's score_col): last, after the grade names
               columns[2]: (("relevance", "rel", "grade", "label", "score") if columns[2] == "relevance"
                            else ("score", "sim"))}
    picked = {}
    for want, options in aliases.items():
        found = next((c for c in options if c in df.columns), None)
        if found is None:
            raise InputError(f"{what}: missing column {want!r} (accepted names: {', '.join(options)}); columns are {df.columns}")
        picked[want] = found
    for found in picked.values():  # a null id would cross as "" (a document or query of its own), a null grade fail
        if df[found].null_count():
            row = int(df[found].is_null().arg_max() or 0) + 1
            raise InputError(f"{what}: row {row}: {found} is missing (null); every row needs a query id, a document "
                             f"id and a {columns[2]}")
    return df.select([pl.col(v).alias(k) for k, v in picked.items()]), picked[columns[2]]


def _items(docs: Any, what: str, q: Any) -> Iterable:
    if not isinstance(docs, Mapping):
        raise InputError(f"{what}: query {q!r}: expected a mapping of document -> value, got {type(docs).__name__}")
    return docs.items()


def _columns(source: Any, what: str, value: str, dtype_name: str) -> tuple:
    """(query column, document column, value array, group offsets or None, file facts or None) of qrels or a run,
    for the Rust boundary. The facts of a file (its path, the line of each row, its first line not UTF-8 or None:
    a file that is not UTF-8 is read as bytes) are what its errors name."""
    import polars as pl

    from ragmeter._columns import string_column

    if _is_path(source):  # mixed inputs (one path, one table): the file is parsed in Rust
        from ragmeter import _core

        check_file_head(source)
        read = _core.trec_read_qrels if what == "qrels" else _core.trec_read_run
        *columns, facts = read(os.fspath(source))
        not_utf8_line = facts[2]
        if not_utf8_line is not None:
            _note_bytes_read(os.fspath(source), not_utf8_line, (os.fspath(source),))
        return (*columns, facts)
    if isinstance(source, Mapping):
        return _dict_columns(source, what, dtype_name)
    df, found = _table(source, what, ("query", "doc", value))
    column = df[value]
    value = value if found == value else f"{value} (column {found!r})"  # 'score' read as the grade: say so
    if dtype_name == "integers" and column.dtype.is_float():  # a cast would truncate 0.5 to 0
        values = _whole_numbers(column.to_numpy(), f"{what}: {value} must be integers", lambda i: f"row {i + 1}")
        return (string_column(df["query"].cast(pl.Utf8)), string_column(df["doc"].cast(pl.Utf8)), values, None, None)
    dtype = pl.Int64 if dtype_name == "integers" else pl.Float64
    try:
        values = column.cast(dtype, strict=True).to_numpy()
    except Exception as exc:
        raise InputError(f"{what}: {value} must be {dtype_name} ({exc.__class__.__name__})") from None
    return (string_column(df["query"].cast(pl.Utf8)), string_column(df["doc"].cast(pl.Utf8)), values, None, None)


def _ranx_as_dict(source: Any) -> Any:
    """A ranx ``Qrels`` or ``Run`` as its ``{query: {doc: value}}`` dict (what its users hold); anything else as
    it is. Known by its module, so that ranx need not be imported."""
    if type(source).__module__.startswith("ranx.") and type(source).__name__ in ("Qrels", "Run"):
        return source.to_dict()
    return source


def _whole_numbers(values: Any, problem: str, where: Any) -> Any:
    """Relevance grades as int64: a whole-number float (1.0, as pandas, JSON and ranx give) is its integer; any
    other value is refused naming where it is (``where(i)``), never truncated (0.5 would become "not relevant")."""
    import numpy as np

    bad = ~np.isfinite(values) | (values != np.trunc(values))
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"{problem}: {where(i)}: {float(values[i])!r} is not a whole number")
    _in_int64(values, problem, where)
    return values.astype(np.int64)


def _in_int64(values: Any, problem: str, where: Any) -> None:
    """An ``InputError`` naming the first grade beyond a 64-bit integer: the cast would wrap it round (1e19 and
    2**63 + 1 became negative grades, "unjudged")."""
    import numpy as np

    big = (values >= 2.0 ** 63) | (values < -2.0 ** 63) if values.dtype.kind == "f" else values > np.iinfo(np.int64).max
    if big.any():
        i = int(np.argmax(big))
        raise InputError(f"{problem}: {where(i)}: {values[i].item()!r} is out of range (grades are 64-bit integers)")


def _dict_columns(x: Mapping, what: str, dtype_name: str) -> tuple:
    """Columns straight from ``{query: {doc: value}}``: one query id per query with
    the offsets of its rows (no per-row tuples, no per-row query ids)."""
    import numpy as np

    inners = list(x.values())
    for q, inner in zip(x, inners):
        if type(inner) is not dict:  # the common case skips the slower ABC check
            _items(inner, what, q)
    counts = np.fromiter(map(len, inners), dtype=np.int64, count=len(inners))
    groups = np.zeros(len(inners) + 1, dtype=np.int64)
    np.cumsum(counts, out=groups[1:])
    docs = list(chain.from_iterable(inners))
    values = chain.from_iterable(inner.values() for inner in inners)
    try:
        if dtype_name == "integers":
            arr = np.asarray(list(values))
            if arr.size and arr.dtype.kind not in "iubf":
                raise TypeError
        else:
            arr = np.fromiter(values, dtype=np.float64, count=len(docs))
    except (TypeError, ValueError):
        raise InputError(f"{what}: values must be {dtype_name}") from None
    if dtype_name == "integers":
        where = lambda i: _dict_entry(x, i)  # noqa: E731
        if arr.dtype.kind == "u":
            _in_int64(arr, f"{what}: values must be integers", where)
        arr = (_whole_numbers(arr, f"{what}: values must be integers", where)
               if arr.dtype.kind == "f" else arr.astype(np.int64))
    return (_text_column([str(q) for q in x]), _text_column(docs), arr, groups, None)


def _text_column(items: List[Any]) -> tuple:
    """A string column of ids (non-``str`` ids as their ``str()``, as pytrec_eval's users expect)."""
    from ragmeter._columns import ascii_list_column, string_column

    column = ascii_list_column(items)
    if column is not None:
        return column
    import pyarrow as pa

    try:
        return string_column(pa.array(items, pa.large_string()))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return string_column(pa.array([str(d) for d in items], pa.large_string()))


def _qrels_columns(qrels: Any) -> tuple:
    return _columns(qrels, "qrels", "relevance", "integers")


def _run_columns(run: Any) -> tuple:
    return _columns(run, "run", "score", "numbers")
