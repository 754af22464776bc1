"""A run written as Parquet in the shapes pandas, pyarrow and Polars give it is scored as the same run written as
JSON Lines (``ragmeter.score(golden, run).cases`` and ``.summary`` equal), or refused with one line naming the
file and the column."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ragmeter
from ragmeter.errors import InputError

EX = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"
GOLDEN = EX / "golden.jsonl"
RUN = [json.loads(line) for line in (EX / "run.jsonl").read_text(encoding="utf-8").splitlines()
       if line.startswith("{")]


def write_jsonl(path: Path, rows: List[Dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def assert_scored_as_jsonl(tmp_path: Path, parquet: Path, rows: List[Dict[str, Any]]) -> None:
    reference = ragmeter.score(GOLDEN, write_jsonl(tmp_path / "reference.jsonl", rows))
    got = ragmeter.score(GOLDEN, parquet)
    assert got.cases.equals(reference.cases, null_equal=True)
    assert got.summary == reference.summary
    assert got.chunks.equals(reference.chunks, null_equal=True)


def cli_error(tmp_path: Path, run: Path) -> str:
    """The one line ``ragmeter score`` prints for a refused run (exit 2, no traceback)."""
    done = subprocess.run([sys.executable, "-m", "ragmeter", "score", "--golden", str(GOLDEN), "--run", str(run)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("ragmeter: note:")]
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize("row_group_size", [None, 1])
def test_a_zero_row_file_from_pyarrow_scores_every_case_as_missing(tmp_path, row_group_size):
    # pyarrow stores the texts of a zero-row file in a dictionary page; the scorer read such a file's schema as a
    # table (chunked columns) and crashed: AttributeError: 'pyarrow.lib.ChunkedArray' object has no attribute 'values'
    path = tmp_path / "empty.parquet"
    pq.write_table(pa.Table.from_pylist(RUN).slice(0, 0), path, row_group_size=row_group_size)
    got = ragmeter.score(GOLDEN, path)
    assert got.cases["missing_from_run"].all()
    assert got.cases.height == ragmeter.score(GOLDEN, EX / "run.jsonl").cases.height
    whole = ragmeter.score(GOLDEN, ragmeter.dataset.load_run(path))
    assert got.cases.equals(whole.cases, null_equal=True)
