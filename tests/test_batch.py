"""score_batch over slices of the bundled example equals ragmeter.score on the whole run."""
from __future__ import annotations

import pickle
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from polars.testing import assert_frame_equal

import ragmeter
from ragmeter.batch import combine, partial_sums, reduce_batches
from ragmeter.dataset import load_run
from ragmeter.errors import InputError

EXAMPLE = Path(ragmeter.__file__).parent / "_example"
GOLDEN, RUN = EXAMPLE / "golden.jsonl", EXAMPLE / "run.jsonl"


@pytest.fixture(scope="module")
def whole():
    return ragmeter.score(GOLDEN, RUN, k=5)


@pytest.fixture(scope="module")
def run_table():
    return load_run(RUN).drop("line").to_arrow()


@pytest.mark.parametrize("size", [1, 7, 50])
def test_batches_concatenated_are_the_whole_run(whole, run_table, size):
    parts = [ragmeter.score_batch(run_table.slice(i, size), GOLDEN, k=5) for i in range(0, run_table.num_rows, size)]
    assert all(isinstance(p, pa.Table) for p in parts)
    red = reduce_batches(parts, GOLDEN, k=5)
    assert_frame_equal(red["cases"], whole.cases)  # one golden case is in no batch: scored as an empty retrieval
    assert red["missing_from_run"] == whole.summary["missing_from_run"] != []
    assert red["overall"] == whole.summary["overall"]
    assert red["by_category"] == whole.summary["by_category"]
    assert red["file_vs_chunk_hit"] == whole.summary["file_vs_chunk_hit"]
    assert red["file_vs_chunk_hit"]["n_file_only"] > 0


def test_partial_sums_reduce_to_the_same_counts_and_means(whole, run_table):
    parts = [ragmeter.score_batch(run_table.slice(i, 9), GOLDEN) for i in range(0, run_table.num_rows, 9)]
    red = reduce_batches(parts, GOLDEN)
    totals = combine(partial_sums(p) for p in [*parts, red["cases"].filter(pl.col("missing_from_run"))])
    for name, entry in whole.summary["overall"].items():
        if isinstance(entry, dict):
            assert totals[None][name]["n_scored"] == entry["n_scored"]
            assert totals[None][name]["n_total"] == entry["n_total"]
            assert totals[None][name]["value"] == pytest.approx(entry["value"], rel=1e-12)
    assert totals[None]["n_cases"] == whole.summary["n_cases"]
    gap, want = totals[None]["file_vs_chunk_hit"], whole.summary["file_vs_chunk_hit"]
    assert (gap["n"], gap["n_file_only"]) == (want["n"], want["n_file_only"])
    assert gap["file_hit_rate"] == pytest.approx(want["file_hit_rate"], rel=1e-12)
    assert gap["hit_rate"] == pytest.approx(want["hit_rate"], rel=1e-12)


def test_combine_with_the_golden_set_refuses_golden_cases_in_no_batch(whole, run_table):
    # the documented flow (partial_sums per batch, combine at the end) on a run lacking one golden case: that
    # case is an empty retrieval for ragmeter.score (45/51 scored); it must not vanish from the counts (44/50)
    parts = [partial_sums(ragmeter.score_batch(run_table.slice(i, 9), GOLDEN)) for i in range(0, run_table.num_rows, 9)]
    missing = whole.summary["missing_from_run"]
    assert len(missing) == 1
    with pytest.raises(InputError, match=r"1 golden case\(s\) in no batch \(50 of 51 cases summed\)"):
        combine(parts, golden=GOLDEN)
    # with their sums added (scored as empty retrievals, as ragmeter.score does), the numbers are ragmeter.score's
    empty = ragmeter.score_batch([{"id": i, "retrieved": []} for i in missing], GOLDEN)
    totals = combine([*parts, partial_sums(empty)], golden=GOLDEN)
    assert totals[None]["hit_rate"]["n_total"] == whole.summary["overall"]["hit_rate"]["n_total"] == 51
    assert totals[None]["hit_rate"]["value"] == pytest.approx(whole.summary["overall"]["hit_rate"]["value"], rel=1e-12)
    # a batch summed twice is refused too (its cases would count twice)
    twice = 51 + parts[0][0]["n_cases"]
    with pytest.raises(InputError, match=rf"{twice} cases summed, the golden set has 51"):
        combine([*parts, parts[0], partial_sums(empty)], golden=GOLDEN)


