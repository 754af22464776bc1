"""A category or source written with spaces around it (a spreadsheet's trailing space) is the same category; a blank
one is no category (it defaults as a missing one does). ' fact ' and 'fact' were two rows of every per-category table,
and '   ' a category shown as blank."""
from __future__ import annotations

import json

import polars as pl
import pytest

from ragmeter.dataset import load_golden

ROWS = [
    {"id": "fact-1", "question": "q1", "expected_files": ["a.md"], "category": " fact ", "source": " wiki "},
    {"id": "fact-2", "question": "q2", "expected_files": ["a.md"], "category": "fact", "source": "wiki"},
    {"id": "multi-3", "question": "q3", "expected_files": ["a.md"], "category": "   ", "source": "  "},
    {"id": "multi-4", "question": "q4", "expected_files": ["a.md"], "category": "\tpolicy\u3000"},
]


@pytest.mark.parametrize("form", ["records", "jsonl", "parquet", "slow jsonl"])
def test_categories_and_sources_are_read_without_surrounding_spaces(tmp_path, form):
    rows = [dict(r) for r in ROWS]
    if form == "slow jsonl":  # a row the fast reader leaves to the checking one (an integer id)
        rows.append({"id": 5, "question": "q5", "expected_files": ["a.md"], "category": " fact"})
    source = rows
    if form in ("jsonl", "slow jsonl"):
        source = tmp_path / "golden.jsonl"
        source.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif form == "parquet":
        source = tmp_path / "golden.parquet"
        pl.DataFrame(rows).write_parquet(source)
    golden = load_golden(source)
    categories = golden["category"].to_list()
    assert categories[:4] == ["fact", "fact", "multi", "policy"]
    if form == "slow jsonl":
        assert categories[4] == "fact"
    assert golden["source"].to_list()[:3] == ["wiki", "wiki", None]
