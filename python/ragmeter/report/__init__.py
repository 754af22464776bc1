"""Reports built from a results directory: ``report.html`` and ``report.md``.

``write_reports(results_dir)`` reads ``cases.parquet``, ``summary.json`` and the
optional ``judge.parquet`` / ``sweep.parquet`` (see :mod:`ragmeter.report.data`; ``chunks.parquet`` too
when ``cases.parquet`` has no ``retrieved`` column, as ``score --out`` writes it),
diagnoses every case, computes the aggregates with bootstrap intervals and
writes both reports into the same directory.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Optional

__all__ = ["write_reports", "build_readings", "check_report_resampling", "DEFAULT_REPORT_RESAMPLES",
           "MAX_REPORT_RESAMPLES"]

#: resamples for the report's intervals (compare uses 10,000)
DEFAULT_REPORT_RESAMPLES = 2_000
#: at most this many: the resample means are held per metric and shown category (1.2 MB per 10,000
#: resamples, category and 15 metrics), and the bounds' last shown digit settles long before
MAX_REPORT_RESAMPLES = 100_000


def check_report_resampling(n_resamples: Any, seed: Any, names: tuple = ("n_resamples", "seed")) -> tuple:
    """``(n_resamples, seed)`` checked as :func:`ragmeter.stats.check_resampling` does, and ``n_resamples`` at
    most :data:`MAX_REPORT_RESAMPLES`; :class:`~ragmeter.errors.InputError` naming them as ``names`` says."""
    from ragmeter import stats
    from ragmeter.errors import InputError

    n_resamples, seed = stats.check_resampling(n_resamples, seed, names=names)
    if n_resamples > MAX_REPORT_RESAMPLES:
        raise InputError(f"{names[0]} must be at most {MAX_REPORT_RESAMPLES:,} (memory grows with it, and the "
                         f"intervals do not change beyond their last digit), got {n_resamples}")
    return n_resamples, seed


def build_readings(results: Any, *, n_resamples: int, seed: int) -> Dict[str, Any]:
    from ragmeter.diagnosis import summarize

    return {"diagnosis": summarize(results.cases), "n_resamples": n_resamples, "seed": seed}


def write_reports(
    results_dir: Any,
    *,
    out_dir: Optional[Any] = None,
    n_resamples: int = DEFAULT_REPORT_RESAMPLES,
    seed: Optional[int] = None,
    name: Optional[str] = None,
    on_warning: Optional[Callable[[str], None]] = None,
    summary: Optional[Dict[str, Any]] = None,
) -> Dict[str, Path]:
    """Write ``report.html`` and ``report.md`` (together: a reader never sees half a report, and one that
    cannot be written leaves the other unwritten too); return their paths. ``name`` titles the reports
    (default: the summary's ``name``, else the folder's name); ``on_warning`` receives each problem found
    while reading the folder (non-finite values, ...), which the reports show too. ``summary`` replaces the
    folder's ``summary.json`` (one about to be written with it)."""
    from ragmeter import stats
    from ragmeter._io import atomic_outputs, ensure_folder, write_text
    from ragmeter.report.data import (check_calibration_section, check_summary_shape, compute_aggregates,
                                      load_results)
    from ragmeter.report.html import render_html
    from ragmeter.report.markdown import render_markdown

    n_resamples, seed = check_report_resampling(n_resamples, seed)
    seed = stats.DEFAULT_SEED if seed is None else seed
    results = load_results(results_dir)
    if summary is not None:
        results.summary = summary
    # the summary the reports read: the folder's, or the one about to be written (a stale file's shape is moot)
    check_summary_shape(results.summary, results.path / "summary.json")
    check_calibration_section(results.summary, results.path / "summary.json")
    if name is not None:
        results.name = name
    for w in results.warnings:
        if on_warning is not None:
            on_warning(str(w["message"]))
    aggregates = compute_aggregates(results.aggregated_cases(), n_resamples=n_resamples, seed=seed)
    readings = build_readings(results, n_resamples=n_resamples, seed=seed)
    html = render_html(results, aggregates, readings)
    markdown = render_markdown(results, aggregates, readings)
    target = ensure_folder(out_dir if out_dir is not None else results.path)
    paths = {"html": target / "report.html", "markdown": target / "report.md"}
    # both written, then both moved into place: one that cannot be (a folder of its name) leaves neither written
    with atomic_outputs(target) as tmp:
        for key, text in (("html", html), ("markdown", markdown)):
            write_text(tmp / paths[key].name, text)
    return paths
