"""RAG retrieval scoring: did retrieval bring the chunk that holds the answer?

``score(golden, run, k=5)`` decides, in Rust over the whole batch, which
retrieved chunks are relevant (expected file + normalised evidence phrase, see
:mod:`ragmeter.evidence`), then computes per-case rank metrics at cut-off ``k``
with the same engine as ``ragmeter trec``, and aggregates them overall and per
category. Every aggregate carries ``n_scored`` and ``n_total``: unlabelled
cases are not scored (null, never 0 or 1); a golden case missing from the run
is scored as an empty retrieval and listed in a warning.

Definitions at cut-off k (per labelled case):

* ``hit``: a relevant chunk is in the top k. Its mean is **Hit@k**, which many
  RAG write-ups call "Recall@k"; it is trec_eval's ``success_k``.
* ``reciprocal_rank``: 1 / rank of the first relevant chunk within k (MRR@k).
* ``average_precision``: AP@k over the relevant chunks retrieved in the top k
  (ragas' context-precision definition; the total number of relevant chunks
  in the corpus is unknown in RAG, so trec_eval's denominator R is not
  available). Nothing relevant in the top k gives 0.
* ``ndcg``: binary-gain NDCG@k; the ideal ranking is the relevant chunks of
  all retrieved candidates (so a relevant chunk at rank 7 lowers NDCG@5).
* ``precision``: relevant share of the chunks kept in the top k (divides by the
  number kept, at most k; an empty retrieval gives 0).
* ``file_hit``: some expected file is in the top k; ``all_files_hit``: every
  expected file is (the cross-document "full hit"), null for cases expecting
  fewer than two files.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import polars as pl

from ragmeter import _core
from ragmeter._args import MAX_K, check_k as _check_k  # noqa: F401 - MAX_K: its home for callers of retrieval
from ragmeter.dataset import check_run_against_golden, load_golden, load_run
from ragmeter.evidence import EvidenceMatch, match_relevance, phrases_in_texts, retrieved_columns

__all__ = ["score", "score_into", "sweep", "sweep_with_warnings", "ScoreResult", "CASE_COLUMNS", "aggregate"]

CASE_COLUMNS = [
    "id", "category", "labeled", "hit", "first_relevant_rank", "reciprocal_rank", "average_precision",
    "ndcg", "precision", "file_hit", "all_files_hit", "evidence_recall", "n_retrieved", "empty_retrieval",
    "retrieval_mode", "run_error",
]

# aggregate name -> (case column, reducer, filter); filter restricts the cases counted in n_total.
_AGGREGATES = {
    "hit_rate": ("hit", "mean", None),
    "mrr": ("reciprocal_rank", "mean", None),
    "map": ("average_precision", "mean", None),
    "ndcg": ("ndcg", "mean", None),
    "precision": ("precision", "mean", None),
    "file_hit_rate": ("file_hit", "mean", None),
    "all_files_hit_rate": ("all_files_hit", "mean", "multi_file"),
    "evidence_recall": ("evidence_recall", "mean", None),
}


class _FromTable:
    """``summary["by_category"]`` until it is asked for: the per-category dicts (about 2 kB a category, a
    category per case when the ids carry no prefix) are built from :attr:`ScoreResult.by_category` on first
    access, and ``summary.json`` and the tables are written from the table's columns without them."""

    def __repr__(self) -> str:
        return "<by_category: built from ScoreResult.by_category when asked for>"

    def __reduce__(self) -> str:
        return "_CATEGORIES_FROM_TABLE"  # one marker: a pickled or copied result still finds it


_CATEGORIES_FROM_TABLE = _FromTable()


class ScoreResult:
    """Per-case table, per-category table and a JSON-ready summary."""

    chunks: pl.DataFrame

    def __init__(self, cases: pl.DataFrame, by_category: pl.DataFrame, summary: Dict[str, Any],
                 chunks: Optional[pl.DataFrame] = None) -> None:
        self.cases = cases
        self.by_category = by_category
        self.summary = summary
        if chunks is not None:
            self.chunks = chunks

    def __repr__(self) -> str:
        return f"{type(self).__name__}(cases={self.cases!r}, by_category={self.by_category!r}, summary={self.summary!r})"

    @property
    def summary(self) -> Dict[str, Any]:
        """The JSON-ready summary (``by_category`` holds a dict per category, built on first access)."""
        if self._summary.get("by_category") is _CATEGORIES_FROM_TABLE:
            self._summary["by_category"] = _nested_categories(self.by_category)
        return self._summary

    @summary.setter
    def summary(self, value: Dict[str, Any]) -> None:
        self._summary = value

    @property
    def warnings(self) -> List[str]:
        """The warnings' messages; ``summary["warnings"]`` has them structured (code, count, cases)."""
        from ragmeter._warnings import messages

        return messages(self._summary["warnings"])

    def write(self, out_dir: Any) -> None:
        """Write ``cases.parquet``, ``chunks.parquet``, ``summary.json`` and ``warnings.json`` (all or
        nothing; ragmeter outputs of an earlier run in ``out_dir`` are removed, other files kept)."""
        from ragmeter._io import results_folder

        with results_folder(out_dir) as tmp:
            self._write_files(tmp)

    def summary_json(self, extra: Optional[Dict[str, Any]] = None) -> str:
        """``summary`` as :func:`ragmeter._io.strict_json` writes it (``extra`` members added at the end), its
        categories written from :attr:`by_category`'s columns when that gives the same text."""
        from ragmeter._io import strict_json

        return strict_json(self._summary_to_write({**self._summary, **(extra or {})}))

    def table_summary(self, limit: int) -> Dict[str, Any]:
        """``summary`` for the terminal table: ``by_category`` holds the ``limit`` categories of lowest Hit@k
        (:func:`ragmeter.cli._tables.worst_first`'s order) when there are more, and ``n_more_categories``
        counts the others, so that the table does not need every category's dict."""
        if self._summary.get("by_category") is not _CATEGORIES_FROM_TABLE or self.by_category.height <= limit:
            return self.summary
        rows = _worst_categories(self.by_category, limit)
        return {**self._summary, "by_category": _nested_categories(rows),
                "n_more_categories": self.by_category.height - rows.height}

    def _summary_to_write(self, summary: Dict[str, Any]) -> Dict[str, Any]:
        if summary.get("by_category") is _CATEGORIES_FROM_TABLE:
            members = _category_members(self.by_category)
            summary = {**summary, "by_category": members if members is not None else self.summary["by_category"]}
        return summary

    def _write_files(self, folder: Path) -> None:
        """The four files of :meth:`write`, in ``folder`` (a results folder's temporary area)."""
        from ragmeter._io import write_frame, write_json, written_by
        from ragmeter._warnings import for_disk, full_list

        files = ["cases.parquet", "chunks.parquet", "warnings.json", "summary.json"]
        write_frame(self.cases, folder / "cases.parquet")
        self._write_chunks(folder / "chunks.parquet")
        write_json(folder / "warnings.json", full_list(self._summary))
        write_json(folder / "summary.json", self._summary_to_write({**for_disk(self._summary), "files": files,
                                                                     **written_by("score")}))

    def _write_chunks(self, path: Path) -> None:
        from ragmeter._io import write_chunk_frame

        write_chunk_frame(self.chunks, path)


