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
    assert "0.1591 over 44/45" in gate  # answerable cases: the refusal rate applies to 45 of 51
    assert score_table(example, ["refusal"]) == [("refusal", pytest.approx(7 / 44), 44, 45)]
    assert_scores(example, {"refusal": "<=20%"})


def test_score_table_counts_n_total_over_the_cases_a_metric_applies_to(example):
    from ragmeter.testing import score_table

    overall = example.summary["retrieval"]["overall"]["all_files_hit_rate"]
    (_, value, n_scored, n_total), = score_table(example, ["all_files_hit"])
    assert (value, n_scored, n_total) == (pytest.approx(overall["value"]), overall["n_scored"], overall["n_total"])
    assert n_total == 13


# -- 2. from_hf keeps every golden field spelling the golden loader accepts


def _example_rows():
    import json

    def read(path):
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith("#")]

    runs = {r["id"]: r for r in read(EX / "run.jsonl")}
    return [{**g, **runs[g["id"]]} for g in read(EX / "golden.jsonl") if g["id"] in runs]


def test_from_hf_keeps_the_readme_golden_spelling():
    from ragmeter.dataset import from_hf

    rows = _example_rows()  # the 50 golden cases the example run answers
    golden, run = from_hf(rows)
    assert golden[0]["expectedFileNames"] == ["handbook.md"] and golden[0]["referenceAnswer"]
    direct = ragmeter.score(rows, rows).summary["n_labeled"]
    assert direct == 44 and ragmeter.score(golden, run).summary["n_labeled"] == direct


def test_from_hf_keeps_every_alias_of_the_golden_loader():
    from ragmeter.dataset import from_hf, load_golden

    row = {"case_id": "c1", "query": "q?", "expected_file_names": ["a.md"], "reference_contexts": ["x y"],
           "expected_output": "ref", "answer": "a", "retrieved": []}
    golden, run = from_hf([row])
    case = load_golden(golden).row(0, named=True)
    assert (case["id"], case["question"], case["expected_files"], case["expected_evidence"],
            case["reference_answer"]) == ("c1", "q?", ["a.md"], ["x y"], "ref")
    assert run[0]["case_id"] == "c1"


# -- 3. trec.evaluate: whole-number float grades are their integers; 0.5 or 2.9 are refused, never truncated

_RUN = {"q1": {"d1": 0.3, "d2": 0.9}}


@pytest.mark.parametrize("grades, where", [([0.5, 1.0], "row 1: 0.5"), ([0.0, 2.9], "row 2: 2.9")])
def test_trec_table_refuses_fractional_relevance_naming_the_row(grades, where):
    import polars as pl
    from ragmeter.trec import evaluate

    qrels = pl.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["d1", "d2"], "relevance": grades})
    with pytest.raises(InputError, match=f"qrels: relevance must be integers: {where} is not a whole number"):
        evaluate(qrels, _RUN, "map")


def test_trec_whole_float_relevance_is_accepted_from_a_table_and_a_dict():
    import polars as pl
    from ragmeter.trec import evaluate

    as_ints = evaluate({"q1": {"d1": 1, "d2": 0}}, _RUN, "map")["map"].to_list()
    table = pl.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["d1", "d2"], "relevance": [1.0, 0.0]})
    assert evaluate(table, _RUN, "map")["map"].to_list() == as_ints
    assert evaluate({"q1": {"d1": 1.0, "d2": 0.0}}, _RUN, "map")["map"].to_list() == as_ints


def test_trec_dict_refuses_fractional_relevance_naming_query_and_document():
    from ragmeter.trec import evaluate

    with pytest.raises(InputError, match="qrels: values must be integers: query 'q1', document 'd2': 2.5 is not"):
        evaluate({"q1": {"d1": 1.0, "d2": 2.5}}, _RUN, "map")


# -- 4. comparing a run with itself says so, as `ragmeter compare D D` does

_SELF = "every delta is 0 by construction"


def test_compare_with_itself_warns_in_memory(example):
    assert any(_SELF in w and "same result" in w for w in example.compare(example).warnings)


def test_assert_no_regression_of_a_folder_with_itself_warns(example, tmp_path):
    from ragmeter.api import EvalResult
    from ragmeter.testing import assert_no_regression

    folder = example.write(tmp_path / "base", reports=False)
    comp = assert_no_regression(folder, folder, gate="hit>=-2pp")
    assert any(_SELF in w and "same folder" in w for w in comp.warnings)
    assert any(_SELF in w for w in EvalResult.load(folder).compare(example).warnings)


def test_two_evaluations_of_the_same_files_are_not_a_self_comparison(example):
    again = ragmeter.evaluate(EX / "golden.jsonl", EX / "run.jsonl")
    assert not any(_SELF in w for w in again.compare(example).warnings)


