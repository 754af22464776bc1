"""ragmeter eval end to end: retrieval + judge (against the local fake server) + reports."""
from __future__ import annotations

import json
import subprocess
import sys

import polars as pl
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
