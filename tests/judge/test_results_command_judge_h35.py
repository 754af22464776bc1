"""The command that wrote a folder is recorded, not guessed (h35). An eval judged by a model that happens to be
named as the demo's replay (``example-replay``) was told, once damaged, to write the folder again with
``ragmeter demo``: the advice guessed the demo from the judge model's name. judge_summary.json names
``ragmeter judge`` as summary.json names its command."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ragmeter.errors import InputError
from ragmeter.judge import JudgeConfig, run_sync
from ragmeter.report.data import DEMO_JUDGE_MODEL, load_results

from evalcli import EXAMPLES
from test_cli import cli, write_cases
from test_edges import finish


def _eval_judged_by(model, server, out):
    cmd = [sys.executable, "-m", "ragmeter", "eval", "--golden", str(EXAMPLES / "golden.jsonl"),
           "--run", str(EXAMPLES / "run.jsonl"), "--base-url", server.base_url, "--model", model, "--no-progress",
           "--no-cache", "--metrics", "correctness", "--retry-base-delay", "0.01", "--retry-max-delay", "0.05",
           "--out", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ))


def test_an_eval_judged_by_a_model_named_as_the_demos_is_told_to_run_eval(tmp_path, server, api_key):
    out = tmp_path / "ev"
    proc = _eval_judged_by(DEMO_JUDGE_MODEL, server, out)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["judge"]["model"] == DEMO_JUDGE_MODEL
    data = (out / "cases.parquet").read_bytes()
    (out / "cases.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError) as err:
        load_results(out)
    assert str(err.value).endswith("restore it, or write the folder again with `ragmeter eval --out DIR`"), err.value
    report = subprocess.run([sys.executable, "-m", "ragmeter", "report", str(out), "--out", str(tmp_path / "rep")],
                            capture_output=True, text=True, timeout=300)
    assert report.returncode == 2 and "`ragmeter eval --out DIR`" in report.stderr, report.stderr
    assert "ragmeter demo" not in report.stderr, report.stderr
    assert summary["command"] == "eval"


def test_judge_summary_json_names_ragmeter_judge(tmp_path, server, api_key):
    cases = write_cases(tmp_path / "cases.jsonl", 2)
    code, out, err = finish(cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness", "--json",
                                key=api_key))
    assert code == 0, err
    written = json.loads((tmp_path / "out" / "judge_summary.json").read_text(encoding="utf-8"))
    assert written["command"] == "judge" and json.loads(out) == written  # --json prints the file's content


def test_judge_results_written_from_python_name_ragmeter_judge(tmp_path, server, api_key):
    """JudgeResult.write is the library form of ``ragmeter judge --out``; the summary itself (nested under eval's
    ``judge``) stays without the key."""
    cases = [json.loads(line) for line in write_cases(tmp_path / "cases.jsonl", 2).read_text("utf-8").splitlines()]
    result = run_sync(cases, JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                                         cache=None, progress=False))
    result.write(tmp_path / "api")
    written = json.loads((tmp_path / "api" / "judge_summary.json").read_text(encoding="utf-8"))
    assert written["command"] == "judge" and "command" not in result.summary
