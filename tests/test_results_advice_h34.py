"""How to write a damaged results folder again is said one way (h34): every message about a folder that is
damaged, incomplete or of another version ends with the same advice, naming the command that wrote it
(``ragmeter score`` / ``eval`` / ``demo --out DIR``) when its summary.json tells, else both commands that write
one. Before, three wordings: "restore it, or write the folder again with `ragmeter eval` (or `ragmeter score`)"
whoever wrote it, "re-run `ragmeter score`", "(written by `ragmeter eval --out DIR` or ...)", and a score folder
whose summary.json was edited was told to re-run `ragmeter eval`."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict

import pyarrow.parquet as pq
import pytest

from ragmeter.errors import InputError
from ragmeter.report.data import load_results

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "python" / "ragmeter" / "_example"
COMMANDS = ("score", "eval", "demo")
GENERIC = ("write the folder again with the command that wrote it (`ragmeter eval --out DIR` or "
           "`ragmeter score --out DIR`)")


def advice(command: str) -> str:
    return f"write the folder again with `ragmeter {command} --out DIR`"


def cli(cwd: Path, *args: Any) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    return subprocess.run([sys.executable, "-m", "ragmeter", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    """A results folder written by each command."""
    base = tmp_path_factory.mktemp("h34")
    inputs = ["--golden", EX / "golden.jsonl", "--run", EX / "run.jsonl"]
    folders = {}
    for command in COMMANDS:
        proc = cli(base, command, *(inputs if command != "demo" else []), "--out", base / command)
        assert proc.returncode == 0, proc.stderr
        folders[command] = base / command
    return folders


def _copy(written: Dict[str, Path], command: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(written[command], tmp_path / command))


def _edit_summary(folder: Path, edit: Callable[[Dict[str, Any]], None]) -> None:
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    edit(summary)
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")


def _retype_hit(folder: Path) -> None:
    cases = pq.read_table(folder / "cases.parquet")
    i = cases.column_names.index("hit")
    pq.write_table(cases.set_column(i, "hit", cases.column("hit").cast("string")), folder / "cases.parquet")


def _drop_labeled(folder: Path) -> None:
    cases = pq.read_table(folder / "cases.parquet")
    pq.write_table(cases.drop(["labeled"]), folder / "cases.parquet")


#: damage -> (how to do it to a folder, the start of what the message says, its middle before the advice)
DAMAGE = {
    "another results_format": (
        lambda f: _edit_summary(f, lambda s: s.update(results_format=99, version="99.0")),
        lambda f: f"{f / 'summary.json'}: results_format 99 was written by another version of ragmeter "
                  "(version 99.0); this version reads results_format 1; ", ", or use the matching version"),
    "cases.parquet empty": (
        lambda f: (f / "cases.parquet").write_bytes(b""),
        lambda f: f"{f / 'cases.parquet'}: is empty; restore it, or ", ""),
    "a column of another type": (
        _retype_hit,
        lambda f: f"{f / 'cases.parquet'}: column hit is String, expected ", ""),
    "a required column missing": (
        _drop_labeled,
        lambda f: f"{f / 'cases.parquet'}: missing column(s) labeled (written by another version of ragmeter, or "
                  "not a cases table); ", ""),
    "cases.parquet missing": (
        lambda f: (f / "cases.parquet").unlink(),
        lambda f: f"{f}: not a complete ragmeter results folder: missing cases.parquet; ", ""),
    "a listed file missing": (
        lambda f: _edit_summary(f, lambda s: s.update(files=[*s["files"], "sweep.parquet"]))
        if not (f / "sweep.parquet").exists() else (f / "sweep.parquet").unlink(),
        lambda f: f"{f / 'sweep.parquet'}: missing, though {f / 'summary.json'} lists it among the run's files "
                  "(deleted or not copied?); restore it, or ", ""),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("command", COMMANDS)
def test_each_damage_names_the_command_that_wrote_the_folder(written, tmp_path, command, damage):
    folder = _copy(written, command, tmp_path)
    do, start, middle = DAMAGE[damage]
    do(folder)
    with pytest.raises(InputError) as err:
        load_results(folder)
    said = str(err.value)
    assert said.startswith(start(folder)), said
    assert said.endswith(advice(command) + middle), said
    assert [c for c in COMMANDS if f"`ragmeter {c}" in said] == [command], said


@pytest.mark.parametrize("command", COMMANDS)
def test_a_summary_key_of_another_type_names_the_command(written, tmp_path, command):
    """The reports check the summary's shape; a score folder was told to re-run `ragmeter eval`."""
    from ragmeter.report import write_reports

    folder = _copy(written, command, tmp_path)
    _edit_summary(folder, lambda s: s.update(cost={"judge_cost_share": "high"}))
    with pytest.raises(InputError) as err:
        write_reports(folder, n_resamples=100)
    assert str(err.value) == (f"{folder / 'summary.json'}: cost.judge_cost_share is a string, expected a number "
                              f"(written by another tool or edited?); {advice(command)}")


