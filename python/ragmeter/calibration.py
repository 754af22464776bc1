"""Is the judge right? Agreement with human reviewers, Cohen's kappa, and a prediction-powered accuracy.

* :func:`cohen_kappa` -- Cohen's kappa of two raters on the same items, with its 95% interval (the large-sample
  standard error of Fleiss, Cohen & Everitt, 1969), the observed and the chance agreement and ``n``. When the
  chance agreement is 1 (both raters put every item in one and the same class) kappa is 0/0; when one rater put
  every item in one class it is 0 (with a standard error of 0) whatever the agreement. Both are reported as
  ``None`` with a reason, never as 1.0 or 0.0.
* :func:`agreement` -- the share of items two raters agree on, with its Wilson 95% interval, the 2x2 cells
  (for yes/no labels) and the kappa.
* :func:`ppi_mean` -- the prediction-powered estimate of a mean (Angelopoulos et al., 2023, "Prediction-powered
  inference"): the judge's mean over all cases plus the mean human-minus-judge difference over a *random*
  labelled sample, with a normal 95% interval.
* :func:`verdict_from_points` -- the reviewer's verdict and 1-5 score from the key points they ticked
  (see :data:`VERDICT_RULES`).
* :func:`review_draw` / :func:`review_reasons` -- run-time review sampling (``review_reason`` in
  ``cases.parquet``).

Items where either rater gave no label (``None``, a NaN or pandas' ``NA``) are left out of every statistic and
counted in ``n_missing``.
"""
from __future__ import annotations

import hashlib
import math
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Dict, Hashable, List, Optional, Sequence, Tuple

__all__ = [
    "Kappa", "Agreement", "cohen_kappa", "agreement", "agreement_table", "wilson_interval", "ppi_mean",
    "landis_koch", "verdict_from_points", "VERDICT_RULES", "review_draw", "review_reasons",
    "REVIEW_REASONS", "DEFAULT_REVIEW_RATE", "DEFAULT_REVIEW_SEED", "review_settings",
]

Z95 = 1.959963984540054

#: the reviewer's verdict from the key points (one rule set, shared with the correctness judge's 1-5 rubric)
VERDICT_RULES = """correct = every core point covered.
score 5 = every point covered; 4 = every core point, not every point; 3 = some but not all core points;
2 = no core point but some other point; 1 = nothing covered.
A key point list without a starred (core) point makes every point core.
A `correct` column (1/0/yes/no) in the sheet overrides the verdict for its case."""

REVIEW_REASONS = ("judge_failed", "miss_but_correct", "sampled")
DEFAULT_REVIEW_RATE = 0.1
DEFAULT_REVIEW_SEED = 1313


# ------------------------------------------------------------------------------------------------ intervals


def wilson_interval(k: int, n: int, z: float = Z95) -> Tuple[Optional[float], Optional[float]]:
    """Wilson score interval of ``k`` successes in ``n`` (None, None when ``n`` is 0)."""
    from ragmeter._args import check_arg

    n = check_arg("n", n, "int", low=0)
    k = check_arg("k", k, "int", low=0, high=n)
    z = check_arg("z", z, "number", low=0)
    if n <= 0:
        return None, None
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


# ------------------------------------------------------------------------------------------------ kappa


@dataclass(frozen=True)
class Kappa:
    value: Optional[float]
    ci_low: Optional[float]
    ci_high: Optional[float]
    observed: Optional[float]
    chance: Optional[float]
    n: int
    n_missing: int = 0
    reason: Optional[str] = None  # why value is None
    ci_reason: Optional[str] = None  # why a value has no interval

    def to_dict(self) -> Dict[str, Any]:
        return {**asdict(self), "band": landis_koch(self.value)}


def is_missing(value: Any) -> bool:
    """No label: ``None``, a NaN (how pandas and NumPy float columns hold a missing value) or pandas' ``NA``."""
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN is the one value unequal to itself
    except (TypeError, ValueError):  # pandas.NA: its comparison is NA, whose truth is ambiguous
        return True


def _pairs(a: Sequence[Any], b: Sequence[Any]) -> Tuple[List[Tuple[Hashable, Hashable]], int]:
    from ragmeter.errors import InputError

    if len(a) != len(b):
        raise InputError(f"the two raters label a different number of items ({len(a)} vs {len(b)})")
    pairs = [(x, y) for x, y in zip(a, b) if not is_missing(x) and not is_missing(y)]
    for rater, labels in (("first", a), ("second", b)):
        _check_hashable(rater, labels)
    return pairs, len(a) - len(pairs)


