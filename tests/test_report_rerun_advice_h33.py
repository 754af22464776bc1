"""`ragmeter report DIR` on a folder it cannot read names the command that wrote the folder (h33): a folder of
`ragmeter score` is not told to re-run `ragmeter eval`."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from ragmeter.errors import InputError
from ragmeter.report.data import load_results

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from compare_runs import GOLDEN  # noqa: E402

RUN = GOLDEN.parent / "run.jsonl"


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "ragmeter", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def _folder(tmp_path, command):
    out = tmp_path / command
    done = _cli(command, "--golden", str(GOLDEN), "--run", str(RUN), "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return out


def _edit_summary(folder, **keys):
    path = folder / "summary.json"
    summary = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**summary, **keys}), encoding="utf-8")


@pytest.mark.parametrize("command", ["score", "eval"])
def test_another_results_format_names_the_command_that_wrote_the_folder(tmp_path, command):
    folder = _folder(tmp_path, command)
    _edit_summary(folder, results_format=99, version="99.0")
    done = _cli("report", str(folder), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    other = {"score": "eval", "eval": "score"}[command]
    assert "results_format 99" in done.stderr and "version 99.0" in done.stderr
    assert f"write the folder again with `ragmeter {command} --out DIR`, or use the matching version" in done.stderr
    assert f"`ragmeter {other}" not in done.stderr


def test_a_summary_of_neither_layout_names_both_commands(tmp_path):
    folder = _folder(tmp_path, "score")
    (folder / "summary.json").write_text(json.dumps({"results_format": 99}), encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_results(folder)
    assert str(err.value).endswith("write the folder again with the command that wrote it (`ragmeter eval --out DIR` "
                                   "or `ragmeter score --out DIR`), or use the matching version"), err.value


def test_a_wrong_column_type_in_a_score_folder_names_score(tmp_path):
    folder = _folder(tmp_path, "score")
    cases = pq.read_table(folder / "cases.parquet")
    hit = cases.column_names.index("hit")
    pq.write_table(cases.set_column(hit, "hit", cases.column("hit").cast("string")), folder / "cases.parquet")
    done = _cli("report", str(folder), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "cases.parquet" in done.stderr and "hit" in done.stderr
    assert "write the folder again with `ragmeter score --out DIR`" in done.stderr and "`ragmeter eval" not in done.stderr
