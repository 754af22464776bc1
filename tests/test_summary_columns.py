"""``summary["by_category"]`` from the per-category table's columns: ``summary.json`` and the terminal table are
the text the per-category dicts give, and the dicts themselves are built only when ``summary`` is read."""
from __future__ import annotations

import json
import math
import random

import polars as pl
import pytest

from ragmeter import retrieval
from ragmeter._io import EXPANDED_MEMBERS, OneLineMembers, strict_json
from ragmeter.cli._tables import MAX_ROWS, worst_first
from ragmeter.retrieval import ScoreResult, _category_members, _nested_categories, aggregate

AWKWARD_NAMES = ['plain', 'with "quotes"', 'back\\slash', 'tab\there', 'line\nbreak', '中文 ＲＡＧ', 'ünïcode',
                 'comma, colon: brace}', '\x7f del', '\u2028 separator', '']


def cases_frame(n_categories: int, seed: int, names=None) -> pl.DataFrame:
    """Cases as ``_case_table`` gives them: a few per category, with unscored and multi-file cases."""
    rng = random.Random(seed)
    rows = []
    for c in range(n_categories):
        name = names[c % len(names)] + f"-{c}" if names else f"cat{c:05d}"
        for _ in range(rng.randint(1, 3)):
            labeled = rng.random() > 0.1
            hit = rng.random() > 0.5 if labeled else None
            rank = rng.randint(1, 5) if hit else None
            files = rng.randint(1, 3)
            rows.append({
                "id": f"q{len(rows)}", "category": name, "labeled": labeled, "hit": hit,
                "reciprocal_rank": (1 / rank if rank else 0.0) if labeled else None,
                "average_precision": rng.random() / 3 if labeled else None,
                "ndcg": rng.choice([0.0, 1e-05, 1 / 3, 2.5e-7, 0.1 + 0.2]) if labeled else None,
                "precision": rng.random() if labeled else None, "file_hit": rng.random() > 0.3,
                "all_files_hit": (rng.random() > 0.5) if files >= 2 else None,
                "evidence_recall": rng.random() if labeled else None,
                # a mean past 1e16: orjson and Polars spell its exponent differently
                "n_retrieved": 3 * 10**17 + c if c == 5 else rng.randint(0, 20),
                "empty_retrieval": rng.random() > 0.9, "n_expected_files": files,
            })
    return pl.DataFrame(rows, schema_overrides={"n_retrieved": pl.Int64, "n_expected_files": pl.UInt32})


def result_of(cases: pl.DataFrame) -> ScoreResult:
    by_category = aggregate(cases, ["category"])
    summary = {"k": 5, "overall": {"n": cases.height}, "by_category": retrieval._CATEGORIES_FROM_TABLE,
               "warnings": [], "definitions": "d"}
    return ScoreResult(cases=cases, by_category=by_category, summary=summary)


@pytest.mark.parametrize("n, names", [(EXPANDED_MEMBERS + 1, None), (2_000, None), (300, AWKWARD_NAMES)])
def test_summary_text_from_columns_is_the_dicts_text(n, names):
    result = result_of(cases_frame(n, seed=n, names=names))
    from_columns = result.summary_json({"files": ["summary.json"]})
    assert result._summary["by_category"] is retrieval._CATEGORIES_FROM_TABLE  # written without the dicts
    from_dicts = strict_json({**result.summary, "files": ["summary.json"]})
    assert from_columns == from_dicts
    assert json.loads(from_columns)["by_category"] == json.loads(json.dumps(result.summary["by_category"]))


def test_the_dicts_are_built_on_first_access_and_equal_the_rows():
    cases = cases_frame(150, seed=3)
    result = result_of(cases)
    by_category = result.summary["by_category"]
    rows = aggregate(cases, ["category"]).to_dicts()
    assert list(by_category) == [r["category"] for r in rows]
    for row in rows:
        entry = by_category[row["category"]]
        assert entry["n_cases"] == row["n_cases"] and entry["hit_rate"]["n_total"] == row["hit_rate_n_total"]
        assert entry["mrr"]["value"] == row["mrr"]
    assert result.summary["by_category"] is by_category  # built once


def test_small_tables_and_other_names_take_the_dicts():
    assert _category_members(aggregate(cases_frame(EXPANDED_MEMBERS, seed=1), ["category"])) is None
    numbers = cases_frame(200, seed=2).with_columns(pl.col("category").str.slice(3).cast(pl.Int64))
    assert _category_members(aggregate(numbers, ["category"])) is None
    with pytest.raises(ValueError):
        OneLineMembers(lambda separator: "", EXPANDED_MEMBERS)
    with pytest.raises(TypeError, match="OneLineMembers"):
        strict_json({"a": OneLineMembers(lambda separator: "", EXPANDED_MEMBERS + 1)}, indent=None)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_table_summary_shows_the_categories_the_dicts_show(seed):
    cases = cases_frame(400, seed=seed)
    # ties on Hit@k, unscored categories and NaN among them
    cases = cases.with_columns(pl.when(pl.col("category").str.ends_with("7")).then(None).otherwise(pl.col("hit")).alias("hit"))
    result = result_of(cases)
    table = result.table_summary(MAX_ROWS)
    full = list(result.summary["by_category"].items())
    expected, n_more = worst_first(full, lambda c: c[1]["hit_rate"]["value"], lambda c: c[1]["hit_rate"]["n_total"])
    assert list(table["by_category"].items()) == expected
    assert table["n_more_categories"] == n_more == len(full) - MAX_ROWS
    nan_table = result.by_category.with_columns(
        pl.when(pl.col("category") == "cat00003").then(math.nan).otherwise(pl.col("hit_rate")).alias("hit_rate"))
    rows = retrieval._worst_categories(nan_table, MAX_ROWS)["category"].to_list()
    nested = list(_nested_categories(nan_table).items())
    want, _ = worst_first(nested, lambda c: c[1]["hit_rate"]["value"], lambda c: c[1]["hit_rate"]["n_total"])
    assert rows == [name for name, _entry in want]


def test_summary_json_written_a_part_at_a_time_is_the_text(tmp_path):
    from ragmeter._io import write_json

    result = result_of(cases_frame(20_000, seed=5, names=AWKWARD_NAMES))  # more lines than one part holds
    summary = {**result._summary, "not_finite": [math.nan, math.inf, 1.5], "files": ["summary.json"]}
    write_json(tmp_path / "summary.json", result._summary_to_write(summary))
    expected = strict_json({**summary, "by_category": result.summary["by_category"]}) + "\n"
    assert (tmp_path / "summary.json").read_bytes() == expected.encode("utf-8")
    write_json(tmp_path / "plain.json", {"a": [1, 2], "b": "中文"})
    assert (tmp_path / "plain.json").read_text(encoding="utf-8") == strict_json({"a": [1, 2], "b": "中文"}) + "\n"


def test_a_pickled_or_copied_result_still_builds_its_categories():
    import copy
    import pickle

    result = result_of(cases_frame(150, seed=4))
    expected = copy.deepcopy(result_of(cases_frame(150, seed=4)).summary)
    for other in (pickle.loads(pickle.dumps(result)), copy.deepcopy(result), copy.copy(result)):
        assert other.summary == expected
