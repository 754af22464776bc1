"""Scale-out and conversions review (session 28): the reduction of batches says what ragmeter.score says about
the whole run, and the converters from ragas / DeepEval / Hugging Face name the row and field they refuse."""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import ragmeter
from ragmeter.batch import reduce_batches

EXAMPLE = Path(ragmeter.__file__).parent / "_example"
GOLDEN, RUN = EXAMPLE / "golden.jsonl", EXAMPLE / "run.jsonl"


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()
            if line.strip() and not line.startswith(("#", "//"))]


#: what the reduction cannot give: phrases found in no chunk of the whole run need every chunk's text
_NEEDS_EVERY_CHUNK = {"unfound_evidence"}


def _comparable(summary):
    kept = {k: v for k, v in summary.items() if k not in _NEEDS_EVERY_CHUNK | {"cases", "definitions"}}
    kept["warnings"] = [w for w in summary.get("warnings", []) if w["code"] != "evidence_never_found"]
    return kept


def _unlabelled_golden_and_run():
    # three answerable cases lose their labels and form a category of their own; the run also records a failed
    # case, so that every warning the per-case columns carry is there to be compared
    golden = _records(GOLDEN)
    for case in golden[:3]:
        case.pop("expectedFileNames", None), case.pop("expectedEvidence", None)
        case["category"] = "unlabelled-only"
    run = _records(RUN)
    run[5] = {**run[5], "retrieved": [], "error": "timed out after 30 s", "error_kind": "timeout"}
    return golden, pl.DataFrame(run, infer_schema_length=None).to_arrow()  # from_pylist reads row 0's keys only


@pytest.mark.parametrize("shape", ["uneven", "with_empty_batch", "one_case_per_batch"])
def test_the_reduction_of_batches_says_what_score_says_of_the_whole_run(shape):
    golden, table = _unlabelled_golden_and_run()
    whole = ragmeter.score(golden, table, k=5)
    n = table.num_rows
    cuts = {"uneven": [0, 3, 4, 17, 40, n], "with_empty_batch": [0, 3, 3, 29, n],
            "one_case_per_batch": list(range(n + 1))}[shape]
    batches = [table.slice(a, b - a) for a, b in zip(cuts, cuts[1:])]  # the first batch: the 3 unlabelled cases
    red = reduce_batches([ragmeter.score_batch(b, golden, k=5) for b in batches], golden, k=5)
    assert_frame_equal(red["cases"], whole.cases)
    want = _comparable(whole.summary)
    assert {c["code"] for c in want["warnings"]} >= {"unlabelled", "failed_in_run", "missing_from_run", "mode_fallback"}
    got = _comparable(red)
    assert {key: got.get(key) for key in want} == want
    assert red["unfound_evidence"] is None  # not computed, and said so (not an empty list: that would claim none)


@pytest.mark.parametrize("shape", ["fileless", "one_batch_without_files"])
def test_the_reduction_says_which_cases_had_their_file_metrics_unscored_as_score_does(shape):
    from test_batch import _fileless_run, _one_batch_without_files

    if shape == "fileless":
        table = _fileless_run()
        batches = [table.slice(i, 7) for i in range(0, table.num_rows, 7)]
    else:
        table, batches = _one_batch_without_files()
    whole = ragmeter.score(GOLDEN, table)
    red = reduce_batches([ragmeter.score_batch(b, GOLDEN) for b in batches], GOLDEN)
    assert whole.summary["cases_without_file"] > 0
    want = _comparable(whole.summary)
    assert {key: _comparable(red).get(key) for key in want} == want


def test_score_dataset_gives_scores_summary_and_warnings_on_a_ray_cluster(ray_cluster):
    ray = pytest.importorskip("ray")
    from ragmeter.ray import score_dataset

    golden, table = _unlabelled_golden_and_run()
    whole = ragmeter.score(golden, table)
    res = score_dataset(ray.data.from_arrow(table).repartition(3), golden, batch_size=11)
    want = _comparable(whole.summary)
    assert {key: _comparable(res).get(key) for key in want} == want


# --- conversions from ragas / DeepEval / Hugging Face ---------------------------------------------------------


def test_from_hf_in_ragmeters_naming_names_the_row_of_bad_contexts():
    from ragmeter.dataset import from_hf
    from ragmeter.errors import InputError

    rows = [{"id": "a", "question": "q", "contexts": ["x"]}, {"id": "b", "question": "q2", "contexts": ["y", 3]}]
    with pytest.raises(InputError, match=r"^dataset\[1\]: contexts\[1\] must be a text, got int$"):
        from_hf(rows)


@pytest.mark.parametrize("bad_id, kind", [(["a"], "list"), (True, "bool"), ({"x": 1}, "dict"), (1.5, "float")])
def test_an_id_that_is_not_a_text_or_a_whole_number_is_refused_naming_the_row(bad_id, kind):
    from ragmeter.dataset import from_deepeval, from_ragas
    from ragmeter.errors import InputError

    rows = [{"id": "a", "user_input": "q"}, {"id": bad_id, "user_input": "q2"}]
    with pytest.raises(InputError, match=rf"^ragas dataset\[1\]: id must be a text or a whole number, got {kind}$"):
        from_ragas(rows)
    with pytest.raises(InputError, match=rf"^deepeval test cases\[0\]: name must be a text or a whole number"):
        from_deepeval([{"name": bad_id, "input": "q"}])


