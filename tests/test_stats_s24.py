"""Statistics a CI gate decides with, checked against independent references: exact power of McNemar's
test for the minimum detectable difference, exact (ideal-bootstrap) coverage of the percentile interval,
published McNemar values, and the pairing of the paired bootstrap."""
from __future__ import annotations

import math
from functools import lru_cache
from typing import List, Optional

import numpy as np
import pytest

from ragmeter import stats

# ------------------------------------------------------------------ minimum detectable difference
# Reference: the smallest true difference delta that McNemar's exact two-sided test at alpha 0.05 detects with
# power 0.8, by exact enumeration (no normal approximation). The discordant rate under the alternative is
# max(p_d, delta): a difference of delta needs at least a share delta of the cases to flip.


def _pmf(n: int, p: float) -> List[float]:
    if p <= 0.0:
        return [1.0] + [0.0] * n
    if p >= 1.0:
        return [0.0] * n + [1.0]
    lp, lq = math.log(p), math.log1p(-p)
    return [math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * lp + (n - k) * lq)
            for k in range(n + 1)]


@lru_cache(maxsize=None)
def _rejects(d: int) -> List[bool]:
    """Which win counts c of d discordant pairs McNemar's exact test rejects at 0.05 (math.comb, exact)."""
    out = []
    for c in range(d + 1):
        k = min(c, d - c)
        out.append(2 * sum(math.comb(d, i) for i in range(k + 1)) <= 0.05 * 2**d)
    return out


def _power(n: int, p_d: float, delta: float) -> float:
    q = 0.5 + delta / (2 * p_d)
    total = 0.0
    for d, w in enumerate(_pmf(n, p_d)):
        if w > 1e-14:
            total += w * sum(pc for pc, ok in zip(_pmf(d, q), _rejects(d)) if ok)
    return total


def _exact_mdd(n: int, p_d: float) -> Optional[float]:
    if _power(n, 1.0, 1.0) < 0.8:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _power(n, max(p_d, mid), mid) >= 0.8 else (mid, hi)
    return hi


@pytest.mark.parametrize("n,p_d", [(50, 0.0), (50, 0.04), (100, 0.0), (100, 0.02), (100, 0.3), (200, 0.1)])
def test_mdd_of_a_proportion_matches_mcnemar_exact_power(n: int, p_d: float) -> None:
    # two runs that flip no case (or a couple) cannot detect a 1-case difference: McNemar needs at least 6
    # discordant pairs, all one way, to reach p < 0.05. Before: 1/n (2.0pp at n=50), 8x too optimistic.
    exact = _exact_mdd(n, p_d)
    got = stats.min_detectable_difference_proportion(n, p_d)
    assert exact is not None and got is not None
    assert got == pytest.approx(exact, rel=0.06), (got, exact)


def test_mdd_of_a_proportion_closed_form() -> None:
    z = 1.959963984540054 + 0.8416212335729143
    assert stats.min_detectable_difference_proportion(100, 0.3) == pytest.approx(z * math.sqrt(0.3 / 100))
    # below p_d = z^2 / n the floor z^2 / n holds (delta = z * sqrt(delta / n))
    for p_d in (0.0, 0.01, 0.05):
        assert stats.min_detectable_difference_proportion(100, p_d) == pytest.approx(z * z / 100)
    # at 7 cases or fewer no difference of two rates is detectable: over 100 points
    assert stats.min_detectable_difference_proportion(7, 0.0) > 1.0
    assert stats.min_detectable_difference_proportion(0, 0.1) is None


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_mdd_refuses_a_discordant_rate_outside_0_1(bad: float) -> None:
    with pytest.raises(ValueError, match="discordant_rate"):
        stats.min_detectable_difference_proportion(50, bad)


# ------------------------------------------------------------------ McNemar: a published example