def _check_hashable(rater: str, labels: Sequence[Any]) -> None:
    """Labels are counted by value: a list or a dict cannot be (a TypeError from deep inside Counter)."""
    from ragmeter._args import _shown
    from ragmeter.errors import InputError

    for i, label in enumerate(labels):
        if not isinstance(label, Hashable):
            raise InputError(f"labels must be hashable (a bool, a number or a string); item {i} of the {rater} "
                             f"rater is {_shown(label)}")


def cohen_kappa(a: Sequence[Any], b: Sequence[Any], *, names: Tuple[str, str] = ("first", "second")) -> Kappa:
    """Cohen's kappa of raters ``a`` and ``b`` (same items, same order; any hashable labels, ``None`` = no label).
    ``names`` name the two raters in the reason of an undefined kappa ("one rater (the human) gave ...").

    >>> k = cohen_kappa([1] * 5 + [1] * 3 + [0] * 7, [1] * 5 + [0] * 3 + [0] * 7)
    >>> round(k.value, 4), k.observed
    (0.6087, 0.8)
    """
    pairs, missing = _pairs(a, b)
    n = len(pairs)
    if n == 0:
        return Kappa(None, None, None, None, None, 0, missing, "no item labelled by both raters")
    cells = Counter(pairs)
    rows = Counter(x for x, _ in pairs)
    cols = Counter(y for _, y in pairs)
    observed = sum(c for (x, y), c in cells.items() if x == y) / n
    chance = sum(rows[k] * cols.get(k, 0) for k in rows) / (n * n)
    if chance >= 1.0 - 1e-12:
        return Kappa(None, None, None, observed, chance, n, missing,
                     "undefined: chance agreement is 1 (both raters gave every item the same single label)")
    if len(rows) == 1 or len(cols) == 1:  # then observed == chance: kappa is 0 and its standard error 0, whatever
        return Kappa(None, None, None, observed, chance, n, missing,
                     f"undefined: one rater (the {names[0] if len(rows) == 1 else names[1]}) gave every item the same "
                     f"label, {next(iter(rows if len(rows) == 1 else cols))!r}, so kappa is 0 whatever the agreement "
                     f"(observed {observed:.2f})")
    kappa = (observed - chance) / (1 - chance)
    se = _kappa_se(cells, rows, cols, n, kappa, chance)
    if se is None or se < 1e-12:
        # the large-sample error vanishes when every item agrees (or none does): an interval of no width would
        # claim certainty from 2 items as from 2,000
        return Kappa(kappa, None, None, observed, chance, n, missing, ci_reason=_no_width_reason(observed, n))
    return Kappa(kappa, max(-1.0, kappa - Z95 * se), min(1.0, kappa + Z95 * se), observed, chance, n, missing)


def _no_width_reason(observed: float, n: int) -> str:
    where = (f"all {n} items agree" if observed == 1.0 else f"none of the {n} items agree" if observed == 0.0
             else f"its standard error is 0 on these {n} items")
    return f"the large-sample interval has no width when {where}; read the agreement interval"


def _kappa_se(cells: Counter, rows: Counter, cols: Counter, n: int, kappa: float, chance: float) -> Optional[float]:
    """Large-sample standard error of kappa (Fleiss, Cohen & Everitt 1969)."""
    p = {key: c / n for key, c in cells.items()}
    pr = {k: c / n for k, c in rows.items()}
    pc = {k: c / n for k, c in cols.items()}
    diag = sum(pij * (1 - (pr.get(i, 0) + pc.get(i, 0)) * (1 - kappa)) ** 2 for (i, j), pij in p.items() if i == j)
    off = (1 - kappa) ** 2 * sum(pij * (pc.get(i, 0) + pr.get(j, 0)) ** 2 for (i, j), pij in p.items() if i != j)
    var = (diag + off - (kappa - chance * (1 - kappa)) ** 2) / (n * (1 - chance) ** 2)
    return math.sqrt(max(var, 0.0))


