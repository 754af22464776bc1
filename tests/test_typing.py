"""The top-level package is typed: a user's script type-checks under ``mypy --strict`` and
``ragmeter.score`` is a ``ScoreResult``, not ``Any``, through the lazy top-level names."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

import ragmeter

PACKAGE_ROOT = Path(ragmeter.__file__).resolve().parent.parent

USER_SCRIPT = '''
import polars as pl

import ragmeter
from ragmeter.retrieval import ScoreResult


def hit_rate(golden: str, run: str) -> float:
    result: ScoreResult = ragmeter.score(golden, run, k=5)
    value = result.summary["overall"]["hit_rate"]["value"]
    return float(value)


def thresholds(golden: str, run: str) -> pl.DataFrame:
    return ragmeter.sweep(golden, run, [0.0, 0.1], k=5)


print(ragmeter.__version__, ragmeter.metrics.average_precision([1, 0, 1]))
reveal_type(ragmeter.score)
'''


def _mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess:
    script = tmp_path / "user_script.py"
    script.write_text(source, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(PACKAGE_ROOT)}
    # Run from tmp_path so that mypy does not pick up the repository's configuration or cache.
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--python-executable",
                           sys.executable, script.name], cwd=tmp_path, capture_output=True, text=True, env=env,
                          timeout=600)


def test_user_script_type_checks_strictly_and_score_is_typed(tmp_path: Path) -> None:
    # One deliberate mistake: were ragmeter.score typed as Any, it would pass silently.
    proc = _mypy(tmp_path, USER_SCRIPT + "wrong: int = ragmeter.score('g.jsonl', 'r.jsonl')\n")
    out = proc.stdout
    revealed = [line for line in out.splitlines() if "Revealed type is" in line]
    assert len(revealed) == 1 and revealed[0].endswith('-> ragmeter.retrieval.ScoreResult"'), out
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 1 and 'expression has type "ScoreResult", variable has type "int"' in errors[0], out
    assert proc.returncode == 1


def test_every_lazy_top_level_function_is_typed(tmp_path: Path) -> None:
    # each callable name of ragmeter.__all__ reaches type checkers through the TYPE_CHECKING imports, not as the
    # Any of the module's __getattr__ (a wrong use of it would then pass silently)
    names = ["evaluate", "score", "sweep", "score_batch"]
    proc = _mypy(tmp_path, "import ragmeter\n" + "".join(f"reveal_type(ragmeter.{n})\n" for n in names))
    revealed = [line.split("Revealed type is ", 1)[1] for line in proc.stdout.splitlines() if "Revealed type is" in line]
    assert len(revealed) == len(names), proc.stdout
    untyped = [n for n, r in zip(names, revealed) if r == '"Any"']
    assert not untyped, proc.stdout
