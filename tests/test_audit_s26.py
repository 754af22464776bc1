"""Review session 26 of `ragmeter audit`: defects found auditing golden sets, each with the test that failed
before its fix."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example" / "golden.jsonl"


def _audit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmeter", "audit", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("flag, value", [("--target", "99999999999999999999"),
                                         ("--targets", "category=fact:99999999999999999999"),
                                         ("--target", "20000000")])
def test_a_target_beyond_any_golden_set_is_refused(flag: str, value: str) -> None:
    proc = _audit("--golden", str(EXAMPLE), flag, value)
    # before: a Polars traceback (Int128 into an Int64 Series), exit 1 - the status of an audit that found warnings
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert flag in proc.stderr and "10,000,000" in proc.stderr


def test_a_golden_set_without_ids_or_categories_is_refused(tmp_path: Path) -> None:
    golden = tmp_path / "noid.jsonl"
    golden.write_text("".join(json.dumps({"question": f"q{i}", "expectedFileNames": ["a.md"]}) + "\n"
                              for i in range(5)), encoding="utf-8")
    proc = _audit("--golden", str(golden))
    # before: audited as one category 'uncategorised' at 100%, exit 0 (with ids and no category: refused)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert "no categories" in proc.stderr