def test_mcnemar_exact_on_fagerland_lydersen_laake_example() -> None:
    # Fagerland, Lydersen, Laake (2013), BMC Med Res Methodol 13:91, airway hyper-responsiveness before and
    # after stem cell transplantation, 21 children, discordant 1 and 7: exact conditional p = 0.070 (their
    # mid-p, 0.039, is not what ragmeter reports: the docstring says exact conditional)
    p = stats.mcnemar_exact(1, 7)
    assert round(p, 3) == 0.070 and p == 2 * (math.comb(8, 0) + math.comb(8, 1)) / 2**8
    assert stats.mcnemar_exact(7, 1) == p
    mid_p = p - math.comb(8, 1) / 2**8
    assert round(mid_p, 3) == 0.039 and p != mid_p


@pytest.mark.parametrize("b,c", [(0, 0), (5, 5), (600, 600), (250_000, 250_000)])
def test_mcnemar_no_discordance_or_a_tie_is_one(b: int, c: int) -> None:
    assert stats.mcnemar_exact(b, c) == 1.0


def test_mcnemar_huge_counts_neither_overflow_nor_lose_the_tail() -> None:
    # normal approximation as an independent check far in the bulk: z = (c - b) / sqrt(b + c)
    b, c = 400_000, 401_200
    z = (c - b) / math.sqrt(b + c)
    approx = math.erfc(z / math.sqrt(2))
    assert stats.mcnemar_exact(b, c) == pytest.approx(approx, rel=0.02)
    # far in the tail: 2 * 2^-n underflows to 0.0, never NaN, never negative
    assert stats.mcnemar_exact(0, 5000) == 0.0


@pytest.mark.parametrize("b,c", [(2.5, 3), (1, float("nan"))])
def test_mcnemar_refuses_counts_that_are_not_whole(b: float, c: float) -> None:
    with pytest.raises(ValueError):
        stats.mcnemar_exact(b, c)  # type: ignore[arg-type]


# ------------------------------------------------------------------ nulls of every table library


def test_pandas_nullable_nulls_are_unscored_cases() -> None:
    pd = pytest.importorskip("pandas")
    for series in (pd.Series([True, pd.NA, False, True, True], dtype="boolean"),
                   pd.Series([1, pd.NA, 0, 1, 1], dtype="Int64"),
                   pd.Series([1.0, pd.NA, 0.0, 1.0, 1.0], dtype="Float64"),
                   pd.Series([True, None, False, True, True], dtype=object)):
        agg = stats.Aggregate.of(series, n_resamples=200)
        assert (agg.value, agg.n_scored, agg.n_total) == (0.75, 4, 5), series.dtype


# ------------------------------------------------------------------ percentile interval of a proportion


def _binom_cdf(n: int, p: float) -> List[float]:
    out, s = [], 0.0
    for w in _pmf(n, p):
        s += w
        out.append(s)
    return out


def _ideal_interval(k: int, n: int) -> tuple:
    """The percentile interval with infinitely many resamples: a resample's mean of k ones among n cases is
    Binomial(n, k/n) / n, so the bounds are its 2.5% and 97.5% quantiles."""
    cdf = _binom_cdf(n, k / n)
    lo = next(i for i in range(n + 1) if cdf[i] >= 0.025 - 1e-12)
    hi = next(i for i in range(n + 1) if cdf[i] >= 0.975 - 1e-12)
    return lo / n, hi / n


def _ideal_coverage(n: int, p: float) -> float:
    pmf = _pmf(n, p)
    return sum(pmf[k] for k in range(n + 1) if _ideal_interval(k, n)[0] <= p <= _ideal_interval(k, n)[1])


def test_percentile_interval_of_a_proportion_is_the_binomial_quantiles() -> None:
    # far from a quantile's jump the bounds are exact whatever the Monte-Carlo noise
    n = 50
    for k in (5, 25, 40, 47):
        ones = [1.0] * k + [0.0] * (n - k) + [None] * 3  # nulls: left out, never 0
        lo, hi = stats.bootstrap_ci(ones, n_resamples=20_000, seed=11)
        want = _ideal_interval(k, n)
        cdf = _binom_cdf(n, k / n)
        for got, w in zip((lo, hi), want):
            i = round(w * n)
            if abs(cdf[i] - 0.025) > 0.004 and abs(cdf[i] - 0.975) > 0.004 and \
                    (i == 0 or (abs(cdf[i - 1] - 0.025) > 0.004 and abs(cdf[i - 1] - 0.975) > 0.004)):
                assert got == pytest.approx(w, abs=1e-6), (k, lo, hi, want)


