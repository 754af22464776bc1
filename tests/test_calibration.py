"""ragmeter.calibration: kappa, agreement, PPI, verdict rules and run-time review sampling."""
from __future__ import annotations

import math
import random
from collections import Counter

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.calibration import (
    agreement,
    cohen_kappa,
    landis_koch,
    ppi_mean,
    review_draw,
    review_reasons,
    verdict_from_points,
    wilson_interval,
)

# The worked example: 15 reviewed cases; judge correct 8 (5 agreed, 3 human wrong), judge wrong 7 (all agreed).
JUDGE = [True] * 5 + [True] * 3 + [False] * 7
HUMAN = [True] * 5 + [False] * 3 + [False] * 7


def test_worked_example_exactly() -> None:
    result = agreement(JUDGE, HUMAN)
    assert result.n == 15 and result.agreed == 12 and result.value == pytest.approx(0.80)
    assert result.cells == {"both_true": 5, "a_true_b_false": 3, "a_false_b_true": 0, "both_false": 7}
    k = cohen_kappa(JUDGE, HUMAN)
    assert round(k.value, 4) == 0.6087 and k.observed == pytest.approx(0.8)
    assert k.chance == pytest.approx((8 * 5 + 7 * 10) / 225) and k.n == 15
    assert k.ci_low < k.value < k.ci_high and -1 <= k.ci_low and k.ci_high <= 1
    assert landis_koch(k.value) == "substantial"
    # the Wilson interval of 12/15
    assert result.ci_low == pytest.approx(0.5481, abs=1e-4) and result.ci_high == pytest.approx(0.9295, abs=1e-4)


def reference_kappa(a, b):
    """Plain Cohen's kappa from the confusion matrix."""
    labels = sorted(set(a) | set(b), key=repr)
    n = len(a)
    matrix = {(x, y): 0 for x in labels for y in labels}
    for x, y in zip(a, b):
        matrix[(x, y)] += 1
    po = sum(matrix[(x, x)] for x in labels) / n
    pe = sum(sum(matrix[(x, y)] for y in labels) * sum(matrix[(y, x)] for y in labels) for x in labels) / n ** 2
    # one rater with a single label pins kappa at 0 whatever the agreement: undefined, like pe == 1
    return None if pe == 1 or len(set(a)) == 1 or len(set(b)) == 1 else (po - pe) / (1 - pe)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("abc")), min_size=1, max_size=40))
def test_kappa_matches_a_plain_reference(pairs) -> None:
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    expected = reference_kappa(a, b)
    k = cohen_kappa(a, b)
    if expected is None:
        assert k.value is None and "undefined" in k.reason and k.ci_low is None
    else:
        assert k.value == pytest.approx(expected, abs=1e-9)
        assert k.reason is None
        if k.ci_low is None:  # no width (every item agrees, or none): no interval, and why
            assert k.observed in (0.0, 1.0) and "no width" in k.ci_reason
        else:
            assert k.ci_low <= k.value + 1e-9 and k.value - 1e-9 <= k.ci_high


@given(st.sampled_from([True, False, "x"]), st.integers(min_value=1, max_value=30))
def test_all_one_class_is_undefined_never_one_or_zero(label, n) -> None:
    k = cohen_kappa([label] * n, [label] * n)
    assert k.value is None and k.observed == 1.0 and k.chance == 1.0 and "chance agreement is 1" in k.reason
    assert k.to_dict()["band"] is None
    assert agreement([label] * n, [label] * n).value == 1.0  # agreement itself is defined


@pytest.mark.parametrize("a, b", [
    ([True] * 19 + [False], [True] * 20),  # the reviewer found every case correct, the judge 19 of 20
    ([True] * 5, [False] * 5),  # all disagree, each rater with one label
    ([True, False] * 5, [True] * 10),
])
def test_one_rater_with_a_single_label_is_undefined_never_zero(a, b) -> None:
    for first, second in ((a, b), (b, a)):
        k = cohen_kappa(first, second)
        assert k.value is None and k.ci_low is None and k.ci_high is None, k
        assert "undefined" in k.reason and "same label" in k.reason and k.to_dict()["band"] is None
        assert k.observed == agreement(first, second).value and k.n == len(a)


