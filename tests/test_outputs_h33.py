"""Results folders that describe themselves (h33): a custom rubric's scale as numbers in summary.json, the
coverage of ``mean_retrieved``, the question in a score-only cases.parquet, and docs/results.md naming every
summary.json key and cases.parquet column a script reads."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ragmeter

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "judge"))
from fakeserver import FakeServer  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from compare_runs import GOLDEN, golden_cases, write_jsonl  # noqa: E402

RUN = golden_cases(GOLDEN.parent / "run.jsonl")
SMALL_GOLDEN = [{"id": f"c{i}", "question": f"What colour is item {i}?", "expected_files": ["kb.md"],
                 "reference_answer": f"Item {i} is blue"} for i in range(1, 5)]
SMALL_RUN = [{"id": f"c{i}", "answer": f"Item {i} is {'blue' if i % 2 else 'red'}.",
              "retrieved": [{"file": "kb.md", "text": f"item {i} is blue", "score": 0.9}]} for i in range(1, 5)]


def ragmeter_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmeter", *args], capture_output=True, text=True, cwd=cwd)


# -- 1. a custom rubric's scale ------------------------------------------------------------------------------
def _rubric_folder(tmp_path: Path) -> Path:
    from ragmeter.judge import JudgeConfig, RubricMetric

    tone = RubricMetric("tone_check", criteria="Is the answer polite?", scale=(1, 5), pass_threshold=4,
                        fields=("question", "answer"))
    with FakeServer() as server:
        res = ragmeter.evaluate(SMALL_GOLDEN, SMALL_RUN, judge=JudgeConfig(
            base_url=server.base_url, model="gpt-4o-mini", cache=None, metrics=[tone]))
    out = tmp_path / "out"
    res.write(out)
    return out


def _edit_tone_entry(folder: Path, edit) -> None:
    path = folder / "summary.json"
    summary = json.loads(path.read_text(encoding="utf-8"))
    edit(summary["judge"]["metrics"]["tone_check"])
    path.write_text(json.dumps(summary), encoding="utf-8")


def _rubric_hints(folder: Path) -> None:
    """assert_scores and the gate read ``tone_check>=4`` on the rubric's 1-5 scale (0.75), each in a fresh
    registry, as a new process would."""
    from ragmeter.api import EvalResult
    from ragmeter.errors import InputError
    from ragmeter.gate import GateError
    from ragmeter.report.data import METRICS
    from ragmeter.testing import assert_no_regression, assert_scores

    METRICS.pop("tone_check", None)
    with pytest.raises(InputError, match=r"did you mean >=0\.75\? \(4 on the rubric's 1-5 scale"):
        assert_scores(EvalResult.load(folder), {"tone_check": ">=4"})
    METRICS.pop("tone_check", None)
    with pytest.raises(GateError, match=r"did you mean tone_check>=0\.75\?"):
        assert_no_regression(EvalResult.load(folder), EvalResult.load(folder), gate="tone_check>=4")
    METRICS.pop("tone_check", None)


def test_summary_gives_a_rubric_scale_as_numbers_and_readers_take_it_over_the_display_text(tmp_path):
    # before, the rubric's scale was only in the display text "0-1 (rubric 1-5)", parsed back by a regex: a
    # script had to parse it too, and the readers lost the scale as soon as the wording changed
    out = _rubric_folder(tmp_path)
    entry = json.loads((out / "summary.json").read_text(encoding="utf-8"))["judge"]["metrics"]["tone_check"]
    assert entry["rubric_scale"] == {"min": 1, "max": 5}
    assert entry["scale"] == "0-1 (rubric 1-5)"  # kept: scripts read it
    # the readers take the numbers: with a display text they cannot parse, the hints still come
    _edit_tone_entry(out, lambda e: e.update(scale="0-1, mapped from the rubric"))
    _rubric_hints(out)


@pytest.mark.parametrize("edit", [lambda e: e.pop("rubric_scale"),  # a folder written before the key
                                  lambda e: e.update(rubric_scale={"min": True, "max": "5"}),  # edited by hand
                                  lambda e: e.update(rubric_scale={"min": 5, "max": 1})])
def test_a_folder_without_a_usable_rubric_scale_is_read_from_its_display_text(tmp_path, edit):
    out = _rubric_folder(tmp_path)
    _edit_tone_entry(out, edit)
    _rubric_hints(out)


def test_judge_summary_gives_the_rubric_scale_and_no_builtin_metric_has_one(tmp_path):
    from ragmeter.judge import JudgeConfig, RubricMetric, run_sync

    tone = RubricMetric("tone_check", criteria="Is the answer polite?", scale=(0, 10), fields=("question", "answer"))
    cases = [{"id": g["id"], "question": g["question"], "answer": r["answer"], "reference_answer": g["reference_answer"],
              "contexts": ["item is blue"]} for g, r in zip(SMALL_GOLDEN, SMALL_RUN)]
    with FakeServer() as server:
        res = run_sync(cases, JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", cache=None,
                                          metrics=["correctness", tone]))
    assert res.summary["metrics"]["tone_check"]["rubric_scale"] == {"min": 0, "max": 10}
    assert "rubric_scale" not in res.summary["metrics"]["correctness"]


# -- 3. mean_retrieved's coverage ----------------------------------------------------------------------------
def _assert_mean_retrieved_counts(group, listed: bool) -> None:
    assert isinstance(group["mean_retrieved"], float) if listed else group["mean_retrieved"] is None
    assert group["mean_retrieved_n_total"] == group["n_cases"]
    assert group["mean_retrieved_n_scored"] == (group["n_cases"] if listed else 0)


@pytest.mark.parametrize("shape", ["lists", "some null", "all null"])
def test_mean_retrieved_says_how_many_cases_it_covers(tmp_path, shape):
    # before, mean_retrieved was the one aggregate without n_scored / n_total: a null (nothing measured) and a
    # mean over every case read alike from the numbers around it
    from ragmeter.batch import combine, partial_sums, reduce_batches, score_batch

    rows = [dict(r, retrieved=None) if shape == "all null" or (shape == "some null" and i % 3 == 0) else r
            for i, r in enumerate(RUN)]
    listed = shape != "all null"
    summaries = [ragmeter.score(GOLDEN, rows).summary,
                 reduce_batches([score_batch(pa.Table.from_pylist(rows[:20]), GOLDEN),
                                 score_batch(pa.Table.from_pylist(rows[20:]), GOLDEN)], GOLDEN)]
    for summary in summaries:
        _assert_mean_retrieved_counts(summary["overall"], listed)
        assert summary["overall"]["mean_retrieved_n_total"] == 51
        for group in summary["by_category"].values():
            _assert_mean_retrieved_counts(group, listed)
    for group in combine([partial_sums(score_batch(pa.Table.from_pylist(rows), GOLDEN))]).values():
        _assert_mean_retrieved_counts(group, listed)


def test_mean_retrieved_counts_of_many_categories_are_written_as_the_others(tmp_path):
    # over EXPANDED_MEMBERS categories, by_category is written column-wise (retrieval._category_members)
    from ragmeter._io import EXPANDED_MEMBERS

    n = EXPANDED_MEMBERS + 5
    golden = [{"id": f"cat{i}-q", "question": f"Where is item {i}?", "expected_evidence": [f"item {i} is here"],
               "reference_answer": "here"} for i in range(n)]
    run = write_jsonl(tmp_path / "run.jsonl", [{"id": f"cat{i}-q", "retrieved": [{"file": "kb.md", "text": f"item {i} is here"}]}
                                               for i in range(n)])
    done = ragmeter_cli("score", "--golden", str(write_jsonl(tmp_path / "g.jsonl", golden)), "--run", str(run),
                        "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    for group in summary["by_category"].values():
        _assert_mean_retrieved_counts(group, True)


# -- 4. the question in a score-only cases.parquet -----------------------------------------------------------
def test_a_score_only_cases_parquet_has_the_question_by_both_paths_with_one_schema(tmp_path):
    # before, `ragmeter score --out` wrote cases.parquet without the question (eval's had it): a failing case
    # was read by joining back to the golden set
    jsonl = write_jsonl(tmp_path / "run.jsonl", RUN)
    parquet = tmp_path / "run.parquet"
    pq.write_table(pa.Table.from_pylist([{k: v for k, v in r.items() if k != "usage"} for r in RUN]), parquet)
    schemas = {}
    questions = {g["id"]: g["question"] for g in golden_cases()}
    for name, run in (("jsonl", jsonl), ("parquet", parquet)):  # loaded whole; streamed (_stream_score)
        out = tmp_path / name
        done = ragmeter_cli("score", "--golden", str(GOLDEN), "--run", str(run), "--out", str(out), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        cases = pl.read_parquet(out / "cases.parquet")
        assert dict(zip(cases["id"], cases["question"])) == questions
        schemas[name] = pq.read_schema(out / "cases.parquet").remove_metadata()
    assert schemas["jsonl"] == schemas["parquet"]
    assert "question" in ragmeter.score(GOLDEN, RUN).cases.columns


def test_eval_cases_parquet_keeps_one_question_column_in_its_place(tmp_path):
    res = ragmeter.evaluate(GOLDEN, RUN)
    columns = res.cases.columns
    assert columns.count("question") == 1
    assert columns.index("question") == columns.index("expected_evidence") + 1
    assert columns.index("reference_answer") == columns.index("question") + 1


# -- 2 and the rest: docs/results.md names what the files hold -----------------------------------------------
def _documented() -> str:
    return (ROOT / "docs" / "results.md").read_text(encoding="utf-8")


def _keys(node, depth: int, prefix: str = ""):
    if not isinstance(node, dict) or depth == 0:
        return
    for key, value in node.items():
        yield key
        yield from _keys(value, depth - 1)


def test_docs_results_names_every_summary_key_and_cases_column_of_score_and_eval(tmp_path):
    text = _documented()
    named = set(re.findall(r"`([^`\s]+)`", text))
    score = ragmeter.score(GOLDEN, RUN)
    evaluated = ragmeter.evaluate(GOLDEN, RUN)
    missing = set()
    for summary in (score.summary, evaluated.summary):
        missing |= {k for k in summary if k not in named}
        missing |= {k for k in _keys(summary.get("retrieval", summary)["overall"], 1) if k not in named}
    missing |= {c for c in (*score.cases.columns, *evaluated.cases.columns) if c not in named}
    missing |= {k for k in ("rubric_scale", "mean_retrieved_n_scored", "mean_retrieved_n_total") if k not in named}
    assert not missing, sorted(missing)


def test_a_golden_set_without_categories_gives_golden_set_null_documented_and_read(tmp_path):
    # golden_set is null when the golden set cannot be audited (ids without a prefix and no category): that was
    # said nowhere a script author would look
    golden = write_jsonl(tmp_path / "g.jsonl", [dict(g, id=f"case{i}") for i, g in enumerate(SMALL_GOLDEN)])
    run = write_jsonl(tmp_path / "r.jsonl", [dict(r, id=f"case{i}") for i, r in enumerate(SMALL_RUN)])
    out = tmp_path / "out"
    done = ragmeter_cli("eval", "--golden", str(golden), "--run", str(run), "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "summary.json").read_text(encoding="utf-8"))["golden_set"] is None
    again = ragmeter_cli("report", str(out), cwd=tmp_path)
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    section = _documented().split("`golden_set`", 1)[1][:600]
    assert "null" in section and "categor" in section


def test_docs_results_names_every_key_and_column_of_the_demo_folder(tmp_path):
    # what a user scripting against `ragmeter demo`'s folder reads: summary.json's sections and the judge's
    # metric entries, the calibration section, and the columns of every table
    out = tmp_path / "demo"
    done = ragmeter_cli("demo", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = _documented()
    named = set(re.findall(r"`([^`\s]+)`", text))
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    keys = set(summary) | set(summary["judge"]) | set(summary["cost"]) | set(summary["settings"])
    keys |= {k for entry in summary["judge"]["metrics"].values() for k in entry}
    keys |= set(summary["golden_set"]) | set(summary["retrieval"]["file_vs_chunk_hit"])
    keys |= set(json.loads((out / "warnings.json").read_text(encoding="utf-8")))
    keys |= set(summary["calibration"]) | set(summary["calibration"]["kappa"])
    for table in ("cases", "chunks", "judge", "sweep", "review"):
        keys |= set(pq.read_schema(out / f"{table}.parquet").names)
    assert not sorted(k for k in keys if k not in named)


def test_chunks_relevant_of_an_undecided_case_is_null_as_docs_results_says(tmp_path):
    # docs/results.md says `relevant` is null, not false, where the case's relevance was not decided (h34: it was
    # false, and a mean of the column counted those chunks as misses); this keeps that sentence true
    golden = [{"id": "a-1", "question": "q?", "reference_answer": "r"},
              {"id": "a-2", "question": "q?", "expected_files": ["f.md"], "reference_answer": "r"}]
    run = [{"id": "a-1", "retrieved": [{"file": "f.md", "text": "k"}]},
           {"id": "a-2", "retrieved": [{"text": "k"}, {"file": "f.md", "text": "k"}]}]
    res = ragmeter.score(golden, run)
    assert res.cases["hit"].to_list() == [None, None] and res.cases["labeled"].to_list() == [False, True]
    assert res.chunks["relevant"].to_list() == [None, None, None]
    # the unlabelled case expects nothing a file could match; the labelled one keeps the file rule
    assert res.chunks["file_match"].to_list() == [None, None, True]
    assert "`relevant` is null, not false, in every chunk of a case whose relevance was not decided" \
        in " ".join(_documented().split())


def test_a_score_folder_says_which_version_wrote_it_by_both_paths(tmp_path):
    # before, eval's summary.json said tool, version and results_format but score's said none of them: a script
    # could not tell a score folder written before a column was added (question) from a newer one
    jsonl = write_jsonl(tmp_path / "run.jsonl", RUN)
    parquet = tmp_path / "run.parquet"
    pq.write_table(pa.Table.from_pylist([{k: v for k, v in r.items() if k != "usage"} for r in RUN]), parquet)
    for name, run in (("jsonl", jsonl), ("parquet", parquet)):
        out = tmp_path / name
        done = ragmeter_cli("score", "--golden", str(GOLDEN), "--run", str(run), "--out", str(out), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
        assert (summary["results_format"], summary["tool"], summary["version"]) == (1, "ragmeter", ragmeter.__version__)
        assert list(summary)[:3] == ["k", "n_cases", "n_labeled"]  # the keys scripts read stay where they were
    again = ragmeter_cli("report", str(tmp_path / "jsonl"), cwd=tmp_path)
    assert again.returncode == 0, again.stderr


def test_compare_reads_a_custom_rubric_from_a_summary_resaved_with_a_byte_order_mark(tmp_path):
    # load_results reads such a summary.json; register_folder_metrics read it with json.loads, failed on the mark
    # and registered nothing: the gate did not know tone_check, and its rubric-scale hint was lost
    from ragmeter.report.data import METRICS, register_folder_metrics

    out = _rubric_folder(tmp_path)
    path = out / "summary.json"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    METRICS.pop("tone_check", None)
    register_folder_metrics(out)
    try:
        assert METRICS["tone_check"].rubric == (1, 5)
    finally:
        METRICS.pop("tone_check", None)