def test_score_batch_is_picklable_and_accepts_a_record_batch(run_table):
    fn = pickle.loads(pickle.dumps(ragmeter.score_batch))
    out = fn(run_table.to_batches(max_chunksize=5)[0], GOLDEN)
    assert out.num_rows == 5 and "hit" in out.column_names


def test_a_batch_with_an_unknown_id_names_the_batch(run_table):
    bad = pl.from_arrow(run_table.slice(0, 3))
    bad = bad.with_columns(pl.when(pl.int_range(pl.len()) == 0).then(pl.lit("no-such-case")).otherwise(pl.col("id")).alias("id"))
    with pytest.raises(InputError, match="batch of 3 rows from id 'no-such-case'"):
        ragmeter.score_batch(bad.to_arrow(), GOLDEN)
    with pytest.raises(InputError, match="no 'id' column"):
        ragmeter.score_batch(pa.table({"x": [1]}), GOLDEN)


@pytest.mark.parametrize("batch", [5, None, "run.jsonl", RUN])
def test_a_batch_that_is_not_a_table_is_named(batch):
    # not a table, nor records: one InputError naming what a batch may be (not polars' TypeError, not an empty batch)
    with pytest.raises(InputError, match=r"batch: expected a pyarrow Table or RecordBatch, a Polars or pandas "
                                         r"DataFrame or a list of dicts, got (int|NoneType|str|PosixPath)"):
        ragmeter.score_batch(batch, GOLDEN)


def test_an_id_in_two_batches_is_refused_not_counted_twice(run_table):
    part = ragmeter.score_batch(run_table.slice(0, 4), GOLDEN)
    with pytest.raises(InputError, match="more than one batch"):
        reduce_batches([part, part], GOLDEN)


@pytest.mark.parametrize("alias", ["case_id", "sample_id"])
def test_a_run_whose_ids_use_an_accepted_alias_is_scored_as_ragmeter_score_scores_it(whole, run_table, alias):
    # README "Formats": the id may be spelt case_id or sample_id; ragmeter.score takes such a run, so must the batches
    table = run_table.rename_columns([alias if c == "id" else c for c in run_table.column_names])
    assert ragmeter.score(GOLDEN, table).summary["overall"] == whole.summary["overall"]
    parts = [ragmeter.score_batch(table.slice(i, 9), GOLDEN) for i in range(0, table.num_rows, 9)]
    red = reduce_batches(parts, GOLDEN)
    assert_frame_equal(red["cases"], whole.cases)
    assert red["overall"] == whole.summary["overall"] and red["by_category"] == whole.summary["by_category"]


def _records():
    import json

    return [json.loads(line) for line in RUN.read_text().splitlines() if line.strip() and not line.startswith(("#", "//"))]


def _fileless_run():
    # README "Formats": a retrieved item may be a plain string (no file); ragmeter.score then leaves the file-level
    # metrics of every case expecting files unscored, the empty retrievals and the golden case missing from the run
    # included, because no chunk of the whole run has a file
    return pa.Table.from_pylist([{**r, "retrieved": [c["text"] for c in r["retrieved"]]} for r in _records()])


def _one_batch_without_files():
    # a run with files, but the 3 cases before its empty retrieval lost theirs: a batch of those 4 cases has no
    # chunk with a file, which ragmeter.score, deciding over the whole run, does not see
    records = _records()
    empty = next(i for i, r in enumerate(records) if not r["retrieved"])
    for j in range(empty - 3, empty):
        records[j] = {**records[j], "retrieved": [{**c, "file": None} for c in records[j]["retrieved"]]}
    table = pa.Table.from_pylist(records)
    return table, [table.slice(0, empty - 3), table.slice(empty - 3, 4), table.slice(empty + 1)]


@pytest.mark.parametrize("shape", ["fileless", "one_batch_without_files"])
def test_whether_the_run_gives_files_is_decided_over_the_whole_run(shape):
    if shape == "fileless":
        table = _fileless_run()
        slices = [table.slice(i, 7) for i in range(0, table.num_rows, 7)]
    else:
        table, slices = _one_batch_without_files()
    whole = ragmeter.score(GOLDEN, table)
    red = reduce_batches([ragmeter.score_batch(s, GOLDEN) for s in slices], GOLDEN)
    assert_frame_equal(red["cases"], whole.cases)
    assert red["overall"] == whole.summary["overall"] and red["by_category"] == whole.summary["by_category"]