def test_coverage_of_the_95_interval_of_a_proportion_at_50_cases() -> None:
    # the percentile bootstrap under-covers near 0 and 1 at small n (documented in docs/metrics.md): at 50
    # cases and a true rate of 95%, 7.7% of samples are all ones and get the interval [100%, 100%]
    assert _ideal_coverage(50, 0.5) == pytest.approx(0.967, abs=0.001)
    assert _ideal_coverage(50, 0.95) == pytest.approx(0.911, abs=0.001)
    assert _ideal_coverage(50, 0.99) < 0.40
    # the implementation's coverage (seeded simulation, 400 samples x 1000 resamples) is the ideal one
    rng = np.random.default_rng(20241206)
    for p in (0.5, 0.95):
        samples = 400
        covered = 0
        for r in range(samples):
            lo, hi = stats.bootstrap_ci((rng.random(50) < p).astype(float), n_resamples=1000, seed=r)
            covered += lo <= p <= hi
        ideal = _ideal_coverage(50, p)
        assert abs(covered / samples - ideal) <= 3.5 * math.sqrt(ideal * (1 - ideal) / samples) + 0.01, (p, covered)


def test_tiny_and_constant_samples() -> None:
    for n in (1, 2, 3):
        assert stats.bootstrap_ci([0.2, 0.9, 0.4][:n] + [None, float("nan")]) == (None, None)
        agg = stats.Aggregate.of([0.2, 0.9, 0.4][:n] + [None])
        assert (agg.ci_low, agg.n_scored, agg.n_total) == (None, n, n + 1)
    assert stats.bootstrap_ci([0.2, 0.9, 0.4, 0.5]) != (None, None)
    # all equal: every resample has that mean, the interval has no width (and is said to be one in docs)
    assert stats.bootstrap_ci([1.0] * 50 + [None] * 5) == (1.0, 1.0)


# ------------------------------------------------------------------ paired bootstrap


def test_paired_bootstrap_resamples_cases_not_sides() -> None:
    # candidate = baseline + 0.05 on every case with a wide spread between cases: paired, the delta has no
    # noise at all (interval [0.05, 0.05]); resampling the two sides independently would give about +-0.1
    rng = np.random.default_rng(3)
    base = rng.random(200)
    cand = base + 0.05
    lo, hi = stats.paired_bootstrap_ci(base, cand, n_resamples=2000, seed=1)
    assert lo == pytest.approx(0.05, abs=1e-6) and hi == pytest.approx(0.05, abs=1e-6)
    # and it is the interval of the per-case differences over the cases scored on both sides
    base_l = list(base) + [None, 0.3]
    cand_l = list(cand) + [0.9, None]
    assert stats.paired_bootstrap_ci(base_l, cand_l, n_resamples=500, seed=4) == \
        stats.bootstrap_ci(cand - base, n_resamples=500, seed=4)


@pytest.mark.parametrize("engine", ["rust", "numpy"])
def test_same_seed_same_resamples_whatever_the_threads(engine: str) -> None:
    rng = np.random.default_rng(8)
    values = rng.random((700, 3))
    values[rng.random((700, 3)) < 0.1] = np.nan
    groups = rng.integers(0, 4, 700).astype(str)
    one = stats.bootstrap_means(values, n_resamples=300, seed=5, groups=groups, threads=1, engine=engine)
    two = stats.bootstrap_means(values, n_resamples=300, seed=5, groups=groups, threads=2, engine=engine)
    assert one.keys() == two.keys()
    for key in one:
        assert np.array_equal(one[key], two[key], equal_nan=True)
    other = stats.bootstrap_means(values, n_resamples=300, seed=6, groups=groups, threads=1, engine=engine)
    assert not np.array_equal(one[None], other[None], equal_nan=True)


