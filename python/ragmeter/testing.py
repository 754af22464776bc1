"""Assertions for pytest (or any test runner): RAG quality as a test that can fail.

::

    from ragmeter.testing import assert_no_regression, assert_scores

    def test_rag_quality(ragmeter_baseline):          # the fixture: --ragmeter-baseline DIR
        result = ragmeter.evaluate("golden.jsonl", "run.jsonl", judge=...)
        assert_scores(result, {"hit": ">=0.7", "faithfulness": ">=0.8"})
        assert_no_regression(result, ragmeter_baseline, gate="hit>=-2pp,faithfulness>=-3pp")

Both raise :class:`AssertionError` whose message shows the table (every metric asked about, its value, how many
cases it covers, the rule and whether it held). A metric no case was scored on fails, never passes: an
unmeasured number is not a pass. Nor is a stand-in: a rule on ``correct`` fails when the answers were not
judged. ``result`` / ``candidate`` / ``baseline`` are :class:`ragmeter.api.EvalResult` objects, results
folders (``ragmeter eval --out DIR``) or, for rules on retrieval metrics, what :func:`ragmeter.score` returns.
"""
from __future__ import annotations

import math
import re
from numbers import Real
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

from ragmeter.errors import InputError  # a ValueError, as these raised before: a usage error, typed

__all__ = ["assert_no_regression", "assert_scores", "score_table"]

_RULE = re.compile(r"^\s*(>=|<=|==|>|<)\s*(-?\d+(?:\.\d+)?)\s*(%?)\s*$")


def _result(value: Any, name: str = "result") -> Any:
    from ragmeter.api import _as_result

    return _as_result(value, name)


def _check_measured_by_score(result: Any, names: Sequence[str]) -> None:
    """An :class:`InputError` for a rule on a metric a :class:`ragmeter.retrieval.ScoreResult` cannot hold: it
    measures retrieval only, and a judged metric would otherwise fail as 'no case scored', reading as a broken run
    rather than the wrong call."""
    from ragmeter.report.data import METRICS
    from ragmeter.retrieval import ScoreResult

    if not isinstance(result, ScoreResult):
        return
    unmeasured = [n for n in names if n in METRICS and METRICS[n].column not in result.cases.columns]
    if unmeasured:
        raise InputError(f"assert_scores: {', '.join(unmeasured)}: measured on the answers, and the result of "
                         f"ragmeter.score holds retrieval only ({', '.join(_retrieval_metrics(result))}); assert "
                         f"{'them' if len(unmeasured) > 1 else 'it'} on the result of ragmeter.evaluate(golden, run, "
                         f"judge=...)")


def _retrieval_metrics(result: Any) -> List[str]:
    from ragmeter.report.data import METRICS

    return [n for n, m in METRICS.items() if m.column in result.cases.columns]


def _parse(metric: str, rule: Union[str, float, int]) -> Tuple[str, float, str]:
    """``">=0.8"``, ``">= 80%"`` or a bare number (meaning ``>=``) -> (op, value, text)."""
    if isinstance(rule, Real) and not isinstance(rule, bool):  # NumPy's scalars too, as ragmeter._args takes them
        op, value, text, percent = ">=", float(rule), f">={float(rule):g}", False
    else:
        m = _RULE.match(str(rule))
        if not m:
            raise InputError(f"assert_scores: {metric}: rule {rule!r}: write an operator and a number, e.g. '>=0.8' "
                             "or '>=80%'")
        op, value, text, percent = m.group(1), float(m.group(2)), str(rule).strip(), bool(m.group(3))
        value /= 100.0 if percent else 1.0
    _check_scale(metric, op, value, text, percent=percent)
    return op, value, text