def landis_koch(kappa: Optional[float]) -> Optional[str]:
    """Landis & Koch (1977) band of a kappa value."""
    if kappa is None:
        return None
    if kappa < 0:
        return "poor"
    for upper, band in ((0.20, "slight"), (0.40, "fair"), (0.60, "moderate"), (0.80, "substantial")):
        if kappa <= upper:
            return band
    return "almost perfect"


# ------------------------------------------------------------------------------------------------ agreement


@dataclass(frozen=True)
class Agreement:
    n: int
    agreed: int
    value: Optional[float]
    ci_low: Optional[float]
    ci_high: Optional[float]
    kappa: Kappa
    #: for yes/no labels: both_true, a_true_b_false, a_false_b_true, both_false
    cells: Optional[Dict[str, int]]
    n_missing: int = 0

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["kappa"] = self.kappa.to_dict()
        return d


def agreement(a: Sequence[Any], b: Sequence[Any], *, names: Tuple[str, str] = ("first", "second")) -> Agreement:
    """How often raters ``a`` and ``b`` agree (Wilson 95% interval), the 2x2 cells for yes/no labels, and kappa
    (``names``: see :func:`cohen_kappa`)."""
    pairs, missing = _pairs(a, b)
    agreed = sum(1 for x, y in pairs if x == y)
    n = len(pairs)
    lo, hi = wilson_interval(agreed, n)
    cells = None
    if all(isinstance(v, bool) or v in (0, 1) for pair in pairs for v in pair):
        c = Counter((bool(x), bool(y)) for x, y in pairs)
        cells = {"both_true": c[(True, True)], "a_true_b_false": c[(True, False)],
                 "a_false_b_true": c[(False, True)], "both_false": c[(False, False)]}
    return Agreement(n, agreed, agreed / n if n else None, lo, hi, cohen_kappa(a, b, names=names), cells, missing)