def test_engines_agree_in_distribution() -> None:
    rng = np.random.default_rng(9)
    values = rng.random(300)
    r = stats.bootstrap_means(values, n_resamples=4000, seed=2, engine="rust")[None][:, 0]
    p = stats.bootstrap_means(values, n_resamples=4000, seed=2, engine="numpy")[None][:, 0]
    se = values.std(ddof=1) / math.sqrt(300)
    assert r.mean() == pytest.approx(values.mean(), abs=0.1 * se)
    assert p.mean() == pytest.approx(values.mean(), abs=0.1 * se)
    assert r.std() == pytest.approx(se, rel=0.06) and p.std() == pytest.approx(se, rel=0.06)


def test_masked_array_entries_are_unscored_cases_not_their_fill_values() -> None:
    # a masked entry is a missing value: it was read as its stored value (here 0.0, the mean dropped to 0.6
    # over 5/5 cases)
    values = np.ma.masked_array([1.0, 0.0, 0.0, 1.0, 1.0], mask=[0, 1, 0, 0, 0])
    agg = stats.Aggregate.of(values, n_resamples=200)
    assert (agg.value, agg.n_scored, agg.n_total) == (0.75, 4, 5)
    flags = np.ma.masked_array([True, False, False, True, True], mask=[0, 1, 0, 0, 0])
    assert stats.mcnemar(flags, [True, True, False, True, True])["n"] == 4
    assert stats.to_float_array(values).tolist()[1] != stats.to_float_array(values).tolist()[1]  # NaN


# ------------------------------------------------------------------ category intervals of a wide-ranging metric


def _outlier_groups() -> tuple:
    # a custom score that ranges widely (a token count, a latency): one case of category "a" at 10,000, the
    # nine cases of category "b" all 0.1; every resample of "b" has the mean 0.1
    return np.array([1e4] + [0.1] * 9), np.array(["a"] + ["b"] * 9)


def test_kernel_group_means_keep_their_digits_when_another_group_is_far_away() -> None:
    from ragmeter import _core

    values, groups = _outlier_groups()
    codes = np.array([0] + [1] * 9, dtype=np.int64)
    out = _core.bootstrap_means(np.ascontiguousarray(values[:, None]), codes, 2, 200, 1, None)
    b = out[:, 2, 0]
    b = b[~np.isnan(b)]
    assert np.allclose(b, 0.1, rtol=0, atol=1e-9), (b.min(), b.max())


def test_category_intervals_keep_their_digits_when_another_category_is_far_away() -> None:
    # what the reports' per-category intervals use: the category "b" interval was [0.0990, 0.1007] around a
    # constant 0.1 when the kernel centred every group on the column's first value
    values, groups = _outlier_groups()
    for engine in ("auto", "numpy"):
        res = stats.bootstrap_means(values, n_resamples=200, seed=1, groups=groups, engine=engine)
        b = res["b"][:, 0]
        b = b[~np.isnan(b)]
        assert np.allclose(b, 0.1, rtol=0, atol=1e-9), (engine, b.min(), b.max())
        a = res["a"][:, 0]
        assert np.allclose(a[~np.isnan(a)], 1e4, rtol=1e-12)
    # the groups come from the very same resamples as the overall slot (the kernel's counts)
    rng = np.random.default_rng(2)
    wide = np.concatenate([rng.random(300) * 5000, rng.random(300)])
    cats = np.array(["x"] * 300 + ["y"] * 300)
    res = stats.bootstrap_means(wide, n_resamples=300, seed=4, groups=cats)
    counts = np.vstack(list(stats.resample_counts(600, 300, 4))).astype(np.float64)
    np.testing.assert_allclose(res[None][:, 0], (counts @ wide) / 600, rtol=1e-6)
    want_y = (counts[:, 300:] @ wide[300:]) / counts[:, 300:].sum(axis=1)
    np.testing.assert_allclose(res["y"][:, 0], want_y, rtol=0, atol=1e-6)
