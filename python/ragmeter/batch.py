"""Retrieval scoring one Arrow batch at a time, for engines that split the run (Ray Data, Spark).

``score_batch(batch, golden, k=5)`` scores the run rows of one batch against their golden cases and returns
the per-case columns of :func:`ragmeter.score` (``CASE_COLUMNS`` plus ``missing_from_run`` and
``n_expected_files``), ``n_retrieved_with_file`` and ``k`` (the cut-off, which the reductions check), as a
``pyarrow.Table``. It is a plain module-level
function of its arguments (picklable, no state kept between calls); the matching and rank metrics run in the Rust core, which releases the GIL.
Per-case values depend only on the case's own golden and run rows, but for one decision ragmeter.score takes
over the whole run: when no retrieved item of the run gives a file, the file-level metrics of the cases expecting
files are unknown, empty retrievals included. A batch decides it from its own items, so :func:`reduce_batches`
scores the empty retrievals again with the run's decision (from ``n_retrieved_with_file``, dropped from its
table), and :func:`combine` refuses a batch that decided otherwise.

:func:`reduce_batches` collects the per-case tables and aggregates them once, as :func:`ragmeter.score` does
(the same numbers, bit for bit). Where collecting is too much, :func:`partial_sums` and :func:`combine`
reduce sums and counts per batch, never means of means; their sums are correctly rounded (``math.fsum``), so
the batch order cannot change them, and they agree with the collected aggregates to the last bit or two when
every golden case is in a batch (``combine(..., golden=...)`` refuses otherwise).
"""
from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Optional, Tuple

import polars as pl

__all__ = ["score_batch", "reduce_batches", "partial_sums", "combine", "AGGREGATE_COLUMNS"]

#: aggregate name -> per-case column (as in ragmeter.retrieval); all_files_hit_rate counts multi-file cases only
# partial_sums' keys for the counts of summary["file_vs_chunk_hit"]
_GAP = "file_vs_chunk_"
_GAP_COUNTS = ("n", "file_hits", "hits", "n_file_only")

AGGREGATE_COLUMNS = {
    "hit_rate": "hit", "mrr": "reciprocal_rank", "map": "average_precision", "ndcg": "ndcg",
    "precision": "precision", "file_hit_rate": "file_hit", "all_files_hit_rate": "all_files_hit",
    "evidence_recall": "evidence_recall",
}


_LOADED_GOLDEN = {"id", "expected_files", "expected_evidence", "category", "labeled", "id_from_line"}


def _golden_frame(golden: Any) -> pl.DataFrame:
    """The golden set loaded (:func:`ragmeter.dataset.load_golden`), unless it already is: a frame with the
    columns load_golden makes (``id``, ``expected_files``, ``expected_evidence``, ``category``, ``labeled``,
    ``id_from_line``) is taken as it is, so that each batch does not load it again. A frame in a golden file's own
    spelling (``case_id``, ``expected_files`` without ``labeled``) is loaded, as ragmeter.score loads it."""
    if isinstance(golden, pl.DataFrame) and _LOADED_GOLDEN <= set(golden.columns):
        return golden
    from ragmeter.dataset import load_golden

    return load_golden(golden)


def score_batch(batch: Any, golden: Any, k: int = 5, *, name: Optional[str] = None) -> Any:
    """Per-case retrieval columns of the run rows in ``batch`` (a ``pyarrow.Table`` or ``RecordBatch``, a
    Polars or pandas DataFrame) against ``golden`` (a path, records or a DataFrame; a DataFrame already loaded
    with :func:`ragmeter.dataset.load_golden` saves reloading it per batch). Golden cases absent from the batch
    are not scored here: they belong to other batches (see :func:`ragmeter.ray.score_dataset`).

    A batch whose rows are not run rows, or name ids absent from the golden set, raises
    :class:`~ragmeter.errors.InputError` naming the batch (``name``, else its first id and size).
    """
    import pyarrow as pa

    from ragmeter.errors import InputError
    from ragmeter.retrieval import _check_k, score

    k = _check_k(k)
    run = _run_frame(batch)
    label = name or _label(run)
    if run.height == 0:
        return _empty_cases(golden, k)
    ids = _ids(run)
    if ids is None:
        raise InputError(f"{label}: no 'id' column (columns: {', '.join(run.columns) or 'none'})")
    g = _golden_frame(golden)
    try:
        result = score(g.filter(pl.col("id").is_in(ids.implode())), run, k=k)
    except InputError as err:
        raise InputError(f"{label}: {err}") from None
    cases = _with_batch_columns(result.cases, result.chunks, k)
    return cases.to_arrow() if isinstance(cases, pl.DataFrame) else pa.table(cases)


