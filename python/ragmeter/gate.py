"""Regression-gate rules for ``ragmeter compare --gate``.

A rule set is comma-separated rules ``NAME[category] OP LIMIT``; ``OP`` is one
of ``>=``, ``<=``, ``>``, ``<``; every rule must hold for the gate to pass.

Metric rules (``NAME`` is a metric: ``hit``, ``mrr``, ``map``, ``ndcg``,
``precision``, ``file_hit``, ``all_files_hit``, ``evidence_recall``,
``correct``, ``correctness``, ``faithfulness``, ``answer_relevancy``,
``context_precision``, ``context_recall``, ``refusal``):

* ``LIMITpp`` compares the **delta** (candidate - baseline) in percentage
  points: ``hit>=-2pp`` allows Hit@k to fall by at most 2 points. ``pp`` is
  0.01 on the metric's own scale, so ``faithfulness>=-1pp`` allows a drop of
  0.01.
* ``LIMIT`` or ``LIMIT%`` compares the **candidate's value**:
  ``faithfulness>=0.80``, ``correct>=75%``. A plain number is on the metric's
  scale (0-1 for every metric except ``correctness``, a 1-5 score).

Count rules (cases, not points; no unit):

* ``regressions`` / ``wins`` count the flips, worse / better, of every
  case-level binary outcome both runs scored: ``hit`` (the chunk-level
  retrieval hit), ``correct`` (the answer verdict) and ``refusal`` (refusing an
  answerable question). The rule's output names each one counted, e.g.
  ``regressions 7 (hit 7 of 45, correct 0 of 6, refusal 0 of 44)``; an outcome
  that only one run has is not counted, but one that a run scored on cases the
  other did not (a candidate that lost its answers) fails the rule. A case that flips two outcomes counts
  twice: the limit is on flips.
* ``<metric>_regressions`` / ``<metric>_wins`` count one metric's cases that
  got worse / better: ``correct_regressions<=0``, ``hit_wins>=1``,
  ``faithfulness_regressions<=10`` (any case whose score fell).

Direction: every metric is higher-is-better except ``refusal``, the refusal
rate on answerable cases, which is lower-is-better: a refusal win is an
answerable question the candidate answers where the baseline refused, and
``refusal<=+2pp`` allows at most 2 points more refusals. Refusals on no-answer
cases are correct answers, counted by ``correct``, never refusal regressions.

``NAME[category]`` restricts a rule to one category: ``hit[fact]>=-5pp``,
``regressions[multihop]<=1``. A rule whose metric has no case scored in both
runs (or an unknown category) fails, saying so. Without a judge, ``correct`` is
only refusal detection on the no-answer cases: a value rule (``correct>=75%``)
on a candidate, or a delta rule (``correct>=-2pp``) on runs, whose answers were
not judged fails, saying so, rather than limiting that stand-in; the count
rules still count those cases (``correct 0 of 6``). Every rule on a metric
that one run scored on cases the other did not (a failed or skipped judge
call, an answer missing from one run) fails, naming how many on each side: the
lost cases may be the ones that regressed. Each verdict names the
cases it rests on: ``candidate 0.8333 over 6/51`` (scored in both / in the
group).

A rule that does not parse, names an unknown metric, or whose limit can never
be met or never be missed on the metric's scale (``hit>=-2``: Hit@k is never
below 0; ``hit<=150%``; ``hit>=-200pp``; ``regressions>=0``;
``regressions<=-1``) raises :class:`GateError` (exit status 2) with a
suggestion where one is likely (``did you mean hit>=-2pp?``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ragmeter._front import arg
from ragmeter.errors import InputError

__all__ = ["GateError", "Rule", "RuleResult", "parse_rules", "evaluate", "known_names", "summary"]

_RULE = re.compile(
    r"^\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?:\[(?P<cat>[^\]]+)\])?\s*(?P<op>>=|<=|>|<)\s*"
    r"(?P<value>[+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?P<unit>pp|%)?\s*$"
)

_COUNTS = ("regressions", "wins")


class GateError(InputError):
    """A gate rule that does not parse, names an unknown metric, or can never fail (or never pass)."""


def known_names() -> List[str]:
    from ragmeter.report.data import METRICS

    counts = list(_COUNTS) + [f"{m}_regressions" for m in METRICS] + [f"{m}_wins" for m in METRICS]
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
        """The one metric a count rule counts; ``None`` for bare ``regressions`` / ``wins``."""
        if self.mode != "count":
            return None
        return None if self.name in _COUNTS else self.name.rsplit("_", 1)[0]

    @property
    def count_kind(self) -> str:
        return "regressions" if self.name.endswith("regressions") else "wins"


@dataclass(frozen=True)
class RuleResult:
    rule: Rule
    actual: Optional[float]
    passed: bool
    detail: str
    counted: Dict[str, int] = field(default_factory=dict)  # count rules: outcome -> flips counted


def _known_message() -> str:
    from ragmeter.report.data import METRICS

    return (
        "known metrics: " + ", ".join(METRICS)
        + "; counts: regressions, wins, <metric>_regressions, <metric>_wins; "
        "rule syntax: NAME[category] OP VALUE[pp|%], e.g. hit>=-2pp,faithfulness>=0.80,regressions<=5"
    )


def _vacuous(op: str, value: float, lo: float, hi: Optional[float]) -> Optional[str]:
    """``"always"`` / ``"never"`` when ``x OP value`` holds for every / no ``x`` in [lo, hi]; else ``None``."""
    if op in (">=", ">"):
        if value < lo or (op == ">=" and value == lo):
            return "always"
        if hi is not None and (value > hi or (op == ">" and value == hi)):
            return "never"
    else:
        if hi is not None and (value > hi or (op == "<=" and value == hi)):
            return "always"
        if value < lo or (op == "<" and value == lo):
            return "never"
    return None


def _number(v: float) -> str:
    return f"{v:g}"


def _scale_problem(raw: str, name: str, op: str, number: float, unit: Optional[str], mode: str, value: float) -> Optional[str]:
    """Why a rule can never fail or never pass on its metric's scale (with a suggestion), or ``None``."""
    from ragmeter.compare import scale

    where = raw.strip()
    if mode == "count":
        verdict = _vacuous(op, value, 0.0, None)
        if verdict is None:
            return None
        kind = "regressions" if name.endswith("regressions") else "wins"
        hint = f"{name}<=0" if kind == "regressions" else f"{name}>=1"
        what = "can never fail" if verdict == "always" else "can never pass"
        return f"{where!r} {what}: {name} counts cases, never below 0; did you mean {hint}?"
    lo, hi = scale(name)
    span = hi - lo
    if mode == "delta":
        verdict = _vacuous(op, value, -span, span)
        if verdict is None:
            return None
        what = "can never fail" if verdict == "always" else "can never pass"
        return (f"{where!r} {what}: a delta of {name} lies between {-100 * span:g}pp and +{100 * span:g}pp")
    verdict = _vacuous(op, value, lo, hi)
    if verdict is None:
        return None
    what = "can never fail" if verdict == "always" else "can never pass"
    percent = " (0% to 100%)" if (lo, hi) == (0.0, 1.0) else ""
    return (f"{where!r} {what}: a plain number or % is the candidate's value (a change is written with pp), "
            f"and {name} lies between {lo:g} and {hi:g}{percent}" + _suggestion(name, op, number, unit, lo, hi))


