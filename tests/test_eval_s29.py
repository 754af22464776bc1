"""Session 29: `ragmeter eval` as a team reads it (diagnosis, aggregates, reruns); each test was seen failing first."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import polars as pl
import pytest

import ragmeter
from ragmeter.api import EvalResult

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "judge"))
from fakeserver import FakeServer  # noqa: E402

KEY = "sk-test-eval-s29-0123456789"


def _chunk(file: str, text: str, score: float = 0.9) -> Dict[str, Any]:
    return {"file": file, "chunk_id": f"{file}#1", "text": text, "score": score}


def _golden() -> List[Dict[str, Any]]:
    return [
        {"id": "hit", "question": "What is the hotel cap?", "expectedFileNames": ["a.md"],
         "expectedEvidence": ["cap is 600"], "referenceAnswer": "600", "category": "fact"},
        {"id": "miss", "question": "What is the taxi limit?", "expectedFileNames": ["b.md"],
         "expectedEvidence": ["taxi limit is 80"], "referenceAnswer": "80", "category": "fact"},
        {"id": "also-hit", "question": "What is the meal cap?", "expectedFileNames": ["c.md"],
         "expectedEvidence": ["meal cap is 120"], "referenceAnswer": "120", "category": "policy"},
    ]


def _retrieval_only_run() -> List[Dict[str, Any]]:
    """A run file of the retriever alone: no record has an answer."""
    return [
        {"id": "hit", "retrieved": [_chunk("a.md", "the hotel cap is 600 per night")]},
        {"id": "miss", "retrieved": [_chunk("x.md", "unrelated")]},
        {"id": "also-hit", "retrieved": [_chunk("c.md", "the meal cap is 120 a day")]},
    ]


# -- a run that records no answer: the answers were not measured, no generation failed


def test_a_run_that_records_no_answer_is_not_measured_never_a_generation_failure():
    cases = ragmeter.evaluate(_golden(), _retrieval_only_run()).cases
    got = dict(zip(cases["id"], cases["diagnosis"]))
    assert got == {"hit": "NOT_JUDGED", "miss": "RETRIEVAL_MISS", "also-hit": "NOT_JUDGED"}
    # once the run records an answer (even a blank one), a case without one is the generator's failure
    run = _retrieval_only_run()
    run[0]["answer"] = "The cap is 600."
    cases = ragmeter.evaluate(_golden(), run).cases
    assert dict(zip(cases["id"], cases["diagnosis"]))["also-hit"] == "GENERATION_FAILED"


def test_the_report_of_a_run_without_answers_says_they_were_not_measured(tmp_path):
    ragmeter.evaluate(_golden(), _retrieval_only_run()).write(tmp_path / "ev")
    md = (tmp_path / "ev" / "report.md").read_text(encoding="utf-8")
    assert "GENERATION\\_FAILED" not in md
    assert "| Refusal rate (answerable questions) | not measured: no answers in this folder | n/a | 0/3 |" in md


def test_an_eval_results_reports_in_memory_are_the_reports_written(tmp_path):
    """EvalResult.report_markdown() aggregated every column, so a folder without answers (`ragmeter score
    --out`) got the empty 'n/a (0/2)' refusal rows beside the 'not measured' ones the written report.md shows."""
    from ragmeter.cli import main

    golden, run = tmp_path / "golden.jsonl", tmp_path / "run.jsonl"
    golden.write_text("".join(json.dumps(g) + "\n" for g in _golden()), encoding="utf-8")
    run.write_text("".join(json.dumps(r) + "\n" for r in _retrieval_only_run()), encoding="utf-8")
    assert main(["score", "--golden", str(golden), "--run", str(run), "--out", str(tmp_path / "s")]) == 0
    assert main(["report", str(tmp_path / "s")]) == 0
    written = (tmp_path / "s" / "report.md").read_text(encoding="utf-8")
    in_memory = EvalResult.load(tmp_path / "s").report_markdown()
    assert "No-answer cases refused" not in in_memory
    assert in_memory.count("Refusal rate (answerable questions)") == written.count("Refusal rate") == 1


# -- summary.json's two judge cost shares agree


def _judged_summary(monkeypatch: pytest.MonkeyPatch, run: List[Dict[str, Any]], **config: Any) -> Dict[str, Any]:
    from ragmeter.judge import JudgeConfig

    monkeypatch.setenv("RAGMETER_API_KEY", KEY)
    with FakeServer(api_key=KEY) as server:
        cfg = JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", cache=None, metrics=["correctness"],
                          progress=False, **config)
        return ragmeter.evaluate(_golden(), run, judge=cfg).summary


@pytest.mark.parametrize("run_cost, prices, share_known", [
    (None, None, False),     # the run reports no cost: the share of an unknown total is unknown (it said 1.0)
    (0.01, None, True),
    (0.01, {"gpt-4o-mini": {"input": 0, "output": 0}}, True),  # a free judge: a 0% share (it said null)
])
def test_the_judge_sections_cost_share_is_the_cost_sections(monkeypatch, run_cost, prices, share_known):
    run = [dict(r, answer="It is 600.", **({} if run_cost is None else {"cost": run_cost}))
           for r in _retrieval_only_run()]
    summary = _judged_summary(monkeypatch, run, prices=prices)
    share = summary["cost"]["judge_cost_share"]
    assert (share is not None) == share_known
    assert summary["judge"]["judge_cost_share"] == pytest.approx(share, abs=1e-4)


# -- compare: a judged run against a rerun without a judge


def _answered_run() -> List[Dict[str, Any]]:
    answers = {"hit": "The cap is 600.", "miss": "It is 50.", "also-hit": "The meal cap is 300."}
    return [dict(r, answer=answers[r["id"]]) for r in _retrieval_only_run()]


def test_comparing_a_judged_run_with_an_unjudged_rerun_says_which_run_was_not_judged(monkeypatch):
    """The note said 'correct: not judged in both runs' (the baseline was), the warning guessed 'a failed or
    skipped judge call, a missing answer?', and correctness and faithfulness, judged in the baseline only, left
    the tables unnamed."""
    from ragmeter.judge import JudgeConfig

    monkeypatch.setenv("RAGMETER_API_KEY", KEY)
    with FakeServer(api_key=KEY) as server:
        cfg = JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", cache=None,
                          metrics=["correctness", "faithfulness"], progress=False)
        judged = ragmeter.evaluate(_golden(), _answered_run(), judge=cfg)
    rerun = ragmeter.evaluate(_golden(), _answered_run())
    comparison = rerun.compare(judged)
    said = " ".join(comparison.notes + comparison.warnings)
    assert "not judged in both runs" not in said and "a missing answer?" not in said, said
    assert "correct: 3 case(s) scored in the baseline only (also-hit, hit, miss) (not judged in the candidate)" \
        in said, said
    assert "correctness, faithfulness: judged in the baseline only, not in the candidate: not compared" in said, said
    assert "correct: not judged in the candidate;" in said, said


# -- terminal: 80 columns with CJK text


def test_a_judge_failure_example_in_cjk_is_cut_to_the_terminals_columns():
    """A Chinese endpoint's error message was cut at 80 characters, not columns: a 97-column line in `ragmeter
    judge`, and `eval`'s console broke it at column 0."""
    from ragmeter._text import columns
    from ragmeter.cli.judge import judge_lines

    example = "chat failed: HTTP 400, request rejected: 请求参数错误：输入内容包含不安全的文本，请修改后重试。错误代码"
    summary = {"metrics": {"correctness": {"mean": None, "n_scored": 0, "n_total": 1, "n_failed": 1, "n_skipped": 0,
                                           "failures": {"client": {"count": 1, "example": example}}}}}
    lines = judge_lines(summary)
    assert max(columns(line) for line in lines) <= 80, lines
    # the example wraps under its line by columns (a CJK character takes two), whole as it fits in three lines
    failed = lines[lines.index(next(line for line in lines if line.startswith("    failed 1 client: "))):]
    assert failed[0].startswith("    failed 1 client: chat failed: HTTP 400, request rejected:"), failed
    assert all(line.startswith("      ") for line in failed[1:]) and len(failed) <= 3, failed
    assert "".join(line.strip() for line in failed).endswith("请修改后重试。错误代码"), failed


def test_a_case_scored_on_one_side_because_the_other_sides_judge_call_failed_says_so(monkeypatch):
    """compare knew the candidate's correctness call had failed (its status), and guessed: '(a failed or skipped
    judge call, a missing answer?)'."""
    from ragmeter.judge import JudgeConfig

    monkeypatch.setenv("RAGMETER_API_KEY", KEY)
    with FakeServer(api_key=KEY) as server:
        cfg = JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", cache=None, metrics=["correctness"],
                          progress=False)
        baseline = ragmeter.evaluate(_golden(), _answered_run(), judge=cfg)
        server.rules = [(lambda info: "taxi" in json.dumps(info.get("payload")), 400)]  # the case "miss" fails
        candidate = ragmeter.evaluate(_golden(), _answered_run(), judge=cfg)
    assert dict(zip(candidate.cases["id"], candidate.cases["correctness_status"]))["miss"] == "failed"
    said = " ".join(candidate.compare(baseline).warnings)
    assert "correct: 1 case(s) scored in the baseline only (miss) (its judge call failed in the candidate)" in said, said
    assert "a missing answer?" not in said, said


# -- a golden set and run whose every cause is known, through the CLI (a guard: these held)


def _known_causes(tmp_path: Path) -> Any:
    golden = _golden() + [
        {"id": "judge-fails", "question": "Which train class?", "expectedFileNames": ["d.md"],
         "expectedEvidence": ["second class"], "referenceAnswer": "second", "category": "policy"},
        {"id": "no-answer", "question": "What is the boat cap?", "expectedFileNames": ["e.md"],
         "expectedEvidence": ["boat cap is 50"], "referenceAnswer": "50", "category": "policy"},
        {"id": "absent", "question": "What is the bike cap?", "expectedFileNames": ["f.md"],
         "expectedEvidence": ["bike cap is 20"], "referenceAnswer": "20", "category": "policy"},
        {"id": "system-error", "question": "What is the car cap?", "expectedFileNames": ["g.md"],
         "expectedEvidence": ["car cap is 70"], "referenceAnswer": "70", "category": "policy"},
    ]
    run = _answered_run() + [
        {"id": "judge-fails", "answer": "JUDGE-FAILS: second class.", "retrieved": [_chunk("d.md", "in second class")]},
        {"id": "no-answer", "answer": "", "retrieved": [_chunk("e.md", "the boat cap is 50")]},
        {"id": "system-error", "error": "HTTP 500", "answer": None, "retrieved": []},
    ]
    g, r = tmp_path / "golden.jsonl", tmp_path / "run.jsonl"
    g.write_text("".join(json.dumps(x) + "\n" for x in golden), encoding="utf-8")
    r.write_text("".join(json.dumps(x) + "\n" for x in run), encoding="utf-8")
    return g, r


KNOWN = {"hit": "OK", "miss": "RETRIEVAL_MISS", "also-hit": "PROMPT_OR_MODEL", "judge-fails": "JUDGE_FAILED",
         "no-answer": "GENERATION_FAILED", "absent": "NOT_IN_RUN", "system-error": "SYSTEM_FAILED"}


def test_every_cause_of_a_known_set_and_every_count_agree_from_terminal_to_cases(tmp_path, monkeypatch):
    import os

    from ragmeter._text import columns

    golden, run = _known_causes(tmp_path)
    monkeypatch.setenv("RAGMETER_API_KEY", KEY)
    out = tmp_path / "ev"
    with FakeServer(api_key=KEY) as server:
        server.rules = [(lambda info: "JUDGE-FAILS" in json.dumps(info.get("payload")), 400)]
        proc = subprocess.run(
            [sys.executable, "-m", "ragmeter", "eval", "--golden", str(golden), "--run", str(run), "--base-url",
             server.base_url, "--model", "gpt-4o-mini", "--no-cache", "--no-progress", "--metrics", "correctness",
             "--out", str(out)], capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"}, timeout=300)
    assert proc.returncode == 3, proc.stderr  # a case failed when collected, and a judge row failed
    assert max(columns(line) for line in proc.stdout.splitlines()) <= 80
    cases = pl.read_parquet(out / "cases.parquet")
    assert dict(zip(cases["id"], cases["diagnosis"])) == KNOWN
    md = (out / "report.md").read_text(encoding="utf-8")
    html = (out / "report.html").read_text(encoding="utf-8")
    for cause in KNOWN.values():
        assert f"| {cause.replace('_', chr(92) + '_')} | 1 | 14.3% |" in md, cause
        assert f"<td>{cause}</td><td class=\"num\">1</td>" in html.replace(" class=\"l\"", ""), cause
    # correctness: scored 3 (hit, miss, also-hit) of 7; the same n in the terminal, report.md and summary.json
    judged = json.loads((out / "summary.json").read_text(encoding="utf-8"))["judge"]["metrics"]["correctness"]
    assert (judged["n_scored"], judged["n_total"], judged["n_failed"]) == (3, 7, 1)
    assert "scored 3/7  failed 1  skipped 3" in proc.stdout
    assert "| Correctness score | 3.000 | n/a | 3/7 |" in md
    assert int((cases["correctness_status"] == "ok").sum()) == 3


def test_a_run_without_retrieval_modes_is_not_read_as_cases_missing(tmp_path):
    """The terminal said 'retrieval modes: (missing): 3' for a run that records no retrieval_mode, next to the
    warning about cases missing from the run; report.html and compare call them '(none)'."""
    g, r = tmp_path / "golden.jsonl", tmp_path / "run.jsonl"
    g.write_text("".join(json.dumps(x) + "\n" for x in _golden()), encoding="utf-8")
    r.write_text("".join(json.dumps(x) + "\n" for x in _answered_run()), encoding="utf-8")
    out = tmp_path / "ev"
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "eval", "--golden", str(g), "--run", str(r), "--out",
                           str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "retrieval modes: (none): 3" in proc.stdout and "(missing)" not in proc.stdout, proc.stdout
    assert "<td>(none)</td>" in (out / "report.html").read_text(encoding="utf-8").replace(' class="l"', "")