#: per case, how many of its retrieved items give a file. ragmeter.score decides over the whole run whether the
#: run gives files at all (when no item of the run has one, the file-level metrics of every case expecting files
#: are unknown, empty retrievals included); a batch sees only its own items, so the reduction decides it again from
#: this column (and drops it: the collected per-case table is ragmeter.score's)
FILE_COUNT = "n_retrieved_with_file"
#: the cut-off a batch was scored at: reducing batches scored at another k than the reduction's (or at two) would
#: report Hit@3 under the name Hit@5; the reductions check it and drop the column
CUT_OFF = "k"


def _with_batch_columns(cases: pl.DataFrame, chunks: pl.DataFrame, k: int) -> pl.DataFrame:
    counts = chunks.group_by("id").agg(pl.col("file").is_not_null().sum().cast(pl.Int64).alias(FILE_COUNT))
    mapping = dict(zip(counts["id"].to_list(), counts[FILE_COUNT].to_list()))
    return cases.with_columns(pl.col("id").replace_strict(mapping, default=0, return_dtype=pl.Int64).alias(FILE_COUNT),
                              pl.lit(k, dtype=pl.Int64).alias(CUT_OFF))


def _cut_offs(frame: pl.DataFrame) -> List[int]:
    return sorted(frame[CUT_OFF].unique().drop_nulls().to_list()) if CUT_OFF in frame.columns else []


def _run_frame(batch: Any) -> pl.DataFrame:
    import pyarrow as pa

    if isinstance(batch, pl.DataFrame):
        return batch
    if isinstance(batch, pa.RecordBatch):
        batch = pa.Table.from_batches([batch])
    if isinstance(batch, pa.Table):
        return pl.from_arrow(batch)  # type: ignore[return-value]
    from ragmeter.api import _is_pandas

    if _is_pandas(batch):
        from ragmeter.dataset import polars_from_pandas

        return polars_from_pandas(batch, "batch")
    if isinstance(batch, (list, tuple, dict)):
        return pl.DataFrame(batch)
    from ragmeter.errors import InputError

    raise InputError("batch: expected a pyarrow Table or RecordBatch, a Polars or pandas DataFrame or a list of "
                     f"dicts, got {type(batch).__name__}")


def _ids(run: pl.DataFrame) -> Optional[pl.Series]:
    """The run rows' ids as strings, from whichever accepted spelling (``id``, ``case_id``, ``sample_id``, README
    "Formats") each row uses, as the run loader reads them; None when the batch has no id column."""
    from ragmeter.dataset import _ID_NAMES

    present = [n for n in _ID_NAMES if n in run.columns]
    if not present:
        return None
    return run.select(pl.coalesce([pl.col(n).cast(pl.Utf8) for n in present]).alias("id"))["id"]


def _label(run: pl.DataFrame) -> str:
    ids = _ids(run) if run.height else None
    first = ids[0] if ids is not None else None
    return f"batch of {run.height} rows" + (f" from id {first!r}" if first is not None else "")


def _empty_cases(golden: Any, k: int) -> Any:
    """The per-case schema with no rows (an empty batch)."""
    from ragmeter.dataset import load_run
    from ragmeter.retrieval import score

    g = _golden_frame(golden)
    first = g.head(1)
    result = score(first, load_run([{"id": first["id"][0], "retrieved": []}]), k=k)
    return _with_batch_columns(result.cases, result.chunks, k).clear().to_arrow()


def _chunk_list_counts(part: pl.DataFrame) -> Dict[str, int]:
    """The cases the run has a record for, and those of them giving a chunk list: a run none of whose records
    gives one has no mean_retrieved (``ragmeter.retrieval.no_chunk_list_in_run``)."""
    in_run = ~pl.col("missing_from_run").fill_null(False) if "missing_from_run" in part.columns else pl.lit(True)
    listed = ~pl.col("retrieved_null").fill_null(False) if "retrieved_null" in part.columns else pl.lit(True)
    counts = part.select(in_run.sum().alias("n_in_run"), (in_run & listed).sum().alias("n_chunk_lists"))
    return {name: int(counts[name][0] or 0) for name in counts.columns} if part.height else {
        "n_in_run": 0, "n_chunk_lists": 0}


