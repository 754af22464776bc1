"""Reading a results directory and computing the aggregates the reports show.

A results directory (written by ``ragmeter eval`` / ``ragmeter score --out``) holds

* ``cases.parquet`` (required): one row per case, the retrieval columns of the
  scorer (``id``, ``category``, ``labeled``, ``hit``, ``reciprocal_rank``, ...)
  joined with the judge columns (``correct``, ``correctness_score``,
  ``faithfulness_score``, ... and ``<metric>_status``), the run's ``answer``, and
  the chunks as ``retrieved``: list of struct{file, chunk_id, text, score, relevant};
* ``summary.json`` (required): tool version, input hashes, settings, timestamps;
* ``judge.parquet`` (optional): one row per case x metric with ``reason`` etc.;
* ``sweep.parquet`` (optional): a threshold sweep table.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import polars as pl

from ragmeter.errors import InputError

__all__ = [
    "METRICS",
    "RESULTS_FORMAT",
    "Results",
    "load_results",
    "metric_frame",
    "compute_aggregates",
]

#: results-folder format understood by this version; summary.json may carry
#: ``results_format``; a different value means another version wrote the folder
RESULTS_FORMAT = 1

REQUIRED_CASE_COLUMNS = ["id", "category", "labeled", "hit"]

JUDGE_METRICS = ["correctness", "faithfulness", "answer_relevancy", "context_precision", "context_recall"]


@dataclass(frozen=True)
class Metric:
    name: str
    column: str
    kind: str  # "rate" (boolean, shown in %) or "score" (0-1 unless noted)
    label: str
    status: Optional[str] = None  # judge status column gating the value


#: metric name (as used in compare / gate rules) -> definition
METRICS: Dict[str, Metric] = {
    m.name: m
    for m in [
        Metric("hit", "hit", "rate", "Hit@k (chunk)"),
        Metric("mrr", "reciprocal_rank", "score", "MRR"),
        Metric("map", "average_precision", "score", "MAP"),
        Metric("ndcg", "ndcg", "score", "NDCG"),
        Metric("precision", "precision", "score", "Precision@k"),
        Metric("file_hit", "file_hit", "rate", "Hit@k (file)"),
        Metric("all_files_hit", "all_files_hit", "rate", "All files hit"),
        Metric("evidence_recall", "evidence_recall", "score", "Evidence recall"),
        Metric("correct", "answer_correct", "rate", "Correct", "correctness_status"),
        Metric("correctness", "correctness_score", "score", "Correctness score", "correctness_status"),
        Metric("faithfulness", "faithfulness_score", "score", "Faithfulness", "faithfulness_status"),
        Metric("answer_relevancy", "answer_relevancy_score", "score", "Answer relevancy", "answer_relevancy_status"),
        Metric("context_precision", "context_precision_score", "score", "Context precision", "context_precision_status"),
        Metric("context_recall", "context_recall_score", "score", "Context recall", "context_recall_status"),
        Metric("refusal", "refusal", "rate", "Refusal rate"),
    ]
}


@dataclass
class Results:
    path: Path
    cases: pl.DataFrame  # diagnosed
    summary: Dict[str, Any]
    judge: Optional[pl.DataFrame] = None
    sweep: Optional[pl.DataFrame] = None
    warnings: List[str] = field(default_factory=list)


def _read_parquet(path: Path) -> pl.DataFrame:
    try:
        return pl.read_parquet(path)
    except Exception as exc:  # polars raises several error types for corrupt files
        raise InputError(f"{path}: cannot read Parquet file ({exc})") from None


def load_results(directory: Any) -> Results:
    """Load and validate a results directory; raise :class:`InputError` naming what is missing."""
    from ragmeter.diagnosis import diagnose

    root = Path(directory)
    if not root.is_dir():
        raise InputError(f"{root}: results directory not found")
    missing = [name for name in ("cases.parquet", "summary.json") if not (root / name).is_file()]
    if missing:
        raise InputError(
            f"{root}: not a complete ragmeter results folder: missing {', '.join(missing)} "
            "(written by `ragmeter eval --out DIR` or `ragmeter score --out DIR`)"
        )
    try:
        summary = json.loads((root / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{root / 'summary.json'}: invalid JSON ({exc})") from None
    if not isinstance(summary, dict):
        raise InputError(f"{root / 'summary.json'}: expected a JSON object")
    fmt = summary.get("results_format")
    if fmt is not None and fmt != RESULTS_FORMAT:
        raise InputError(
            f"{root / 'summary.json'}: results_format {fmt!r} was written by another version of ragmeter "
            f"(version {summary.get('version', summary.get('ragmeter_version', '?'))}); this version reads "
            f"results_format {RESULTS_FORMAT}: re-run `ragmeter eval` or use the matching version"
        )
    cases = _read_parquet(root / "cases.parquet")
    absent = [c for c in REQUIRED_CASE_COLUMNS if c not in cases.columns]
    if absent:
        raise InputError(
            f"{root / 'cases.parquet'}: missing column(s) {', '.join(absent)} "
            "(written by another version of ragmeter, or not a cases table)"
        )
    if cases.get_column("id").null_count():
        raise InputError(f"{root / 'cases.parquet'}: column id has nulls")
    if cases.get_column("id").n_unique() != cases.height:
        raise InputError(f"{root / 'cases.parquet'}: duplicate ids")
    judge = _read_parquet(root / "judge.parquet") if (root / "judge.parquet").is_file() else None
    if judge is not None:
        absent = [c for c in ("id", "metric", "status") if c not in judge.columns]
        if absent:
            raise InputError(f"{root / 'judge.parquet'}: missing column(s) {', '.join(absent)}")
    sweep = _read_parquet(root / "sweep.parquet") if (root / "sweep.parquet").is_file() else None
    if sweep is not None and "threshold" not in sweep.columns:
        raise InputError(f"{root / 'sweep.parquet'}: missing column threshold")
    cases = cases.with_columns(pl.col("category").cast(pl.Utf8).fill_null("(none)"))
    return Results(root, diagnose(cases), summary, judge, sweep)


def metric_frame(cases: pl.DataFrame, names: Optional[List[str]] = None) -> pl.DataFrame:
    """``id``, ``category`` and one Float64 column per metric (null = unscored).

    Judge scores count only when their ``<metric>_status`` is ``ok`` (or absent).
    Metrics whose column is absent are left out.
    """
    exprs = [pl.col("id"), pl.col("category")]
    for name in names or list(METRICS):
        m = METRICS[name]
        if m.column not in cases.columns:
            continue
        value = pl.col(m.column).cast(pl.Float64)
        if m.status and m.status in cases.columns:
            value = pl.when(pl.col(m.status).is_null() | (pl.col(m.status) == "ok")).then(value).otherwise(None)
        exprs.append(value.fill_nan(None).alias(name))
    return cases.select(exprs)


def compute_aggregates(
    cases: pl.DataFrame, *, n_resamples: int = 10_000, seed: Optional[int] = None
) -> Dict[str, Any]:
    """Per metric, overall and per category: value, n_scored, n_total, 95% interval."""
    from ragmeter import stats

    seed = stats.DEFAULT_SEED if seed is None else seed
    mf = metric_frame(cases)
    names = [c for c in mf.columns if c not in ("id", "category")]
    values = mf.select(names).to_numpy().astype(np.float64) if names else np.zeros((mf.height, 0))
    cats = mf.get_column("category").to_numpy().astype(str)
    out: Dict[str, Any] = {"metrics": names, "overall": {}, "by_category": {}}
    if not names or mf.height == 0:
        return out
    res = stats.bootstrap_means(values, n_resamples=n_resamples, seed=seed, groups=cats)
    for j, name in enumerate(names):
        out["overall"][name] = stats.Aggregate.from_resamples(values[:, j], res[None][:, j]).to_dict()
    for cat in sorted(set(cats.tolist())):
        sel = cats == cat
        out["by_category"][cat] = {
            name: stats.Aggregate.from_resamples(values[sel, j], res[cat][:, j]).to_dict()
            for j, name in enumerate(names)
        }
    return out


def percentile(values: np.ndarray, q: float) -> Optional[float]:
    v = values[~np.isnan(values)]
    return float(np.percentile(v, q)) if v.size else None


def cost_latency(results: Results) -> Dict[str, Any]:
    """System vs judge cost, latency p50/p95 (whatever columns are present)."""
    out: Dict[str, Any] = {}
    cases = results.cases
    for col, key in (("latency_ms", "system_latency_ms"),):
        if col in cases.columns:
            v = cases.get_column(col).cast(pl.Float64).to_numpy()
            out[key] = {"p50": percentile(v, 50), "p95": percentile(v, 95)}
    for col in ("cost", "cost_usd"):
        if col in cases.columns and cases.schema[col].is_numeric():
            out["system_cost_usd"] = float(cases.get_column(col).cast(pl.Float64).fill_null(0).sum())
            break
    if results.judge is not None:
        j = results.judge
        if "cost_usd" in j.columns:
            out["judge_cost_usd"] = float(j.get_column("cost_usd").cast(pl.Float64).fill_null(0).sum())
        if "latency_ms" in j.columns:
            v = j.get_column("latency_ms").cast(pl.Float64).to_numpy()
            out["judge_latency_ms"] = {"p50": percentile(v, 50), "p95": percentile(v, 95)}
        counts = j.group_by("status").len()
        out["judge_calls"] = dict(zip(counts.get_column("status").to_list(), counts.get_column("len").to_list()))
    return out


def retrieval_modes(cases: pl.DataFrame) -> Dict[str, int]:
    if "retrieval_mode" not in cases.columns:
        return {}
    vc = cases.get_column("retrieval_mode").cast(pl.Utf8).fill_null("(none)").value_counts(sort=True)
    return dict(zip(vc.get_column("retrieval_mode").to_list(), vc.get_column("count").to_list()))


def fmt_value(value: Optional[float], kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{100 * value:.1f}%" if kind == "rate" else f"{value:.3f}"


def fmt_ci(lo: Optional[float], hi: Optional[float], kind: str) -> Tuple[str, str]:
    return fmt_value(lo, kind), fmt_value(hi, kind)