def source_name(source: Any, what: str) -> str:
    """How messages name an input: its path, else ``what`` (``"run"``, ``"golden"``) for records or a frame."""
    return str(source) if isinstance(source, str) or hasattr(source, "__fspath__") else what


def _prepare(golden: Any, run: Any) -> tuple:
    g = load_golden(golden)
    r = load_run(run)
    run_name, golden_name = source_name(run, "run"), source_name(golden, "golden")
    missing = check_run_against_golden(g, r, run_source=run_name, golden_source=golden_name)
    joined = g.join(r.drop("line", "id_from_line", strict=False), on="id", how="left", coalesce=True)
    joined = joined.with_columns(
        pl.col("retrieved").fill_null(pl.lit([], dtype=r.schema["retrieved"])),
        pl.col("id").is_in(pl.Series(missing, dtype=pl.Utf8).implode()).alias("missing_from_run"),
    )
    return g, r, joined, missing


@dataclass
class _PreparedMatch:
    """Golden set joined with the run, and the relevance of every retrieved chunk."""

    joined: pl.DataFrame
    missing: List[str]
    match: EvidenceMatch


def _prepared_match(golden: Any, run: Any, *, run_wide: bool = False) -> _PreparedMatch:
    """Load, join and match once; ``score`` and ``sweep`` both start from this.

    ``run_wide`` also decides, in the same pass over the chunk texts, which
    evidence phrases occur in no retrieved chunk of the whole run.
    """
    _g, _r, joined, missing = _prepare(golden, run)
    files, texts = retrieved_columns(joined["retrieved"])
    match = match_relevance(joined["expected_files"], joined["expected_evidence"], files, texts, run_wide=run_wide)
    return _PreparedMatch(joined=joined, missing=missing, match=match)


def score(golden: Any, run: Any, k: int = 5) -> ScoreResult:
    """Score retrieval per case at cut-off ``k``; see the module docs for definitions.

    A Parquet run (a path) is read a slice of rows at a time (:mod:`ragmeter._stream_score`): its chunk
    texts are matched and let go, never all in memory; ``chunks`` and :meth:`ScoreResult.write` read them
    again from the file. Other runs are loaded whole.
    """
    return _score(*_sources(golden, run), _check_k(k))


def _sources(golden: Any, run: Any) -> Tuple[Any, Any]:
    """The inputs as the loaders take them, from what :func:`ragmeter.evaluate` also takes (Arrow tables, lazy
    frames, dicts of columns, ``datasets.Dataset``): one function accepts what the other does."""
    from ragmeter.api import case_source

    return case_source(golden, "golden"), case_source(run, "run")  # as_source; an empty one is refused


def score_into(golden: Any, run: Any, out_dir: Any, k: int = 5, *, refuse_no_chunk_list: bool = False) -> ScoreResult:
    """:func:`score`, then :meth:`ScoreResult.write` into ``out_dir`` (what ``ragmeter score --out`` does); the
    results folder is opened first, so that a Parquet run's ``chunks.parquet`` is written while it is scored
    instead of from a second read of its texts. All or nothing, as :meth:`ScoreResult.write`: a run that
    cannot be scored leaves ``out_dir`` as it was. ``refuse_no_chunk_list``: so does a run of which no case
    gives a chunk list (``ragmeter score``'s refusal, :func:`no_chunk_list_error`)."""
    from ragmeter._io import results_folder

    k = _check_k(k)  # before the folder is opened
    name = source_name(run, "run")
    golden, run = _sources(golden, run)
    with results_folder(out_dir) as tmp:
        result = _score(golden, run, k, chunks_to=tmp / "chunks.parquet")
        if refuse_no_chunk_list and no_chunk_list_in_run(result.cases):
            raise no_chunk_list_error(name, cases=result.cases)
        result._write_files(tmp)
    return result


def _score(golden: Any, run: Any, k: int, chunks_to: Optional[Path] = None) -> ScoreResult:
    from ragmeter.dataset import _is_parquet, _is_path

    if _is_path(run) and _is_parquet(Path(run)):
        from ragmeter._stream_score import score_parquet

        return score_parquet(golden, Path(run), k, chunks_to=chunks_to)
    return _score_prepared(_prepared_match(golden, run, run_wide=True), k)


def check_thresholds(thresholds: Sequence[float]) -> List[float]:
    """The thresholds of a sweep as floats; an :class:`InputError` for anything but a list of numbers, a NaN (it
    keeps no chunk and compares equal to no other threshold) or a threshold given twice (its row would count
    every case twice)."""
    from numbers import Real

    from ragmeter._args import check_arg
    from ragmeter.errors import InputError

    if type(thresholds).__module__.split(".")[0] == "pandas" and hasattr(thresholds, "tolist"):
        thresholds = thresholds.tolist()  # a Series' values (it has keys(): its index)
    if not isinstance(thresholds, (str, bytes)) and hasattr(thresholds, "__iter__") and not hasattr(thresholds, "keys"):
        thresholds = list(thresholds)  # an iterator is read once, here (check_arg refuses the rest)
        if any(isinstance(t, Real) and t != t for t in thresholds):
            raise InputError("thresholds: NaN is not a threshold; give numbers (inf and -inf are allowed)")
    from collections import Counter

    values: List[float] = check_arg("thresholds", thresholds, "numbers")
    # counted once each (values.count per value was quadratic: 100,000 thresholds took minutes)
    repeated = sorted(v for v, n in Counter(values).items() if n > 1)
    if repeated:
        raise InputError(f"thresholds: {', '.join(f'{v:g}' for v in repeated)} given more than once; "
                         "give each threshold once")
    return values