def partial_sums(cases: Any, by: Optional[str] = "category") -> List[Dict[str, Any]]:
    """Sums and counts of one batch's per-case table, per ``by`` value (and ``None`` for all cases).

    Rows: ``{"group", "n_cases", "n_labeled", "empty_retrievals", "sum_retrieved", "n_in_run", "n_chunk_lists"
    (the cases the run has a record for, and those of them giving a chunk list), and per aggregate
    "<name>_sum", "<name>_n_scored", "<name>_n_total", and "file_vs_chunk_n", "file_vs_chunk_file_hits",
    "file_vs_chunk_hits", "file_vs_chunk_n_file_only"}`` (the counts of ``summary["file_vs_chunk_hit"]``). Sums are exact (``math.fsum``) so that the order of
    the batches cannot change the result. The all-cases row also has ``"files"``: the batch's retrieved items with
    a file and its empty retrievals expecting files (None for a table not made by :func:`score_batch`), which
    :func:`combine` needs to check that the batch decided as the whole run whether the run gives files, and
    ``"ids"``: an order-free fingerprint of its case ids (a sum of 64-bit hashes), which ``combine(golden=...)``
    compares with the golden set's, and ``"k"``: the cut-offs its cases were scored at (None for a table not made
    by :func:`score_batch`), which :func:`combine` requires to be one."""
    from ragmeter.retrieval import file_vs_chunk_counts

    frame = _run_frame(cases)
    groups: Dict[Any, pl.DataFrame] = {None: frame}
    if by is not None and frame.height:
        for key, part in frame.group_by(by):
            groups[key[0] if isinstance(key, tuple) else key] = part
    out = []
    for key, part in groups.items():
        row: Dict[str, Any] = {"group": key, "n_cases": part.height,
                               "n_labeled": int(part["labeled"].sum()) if part.height else 0,
                               "empty_retrievals": int(part["empty_retrieval"].sum()) if part.height else 0,
                               "sum_retrieved": int(part["n_retrieved"].sum()) if part.height else 0,
                               **_chunk_list_counts(part)}
        multi = part["n_expected_files"] >= 2 if part.height else pl.Series([], dtype=pl.Boolean)
        for name, column in AGGREGATE_COLUMNS.items():
            values = part[column].cast(pl.Float64) if part.height else pl.Series([], dtype=pl.Float64)
            total = part.height
            if name == "all_files_hit_rate" and part.height:
                values = values.filter(multi)
                total = int(multi.sum())
            kept = values.drop_nulls().to_list()
            row[f"{name}_sum"] = [math.fsum(kept)] if kept else [0.0]
            row[f"{name}_n_scored"] = len(kept)
            row[f"{name}_n_total"] = total
        counts = file_vs_chunk_counts(part) if part.height else dict.fromkeys(_GAP_COUNTS, 0)
        row.update({f"{_GAP}{key}": value for key, value in counts.items()})
        out.append(row)
    out[0]["ids"] = _id_fingerprint(frame["id"]) if frame.height else 0
    out[0]["k"] = _cut_offs(frame) if CUT_OFF in frame.columns else None
    out[0]["files"] = None if FILE_COUNT not in frame.columns else (
        int(frame[FILE_COUNT].sum()) if frame.height else 0,
        int(frame.filter(pl.col("empty_retrieval") & (pl.col("n_expected_files") > 0)).height) if frame.height else 0)
    return out


