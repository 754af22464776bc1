"""``ragmeter sweep`` / ``ragmeter.sweep`` on runs whose scores cannot all be swept."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import pytest

import ragmeter
from ragmeter.errors import InputError

GOLDEN = [
    {"id": "a", "question": "qa", "expectedFileNames": ["x.md"], "category": "c1"},
    {"id": "b", "question": "qb", "expectedFileNames": ["y.md"], "category": "c1"},
    {"id": "c", "question": "qc", "expectedFileNames": ["z.md"], "category": "c2"},
]


def run_of(scores: dict) -> List[dict]:
    """A run whose case ``id`` retrieves one chunk per ``(file, score)``; a score of None writes no score."""
    return [{"id": i, "retrieved": [{"file": f, "text": "t", **({} if s is None else {"score": s})} for f, s in chunks]}
            for i, chunks in scores.items()]


def write(tmp_path: Path, golden: List[dict], run: List[dict]) -> None:
    for name, rows in (("g.jsonl", golden), ("r.jsonl", run)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def cli(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmeter", "sweep", "--golden", "g.jsonl", "--run", "r.jsonl", *extra],
                          capture_output=True, text=True, cwd=tmp_path)


UNSCORED = {"a": [("x.md", None)], "b": [("w.md", None), ("y.md", None)], "c": [("z.md", None)]}


def test_a_run_without_any_score_has_nothing_to_sweep(tmp_path: Path) -> None:
    """Every threshold keeps every chunk of a run without scores: the same row at every t is no sweep."""
    write(tmp_path, GOLDEN, run_of(UNSCORED))
    proc = cli(tmp_path, "--thresholds", "0,0.5", "--out", "sweep.csv")
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "r.jsonl" in proc.stderr and "no retrieved chunk has a score" in proc.stderr
    assert proc.stdout == "" and not (tmp_path / "sweep.csv").exists()
    with pytest.raises(InputError, match="no retrieved chunk has a score"):
        ragmeter.sweep(GOLDEN, run_of(UNSCORED), [0.0, 0.5])


PARTLY_SCORED = {"a": [("x.md", None), ("w.md", 0.9)], "b": [("w.md", 0.5), ("y.md", 0.3)], "c": [("z.md", None)]}


@pytest.mark.parametrize("json_out", [False, True], ids=["table", "json"])
def test_chunks_without_a_score_are_said_to_pass_every_threshold(tmp_path: Path, json_out: bool) -> None:
    """Above every score, only the unscored chunks are left, and they hit: the user is told why."""
    write(tmp_path, GOLDEN, run_of(PARTLY_SCORED))
    proc = cli(tmp_path, "--thresholds", "0,5", *(["--json"] if json_out else []))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ("ragmeter: note: r.jsonl: 2 of 5 retrieved chunks (in 2 of 3 cases) have no score; "
                           "the sweep keeps them at every threshold\n")
    if json_out:  # stdout holds the JSON alone
        rows = json.loads(proc.stdout)
        assert {r["threshold"] for r in rows} == {0.0, 5.0}


def test_the_library_logs_the_unscored_chunks_as_a_note(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="ragmeter.notes"):
        ragmeter.sweep(GOLDEN, run_of(PARTLY_SCORED), [0.0])
    assert [r.getMessage() for r in caplog.records] == [
        "run: 2 of 5 retrieved chunks (in 2 of 3 cases) have no score; the sweep keeps them at every threshold"]
    caplog.clear()
    with caplog.at_level("INFO", logger="ragmeter.notes"):
        ragmeter.sweep(GOLDEN, run_of({i: [(f, 0.5) for f, _s in c] for i, c in PARTLY_SCORED.items()}), [0.0])
    assert caplog.records == []  # every chunk scored: nothing to say


def test_sweep_says_which_cases_ran_in_another_mode_or_are_absent_from_the_run(tmp_path: Path) -> None:
    """Another mode's scores are on another scale (one threshold means another thing there), and an absent case
    is an empty retrieval at every threshold: `score` warned about both, `sweep` said nothing."""
    from ragmeter.retrieval import sweep_with_warnings

    ex = Path(ragmeter.__file__).parent / "_example"
    table, warnings = sweep_with_warnings(ex / "golden.jsonl", ex / "run.jsonl", [0.0, 0.2])
    codes = {w["code"]: w for w in warnings}
    assert set(codes) == {"mode_fallback", "missing_from_run"}
    assert codes["mode_fallback"]["count"] == 3 and codes["missing_from_run"]["cases"] == ["crossdoc-06-formats-today"]
    assert table.equals(ragmeter.sweep(ex / "golden.jsonl", ex / "run.jsonl", [0.0, 0.2]))
    args = [sys.executable, "-m", "ragmeter", "sweep", "--golden", str(ex / "golden.jsonl"), "--run",
            str(ex / "run.jsonl"), "--thresholds", "0,0.2"]
    proc = subprocess.run(args, capture_output=True, text=True, cwd=tmp_path)
    said = " ".join(proc.stdout.split())
    assert proc.returncode == 0 and "warning: 3 case(s) ran in a retrieval mode other than" in said
    assert "warning: 1 golden case(s) missing from the run" in said
    assert all(len(line) <= 80 for line in proc.stdout.splitlines())
    rows = json.loads(subprocess.run(args + ["--json"], capture_output=True, text=True, cwd=tmp_path).stdout)
    assert rows and all("threshold" in r for r in rows)  # --json: the rows alone


@pytest.mark.parametrize("which", ["golden", "run"])
def test_out_naming_an_input_is_refused_and_the_input_kept(tmp_path, which, capsys):
    """`sweep --out` with the golden set's or the run's own name (a .json or .parquet input) replaced that input
    with the table."""
    import polars as pl

    from ragmeter.cli import main

    example = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"

    def records(name: str) -> list:
        return [json.loads(line) for line in (example / name).read_text(encoding="utf-8").splitlines()
                if line.startswith("{")]

    golden, run = tmp_path / "golden.json", tmp_path / "run.parquet"
    golden.write_text(json.dumps(records("golden.jsonl"), ensure_ascii=False), encoding="utf-8")
    pl.DataFrame(records("run.jsonl")).write_parquet(run)
    before = {p: p.read_bytes() for p in (golden, run)}
    out = golden if which == "golden" else run
    assert main(["sweep", "--golden", str(golden), "--run", str(run), "--out", f"{tmp_path}/./{out.name}"]) == 2
    err = capsys.readouterr().err
    assert f"is the {'golden set (--golden)' if which == 'golden' else 'run (--run)'}" in err, err
    assert {p: p.read_bytes() for p in (golden, run)} == before


@pytest.mark.parametrize("out,said", [
    ("outdir", "--out outdir is a folder: sweep writes one table file (FILE.parquet, FILE.csv or FILE.json)"),
    (".csv", "--out .csv: no file name before '.csv' (FILE.csv)"),
    ("t.xlsx", "--out t.xlsx: unknown extension '.xlsx': use .parquet, .csv or .json"),
])
def test_out_that_cannot_name_a_table_file_says_why(tmp_path: Path, out: str, said: str) -> None:
    # a folder and a bare '.csv' were both 'unknown extension '(none)''
    write(tmp_path, GOLDEN, run_of({"a": [("x.md", 0.5)], "b": [("y.md", 0.1)], "c": [("z.md", 0.9)]}))
    (tmp_path / "outdir").mkdir()
    proc = cli(tmp_path, "--out", out)
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert proc.stdout == "" and sorted(p.name for p in tmp_path.iterdir()) == ["g.jsonl", "outdir", "r.jsonl"]