def _score_prepared(prepared: _PreparedMatch, k: int) -> ScoreResult:
    """:func:`score` on inputs already loaded and matched (``run_wide=True``)."""
    k = _check_k(k)
    cases, by_category, summary = _score_tables(prepared, k)
    chunks = _chunk_table(prepared.joined, prepared.match)
    return ScoreResult(cases=cases, by_category=by_category, summary=summary, chunks=chunks)


def _score_tables(prepared: _PreparedMatch, k: int, chunk_files_null: Optional[int] = None) -> tuple:
    """Per-case table, per-category table and summary of a prepared match (``chunk_files_null``: how many
    retrieved chunks have no file, when ``prepared.joined`` holds no ``retrieved`` column)."""
    joined, match = prepared.joined, prepared.match
    cases = unscored_without_chunk_lists(_case_table(joined, match, k))
    by_category = aggregate(cases, ["category"])
    summary = _summary(cases, by_category, joined, k, prepared.missing, _unfound_evidence(joined, match))
    _add_input_notes(summary, joined, match, chunk_files_null)
    return cases, by_category, summary


def _add_input_notes(summary: Dict[str, Any], joined: pl.DataFrame, match: EvidenceMatch,
                     chunk_files_null: Optional[int] = None) -> None:
    """Record how the inputs were read where it changes what the numbers mean."""
    def any_file() -> bool:  # counted only when some case lacks its file: it reads every chunk's file
        nulls = _flat_chunk_field(joined, "file").null_count() if chunk_files_null is None else chunk_files_null
        return nulls < int(match.chunk_offsets[-1])

    note_inputs(summary, joined, joined["id"].filter(pl.Series(_file_unknown(match))).to_list(), any_file)


def note_inputs(summary: Dict[str, Any], joined: pl.DataFrame, unknown_ids: List[Any],
                any_file: Callable[[], bool]) -> None:
    """``cases_without_file``, ``ids_from_line_numbers`` and the ``no_file`` warning of ``summary``, for
    ragmeter.score and for the batches' reduction (ragmeter.batch): ``unknown_ids``, the cases expecting files
    whose file-level metrics are unknown; ``any_file()``: whether some retrieved item of the run gives a file."""
    summary["cases_without_file"] = len(unknown_ids)
    summary["ids_from_line_numbers"] = bool(joined.height and "id_from_line" in joined.columns and joined["id_from_line"].all())
    if unknown_ids:
        summary["warnings"].insert(0, no_file_warning(unknown_ids, any_file()))


def no_file_warning(ids: List[Any], any_file: bool) -> Dict[str, Any]:
    """The ``no_file`` warning: the cases (``ids``) expecting files whose file-level metrics are unknown; ``any_file``:
    some retrieved item of the run gives a file (else none does)."""
    from ragmeter._warnings import warning

    what = "have retrieved items without a file" if any_file else "are in a run that gives no file for any retrieved item"
    return warning("no_file", f"case(s) expecting files {what}: matched on evidence alone, file-level metrics not "
                   "scored for them", ids)


def _case_table(joined: pl.DataFrame, match: Any, k: int) -> pl.DataFrame:
    grades = match.relevant.astype(np.float64)
    grades.flags.writeable = False  # borrowed by the binding, not copied (16 MB at 100,000 cases of 20 chunks)
    # None of these metrics divides by the corpus-wide number of relevant chunks (unknown in RAG).
    n_relevant = np.zeros(joined.height)
    names = [f"hit@{k}", f"first_relevant_rank@{k}", f"rr@{k}", f"ap_retrieved@{k}", f"ndcg@{k}", f"p_retrieved@{k}"]
    values = _core.rank_metrics(match.chunk_offsets, grades, n_relevant, names)
    decided = match.labeled.astype(bool)  # relevance could be decided (see match_relevance)
    undecided = pl.Series(~decided)
    # A case matched on evidence alone (chunks without a file) is labelled even when that left it undecidable.
    labeled = decided | _file_unknown(match)

    def col(i: int, name: str, dtype: Any = pl.Float64) -> pl.Series:
        return pl.Series(name, values[:, i]).cast(dtype).set(undecided, None)

    n_retrieved = np.diff(match.chunk_offsets)
    n_expected_files = joined["expected_files"].list.len()
    return pl.DataFrame([
        joined["id"], joined["category"], pl.Series("labeled", labeled),
        col(0, "hit", pl.Boolean), col(1, "first_relevant_rank", pl.Int64), col(2, "reciprocal_rank"),
        col(3, "average_precision"), col(4, "ndcg"), col(5, "precision"),
        match.file_hit(k),
        # The cross-document "full hit" is only defined for cases expecting two or more files.
        pl.Series("all_files_hit", match.all_files_hit(k)).set(n_expected_files < 2, None),
        match.evidence_recall(k),
        pl.Series("n_retrieved", n_retrieved, dtype=pl.Int64), pl.Series("empty_retrieval", n_retrieved == 0),
        joined["retrieval_mode"],
        joined["run_error"],
        _retrieved_null(joined),
        joined["missing_from_run"],
        n_expected_files.alias("n_expected_files"),
        # the labels themselves: `compare` tells a changed label from a changed system by them
        joined["expected_files"], joined["expected_evidence"],
        # and the question, so that a failing case reads without the golden set (eval's columns keep this order)
        *([joined["question"]] if "question" in joined.columns else []),
    ])


def _retrieved_null(joined: pl.DataFrame) -> pl.Series:
    """Per case: the run's record gives ``retrieved: null`` (False for a case the run lacks, or a run loaded
    without the flag)."""
    if "retrieved_null" not in joined.columns:
        return pl.Series("retrieved_null", [False] * joined.height, dtype=pl.Boolean)
    return joined["retrieved_null"].fill_null(False)


def no_chunk_list_in_run(cases: pl.DataFrame) -> bool:
    """Every case the run has a record for gives ``retrieved: null``: the run holds no retrieval at all (an
    answer-only run), and its empty retrievals measure nothing."""
    if "retrieved_null" not in cases.columns:
        return False
    in_run = cases.filter(~pl.col("missing_from_run").fill_null(False))
    return bool(in_run.height) and bool(in_run["retrieved_null"].all())


#: the per-case retrieval values, null (not scored) in a run that gives no chunk list
RETRIEVAL_VALUES = ("hit", "first_relevant_rank", "reciprocal_rank", "average_precision", "ndcg", "precision",
                    "file_hit", "all_files_hit", "evidence_recall")


