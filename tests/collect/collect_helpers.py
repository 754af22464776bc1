"""Helpers of the collect tests (a module of its own: tests/judge has a conftest of the same name)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ragserver import GOLDEN

from ragmeter.judge.retry import RetryPolicy

__all__ = ["FAST", "GOLDEN", "PYTHON_DIR", "cli", "golden_ids", "no_traceback", "write_target"]

PYTHON_DIR = Path(__file__).resolve().parents[2] / "python"
#: back-off in milliseconds so the suite stays fast
FAST = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05, max_retry_after=1.0)


def golden_ids() -> list:
    from ragmeter.dataset import load_golden

    return load_golden(GOLDEN)["id"].to_list()


def cli(*args: str, cwd: Path, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """``ragmeter ARGS`` in a subprocess (the worktree's package), stdout/stderr captured; fails on a traceback."""
    full = {**os.environ, "PYTHONPATH": str(PYTHON_DIR), **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "ragmeter", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=timeout)
    no_traceback(proc)  # whatever the outcome, never a traceback
    return proc


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr


def write_target(path: Path, url: str, extra: str = "") -> Path:
    path.write_text(f'url = "{url}"\n{extra}', encoding="utf-8")
    return path
