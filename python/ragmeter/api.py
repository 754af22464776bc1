"""The in-memory evaluation API for platforms and notebooks: ``ragmeter.evaluate(...) -> EvalResult``.

::

    import ragmeter
    from ragmeter.judge import JudgeConfig, RubricMetric

    result = ragmeter.evaluate("golden.jsonl", "run.jsonl", k=5,
                               judge=JudgeConfig(base_url="https://api.openai.com/v1", model="gpt-4o-mini"))
    result.cases                  # Polars: one row per case (retrieval, judge scores, diagnosis)
    result.summary["retrieval"]["overall"]["hit_rate"]   # {'value': ..., 'n_scored': ..., 'n_total': ...}
    result.write("results")       # the folder `ragmeter eval --out results` writes
    html = result.report_html()
    comp = result.compare(baseline, gate="hit>=-2pp,faithfulness>=-3pp")
    comp.passed, comp.failures, comp.to_markdown()

An :class:`EvalResult` is also what :meth:`EvalResult.load` reads back from a results folder, so a stored
baseline compares with a fresh run (see :mod:`ragmeter.testing`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Union

import polars as pl

from ragmeter.errors import InputError

if TYPE_CHECKING:  # compare is imported when used: it pulls in the statistics
    from ragmeter.compare import Comparison

__all__ = ["EvalResult", "as_source", "case_source"]


def _is_pandas(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "pandas"


def as_source(source: Any, name: str) -> Any:
    """An input the loaders take (a path, a DataFrame, a list of dicts) from what a platform hands over:
    Arrow tables, Polars lazy frames, dicts of columns, Hugging Face ``datasets.Dataset`` (``to_arrow()`` /
    ``to_pandas()``), iterables of dicts."""
    import os

    if isinstance(source, (str, os.PathLike, pl.DataFrame, list, tuple)) or _is_pandas(source):
        return source
    if isinstance(source, (bytes, bytearray, memoryview)):  # iterated, it would be rows of numbers
        raise InputError(f"{name}: expected a path (a str or pathlib.Path), a DataFrame, an Arrow table, a list of "
                         f"dicts or a datasets.Dataset, got {type(source).__name__}")
    if isinstance(source, pl.LazyFrame):
        return source.collect()
    if type(source).__module__.split(".")[0] == "pyarrow":
        return pl.from_arrow(source)
    for method in ("to_arrow", "to_pandas"):  # Hugging Face datasets and similar table types
        convert = getattr(source, method, None)
        if callable(convert):
            table = convert()
            if method == "to_arrow":
                return pl.from_arrow(table)
            from ragmeter.dataset import polars_from_pandas

            return polars_from_pandas(table, name)
    if isinstance(source, Mapping):
        if any(isinstance(v, (str, int, float)) for v in source.values()):  # a record's scalar fields
            raise InputError(f"{name}: a mapping is read as columns (each a list of values), and this one has "
                             f"single values; one case? pass [case]")
        try:
            return pl.DataFrame(dict(source))
        except Exception as exc:  # noqa: BLE001 - polars raises several types for ragged columns
            raise InputError(f"{name}: a mapping must hold columns of equal length ({exc})") from None
    if hasattr(source, "__iter__"):
        return list(source)
    raise InputError(f"{name}: expected a path, a DataFrame, an Arrow table, a list of dicts or a datasets.Dataset, "
                     f"got {type(source).__name__}")


def case_source(source: Any, name: str) -> Any:
    """:func:`as_source` for a golden set or a run: one without a single row (an empty list, a frame of 0 rows) is
    an :class:`InputError` naming ``name``, as an empty file is; it would be scored as every case missing, or
    blame the other input."""
    out = as_source(source, name)
    if isinstance(out, (list, tuple, pl.DataFrame)) or _is_pandas(out):
        if len(out) == 0:
            raise InputError(f"{name}: no cases (an empty {type(source).__name__}); nothing to measure")
    return out


def _check_folder(name: str, value: Any, expected: str) -> None:
    import os

    if not isinstance(value, (str, os.PathLike)):
        raise InputError(f"{name}: expected {expected}, got {type(value).__name__}")
    if os.fspath(value) in ("", b""):  # not the current folder
        raise InputError(f"{name}: an empty path (an unset variable?); expected {expected}")


def _as_result(value: Any, name: str) -> "EvalResult":
    """``value`` as an :class:`EvalResult`: itself, the retrieval of a :class:`ragmeter.retrieval.ScoreResult`
    (what :func:`ragmeter.score` returns: a user checking retrieval only has that), or the results folder it
    names, read with :meth:`EvalResult.load`; anything else is an :class:`InputError` naming ``name``."""
    from ragmeter.retrieval import ScoreResult

    if isinstance(value, EvalResult):
        return value
    if isinstance(value, ScoreResult):
        return _retrieval_result(value)
    _check_folder(name, value, "an EvalResult, a ScoreResult or a results folder (a path)")
    return EvalResult.load(value)


def _retrieval_result(scored: Any) -> "EvalResult":
    """A :class:`ragmeter.retrieval.ScoreResult` as the :class:`EvalResult` of an evaluation without a judge or
    answers: its cases and chunks, its summary under ``"retrieval"`` (as :meth:`EvalResult.load` reads the folder
    ``ragmeter score --out`` writes)."""
    summary = _evaluate_layout(dict(scored.summary))
    return EvalResult(cases=scored.cases, chunks=scored.chunks, judge=None, summary=summary)


#: the members of a ``ragmeter score`` summary that stay at the top level in :func:`ragmeter.evaluate`'s layout
_SUMMARY_TOP_LEVEL = ("warnings", "files")


def _evaluate_layout(summary: Dict[str, Any]) -> Dict[str, Any]:
    """A results folder's summary in :func:`ragmeter.evaluate`'s layout. ``ragmeter score --out`` writes the
    retrieval summary at the top level (``overall``, ``k``, ...): it moves under ``"retrieval"``, its warnings
    and file list stay where evaluate keeps them, and so do the keys naming its writer (first: a folder
    :meth:`EvalResult.write` makes of it still says its format and command). Any other summary is returned as it
    is."""
    from ragmeter._io import WRITER_KEYS
    from ragmeter.report.data import written_by_score

    if not written_by_score(summary):
        return summary
    top = WRITER_KEYS + _SUMMARY_TOP_LEVEL
    out: Dict[str, Any] = {k: summary[k] for k in WRITER_KEYS if k in summary}
    out["retrieval"] = {k: v for k, v in summary.items() if k not in top}
    out.update({k: summary[k] for k in _SUMMARY_TOP_LEVEL if k in summary})
    return out


def _report_paths(folder: Path) -> Dict[str, str]:
    """``summary["reports"]`` of a results folder: kept in memory only (summary.json is not rewritten when the
    folder is moved), so written by :meth:`EvalResult.write` and restored by :meth:`EvalResult.load`."""
    return {"html": str(folder / "report.html"), "markdown": str(folder / "report.md")}


@dataclass
class EvalResult:
    """One evaluation in memory: what a results folder holds, as frames and a dict."""

    cases: pl.DataFrame            #: one row per case (cases.parquet)
    chunks: pl.DataFrame           #: one row per retrieved chunk (chunks.parquet)
    judge: Optional[pl.DataFrame]  #: one row per case x metric x repeat (judge.parquet); None when not judged
    summary: Dict[str, Any]        #: summary.json (with every warning's full case list until written)
    sweep: Optional[pl.DataFrame] = None  #: the threshold sweep (sweep.parquet) when thresholds were given
    name: Optional[str] = None     #: the title of reports and comparisons
    #: one row per (case, collected repeat) (repeats.parquet) when the run holds collected repeats, else None
    repeats: Optional[pl.DataFrame] = None
    #: the results folder this result was read from or last written to, to recognise a run compared with itself
    _folder: Optional[Path] = field(default=None, init=False, repr=False, compare=False)

    def __repr__(self) -> str:  # the frames' own reprs would fill a notebook cell
        judged = sorted(self.judge["metric"].unique().to_list()) if self.judge is not None else []
        hit = ((self.summary.get("retrieval") or {}).get("overall") or {}).get("hit_rate") or {}
        return (f"EvalResult({self.cases.height} cases, hit_rate {hit.get('value')} "
                f"({hit.get('n_scored')}/{hit.get('n_total')} scored), judged: {', '.join(judged) or 'no'})")

    # -- writing -------------------------------------------------------------------------------------------
    def write(self, out_dir: Any, *, reports: bool = True) -> Path:
        """Write the results folder ``ragmeter eval`` writes (all of it or nothing; see
        :mod:`ragmeter.evaluation`); return its path. ``summary`` then lists the files written."""
        from ragmeter._io import (check_out_folder, results_folder, strict_json, write_chunk_frame, write_frame,
                                  write_text)
        from ragmeter._warnings import for_disk, full_list
        from ragmeter.evaluation import REPEATS_FILE, _run_files

        from ragmeter._args import check_arg

        reports = check_arg("reports", reports, "bool")  # "no" wrote them: a non-empty string is true
        out = check_out_folder(out_dir)
        summary = {k: v for k, v in self.summary.items() if k != "reports"}
        summary["files"] = _run_files(self.judge is not None, self.sweep is not None, reports, self.repeats is not None)
        with results_folder(out) as tmp:
            write_frame(self.cases, tmp / "cases.parquet")
            write_chunk_frame(self.chunks, tmp / "chunks.parquet")
            if self.judge is not None:
                write_frame(self.judge, tmp / "judge.parquet")
            if self.sweep is not None:
                write_frame(self.sweep, tmp / "sweep.parquet")
            if self.repeats is not None:
                write_frame(self.repeats, tmp / REPEATS_FILE)
            write_text(tmp / "warnings.json", strict_json(full_list(summary)) + "\n")
            write_text(tmp / "summary.json", strict_json(for_disk(summary)) + "\n")
            if reports:
                from ragmeter.report import write_reports

                write_reports(tmp, name=self.name or out.name)
        if self.repeats is None and (out / REPEATS_FILE).is_file():
            (out / REPEATS_FILE).unlink()  # an earlier repeated run's table is not this run's
        if reports:
            summary["reports"] = _report_paths(out)
        self.summary = summary
        self._folder = out
        return out

    @classmethod
    def load(cls, directory: Any) -> "EvalResult":
        """Read a results folder (``ragmeter eval --out``, :meth:`write`) back; errors name what is missing. A
        ``ragmeter score --out`` folder loads too, its summary in evaluate's layout (under ``"retrieval"``)."""
        from ragmeter.compare import load_repeats
        from ragmeter.report.data import _read_parquet, load_results

        _check_folder("EvalResult.load", directory, "a results folder (a path)")
        res = load_results(directory)
        chunks_path = Path(directory) / "chunks.parquet"
        chunks = _read_parquet(chunks_path, res.summary) if chunks_path.is_file() else \
            pl.DataFrame({"id": []}, schema={"id": pl.Utf8})
        summary = _evaluate_layout(res.summary)
        if all(Path(p).is_file() for p in _report_paths(Path(directory)).values()):
            summary["reports"] = _report_paths(Path(directory))  # as write() left it: the summary round-trips
        result = cls(cases=res.cases, chunks=chunks, judge=res.judge, summary=summary,
                     sweep=res.sweep, name=str(res.path), repeats=load_repeats(res))
        result._folder = Path(directory)
        return result

    # -- reading ------------------------------------------------------------------------------------------
    def _results(self, name: Optional[str] = None) -> Any:
        """The :class:`ragmeter.report.data.Results` of a folder holding this result, built from the frames."""
        from ragmeter._io import strict_json
        from ragmeter._warnings import for_disk
        from ragmeter.report.data import Results, _finite, register_custom_metrics

        warnings: List[Dict[str, Any]] = []
        cases = _finite(self.cases, Path("cases.parquet"), warnings)
        register_custom_metrics(cases, self.summary if isinstance(self.summary, dict) else None)
        cases = cases.with_columns(pl.col("category").cast(pl.Utf8).fill_null("(none)"))
        judge = _finite(self.judge, Path("judge.parquet"), warnings) if self.judge is not None else None
        summary = json.loads(strict_json(for_disk(self.summary)))  # exactly what summary.json would hold
        title = name or self.name or "ragmeter evaluation"
        return Results(Path(title), cases, summary, judge, self.sweep, warnings=warnings, name=title)

    def report_html(self, *, n_resamples: Optional[int] = None, seed: Optional[int] = None) -> str:
        """``report.html`` as a string, built from the frames (nothing is written)."""
        return self._report("html", n_resamples, seed)

    def report_markdown(self, *, n_resamples: Optional[int] = None, seed: Optional[int] = None) -> str:
        """``report.md`` as a string, built from the frames (nothing is written)."""
        return self._report("markdown", n_resamples, seed)

    def _report(self, kind: str, n_resamples: Optional[int], seed: Optional[int]) -> str:
        from ragmeter import stats
        from ragmeter.report import DEFAULT_REPORT_RESAMPLES, build_readings
        from ragmeter.report.data import compute_aggregates

        n, seed = stats.check_resampling(DEFAULT_REPORT_RESAMPLES if n_resamples is None else n_resamples, seed)
        seed = stats.DEFAULT_SEED if seed is None else seed
        results = self._results()
        # as write_reports: without answers, the answer-based columns are shown as not measured, not aggregated
        aggregates = compute_aggregates(results.aggregated_cases(), n_resamples=n, seed=seed)
        readings = build_readings(results, n_resamples=n, seed=seed)
        if kind == "html":
            from ragmeter.report.html import render_html

            return str(render_html(results, aggregates, readings))
        from ragmeter.report.markdown import render_markdown

        return str(render_markdown(results, aggregates, readings))

    # -- comparing ----------------------------------------------------------------------------------------
    def compare(self, baseline: Union["EvalResult", str, Path], *, gate: Optional[str] = None,
                force: bool = False, n_resamples: int = 10_000, seed: Optional[int] = None) -> "Comparison":
        """This result (the candidate) against ``baseline`` (an :class:`EvalResult` or a results folder), case by
        case, as ``ragmeter compare BASE CAND --gate RULES`` does; returns a
        :class:`ragmeter.compare.Comparison` with ``passed``, ``failures`` and ``to_markdown()``.

        Runs on different golden sets (or retrieval-mode mixes, or k) are refused
        (:class:`ragmeter.compare.CompareRefused`) unless ``force``; runs sharing no case always are."""
        from ragmeter import gate as gates
        from ragmeter._args import check_arg
        from ragmeter.compare import CompareRefused, _check, compare_frames, self_comparison_warning
        from ragmeter.stats import check_resampling

        n_resamples, seed = check_resampling(n_resamples, seed)  # before the baseline is read
        gate = check_arg("gate", gate, "text", optional=True)
        force = check_arg("force", force, "bool")  # "no" forced the comparison: a non-empty string is true
        base = _as_result(baseline, "baseline")
        b, c = base._results("baseline"), self._results("candidate")
        rules = gates.parse_rules(gate) if gate is not None else None  # after the metrics are known
        problems, notes = _check(b, c)
        if problems and not force:
            raise CompareRefused("refusing to compare: " + "; ".join(problems)
                                 + " (pass force=True to compare the common cases anyway)")
        comp = compare_frames(b.cases, c.cases, base_name=base.name or "baseline",
                              cand_name=self.name or "candidate", problems=problems, forced=bool(problems),
                              n_resamples=n_resamples, seed=seed, base_repeats=base.repeats,
                              cand_repeats=self.repeats)
        comp.notes[:0] = notes
        same = self._same_run(base)
        if same:
            comp.warnings.insert(0, self_comparison_warning(same))
        if rules is not None:
            comp.gate_results = gates.evaluate(rules, comp)
        return comp

    def _same_run(self, other: "EvalResult") -> Optional[str]:
        """What makes ``other`` this very run ("the same result", "the same folder (D)"), or None. Two
        evaluations of the same files are not: a deterministic pipeline scores the same twice, and that is a
        measurement."""
        from ragmeter.compare import _same_folder

        if other is self:
            return "the same result"
        if self._folder is not None and other._folder is not None and _same_folder(self._folder, other._folder):
            return f"the same folder ({self._folder.resolve()})"
        return None
