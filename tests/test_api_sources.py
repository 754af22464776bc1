"""ragmeter.score and ragmeter.sweep take every input ragmeter.evaluate takes (Arrow tables, lazy frames, dicts of
columns): they refused Arrow tables and Polars lazy frames that evaluate accepted."""
from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

import ragmeter

EX = Path(ragmeter.__file__).parent / "_example"


def _records(name: str) -> list:
    import json

    return [json.loads(line) for line in (EX / name).read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


@pytest.mark.parametrize("shape", ["arrow", "lazy"])
def test_score_and_sweep_take_what_evaluate_takes(shape: str) -> None:
    golden, run = _records("golden.jsonl"), _records("run.jsonl")
    frames = [pl.DataFrame(golden), pl.DataFrame(run)]
    given = [f.to_arrow() if shape == "arrow" else f.lazy() for f in frames]
    assert isinstance(given[0], pa.Table if shape == "arrow" else pl.LazyFrame)
    expected = ragmeter.score(EX / "golden.jsonl", EX / "run.jsonl").summary["overall"]["hit_rate"]
    got = ragmeter.score(*given).summary["overall"]["hit_rate"]
    assert (got["value"], got["n_scored"], got["n_total"]) == (expected["value"], expected["n_scored"],
                                                              expected["n_total"])
    swept = ragmeter.sweep(*given, [0.0, 0.2])
    assert swept.equals(ragmeter.sweep(EX / "golden.jsonl", EX / "run.jsonl", [0.0, 0.2]))
