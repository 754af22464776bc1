"""Regression-gate rules for ``ragmeter compare --gate``.

A rule set is comma-separated rules ``NAME OP VALUE``:

* ``hit>=-2pp``: the *delta* (candidate - baseline) in percentage points must be
  >= -2 (``pp`` = 0.01; also used for 0-1 scores, so ``faithfulness>=-1pp``
  allows a drop of 0.01);
* ``faithfulness>=0.80`` or ``correct>=75%``: the candidate's *absolute* value;
* ``regressions<=5`` / ``wins>=1``: counts of cases that flipped from right to
  wrong (or wrong to right) on the primary metric (``correct`` when both runs
  have correctness verdicts, else ``hit``); ``hit_regressions<=3`` names the
  metric explicitly;
* ``NAME[category]...`` restricts a rule to one category, e.g. ``hit[fact]>=-5pp``.

``OP`` is one of ``>=``, ``<=``, ``>``, ``<``. Rules that do not parse or name
an unknown metric raise :class:`GateError` (exit status 2) listing the known
metrics.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from ragmeter.errors import InputError

__all__ = ["GateError", "Rule", "RuleResult", "parse_rules", "evaluate", "known_names"]

_RULE = re.compile(
    r"^\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?:\[(?P<cat>[^\]]+)\])?\s*(?P<op>>=|<=|>|<)\s*"
    r"(?P<value>[+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?P<unit>pp|%)?\s*$"
)


class GateError(InputError):
    """A gate rule that does not parse or names an unknown metric."""


def known_names() -> List[str]:
    from ragmeter.report.data import METRICS

    counts = ["regressions", "wins"] + [f"{m}_regressions" for m in METRICS] + [f"{m}_wins" for m in METRICS]
    return list(METRICS) + counts


@dataclass(frozen=True)
class Rule:
    text: str
    name: str  # metric name, or regressions / wins / <metric>_regressions / <metric>_wins
    op: str
    value: float  # threshold in the unit compared (fraction for pp and %, count for counts)
    mode: str  # "delta", "absolute" or "count"
    category: Optional[str] = None

    @property
    def count_metric(self) -> Optional[str]:
        if self.mode != "count":
            return None
        return None if self.name in ("regressions", "wins") else self.name.rsplit("_", 1)[0]

    @property
    def count_kind(self) -> str:
        return "regressions" if self.name.endswith("regressions") else "wins"


@dataclass(frozen=True)
class RuleResult:
    rule: Rule
    actual: Optional[float]
    passed: bool
    detail: str


def _known_message() -> str:
    from ragmeter.report.data import METRICS

    return (
        "known metrics: " + ", ".join(METRICS)
        + "; counts: regressions, wins, <metric>_regressions, <metric>_wins; "
        "rule syntax: NAME[category] OP VALUE[pp|%], e.g. hit>=-2pp,faithfulness>=0.80,regressions<=5"
    )


def parse_rules(text: str) -> List[Rule]:
    """Parse a comma-separated rule set; raise :class:`GateError` listing every bad rule."""
    from ragmeter.report.data import METRICS

    rules: List[Rule] = []
    errors: List[str] = []
    for raw in (text or "").split(","):
        if not raw.strip():
            continue
        m = _RULE.match(raw)
        if not m:
            errors.append(f"cannot parse {raw.strip()!r}")
            continue
        name, op, unit = m.group("name"), m.group("op"), m.group("unit")
        value = float(m.group("value"))
        is_count = name in ("regressions", "wins") or (
            name.endswith(("_regressions", "_wins")) and name.rsplit("_", 1)[0] in METRICS
        )
        if is_count:
            if unit:
                errors.append(f"{raw.strip()!r}: {name} is a count of cases, write it without pp or %")
                continue
            mode = "count"
        elif name in METRICS:
            if unit == "pp":
                mode, value = "delta", value / 100.0
            elif unit == "%":
                mode, value = "absolute", value / 100.0
            else:
                mode = "absolute"
        else:
            errors.append(f"unknown metric {name!r} in {raw.strip()!r}")
            continue
        rules.append(Rule(raw.strip(), name, op, value, mode, m.group("cat")))
    if errors:
        raise GateError("--gate: " + "; ".join(errors) + ". " + _known_message())
    if not rules:
        raise GateError("--gate: no rules given. " + _known_message())
    return rules


def _holds(actual: float, op: str, value: float) -> bool:
    eps = 1e-12
    return {
        ">=": actual >= value - eps,
        "<=": actual <= value + eps,
        ">": actual > value + eps,
        "<": actual < value - eps,
    }[op]


def _fmt(mode: str, v: float) -> str:
    if mode == "delta":
        return f"{100 * v:+.2f}pp"
    if mode == "count":
        return f"{v:g}"
    return f"{v:.4g}"


def evaluate(rules: List[Rule], comparison: Any) -> List[RuleResult]:
    """Evaluate rules against a :class:`ragmeter.compare.Comparison`.

    A rule whose metric has no scored pair (or an unknown category) fails with
    a message saying so, rather than passing silently.
    """
    out: List[RuleResult] = []
    for rule in rules:
        group = rule.category or "overall"
        if rule.mode == "count":
            metric = rule.count_metric or comparison.primary_metric
            row = comparison.row(metric, group)
            actual = None if row is None else float(getattr(row, rule.count_kind))
        else:
            row = comparison.row(rule.name, group)
            actual = None
            if row is not None and row.n_paired:
                actual = row.delta if rule.mode == "delta" else row.candidate
        if actual is None:
            where = f" in category {rule.category!r}" if rule.category else ""
            out.append(RuleResult(rule, None, False, f"`{rule.text}`: no scored pairs for {rule.name}{where}"))
            continue
        passed = _holds(actual, rule.op, rule.value)
        gap = abs(actual - rule.value)
        what = {"delta": "delta", "absolute": "candidate", "count": rule.count_kind}[rule.mode]
        detail = f"`{rule.text}`: {what} {_fmt(rule.mode, actual)} (limit {rule.op} {_fmt(rule.mode, rule.value)})"
        if not passed:
            detail += f", violated by {_fmt('delta', gap).lstrip('+') if rule.mode == 'delta' else _fmt(rule.mode, gap)}"
        out.append(RuleResult(rule, actual, passed, detail))
    return out


def summary(results: List[RuleResult]) -> Dict[str, Any]:
    return {
        "passed": all(r.passed for r in results),
        "rules": [{"rule": r.rule.text, "actual": r.actual, "passed": r.passed, "detail": r.detail} for r in results],
    }