def agreement_table(raters: Dict[str, Dict[str, Any]], ids: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    """Pairwise agreement and kappa between named raters (``{name: {case id: label}}``), one row per pair.

    ``ids`` restricts every pair to those items (e.g. the human-reviewed ones); an item a rater did not label
    counts as missing for the pairs with that rater.
    """
    names = list(raters)
    rows = []
    for i, first in enumerate(names):
        for second in names[i + 1:]:
            keys = list(ids) if ids is not None else sorted(set(raters[first]) & set(raters[second]))
            a = [raters[first].get(k) for k in keys]
            b = [raters[second].get(k) for k in keys]
            rows.append({"a": first, "b": second, **agreement(a, b, names=(first, second)).to_dict()})
    return rows


# ------------------------------------------------------------------------------------------------ PPI


def ppi_mean(judge_all: Sequence[float], judge_labelled: Sequence[float], human_labelled: Sequence[float],
             *, z: float = Z95) -> Dict[str, Any]:
    """Prediction-powered estimate of the human mean (Angelopoulos et al., 2023).

    ``judge_all``: the judge's value on every case; ``judge_labelled`` / ``human_labelled``: the judge's and the
    human's value on a *random* sample of the cases (same order). The estimate is
    ``mean(judge_all) + mean(human - judge)`` over the sample; its variance ``var(judge_all) / N +
    var(human - judge) / n`` (sample variances) gives a normal interval. Cases chosen because of the judge's
    outcome must not be passed as the labelled sample: the correction would then be biased.
    """
    from ragmeter.errors import InputError

    if any(is_missing(v) for v in judge_all):
        raise InputError("judge_all holds a missing value (None or NaN): give the judge's value on every case (a "
                         "failed call as 0, not correct), or leaving those cases out biases the estimate")
    f_all = _values("judge_all", judge_all)
    if len(judge_labelled) != len(human_labelled):
        raise InputError("judge_labelled and human_labelled must have the same length")
    labelled, n_missing = _pairs(judge_labelled, human_labelled)  # a pair without both values is left out, counted
    judge = _values("judge_labelled", [f for f, _ in labelled])
    diffs = [h - f for f, h in zip(judge, _values("human_labelled", [h for _, h in labelled]))]
    big_n, n = len(f_all), len(diffs)
    raw = sum(f_all) / big_n if big_n else None
    out: Dict[str, Any] = {"value": None, "ci_low": None, "ci_high": None, "raw": raw, "correction": None,
                           "n_labelled": n, "n_missing": n_missing, "n_all": big_n, "reason": None}
    if big_n == 0 or n == 0:
        out["reason"] = "no random labelled case" if n == 0 else "no case"
        return out
    correction = sum(diffs) / n
    value = raw + correction  # type: ignore[operator]
    out.update(value=value, correction=correction)
    if n < 2:
        out["reason"] = "one random label: no interval"
        return out
    se = math.sqrt(_sample_var(f_all) / big_n + _sample_var(diffs) / n)
    out.update(ci_low=value - z * se, ci_high=value + z * se, se=se)
    return out


def _values(name: str, values: Sequence[Any]) -> List[float]:
    """``values`` as floats (a bool verdict is 0 or 1); anything else is an InputError naming ``name``."""
    from ragmeter._args import _shown
    from ragmeter.errors import InputError

    try:
        return [float(v) for v in values]
    except (TypeError, ValueError):
        bad = next(v for v in values if not _is_number(v))
        raise InputError(f"{name} must be a list of numbers (or bools); it holds {_shown(bad)}") from None


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _sample_var(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / (len(values) - 1)


# ------------------------------------------------------------------------------------------------ verdicts


def verdict_from_points(core: Sequence[bool], covered: Sequence[bool]) -> Tuple[bool, int]:
    """``(correct, score)`` from the key points' core flags and the reviewer's ticks (:data:`VERDICT_RULES`)."""
    if len(core) != len(covered) or not core:
        raise ValueError("one core flag and one covered flag per key point, at least one point")
    core = list(core) if any(core) else [True] * len(covered)
    n_core = sum(core)
    core_hit = sum(1 for c, k in zip(core, covered) if c and k)
    other_hit = sum(1 for c, k in zip(core, covered) if k and not c)
    if core_hit == n_core:
        return True, 5 if other_hit == len(core) - n_core else 4
    if core_hit:
        return False, 3
    return False, 2 if other_hit else 1


# ------------------------------------------------------------------------------------------------ run-time sampling


def review_draw(seed: int, case_id: str) -> float:
    """The case's review draw in [0, 1): a hash of the seed and the case id (not its position)."""
    digest = hashlib.sha256(f"ragmeter-review:{seed}:{case_id}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64


def review_reasons(cases: Any, rate: float = DEFAULT_REVIEW_RATE, seed: int = DEFAULT_REVIEW_SEED) -> Any:
    """The ``review_reason`` column (a Polars Series) for a diagnosed cases frame.

    Every case's draw is made first, from ``seed`` and its id alone, so which cases are ``sampled`` does not depend
    on any judge outcome. Then, first match wins: ``judge_failed`` (the correctness judge failed),
    ``miss_but_correct`` (answer chunk not retrieved, judged correct), ``sampled`` (draw below ``rate``), else null.
    """
    import polars as pl

    settings = review_settings(rate, seed)
    rate, seed = settings["rate"], settings["seed"]
    draws = [review_draw(seed, str(i)) for i in cases.get_column("id").to_list()]
    status = (cases.get_column("correctness_status").cast(pl.Utf8).to_list() if "correctness_status" in cases.columns
              else [None] * cases.height)
    diagnosis = (cases.get_column("diagnosis").to_list() if "diagnosis" in cases.columns else [None] * cases.height)
    reasons = []
    for draw, st, diag in zip(draws, status, diagnosis):
        sampled = draw < rate
        reasons.append("judge_failed" if st == "failed" else "miss_but_correct" if diag == "MISS_BUT_CORRECT"
                       else "sampled" if sampled else None)
    return pl.Series("review_reason", reasons, dtype=pl.Utf8)


def review_settings(rate: Optional[float] = None, seed: Optional[int] = None, *,
                    names: Tuple[str, str] = ("rate", "seed")) -> Dict[str, Any]:
    """The run's review sampling, as ``summary.json`` records it under ``settings.review``. ``rate`` must be a
    number between 0 and 1 and ``seed`` an integer (None: the defaults); an :class:`InputError` names them as
    ``names`` says (the caller's own argument names or flags)."""
    from ragmeter._args import check_arg

    rate = check_arg(names[0], rate, "number", low=0, high=1, optional=True)
    seed = check_arg(names[1], seed, "int", optional=True)
    return {"rate": DEFAULT_REVIEW_RATE if rate is None else rate, "seed": DEFAULT_REVIEW_SEED if seed is None else seed}