# -- 5. rank metrics refuse the arguments the kernel would read wrongly


@pytest.mark.parametrize("call", [
    lambda m: m.recall([1, 0, 1, 0], n_relevant=2.5),            # the kernel read 2.5 as 2: 1.0
    lambda m: m.average_precision([1, 0, 1], n_relevant=2.5),    # 0.8333 = sum / 2
])
def test_rank_metrics_refuse_a_fractional_n_relevant(call):
    from ragmeter import metrics

    with pytest.raises(InputError, match="n_relevant must be a whole number"):
        call(metrics)


def test_rank_metrics_take_a_whole_float_n_relevant():
    from ragmeter import metrics

    assert metrics.recall([1, 0, 1, 0], n_relevant=4.0) == metrics.recall([1, 0, 1, 0], n_relevant=4) == 0.5


def test_recall_requires_n_relevant():
    from ragmeter import metrics

    with pytest.raises(InputError, match="n_relevant must be a number"):
        metrics.recall([1, 0], None)


@pytest.mark.parametrize("grades, ideal", [([1, 1], [1]), ([2, 0], [1, 1]), ([1], [])])
def test_ndcg_refuses_an_ideal_that_cannot_cover_the_ranking(grades, ideal):
    from ragmeter import metrics

    for ndcg in (metrics.ndcg, metrics.ndcg_exp):
        with pytest.raises(InputError, match="ideal must hold"):
            ndcg(grades, ideal=ideal)


def test_ndcg_with_a_covering_ideal_stays_within_one():
    from ragmeter import metrics

    assert metrics.ndcg([1, 0], ideal=[1, 1]) < 1.0 and metrics.ndcg([0, 2], ideal=[2, 1, 0]) < 1.0


# -- 6. bad arguments are ragmeter.errors.InputError, as docs/api.md promises


@pytest.mark.parametrize("call, message", [
    (lambda c: c.cohen_kappa([1, 0], [1]), "different number of items"),
    (lambda c: c.agreement([1, 0], [1]), "different number of items"),
    (lambda c: c.ppi_mean([1, 0, 1], [1, 0], [1]), "same length"),
    (lambda c: c.cohen_kappa([[1], [0]], [1, 0]), "labels must be hashable"),
    (lambda c: c.agreement([1, 0], [{"a": 1}, 0]), "labels must be hashable"),
    (lambda c: c.ppi_mean([1, "x"], [1], [1]), "judge_all must be"),
])
def test_calibration_refuses_bad_labels_with_input_error(call, message):
    from ragmeter import calibration

    with pytest.raises(InputError, match=message):
        call(calibration)


@pytest.mark.parametrize("p, r", [("a", 1), (2, 2), (float("nan"), 1), (0.5, -0.1), (True, 1)])
def test_f1_refuses_what_is_not_a_precision_or_recall(p, r):
    from ragmeter import metrics

    with pytest.raises(InputError, match="must be a number between 0 and 1"):
        metrics.f1(p, r)


def test_f1_of_a_precision_and_a_recall():
    from ragmeter import metrics

    assert metrics.f1(0.5, 1) == pytest.approx(2 / 3) and metrics.f1(0, 0) == 0.0


def test_evaluate_refuses_metrics_that_are_not_a_list():
    from ragmeter.judge import JudgeConfig

    cfg = JudgeConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key="sk-test-12345678")
    with pytest.raises(InputError, match="metrics must be"):
        ragmeter.evaluate(EX / "golden.jsonl", EX / "run.jsonl", judge=cfg, metrics=5)


@pytest.mark.parametrize("option, message", [
    ({"complete": "yes"}, "complete must be True or False, got 'yes'"),
    ({"judged_only": "no"}, "judged_only must be True or False"),
    ({"per_query": "no"}, "per_query must be True or False"),
    ({"run_id": 5}, "run_id must be a string, got 5"),
])
def test_trec_evaluate_refuses_option_types(option, message):
    from ragmeter.trec import evaluate

    with pytest.raises(InputError, match=message):
        evaluate({"q": {"d": 1}}, {"q": {"d": 0.3}}, "map", **option)


def test_metric_decorator_takes_one_field_as_rubric_metric_does():
    from ragmeter.judge import RubricMetric, metric

    @metric(prompt="x", schema={"ok": bool}, fields="answer")
    def m(reply, case):
        return 1.0

    assert m.fields == RubricMetric(name="r", criteria="c", fields="answer").fields == ("answer",)
    with pytest.raises(InputError, match="fields"):
        metric("bad", prompt="x", schema={"ok": bool}, fields=["answer", 5])(lambda reply, case: 1.0)
