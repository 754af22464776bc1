"""ragmeter eval end to end: retrieval + judge (against the local fake server) + reports."""
from __future__ import annotations

import json
import subprocess
import sys

import polars as pl
import pytest
from evalcli import EXAMPLES as EX
from evalcli import eval_cli


def test_eval_joins_retrieval_and_judge_and_writes_reports(tmp_path, server, api_key):
    out = tmp_path / "ev"
    proc = eval_cli("--metrics", "correctness,faithfulness", "--cache", str(tmp_path / "cache.sqlite"),
                    "--thresholds", "0,0.2", "--out", str(out), server=server)
    assert proc.returncode == 0, proc.stderr
    cases = pl.read_parquet(out / "cases.parquet")
    assert cases.height == 51
    for column in ("hit", "answer", "question", "correctness_score", "correctness_status", "correct",
                   "faithfulness_score", "retrieved"):
        assert column in cases.columns, column
    # Every case x metric ends ok or with an explicit status; nothing is dropped.
    judge = pl.read_parquet(out / "judge.parquet")
    assert judge.height == 51 * 2 and set(judge["status"].unique()) <= {"ok", "failed", "skipped"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["results_format"] == 1 and summary["inputs"]["golden"]["sha256"]
    assert summary["settings"]["judge"]["model"] == "gpt-4o-mini"
    html = (out / "report.html").read_text()
    assert "<html" in html.lower() and (out / "report.md").exists() and (out / "sweep.parquet").exists()
    for path in out.iterdir():
        assert api_key.encode() not in path.read_bytes(), path
    assert api_key not in proc.stdout + proc.stderr


def test_eval_without_endpoint_scores_retrieval_and_says_so(tmp_path):
    proc = eval_cli("--out", str(tmp_path / "ev"))
    assert proc.returncode == 0, proc.stderr
    assert "not judged" in proc.stdout
    cases = pl.read_parquet(tmp_path / "ev" / "cases.parquet")
    assert "correctness_score" not in cases.columns
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "report", str(tmp_path / "ev")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_eval_judges_against_the_runs_contexts_not_only_the_retrieved_chunks(tmp_path, server, api_key):
    from ragmeter.evaluation import run_eval
    from ragmeter.judge import JudgeConfig

    golden = [{"id": "fact-1", "question": "What is the cap?", "expectedFileNames": ["a.md"],
               "expectedEvidence": ["cap is 600"], "referenceAnswer": "600"}]
    run = [{"id": "fact-1", "answer": "The cap is 600.",
            "retrieved": [{"file": "a.md", "chunk_id": "a#1", "text": "the cap is 600 per night", "score": 0.9}],
            "contexts": ["EXPANDED: the cap is 600 per night, and 800 in Shanghai"]}]
    cfg = JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["faithfulness"], cache=None, progress=False)
    run_eval(golden, run, tmp_path / "ev", judge=cfg, reports=False)
    sent = json.dumps([r["payload"] for r in server.log], ensure_ascii=False)
    assert "EXPANDED: the cap is 600" in sent


def test_eval_passes_the_runs_cost_to_the_judge_accounting(tmp_path, server, api_key):
    out = tmp_path / "ev"
    proc = eval_cli("--metrics", "correctness", "--no-cache", "--price", "0.15,0.6", "--out", str(out), server=server)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    run_cost = sum(json.loads(line).get("cost") or 0 for line in (EX / "run.jsonl").read_text().splitlines() if line.strip())
    assert summary["judge"]["system_cost_usd"] == pytest.approx(run_cost, abs=1e-6) and run_cost > 0
    cost = summary["cost"]
    assert cost["system_cost_usd"] == pytest.approx(run_cost, abs=1e-6)
    assert cost["judge_cost_usd"] == summary["judge"]["judge_cost_usd"] and cost["judge_cost_usd"] > 0
    total = cost["system_cost_usd"] + cost["judge_cost_usd"]
    assert cost["judge_cost_share"] == pytest.approx(cost["judge_cost_usd"] / total, abs=1e-4)
    assert summary["judge"]["judge_cost_share"] == pytest.approx(cost["judge_cost_share"], abs=1e-4)
    # ... and the console ends with the same split (system vs judge and the judge's share)
    flat = " ".join(proc.stdout.split())
    assert (f"cost: system ${cost['system_cost_usd']:.4f} (50/51 cases report one), judge "
            f"${cost['judge_cost_usd']:.4f}" in flat and f"judge share {100 * cost['judge_cost_share']:.1f}%" in flat)
    # the case missing from the run is not judged as if it had an empty answer
    judge = pl.read_parquet(out / "judge.parquet")
    missing = judge.filter(pl.col("id") == "crossdoc-06-formats-today")
    assert missing["status"].to_list() == ["skipped"] and missing["error_kind"].to_list() == ["missing_run"]


def test_unjudged_eval_after_a_judged_one_leaves_no_judge_results(tmp_path, server, api_key):
    out = tmp_path / "ev"
    (tmp_path / "ev").mkdir()
    (out / "notes.txt").write_text("keep me")
    proc = eval_cli("--metrics", "correctness,faithfulness", "--no-cache", "--price", "0.15,0.6",
                    "--thresholds", "0,0.2", "--out", str(out), server=server)
    assert proc.returncode == 0, proc.stderr
    first = pl.read_parquet(out / "cases.parquet")
    assert {"judge.parquet", "sweep.parquet"} <= {p.name for p in out.iterdir()}
    assert "correctness_score" in first.columns and set(first["diagnosis"]) & {"OK", "PROMPT_OR_MODEL"}
    assert "judge cost (USD)" in (out / "report.html").read_text()

    proc = eval_cli("--out", str(out))
    assert proc.returncode == 0, proc.stderr
    names = {p.name for p in out.iterdir()}
    assert "judge.parquet" not in names and "sweep.parquet" not in names and "notes.txt" in names
    assert (out / "notes.txt").read_text() == "keep me"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["judge"] is None and set(summary["files"]) == names - {"notes.txt"}
    html = (out / "report.html").read_text()
    assert "judge cost (USD)</td><td class=\"num\">not judged" in html and "judge rows by status" not in html
    assert 'id="sweep"' not in html
    assert "OK" not in set(pl.read_parquet(out / "cases.parquet")["diagnosis"])


def test_json_puts_the_summary_alone_on_stdout_for_eval_judge_and_their_dry_runs(tmp_path, server, api_key):
    out = tmp_path / "ev"
    proc = eval_cli("--metrics", "correctness", "--no-cache", "--out", str(out), "--json", server=server)
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)  # the whole of stdout is one JSON document
    assert printed.pop("reports")["html"].endswith("report.html")  # where they went; not in summary.json itself
    assert printed == json.loads((out / "summary.json").read_text())
    assert printed["judge"]["metrics"]["correctness"]["n_total"] == 51
    estimate = json.loads(eval_cli("--metrics", "correctness", "--no-cache", "--dry-run", "--json",
                                   server=server).stdout)
    assert estimate["calls"] == 50 and estimate["n_cases"] == 51  # the case missing from the run sends nothing
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "judge", "--golden", str(EX / "golden.jsonl"),
                           "--run", str(EX / "run.jsonl"), "--base-url", server.base_url, "--model", "gpt-4o-mini",
                           "--metrics", "correctness", "--no-cache", "--no-progress", "--json",
                           "--out", str(tmp_path / "j")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert json.loads(proc.stdout) == json.loads((tmp_path / "j" / "judge_summary.json").read_text())