def combine(partials: Iterable[List[Dict[str, Any]]], *, golden: Any = None) -> Dict[Any, Dict[str, Any]]:
    """Reduce the batches' :func:`partial_sums`: ``{group: {"n_cases", "n_labeled", "empty_retrievals",
    "mean_retrieved", "mean_retrieved_n_scored", "mean_retrieved_n_total", name: {"value", "n_scored", "n_total"},
    "file_vs_chunk_hit": {"n", "file_hit_rate",
    "hit_rate", "n_file_only"}}}`` (group ``None``: all cases; ``file_vs_chunk_hit`` as in ``ragmeter score``'s
    summary). A mean is the
    exact sum over every batch divided by the count over every batch; null when nothing is scored.

    ``golden`` (the golden set, as :func:`score_batch` takes it): the cases summed must be the golden set's, as
    many; fewer (golden cases in no batch, which :func:`ragmeter.score` counts as empty retrievals) or more (a
    batch summed twice) is an :class:`~ragmeter.errors.InputError`. Without it a batch summed twice (the same cases
    as another batch) is still refused, but nothing checks that no case was dropped or that no single case is in
    two different batches: the sums cover only the cases of the batches."""
    from ragmeter.retrieval import file_vs_chunk_entry

    acc: Dict[Any, Dict[str, Any]] = {}
    files: List[Tuple[int, int, int, int]] = []  # per batch: number, items, items with a file, empties expecting files
    fingerprint: Optional[int] = 0
    cut_offs: Dict[int, int] = {}  # k -> the first batch scored at it
    batch_of_ids: Dict[int, int] = {}  # a batch's id fingerprint -> the batch
    twice: List[Tuple[int, int, int]] = []  # (first batch, the batch summing its cases again, cases)
    for number, rows in enumerate(partials, 1):
        for row in rows:
            if row["group"] is None and row.get("files") is not None:
                files.append((number, row["sum_retrieved"], *row["files"]))
            if row["group"] is None:
                ids = row.get("ids")
                _note_summed_before(ids, row["n_cases"], number, batch_of_ids, twice)
                fingerprint = None if ids is None or fingerprint is None else (fingerprint + ids) % _MOD
                for k in row.get("k") or []:
                    cut_offs.setdefault(k, number)
            row = {key: value for key, value in row.items() if key not in ("files", "ids", "k")}
            a = acc.setdefault(row["group"], {"n_cases": 0, "n_labeled": 0, "empty_retrievals": 0,
                                              "sum_retrieved": 0, "n_in_run": 0, "n_chunk_lists": 0,
                                              **{f"{n}_sum": [] for n in AGGREGATE_COLUMNS},
                                              **{f"{n}_n_scored": 0 for n in AGGREGATE_COLUMNS},
                                              **{f"{n}_n_total": 0 for n in AGGREGATE_COLUMNS},
                                              **{f"{_GAP}{key}": 0 for key in _GAP_COUNTS}})
            for key, value in row.items():
                if key != "group":
                    a[key] = a[key] + value
    if len(cut_offs) > 1:
        from ragmeter.errors import InputError

        raise InputError("partial sums: the batches were scored at different cut-offs ("
                         + ", ".join(f"k={k} from batch {n}" for k, n in sorted(cut_offs.items(), key=lambda i: i[1]))
                         + "); their sums are of different metrics (Hit@k, precision@k, ...): score every batch "
                         "with the same k")
    if golden is not None:  # first: its message says what is missing too
        _check_all_cases_summed(acc[None]["n_cases"] if None in acc else 0, golden, fingerprint)
    if twice:
        from ragmeter.errors import InputError

        first, again, n_cases = twice[0]
        raise InputError(f"partial sums: batches {first} and {again} hold the same {n_cases} cases: a batch summed "
                         "twice would count its cases twice")
    _check_file_decision(files)
    out: Dict[Any, Dict[str, Any]] = {}
    whole = acc.get(None, {})
    # as ragmeter.retrieval.aggregate: a run whose records give no chunk list has no mean_retrieved, in any group
    unlisted = bool(whole.get("n_in_run")) and not whole.get("n_chunk_lists")
    for group, a in acc.items():
        entry: Dict[str, Any] = {"n_cases": a["n_cases"], "n_labeled": a["n_labeled"],
                                 "empty_retrievals": a["empty_retrievals"],
                                 "mean_retrieved": a["sum_retrieved"] / a["n_cases"] if a["n_cases"] and not unlisted
                                 else None,
                                 "mean_retrieved_n_scored": 0 if unlisted else a["n_cases"],
                                 "mean_retrieved_n_total": a["n_cases"]}
        for name in AGGREGATE_COLUMNS:
            n = a[f"{name}_n_scored"]
            entry[name] = {"value": math.fsum(a[f"{name}_sum"]) / n if n else None, "n_scored": n,
                           "n_total": a[f"{name}_n_total"]}
        entry["file_vs_chunk_hit"] = file_vs_chunk_entry({key: a[f"{_GAP}{key}"] for key in _GAP_COUNTS})
        out[group] = entry
    return out


def _note_summed_before(ids: Optional[int], n_cases: int, number: int, batch_of_ids: Dict[int, int],
                        twice: List[Tuple[int, int, int]]) -> None:
    """A batch whose cases are another batch's (the same id fingerprint) is summed twice, e.g. a retried task whose
    first result was kept too; the counts cannot tell it without the golden set, the fingerprints can."""
    if ids is None or not n_cases:
        return
    if ids in batch_of_ids:
        twice.append((batch_of_ids[ids], number, n_cases))
    batch_of_ids.setdefault(ids, number)