def test_partial_sums_refuse_a_batch_whose_file_decision_differs_from_the_runs():
    # the sums cannot be corrected after the fact: combine says so instead of returning other counts
    table, slices = _one_batch_without_files()
    whole = ragmeter.score(GOLDEN, table)
    parts = [ragmeter.score_batch(s, GOLDEN) for s in slices]
    missing = reduce_batches(parts, GOLDEN)["missing_from_run"]
    empty = ragmeter.score_batch([{"id": i, "retrieved": []} for i in missing], GOLDEN)
    with pytest.raises(InputError, match=r"partial sums: batch 2 .*no retrieved item with a file.*reduce_batches"):
        combine([partial_sums(p) for p in [*parts, empty]], golden=GOLDEN)
    # batches that do not split the decision still combine to ragmeter.score's counts
    regular = [ragmeter.score_batch(table.slice(i, 9), GOLDEN) for i in range(0, table.num_rows, 9)]
    totals = combine([partial_sums(p) for p in [*regular, empty]], golden=GOLDEN)
    assert totals[None]["file_hit_rate"]["n_scored"] == whole.summary["overall"]["file_hit_rate"]["n_scored"]


def test_combine_refuses_a_case_summed_twice_even_when_another_is_missing(whole, run_table):
    # 50 run cases + one of them summed again = 51, the golden set's size: a count alone would take it (the case in
    # no batch vanishes, the doubled one counts twice)
    parts = [ragmeter.score_batch(run_table.slice(i, 9), GOLDEN) for i in range(0, run_table.num_rows, 9)]
    again = ragmeter.score_batch(run_table.slice(3, 1), GOLDEN)
    assert sum(p.num_rows for p in [*parts, again]) == whole.summary["n_cases"]
    with pytest.raises(InputError, match=r"partial sums: the cases summed are not the golden set's"):
        combine([partial_sums(p) for p in [*parts, again]], golden=GOLDEN)


def test_a_golden_frame_in_its_raw_spelling_is_loaded_not_taken_as_loaded(whole, run_table):
    # a Polars golden frame with 'expected_files' (an accepted spelling) but ids spelt case_id: ragmeter.score loads
    # it; the batches must not take it for a frame load_golden already made
    import json

    records = [json.loads(line) for line in GOLDEN.read_text().splitlines()
               if line.strip() and not line.startswith(("#", "//"))]
    frame = pl.DataFrame([{"case_id": r["id"], "question": r["question"], "expected_files": r.get("expectedFileNames", []),
                           "expected_evidence": r.get("expectedEvidence", [])} for r in records])
    reference = ragmeter.score(frame, RUN)
    assert reference.summary["overall"] == whole.summary["overall"]
    parts = [ragmeter.score_batch(run_table.slice(i, 9), frame) for i in range(0, run_table.num_rows, 9)]
    red = reduce_batches(parts, frame)
    assert_frame_equal(red["cases"], reference.cases)
    assert red["overall"] == reference.summary["overall"]
    totals = combine([partial_sums(p) for p in [*parts, red["cases"].filter(pl.col("missing_from_run"))]], golden=frame)
    assert totals[None]["hit_rate"]["n_total"] == reference.summary["overall"]["hit_rate"]["n_total"]


def test_batches_scored_at_another_cut_off_are_refused_not_reduced_as_if_at_k(run_table):
    """score_batch(k=3) tables reduced with reduce_batches(k=5) gave Hit@3 values under the name Hit@5 (and the
    missing cases scored at 5): one run, two cut-offs, no error."""
    at3 = [ragmeter.score_batch(run_table.slice(i, 20), GOLDEN, k=3) for i in range(0, run_table.num_rows, 20)]
    with pytest.raises(InputError, match=r"k=3.*k=5|k=5.*k=3"):
        reduce_batches(at3, GOLDEN, k=5)
    assert reduce_batches(at3, GOLDEN, k=3)["overall"] == ragmeter.score(GOLDEN, RUN, k=3).summary["overall"]
    at5 = ragmeter.score_batch(run_table.slice(20, 1000), GOLDEN, k=5)
    with pytest.raises(InputError, match=r"cut-off"):
        combine([partial_sums(at3[0]), partial_sums(at5)])
    assert "k" not in reduce_batches(at3, GOLDEN, k=3)["cases"].columns  # ragmeter.score's per-case table
