"""ragmeter's user errors cross process boundaries (multiprocessing, Ray, Spark workers) as themselves."""
from __future__ import annotations

import concurrent.futures
import multiprocessing
import pickle

import pyarrow as pa
import pytest

import ragmeter
from ragmeter.errors import InputError, MeasureError, RagmeterError

GOLDEN = "python/ragmeter/_example/golden.jsonl"


@pytest.mark.parametrize("error", [InputError("golden.jsonl:3: id: empty"), MeasureError("unknown measure x"),
                                   RagmeterError("any")])
def test_a_user_error_pickles_as_itself(error: Exception) -> None:
    # before: PicklingError "import of module '_core' failed" (the classes named a module that does not exist)
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error) and str(back) == str(error)
    assert type(error).__module__ == "ragmeter._core"


def _refused_batch(_: int) -> object:
    return ragmeter.score_batch(pa.table({"id": ["not-a-golden-id"], "retrieved": [[]]}), GOLDEN)


def test_an_input_error_in_a_worker_process_reaches_the_parent_as_an_input_error() -> None:
    # spawn, not fork: a forked copy of a test process running Polars' and rayon's threads can deadlock
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        with pytest.raises(InputError):
            pool.submit(_refused_batch, 0).result(timeout=120)