def _check_file_decision(files: List[Tuple[int, int, int, int]]) -> None:
    """A batch that decided otherwise than the whole run whether the run gives files scored its empty retrievals
    expecting files otherwise than ragmeter.score (file-level metrics unknown, or misses); sums cannot be corrected
    after the fact, so that is an InputError naming the batch."""
    from ragmeter.errors import InputError

    run = _no_file_in_run(sum(f[1] for f in files), sum(f[2] for f in files))
    for number, n_retrieved, n_with_file, empties in files:
        if empties and _no_file_in_run(n_retrieved, n_with_file) != run:
            said = "no retrieved item with a file" if not n_with_file else "retrieved items with a file"
            whole = "gives a file for some retrieved item" if not run else "gives no file for any retrieved item"
            raise InputError(
                f"partial sums: batch {number} has {said} while the whole run {whole}; its {empties} empty "
                "retrieval(s) expecting files are scored otherwise than ragmeter.score scores them (file-level "
                "metrics unknown or missed); collect the per-case tables with reduce_batches, which decides over "
                "the whole run")


_MOD = 1 << 64


def _id_fingerprint(ids: pl.Series) -> int:
    """The sum (mod 2**64) of a 64-bit hash of each id: the same for the same ids in any order and any batching,
    another for a case summed twice in place of a missing one (which the counts alone cannot tell)."""
    import hashlib

    return sum(int.from_bytes(hashlib.blake2b(str(i).encode("utf-8"), digest_size=8).digest(), "little")
               for i in ids.cast(pl.Utf8).to_list()) % _MOD


def _check_all_cases_summed(n_summed: int, golden: Any, fingerprint: Optional[int] = None) -> None:
    from ragmeter.errors import InputError

    g = _golden_frame(golden)
    if n_summed < g.height:
        raise InputError(
            f"partial sums: {g.height - n_summed} golden case(s) in no batch ({n_summed} of {g.height} cases summed); "
            "ragmeter.score counts a case missing from the run as an empty retrieval: add "
            "partial_sums(score_batch([{'id': i, 'retrieved': []} for i in missing_ids], golden)), or collect the "
            "batches with reduce_batches (which names them)")
    if n_summed > g.height:
        raise InputError(f"partial sums: {n_summed} cases summed, the golden set has {g.height}: a batch summed "
                         "twice, or an id in more than one batch, would be counted twice")
    if fingerprint is not None and fingerprint != _id_fingerprint(g["id"]):
        raise InputError(f"partial sums: the cases summed are not the golden set's ({n_summed} of {g.height}, but "
                         "some case is summed twice, in more than one batch, and another in no batch, or a batch "
                         "is of another golden set); collect the batches with reduce_batches, which names them")


def _no_file_in_run(n_retrieved: int, n_with_file: int) -> bool:
    """ragmeter.score's decision: the run has retrieved items and none of them gives a file."""
    return n_retrieved > 0 and n_with_file == 0


#: the per-case columns an empty retrieval's values depend on whether the run gives files
_DECIDED_COLUMNS = ["labeled", "hit", "first_relevant_rank", "reciprocal_rank", "average_precision", "ndcg",
                    "precision", "file_hit", "all_files_hit", "evidence_recall"]


def _empty_retrievals_as_in_the_run(cases: pl.DataFrame, g: pl.DataFrame, k: int) -> pl.DataFrame:
    """The empty retrievals' values as ragmeter.score gives them for the whole run: each batch decided from its own
    items whether the run gives files (a batch whose items have none, or that has none, decides otherwise than the
    run may); the empty retrievals (golden cases missing from the run included) are scored again with the whole
    run's decision, as the scorer assembles a run matched a slice at a time (``mark_no_file_in_run``)."""
    from ragmeter.evidence import mark_no_file_in_run
    from ragmeter.retrieval import _prepared_match, _score_tables

    empty = cases.filter(pl.col("n_retrieved") == 0)
    if not empty.height:
        return cases
    prepared = _prepared_match(g.filter(pl.col("id").is_in(empty["id"].implode())),
                               [{"id": i, "retrieved": []} for i in empty["id"]], run_wide=True)
    if _no_file_in_run(int(cases["n_retrieved"].sum()), int(cases[FILE_COUNT].sum())):
        mark_no_file_in_run(prepared.match, prepared.joined["expected_files"])
    again = _score_tables(prepared, k)[0].select("id", *_DECIDED_COLUMNS)
    kept = [c for c in cases.columns if c not in _DECIDED_COLUMNS]
    order = cases.columns
    rescored = empty.select(kept).join(again, on="id", how="left").select(order)
    return pl.concat([cases.filter(pl.col("n_retrieved") != 0), rescored], how="vertical_relaxed")


