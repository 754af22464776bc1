"""An example RAG quality test with ragmeter (see docs/api.md).

Run it against a stored baseline (a folder written by ``ragmeter eval --out``)::

    ragmeter eval --golden golden.jsonl --run run.jsonl --no-judge --out baseline
    pytest examples/pytest --ragmeter-baseline baseline

It evaluates the bundled example; in a project, point ``evaluate`` at your golden set and your system's run
(and pass ``judge=ragmeter.judge.JudgeConfig(...)`` to gate judge metrics such as faithfulness).
"""
from pathlib import Path

import ragmeter
from ragmeter.testing import assert_no_regression, assert_scores

EXAMPLE = Path(ragmeter.__file__).parent / "_example"


def evaluate_current_system():
    return ragmeter.evaluate(EXAMPLE / "golden.jsonl", EXAMPLE / "run.jsonl", k=5)


def test_retrieval_meets_its_floor():
    assert_scores(evaluate_current_system(), {"hit": ">=70%", "mrr": ">=0.5"})


def test_no_regression_against_the_baseline(ragmeter_baseline):
    assert_no_regression(evaluate_current_system(), ragmeter_baseline, gate="hit>=-2pp,mrr>=-5pp,regressions<=2")
