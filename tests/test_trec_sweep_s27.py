"""Review 27: ``ragmeter.trec.evaluate`` on tables and dicts, ``ragmeter sweep`` and ``ragmeter cache repair``."""
from __future__ import annotations

import pytest

from ragmeter.errors import InputError

# -- 1. a null in a table's query, document or value column is refused naming the row and column, never read
#       as an empty id (a null document was a retrieved or judged document "", a null query a query "")

_QRELS = {"q1": {"d1": 1, "d2": 0}, "q2": {"a": 1}}


def _tables():
    import polars as pl

    run = pl.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["d1", "d2", "a"], "score": [2.0, 1.0, 1.0]})
    qrels = pl.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["d1", "d2", "a"], "relevance": [1, 0, 1]})
    return pl, qrels, run


@pytest.mark.parametrize("which, column, row", [
    ("run", "doc_id", 1), ("run", "query_id", 3), ("qrels", "doc_id", 2), ("qrels", "query_id", 3),
    ("qrels", "relevance", 2), ("run", "score", 1),
])
def test_a_null_in_a_trec_table_is_refused_naming_row_and_column(which: str, column: str, row: int) -> None:
    from ragmeter.trec import evaluate

    pl, qrels, run = _tables()
    assert evaluate(qrels, run, "map")["map"].to_list() == [1.0, 1.0]
    table = run if which == "run" else qrels
    nulled = table.with_columns(pl.when(pl.int_range(pl.len()) == row - 1).then(None)
                                .otherwise(pl.col(column)).alias(column))
    args = (qrels, nulled) if which == "run" else (nulled, run)
    with pytest.raises(InputError, match=rf"^{which}: row {row}: {column} is missing \(null\)"):
        evaluate(*args, "map")


def test_a_null_id_in_a_pandas_table_is_refused_too() -> None:
    import pandas as pd

    from ragmeter.trec import evaluate

    run = pd.DataFrame({"qid": ["q1", "q1", "q2"], "docno": ["d1", None, "a"], "score": [2.0, 1.0, 1.0]})
    with pytest.raises(InputError, match=r"^run: row 2: docno is missing \(null\)"):
        evaluate(_QRELS, run, "map")
