"""Compare two evaluation runs case by case: deltas with paired bootstrap intervals.

``compare(base_dir, cand_dir)`` pairs the cases of two results directories by
``id`` and reports, per metric, overall and per category: baseline and
candidate means over the cases scored in both runs, the delta with a paired
bootstrap 95% interval (10,000 resamples by default, seeded), ``n``, per-case
wins / regressions / ties, McNemar's exact test for boolean metrics (correct,
hit, ...), and the minimum detectable difference at this size (alpha 0.05,
power 0.8; see :mod:`ragmeter.stats`).

The two runs must be comparable: the same golden set (same case ids, and the
same golden hash when both ``summary.json`` carry one) and the same
retrieval-mode mix. Otherwise :class:`CompareRefused` is raised, unless
``force=True``, which records a loud warning instead.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import polars as pl

from ragmeter.errors import InputError

__all__ = ["CompareRefused", "MetricDelta", "Comparison", "compare", "golden_hash"]

EPS = 1e-9


class CompareRefused(InputError):
    """The two runs are not comparable (different golden set or retrieval-mode mix)."""


@dataclass
class MetricDelta:
    metric: str
    group: str  # "overall" or a category
    kind: str  # "rate" or "score"
    baseline: Optional[float]
    candidate: Optional[float]
    delta: Optional[float]
    ci_low: Optional[float]
    ci_high: Optional[float]
    n_paired: int  # cases scored in both runs
    n_total: int  # cases in the group
    wins: int
    regressions: int
    ties: int
    p_value: Optional[float]  # McNemar exact (boolean metrics)
    mdd: Optional[float]  # minimum detectable difference at this n

    @property
    def significant(self) -> bool:
        return self.ci_low is not None and (self.ci_low > 0 or self.ci_high < 0)  # type: ignore[operator]


@dataclass
class Comparison:
    base: str
    candidate: str
    rows: List[MetricDelta]
    n_base: int
    n_candidate: int
    n_paired: int
    primary_metric: str
    n_resamples: int
    seed: int
    problems: List[str] = field(default_factory=list)  # comparability problems
    forced: bool = False
    notes: List[str] = field(default_factory=list)

    def row(self, metric: str, group: str = "overall") -> Optional[MetricDelta]:
        for r in self.rows:
            if r.metric == metric and r.group == group:
                return r
        return None

    @property
    def metrics(self) -> List[str]:
        seen: List[str] = []
        for r in self.rows:
            if r.metric not in seen:
                seen.append(r.metric)
        return seen

    @property
    def groups(self) -> List[str]:
        return sorted({r.group for r in self.rows if r.group != "overall"})

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        return d


def golden_hash(summary: Dict[str, Any]) -> Optional[str]:
    """The golden set's hash recorded in a summary.json, if any."""
    for key in ("golden_hash", "golden_sha256", "golden_sha"):
        if isinstance(summary.get(key), str):
            return summary[key]
    for container in ("inputs", "hashes", "input_hashes"):
        sub = summary.get(container)
        if isinstance(sub, dict):
            g = sub.get("golden")
            if isinstance(g, str):
                return g
            if isinstance(g, dict):
                for key in ("sha256", "hash", "blake3", "xxh3"):
                    if isinstance(g.get(key), str):
                        return g[key]
    return None


def _mode_mix(cases: pl.DataFrame) -> Dict[str, int]:
    from ragmeter.report.data import retrieval_modes

    return retrieval_modes(cases)


def _check(base: Any, cand: Any) -> List[str]:
    problems = []
    ids_b = set(base.cases.get_column("id").cast(pl.Utf8).to_list())
    ids_c = set(cand.cases.get_column("id").cast(pl.Utf8).to_list())
    if ids_b != ids_c:
        only_b, only_c = sorted(ids_b - ids_c), sorted(ids_c - ids_b)
        problems.append(
            f"golden sets differ: {len(only_b)} case(s) only in the baseline"
            + (f" (e.g. {', '.join(only_b[:3])})" if only_b else "")
            + f", {len(only_c)} only in the candidate"
            + (f" (e.g. {', '.join(only_c[:3])})" if only_c else "")
        )
    hb, hc = golden_hash(base.summary), golden_hash(cand.summary)
    if hb is not None and hc is not None and hb != hc:
        problems.append(f"golden set hashes differ: baseline {hb}, candidate {hc}")
    mb, mc = _mode_mix(base.cases), _mode_mix(cand.cases)
    if mb != mc:
        problems.append(f"retrieval-mode mix differs: baseline {mb or 'none recorded'}, candidate {mc or 'none recorded'}")
    return problems