def unscored_without_chunk_lists(cases: pl.DataFrame) -> pl.DataFrame:
    """``cases`` with no retrieval value (null: not scored, counted in n_total) when the run gives no chunk list
    for any case (:func:`no_chunk_list_in_run`): its empty retrievals are not the system's, and a Hit@k of 0%
    over them would be a rate of what was never seen. ``empty_retrieval`` is then false: nothing came back empty."""
    if not no_chunk_list_in_run(cases):
        return cases
    return cases.with_columns([pl.lit(None, dtype=cases.schema[c]).alias(c) for c in RETRIEVAL_VALUES]
                              + [pl.lit(False).alias("empty_retrieval")])


def no_chunk_list_error(run_name: str, judge_remedy: str = "judge the answers alone with `ragmeter eval`",
                        cases: Optional[pl.DataFrame] = None) -> Exception:
    """The :class:`InputError` of ``score`` and ``sweep`` (and ``eval`` without a judge) for a run of which no
    case gives a chunk list; ``judge_remedy``: how to measure the answers instead. ``cases`` (scored or joined):
    when every case of the run failed when it was collected, the error says that, and to collect again, rather
    than how to write an answer-only run."""
    from ragmeter.errors import InputError

    failed = failed_in_every_run_case(cases) if cases is not None else None
    if failed:
        kinds = ", ".join(f"{n} {kind}" for kind, n in failed.items())
        return InputError(f"{run_name}: every case of the run failed when it was collected ({kinds}), so there is "
                          f"nothing to measure; rerun `ragmeter collect` (the run file keeps each case's error)")
    return InputError(f"{run_name}: 'retrieved' is null in every case of the run (no chunk list), so there is no "
                      f"retrieval to measure; write [] for a retriever that found nothing, or {judge_remedy}")


def _file_unknown(match: EvidenceMatch) -> np.ndarray:
    """Per case: matched on evidence alone because a chunk had no file (file-level results unknown)."""
    return match.file_unknown if match.file_unknown is not None else np.zeros(match.n_cases, dtype=bool)


def _chunk_table(joined: pl.DataFrame, match: Any) -> pl.DataFrame:
    """One row per retrieved chunk with its relevance marks (for reports and audits)."""
    lengths = np.diff(match.chunk_offsets)
    case_ids = np.repeat(np.arange(joined.height), lengths)
    ranks = np.arange(match.relevant.size) - np.repeat(match.chunk_offsets[:-1], lengths) + 1
    flat = _flat_chunks(joined)
    base = pl.DataFrame({"id": joined["id"].gather(case_ids), "rank": ranks.astype(np.int64)})
    return pl.concat([base, flat, pl.DataFrame(match.chunk_marks())], how="horizontal")


def _flat_chunks(joined: pl.DataFrame) -> pl.DataFrame:
    """Every retrieved chunk of every case, in order (empty lists contribute no row)."""
    # Shares the text buffers (no conversion through Arrow and back).
    return joined["retrieved"].explode(empty_as_null=False, keep_nulls=False).struct.unnest()


def _flat_chunk_field(joined: pl.DataFrame, name: str) -> pl.Series:
    """One field of every retrieved chunk, in order, without converting the others (the texts)."""
    return _flatten(joined["retrieved"].list.eval(pl.element().struct.field(name))).alias(name)


def _flatten(lists: pl.Series) -> pl.Series:
    """The values of a list column in order (empty and null lists contribute nothing)."""
    return lists.explode(empty_as_null=False, keep_nulls=False)


def scope_filter(scope: str) -> pl.Expr:
    """The cases an aggregate of this scope covers, its ``n_total`` (the reports count the same):
    ``multi_file``, the cases expecting two or more files (for one file, "all files hit" is "file hit");
    ``answerable``, the cases whose answer is in the knowledge base (the refusal rate's); ``noanswer``, the others
    (what refusal detection alone can grade)."""
    if scope == "multi_file":
        return pl.col("n_expected_files") >= 2
    if scope == "answerable":
        return ~pl.col("is_noanswer").fill_null(False)
    if scope == "noanswer":
        return pl.col("is_noanswer").fill_null(False)
    raise ValueError(f"unknown aggregate scope {scope!r}")


