"""``score`` / ``sweep`` / ``eval`` on inputs that used to slip through or crash: lone UTF-16 surrogates,
float32 scores at a threshold, the file-vs-chunk gap line, a category named ALL, zero-width evidence phrases,
huge --k, long unfound phrases, NaN scores in Parquet."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List

import pytest

from ragmeter.cli import main


def write_lines(path: Path, lines: List[str]) -> Path:
    """Lines written as given (raw JSON, so that escapes such as ``\\udc00`` reach the file unchanged)."""
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def write_jsonl(path: Path, rows: List[Any]) -> Path:
    return write_lines(path, [json.dumps(r, ensure_ascii=False) for r in rows])


def refused(capsys: pytest.CaptureFixture, argv: List[str]) -> str:
    """The one error line of a command that must refuse its input (exit 2, nothing else but notes)."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("ragmeter: note:")]
    assert len(lines) == 1 and lines[0].startswith("ragmeter: error: "), err
    return lines[0][len("ragmeter: error: "):]


GOLDEN = '{"id":"a-1","question":"q","expectedEvidence":["gold"]}'
RUN = '{"id":"a-1","retrieved":[{"file":"f.md","text":"gold x","score":0.5}]}'


# 1. lone surrogates ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["score", "sweep", "eval"])
def test_a_lone_surrogate_in_a_run_chunk_is_malformed_input(tmp_path: Path, capsys, command: str) -> None:
    golden = write_lines(tmp_path / "g.jsonl", [GOLDEN])
    run = write_lines(tmp_path / "r.jsonl", [RUN, '{"id":"a-2","retrieved":[{"file":"f.md","text":"gold\\udc00x","score":0.5}]}'])
    write_lines(golden, [GOLDEN, '{"id":"a-2","question":"q2","expectedEvidence":["gold"]}'])
    out = tmp_path / ("out.parquet" if command == "sweep" else "out")
    line = refused(capsys, [command, "--golden", str(golden), "--run", str(run), "--out", str(out)]
                   + (["--no-judge"] if command == "eval" else []))
    assert line.startswith(f"{run}:2: ") and "retrieved[0].text" in line and "surrogate" in line, line
    assert "\\udc00" in line
    assert not out.exists()


def test_a_lone_surrogate_in_a_golden_phrase_is_malformed_input(tmp_path: Path, capsys) -> None:
    golden = write_lines(tmp_path / "g.jsonl", ['{"id":"a-1","question":"q","expectedEvidence":["ok","\\ud800"]}'])
    run = write_lines(tmp_path / "r.jsonl", [RUN])
    line = refused(capsys, ["score", "--golden", str(golden), "--run", str(run)])
    assert line.startswith(f"{golden}:1: ") and "expectedEvidence[1]" in line and "\\ud800" in line, line


def test_a_lone_surrogate_in_a_json_array_is_malformed_input(tmp_path: Path, capsys) -> None:
    golden = write_lines(tmp_path / "g.json", ["[" + GOLDEN + "]"])
    run = tmp_path / "r.json"
    run.write_text('[\n{"id":"a-1","retrieved":[],"answer":"an \\ud83d answer"}\n]\n', encoding="utf-8")
    line = refused(capsys, ["sweep", "--golden", str(golden), "--run", str(run), "--thresholds", "0.1"])
    assert line.startswith(f"{run}:2: ") and "'answer'" in line and "\\ud83d" in line, line


def test_a_surrogate_pair_is_a_character_not_a_problem(tmp_path: Path, capsys) -> None:
    golden = write_lines(tmp_path / "g.jsonl", ['{"id":"a-1","question":"q","expectedEvidence":["gold\\ud83d\\ude00"]}'])
    run = write_lines(tmp_path / "r.jsonl", ['{"id":"a-1","retrieved":[{"file":"f.md","text":"gold\\ud83d\\ude00 x","score":0.5}]}'])
    assert main(["score", "--golden", str(golden), "--run", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["overall"]["hit_rate"]["value"] == 1.0


def test_the_library_refuses_a_surrogate_in_records_in_memory() -> None:
    import ragmeter
    from ragmeter.errors import InputError

    with pytest.raises(InputError, match=r"run\[0\]: 'retrieved\[0\]\.text' holds a lone UTF-16 surrogate"):
        ragmeter.score([json.loads(GOLDEN)], [{"id": "a-1", "retrieved": [{"text": "gold\udc00"}]}])
