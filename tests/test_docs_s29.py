"""The docs tell the truth (review 29 of README.md and docs/*.md against the code): each claim a user copies,
checked where a test can do it cheaply."""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).parent / "judge"))

from fakeserver import FakeServer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
KEY = "sk-test-docs29-0123456789"


def _ragmeter(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAGMETER_API_KEY": KEY}
    return subprocess.run([sys.executable, "-m", "ragmeter", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def _write_jsonl(path: Path, records: List[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


# -- README exit table: `judge` input of which every row lacks what its metric needs is exit 2 -----------------------
def test_judge_refuses_input_lacking_references_even_when_one_case_failed_in_the_run(tmp_path: Path) -> None:
    """README, exit 2: "`judge` input of which every row lacks what its metric needs (no answer, no reference:
    nothing to judge; a run whose cases all failed when collected exits 3)". A golden set without reference
    answers, judged for correctness against a run in which one case of three failed when collected, measured
    nothing; it exited 3 with 'scored 0/3' and a results folder, as if the run's failure were the only gap."""
    golden = _write_jsonl(tmp_path / "golden.jsonl", [{"id": f"q{i}", "question": f"q{i}?"} for i in range(3)])
    run = _write_jsonl(tmp_path / "run.jsonl", [
        {"id": "q0", "retrieved": [], "answer": None, "error": "boom", "error_kind": "timeout"},
        {"id": "q1", "retrieved": [{"file": "f.md", "text": "x"}], "answer": "a"},
        {"id": "q2", "retrieved": [{"file": "f.md", "text": "x"}], "answer": "b"}])
    with FakeServer(api_key=KEY) as server:
        proc = _ragmeter("judge", "--golden", str(golden), "--run", str(run), "--base-url", server.base_url,
                         "--model", "m", "--metrics", "correctness", "--no-progress", "--no-cache",
                         "--out", str(tmp_path / "out"), cwd=tmp_path)
        assert server.requests == 0
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    err = " ".join(proc.stderr.split())
    assert "nothing to judge: all 3 judge rows (3 cases x 1 metrics) lack their input" in err, err
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()
