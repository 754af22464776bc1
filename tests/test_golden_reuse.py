"""``ragmeter score`` parses its golden set once: the audit pointer's load takes the scoring's frame, and only
while the file's bytes are the ones parsed."""
from __future__ import annotations

import contextlib
import json
import threading

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from ragmeter import dataset
from ragmeter.dataset import _golden  # where load_golden looks its helpers up (a patch must land there)
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

    monkeypatch.setattr(_golden, "_load_golden", parse)
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


def test_a_context_in_another_thread_leaves_this_one_parsing(tmp_path, monkeypatch):
    # A platform scoring in a worker thread holds the context open; loads outside it, here, still parse.
    golden = tmp_path / "golden.jsonl"
    write_golden(golden, 3)
    parsed = counting_parses(monkeypatch)
    entered, release = threading.Event(), threading.Event()

    def worker() -> None:
        with reusing_golden_loads():
            load_golden(golden)
            entered.set()
            release.wait(10)
            load_golden(golden)

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        assert entered.wait(10)
        load_golden(golden)
        load_golden(golden)
    finally:
        release.set()
        thread.join(10)
    assert len(parsed) == 3  # the worker's first load, and each of this thread's two


def test_score_parses_the_golden_set_once_and_prints_what_it_printed(tmp_path, monkeypatch, capsys):
    golden, run = tmp_path / "golden.jsonl", tmp_path / "run.jsonl"
    write_golden(golden, 4)
    run.write_text("".join(json.dumps({"id": f"q{i}", "retrieved": [{"file": f"d{i}.md", "text": f"the fact {i}"}]}) + "\n"
                           for i in range(4)), encoding="utf-8")
    with monkeypatch.context() as patch:
        patch.setattr(dataset, "reusing_golden_loads", contextlib.nullcontext)
        parsed = counting_parses(patch)
        assert main(["score", "--golden", str(golden), "--run", str(run)]) == 0
        assert len(parsed) == 3  # the label check, scoring and auditing, each its own parse
    unshared = capsys.readouterr().out
    parsed = counting_parses(monkeypatch)
    assert main(["score", "--golden", str(golden), "--run", str(run)]) == 0
    assert parsed == [str(golden)]
    assert capsys.readouterr().out == unshared
    assert "audit warning" in unshared  # the pointer was printed from the shared frame


def _record_by_record(path, names) -> dict:
    """What the audit took before it had the columnar reader's fields: each record parsed by json.loads."""
    frame = load_golden(path)
    by_id = {str(r.get("id")): r for r in dataset.raw_records(path)}
    return {n: [by_id.get(i, {}).get(n) for i in frame["id"].to_list()] for n in names}


FIELD_VALUES = {
    "strings": ["hard", "easy", None, "", " hard "],
    "integers": [1, 2, None, 3, 40],
    "widened": [1, 1.5, 2, None, 3],  # Arrow reads a double column: 1 would come back as 1.0
    "mixed": ["hard", 1, None, True, "easy"],  # no one Arrow type: the reader refuses the file
    "nested": [{"a": 1}, ["x"], None, "hard", None],
    "flags": [True, False, None, True, False],
}


def test_unkept_fields_equal_the_record_by_record_values(tmp_path, monkeypatch):
    rows = [{"id": f"q{i}", "question": f"question {i}?", "category": "cat", "expectedEvidence": [f"fact {i}"]}
            for i in range(5)]
    for name, values in FIELD_VALUES.items():
        golden = tmp_path / f"{name}.jsonl"
        body = [dict(r, difficulty=v) if v is not None else dict(r) for r, v in zip(rows, values)]
        golden.write_text("# a comment line\n" + "".join(json.dumps(r) + "\n" for r in body), encoding="utf-8")
        want = _record_by_record(golden, ["difficulty", "platform"])
        assert want["difficulty"] == [v for v in values] and want["platform"] == [None] * 5
        frame = load_golden(golden)
        for reuse in (contextlib.nullcontext(), reusing_golden_loads()):
            with reuse:
                got = dataset.golden_fields(golden, load_golden(golden), ["difficulty", "platform"])
            assert got == want, name
            assert [type(v) for v in got["difficulty"]] == [type(v) for v in values], name
        assert frame.height == 5


def test_unkept_fields_come_from_the_scoring_parse(tmp_path, monkeypatch):
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(json.dumps({"id": f"q{i}", "question": f"question {i}?", "category": "cat",
                                          "difficulty": "hard" if i % 2 else "easy"}) + "\n" for i in range(6)),
                      encoding="utf-8")
    parsed = counting_parses(monkeypatch)
    monkeypatch.setattr(_golden, "raw_records", lambda *a, **k: pytest.fail("parsed record by record"))
    with reusing_golden_loads():
        frame = load_golden(golden)
        got = dataset.golden_fields(golden, frame, ["difficulty"])
    assert parsed == [str(golden)]
    assert got["difficulty"] == ["easy", "hard"] * 3


def test_sweep_parses_the_golden_set_once(tmp_path, monkeypatch):
    golden, run = tmp_path / "golden.jsonl", tmp_path / "run.jsonl"
    write_golden(golden, 4)
    run.write_text("".join(json.dumps({"id": f"q{i}", "retrieved": [{"file": f"d{i}.md", "text": f"the fact {i}",
                                                                       "score": 0.5}]}) + "\n"
                           for i in range(4)), encoding="utf-8")
    parsed = counting_parses(monkeypatch)
    assert main(["sweep", "--golden", str(golden), "--run", str(run), "--thresholds", "0,0.6"]) == 0
    assert parsed == [str(golden)]  # the label check and the sweep share one parse