def _check_scale(metric: str, op: str, value: float, text: str, *, percent: bool) -> None:
    """An :class:`InputError` for a rule that can never fail (it would pass every run, ``hit >= 0``) or never pass
    on the metric's scale (``hit >= 80``: 80%?), as ``compare --gate`` refuses them."""
    from ragmeter.compare import scale
    from ragmeter.gate import _vacuous
    from ragmeter.report.data import METRICS

    if metric not in METRICS or op == "==":  # an unknown name is reported by score_table
        return
    lo, hi = scale(metric)
    verdict = _vacuous(op, value, lo, hi)
    if verdict is None:
        return
    what = "can never fail" if verdict == "always" else "can never pass"
    percent_range = " (0% to 100%)" if (lo, hi) == (0.0, 1.0) else ""
    from ragmeter.report.data import rubric_reading

    rubric = None if percent else rubric_reading(metric, value)
    as_percent = not percent and (lo, hi) == (0.0, 1.0) and _vacuous(op, value / 100.0, lo, hi) is None
    if rubric is not None and _vacuous(op, rubric[0], lo, hi) is None:
        hint = f"; did you mean {op}{rubric[0]:g}? ({rubric[1]})"
    else:
        hint = f"; did you mean {op}{value:g}%?" if as_percent else ""
    raise InputError(f"assert_scores: {metric}: rule {text!r} {what}: {metric} lies between {lo:g} and {hi:g}"
                     f"{percent_range}{hint}")


def _holds(actual: float, op: str, value: float) -> bool:
    eps = 1e-12
    return {">=": actual >= value - eps, "<=": actual <= value + eps, ">": actual > value, "<": actual < value,
            "==": abs(actual - value) <= eps}[op]


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def score_table(result: Any, metrics: Optional[Sequence[str]] = None) -> List[Tuple[str, Optional[float], int, int]]:
    """(metric, mean over the scored cases or None, n_scored, n_total) per metric of ``result``.

    Each metric covers the cases ``compare --gate`` gives it (``refusal``: the answerable, answered ones), so a
    rule reads the same number here and in a gate; ``n_total`` counts the cases the metric applies to (for
    ``all_files_hit``, those expecting two or more files), as summary.json does."""
    from ragmeter.report.data import METRICS, _covered, metric_frame, register_custom_metrics

    if isinstance(metrics, str):  # one name, or names separated by commas (read letter by letter: 'h', 'i', 't')
        metrics = [name.strip() for name in metrics.split(",") if name.strip()]
    if metrics is not None:
        _check_measured_by_score(result, list(metrics))
    res = _result(result)
    register_custom_metrics(res.cases, res.summary)
    frame = metric_frame(res.cases)
    names = list(metrics) if metrics is not None else [c for c in frame.columns if c not in ("id", "category")]
    unknown = [name for name in names if name not in METRICS]
    if unknown:
        raise InputError(f"assert_scores: unknown metric {unknown[0]!r}; known: {', '.join(METRICS)}")
    totals = _covered(res.cases, names).sum(axis=0)
    out: List[Tuple[str, Optional[float], int, int]] = []
    for name, n_total in zip(names, totals.tolist()):
        if name not in frame.columns:  # not measured in this run: no case scored
            out.append((name, None, 0, int(n_total)))
            continue
        col = frame.get_column(name).drop_nulls()
        out.append((name, float(col.mean()) if col.len() else None, col.len(), int(n_total)))  # type: ignore[arg-type]
    return out


def _fmt(value: Optional[float]) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.4f}"


def _stand_ins(res: Any) -> List[str]:
    """Judge metrics whose value in ``res`` is a stand-in for an unjudged one (as for ``compare --gate``):
    without correctness verdicts, ``correct`` is only refusal detection on the no-answer cases."""
    from ragmeter.compare import correctness_judged

    return [] if correctness_judged(res.cases) else ["correct"]