def reduce_batches(tables: Iterable[Any], golden: Any, k: int = 5) -> Dict[str, Any]:
    """The whole run from the batches' :func:`score_batch` tables: ``cases`` and every key of
    :func:`ragmeter.score`'s summary (``overall``, ``by_category``, ``warnings``, ...), with the same values but
    ``unfound_evidence`` (None: searching needs every chunk's text). Golden cases in no batch are scored as empty retrievals (as :func:`ragmeter.score`
    does); an id in two batches is an :class:`~ragmeter.errors.InputError` (it would be counted twice)."""
    from ragmeter.errors import InputError
    from ragmeter.retrieval import _check_k, score

    k = _check_k(k)
    g = _golden_frame(golden)
    frames = [_run_frame(t) for t in tables]
    frames = [f for f in frames if f.height]
    seen = pl.concat([f.select("id") for f in frames]) if frames else pl.DataFrame({"id": []}, schema={"id": pl.Utf8})
    twice = seen.filter(seen["id"].is_duplicated())["id"].unique().sort().to_list()
    if twice:
        raise InputError(f"run: id(s) in more than one batch (would be counted twice): {', '.join(twice[:5])}"
                         + (f" and {len(twice) - 5} more" if len(twice) > 5 else ""))
    missing = g.filter(~pl.col("id").is_in(seen["id"].implode()))
    absent = [f for f in frames if FILE_COUNT not in f.columns]
    if absent:
        raise InputError(f"run: a per-case table without {FILE_COUNT!r} (not made by score_batch, "
                         f"{absent[0].height} rows): whether the run gives files is decided over all its batches")
    other = sorted({c for f in frames for c in _cut_offs(f)} - {k})
    if other:
        raise InputError(f"run: batches scored at {', '.join(f'k={c}' for c in other)}, reduced at k={k}: their "
                         f"per-case values are of another cut-off; pass reduce_batches the k of score_batch")
    if missing.height:
        frames.append(score(missing, [{"id": i, "retrieved": []} for i in missing["id"]], k=k).cases.with_columns(
            pl.lit(True).alias("missing_from_run"), pl.lit(0, dtype=pl.Int64).alias(FILE_COUNT)))
    cases = pl.concat([f.drop(CUT_OFF, strict=False) for f in frames], how="vertical_relaxed") if frames else pl.DataFrame()
    any_file = bool(cases.height) and int(cases[FILE_COUNT].sum()) > 0
    if cases.height:
        from ragmeter.retrieval import unscored_without_chunk_lists

        # a batch without chunk lists in a run that has them is its empty retrievals, scored again as the run's
        # (a batch of them alone had them not scored, and not empty)
        cases = _empty_retrievals_as_in_the_run(cases, g, k).drop(FILE_COUNT) \
            .with_columns((pl.col("n_retrieved") == 0).alias("empty_retrieval"))
        cases = unscored_without_chunk_lists(cases)
    order = g.select("id").with_row_index("_order")
    cases = cases.join(order, on="id", how="left").sort("_order").drop("_order")
    return {"cases": cases, **_whole_run_summary(cases, g, k, missing["id"].to_list(), any_file)}


def _whole_run_summary(cases: pl.DataFrame, g: pl.DataFrame, k: int, missing: List[str], any_file: bool) -> Dict[str, Any]:
    """ragmeter.score's summary over the collected per-case columns (its code: the same numbers, counts and
    warnings), but for the evidence phrases found in no chunk of the run: that needs every chunk's text, which the
    per-case columns do not hold, so ``unfound_evidence`` is None (not searched), not [] (none unfound)."""
    from ragmeter.retrieval import _nest, _summary, aggregate, note_inputs

    golden = g.select("id", "reference_answer", "id_from_line")
    joined = cases.select("id", "category").join(golden, on="id", how="left", maintain_order="left")
    by_category = aggregate(cases, ["category"])
    summary = _summary(cases, by_category, joined, k, missing, unfound=None)
    summary["by_category"] = {row["category"]: _nest(row) for row in by_category.to_dicts()}
    summary["unfound_evidence"] = None
    unknown = cases.filter((pl.col("n_expected_files") > 0) & pl.col("file_hit").is_null())["id"].to_list()
    note_inputs(summary, joined, unknown, lambda: any_file)
    return summary