def test_whole_number_ids_read_as_a_table_keeps_them_as_written():
    # pandas turns an integer column with a gap into floats (1.0, nan): the ids stay "1", and the gap is a row
    # without an id, not a case named "nan"
    from ragmeter.dataset import from_ragas

    golden, _run = from_ragas([{"id": 1, "user_input": "q"}, {"id": 2.0, "user_input": "q2"}])
    assert [c["id"] for c in golden] == ["1", "2"]
    golden, _run = from_ragas([{"id": 1.0, "user_input": "q"}, {"id": float("nan"), "user_input": "q2"}])
    assert [c["id"] for c in golden] == ["1", "case-0002"]


def test_ids_made_from_positions_are_said_so(caplog):
    import logging

    from ragmeter.dataset import from_ragas

    with caplog.at_level(logging.INFO, logger="ragmeter.notes"):
        golden, run = from_ragas([{"user_input": "q"}, {"user_input": "q2"}])
    assert [c["id"] for c in golden] == [r["id"] for r in run] == ["case-0001", "case-0002"]
    assert caplog.messages == ["ragas dataset: no ids; each case is named by its position (case-0001, case-0002)"]


def test_rows_without_an_id_among_rows_with_ids_are_named_by_position_and_said_so(caplog):
    import logging

    from ragmeter.dataset import from_ragas

    with caplog.at_level(logging.INFO, logger="ragmeter.notes"):
        golden, _run = from_ragas([{"id": "x", "user_input": "q"}, {"user_input": "q2"}])
    assert [c["id"] for c in golden] == ["x", "case-0002"]
    assert caplog.messages == ["ragas dataset: 1 of 2 rows have no id (id); each is named by its position (case-0002)"]


def test_a_category_that_is_not_a_text_is_refused_not_dropped():
    from ragmeter.dataset import from_ragas
    from ragmeter.errors import InputError

    with pytest.raises(InputError, match=r"^ragas dataset\[0\]: category must be a text, got int$"):
        from_ragas([{"user_input": "q", "category": 3}])


@pytest.mark.parametrize("field, value", [("completion_time", float("nan")), ("token_cost", float("inf")),
                                          ("input_token_count", -5)])
def test_deepeval_numbers_that_are_not_finite_or_negative_are_named_by_deepeval_field(field, value):
    from ragmeter.dataset import from_deepeval
    from ragmeter.errors import InputError

    with pytest.raises(InputError, match=rf"^deepeval test cases\[0\]: {field} must be a finite number, 0 or more"):
        from_deepeval([{"input": "q", field: value}])


def test_the_naming_is_read_from_every_row_not_the_first_alone():
    # ragas v0.1 rows: the first has no ground_truth; the second's must not be dropped for ragmeter's naming
    from ragmeter.dataset import from_hf

    rows = [{"question": "q", "answer": "a", "contexts": ["x"]},
            {"question": "q2", "answer": "b", "contexts": ["y"], "ground_truth": "the truth"}]
    golden, run = from_hf(rows)
    assert golden[1].get("reference_answer") == "the truth"
    assert run[1]["answer"] == "b"


def test_combine_without_the_golden_set_refuses_a_batch_summed_twice():
    # a batch summed twice (a retried task whose first result was kept too) doubles its cases; without golden the
    # count cannot tell, but the two batches' id fingerprints are the same
    from ragmeter.batch import combine, partial_sums
    from ragmeter.dataset import load_run
    from ragmeter.errors import InputError

    table = load_run(RUN).drop("line").to_arrow()
    parts = [partial_sums(ragmeter.score_batch(table.slice(i, 9), GOLDEN)) for i in range(0, table.num_rows, 9)]
    assert combine(parts)[None]["n_cases"] == table.num_rows
    with pytest.raises(InputError, match=r"^partial sums: batches 2 and 7 hold the same \d+ cases"):
        combine([*parts, parts[1]])
    empty = partial_sums(ragmeter.score_batch(table.slice(0, 0), GOLDEN))
    assert combine([*parts, empty, empty])[None]["n_cases"] == table.num_rows  # empty batches hold no case


def test_contexts_given_as_objects_with_a_text_keep_their_file_as_the_run_loader_reads_them():
    # ragmeter's run loader takes retrieved_contexts of objects ({"text", "file", ...}) or of plain texts; the
    # converter refused the objects ("retrieved_contexts[0] must be a text, got dict")
    from ragmeter.dataset import from_ragas
    from ragmeter.errors import InputError

    golden, run = from_ragas([{"user_input": "q", "reference_contexts": ["X is 1"],
                               "retrieved_contexts": [{"text": "noise", "file": "a.md", "chunk_id": "a#3", "score": 0.9},
                                                      {"text": "we know X is 1"}, "X is 1 again"]}])
    assert run[0]["contexts"] == ["noise", "we know X is 1", "X is 1 again"]
    assert run[0]["retrieved"] == [{"file": "a.md", "chunk_id": "a#3", "text": "noise", "score": 0.9},
                                   {"file": "(unknown)", "chunk_id": "2", "text": "we know X is 1", "score": None},
                                   {"file": "(unknown)", "chunk_id": "3", "text": "X is 1 again", "score": None}]
    assert ragmeter.score(golden, run).cases["first_relevant_rank"].to_list() == [2]
    with pytest.raises(InputError, match=r"^ragas dataset\[0\]: retrieved_contexts\[1\] must be a text or an object "
                                         r"with a 'text', got dict$"):
        from_ragas([{"user_input": "q", "retrieved_contexts": ["x", {"page": 3}]}])