def test_missing_labels_are_left_out_and_counted() -> None:
    k = cohen_kappa(JUDGE + [True, None], HUMAN + [None, False])
    assert k.n == 15 and k.n_missing == 2 and round(k.value, 4) == 0.6087
    empty = cohen_kappa([None], [True])
    assert empty.value is None and empty.n == 0 and empty.reason
    with pytest.raises(ValueError):
        cohen_kappa([True], [True, False])


def test_wilson_interval_edges() -> None:
    assert wilson_interval(0, 0) == (None, None)
    lo, hi = wilson_interval(4, 4)
    assert hi == 1.0 and 0.4 < lo < 0.6  # four out of four is far from certain


@pytest.mark.parametrize("core, covered, expected", [
    ([True, False], [True, True], (True, 5)),
    ([True, False], [True, False], (True, 4)),
    ([True, True, False], [True, False, True], (False, 3)),
    ([True, False], [False, True], (False, 2)),
    ([True, False], [False, False], (False, 1)),
    ([False, False], [True, False], (False, 3)),  # nothing starred: every point is core
    ([True], [True], (True, 5)),
])
def test_verdict_rules(core, covered, expected) -> None:
    assert verdict_from_points(core, covered) == expected


def test_landis_koch_bands() -> None:
    assert [landis_koch(v) for v in (-0.1, 0.1, 0.3, 0.5, 0.7, 0.9, None)] == [
        "poor", "slight", "fair", "moderate", "substantial", "almost perfect", None]


# ------------------------------------------------------------------------------------------------ PPI


def test_ppi_matches_a_reference_computation() -> None:
    rng = random.Random(7)
    f_all = [float(rng.random() < 0.8) for _ in range(200)]
    f_lab = [float(rng.random() < 0.8) for _ in range(30)]
    h_lab = [f if rng.random() < 0.8 else 1 - f for f in f_lab]
    got = ppi_mean(f_all, f_lab, h_lab)
    mean_f = sum(f_all) / 200
    diffs = [h - f for h, f in zip(h_lab, f_lab)]
    rect = sum(diffs) / 30
    var_f = sum((x - mean_f) ** 2 for x in f_all) / 199
    var_d = sum((d - rect) ** 2 for d in diffs) / 29
    se = math.sqrt(var_f / 200 + var_d / 30)
    assert got["value"] == pytest.approx(mean_f + rect) and got["raw"] == pytest.approx(mean_f)
    assert got["ci_low"] == pytest.approx(mean_f + rect - 1.959964 * se, abs=1e-6)
    assert got["ci_high"] == pytest.approx(mean_f + rect + 1.959964 * se, abs=1e-6)
    assert got["n_labelled"] == 30 and got["n_all"] == 200


def test_ppi_without_random_labels_says_so() -> None:
    got = ppi_mean([1.0, 0.0], [], [])
    assert got["value"] is None and got["reason"] and got["raw"] == 0.5
    one = ppi_mean([1.0, 0.0], [1.0], [0.0])
    assert one["value"] == pytest.approx(-0.5)  # judge mean 0.5, one label 1 below the judge
    assert one["ci_low"] is None and "no interval" in one["reason"]


def test_ppi_interval_covers_the_true_rate() -> None:
    """A lenient judge (says correct on 30% of wrong answers): the raw rate is biased, PPI's interval covers."""
    rng = random.Random(2023)
    truth, n_all, n_lab, reps = 0.7, 400, 60, 300
    covered = raw_covered = 0
    for _ in range(reps):
        human = [rng.random() < truth for _ in range(n_all)]
        judge = [h or rng.random() < 0.3 for h in human]
        labelled = rng.sample(range(n_all), n_lab)
        got = ppi_mean([float(j) for j in judge], [float(judge[i]) for i in labelled],
                       [float(human[i]) for i in labelled])
        covered += got["ci_low"] <= truth <= got["ci_high"]
        raw_covered += abs(got["raw"] - truth) < 0.02
    assert 0.90 <= covered / reps <= 0.99
    assert raw_covered / reps < 0.05  # the raw judge rate is off by about 9 points


