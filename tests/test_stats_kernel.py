"""The Rust bootstrap kernel (ragmeter._core.bootstrap_means) against the numpy/Python references."""
from __future__ import annotations

import math

import numpy as np
import pytest

from ragmeter import _core, stats


def _data(n: int = 3000, seed: int = 4) -> tuple:
    rng = np.random.default_rng(seed)
    x = np.column_stack([rng.random(n), rng.normal(0.2, 1.0, n), rng.beta(5, 1.5, n)])
    x[rng.random((n, 3)) < 0.1] = np.nan
    groups = np.array(["a", "b", "c"], dtype=object)[rng.integers(0, 3, n)]
    return x, groups


def test_kernel_is_used_by_default_and_matches_numpy_engine_in_distribution() -> None:
    x, groups = _data()
    rust = stats.bootstrap_means(x, n_resamples=4000, seed=3, groups=groups, engine="rust")
    ref = stats.bootstrap_means(x, n_resamples=4000, seed=3, groups=groups, engine="numpy")
    auto = stats.bootstrap_means(x, n_resamples=4000, seed=3, groups=groups)
    for key in (None, "a", "b", "c"):
        np.testing.assert_array_equal(auto[key], rust[key])
        assert not np.array_equal(rust[key], ref[key])  # different generators ...
        sel = np.ones(len(x), bool) if key is None else groups == key
        for j in range(x.shape[1]):
            v = x[sel, j]
            v = v[~np.isnan(v)]
            lo, hi = stats.percentile_interval(rust[key][:, j])
            rlo, rhi = stats.percentile_interval(ref[key][:, j])
            width = rhi - rlo
            # ... same distribution: interval ends within 10% of the width, same spread
            assert abs(lo - rlo) < 0.1 * width and abs(hi - rhi) < 0.1 * width, (key, j)
            assert np.std(rust[key][:, j]) == pytest.approx(np.std(ref[key][:, j]), rel=0.08)
            assert np.mean(rust[key][:, j]) == pytest.approx(v.mean(), abs=0.1 * width)
            # and both match normal theory (the group size varies between resamples,
            # which the bootstrap of a ratio accounts for)
            se = np.std(v, ddof=1) / math.sqrt(v.size)
            assert hi - lo == pytest.approx(2 * 1.96 * se, rel=0.1)


def test_kernel_reduction_matches_plain_python_on_its_own_counts_with_groups() -> None:
    rng = np.random.default_rng(8)
    n, b = 500, 24
    x = rng.random((n, 2))
    x[::7, 0] = np.nan
    codes = rng.integers(0, 3, n)
    out = _core.bootstrap_means(x, codes, 3, b, 99, None)
    assert out.shape == (b, 4, 2)
    counts = _core.bootstrap_counts(n, b, 99)
    assert counts.dtype == np.int32 and (counts.sum(axis=1) == n).all()
    order = np.argsort(codes, kind="stable")  # the kernel's counts are over cases in group order
    for r in range(b):
        w = np.zeros(n)
        w[order] = counts[r]
        for slot in range(4):
            sel = np.ones(n, bool) if slot == 0 else codes == slot - 1
            for j in range(2):
                ok = sel & ~np.isnan(x[:, j])
                num = sum(float(w[i]) * float(x[i, j]) for i in np.flatnonzero(ok))
                den = sum(float(w[i]) for i in np.flatnonzero(ok))
                assert out[r, slot, j] == pytest.approx(num / den, rel=1e-6)


def test_kernel_exactly_reproducible_for_a_seed_whatever_the_threads() -> None:
    x, groups = _data(5000, seed=2)
    runs = [stats.bootstrap_means(x, n_resamples=123, seed=77, groups=groups, threads=t, engine="rust")
            for t in (1, 2, 5, None)]
    for other in runs[1:]:
        for key in runs[0]:
            np.testing.assert_array_equal(runs[0][key], other[key])
    again = stats.bootstrap_means(x, n_resamples=123, seed=77, groups=groups, engine="rust")
    np.testing.assert_array_equal(runs[0][None], again[None])
    other_seed = stats.bootstrap_means(x, n_resamples=123, seed=78, groups=groups, engine="rust")
    assert not np.array_equal(runs[0][None], other_seed[None])
    # the first resamples do not depend on how many are drawn (blocks of 16 have their own seed)
    longer = stats.bootstrap_means(x, n_resamples=200, seed=77, groups=groups, engine="rust")
    np.testing.assert_array_equal(longer[None][:123], runs[0][None])


def test_kernel_nulls_and_constants() -> None:
    n = 600
    x = np.full((n, 4), np.nan)
    x[:, 3] = np.random.default_rng(0).random(n)  # continuous: the general path (the kernel)
    x[:, 0] = 0.1  # constant: exact in every resample
    x[::2, 1] = 1.0
    x[1::2, 1] = 0.0
    groups = np.where(np.arange(n) < 300, "g1", "g2").astype(object)
    x[300:, 1] = np.nan  # g2 never scored on column 1
    res = stats.bootstrap_means(x, n_resamples=50, seed=1, groups=groups, engine="rust")
    assert (res[None][:, 0] == 0.1).all() and (res["g2"][:, 0] == 0.1).all()
    assert np.isnan(res["g2"][:, 1]).all() and not np.isnan(res["g1"][:, 1]).any()
    assert np.isnan(res[None][:, 2]).all()  # column 2 never scored: NaN, not 0


def test_numpy_reference_engine_still_matches_its_counts() -> None:
    rng = np.random.default_rng(5)
    n = 700
    x = rng.random(n)
    x[::9] = np.nan
    got = stats.bootstrap_means(x, n_resamples=40, seed=11, threads=1, engine="numpy")[None][:, 0]
    expected = []
    for counts in stats.resample_counts(n, 40, seed=11, engine="numpy"):
        for row in counts:
            ok = ~np.isnan(x)
            expected.append(float(np.dot(row[ok].astype(np.float64), x[ok]) / row[ok].sum()))
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_engine_argument_is_checked() -> None:
    with pytest.raises(ValueError):
        stats.bootstrap_means([0.1, 0.2, 0.3], n_resamples=10, engine="fortran")


@pytest.mark.parametrize("engine", ["numpy", "auto"])
def test_a_negative_seed_is_a_seed_on_every_path(engine):
    """The Rust kernel takes the seed modulo 2**64; the NumPy path (used from 2**24 cases) raised ValueError."""
    x = np.linspace(0.0, 1.0, 50)
    a = stats.bootstrap_means(x, n_resamples=200, seed=-7, engine=engine)[None][:, 0]
    b = stats.bootstrap_means(x, n_resamples=200, seed=-7, engine=engine)[None][:, 0]
    c = stats.bootstrap_means(x, n_resamples=200, seed=-8, engine=engine)[None][:, 0]
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    agg = stats.aggregate(x, n_resamples=200, seed=-7)
    assert agg.ci_low < x.mean() < agg.ci_high