def assert_scores(result: Any, rules: Mapping[str, Union[str, float, int]]) -> None:
    """Assert each metric's mean (over its scored cases) meets its rule, e.g. ``{"faithfulness": ">=0.8"}``.

    A metric no case was scored on fails (``FAILED (no case scored)``), and so does ``correct`` when the answers
    were not judged (``FAILED (not measured: answers not judged)``): its value is then only refusal detection on
    the no-answer cases, which would let a run whose judge step was skipped pass. No rule at all (``{}``) is an
    :class:`~ragmeter.errors.InputError`: nothing asked would pass every run; so is a rule that can never fail
    (``{"hit": ">=0"}``) or never pass (``{"hit": ">=80"}``: 80%?) on the metric's scale, as for ``compare --gate``."""
    if not isinstance(rules, Mapping) or not rules:  # no rule is nothing measured, never a pass
        raise InputError(f"assert_scores: rules must be a mapping of metric to rule with at least one rule, e.g. "
                         f"{{'hit': '>=0.8'}}; got {rules!r}")
    from ragmeter.report.data import register_custom_metrics

    _check_measured_by_score(result, list(rules))
    res = _result(result)
    register_custom_metrics(res.cases, res.summary)  # a custom rubric's scale, for the rules' checks
    parsed = {name: _parse(name, rule) for name, rule in rules.items()}
    stand_ins = _stand_ins(res)
    rows, failed, notes = [], [], []
    for name, value, n_scored, n_total in score_table(res, list(parsed)):
        op, limit, text = parsed[name]
        if name in stand_ins:
            ok, verdict = False, "FAILED (not measured: answers not judged)"
            shown = f" ({_fmt(value)} over {n_scored}/{n_total})" if value is not None else ""
            notes.append(f"{name}: not measured: the answers were not judged, so {name} is only refusal detection "
                         f"on the no-answer cases{shown}; evaluate with a judge to measure it")
            value, n_scored = None, 0
        elif value is None:
            ok, verdict = False, "FAILED (no case scored)"
        else:
            ok = _holds(value, op, limit)
            verdict = "ok" if ok else "FAILED"
        rows.append([name, _fmt(value), f"{n_scored}/{n_total}", text, verdict])
        if not ok:
            failed.append(name)
    if failed:
        raise AssertionError(f"ragmeter: {len(failed)} of {len(rows)} score rules failed ({', '.join(failed)})\n"
                             + _table(["metric", "value", "scored", "rule", "result"], rows)
                             + "".join(f"\n{note}" for note in notes))


def assert_no_regression(candidate: Any, baseline: Any, gate: str, *, force: bool = False,
                         n_resamples: int = 2_000, seed: Optional[int] = None) -> Any:
    """Assert ``candidate`` holds every gate rule against ``baseline`` (the rules of ``ragmeter compare --gate``,
    e.g. ``"hit>=-2pp,faithfulness>=-3pp,regressions<=2"``); return the
    :class:`ragmeter.compare.Comparison`. The failure message shows the comparison table and each failed rule.
    A ``gate`` that is not a string with at least one rule is an :class:`~ragmeter.errors.InputError`."""
    from ragmeter._args import check_arg
    from ragmeter.compare import fmt_ci, fmt_delta, fmt_value, label

    gate = check_arg("gate", gate, "text")  # without a gate nothing is asserted: None would pass every run
    comp = _result(candidate, "candidate").compare(_result(baseline, "baseline"), gate=gate, force=force, n_resamples=n_resamples, seed=seed)
    if comp.passed:
        return comp
    rows = [[label(r.metric), fmt_value(r.baseline, r.kind), fmt_value(r.candidate, r.kind),
             fmt_delta(r.delta, r.kind) + (" *" if r.significant else ""), fmt_ci(r), f"{r.n_paired}/{r.n_total}",
             f"{r.wins}/{r.regressions}"] for r in comp.rows if r.group == "overall"]
    failures = "\n".join(f"  FAILED: {f}" for f in comp.failures)
    raise AssertionError(
        f"ragmeter: {len(comp.failures)} of {len(comp.gate_results)} gate rules failed against the baseline\n"
        f"{failures}\n"
        + _table(["metric", "baseline", "candidate", "delta", "95% CI", "paired", "better/worse"], rows)
        + "\n(* = the 95% interval excludes 0)")
