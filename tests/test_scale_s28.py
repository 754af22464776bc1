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
