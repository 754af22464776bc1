"""`ragmeter judge --cases` and the judge's Python API read a record under the field names the golden set and
the run accept (README "Formats": ragas' and DeepEval's included). A ragas-named file was read as questions
without answers: every row skipped for missing input, exit 0, nothing measured."""
from __future__ import annotations

import json

import pytest

from ragmeter.judge.metrics import Case


@pytest.mark.parametrize("record", [
    {"id": "a", "user_input": "What colour?", "response": "Blue.", "reference": "Blue",
     "retrieved_contexts": ["it is blue", "noise"]},
    {"case_id": "a", "input": "What colour?", "actual_output": "Blue.", "expected_output": "Blue",
     "retrieval_context": ["it is blue", "noise"]},
    {"sample_id": "a", "query": "What colour?", "answer": "Blue.", "referenceAnswer": "Blue",
     "retrieved": [{"page_content": "it is blue"}, "noise"]},
], ids=["ragas", "deepeval", "mixed"])
def test_a_record_is_read_under_every_accepted_spelling(record):
    case = Case.from_record(record)
    assert (case.id, case.question, case.answer, case.reference_answer) == ("a", "What colour?", "Blue.", "Blue")
    assert case.contexts == ["it is blue", "noise"]


def test_cli_judges_a_ragas_named_case_file(tmp_path, server, api_key):
    from test_cli import cli

    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "user_input": f"What colour is product {i}?",
                                        "response": f"Product {i} is blue.", "reference": f"Product {i} is blue",
                                        "retrieved_contexts": [f"product {i} is blue"]}) + "\n" for i in range(3)),
                    encoding="utf-8")
    p = cli(tmp_path, server, "--cases", str(path), "--metrics", "correctness", key=api_key)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    import polars as pl

    rows = pl.read_parquet(tmp_path / "out" / "judge.parquet")
    assert rows["status"].to_list() == ["ok"] * 3 and server.requests == 3
