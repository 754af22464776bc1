"""Rank metrics on one ranked list of verdicts (1 relevant / 0 not, or grades).

Pure functions for users and for the judge layer. They run the same Rust
kernels as ``ragmeter trec`` and the retrieval scorer, so a number here equals
the number there. Where definitions differ between tools, each variant has its
own name (see docs/metrics.md):

* ``average_precision(verdicts)`` divides by the relevant items *retrieved*
  (ragas' context precision); ``average_precision(verdicts, n_relevant=R)``
  divides by ``R`` as trec_eval's ``map`` does.
* ``ndcg`` uses linear gain (trec_eval); ``ndcg_exp`` uses ``2^grade - 1``.

>>> average_precision([1, 0, 1])  # doctest: +ELLIPSIS
0.8333...
>>> average_precision([0, 1, 1])  # the same chunks, another order: a quarter lower
0.5833333333333333
>>> average_precision([1, 1, 0])
1.0
>>> round(precision([1, 0, 1]), 4)
0.6667
"""
from __future__ import annotations

from numbers import Real
from typing import Any, Mapping, Optional, Sequence

import numpy as np

__all__ = [
    "precision", "recall", "f1", "reciprocal_rank", "average_precision", "hit",
    "ndcg", "ndcg_exp", "first_relevant_rank",
]


def _ranking(name: str, values: Any) -> np.ndarray:
    """``values`` as a flat float array; an :class:`InputError` naming ``name`` for anything but a list of finite
    numbers (bools are verdicts here): numpy read a string as one number ("101" as 101) and None as NaN."""
    from ragmeter._args import _shown
    from ragmeter.errors import InputError

    if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__iter__"):
        raise InputError(f"{name} must be a list of numbers, got {_shown(values)}")
    try:
        grades = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        items = list(values)
        bad = next((i for i, v in enumerate(items) if not isinstance(v, (Real, np.bool_))), None)
        if bad is None:
            raise InputError(f"{name} must be a flat list of numbers, got {_shown(values)}") from None
        raise InputError(f"{name} must be a list of numbers; item {bad} is {_shown(items[bad])}") from None
    if grades.ndim != 1:
        raise InputError(f"{name} must be a flat list of numbers, got {grades.ndim} dimensions")
    finite = np.isfinite(grades)
    if not finite.all():
        i = int(np.argmin(finite))
        raise InputError(f"{name}: item {i} is {grades[i]}; {name} must be finite numbers")
    return grades


def _one(metric: str, verdicts: Sequence[float], n_relevant: Optional[float] = None,
         ideal: Optional[Sequence[float]] = None, level: float = 1.0, name: str = "verdicts") -> float:
    from ragmeter import _core

    grades = _ranking(name, verdicts)
    found = float(np.count_nonzero(grades >= level))
    if n_relevant is None:
        n_relevant = found
    else:
        from ragmeter.errors import InputError

        n_relevant = _count(n_relevant)
        if 0 < n_relevant < found:  # a recall above 1, an AP above 1 (0 gives 0, as documented)
            raise InputError(f"n_relevant={n_relevant:g}, but {found:g} relevant items are in the ranking: it "
                             "counts every relevant item, retrieved or not")
    offsets = np.array([0, grades.size], dtype=np.int64)
    kwargs = {}
    if ideal is not None:
        ig = _ideal(ideal, grades)
        kwargs = {"ideal_offsets": np.array([0, ig.size], dtype=np.int64), "ideal_grades": ig}
    out = _core.rank_metrics(offsets, grades, np.array([float(n_relevant)]), [metric],
                             relevance_level=level, **kwargs)
    return float(out[0, 0])


def _count(n_relevant: Any) -> float:
    """``n_relevant`` checked: a whole number >= 0. The kernel reads it as an integer, so 2.5 would silently be
    2 (a recall of 1.0 for 2 of 2.5)."""
    from ragmeter._args import check_arg
    from ragmeter.errors import InputError

    n = check_arg("n_relevant", n_relevant, "number", low=0)
    if not float(n).is_integer():
        raise InputError(f"n_relevant must be a whole number (it counts relevant items), got {n:g}")
    return n


