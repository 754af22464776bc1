"""Reports built from a results directory: ``report.html`` and ``report.md``.

``write_reports(results_dir)`` reads ``cases.parquet``, ``summary.json`` and the
optional ``judge.parquet`` / ``sweep.parquet`` (see :mod:`ragmeter.report.data`),
diagnoses every case, computes the aggregates with bootstrap intervals and
writes both reports into the same directory.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

__all__ = ["write_reports", "build_readings", "DEFAULT_REPORT_RESAMPLES"]

#: resamples for the report's intervals (compare uses 10,000)
DEFAULT_REPORT_RESAMPLES = 2_000


def build_readings(results: Any, *, n_resamples: int, seed: int) -> Dict[str, Any]:
    from ragmeter.diagnosis import summarize

    return {"diagnosis": summarize(results.cases), "n_resamples": n_resamples, "seed": seed}


def write_reports(
    results_dir: Any,
    *,
    out_dir: Optional[Any] = None,
    n_resamples: int = DEFAULT_REPORT_RESAMPLES,
    seed: Optional[int] = None,
) -> Dict[str, Path]:
    """Write ``report.html`` and ``report.md``; return their paths."""
    from ragmeter import stats
    from ragmeter.report.data import compute_aggregates, load_results
    from ragmeter.report.html import render_html
    from ragmeter.report.markdown import render_markdown

    seed = stats.DEFAULT_SEED if seed is None else seed
    results = load_results(results_dir)
    aggregates = compute_aggregates(results.cases, n_resamples=n_resamples, seed=seed)
    readings = build_readings(results, n_resamples=n_resamples, seed=seed)
    target = Path(out_dir) if out_dir is not None else results.path
    target.mkdir(parents=True, exist_ok=True)
    html_path = target / "report.html"
    md_path = target / "report.md"
    html_path.write_text(render_html(results, aggregates, readings), encoding="utf-8")
    md_path.write_text(render_markdown(results, aggregates, readings), encoding="utf-8")
    return {"html": html_path, "markdown": md_path}
