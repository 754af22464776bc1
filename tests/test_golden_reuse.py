"""``ragmeter score`` parses its golden set once: the audit pointer's load takes the scoring's frame, and only
while the file's bytes are the ones parsed."""
from __future__ import annotations

import contextlib
import json

import polars as pl
from polars.testing import assert_frame_equal

from ragmeter import dataset
from ragmeter.cli import main
from ragmeter.dataset import load_golden, reusing_golden_loads


def write_golden(path, n: int, category: str = "cat") -> None:
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": "q?", "category": category,
                                        "expectedFileNames": [f"d{i}.md"], "expectedEvidence": [f"fact {i}"]}) + "\n"
                            for i in range(n)), encoding="utf-8")


def counting_parses(monkeypatch) -> list:
    parsed: list = []
    real = dataset._load_golden

    def parse(source, name, raw):
        parsed.append(str(source))
        return real(source, name, raw)

    monkeypatch.setattr(dataset, "_load_golden", parse)
    return parsed


def test_a_file_loaded_twice_is_parsed_once_while_its_bytes_are_the_same(tmp_path, monkeypatch):
    golden = tmp_path / "golden.jsonl"
    write_golden(golden, 5)
    parsed = counting_parses(monkeypatch)
    with reusing_golden_loads():
        first = load_golden(golden)
        first.insert_column(0, pl.Series("scratch", range(5)))  # a caller changing its frame in place
        second = load_golden(golden)
        assert parsed == [str(golden)]
        assert "scratch" not in second.columns
        write_golden(golden, 5, category="other")  # same size, new bytes
        third = load_golden(golden)
        assert len(parsed) == 2 and third["category"].unique().to_list() == ["other"]
    load_golden(golden)
    load_golden(golden)
    assert len(parsed) == 4  # outside the context every load parses
    assert_frame_equal(third, load_golden(golden))


def test_score_parses_the_golden_set_once_and_prints_what_it_printed(tmp_path, monkeypatch, capsys):
    golden, run = tmp_path / "golden.jsonl", tmp_path / "run.jsonl"
    write_golden(golden, 4)
    run.write_text("".join(json.dumps({"id": f"q{i}", "retrieved": [{"file": f"d{i}.md", "text": f"the fact {i}"}]}) + "\n"
                           for i in range(4)), encoding="utf-8")
    with monkeypatch.context() as patch:
        patch.setattr(dataset, "reusing_golden_loads", contextlib.nullcontext)
        parsed = counting_parses(patch)
        assert main(["score", "--golden", str(golden), "--run", str(run)]) == 0
        assert len(parsed) == 2  # scoring and auditing, each its own parse
    unshared = capsys.readouterr().out
    parsed = counting_parses(monkeypatch)
    assert main(["score", "--golden", str(golden), "--run", str(run)]) == 0
    assert parsed == [str(golden)]
    assert capsys.readouterr().out == unshared
    assert "audit warning" in unshared  # the pointer was printed from the shared frame
