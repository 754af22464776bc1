"""Tests for ragmeter.stats: bootstrap intervals, McNemar's exact test, detectable effects."""
from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter import stats


# ------------------------------------------------------------------ McNemar (hand computations)


def _mcnemar_reference(b: int, c: int) -> float:
    """Plain-Python exact two-sided binomial test, with exact fractions."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = Fraction(sum(math.comb(n, i) for i in range(k + 1)), 2**n)
    return float(min(Fraction(1), 2 * tail))


@pytest.mark.parametrize(
    "b,c,expected",
    [
        (0, 0, 1.0),
        (0, 1, 1.0),  # 2 * 1/2 -> capped at 1
        (0, 5, 2 / 32),  # 2 * (1/2)^5 = 0.0625
        (1, 5, 2 * 7 / 64),  # 2 * (1 + 6) / 64 = 0.21875
        (3, 3, 1.0),
        (2, 8, 2 * (1 + 10 + 45) / 1024),  # 0.109375
        (0, 10, 2 / 1024),
    ],
)
def test_mcnemar_exact_hand_values(b: int, c: int, expected: float) -> None:
    assert stats.mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12)
    assert stats.mcnemar_exact(c, b) == pytest.approx(expected, rel=1e-12)


@given(st.integers(0, 300), st.integers(0, 300))
@settings(max_examples=60, deadline=None)
def test_mcnemar_matches_reference(b: int, c: int) -> None:
    assert stats.mcnemar_exact(b, c) == pytest.approx(_mcnemar_reference(b, c), rel=1e-9, abs=1e-300)


def test_mcnemar_large_counts_log_space_matches_exact() -> None:
    # above 1000 discordant pairs the log-space path is used; compare with exact fractions
    for b, c in [(480, 560), (600, 601), (700, 900), (1000, 1100)]:
        assert stats.mcnemar_exact(b, c) == pytest.approx(_mcnemar_reference(b, c), rel=1e-6)


def test_mcnemar_on_paired_booleans_skips_nulls() -> None:
    base = [1, 1, 0, 0, 1, None, 1]
    cand = [1, 0, 1, 1, 1, 1, None]
    res = stats.mcnemar(base, cand)
    assert res == {"n": 5, "both": 2, "neither": 0, "regressions": 1, "wins": 2, "p_value": 1.0}


# ------------------------------------------------------------------ bootstrap


def _python_bootstrap(values, n_resamples: int, seed: int):  # type: ignore[no-untyped-def]
    rnd = random.Random(seed)
    n = len(values)
    means = sorted(sum(values[rnd.randrange(n)] for _ in range(n)) / n for _ in range(n_resamples))
    return means[int(0.025 * n_resamples)], means[int(0.975 * n_resamples) - 1]


def test_bootstrap_ci_close_to_plain_python_reference() -> None:
    rng = np.random.default_rng(3)
    values = list(rng.normal(0.6, 0.2, 400))
    lo, hi = stats.bootstrap_ci(values, n_resamples=4000, seed=1)
    rlo, rhi = _python_bootstrap(values, 4000, seed=1)
    width = rhi - rlo
    assert abs(lo - rlo) < 0.1 * width and abs(hi - rhi) < 0.1 * width
    # and close to the normal-theory interval
    se = np.std(values, ddof=1) / math.sqrt(len(values))
    assert hi - lo == pytest.approx(2 * 1.96 * se, rel=0.1)


def test_reduction_matches_python_loop_on_the_same_counts() -> None:
    # the general path: counts x values, ratio to counts x scored
    rng = np.random.default_rng(5)
    n = 700  # above the distinct-row limit and continuous -> general path
    x = rng.random(n)
    x[::9] = np.nan
    got = stats.bootstrap_means(x, n_resamples=40, seed=11, threads=1)[None][:, 0]
    expected = []
    for counts in stats.resample_counts(n, 40, seed=11):
        for row in counts:
            num = sum(float(w) * v for w, v in zip(row, x) if not math.isnan(v))
            den = sum(float(w) for w, v in zip(row, x) if not math.isnan(v))
            expected.append(num / den)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    # each resample draws exactly n cases
    for counts in stats.resample_counts(n, 40, seed=11):
        assert (counts.sum(axis=1) == n).all()


def test_bootstrap_is_seeded_and_thread_independent() -> None:
    rng = np.random.default_rng(7)
    x = rng.random((3000, 3))
    a = stats.bootstrap_means(x, n_resamples=200, seed=42, threads=1)[None]
    b = stats.bootstrap_means(x, n_resamples=200, seed=42, threads=3)[None]
    c = stats.bootstrap_means(x, n_resamples=200, seed=43, threads=1)[None]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert stats.bootstrap_ci(x[:, 0], seed=1) == stats.bootstrap_ci(x[:, 0], seed=1)


def test_constant_values_give_a_degenerate_interval() -> None:
    assert stats.bootstrap_ci([0.5] * 1000) == (0.5, 0.5)
    assert stats.bootstrap_ci([1.0, 1.0, None, 1.0, 1.0]) == (1.0, 1.0)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_no_interval_below_four_scored_cases(n: int) -> None:
    """Below 4 cases the 95% percentile bounds are always the smallest and largest value (one case: [v, v]): no
    interval is given, for a mean (reports) as for a paired difference (compare)."""
    values = [0.0, 1.0, 1.0][:n] + [None, float("nan")]
    assert stats.bootstrap_ci(values) == (None, None)
    agg = stats.Aggregate.of(values)
    assert agg.value is not None and agg.n_scored == n and agg.n_total == n + 2
    assert (agg.ci_low, agg.ci_high) == (None, None) and "[" not in agg.format()
    resampled = stats.bootstrap_means(np.array(values[:n], dtype=float), n_resamples=200)[None][:, 0]
    assert stats.Aggregate.from_resamples(values, resampled).ci_low is None
    four = stats.Aggregate.of([0.0, 1.0, 1.0, 0.0])
    assert four.ci_low is not None and four.ci_low < four.ci_high


def test_nothing_scored() -> None:
    assert stats.bootstrap_ci([None, float("nan")]) == (None, None)
    agg = stats.Aggregate.of([None, None, None])
    assert agg.value is None and agg.n_scored == 0 and agg.n_total == 3


def test_binary_fast_path_matches_general_path_statistically() -> None:
    rng = np.random.default_rng(9)
    base = (rng.random(5000) < 0.70).astype(float)
    cand = np.where(rng.random(5000) < 0.1, 1 - base, base)
    d = cand - base  # three distinct values -> multinomial path
    lo, hi = stats.paired_bootstrap_ci(base, cand, n_resamples=4000, seed=2)
    # the general path on the same differences (perturbed by 0 to defeat the fast path is
    # impossible, so compare with normal theory instead)
    se = np.std(d, ddof=1) / math.sqrt(len(d))
    assert lo == pytest.approx(d.mean() - 1.96 * se, abs=0.25 * se)
    assert hi == pytest.approx(d.mean() + 1.96 * se, abs=0.25 * se)


def test_groups_share_resamples_and_sum_to_overall() -> None:
    rng = np.random.default_rng(1)
    n = 2000
    x = rng.random(n)
    groups = np.array(["a", "b", "c", "d"], dtype=object)[rng.integers(0, 4, n)]
    res = stats.bootstrap_means(x, n_resamples=300, seed=5, groups=groups)
    assert set(res) == {None, "a", "b", "c", "d"}
    # group intervals bracket the group means
    for g in "abcd":
        lo, hi = stats.percentile_interval(res[g][:, 0])
        assert lo <= x[groups == g].mean() <= hi
    lo, hi = stats.percentile_interval(res[None][:, 0])
    assert lo <= x.mean() <= hi


def test_paired_bootstrap_uses_only_pairs_scored_on_both_sides() -> None:
    base = [0.5, 0.5, None, 0.5] * 100
    cand = [0.7, 0.7, 0.0, None] * 100
    lo, hi = stats.paired_bootstrap_ci(base, cand, n_resamples=500)
    assert lo == pytest.approx(0.2) and hi == pytest.approx(0.2)
    with pytest.raises(ValueError):
        stats.paired_bootstrap_ci([1, 2], [1, 2, 3])


# ------------------------------------------------------------------ aggregates


def test_aggregate_excludes_nulls_but_counts_them() -> None:
    agg = stats.Aggregate.of([1.0, 0.0, None, 1.0, None, 1.0], n_resamples=500)
    assert agg.value == pytest.approx(0.75)
    assert (agg.n_scored, agg.n_total) == (4, 6)
    assert 0.0 <= agg.ci_low <= agg.value <= agg.ci_high <= 1.0
    d = agg.to_dict()
    assert set(d) == {"value", "n_scored", "n_total", "ci_low", "ci_high"}
    assert "n=4/6" in agg.format()


def test_aggregate_accepts_polars_series_with_nulls() -> None:
    pl = pytest.importorskip("polars")
    agg = stats.Aggregate.of(pl.Series([True, False, None, True]), n_resamples=200)
    assert agg.value == pytest.approx(2 / 3)
    assert (agg.n_scored, agg.n_total) == (3, 4)


# ------------------------------------------------------------------ detectable differences


def test_min_detectable_difference_formula() -> None:
    # (1.959964 + 0.841621) * sd / sqrt(n)
    assert stats.min_detectable_difference(100, 0.5) == pytest.approx(2.801585 * 0.05, rel=1e-5)
    assert stats.min_detectable_difference(0, 0.5) is None
    # never below one case
    assert stats.min_detectable_difference(50, 0.0) == pytest.approx(1 / 50)


def test_min_detectable_difference_proportion() -> None:
    # 10% of 400 cases flip: sqrt(0.1 / 400) * 2.8016 = 0.0443
    assert stats.min_detectable_difference_proportion(400, 0.1) == pytest.approx(0.044297, rel=1e-4)
    # unknown discordance: worst case
    assert stats.min_detectable_difference_proportion(100) == pytest.approx(0.2801585, rel=1e-5)
