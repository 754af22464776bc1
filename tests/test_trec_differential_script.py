"""scripts/trec_eval_differential.py: its plumbing, with ragmeter standing in for the trec_eval binary."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "trec_eval_differential.py"


def shim(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def run(tmp_path: Path, binary: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--trec-eval", str(binary), "--cases", "12", "--seed", "3",
                           "--keep", str(tmp_path / "keep"), *extra], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ})


@pytest.mark.parametrize("extra", [[], ["--gain-tables"]])
def test_the_same_program_on_both_sides_has_no_mismatch(tmp_path: Path, extra) -> None:
    same = shim(tmp_path, "same", f'exec "{sys.executable}" -m ragmeter trec "$@"')
    proc = run(tmp_path, same, *extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert ", 0 mismatches" in proc.stdout and not (tmp_path / "keep").exists()


def test_an_output_that_differs_is_a_mismatch_with_its_inputs_kept(tmp_path: Path) -> None:
    other = shim(tmp_path, "other", f'"{sys.executable}" -m ragmeter trec "$@" | sed "s/0\\.0000/0.0001/"')
    proc = run(tmp_path, other)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    kept = sorted((tmp_path / "keep").iterdir())
    assert kept and all((case / "qrels").is_file() and (case / "run").is_file() for case in kept)
