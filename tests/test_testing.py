"""ragmeter.testing assertions and the pytest plugin (--ragmeter-baseline, ragmeter_baseline)."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import ragmeter
from ragmeter.errors import InputError
from ragmeter.testing import assert_no_regression, assert_scores, score_table

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "python" / "ragmeter" / "_example"


@pytest.fixture(scope="module")
def example():
    return ragmeter.evaluate(EX / "golden.jsonl", EX / "run.jsonl")


@pytest.fixture(scope="module")
def worse():
    run = [json.loads(line) for line in (EX / "run.jsonl").read_text(encoding="utf-8").splitlines()
           if line.strip() and not line.startswith("#")]
    for rec in run[:8]:
        rec["retrieved"] = []
    return ragmeter.evaluate(EX / "golden.jsonl", run)


def test_assert_scores_passes_and_fails_with_the_table(example):
    assert_scores(example, {"hit": ">=0.8", "mrr": ">= 60%", "ndcg": 0.5})
    with pytest.raises(AssertionError) as err:
        assert_scores(example, {"hit": ">0.8", "mrr": ">=0.5"})
    text = str(err.value)
    assert "1 of 2 score rules failed (hit)" in text
    assert "metric" in text and "scored" in text and "45/51" in text
    assert [line.split()[-1] for line in text.splitlines()[3:]] == ["FAILED", "ok"]


def test_an_unmeasured_metric_fails_never_passes(example):
    with pytest.raises(AssertionError, match=r"faithfulness\s+n/a\s+0/51\s+>=0.8\s+FAILED \(no case scored\)"):
        assert_scores(example, {"faithfulness": ">=0.8"})


def test_correct_without_a_judge_is_not_measured(example):
    # refusal detection on the 6 no-answer cases is 0.8333: the stand-in would pass this rule
    with pytest.raises(AssertionError) as err:
        assert_scores(example, {"correct": ">=0.75", "hit": ">=0.8"})
    text = str(err.value)
    assert "1 of 2 score rules failed (correct)" in text
    assert re.search(r"correct\s+n/a\s+0/6\s+>=0.75\s+FAILED \(not measured: answers not judged\)", text), text
    assert "correct: not measured" in text and "refusal detection on the no-answer cases" in text
    # judged answers are measured as before
    judged = dataclasses.replace(example, cases=example.cases.with_columns(
        pl.lit(True).alias("correct"), pl.lit(True).alias("answer_correct")))
    assert_scores(judged, {"correct": ">=0.75"})


def test_bad_rules_and_unknown_metrics_are_named(example):
    with pytest.raises(ValueError, match="unknown metric 'hitt'"):
        assert_scores(example, {"hitt": ">=0.8"})
    with pytest.raises(ValueError, match="hit: rule 'at least 0.8'"):
        assert_scores(example, {"hit": "at least 0.8"})


def test_no_rule_is_a_usage_error_never_a_pass(example):
    # nothing asked is nothing measured: an empty rule set (a dict built from an empty config) must not pass
    for rules in ({}, [], None):
        with pytest.raises(InputError, match="assert_scores: rules must be a mapping of metric to rule"):
            assert_scores(example, rules)
    for gate in (None, "", "  "):
        with pytest.raises(InputError, match="gate"):
            assert_no_regression(example, example, gate=gate)


def test_score_table_counts_scored_of_total(example):
    table = {name: (value, n, total) for name, value, n, total in score_table(example)}
    assert table["hit"] == (pytest.approx(0.8), 45, 51)
    assert table["all_files_hit"][1:] == (13, 13)  # the multi-file cases, as summary.json counts them


def test_assert_no_regression(example, worse, tmp_path):
    comp = assert_no_regression(example, example, gate="hit>=-2pp,regressions<=0")
    assert comp.passed and comp.n_paired == 51
    folder = example.write(tmp_path / "base", reports=False)
    with pytest.raises(AssertionError) as err:
        assert_no_regression(worse, folder, gate="hit>=-2pp,mrr>=-50pp")
    text = str(err.value)
    assert "1 of 2 gate rules failed against the baseline" in text
    assert "FAILED: `hit>=-2pp`: delta" in text
    assert "Hit@k (chunk)          80.0%     62.2%      -17.8pp *" in text and "45/51" in text


def _plugin_installed() -> bool:
    from importlib.metadata import entry_points

    return any(ep.name == "ragmeter" for ep in entry_points(group="pytest11"))


def _pytest(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    # An installed ragmeter loads the plugin through its pytest11 entry point; from a bare source tree, -p
    # loads it the same way (both at once would register it twice).
    load = [] if _plugin_installed() else ["-p", "ragmeter.pytest_plugin"]
    return subprocess.run([sys.executable, "-m", "pytest", *load, "-q", "-rs", "-p", "no:cacheprovider", *args],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def test_the_documented_example_test_runs_with_the_plugin(example, tmp_path):
    baseline = example.write(tmp_path / "baseline", reports=False)
    test_file = ROOT / "examples" / "pytest" / "test_rag_quality.py"
    proc = _pytest(str(test_file), "--ragmeter-baseline", str(baseline), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout
    # without a baseline the fixture's test is skipped, and says how to give one
    proc = _pytest(str(test_file), cwd=tmp_path)
    assert proc.returncode == 0 and "1 passed, 1 skipped" in proc.stdout
    assert "pass --ragmeter-baseline DIR" in proc.stdout
    # a folder that is not a results folder: a usage error naming it
    proc = _pytest(str(test_file), "--ragmeter-baseline", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert proc.returncode != 0 and "results directory not found" in proc.stdout + proc.stderr
    assert "--ragmeter-baseline: " in proc.stdout and "pytest_plugin.py" not in proc.stdout, proc.stdout  # no traceback


def test_a_regression_fails_the_test_run_with_the_table(worse, tmp_path):
    baseline = ragmeter.evaluate(EX / "golden.jsonl", EX / "run.jsonl").write(tmp_path / "baseline", reports=False)
    test_file = tmp_path / "test_regressed.py"
    test_file.write_text(
        "import json, ragmeter\n"
        "from ragmeter.testing import assert_no_regression\n"
        f"EX = {str(EX)!r}\n"
        "def test_candidate(ragmeter_baseline):\n"
        "    run = [json.loads(l) for l in open(EX + '/run.jsonl', encoding='utf-8') if l.strip() and l[0] != '#']\n"
        "    for rec in run[:8]:\n"
        "        rec['retrieved'] = []\n"
        "    result = ragmeter.evaluate(EX + '/golden.jsonl', run)\n"
        "    assert_no_regression(result, ragmeter_baseline, gate='hit>=-2pp')\n")
    proc = _pytest(str(test_file), "--ragmeter-baseline", str(baseline), cwd=tmp_path)
    assert proc.returncode == 1 and "1 failed" in proc.stdout
    assert "FAILED: `hit>=-2pp`" in proc.stdout and "Hit@k (chunk)" in proc.stdout


def test_entry_point_is_declared():
    text = (ROOT / "pyproject.toml").read_text()
    assert '[project.entry-points.pytest11]\nragmeter = "ragmeter.pytest_plugin"' in text