def compare(
    base_dir: Any,
    cand_dir: Any,
    *,
    force: bool = False,
    n_resamples: int = 10_000,
    seed: Optional[int] = None,
    threads: Optional[int] = None,
) -> Comparison:
    """Compare two results directories (see the module docstring)."""
    from ragmeter.report.data import load_results

    base = load_results(base_dir)
    cand = load_results(cand_dir)
    problems = _check(base, cand)
    if problems and not force:
        raise CompareRefused(
            f"refusing to compare {base.path} with {cand.path}: " + "; ".join(problems)
            + " (use --force to compare the common cases anyway)"
        )
    return compare_frames(
        base.cases, cand.cases, base_name=str(base.path), cand_name=str(cand.path), problems=problems,
        forced=bool(problems), n_resamples=n_resamples, seed=seed, threads=threads,
    )


def compare_frames(
    base_cases: pl.DataFrame,
    cand_cases: pl.DataFrame,
    *,
    base_name: str = "baseline",
    cand_name: str = "candidate",
    problems: Optional[List[str]] = None,
    forced: bool = False,
    n_resamples: int = 10_000,
    seed: Optional[int] = None,
    threads: Optional[int] = None,
) -> Comparison:
    """Compare two diagnosed cases frames (as loaded by :func:`ragmeter.report.data.load_results`)."""
    from ragmeter import stats
    from ragmeter.report.data import METRICS, metric_frame

    seed = stats.DEFAULT_SEED if seed is None else seed
    mb = metric_frame(base_cases)
    mc = metric_frame(cand_cases)
    names = [c for c in mb.columns if c not in ("id", "category") and c in mc.columns]
    # the baseline's category decides the group; pair on id
    joined = mb.select(["id", "category", *names]).join(
        mc.select(["id", *names]).rename({n: f"{n}__c" for n in names}), on="id", how="inner"
    ).sort("id")
    n = joined.height
    cats = joined.get_column("category").cast(pl.Utf8).fill_null("(none)").to_numpy().astype(str)
    base_v = joined.select(names).to_numpy().astype(np.float64) if names else np.zeros((n, 0))
    cand_v = joined.select([f"{x}__c" for x in names]).to_numpy().astype(np.float64) if names else np.zeros((n, 0))
    diff = cand_v - base_v  # NaN where either side is unscored
    notes: List[str] = []
    resampled = stats.bootstrap_means(diff, n_resamples=n_resamples, seed=seed, groups=cats, threads=threads) if n and names else {}

    rows: List[MetricDelta] = []
    groups = [("overall", np.ones(n, dtype=bool))] + [(g, cats == g) for g in sorted(set(cats.tolist()))]
    for j, name in enumerate(names):
        kind = METRICS[name].kind
        scored_b = ~np.isnan(base_v[:, j])
        scored_c = ~np.isnan(cand_v[:, j])
        if (scored_b != scored_c).any():
            k = int((scored_b != scored_c).sum())
            notes.append(f"{name}: {k} case(s) scored in only one run are left out of its delta")
        for g, sel in groups:
            d = diff[sel, j]
            ok = ~np.isnan(d)
            dd = d[ok]
            npair = int(ok.sum())
            key = None if g == "overall" else g
            lo, hi = stats.percentile_interval(resampled[key][:, j]) if npair else (None, None)
            b_mean = float(base_v[sel, j][ok].mean()) if npair else None
            c_mean = float(cand_v[sel, j][ok].mean()) if npair else None
            wins = int((dd > EPS).sum())
            regressions = int((dd < -EPS).sum())
            p_value = None
            if kind == "rate" and npair:
                p_value = stats.mcnemar_exact(regressions, wins)
                mdd = stats.min_detectable_difference_proportion(npair, (wins + regressions) / npair)
            else:
                mdd = stats.min_detectable_difference(npair, float(dd.std(ddof=1)) if npair > 1 else 0.0) if npair else None
            rows.append(MetricDelta(
                metric=name, group=g, kind=kind, baseline=b_mean, candidate=c_mean,
                delta=(c_mean - b_mean) if npair else None, ci_low=lo, ci_high=hi, n_paired=npair,
                n_total=int(sel.sum()), wins=wins, regressions=regressions, ties=npair - wins - regressions,
                p_value=p_value, mdd=mdd,
            ))
    primary = "correct" if "correct" in names and any(r.n_paired for r in rows if r.metric == "correct") else "hit"
    return Comparison(
        base=base_name, candidate=cand_name, rows=rows, n_base=base_cases.height, n_candidate=cand_cases.height,
        n_paired=n, primary_metric=primary, n_resamples=n_resamples, seed=seed, problems=list(problems or []),
        forced=forced, notes=notes,
    )