def test_a_damaged_summary_gets_the_generic_advice(written, tmp_path):
    folder = _copy(written, "score", tmp_path)
    (folder / "summary.json").write_text("{nope", encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_results(folder)
    assert str(err.value).startswith(f"{folder / 'summary.json'}:1: invalid JSON: "), err.value
    assert str(err.value).endswith(f"; restore it, or {GENERIC}"), err.value


def test_a_summary_of_neither_layout_gets_the_generic_advice(written, tmp_path):
    folder = _copy(written, "score", tmp_path)
    (folder / "summary.json").write_text(json.dumps({"results_format": 99}), encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_results(folder)
    assert str(err.value).endswith(f"results_format 1; {GENERIC}, or use the matching version"), err.value


def test_a_missing_summary_gets_the_generic_advice(written, tmp_path):
    folder = _copy(written, "eval", tmp_path)
    (folder / "summary.json").unlink()
    with pytest.raises(InputError) as err:
        load_results(folder)
    assert str(err.value) == f"{folder}: not a complete ragmeter results folder: missing summary.json; {GENERIC}"


def test_a_folder_of_nothing_ragmeter_wrote_names_the_commands_that_write_one(tmp_path):
    with pytest.raises(InputError) as err:
        load_results(tmp_path)
    assert str(err.value) == (f"{tmp_path}: not a complete ragmeter results folder: missing cases.parquet, "
                              f"summary.json; {GENERIC}")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_listed_repeats_table_missing_is_said_as_the_other_listed_files(written, tmp_path, command):
    """compare and EvalResult.load read repeats.parquet; it said '(copy the whole results folder)'."""
    from ragmeter.compare import load_repeats

    folder = _copy(written, command, tmp_path)
    _edit_summary(folder, lambda s: s.update(files=[*s["files"], "repeats.parquet"]))
    with pytest.raises(InputError) as err:
        load_repeats(load_results(folder))
    assert str(err.value) == (f"{folder / 'repeats.parquet'}: missing, though {folder / 'summary.json'} lists it "
                              f"among the run's files (deleted or not copied?); restore it, or {advice(command)}")


@pytest.mark.parametrize("command", ["score", "demo"])
def test_a_damaged_chunks_table_names_the_command(written, tmp_path, command):
    """chunks.parquet is read by EvalResult.load, and by the report of a score folder (the explorer's chunks:
    an eval folder keeps them in cases.parquet)."""
    import ragmeter

    folder = _copy(written, command, tmp_path)
    (folder / "chunks.parquet").write_text('{"id": "q1"}\n', encoding="utf-8")
    expected = f"{folder / 'chunks.parquet'}: is JSON text, not Parquet; restore it, or {advice(command)}"
    with pytest.raises(InputError) as err:
        ragmeter.EvalResult.load(folder)
    assert str(err.value) == expected
    if command == "score":
        proc = cli(tmp_path, "report", folder, "--out", tmp_path / "rep")
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.strip() == f"ragmeter: error: {expected}", proc.stderr