def aggregate(cases: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame:
    """Aggregates (mean, n_scored, n_total) of the retrieval columns, overall or per group.

    A mean covers the cases where the column is not null (``n_scored``);
    ``n_total`` counts every case in the group (for ``all_files_hit_rate``, the
    cases expecting two or more files).
    """
    exprs: List[pl.Expr] = [pl.len().alias("n_cases"), pl.col("labeled").sum().alias("n_labeled")]
    for name, (column, _, only) in _AGGREGATES.items():
        values = pl.col(column).cast(pl.Float64)
        if only is not None:
            covered = scope_filter(only)
            values = pl.when(covered).then(values)
            total = covered.sum()
        else:
            total = pl.len()
        exprs += [values.mean().alias(name), values.count().alias(f"{name}_n_scored"), total.alias(f"{name}_n_total")]
    # a run of no chunk list (no_chunk_list_in_run) retrieved nothing anyone saw: its mean is not measured, not 0
    unlisted = no_chunk_list_in_run(cases)
    retrieved = pl.lit(None, dtype=pl.Float64) if unlisted else pl.col("n_retrieved").mean()
    # the cases that mean is over, as every other aggregate says (a number itself, so the counts sit beside it):
    # every case (a missing or null retrieval in a run that lists chunks is 0 chunks), none when it is null
    covered = pl.lit(0, dtype=pl.UInt32) if unlisted else pl.len()
    exprs += [pl.col("empty_retrieval").sum().alias("empty_retrievals"), retrieved.alias("mean_retrieved"),
              covered.alias("mean_retrieved_n_scored"), pl.len().alias("mean_retrieved_n_total")]
    if by:
        return cases.group_by(list(by)).agg(exprs).sort(list(by))
    return cases.select(exprs)


def file_vs_chunk_hit(cases: pl.DataFrame) -> Dict[str, Any]:
    """File-level and chunk-level Hit@k over the same cases, those where both are scored (a case expecting files,
    whose chunks give files, and labelled): ``n``, ``file_hit_rate``, ``hit_rate`` (None when ``n`` is 0) and
    ``n_file_only``, the cases whose expected file came back in the top k without a relevant chunk. The overall
    rates cover different cases (file Hit the cases expecting files, chunk Hit every labelled one), so their
    difference is no gap of any case."""
    return file_vs_chunk_entry(file_vs_chunk_counts(cases))


def file_vs_chunk_counts(cases: pl.DataFrame) -> Dict[str, int]:
    """The counts behind :func:`file_vs_chunk_hit`, which add up over batches: ``n`` (cases where both are
    scored), ``file_hits``, ``hits`` and ``n_file_only`` among them."""
    both = cases.filter(pl.col("file_hit").is_not_null() & pl.col("hit").is_not_null())
    file_hit, hit = pl.col("file_hit").cast(pl.Boolean), pl.col("hit").cast(pl.Boolean)
    row = both.select(pl.len().alias("n"), file_hit.sum().alias("file_hits"), hit.sum().alias("hits"),
                      (file_hit & ~hit).sum().alias("n_file_only")).row(0, named=True)
    return {key: int(value or 0) for key, value in row.items()}


def file_vs_chunk_entry(counts: Dict[str, int]) -> Dict[str, Any]:
    """``summary["file_vs_chunk_hit"]`` from :func:`file_vs_chunk_counts` (rates None when ``n`` is 0)."""
    n = counts["n"]
    return {"n": n, "file_hit_rate": counts["file_hits"] / n if n else None,
            "hit_rate": counts["hits"] / n if n else None, "n_file_only": counts["n_file_only"]}


def _main_mode(cases: pl.DataFrame) -> Optional[str]:
    modes = cases.filter(pl.col("retrieval_mode").is_not_null())["retrieval_mode"]
    if modes.len() == 0:
        return None
    counts = modes.value_counts(sort=True)
    return counts[modes.name][0]


def _summary(cases: pl.DataFrame, by_category: pl.DataFrame, joined: pl.DataFrame, k: int, missing: List[str],
             unfound: Optional[List[Dict[str, str]]]) -> Dict[str, Any]:
    """``summary.json`` from the per-case table and the golden cases in its order (``joined``: ``id``,
    ``reference_answer``, ``category``); ``unfound``: the evidence phrases found in no chunk of the run, None when
    they were not searched for (ragmeter.batch.reduce_batches: the per-case columns hold no chunk text) or there
    was nothing to search (no case gives a chunk list)."""
    if no_chunk_list_in_run(cases):
        unfound = None  # every phrase 'never found' would blame the labels for the run's missing lists
    overall = aggregate(cases).to_dicts()[0]
    n = cases.height
    main_mode = _main_mode(cases)
    from ragmeter.report.data import retrieval_modes

    mode_counts = {str(m): int(c) for m, c in retrieval_modes(cases).items()}
    warnings = _warnings(cases, main_mode, missing, unfound or [], joined)
    return {
        "k": k,
        "n_cases": n,
        "n_labeled": int(cases["labeled"].sum()),
        "resolution_points": (100.0 / n) if n else None,
        "overall": _nest(overall),
        "file_vs_chunk_hit": file_vs_chunk_hit(cases),
        "by_category": _CATEGORIES_FROM_TABLE,
        "retrieval_modes": mode_counts,
        "main_retrieval_mode": main_mode,
        "missing_from_run": missing,
        "run_errors": run_error_counts(cases),
        "unfound_evidence": unfound,
        "warnings": warnings,
        "definitions": "hit_rate is Hit@k (what many call Recall@k; trec_eval success_k); see ragmeter.retrieval",
    }


def _warnings(cases: pl.DataFrame, main_mode: Optional[str], missing: List[str],
              unfound: List[Dict[str, str]], joined: pl.DataFrame) -> List[Dict[str, Any]]:
    """Structured warnings (see :mod:`ragmeter._warnings`): counted, naming the first few cases."""
    from ragmeter._warnings import SHOWN, cut, warning
    from ragmeter.diagnosis import NOANSWER_CATEGORIES

    warnings = _run_health_warnings(cases, main_mode, missing)
    if unfound:
        warnings.append(warning(
            "evidence_never_found", "evidence phrase(s) never found in any retrieved chunk of the run (annotation slip?)",
            [u["id"] for u in unfound], [f"{u['id']}: {u['phrase']!r}" for u in unfound],  # whole in warnings.json
            shown_labels=[f"{u['id']}: {cut(u['phrase'])}" for u in unfound[:SHOWN]]))
    # A case with a reference answer but no labels is answerable yet unscored for retrieval: an annotation
    # gap, unlike a no-answer question, which has nothing to retrieve.
    unlabelled = joined.filter(
        ~cases["labeled"] & joined["reference_answer"].str.strip_chars().fill_null("").ne("")
        & ~joined["category"].fill_null("").str.to_lowercase().is_in(NOANSWER_CATEGORIES))["id"].to_list()
    if unlabelled:
        warnings.append(warning("unlabelled", "case(s) have a reference answer but no expected files or evidence, so "
                                "their retrieval is not scored (counted in n_total only)", unlabelled))
    n = cases.height
    if n:
        warnings.append(warning("resolution", f"cases in the set, so one case = {100.0 / n:.2f} points "
                                "(the resolution of every rate)", [], count=n))
    return warnings


def _run_health_warnings(cases: pl.DataFrame, main_mode: Optional[str], missing: List[str]) -> List[Dict[str, Any]]:
    """What the run file says about how the system ran (``id``, ``retrieval_mode``, ``run_error``): cases in
    another retrieval mode than the main one, golden cases it lacks, cases it records as failed. ``score`` and
    ``sweep`` both say them: for a sweep a threshold means another thing on another mode's scores, and an
    absent or failed case is an empty retrieval at every threshold."""
    from ragmeter._warnings import warning

    warnings: List[Dict[str, Any]] = []
    off_mode = cases.filter(pl.col("retrieval_mode").is_not_null() & (pl.col("retrieval_mode") != main_mode)) \
        if main_mode is not None else cases.clear()
    if off_mode.height:
        ids, modes = off_mode["id"].to_list(), off_mode["retrieval_mode"].to_list()
        warnings.append(warning(
            "mode_fallback", f"case(s) ran in a retrieval mode other than the run's main mode '{main_mode}' "
            "(a degraded retriever?)", ids, [f"{i} ({m})" for i, m in zip(ids, modes)]))
    if missing:
        warnings.append(warning("missing_from_run", "golden case(s) missing from the run, scored as empty retrievals",
                                missing))
    if "retrieved_null" in cases.columns and cases["retrieved_null"].any():
        warnings.append(retrieved_null_warning(cases))
    failed = cases.filter(pl.col("run_error").is_not_null())
    if failed.height:
        warnings.append(failed_in_run_warning(failed["id"].to_list(), failed["run_error"].to_list()))
    return warnings


def retrieved_null_warning(cases: pl.DataFrame) -> Dict[str, Any]:
    """The ``retrieved_null`` warning: the cases whose run record gives ``retrieved: null`` (no chunk list), read
    as empty retrievals; said of the whole run when no case gives a list."""
    from ragmeter._warnings import warning

    ids = cases.filter(pl.col("retrieved_null"))["id"].to_list()
    if no_chunk_list_in_run(cases):
        message = ("case(s): 'retrieved' is null in every case of the run (no chunk list: an answer-only run?), so "
                   "retrieval is not scored (n_scored 0)")
    else:
        message = ("case(s) whose run record gives 'retrieved': null (no chunk list), read as empty retrievals "
                   "(write [] for a retriever that found nothing)")
    return warning("retrieved_null", message, ids)


def failed_in_run_warning(ids: List[Any], kinds: List[Any],
                          consequence: str = "scored from what the run holds for them (an empty retrieval, no "
                                             "answer)") -> Dict[str, Any]:
    """The ``failed_in_run`` warning: the cases (``ids``) the run file records as failed when it was collected,
    each with its failure kind (``run_error``); ``consequence`` says what the command did with them (``score``,
    ``sweep``: scored from what the run holds; ``judge``: nothing to judge)."""
    from ragmeter._warnings import warning

    return warning("failed_in_run", f"case(s) failed when the run was collected (the run file keeps their error): "
                   f"{consequence}; rerun `ragmeter collect` for them", ids,
                   [f"{i} ({kind})" for i, kind in zip(ids, kinds)])


def failed_in_every_run_case(cases: pl.DataFrame) -> Optional[Dict[str, int]]:
    """:func:`run_error_counts` when the run holds cases and every one of them (golden cases missing from it
    aside) failed when it was collected, else None."""
    if "run_error" not in cases.columns:
        return None
    if "missing_from_run" in cases.columns:
        cases = cases.filter(~pl.col("missing_from_run").fill_null(False))
    if not cases.height or cases["run_error"].null_count():
        return None
    return run_error_counts(cases)


def run_error_counts(cases: pl.DataFrame) -> Dict[str, int]:
    """How many cases of each failure kind the run file recorded (``run_error``; see ``docs/collect.md``)."""
    counts = cases["run_error"].drop_nulls().value_counts(sort=True)
    return {str(kind): int(n) for kind, n in counts.iter_rows()}


def _nest(row: Dict[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {
        "n_cases": row["n_cases"], "n_labeled": row["n_labeled"],
        "empty_retrievals": row["empty_retrievals"], "mean_retrieved": row["mean_retrieved"],
        "mean_retrieved_n_scored": row["mean_retrieved_n_scored"], "mean_retrieved_n_total": row["mean_retrieved_n_total"],
    }
    for name in _AGGREGATES:
        out[name] = {"value": row[name], "n_scored": row[f"{name}_n_scored"], "n_total": row[f"{name}_n_total"]}
    return out


_NEST_BASE = ("n_cases", "n_labeled", "empty_retrievals", "mean_retrieved", "mean_retrieved_n_scored",
              "mean_retrieved_n_total")
_NEST_KEYS = [(name, f"{name}_n_scored", f"{name}_n_total") for name in _AGGREGATES]


def _nest_rows(frame: pl.DataFrame) -> List[Dict[str, Any]]:
    """:func:`_nest` of every row of an :func:`aggregate` frame, read column-wise (a run
    whose ids carry no category prefix has a category per case)."""
    columns = [frame[c].to_list() for c in _NEST_BASE]
    for name, scored, total in _NEST_KEYS:
        columns.append([{"value": v, "n_scored": s, "n_total": t}
                        for v, s, t in zip(frame[name].to_list(), frame[scored].to_list(), frame[total].to_list())])
    keys = (*_NEST_BASE, *(name for name, _s, _t in _NEST_KEYS))
    return [dict(zip(keys, values)) for values in zip(*columns)]


def _nested_categories(frame: pl.DataFrame) -> Dict[Any, Dict[str, Any]]:
    """``summary["by_category"]``: :func:`_nest` of every row of an :func:`aggregate` frame by category."""
    return dict(zip(frame["category"].to_list(), _nest_rows(frame)))


def _worst_categories(frame: pl.DataFrame, limit: int) -> pl.DataFrame:
    """The ``limit`` rows of an :func:`aggregate` frame that ``worst_first`` shows (lowest Hit@k first, no value
    last, more cases first among equal values, then the table's order), in that order."""
    value = pl.col("hit_rate")
    unscored = value.is_null() | value.is_nan()
    return (frame.with_row_index("_position")
            .sort(unscored, pl.when(unscored).then(0.0).otherwise(value + 0.0), -pl.col("hit_rate_n_total").cast(pl.Int64),
                  "_position")
            .head(limit).drop("_position"))


def _category_members(frame: pl.DataFrame) -> Optional[Any]:
    """``summary["by_category"]`` of an :func:`aggregate` frame as :class:`ragmeter._io.OneLineMembers`, written
    from its columns as :func:`ragmeter._io.strict_json` writes the dicts (numbers by orjson, as its
    ``_one_line_members``); None where that layout is not the one (at most ``EXPANDED_MEMBERS`` categories),
    without orjson, or for names that are not all strings."""
    from ragmeter._io import EXPANDED_MEMBERS, OneLineMembers

    names = frame["category"]
    if frame.height <= EXPANDED_MEMBERS or names.dtype != pl.String or names.null_count():
        return None
    try:
        import orjson
    except ImportError:  # pragma: no cover - a dependency
        return None
    tokens = {name: _json_numbers(frame[name], orjson.dumps) for name in frame.columns if name != "category"}
    if any(t is None for t in tokens.values()):
        return None
    lit = pl.lit
    pieces = [_json_keys(names), lit(": {")]
    for i, name in enumerate(_NEST_BASE):
        pieces += [lit(f'{", " if i else ""}"{name}": '), tokens[name]]
    for name, scored, total in _NEST_KEYS:
        pieces += [lit(f', "{name}": {{"value": '), tokens[name], lit(', "n_scored": '), tokens[scored],
                   lit(', "n_total": '), tokens[total], lit("}")]
    pieces.append(lit("}"))
    lines = pl.select(pl.concat_str([p if isinstance(p, pl.Expr) else lit(p) for p in pieces])).to_series()

    def write(fh: Any, separator: str) -> None:
        for start in range(0, lines.len(), _LINES_AT_ONCE):  # a few MB of text at a time
            if start:
                fh.write(separator.encode("utf-8"))
            fh.write(lines.slice(start, _LINES_AT_ONCE).str.join(separator).item().encode("utf-8"))

    return OneLineMembers(lambda separator: lines.str.join(separator).item(), lines.len(), write)


_LINES_AT_ONCE = 8192


def _json_numbers(column: pl.Series, dumps: Any) -> Optional[pl.Series]:
    """Each value of a numeric column as JSON text: integers in decimal, floats as orjson spells them (one
    ``dumps`` of the whole column, cut at its commas), null as ``null``."""
    if column.dtype.is_integer():
        return column.cast(pl.String).fill_null("null")
    if not column.dtype.is_float():
        return None
    text = dumps(column.cast(pl.Float64).to_list()).decode("ascii")
    values = pl.Series([text[1:-1]]).str.split(",").explode()
    if values.len() != column.len():  # pragma: no cover - numbers hold no comma
        raise AssertionError("a JSON number with a comma")
    return values


def _json_keys(names: pl.Series) -> pl.Series:
    """Member names as ``json.dumps(name, ensure_ascii=False)`` writes them: quoted as they are unless one has
    a quote, a backslash or a control character (escaped, then, by the encoder itself)."""
    if names.str.contains(r'[\x00-\x1f"\\]').any():
        return pl.Series([json.dumps(name, ensure_ascii=False) for name in names.to_list()])
    return '"' + names + '"'


def _unfound_evidence(joined: pl.DataFrame, match: Optional[EvidenceMatch] = None) -> List[Dict[str, str]]:
    """Evidence phrases (with their case id) found in no retrieved chunk of the whole run.

    Taken from ``match.phrase_in_run`` when the match was run-wide (no second
    pass over the texts); otherwise every chunk text is searched again.
    """
    if match is not None and match.phrase_in_run is not None:
        lengths = np.diff(match.phrase_offsets)
        phrases = pl.DataFrame({
            "id": joined["id"].gather(np.repeat(np.arange(joined.height), lengths)),
            "phrase": _flatten(joined["expected_evidence"]).cast(pl.String),
        })
        unfound = pl.Series("_unfound", ~match.phrase_in_run.astype(bool))
        return phrases.with_columns(unfound).filter(pl.col("_unfound") & pl.col("phrase").is_not_null()).drop("_unfound").to_dicts()
    phrases = joined.select("id", pl.col("expected_evidence").alias("phrase")).explode("phrase").drop_nulls("phrase")
    if phrases.height == 0:
        return []
    texts = _flat_chunks(joined)["text"].drop_nulls()
    found = phrases_in_texts(phrases["phrase"], texts)
    return phrases.filter(pl.Series(~np.asarray(found, dtype=bool))).to_dicts()


def sweep(golden: Any, run: Any, thresholds: Sequence[float], k: int = 5) -> pl.DataFrame:
    """Reranker-threshold sweep: for each ``t``, keep chunks with ``score >= t``, then the top ``k``.

    Returns one row per (threshold, category) and per threshold overall
    (``category == "ALL"``, first at each threshold; no case may have that category): hit rate, MRR, empty
    retrievals, mean chunks kept,
    each rate with ``n_scored`` / ``n_total``. Chunks without a score pass every
    threshold; a run in which no chunk has a score, or no case retrieved a chunk, is an
    :class:`InputError` (nothing to sweep). Relevance is decided once; the engine evaluates every threshold.
    """
    return sweep_with_warnings(golden, run, thresholds, k)[0]


def sweep_with_warnings(golden: Any, run: Any, thresholds: Sequence[float],
                        k: int = 5) -> Tuple[pl.DataFrame, List[Dict[str, Any]]]:
    """:func:`sweep`, and the warnings about how the system ran that bear on it (structured as ``score``'s, see
    :mod:`ragmeter._warnings`): cases in another retrieval mode (their scores are on another scale, so one
    threshold means another thing for them), golden cases the run lacks and cases it records as failed (an empty
    retrieval at every threshold)."""
    thresholds = check_thresholds(thresholds)
    if not thresholds:
        from ragmeter.errors import InputError

        raise InputError("thresholds: give at least one threshold")
    k = _check_k(k)
    golden, run = _sources(golden, run)
    prepared = _prepared_match(golden, run)
    _check_swept_scores(prepared.joined, run)
    joined = prepared.joined
    warnings = _run_health_warnings(joined, _main_mode(joined), prepared.missing)
    return _sweep_prepared(prepared, thresholds, k), warnings


def _check_swept_scores(joined: pl.DataFrame, run: Any) -> None:
    """An :class:`InputError` for a run in which no retrieved chunk has a score (or no case retrieved a chunk):
    every threshold would keep every chunk (or none), and the table would repeat one row per threshold as if the
    threshold changed nothing. When only some chunks have none, a note (``ragmeter.notes``) says how many: they
    are kept at every threshold, so even above every score a case can still hit."""
    scores = _flat_chunk_field(joined, "score")
    name = source_name(run, "run")
    if scores.dtype.is_float():  # records refuse them when loaded; a frame or Parquet file brings them here
        _refuse_non_finite_scores(joined, scores, name)
    if not scores.len():
        from ragmeter.errors import InputError

        if no_chunk_list_in_run(joined):
            raise no_chunk_list_error(name, cases=joined)
        raise InputError(f"{name}: no case retrieved a chunk ('retrieved' is empty in every case), so every "
                         "threshold would keep nothing: nothing to sweep")
    n_unscored = scores.null_count()
    if not n_unscored:
        return
    if n_unscored == scores.len():
        from ragmeter.errors import InputError

        raise InputError(f"{name}: no retrieved chunk has a score ('retrieved[*].score'), so every threshold would "
                         "keep every chunk: nothing to sweep")
    from ragmeter.dataset import _note

    n_cases = joined["retrieved"].list.eval(pl.element().struct.field("score").is_null()).list.any().sum()
    _note(f"{name}: {n_unscored} of {scores.len()} retrieved chunks (in {n_cases} of {joined.height} cases) have no "
          "score; the sweep keeps them at every threshold")


def _refuse_non_finite_scores(joined: pl.DataFrame, scores: pl.Series, name: str) -> None:
    """An :class:`InputError` naming the cases whose chunks score NaN or infinity: a threshold cannot be compared
    with them (the sweep kept a NaN chunk at every threshold, as if it had no score)."""
    n_bad = int((~scores.is_finite()).sum())  # null stays null, not counted
    if not n_bad:
        return
    from ragmeter.errors import InputError

    bad = joined["retrieved"].list.eval(pl.element().struct.field("score").is_finite().not_()).list.any()
    ids = joined["id"].filter(bad.fill_null(False)).cast(pl.String).to_list()
    shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
    raise InputError(f"{name}: {n_bad} retrieved chunk score(s) are not finite (NaN or infinity), in "
                     f"case{'s' if len(ids) > 1 else ''} {shown}; a threshold cannot be compared with them")


def _sweep_prepared(prepared: _PreparedMatch, thresholds: Sequence[float], k: int = 5) -> pl.DataFrame:
    """:func:`sweep` on an already loaded and matched batch (no second load or match)."""
    joined, match = prepared.joined, prepared.match
    thresholds = check_thresholds(thresholds)
    k = _check_k(k)
    score_arr = _flat_chunk_field(joined, "score").cast(pl.Float64).fill_null(float("nan")).to_numpy()
    grades = match.relevant.astype(np.float64)
    grades.flags.writeable = False  # borrowed by the binding, not copied
    res = _core.threshold_sweep(match.chunk_offsets, grades, score_arr, thresholds, k)
    labeled = match.labeled.astype(bool)
    category = joined["category"]
    if thresholds and category.null_count() == 0:
        return _sweep_table(thresholds, category, labeled, res)
    # Null categories: group the per-case rows as they are.
    return _sweep_frames(thresholds, category, labeled, res)


def _sweep_table(thresholds: List[float], category: pl.Series, labeled: np.ndarray, res: Dict[str, np.ndarray]) -> pl.DataFrame:
    """Per (threshold, category) and per threshold (``ALL``) aggregates of the engine's
    per-case sweep, as per-category sums (no per-case rows)."""
    groups = category.unique().sort()
    codes = category.cast(pl.Enum(groups.to_list())).to_physical().to_numpy().astype(np.int64) if len(groups) else np.zeros(0, np.int64)
    n = len(labeled)
    names = groups.to_list() + ["ALL"]

    def sums(values: np.ndarray) -> np.ndarray:
        return _sums_by_group(values.astype(np.float64), codes, len(groups))

    hit, rr, kept = (np.asarray(res[name], dtype=np.float64).reshape(len(thresholds), n) for name in ("hit", "reciprocal_rank", "kept"))
    hit_ok = labeled & ~np.isnan(hit)
    rr_ok = labeled & ~np.isnan(rr)
    n_scored = sums(hit_ok)
    n_rr = sums(rr_ok)
    n_total = np.broadcast_to(sums(np.ones((1, n))), n_scored.shape)
    kept_ok = ~np.isnan(kept)
    n_kept = sums(kept_ok)
    with np.errstate(invalid="ignore", divide="ignore"):
        hit_rate = np.where(n_scored > 0, sums(np.where(hit_ok, hit, 0.0)) / np.where(n_scored > 0, n_scored, 1), np.nan)
        mrr = np.where(n_rr > 0, sums(np.where(rr_ok, rr, 0.0)) / np.where(n_rr > 0, n_rr, 1), np.nan)
        mean_kept = np.where(n_kept > 0, sums(np.where(kept_ok, kept, 0.0)) / np.where(n_kept > 0, n_kept, 1), np.nan)
    empty = sums(kept == 0)
    n_groups = len(names)
    table = pl.DataFrame({
        "threshold": np.repeat(np.asarray(thresholds, dtype=np.float64), n_groups),
        "category": pl.Series(names * len(thresholds), dtype=pl.String),
        "hit_rate": hit_rate.ravel(), "mrr": mrr.ravel(),
        "n_scored": pl.Series(np.rint(n_scored.ravel()), dtype=pl.Float64).cast(pl.UInt32),
        "n_total": pl.Series(np.rint(n_total.ravel()), dtype=pl.Float64).cast(pl.UInt32),
        "empty_retrievals": pl.Series(np.rint(empty.ravel()), dtype=pl.Float64).cast(pl.UInt32),
        "mean_kept": mean_kept.ravel(),
    }, nan_to_null=True)
    return _overall_first(table)


def _overall_first(table: pl.DataFrame) -> pl.DataFrame:
    """The sweep's rows by threshold, the overall row (``ALL``, a category no case may have) first at each, then
    the categories by name (sorted among them, ``ALL`` came after ``42`` and ``ACL``)."""
    return table.sort(pl.col("threshold"), (pl.col("category") != "ALL").fill_null(True), pl.col("category"))


def _sums_by_group(values: np.ndarray, codes: np.ndarray, n_groups: int) -> np.ndarray:
    """Each row of ``values`` (thresholds x cases) summed over each group's cases (``codes``: a case's group),
    then over all cases in the last column: thresholds x (groups + 1). One pass per row, whatever the number of
    groups (a golden set whose ids give every case a category of its own has as many as cases)."""
    out = np.empty((values.shape[0], n_groups + 1))
    for i, row in enumerate(values):
        out[i, :n_groups] = np.bincount(codes, weights=row, minlength=n_groups)
        out[i, n_groups] = row.sum()
    return out


def _sweep_frames(thresholds: List[float], category: pl.Series, labeled: np.ndarray, res: Dict[str, np.ndarray]) -> pl.DataFrame:
    n = len(labeled)
    frames = []
    for i, t in enumerate(thresholds):
        frames.append(pl.DataFrame({
            "threshold": np.full(n, t), "category": category, "labeled": labeled,
            "hit": np.where(labeled, res["hit"][i], np.nan), "reciprocal_rank": np.where(labeled, res["reciprocal_rank"][i], np.nan),
            "kept": res["kept"][i],
        }, nan_to_null=True))
    per_case = pl.concat(frames)
    aggs = [
        pl.col("hit").mean().alias("hit_rate"), pl.col("reciprocal_rank").mean().alias("mrr"),
        pl.col("hit").count().alias("n_scored"), pl.len().alias("n_total"),
        (pl.col("kept") == 0).sum().alias("empty_retrievals"), pl.col("kept").mean().alias("mean_kept"),
    ]
    overall = per_case.group_by("threshold").agg(aggs).with_columns(pl.lit("ALL").alias("category"))
    by_cat = per_case.group_by("threshold", "category").agg(aggs)
    return _overall_first(pl.concat([overall.select(by_cat.columns), by_cat]))