# --------------------------------------------------------------------------- Markdown


def _v(value: Optional[float], kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{100 * value:.1f}%" if kind == "rate" else f"{value:.3f}"


def _d(value: Optional[float], kind: str) -> str:
    if value is None:
        return "n/a"
    return f"{100 * value:+.1f}pp" if kind == "rate" else f"{value:+.3f}"


def _p(p: Optional[float]) -> str:
    if p is None:
        return ""
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def to_markdown(comp: Comparison, gate_results: Optional[List[Any]] = None) -> str:
    from ragmeter.report.data import METRICS
    from ragmeter.report.markdown import md_escape, md_table

    lines: List[str] = []
    if comp.forced:
        lines += [
            "> [!WARNING]",
            "> **FORCED COMPARISON: these runs are not comparable.** The numbers below compare only the "
            f"{comp.n_paired} common cases and may be meaningless:",
        ]
        lines += [f"> - {md_escape(p)}" for p in comp.problems]
        lines.append("")
    lines.append("## ragmeter compare")
    lines.append("")
    lines.append(
        f"Baseline `{md_escape(comp.base)}` ({comp.n_base} cases) vs candidate `{md_escape(comp.candidate)}` "
        f"({comp.n_candidate} cases), {comp.n_paired} paired. Delta = candidate - baseline over cases scored in both; "
        f"95% CI: paired bootstrap, {comp.n_resamples} resamples, seed {comp.seed}. One case = {100 / max(comp.n_paired, 1):.2f} points."
    )
    lines.append("")
    if gate_results is not None:
        failed = [r for r in gate_results if not r.passed]
        if failed:
            lines.append(f"### Gate: FAILED ({len(failed)} of {len(gate_results)} rules)")
        else:
            lines.append(f"### Gate: passed ({len(gate_results)} rules)")
        lines.append("")
        lines += [f"- {'FAILED' if not r.passed else 'ok'}: {r.detail}" for r in gate_results]
        lines.append("")
    rows = []
    for r in comp.rows:
        if r.group != "overall":
            continue
        ci = f"[{_d(r.ci_low, r.kind)}, {_d(r.ci_high, r.kind)}]" if r.ci_low is not None else "n/a"
        sig = " *" if r.significant else ""
        rows.append([
            METRICS[r.metric].label, _v(r.baseline, r.kind), _v(r.candidate, r.kind), _d(r.delta, r.kind) + sig, ci,
            f"{r.n_paired}/{r.n_total}", f"{r.wins}/{r.regressions}/{r.ties}", _p(r.p_value),
            _d(r.mdd, r.kind).lstrip("+") if r.mdd is not None else "n/a",
        ])
    lines.append(md_table(["metric", "baseline", "candidate", "delta", "95% CI", "n", "wins/regr./ties", "McNemar p", "MDD"], rows))
    lines.append("")
    lines.append(
        "`*` = the 95% interval excludes 0. MDD = minimum detectable difference at this n (alpha 0.05, power 0.8): "
        "smaller deltas are within noise."
    )
    lines.append("")
    key = [m for m in ("hit", "correct", "faithfulness") if m in comp.metrics]
    if comp.groups and key:
        cat_rows = []
        for g in comp.groups:
            row = [g]
            for m in key:
                r = comp.row(m, g)
                if r is None or not r.n_paired:
                    row.append("n/a")
                else:
                    ci = f"[{_d(r.ci_low, r.kind)}, {_d(r.ci_high, r.kind)}]"
                    row.append(f"{_v(r.baseline, r.kind)} → {_v(r.candidate, r.kind)} ({_d(r.delta, r.kind)} {ci}, n={r.n_paired})")
            cat_rows.append(row)
        lines += ["### Per category", "", md_table(["category"] + [METRICS[m].label for m in key], cat_rows), ""]
    for m in ("correct", "hit"):
        r = comp.row(m)
        if r is not None and r.n_paired:
            lines.append(
                f"{METRICS[m].label} flips: {r.wins} wrong→right, {r.regressions} right→wrong "
                f"(McNemar exact p = {_p(r.p_value)})."
            )
    if comp.notes:
        lines.append("")
        lines += [f"- note: {md_escape(n)}" for n in comp.notes]
    lines.append("")
    return "\n".join(lines)
