"""API defects of session 26: each test asserts the documented behaviour (seen failing first)."""
from __future__ import annotations

from pathlib import Path

import pytest

import ragmeter
from ragmeter.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "python" / "ragmeter" / "_example"


@pytest.fixture(scope="module")
def example():
    return ragmeter.evaluate(EX / "golden.jsonl", EX / "run.jsonl")


# -- 1. assert_scores measures each metric over the cases compare --gate does


def test_score_table_refusal_is_over_answerable_cases_as_compare_gate(example):
    from ragmeter.testing import assert_scores, score_table

    gate = example.compare(example, gate="refusal<=20%").gate_results[0].detail
    assert "0.1591 over 44/51" in gate
    assert score_table(example, ["refusal"]) == [("refusal", pytest.approx(7 / 44), 44, 51)]
    assert_scores(example, {"refusal": "<=20%"})


def test_score_table_counts_n_total_over_the_cases_a_metric_applies_to(example):
    from ragmeter.testing import score_table

    overall = example.summary["retrieval"]["overall"]["all_files_hit_rate"]
    (_, value, n_scored, n_total), = score_table(example, ["all_files_hit"])
    assert (value, n_scored, n_total) == (pytest.approx(overall["value"]), overall["n_scored"], overall["n_total"])
    assert n_total == 13
