"""Where the failures come from, where a CI log shows it: ``eval`` prints the per-case diagnosis counts on the
terminal and writes them in summary.json (``diagnosis``); only the reports and cases.parquet had them."""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from ragmeter.cli import main
from ragmeter.diagnosis import DIAGNOSES

EX = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"


def test_eval_counts_the_diagnoses_in_its_summary_and_on_the_terminal(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = tmp_path / "out"
    assert main(["eval", "--golden", str(EX / "golden.jsonl"), "--run", str(EX / "run.jsonl"), "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    cases = pl.read_parquet(out / "cases.parquet")
    counted = dict(cases["diagnosis"].value_counts().iter_rows())
    assert list(summary["diagnosis"]) == DIAGNOSES
    assert {d: n for d, n in summary["diagnosis"].items() if n} == counted
    assert sum(summary["diagnosis"].values()) == cases.height
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("diagnosis: "))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")), len(lines))
    printed = " ".join(line.strip() for line in lines[start:end])  # wrapped under itself within 80 columns
    assert max(len(line) for line in lines[start:end]) <= 80
    for label, n in counted.items():
        assert f"{label} {n}" in printed


def test_settings_record_no_repeat_when_nothing_was_judged():
    # settings.repeat said 2 for '--repeat 2' without a judge, though nothing was repeated ('--repeat applies to
    # judging only'); compare and the reports read the settings as what was done. Since session 33 repeat=2
    # without a judge is refused (tests/test_api_s33.py): no settings claim a repeat that was not run
    import pytest

    import ragmeter
    from ragmeter.errors import InputError

    with pytest.raises(InputError, match="repeat=2"):
        ragmeter.evaluate(EX / "golden.jsonl", EX / "run.jsonl", repeat=2)
    assert ragmeter.evaluate(EX / "golden.jsonl", EX / "run.jsonl").summary["settings"]["repeat"] == 1
