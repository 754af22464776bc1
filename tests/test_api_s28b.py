"""API review of session 28 (second pass): each test asserts the documented behaviour (seen failing first)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from polars.testing import assert_frame_equal

import ragmeter
from ragmeter.api import EvalResult

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "python" / "ragmeter" / "_example"
GOLDEN, RUN = EX / "golden.jsonl", EX / "run.jsonl"
sys.path.insert(0, str(ROOT / "tests" / "judge"))
from fakeserver import FakeServer  # noqa: E402

KEY = "sk-test-api-s28b-0123456789"


# -- 1. write then load gives an equal summary


def _judged(monkeypatch: pytest.MonkeyPatch) -> EvalResult:
    monkeypatch.setenv("RAGMETER_API_KEY", KEY)
    with FakeServer(api_key=KEY) as server:
        cfg = ragmeter.judge.JudgeConfig(base_url=server.base_url, model="m", cache=None, metrics=["correctness"])
        return ragmeter.evaluate(GOLDEN, RUN, judge=cfg)


def test_a_judged_result_written_and_loaded_back_has_an_equal_summary(tmp_path, monkeypatch):
    result = _judged(monkeypatch)
    result.write(tmp_path / "res")
    back = EvalResult.load(tmp_path / "res")
    # settings.judge.metrics was a tuple in memory and a list once read back; the report paths were only in memory
    assert back.summary == result.summary
    assert_frame_equal(back.cases, result.cases)
    assert result.judge is not None and back.judge is not None
    assert_frame_equal(back.judge, result.judge)


def test_a_result_loaded_from_a_folder_with_reports_names_them_as_the_written_one_does(tmp_path):
    written = ragmeter.evaluate(GOLDEN, RUN)
    written.write(tmp_path / "res")
    assert EvalResult.load(tmp_path / "res").summary["reports"] == written.summary["reports"]
    written.write(tmp_path / "bare", reports=False)
    assert "reports" not in EvalResult.load(tmp_path / "bare").summary
