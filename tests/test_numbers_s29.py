"""Session 29: ragmeter's numbers against computations written here from the definitions (docs/metrics.md,
docs/calibration.md), in plain Python."""
from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from ragmeter import stats
from ragmeter.compare import compare_frames


# ------------------------------------------------------------------ bootstrap: exact means of whole-number values


def _paired_flips(n: int, wins: int, regressions: int) -> np.ndarray:
    """Per-case deltas of a 0/1 outcome: ``wins`` cases +1, ``regressions`` cases -1, the others 0."""
    deltas = np.zeros(n)
    deltas[:wins] = 1.0
    deltas[wins:wins + regressions] = -1.0
    return deltas


@pytest.mark.parametrize("n, engine", [(257, "auto"), (300, "auto"), (30, "numpy"), (257, "numpy")])
def test_a_resampled_mean_of_whole_numbers_is_their_sum_over_n_exactly(n: int, engine: str) -> None:
    # a resample of n deltas in {-1, 0, 1} has the mean s / n, s a whole number: the paths that centred the values
    # on their mean (the multinomial one above 256 cases, numpy's) gave 3.5e-18 for s = 0
    deltas = _paired_flips(n, 13, 5)
    means = stats.bootstrap_means(deltas, n_resamples=2000, seed=0, engine=engine)[None][:, 0]
    sums = np.round(means * n)
    assert (means == sums / n).all(), means[means != sums / n][:5]


def test_an_interval_whose_true_bound_is_zero_is_not_starred() -> None:
    # 257 paired cases, 13 wins and 5 regressions (McNemar p = 0.096): the 2.5th percentile of the resampled
    # deltas is a resample with as many wins as regressions, 0; it came out as +3.5e-18 and the row was starred
    ids = [f"fact-{i:04d}" for i in range(257)]
    deltas = _paired_flips(257, 13, 5)

    def cases(hits: np.ndarray) -> pl.DataFrame:
        return pl.DataFrame({"id": ids, "category": ["fact"] * 257, "labeled": [True] * 257,
                             "hit": [bool(h) for h in hits]})

    base = cases(deltas < 0)
    cand = cases(deltas > 0)
    row = compare_frames(base, cand, n_resamples=2000).row("hit")
    assert row is not None and (row.wins, row.regressions) == (13, 5)
    assert row.ci_low == 0.0 and not row.significant
