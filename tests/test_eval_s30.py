"""Session 30: `ragmeter eval`'s terminal says what the reports' numbers rest on; each test was seen failing first."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "judge"))
from fakeserver import FakeServer  # noqa: E402

KEY = "sk-test-eval-s30-0123456789"


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_the_terminal_says_when_no_answer_cases_count_by_the_refusal_rule(tmp_path, monkeypatch):
    """A no-answer question without a reference answer is not sent to the judge; report.md's Correct counts it by
    the refusal rule (a refusal is correct) while the terminal printed the judge's correct_rate alone: two
    different 'correct' numbers for one run, with nothing on the terminal saying why."""
    chunk = {"file": "a.md", "chunk_id": "a#1", "text": "the hotel cap is 600 per night", "score": 0.9}
    golden = _write(tmp_path / "golden.jsonl", [
        {"id": "q1", "question": "What is the hotel cap?", "expectedFileNames": ["a.md"],
         "expectedEvidence": ["hotel cap is 600"], "referenceAnswer": "600 per night", "category": "fact"},
        {"id": "q2", "question": "Who is the CEO's dentist?", "category": "noanswer"},
    ])
    run = _write(tmp_path / "run.jsonl", [
        {"id": "q1", "retrieved": [chunk], "answer": "The cap is 600 per night."},
        {"id": "q2", "retrieved": [chunk], "answer": "I don't know; the documents do not say."},
    ])
    monkeypatch.setenv("RAGMETER_API_KEY", KEY)
    out = tmp_path / "ev"
    with FakeServer(api_key=KEY) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "ragmeter", "eval", "--golden", str(golden), "--run", str(run), "--base-url",
             server.base_url, "--model", "gpt-4o-mini", "--no-cache", "--no-progress", "--metrics", "correctness",
             "--out", str(out)], capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"}, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "| Correct | 100.0% |" in md and "by the refusal rule" in md
    stdout = " ".join(proc.stdout.split())
    assert "correct 100.0% (1 of 1;" in stdout  # the judge's own rate: q1 alone
    assert "the reports' Correct also counts 1 no-answer case(s) the judge did not grade" in stdout
    assert "by the refusal rule (1 of 1 refused)" in stdout
