"""Review session 23 of ``ragmeter eval``: defects found running it as a CI job would, each with the test that
failed before its fix."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import polars as pl
from evalcli import EXAMPLES as EX
from evalcli import eval_cli


# -- --repeat N: a repeat whose calls failed is incomplete, and --max-failed sees it ---------------------------
def test_failed_rows_of_a_later_repeat_count_against_max_failed(tmp_path, server, api_key):
    # repeat 1 (50 correctness calls; the case missing from the run sends none) answers; repeat 2 only fails
    # (a 400 each: a 5xx on every call would stop the run as an endpoint that is down, exit 2)
    server.script = ["ok"] * 50 + [400] * 200
    out = tmp_path / "ev"
    proc = eval_cli("--metrics", "correctness", "--no-cache", "--repeat", "2", "--retry-attempts", "1",
                    "--out", str(out), server=server)
    judge = pl.read_parquet(out / "judge.parquet")
    failed = judge.filter((pl.col("repeat") == 2) & (pl.col("status") == "failed")).height
    assert failed == 50 and judge.filter(pl.col("repeat") == 1)["status"].to_list().count("failed") == 0
    # before: exit 0, as if everything asked had been measured
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "50 of 100 judge rows were not judged (50 failed" in proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["repeats"]["judge_incomplete"] == {"rows": 50, "failed": 50, "skipped_budget": 0, "of": 100}
    entry = summary["repeats"]["metrics"]["correctness"]
    assert entry["n_scored"] == [50, 0] and entry["n_total"] == [51, 51]
    flat = " ".join(proc.stdout.split())
    assert "(50/51), n/a (0/51)" in flat  # each repeat's mean with the rows it is over
    assert "repeat 2: 50 of 50 judge rows not judged (50 failed" in flat
    # a limit that allows them: results written, exit 0
    server.script = ["ok"] * 50 + [400] * 200
    proc = eval_cli("--metrics", "correctness", "--no-cache", "--repeat", "2", "--retry-attempts", "1",
                    "--max-failed", "60%", "--out", str(out), "--json", server=server)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["repeats"]["judge_incomplete"]["failed"] == 50


# -- bad flags are refused before the live system is asked anything, and an empty --out is not "here" ---------
TARGET = '''
import json, pathlib
CALLS = pathlib.Path(__file__).with_name("calls.txt")
def ask(case):
    with open(CALLS, "a") as fh:
        fh.write(case["id"] + "\\n")
    return {"answer": "x", "retrieved": [{"file": "a.md", "chunk_id": "a#1", "text": "t", "score": 0.5}]}
'''


def test_a_malformed_threshold_list_is_refused_before_the_target_is_asked(tmp_path):
    (tmp_path / "evaltarget_s23.py").write_text(TARGET)
    out = tmp_path / "ev"
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "eval", "--golden", str(EX / "golden.jsonl"),
                           "--target", "evaltarget_s23:ask", "--no-cache", "--thresholds", "0,O.1",
                           "--out", str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "--thresholds" in proc.stderr and "0,O.1" in proc.stderr
    # before: every golden question went to the system and OUT/run.jsonl was written, then the list was read
    assert not (tmp_path / "calls.txt").exists()
    assert not out.exists()


def test_an_empty_out_or_threshold_list_is_an_error_not_the_current_folder(tmp_path):
    (tmp_path / "summary.json").write_text('{"mine": true}')
    cmd = [sys.executable, "-m", "ragmeter", "eval", "--golden", str(EX / "golden.jsonl"),
           "--run", str(EX / "run.jsonl"), "--no-judge"]
    proc = subprocess.run(cmd + ["--out", ""], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 2 and "--out" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    # before: the results went into the current folder, replacing its summary.json
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]
    assert (tmp_path / "summary.json").read_text() == '{"mine": true}'
    proc = subprocess.run(cmd + ["--out", "ev", "--thresholds", ""], capture_output=True, text=True, cwd=tmp_path,
                          timeout=300)
    # before: exit 0 without a sweep, as if none had been asked for
    assert proc.returncode == 2 and "--thresholds" in proc.stderr, proc.stderr
    assert not (tmp_path / "ev").exists()


# -- --no-judge is named as the reason, never "no endpoint given" when one was ----------------------------------
def test_no_judge_with_an_endpoint_says_no_judge(tmp_path, server, api_key):
    proc = eval_cli("--no-judge", "--dry-run", server=server)
    # before: "pass --base-url and --model", which the command line had just done
    assert proc.returncode == 2 and "--no-judge" in proc.stderr and "pass --base-url" not in proc.stderr, proc.stderr
    assert server.requests == 0
    proc = eval_cli("--no-judge", "--out", str(tmp_path / "ev"), server=server)
    assert proc.returncode == 0, proc.stderr
    flat = " ".join(proc.stdout.split())
    assert "--no-judge: answers are not judged" in flat and "no judge endpoint given" not in flat
    assert server.requests == 0 and json.loads((tmp_path / "ev" / "summary.json").read_text())["judge"] is None
    proc = eval_cli("--out", str(tmp_path / "ev2"))
    assert "no judge endpoint given: answers are not judged" in " ".join(proc.stdout.split())