def _suggestion(name: str, op: str, number: float, unit: Optional[str], lo: float, hi: float) -> str:
    """``; did you mean ...?`` with the first reading of the same number that can both pass and fail: a percentage
    (``hit>=80``: 80%), a change on the metric's own scale (``mrr>=-0.02``: a drop of 0.02, -2pp), points
    (``hit>=-2``: -2pp)."""
    from ragmeter.report.data import rubric_reading

    rubric = rubric_reading(name, number) if unit is None else None
    if rubric is not None and _vacuous(op, rubric[0], lo, hi) is None:
        return f"; did you mean {name}{op}{rubric[0]:g}? ({rubric[1]})"
    readings = [(number, "%")] if unit is None and (lo, hi) == (0.0, 1.0) and number > hi else []
    if unit is None:
        readings.append((round(number * 100.0, 10), "pp"))  # a plain number is on the metric's scale
    readings.append((number, "pp"))
    span = hi - lo
    for value, u in readings:
        bounds = (lo, hi) if u == "%" else (-span, span)
        if _vacuous(op, value / 100.0, *bounds) is None:
            return f"; did you mean {name}{op}{_number(value)}{u}?"
    return ""


def _parse_hint(raw: str) -> str:
    """What is likely wrong with a rule that does not parse (``; ...``), or ``""``."""
    text = raw.strip()
    if any(ch in text for ch in "\u2212\u2013\u2014"):
        return " (write the minus sign as an ASCII '-')"
    if ";" in text or re.search(r"[\d%p]\s+[A-Za-z_]\w*\s*(?:\[[^\]]*\])?\s*[<>]", text):
        return " (rules are separated by commas: hit>=-2pp,regressions<=0)"
    if re.search(r"=>|=<|==|!=|(?<![<>])=(?!=)", text):
        return " (the operators are >=, <=, > and <)"
    unit = re.search(r"\d\s*([A-Za-z]+)\s*$", text)
    if unit and unit.group(1) != "pp" and unit.group(1).lower() in ("pp", "pt", "pts", "points", "percent", "pct"):
        return f" (the units are pp for a change in points and % for the candidate's value; got {unit.group(1)!r})"
    return ""


