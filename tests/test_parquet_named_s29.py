"""A file named .parquet that holds JSON (JSON Lines exported under the wrong name) is read as JSON, as a Parquet
file named .jsonl already is read as Parquet; it was 'cannot read as Parquet: Parquet magic bytes not found in
footer'."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import ragmeter
from ragmeter.cli import main

EX = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"


def test_a_json_lines_run_named_parquet_is_read_as_json_lines(tmp_path):
    run = tmp_path / "run.parquet"
    shutil.copy(EX / "run.jsonl", run)
    expected = ragmeter.score(EX / "golden.jsonl", EX / "run.jsonl").summary["overall"]
    assert ragmeter.score(EX / "golden.jsonl", run).summary["overall"] == expected


def test_a_json_lines_golden_set_named_pq_is_read_as_json_lines(tmp_path):
    golden = tmp_path / "golden.pq"
    shutil.copy(EX / "golden.jsonl", golden)
    assert ragmeter.dataset.load_golden(golden).height == ragmeter.dataset.load_golden(EX / "golden.jsonl").height


def test_other_text_named_parquet_is_still_refused_as_parquet(tmp_path, capsys):
    golden = tmp_path / "golden.parquet"
    golden.write_text("id,question\na,b\n", encoding="utf-8")  # not JSON: the name decides
    assert main(["score", "--golden", str(golden), "--run", str(EX / "run.jsonl")]) == 2
    assert f"{golden}: cannot read as Parquet" in capsys.readouterr().err


def test_a_damaged_parquet_file_is_still_named_as_parquet(tmp_path, capsys):
    run = tmp_path / "run.parquet"
    import polars as pl

    pl.DataFrame({"id": ["a"], "retrieved": [[{"text": "t"}]]}).write_parquet(run)
    run.write_bytes(run.read_bytes()[:-20])  # its footer cut off: still a Parquet file, damaged
    assert main(["score", "--golden", str(EX / "golden.jsonl"), "--run", str(run)]) == 2
    assert "Parquet" in capsys.readouterr().err
