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


def test_an_id_in_two_batches_is_refused_not_counted_twice(run_table):
    part = ragmeter.score_batch(run_table.slice(0, 4), GOLDEN)
    with pytest.raises(InputError, match="more than one batch"):
        reduce_batches([part, part], GOLDEN)
