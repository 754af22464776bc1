"""Repeat runs of the judge (``ragmeter eval --repeat N``): spread per metric and verdict flips.

The judge is asked ``N`` times about every case. Repeat 1 may be answered from
the cache (so a rerun reproduces it); repeats 2..N bypass the cache (no read, no
write), so each is a fresh judgement. For every judge metric, and for the
``correct`` verdict of ``correctness``, :func:`repeat_summary` reports

* ``per_repeat``: the mean over the cases scored in that repeat (unscored rows,
  i.e. failed or skipped calls and null scores, are left out, as in the report),
  with ``n_scored`` per repeat;
* ``mean``, ``std`` (sample standard deviation, ``ddof=1``), ``min`` and ``max``
  of those per-repeat means: how much the headline number moves between runs;
* ``n_compared``: cases scored in at least two repeats; ``n_flipped``: those
  whose verdict differs between repeats (``correct`` changes, or the score
  changes by more than 1e-9); ``flip_rate = n_flipped / n_compared``.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import polars as pl

__all__ = ["repeat_summary", "repeat_table", "repeat_sections", "incomplete_runs", "spread", "EPS"]

EPS = 1e-9


def _stats(values: List[Optional[float]]) -> Dict[str, Optional[float]]:
    xs = [v for v in values if v is not None]
    if not xs:
        return {"mean": None, "std": None, "min": None, "max": None}
    mean = sum(xs) / len(xs)
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else None
    return {"mean": round(mean, 6), "std": None if std is None else round(std, 6),
            "min": round(min(xs), 6), "max": round(max(xs), 6)}


def spread(frame: pl.DataFrame, column: str, n_repeats: int) -> Dict[str, Any]:
    """One metric across repeats: ``per_repeat`` means over scored cases with ``n_scored``, their mean, std
    (ddof=1), min and max, and the flips (see the module docstring). ``frame``: the metric's rows of every
    repeat (``id``, ``repeat`` 1..``n_repeats``, value ``column``; null = unscored). Used for judge repeats and
    for collected repeats (:mod:`ragmeter.evaluation`)."""
    scored = frame.filter(pl.col(column).is_not_null())
    per = scored.group_by("repeat").agg(pl.col(column).cast(pl.Float64).mean().alias("m"), pl.len().alias("n"))
    means = {int(r): float(m) for r, m in zip(per["repeat"], per["m"])}
    counts = {int(r): int(n) for r, n in zip(per["repeat"], per["n"])}
    per_repeat = [None if r not in means else round(means[r], 6) for r in range(1, n_repeats + 1)]
    by_case = scored.group_by("id").agg(
        pl.len().alias("k"),
        (pl.col(column).cast(pl.Float64).max() - pl.col(column).cast(pl.Float64).min()).alias("range"),
    ).filter(pl.col("k") >= 2)
    n_compared = by_case.height
    n_flipped = int(by_case.filter(pl.col("range") > EPS).height)
    return {
        "per_repeat": per_repeat,
        "n_scored": [counts.get(r, 0) for r in range(1, n_repeats + 1)],
        **_stats(per_repeat),
        "n_compared": n_compared,
        "n_flipped": n_flipped,
        "flip_rate": round(n_flipped / n_compared, 6) if n_compared else None,
    }


def repeat_summary(frames: Sequence[pl.DataFrame]) -> Dict[str, Any]:
    """The ``repeats`` section of ``summary.json`` from the judge frames of repeats 1..N (in order)."""
    n = len(frames)
    parts = []
    for r, f in enumerate(frames, start=1):
        cols = [c for c in ("id", "metric", "status", "score", "correct") if c in f.columns]
        parts.append(f.select(cols).with_columns(pl.lit(r, dtype=pl.Int64).alias("repeat")))
    rows = pl.concat(parts, how="diagonal_relaxed") if parts else pl.DataFrame()
    metrics: Dict[str, Any] = {}
    if rows.height:
        ok = pl.col("status") == "ok"
        for metric in rows["metric"].unique(maintain_order=True).to_list():
            part = rows.filter(pl.col("metric") == metric)
            metrics[metric] = spread(part.with_columns(pl.when(ok).then(pl.col("score")).alias("v")), "v", n)
            if metric == "correctness" and "correct" in part.columns:
                metrics["correct"] = spread(
                    part.with_columns(pl.when(ok).then(pl.col("correct").cast(pl.Float64)).alias("v")), "v", n)
    return {
        "n": n,
        "cache": "repeat 1 may be answered from the cache; repeats 2..N bypass it (no read, no write)",
        "metrics": metrics,
        "definitions": "per_repeat: mean over scored cases of each repeat; mean/std(ddof=1)/min/max: of those "
                       "means; flip: a case scored in >= 2 repeats whose verdict (correct, or score) differs",
    }


def repeat_table(repeats: Dict[str, Any]) -> Tuple[List[str], List[List[str]]]:
    """Headers and rows of the repeats table shown in the Markdown and HTML reports."""
    headers = ["metric", "mean of repeats", "std", "min .. max", "per repeat", "flipped cases"]
    rows = []

    from ragmeter.report.data import METRICS

    rates = {name for name, m in METRICS.items() if m.kind == "rate"}
    for metric, e in (repeats.get("metrics") or {}).items():
        rate = metric in rates  # as the rest of the report shows it: 2.0%, a spread in points

        def f(v: Optional[float], unit: str = "%") -> str:
            return "n/a" if v is None else (f"{100 * v:.1f}{unit}" if rate else f"{v:.3f}")

        flips = "n/a" if e.get("flip_rate") is None else (
            f"{e['n_flipped']}/{e['n_compared']} ({100 * e['flip_rate']:.1f}%)")
        rows.append([str(metric), f(e.get("mean")), f(e.get("std"), "pp"), f"{f(e.get('min'))} .. {f(e.get('max'))}",
                     _per_repeat(e, f), flips])
    return headers, rows


def _per_repeat(entry: Dict[str, Any], f: Any) -> str:
    """``2.060 (50/51), n/a (0/51)``: each repeat's mean and the rows it is over (the means alone when the
    summary does not count the rows, an older folder)."""
    means, scored, totals = entry.get("per_repeat") or [], entry.get("n_scored") or [], entry.get("n_total") or []
    if len(scored) == len(means) == len(totals):
        return ", ".join(f"{f(v)} ({s}/{t})" for v, s, t in zip(means, scored, totals))
    return ", ".join(f(v) for v in means)


def incomplete_runs(section: Dict[str, Any]) -> List[str]:
    """One phrase per repeat with judge rows not judged: ``repeat 2: 51 of 51 judge rows not judged (51
    failed)``, with the rows skipped at ``--budget`` when there are any."""
    out = []
    for run in section.get("runs") or []:
        inc = run.get("incomplete") or {}
        if inc.get("rows"):
            budget = f", {inc['skipped_budget']} skipped at --budget" if inc.get("skipped_budget") else ""
            out.append(f"repeat {run.get('repeat')}: {inc['rows']} of {inc['of']} judge rows not judged "
                       f"({inc.get('failed', 0)} failed{budget})")
    return out


def repeat_sections(summary: Dict[str, Any]) -> List[Tuple[str, str, str]]:
    """The repeat tables a report shows: (summary key, title, note) for judge repeats and collected repeats."""
    out = []
    judged = summary.get("repeats")
    if isinstance(judged, dict) and judged.get("metrics"):
        failed = incomplete_runs(judged)
        out.append(("repeats", f"Repeat runs ({judged.get('n')} judgements per case)",
                    "Repeats 2..N bypass the judge cache; cases, diagnosis and intervals above use repeat 1. "
                    "Per repeat: the mean (rows scored / rows)." + (f" Not judged: {'; '.join(failed)}." if failed
                                                                    else "")))
    collected = summary.get("collected_repeats")
    if isinstance(collected, dict) and collected.get("metrics"):
        out.append(("collected_repeats", f"Collected repeats ({collected.get('n')} runs of the system per case)",
                    "Each repeat was collected, scored and judged once; cases, diagnosis and intervals above use "
                    "repeat 1, and repeats.parquet holds every (case, repeat)."))
    return out
