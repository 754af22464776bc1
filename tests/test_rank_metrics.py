"""ragmeter.metrics: documented examples, and invariants against a plain-Python reference."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter import _core, metrics

verdict_lists = st.lists(st.integers(0, 1), min_size=0, max_size=30)
grade_lists = st.lists(st.integers(0, 3), min_size=0, max_size=30)


# --- plain-Python reference (textbook definitions, written independently) ---
def ref_ap(v, n_rel=None):
    hits, total = 0, 0.0
    for i, x in enumerate(v, 1):
        if x >= 1:
            hits += 1
            total += hits / i
    denom = hits if n_rel is None else n_rel
    return 0.0 if hits == 0 or denom == 0 else total / denom


def ref_rr(v):
    return next((1.0 / i for i, x in enumerate(v, 1) if x >= 1), 0.0)


def ref_dcg(g, k):
    return sum(x / math.log2(i + 1) for i, x in enumerate(g[:k], 1) if x > 0)


def ref_ndcg(g, k):
    ideal = ref_dcg(sorted(g, reverse=True), k)
    return 0.0 if ideal == 0 else ref_dcg(g, k) / ideal


def test_seed_examples() -> None:
    assert round(metrics.average_precision([1, 0, 1]), 4) == 0.8333
    assert round(metrics.precision([1, 0, 1]), 4) == 0.6667
    assert round(metrics.average_precision([0, 1, 1]), 4) == 0.5833
    assert metrics.average_precision([1, 1, 0]) == 1.0
    assert metrics.average_precision([]) == 0.0
    assert metrics.average_precision([1, 0, 1], n_relevant=4) == (1 + 2 / 3) / 4
    assert metrics.recall([1, 0, 1], n_relevant=4) == 0.5
    assert metrics.recall([1, 0, 1], n_relevant=0) == 0.0
    assert metrics.f1(0.0, 0.0) == 0.0
    assert metrics.hit([0, 0, 1], k=2) == 0.0 and metrics.hit([0, 0, 1], k=3) == 1.0
    assert metrics.precision_at_k([1], 5) == 0.2 and metrics.precision([1], k=5) == 1.0
    assert metrics.first_relevant_rank([0, 0, 1]) == 3


@settings(max_examples=200, deadline=None)
@given(verdict_lists)
def test_against_reference(v) -> None:
    assert math.isclose(metrics.average_precision(v), ref_ap(v), abs_tol=1e-12)
    assert math.isclose(metrics.reciprocal_rank(v), ref_rr(v), abs_tol=1e-12)
    p = metrics.precision(v)
    assert math.isclose(p, (sum(v) / len(v)) if v else 0.0, abs_tol=1e-12)


@settings(max_examples=200, deadline=None)
@given(grade_lists, st.integers(1, 12))
def test_ndcg_against_reference_and_bounds(g, k) -> None:
    got = metrics.ndcg(g, k=k)
    assert math.isclose(got, ref_ndcg(g, k), abs_tol=1e-12)
    assert 0.0 <= got <= 1.0 + 1e-12
    assert 0.0 <= metrics.ndcg_exp(g, k=k) <= 1.0 + 1e-12


@settings(max_examples=150, deadline=None)
@given(verdict_lists, st.randoms(use_true_random=False))
def test_permuting_non_relevant_items_changes_nothing(v, rnd) -> None:
    slots = [i for i, x in enumerate(v) if x == 0]
    w = list(v)
    # Non-relevant items are indistinguishable: any permutation among them is the same list
    # of verdicts, so every metric must be identical; permuting relevant ones among themselves too.
    rnd.shuffle(slots)
    for f in (metrics.average_precision, metrics.reciprocal_rank, metrics.precision, metrics.hit):
        assert f(w) == f(v)


@settings(max_examples=150, deadline=None)
@given(verdict_lists.filter(lambda v: 0 in v and 1 in v))
def test_promoting_a_relevant_item_never_lowers_rank_metrics(v) -> None:
    i = max(j for j, x in enumerate(v) if x == 1)
    j = min(k for k, x in enumerate(v) if x == 0)
    if j > i:
        return
    better = list(v)
    better[i], better[j] = better[j], better[i]
    assert metrics.average_precision(better) >= metrics.average_precision(v)
    assert metrics.reciprocal_rank(better) >= metrics.reciprocal_rank(v)
    assert metrics.ndcg(better) >= metrics.ndcg(v) - 1e-15
    assert metrics.average_precision(better, n_relevant=sum(v)) >= metrics.average_precision(v, n_relevant=sum(v))


@settings(max_examples=100, deadline=None)
@given(st.lists(verdict_lists, min_size=1, max_size=20))
def test_batch_engine_equals_single_list_functions(lists) -> None:
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(v) for v in lists])
    grades = np.array([x for v in lists for x in v], dtype=np.float64)
    nrel = np.array([float(sum(v)) for v in lists])
    out = _core.rank_metrics(offsets, grades, nrel, ["ap_retrieved", "rr", "hit@3", "ndcg@5"])
    for row, v in zip(out, lists):
        assert row[0] == metrics.average_precision(v)
        assert row[1] == metrics.reciprocal_rank(v)
        assert row[2] == metrics.hit(v, k=3)
        assert row[3] == metrics.ndcg(v, k=5)


def _vectors() -> list:
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "testdata" / "rank_metric_vectors.json"
    return json.loads(path.read_text())["cases"]


def test_shared_vectors_through_python_api() -> None:
    """The vectors the cargo tests use (rust/ragmeter-core/tests/vectors.rs), through ragmeter.metrics."""
    for case in _vectors():
        g, k, r, ideal, want = case["grades"], case["k"], case["n_relevant"], case["ideal"], case["expected"]
        got = {
            "ap": metrics.average_precision(g, n_relevant=r, k=k),
            "ap_retrieved": metrics.average_precision(g, k=k),
            "rr": metrics.reciprocal_rank(g, k=k),
            "p": metrics.precision_at_k(g, k),
            "p_retrieved": metrics.precision(g, k=k),
            "recall": metrics.recall(g, n_relevant=r, k=k),
            "hit": metrics.hit(g, k=k),
            "ndcg": metrics.ndcg(g, k=k, ideal=ideal),
            "ndcg_exp": metrics.ndcg_exp(g, k=k, ideal=ideal),
        }
        for key, value in want.items():
            assert math.isclose(got[key], value, abs_tol=1e-12), (case["name"], key, got[key], value)


def test_read_only_grades_are_read_as_writeable_ones() -> None:
    """The batch bindings borrow read-only grades (ragmeter's own calls: tens of MB not copied) and copy
    writeable ones; both give the same numbers."""
    rng = np.random.default_rng(5)
    offsets = np.array([0, 3, 3, 8, 20], np.int64)
    grades = (rng.random(20) < 0.4).astype(np.float64)
    frozen = grades.copy()
    frozen.flags.writeable = False
    names = ["hit@5", "rr@5", "ap_retrieved@5", "ndcg@5"]
    assert np.array_equal(_core.rank_metrics(offsets, frozen, np.zeros(4), names),
                          _core.rank_metrics(offsets, grades, np.zeros(4), names), equal_nan=True)
    scores = rng.random(20)
    swept, copied = (_core.threshold_sweep(offsets, g, scores, [0.0, 0.5], 5) for g in (frozen, grades))
    assert swept.keys() == copied.keys() and all(np.array_equal(swept[k], copied[k], equal_nan=True) for k in swept)