# ------------------------------------------------------------------------------------------------ sampling


def _cases(n: int, failed=(), miss=()) -> pl.DataFrame:
    ids = [f"case-{i:04d}" for i in range(n)]
    return pl.DataFrame({
        "id": ids,
        "correctness_status": ["failed" if i in failed else "ok" for i in ids],
        "diagnosis": ["MISS_BUT_CORRECT" if i in miss else "OK" for i in ids],
    })


def test_review_reasons_follow_the_rule_and_are_reproducible() -> None:
    cases = _cases(2000, failed={"case-0001"}, miss={"case-0002"})
    reasons = review_reasons(cases, 0.1, 5)
    assert reasons.name == "review_reason" and reasons.to_list() == review_reasons(cases, 0.1, 5).to_list()
    assert reasons[1] == "judge_failed" and reasons[2] == "miss_but_correct"
    counts = Counter(reasons.to_list())
    assert 0.08 < counts["sampled"] / 2000 < 0.12 and set(counts) == {"judge_failed", "miss_but_correct", "sampled", None}
    for case_id, reason in zip(cases["id"], reasons):
        if reason in ("sampled", None):
            assert (reason == "sampled") == (review_draw(5, case_id) < 0.1)
    assert review_reasons(cases, 0.1, 6).to_list() != reasons.to_list()  # another seed, another sample


def test_sampling_is_independent_of_other_cases_outcomes_and_positions() -> None:
    cases = _cases(500)
    before = review_reasons(cases, 0.2, 1).to_list()
    # one case's judge verdict changes (now failed, then miss-but-correct): no other case's flag moves
    for changed in (_cases(500, failed={"case-0100"}), _cases(500, miss={"case-0100"})):
        after = review_reasons(changed, 0.2, 1).to_list()
        assert [a for k, a in enumerate(after) if k != 100] == [b for k, b in enumerate(before) if k != 100]
    # the draw is by id, not by position
    shuffled = cases.sample(fraction=1.0, shuffle=True, seed=3)
    by_id = dict(zip(shuffled["id"], review_reasons(shuffled, 0.2, 1)))
    assert [by_id[i] for i in cases["id"]] == before
    # a case drops out of the set: the others keep their flags
    fewer = cases.filter(pl.col("id") != "case-0007")
    assert review_reasons(fewer, 0.2, 1).to_list() == before[:7] + before[8:]


def test_review_rate_outside_zero_one_is_an_input_error() -> None:
    from ragmeter.errors import InputError

    with pytest.raises(InputError, match="rate must be a number between 0 and 1 or None, got 1.5"):
        review_reasons(_cases(3), 1.5, 1)


def test_eval_records_review_reason_and_its_seed(tmp_path) -> None:
    import json
    from pathlib import Path

    from ragmeter.evaluation import run_eval

    example = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"
    run_eval(example / "golden.jsonl", example / "run.jsonl", tmp_path / "ev", reports=False, review_rate=0.5,
             review_seed=99)
    summary = json.loads((tmp_path / "ev" / "summary.json").read_text())
    assert summary["settings"]["review"] == {"rate": 0.5, "seed": 99}
    cases = pl.read_parquet(tmp_path / "ev" / "cases.parquet")
    expected = ["sampled" if review_draw(99, i) < 0.5 else None for i in cases["id"]]  # not judged: draw only
    assert cases["review_reason"].to_list() == expected
    run_eval(example / "golden.jsonl", example / "run.jsonl", tmp_path / "ev2", reports=False)
    default = json.loads((tmp_path / "ev2" / "summary.json").read_text())["settings"]["review"]
    assert default["rate"] == 0.1 and isinstance(default["seed"], int)


def test_calibration_is_a_lazy_attribute() -> None:
    import ragmeter

    assert ragmeter.calibration.cohen_kappa is cohen_kappa and "calibration" in dir(ragmeter)