def _name_hint(name: str) -> str:
    """``; did you mean 'hit'?`` for a misspelt metric or count name, or ``""``."""
    import difflib

    names = known_names()
    folded = {n.casefold(): n for n in names}
    close = [folded[name.casefold()]] if name.casefold() in folded else difflib.get_close_matches(name, names, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def parse_rules(text: str) -> List[Rule]:
    """Parse a comma-separated rule set; raise :class:`GateError` listing every bad rule."""
    from ragmeter.report.data import METRICS

    rules: List[Rule] = []
    errors: List[str] = []
    syntax = False
    for raw in re.split(r",(?![^\[\]]*\])", text or ""):  # a comma inside [category] is the category's
        if not raw.strip():
            continue
        m = _RULE.match(raw)
        if not m:
            errors.append(f"cannot parse {raw.strip()!r}{_parse_hint(raw)}")
            syntax = True
            continue
        name, op, unit = m.group("name"), m.group("op"), m.group("unit")
        number = float(m.group("value"))
        value = number
        is_count = name in _COUNTS or (name.endswith(("_regressions", "_wins")) and name.rsplit("_", 1)[0] in METRICS)
        if is_count:
            if unit:
                errors.append(f"{raw.strip()!r}: {name} is a count of cases, write it without pp or %")
                syntax = True
                continue
            mode = "count"
        elif name in METRICS:
            if unit == "pp":
                mode, value = "delta", number / 100.0
            elif unit == "%":
                mode, value = "absolute", number / 100.0
            else:
                mode = "absolute"
        else:
            errors.append(f"unknown metric {name!r} in {raw.strip()!r}{_name_hint(name)}")
            syntax = True
            continue
        problem = _scale_problem(raw, name, op, number, unit, mode, value)
        if problem:
            errors.append(problem)
            continue
        category = m.group("cat").strip() if m.group("cat") is not None else None
        if category == "":
            errors.append(f"cannot parse {raw.strip()!r}: an empty category")
            syntax = True
            continue
        rules.append(Rule(raw.strip(), name, op, value, mode, category))
    if errors:
        raise GateError(f"{arg('gate')}: " + "; ".join(errors) + (". " + _known_message() if syntax else ""))
    if not rules:
        raise GateError(f"{arg('gate')}: no rules given. " + _known_message())
    return rules


def _holds(actual: float, op: str, value: float) -> bool:
    eps = 1e-12
    return {
        ">=": actual >= value - eps,
        "<=": actual <= value + eps,
        ">": actual > value + eps,
        "<": actual < value - eps,
    }[op]


def _fmt(mode: str, v: float, extra: int = 0) -> str:
    if mode == "delta":
        return f"{100 * v:+.{2 + extra}f}pp"
    if mode == "count":
        return f"{v:g}"
    return f"{v:.{4 + extra}g}"


def _fmt_failed(mode: str, actual: float, limit: float) -> Tuple[str, str, str]:
    """(actual, limit, gap) of a failed rule with as many more digits as it takes for the actual value to differ
    from the limit and the gap from 0: ``-2.00pp, limit >= -2.00pp, violated by 0.00pp`` read as a pass."""
    for extra in range(0, 9):
        a, lim = _fmt(mode, actual, extra), _fmt(mode, limit, extra)
        gap = _fmt(mode, abs(actual - limit), extra)
        if a != lim and gap.strip("+-0.pp") != "":
            break
    return a, lim, gap.lstrip("+") if mode == "delta" else gap


def _count(rule: Rule, comparison: Any, group: str) -> Tuple[Optional[float], Dict[str, int], str]:
    """(flips counted, per outcome, how they were counted) for a count rule."""
    kind = rule.count_kind
    if rule.count_metric is not None:
        row = comparison.row(rule.count_metric, group)
        if row is None or not row.n_paired:
            return None, {}, ""
        return float(getattr(row, kind)), {row.metric: getattr(row, kind)}, f" of {row.n_paired} paired cases"
    rows = comparison.outcomes(group)
    if not rows:
        return None, {}, ""
    counted = {r.metric: int(getattr(r, kind)) for r in rows}
    parts = ", ".join(f"{r.metric} {getattr(r, kind)} of {r.n_paired}" for r in rows)
    return float(sum(counted.values())), counted, f" ({parts})"


def _one_sided(rule: Rule, comparison: Any, group: str) -> str:
    """Why the rule's rows are not measured on every case of the group (cases scored in one run only), or ``""``."""
    if rule.mode == "count" and rule.count_metric is None:
        from ragmeter.compare import OUTCOMES

        # every outcome both runs carry, paired cases or not: a candidate that lost every answer has no `correct` or
        # `refusal` case scored in both, and counting hit alone passed `regressions<=0`
        rows = [comparison.row(m, group) for m in OUTCOMES]
    else:
        rows = [comparison.row(rule.count_metric or rule.name, group)]
    parts = []
    for r in rows:
        sides = [f"{k} case(s) scored in the {side} only" for side, k in (("baseline", getattr(r, "n_baseline_only", 0)),
                                                            ("candidate", getattr(r, "n_candidate_only", 0))) if k]
        if r is not None and sides:
            parts.append(f"{r.metric}: {', '.join(sides)}")
    return "; ".join(parts)


def _unjudged_sides(rule: Rule, comparison: Any) -> List[str]:
    """The runs a value or delta rule reads whose value of the rule's metric was not judged."""
    not_judged = getattr(comparison, "not_judged", None) or {}
    sides = ["candidate"] if rule.mode == "absolute" else ["baseline", "candidate"]
    return [side for side in sides if rule.name in not_judged.get(side, ())]


def code_span(text: str) -> str:
    """``text`` as a Markdown code span whose fence is longer than any run of backticks inside it (CommonMark),
    so a rule holding a backtick is not cut short; a space pads a backtick at either end."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def evaluate(rules: List[Rule], comparison: Any) -> List[RuleResult]:
    """Evaluate rules against a :class:`ragmeter.compare.Comparison`.

    A rule whose metric has no scored pair (or an unknown category) fails with
    a message saying so, rather than passing silently; so does a value or delta
    rule on ``correct`` when a run it reads was not judged. Every verdict says
    the n it rests on (``candidate 0.8333 over 6/51``).
    """
    from ragmeter.compare import OUTCOMES

    out: List[RuleResult] = []
    for rule in rules:
        group = rule.category or "overall"
        counted: Dict[str, int] = {}
        how = ""
        if rule.mode == "count":
            actual, counted, how = _count(rule, comparison, group)
        else:
            row = comparison.row(rule.name, group)
            actual = None
            if row is not None and row.n_paired:
                actual = row.delta if rule.mode == "delta" else row.candidate
                how = f" over {row.n_paired}/{row.n_total}"
            unjudged = _unjudged_sides(rule, comparison)
            if unjudged:
                # a stand-in value (refusal detection for `correct`) is not the metric the rule limits: a CI job
                # whose judge step was skipped must not go green on it
                shown = f" ({_fmt(rule.mode, actual)}{how})" if actual is not None else ""
                out.append(RuleResult(rule, None, False, (
                    f"{code_span(rule.text)}: not measured: answers not judged in the {' and '.join(unjudged)}; "
                    f"{rule.name} there is only refusal detection on the no-answer cases{shown}")))
                continue
        if actual is None and rule.category and rule.category not in comparison.groups:
            out.append(RuleResult(rule, None, False, f"{code_span(rule.text)}: not measured: {_unknown_category(rule.category, comparison.groups)}"))
            continue
        if actual is None:
            where = f" in category {rule.category!r}" if rule.category else ""
            what = rule.count_metric or (", ".join(OUTCOMES) if rule.mode == "count" else rule.name)
            lost = _one_sided(rule, comparison, group)
            out.append(RuleResult(rule, None, False, f"{code_span(rule.text)}: no case scored in both runs for {what}{where}"
                                  + (f" ({lost})" if lost else "")))
            continue
        what = {"delta": "delta", "absolute": "candidate", "count": rule.count_kind}[rule.mode]
        one_sided = _one_sided(rule, comparison, group)
        if one_sided:
            # the cases one run could not score (a failed judge call) may be the ones that regressed: a verdict on
            # the rest would pass a CI job whose candidate lost half its judge calls
            out.append(RuleResult(rule, None, False, (
                f"{code_span(rule.text)}: not measured on every case: {one_sided} (the comparison's warnings say why); "
                f"{what} {_fmt(rule.mode, actual)}{how} on the rest"), counted))
            continue
        passed = _holds(actual, rule.op, rule.value)
        if passed:
            detail = f"{code_span(rule.text)}: {what} {_fmt(rule.mode, actual)}{how}, limit {rule.op} {_fmt(rule.mode, rule.value)}"
        else:
            shown, limit, by = _fmt_failed(rule.mode, actual, rule.value)
            detail = f"{code_span(rule.text)}: {what} {shown}{how}, limit {rule.op} {limit}, violated by {by}"
        out.append(RuleResult(rule, actual, passed, detail, counted))
    return out


#: categories named in the message about an unknown one
SHOW_CATEGORIES = 10


def _unknown_category(category: str, groups: List[str]) -> str:
    """``no paired case has category 'facts' (categories: ...); did you mean 'fact'?``: a typo names no case, so
    the rule measured nothing."""
    import difflib

    if not groups:
        return f"category {category!r}: the runs have no categories"
    folded = {g.casefold(): g for g in groups}
    close = [folded[category.casefold()]] if category.casefold() in folded else \
        difflib.get_close_matches(category, groups, n=1, cutoff=0.6)
    shown = ", ".join(repr(g) for g in groups[:SHOW_CATEGORIES])
    more = f" and {len(groups) - SHOW_CATEGORIES:,} more" if len(groups) > SHOW_CATEGORIES else ""
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"no paired case has category {category!r} (categories: {shown}{more}){hint}"


def summary(results: List[RuleResult]) -> Dict[str, Any]:
    return {
        "passed": all(r.passed for r in results),
        "rules": [
            {"rule": r.rule.text, "actual": r.actual, "passed": r.passed, "detail": r.detail,
             **({"counted": dict(r.counted)} if r.counted else {})}
            for r in results
        ],
    }
