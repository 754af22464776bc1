"""ragmeter.ray on a local Ray cluster (started on loopback by the test, stopped after); skipped without ray."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from polars.testing import assert_frame_equal

if os.environ.get("CI", "") not in ("", "0", "false"):
    import ray  # CI installs it (scripts/test.sh): a missing Ray fails there instead of skipping
else:
    ray = pytest.importorskip("ray", reason="ray is not installed (RAGMETER_RAY=1 bash scripts/test.sh installs it)")

import ragmeter  # noqa: E402
from ragmeter.dataset import load_run  # noqa: E402

EXAMPLE = Path(ragmeter.__file__).parent / "_example"


def test_score_dataset_equals_score(ray_cluster):
    from ragmeter.ray import score_dataset

    whole = ragmeter.score(EXAMPLE / "golden.jsonl", EXAMPLE / "run.jsonl")
    table = load_run(EXAMPLE / "run.jsonl").drop("line").to_arrow()
    ds = ray.data.from_arrow(table).repartition(4)
    res = score_dataset(ds, EXAMPLE / "golden.jsonl", batch_size=7)
    assert_frame_equal(res["cases"], whole.cases)
    assert res["overall"] == whole.summary["overall"]
    assert res["by_category"] == whole.summary["by_category"]


def test_a_block_with_an_unknown_id_fails_naming_the_batch(ray_cluster):
    import polars as pl

    from ragmeter.errors import InputError
    from ragmeter.ray import score_dataset

    run = load_run(EXAMPLE / "run.jsonl").drop("line")
    run = run.with_columns(pl.when(pl.int_range(pl.len()) == 10).then(pl.lit("no-such-case"))
                           .otherwise(pl.col("id")).alias("id"))
    ds = ray.data.from_arrow(run.to_arrow())
    with pytest.raises(InputError, match=r"(?s)batch of \d+ rows .*no-such-case"):
        score_dataset(ds, EXAMPLE / "golden.jsonl", batch_size=7)


def test_a_block_whose_columns_differ_fails_naming_the_block(ray_cluster):
    from ragmeter.errors import InputError
    from ragmeter.ray import score_dataset

    run = load_run(EXAMPLE / "run.jsonl").drop("line")
    ds = ray.data.from_arrow([run.head(10).to_arrow(), run.slice(10).drop("retrieved").to_arrow()])
    # Ray fills the missing column with nulls when it merges blocks: the rows must not be scored as empty
    first = run["id"][10]
    with pytest.raises(InputError, match=rf"block of {run.height - 10} rows from id '{first}': its columns differ "
                                         r"from the other blocks'; missing 'retrieved'"):
        score_dataset(ds, EXAMPLE / "golden.jsonl")


def dies_once(flag):
    """A map step that kills its Ray worker process while it holds the first block (once: ``flag`` remembers)."""
    driver = os.getpid()

    def step(block):
        if os.getpid() != driver and not flag.exists():
            flag.write_text("died")
            os._exit(1)
        return block

    return step


def test_a_worker_that_dies_mid_batch_loses_and_doubles_no_case(ray_cluster, tmp_path):
    from ragmeter.ray import score_dataset

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this module
    flag = tmp_path / "died"
    whole = ragmeter.score(EXAMPLE / "golden.jsonl", EXAMPLE / "run.jsonl")
    table = load_run(EXAMPLE / "run.jsonl").drop("line").to_arrow()
    ds = ray.data.from_arrow(table).repartition(3).map_batches(dies_once(flag), batch_format="pyarrow")
    res = score_dataset(ds, EXAMPLE / "golden.jsonl", batch_size=7)
    assert flag.exists()  # a worker did die; Ray ran its task again
    assert_frame_equal(res["cases"], whole.cases)
    assert res["overall"] == whole.summary["overall"]


def test_records_whose_optional_fields_differ_are_scored_as_ragmeter_score_scores_them(ray_cluster):
    # ray.data.from_items of the example's records: 4 of 50 carry 'contexts'; a record lacking an optional field
    # is what ragmeter.score reads as null, so the blocks lacking it are not refused (only id/retrieved matter)
    import json

    from ragmeter.ray import score_dataset

    records = [json.loads(line) for line in (EXAMPLE / "run.jsonl").read_text().splitlines()
               if line.strip() and not line.startswith(("#", "//"))]
    assert 0 < sum("contexts" in r for r in records) < len(records)
    whole = ragmeter.score(EXAMPLE / "golden.jsonl", records)
    res = score_dataset(ray.data.from_items(records), EXAMPLE / "golden.jsonl", batch_size=10)
    assert_frame_equal(res["cases"], whole.cases)
    assert res["overall"] == whole.summary["overall"] and res["by_category"] == whole.summary["by_category"]


def test_a_list_instead_of_a_dataset_is_one_clear_error(ray_cluster):
    from ragmeter.errors import InputError
    from ragmeter.ray import score_dataset

    with pytest.raises(InputError, match=r"score_dataset: expected a Ray Dataset .*got list"):
        score_dataset([{"id": "a", "retrieved": []}], EXAMPLE / "golden.jsonl")
