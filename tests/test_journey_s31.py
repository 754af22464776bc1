"""A new team's first week with ragmeter (session 31), from collecting a run to the CI gate: the steps that went
wrong, each run as the team ran it. The golden set is the spreadsheet of test_journey_s30 after the README's
conversion script: a fact case, a multihop case and a no-answer case (no files, no evidence)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

GOLDEN = [
    {"id": "fact-01", "question": "Which database is primary, and which version?", "expectedFileNames": ["handbook.md"],
     "expectedEvidence": ["PostgreSQL 15"], "referenceAnswer": "PostgreSQL 15, with read replicas",
     "category": "Fact", "source": "wiki"},
    {"id": "multi-01", "question": "Which DB version and which CI?", "expectedFileNames": ["handbook.md", "ops.md"],
     "expectedEvidence": ["PostgreSQL 15", "GitHub Actions"], "referenceAnswer": "PostgreSQL 15; GitHub Actions",
     "category": "multihop"},
    {"id": "none-01", "question": "What is the CEO's salary?", "expectedFileNames": [], "expectedEvidence": [],
     "category": "noanswer", "source": "wiki"},
]
CHUNK = {"file": "handbook.md", "chunk_id": "h1", "text": "The primary database is PostgreSQL 15.", "score": 0.5}

# the team's system as a Python callable: it finds nothing for the multihop question nor for the no-answer one
RAG_MODULE = '''
def ask(case):
    if case["id"] == "fact-01":
        return {"answer": "PostgreSQL 15.", "retrieved": [%r], "retrieval_mode": "hybrid"}
    return {"answer": "I don't know.", "retrieved": [], "retrieval_mode": "hybrid"}
''' % (CHUNK,)


def _ragmeter(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-m", "ragmeter", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture()
def team(tmp_path: Path) -> Path:
    (tmp_path / "golden.jsonl").write_text("".join(json.dumps(c) + "\n" for c in GOLDEN), encoding="utf-8")
    (tmp_path / "myrag.py").write_text(RAG_MODULE, encoding="utf-8")
    run = [{"id": "fact-01", "retrieved": [CHUNK], "answer": "PostgreSQL 15."},
           {"id": "multi-01", "retrieved": [CHUNK, dict(CHUNK, file="ops.md", chunk_id="o1", score=0.2,
                                                        text="CI runs on GitHub Actions.")], "answer": "PG 15, GHA"},
           {"id": "none-01", "retrieved": [], "answer": "I don't know."}]
    (tmp_path / "run.jsonl").write_text("".join(json.dumps(r) + "\n" for r in run), encoding="utf-8")
    return tmp_path


def test_collect_does_not_call_the_empty_retrieval_of_a_case_without_labels_a_miss(team: Path) -> None:
    # it said '2 empty retrievals (retrieved: [], scored as misses)': the no-answer case has no expected file nor
    # evidence, so score leaves it out (n 2/3) and its empty retrieval is what a good system does
    done = _ragmeter("collect", "--golden", "golden.jsonl", "--target", "myrag:ask", "--out", "run2.jsonl",
                     "--no-cache", cwd=team)
    assert done.returncode == 0, done.stderr
    said = _one_line(done.stdout)
    assert "2 empty retrievals (retrieved: []): 1 of a labelled case, scored as a miss; 1 of a case without " \
           "expected files or evidence, not scored for retrieval" in said, said
    import ragmeter

    result = ragmeter.collect(team / "golden.jsonl", target=lambda case: {"answer": "a", "retrieved": []})
    assert result.summary["n_empty_retrievals"] == 3
    assert result.summary["n_empty_retrievals_unlabelled"] == 1


def test_sweep_out_says_where_it_wrote(team: Path) -> None:
    # the table was printed and the file written without a word on it: every other command ends 'wrote ...'
    done = _ragmeter("sweep", "--golden", "golden.jsonl", "--run", "run.jsonl", "--thresholds", "0,0.3",
                     "--out", "sweep.csv", cwd=team)
    assert done.returncode == 0, done.stderr
    assert (team / "sweep.csv").exists()
    assert done.stdout.rstrip().splitlines()[-1] == "wrote sweep.csv", done.stdout
    # with --json stdout holds the rows alone: the line goes to stderr
    done = _ragmeter("sweep", "--golden", "golden.jsonl", "--run", "run.jsonl", "--thresholds", "0,0.3",
                     "--out", "sweep.parquet", "--json", cwd=team)
    assert done.returncode == 0, done.stderr
    json.loads(done.stdout)
    assert "wrote sweep.parquet" in done.stderr, done.stderr


def test_compare_out_and_json_files_say_where_they_were_written(team: Path) -> None:
    for folder in ("base", "cand"):
        assert _ragmeter("score", "--golden", "golden.jsonl", "--run", "run.jsonl", "--out", folder,
                         cwd=team).returncode == 0
    done = _ragmeter("compare", "base", "cand", "--out", "cmp.md", "--json", "cmp.json", cwd=team)
    assert done.returncode == 0, done.stderr
    assert (team / "cmp.md").exists() and (team / "cmp.json").exists()
    assert done.stdout.rstrip().splitlines()[-1] == "wrote cmp.md, cmp.json", done.stdout


def test_the_readme_says_where_the_judge_reads_its_api_key() -> None:
    # a team reading README.md to run 'ragmeter eval --base-url ... --model ...' found no word of the key:
    # only docs/api.md's code comment and docs/calibration.md named RAGMETER_API_KEY
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    judge_options = re.search(r"^### Judge options\n(.*?)(?=^### )", readme, re.M | re.S)
    assert judge_options, "README.md has no section 'Judge options'"
    text = judge_options.group(1)
    assert "RAGMETER_API_KEY" in text and "OPENAI_API_KEY" in text


def test_eval_puts_the_refusal_rule_note_under_the_correct_rate_not_under_the_last_metric(team: Path) -> None:
    # with every metric judged the note came after context_recall's lines, indented as one of them: it read as
    # a remark on context_recall, not on the correct rate two metrics above
    sys.path.insert(0, str(ROOT / "tests" / "judge"))
    from fakeserver import FakeServer

    key = "sk-test-journey-s31-0123456789"
    env = {**os.environ, "RAGMETER_API_KEY": key, "COLUMNS": "80",
           "PYTHONPATH": str(ROOT / "python") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with FakeServer(api_key=key) as server:
        done = subprocess.run([sys.executable, "-m", "ragmeter", "eval", "--golden", "golden.jsonl", "--run",
                               "run.jsonl", "--base-url", server.base_url, "--model", "gpt-4o-mini", "--no-cache",
                               "--no-progress", "--out", "ev"], capture_output=True, text=True, cwd=team, env=env,
                              timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    correct = next(i for i, line in enumerate(lines) if line.startswith("    correct "))
    note = next(i for i, line in enumerate(lines) if "the reports' Correct also counts" in line)
    metrics_between = [line for line in lines[correct:note] if re.match(r"  [a-z_]+ +mean ", line)]
    assert not metrics_between and note == correct + 1, "\n".join(lines[correct:note + 1])


def test_compare_says_the_judge_skipped_a_case_in_the_candidate_instead_of_guessing(team: Path) -> None:
    # the candidate retrieved nothing for multi-01, so the judge skipped its context_precision (no contexts);
    # compare's warning guessed '(a failed or skipped judge call, a missing answer?)' though cases.parquet's
    # context_precision_status says 'skipped'
    sys.path.insert(0, str(ROOT / "tests" / "judge"))
    from fakeserver import FakeServer

    rows = [json.loads(line) for line in (team / "run.jsonl").read_text(encoding="utf-8").splitlines()]
    rows[1]["retrieved"] = []
    (team / "worse.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    key = "sk-test-journey-s31-0123456789"
    env = {**os.environ, "RAGMETER_API_KEY": key,
           "PYTHONPATH": str(ROOT / "python") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with FakeServer(api_key=key) as server:
        for run, out in (("run.jsonl", "base"), ("worse.jsonl", "cand")):
            done = subprocess.run([sys.executable, "-m", "ragmeter", "eval", "--golden", "golden.jsonl", "--run", run,
                                   "--base-url", server.base_url, "--model", "gpt-4o-mini", "--no-cache",
                                   "--no-progress", "--metrics", "context_precision", "--out", out],
                                  capture_output=True, text=True, cwd=team, env=env, timeout=300)
            assert done.returncode == 0, done.stdout + done.stderr
    done = _ragmeter("compare", "base", "cand", cwd=team)
    said = _one_line(done.stderr)
    assert "context_precision: 1 case(s) scored in the baseline only (multi-01) (the judge skipped it in the " \
           "candidate: an input it needs was missing, or --budget)" in said, said
    assert "a missing answer?" not in said
    # the gate's failure points to that reason instead of guessing one of its own
    gated = _ragmeter("compare", "base", "cand", "--gate", "context_precision>=-5pp", cwd=team)
    assert gated.returncode == 1
    assert "not measured on every case: context_precision: 1 case(s) scored in the baseline only (the " \
           "comparison's warnings say why)" in _one_line(gated.stdout + gated.stderr), gated.stdout + gated.stderr
    assert "judge call?" not in gated.stdout + gated.stderr


def test_report_md_counts_one_kind_of_warning_in_the_singular(team: Path) -> None:
    # report.md said 'Warnings (1 kinds; full lists in warnings.json)' (report.html: '1 kind(s)')
    assert _ragmeter("score", "--golden", "golden.jsonl", "--run", "run.jsonl", "--out", "s", cwd=team).returncode == 0
    assert _ragmeter("report", "s", cwd=team).returncode == 0
    md = (team / "s" / "report.md").read_text(encoding="utf-8")
    summary = re.search(r"<summary>Warnings \((\d+) (kinds?);", md)
    assert summary, md
    assert summary.group(2) == ("kind" if summary.group(1) == "1" else "kinds"), summary.group(0)


def test_report_md_says_in_words_what_the_refusal_counts_are(tmp_path: Path) -> None:
    """Before: 'Refusals: 12/50 answered cases; no-answer cases refused 5/6, answerable cases refused 7/44.': a
    reader could not tell 12/50 from a rate of something else, nor which refusals are right."""
    assert _ragmeter("demo", "--out", "demo", cwd=tmp_path).returncode == 0
    md = (tmp_path / "demo" / "report.md").read_text(encoding="utf-8")
    (line,) = [line for line in md.splitlines() if line.startswith("Refusals:")]
    assert line == ("Refusals: 12 of 50 answered cases are refusals: 5 of 6 no-answer cases (where refusing is "
                    "right) and 7 of 44 answerable cases."), line


def test_the_terminal_shows_a_skip_reason_whole_and_cuts_only_a_long_one() -> None:
    """Before: 'skipped 3 missing_input: the golden set has no reference_answer for this ca…', the field the
    team had to add cut off; now the example wraps under its line, and only one longer than three lines is cut."""
    from ragmeter.cli.judge import judge_lines

    reason = "the run gives no contexts for this case (no 'contexts', 'retrieved' null or absent)"
    page = "upstream error " + "<div>gateway</div> " * 40
    metric = {"mean": 0.5, "n_scored": 1, "n_total": 5, "n_failed": 1, "n_skipped": 3,
              "skips": {"missing_input": {"count": 3, "example": reason}},
              "failures": {"http_502": {"count": 1, "example": page}}}
    lines = judge_lines({"metrics": {"faithfulness": metric}}, width=80)
    assert all(len(line) <= 80 for line in lines), lines
    assert reason in " ".join(" ".join(lines).split())
    failed = [line for line in lines if "http_502" in line or line.startswith("      <div>")]
    assert len(failed) == 3 and failed[-1].endswith("…"), lines
