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


# ------------------------------------------------------------------ collected repeats: n_total is the cases a metric applies to

def _chunk(file: str, text: str) -> dict:
    return {"file": file, "chunk_id": f"{file}#{text}", "text": text, "score": 1.0}


REPEATS_GOLDEN = [
    {"id": "multi-1", "question": "q1", "expected_files": ["a.md", "b.md"], "expected_evidence": ["alpha"],
     "reference_answer": "alpha"},
    {"id": "fact-2", "question": "q2", "expected_files": ["b.md"], "expected_evidence": ["beta"],
     "reference_answer": "beta"},
    {"id": "fact-3", "question": "q3", "expected_files": ["c.md"], "expected_evidence": ["gamma"],
     "reference_answer": "gamma"},
    {"id": "noanswer-4", "question": "q4", "expected_files": [], "expected_evidence": [], "reference_answer": ""},
]


def _repeated_run() -> list:
    rows = []
    for repeat in (1, 2):
        both_files = [_chunk("a.md", "alpha"), _chunk("b.md", "x")]
        rows += [
            {"id": "multi-1", "repeat": repeat, "retrieved": both_files if repeat == 1 else both_files[:1],
             "answer": "alpha"},
            {"id": "fact-2", "repeat": repeat, "retrieved": [_chunk("b.md", "beta")], "answer": "I don't know"},
            {"id": "fact-3", "repeat": repeat, "retrieved": [_chunk("x.md", "none")], "answer": "gamma"},
            {"id": "noanswer-4", "repeat": repeat, "retrieved": [], "answer": "I don't know"},
        ]
    return rows


def test_collected_repeats_count_in_n_total_the_cases_a_metric_applies_to() -> None:
    # docs/metrics.md: n_total is the cases the metric applies to: all_files_hit the one case expecting two files,
    # the refusal rate the three answerable questions, correct without a judge the one no-answer question; repeat
    # 1's own aggregates say so, the spread across repeats said 4 of 4 cases for each
    import ragmeter

    result = ragmeter.evaluate(REPEATS_GOLDEN, _repeated_run())
    metrics = result.summary["collected_repeats"]["metrics"]
    assert metrics["all_files_hit"]["per_repeat"] == [1.0, 0.0]
    assert metrics["all_files_hit"]["n_total"] == [1, 1]
    assert metrics["refusal"]["n_total"] == [3, 3] and metrics["refusal"]["n_scored"] == [3, 3]
    assert metrics["correct"]["n_total"] == [1, 1]
    assert metrics["hit"]["n_total"] == [4, 4] and metrics["hit"]["n_scored"] == [3, 3]
    assert result.summary["retrieval"]["overall"]["all_files_hit_rate"]["n_total"] == 1


def test_a_rate_counting_failed_calls_is_unknown_when_no_call_was_judged():
    from ragmeter.stats import rate_counting_failed

    assert rate_counting_failed(0, 0, 5) == (5, None)  # it was 0.0: every call failed, nothing was measured
    assert rate_counting_failed(0, 0, 0) == (0, None)
    assert rate_counting_failed(2, 3, 1) == (4, 0.5)


def test_the_reports_note_gives_no_rate_when_every_correctness_call_failed():
    import polars as pl

    from ragmeter.report.data import correct_rate_note

    cases = pl.DataFrame({"correctness_status": ["failed"] * 3, "correct": [None, None, None]},
                         schema={"correctness_status": pl.Utf8, "correct": pl.Boolean})
    note = correct_rate_note(cases)
    assert note is not None and "Every correctness call failed (3)" in note and "0.0%" not in note