def _ideal(ideal: Sequence[float], grades: np.ndarray) -> np.ndarray:
    """``ideal``'s grades, best first, when they hold the ranking's relevant grades: ``ideal`` is every judged
    grade of the query, so a ranking with a grade it lacks would give an NDCG above 1."""
    from ragmeter.errors import InputError

    ig = np.sort(_ranking("ideal", ideal))[::-1].copy()
    ranked = np.sort(grades[grades > 0])[::-1]
    if ranked.size > ig.size or (ranked > ig[:ranked.size]).any():
        raise InputError(f"ideal must hold every judged grade of the query, the ranking's included: the ranking's "
                         f"grades {ranked.tolist()} are not all in ideal {ig.tolist()} (NDCG would exceed 1)")
    return ig


def _cut(name: str, k: Optional[int], optional: bool = True) -> str:
    """The kernel's metric name at cut-off ``k`` (a positive integer; None: the whole list)."""
    from ragmeter._args import check_arg

    k = check_arg("k", k, "int", low=1, optional=optional)
    return name if k is None else f"{name}@{k}"


def precision(verdicts: Sequence[float], k: Optional[int] = None) -> float:
    """Relevant share of the retrieved list (of its first ``k``). ``[]`` gives 0.

    With ``k`` larger than the list, divides by the items retrieved, not by ``k``;
    ``precision_at_k`` (trec_eval ``P_k``) always divides by ``k``.
    """
    return _one(_cut("p_retrieved", k), verdicts)


def precision_at_k(verdicts: Sequence[float], k: int) -> float:
    """trec_eval ``P_k``: relevant in the first ``k`` divided by ``k``, always ``k``."""
    return _one(_cut("p", k, optional=False), verdicts)


def recall(verdicts: Sequence[float], n_relevant: float, k: Optional[int] = None) -> float:
    """Relevant retrieved (within ``k``) over ``n_relevant`` (required: a whole number); 0 when it is 0."""
    return _one(_cut("recall", k), verdicts, n_relevant=_count(n_relevant))  # None is not "the retrieved ones"


def f1(p: float, r: float) -> float:
    """Harmonic mean of a precision and a recall (each between 0 and 1); 0 when both are 0."""
    from ragmeter._args import check_arg

    p, r = (check_arg(name, value, "number", low=0, high=1) for name, value in (("p", p), ("r", r)))
    return 0.0 if p + r <= 0 else 2.0 * p * r / (p + r)


def reciprocal_rank(verdicts: Sequence[float], k: Optional[int] = None) -> float:
    """1 / rank of the first relevant item (within ``k``), 0 if none."""
    return _one(_cut("rr", k), verdicts)


def first_relevant_rank(verdicts: Sequence[float], k: Optional[int] = None) -> int:
    """1-based rank of the first relevant item (within ``k``), 0 if none."""
    return int(_one(_cut("first_relevant_rank", k), verdicts))


def average_precision(verdicts: Sequence[float], n_relevant: Optional[float] = None,
                      k: Optional[int] = None) -> float:
    """Average precision.

    Without ``n_relevant``: mean of precision@i over the relevant ranks i
    retrieved (ragas' context precision), exact, e.g. ``[1, 1, 0]`` is 1.0.
    With ``n_relevant=R``: the same sum divided by R (trec_eval ``map``).
    Nothing relevant retrieved gives 0.
    """
    if n_relevant is None:
        return _one(_cut("ap_retrieved", k), verdicts)
    return _one(_cut("ap", k), verdicts, n_relevant=n_relevant)


def hit(verdicts: Sequence[float], k: Optional[int] = None) -> float:
    """1.0 when a relevant item is in the first ``k`` (trec_eval ``success_k``)."""
    return _one(_cut("hit", k), verdicts)


def ndcg(grades: Sequence[float], k: Optional[int] = None, ideal: Optional[Sequence[float]] = None) -> float:
    """NDCG with linear gain (trec_eval ``ndcg_cut``). ``ideal``: all judged
    grades of the query (default: the retrieved grades themselves)."""
    return _one(_cut("ndcg", k), grades, ideal=ideal, name="grades")


def ndcg_exp(grades: Sequence[float], k: Optional[int] = None, ideal: Optional[Sequence[float]] = None) -> float:
    """NDCG with exponential gain ``2^grade - 1`` (Burges et al.; ranx ``ndcg_burges``)."""
    return _one(_cut("ndcg_exp", k), grades, ideal=ideal, name="grades")
