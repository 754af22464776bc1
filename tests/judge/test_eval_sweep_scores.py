"""evaluate(..., thresholds=...) on a run without a single chunk score: refused before any judge call is paid for
(as `ragmeter sweep` refuses it); it judged every case, then wrote a sweep whose rows were all the same."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import ragmeter
from ragmeter.errors import InputError
from ragmeter.judge import JudgeConfig

EX = Path(ragmeter.__file__).parent / "_example"


def _run_without_scores(path: Path) -> Path:
    lines = [json.loads(line) for line in (EX / "run.jsonl").read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("#")]
    for rec in lines:
        rec["retrieved"] = [{k: v for k, v in c.items() if k != "score"} for c in rec["retrieved"]]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), encoding="utf-8")
    return path


def test_a_sweep_of_a_run_without_scores_is_refused_before_the_judge_is_paid(server, tmp_path):
    run = _run_without_scores(tmp_path / "run.jsonl")
    judge = JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"], cache=None,
                        progress=False)
    with pytest.raises(InputError, match="no retrieved chunk has a score"):
        ragmeter.evaluate(EX / "golden.jsonl", run, judge=judge, thresholds=[0.0, 0.2])
    assert server.requests == 0
    # without a sweep the same run is judged and scored as before
    result = ragmeter.evaluate(EX / "golden.jsonl", run, judge=judge)
    assert server.requests > 0 and result.sweep is None
