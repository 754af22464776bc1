"""Session 24: `ragmeter report` and the per-case diagnosis on folders and cases a demanding user meets
(an empty cases table, columns written as all-null, a listed file gone, absurd --resamples, unscorable
retrieval, no-answer questions answered anyway)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from ragmeter.errors import InputError

from test_report import synth_cases, write_results


def _report(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmeter", "report", *args], capture_output=True, text=True,
                          timeout=300)


def _no_reports(folder: Path) -> bool:
    return not (folder / "report.html").exists() and not (folder / "report.md").exists()


def test_a_cases_table_of_zero_rows_is_refused_naming_the_file(tmp_path: Path) -> None:
    # it rebuilt nothing useful before: a traceback (KeyError 'hit') and exit 1
    folder = write_results(tmp_path / "zero", synth_cases(4).head(0), judge=False)
    proc = _report(str(folder))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "cases.parquet" in proc.stderr and "0 rows" in proc.stderr
    assert _no_reports(folder)


def test_columns_written_as_all_null_are_read_as_missing_values(tmp_path: Path) -> None:
    # a writer that stores a column holding only nulls as Arrow's null type (no answers at all, no verdicts):
    # the report crashed inside the diagnosis (a String operation on a null-typed column)
    from ragmeter.report import write_reports

    cases = synth_cases(8).with_columns(pl.lit(None).alias("answer"), pl.lit(None).alias("correctness_status"),
                                        pl.lit(None).alias("correct"))
    assert cases.schema["answer"] == pl.Null
    folder = write_results(tmp_path / "nulls", cases, judge=False)
    paths = write_reports(folder, n_resamples=100)
    md = paths["markdown"].read_text(encoding="utf-8")
    # no answer at all: the answers were not recorded (diagnosis.answers_recorded), so no case is OK, nor a
    # generation failure; the refusal readings say why they are empty
    stored = pl.read_parquet(folder / "cases.parquet")
    from ragmeter.report.data import load_results

    diagnosed = load_results(folder).cases
    assert diagnosed.height == stored.height
    assert not {"OK", "GENERATION_FAILED"} & set(diagnosed["diagnosis"])
    assert "Refusals: no answers in this folder" in md


def test_stored_diagnosis_with_a_null_typed_answer_column_is_read(tmp_path: Path) -> None:
    from ragmeter.diagnosis import diagnose
    from ragmeter.report import write_reports

    cases = diagnose(synth_cases(8)).with_columns(pl.lit(None).alias("answer"))
    folder = write_results(tmp_path / "stored", cases, judge=False)
    proc = _report(str(folder), "--resamples", "100")
    assert proc.returncode == 0, proc.stderr
    assert write_reports(folder, n_resamples=100)["markdown"].is_file()


@pytest.mark.parametrize("name", ["judge.parquet", "sweep.parquet"])
def test_a_file_summary_lists_but_the_folder_lacks_is_an_error_naming_it(tmp_path: Path, name: str) -> None:
    # before: the report was rebuilt without it, silently (no judge reasons, no sweep), exit 0
    folder = write_results(tmp_path / "run", synth_cases(8), judge=True, sweep=True,
                           summary={"version": "0.1.0", "files": ["cases.parquet", "judge.parquet", "sweep.parquet",
                                                                  "summary.json"]})
    (folder / name).unlink()
    proc = _report(str(folder), "--resamples", "100")
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert str(folder / name) in proc.stderr and "summary.json" in proc.stderr
    assert _no_reports(folder)


def test_a_file_summary_does_not_list_may_be_absent(tmp_path: Path) -> None:
    folder = write_results(tmp_path / "run", synth_cases(8), judge=False,
                           summary={"version": "0.1.0", "files": ["cases.parquet", "summary.json"]})
    proc = _report(str(folder), "--resamples", "100")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("value", ["99999999999999999999", "1000000000"])
def test_an_absurd_number_of_resamples_is_refused_before_reading(tmp_path: Path, value: str) -> None:
    # 2**64 and more: a traceback (OverflowError) and exit 1; 10**9: memory for 10**9 resample means per metric
    folder = write_results(tmp_path / "run", synth_cases(8), judge=False)
    proc = _report(str(folder), "--resamples", value)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "--resamples" in proc.stderr and "at most" in proc.stderr
    assert _no_reports(folder)


def test_write_reports_refuses_an_absurd_number_of_resamples(tmp_path: Path) -> None:
    from ragmeter.report import MAX_REPORT_RESAMPLES, write_reports

    folder = write_results(tmp_path / "run", synth_cases(8), judge=False)
    with pytest.raises(InputError, match="n_resamples"):
        write_reports(folder, n_resamples=MAX_REPORT_RESAMPLES + 1)
    assert _no_reports(folder)
    assert write_reports(folder, n_resamples=100)["html"].is_file()


def test_report_out_leaves_the_results_folder_untouched(tmp_path: Path) -> None:
    folder = write_results(tmp_path / "run", synth_cases(8), judge=True, sweep=True)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    proc = _report(str(folder), "--out", str(tmp_path / "elsewhere"), "--resamples", "100")
    assert proc.returncode == 0, proc.stderr
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert (tmp_path / "elsewhere" / "report.html").is_file()


# ------------------------------------------------------------------ the diagnosis on edge cases


def _diag_frame(rows):
    schema = {"id": pl.Utf8, "category": pl.Utf8, "labeled": pl.Boolean, "hit": pl.Boolean, "answer": pl.Utf8,
              "reference_answer": pl.Utf8, "correct": pl.Boolean, "correctness_status": pl.Utf8}
    return pl.DataFrame(rows, schema=schema, orient="row")


def test_a_no_answer_question_answered_instead_of_refused_is_a_generation_problem_not_unlabelled() -> None:
    # The example's noanswer-04 invents an answer (judged wrong): its diagnosis was NOT_LABELED ("no retrieval
    # labels"), so the diagnosis table listed the hallucination among the cases with nothing to say.
    from ragmeter import diagnosis as dg

    out = dg.diagnose(_diag_frame([
        ("judged-wrong", "noanswer", False, None, "It was founded in 1987.", "not in the documents", False, "ok"),
        ("rule-wrong", "noanswer", False, None, "It was founded in 1987.", None, None, "skipped"),
        ("refused", "noanswer", False, None, "The documents do not mention it.", None, None, "skipped"),
        ("judged-right", "noanswer", False, None, "Not in the material.", "not in the documents", True, "ok"),
        ("answerable-unlabelled", "fact", False, None, "41", "42", False, "ok"),
    ]))
    got = dict(zip(out["id"], out["diagnosis"]))
    assert got["judged-wrong"] == got["rule-wrong"] == "PROMPT_OR_MODEL"
    assert got["refused"] == got["judged-right"] == "NOT_LABELED"
    # retrieval of an answerable question without labels is unknown: the wrong answer cannot be apportioned
    assert got["answerable-unlabelled"] == "NOT_LABELED"
    # the diagnosis agrees with the column it is derived from: no case known wrong is left without a failure
    wrong = out.filter(pl.col("answer_correct") == False)  # noqa: E712
    assert set(wrong["diagnosis"]) <= {"PROMPT_OR_MODEL", "RETRIEVAL_MISS", "NOT_LABELED"}
    assert "no-answer" in dg.DIAGNOSIS_HINTS["PROMPT_OR_MODEL"]


def test_a_labelled_case_whose_retrieval_could_not_be_scored_is_never_said_to_be_retrieved() -> None:
    # hit is null when the run's chunks carry no file name and the case expects files only: its diagnosis was
    # OK, "retrieved and answered correctly", though nothing says the answer chunk was retrieved
    from ragmeter import diagnosis as dg

    out = dg.diagnose(_diag_frame([
        ("unscored-right", "fact", True, None, "42", "42", True, "ok"),
        ("unscored-wrong", "fact", True, None, "41", "42", False, "ok"),
        ("scored", "fact", True, True, "42", "42", True, "ok"),
    ]))
    got = dict(zip(out["id"], out["diagnosis"]))
    assert got["scored"] == "OK"
    assert got["unscored-right"] == got["unscored-wrong"] == "NOT_LABELED"
    assert "not scored" in dg.DIAGNOSIS_HINTS["NOT_LABELED"]


def test_no_answer_cases_the_judge_skipped_count_in_correct_by_the_refusal_rule(tmp_path: Path) -> None:
    # A golden set's no-answer cases usually have no reference answer, so the correctness judge skips them; the
    # report's Correct then left them all out (noanswer: "n/a (0/6)") though answer_correct holds the refusal
    # rule's verdict, which the diagnosis and the unjudged report use: a system inventing answers to every
    # unanswerable question kept its Correct rate.
    from ragmeter.report import write_reports
    from ragmeter.report.data import compute_aggregates, load_results

    cases = synth_cases(40, seed=2)
    noanswer = pl.col("category") == "noanswer"
    cases = cases.with_columns(
        pl.when(noanswer).then(pl.lit("It was founded in 1987.")).otherwise(pl.col("answer")).alias("answer"),
        pl.when(noanswer).then(pl.lit(None, dtype=pl.Boolean)).otherwise(pl.col("correct")).alias("correct"),
        pl.when(noanswer).then(pl.lit(None, dtype=pl.Float64)).otherwise(pl.col("correctness_score"))
        .alias("correctness_score"),
        pl.when(noanswer).then(pl.lit("skipped")).otherwise(pl.col("correctness_status")).alias("correctness_status"),
    )
    n_noanswer = cases.filter(noanswer).height
    assert n_noanswer == 10
    folder = write_results(tmp_path / "run", cases, judge=False)
    results = load_results(folder)
    agg = compute_aggregates(results.cases, n_resamples=100)
    by_cat = agg["by_category"]["noanswer"]["correct"]
    assert (by_cat["n_scored"], by_cat["n_total"], by_cat["value"]) == (10, 10, 0.0)
    n_judged = cases.filter(~noanswer & (pl.col("correctness_status") == "ok")).height
    assert agg["overall"]["correct"]["n_scored"] == n_judged + n_noanswer
    md = write_reports(folder, n_resamples=100)["markdown"].read_text(encoding="utf-8")
    assert "10 no-answer case(s)" in md and "refusal" in md
    html = (folder / "report.html").read_text(encoding="utf-8")
    assert "10 no-answer case(s)" in html


# ------------------------------------------------------------------ every count says what it is out of


def test_quadrants_bands_and_latency_say_how_many_cases_they_cover(tmp_path: Path) -> None:
    # the quadrant and band counts covered only the cases with the scores they need (3 + 3 of 10 in a run with
    # failed calls) and the latency percentiles the cases reporting one, without a word of the others
    from ragmeter.report import write_reports

    cases = synth_cases(20, seed=5)
    unscored = pl.int_range(pl.len()) < 7
    cases = cases.with_columns(
        pl.when(unscored).then(None).otherwise(pl.col("context_precision_score")).alias("context_precision_score"),
        pl.when(unscored).then(pl.lit("failed")).otherwise(pl.col("context_precision_status"))
        .alias("context_precision_status"),
        pl.when(pl.int_range(pl.len()) < 5).then(None).otherwise(pl.col("faithfulness_score")).alias("faithfulness_score"),
        pl.when(pl.int_range(pl.len()) < 4).then(pl.col("latency_ms")).otherwise(None).alias("latency_ms"),
    )
    folder = write_results(tmp_path / "run", cases, judge=False)
    from ragmeter.report.data import load_results

    diagnosed = load_results(folder).cases
    n_quadrant = diagnosed["quadrant"].count()
    n_band = diagnosed["faithfulness_band"].count()
    assert 0 < n_quadrant < 20 and n_band == 15
    paths = write_reports(folder, n_resamples=100)
    md = paths["markdown"].read_text(encoding="utf-8")
    html = paths["html"].read_text(encoding="utf-8")
    for text in (md, html):
        assert f"{n_quadrant} of 20 cases" in text
        assert f"{n_band} of 20 cases" in text
    assert "(4/20 cases report one)" in html  # system latency, as the cost rows say it


def test_the_resolution_of_a_large_set_is_not_shown_as_zero_points() -> None:
    # at 100,000 cases the reports said "one case = 0.00 points"
    from ragmeter.report.data import resolution_text

    assert resolution_text(51) == "1.96"
    assert resolution_text(100_000) == "0.001"
    assert resolution_text(30_000) == "0.0033"
    assert resolution_text(1) == "100.00"
    assert float(resolution_text(7)) == pytest.approx(100 / 7, abs=0.005)


def test_user_texts_in_the_explorer_take_their_own_direction() -> None:
    # right-to-left questions and answers (Hebrew, Arabic) were laid out left-to-right, their punctuation at the
    # wrong end; every text box and the id / category cells now say dir="auto"
    from ragmeter.report.html import JS

    assert "dir='auto'" in JS or 'dir="auto"' in JS or ".dir='auto'" in JS or ".dir = 'auto'" in JS


def test_every_diagnosis_has_its_own_colour() -> None:
    from ragmeter.diagnosis import DIAGNOSES
    from ragmeter.report.html import DIAGNOSIS_COLORS

    assert set(DIAGNOSES) <= set(DIAGNOSIS_COLORS)
    assert len(set(DIAGNOSIS_COLORS.values())) == len(DIAGNOSIS_COLORS)


def test_warning_codes_from_the_folder_cannot_carry_markup_into_the_markdown(tmp_path: Path) -> None:
    # report.md is pasted into pull requests; a warning code (or an audit warning's) was put between backticks
    # unescaped, so a backtick in it closed the code span and the rest reached the page as raw HTML
    from ragmeter.report import write_reports

    hostile = "x`<img src=x onerror=alert(1)>`|y\nz"
    summary = {"version": "0.1.0", "warnings": [{"code": hostile, "message": "m", "count": 1, "cases": ["a"]}],
               "golden_set": {"n": 8, "n_labeled": 6, "by_category": {"fact": {"n": 8, "share": 1.0}},
                              "warnings": [{"code": hostile, "message": "audit"}]}}
    folder = write_results(tmp_path / "run", synth_cases(8), judge=False, summary=summary)
    md = write_reports(folder, n_resamples=100)["markdown"].read_text(encoding="utf-8")
    assert "<img" not in md
    assert "`missing" not in md and md.count("onerror") == 2
    for line in md.splitlines():
        if "onerror" in line:
            assert line.count("`") == line.count("\\`"), line  # every backtick escaped, no code span opened


def test_an_edited_golden_set_panel_neither_breaks_nor_injects(tmp_path: Path) -> None:
    # summary.json's golden_set numbers went into report.html unescaped, and a share that is not a number was a
    # traceback (format of a str)
    from ragmeter.report import write_reports

    bad = "<b id=x>9</b>"
    summary = {"version": "0.1.0", "golden_set": {
        "n": bad, "n_labeled": bad, "by_category": {"fact": {"n": bad, "share": bad}},
        "hard": {"n": bad, "n_total": 8, "share": bad, "categories": ["fact"]}}}
    folder = write_results(tmp_path / "run", synth_cases(8), judge=False, summary=summary)
    paths = write_reports(folder, n_resamples=100)
    html = paths["html"].read_text(encoding="utf-8")
    md = paths["markdown"].read_text(encoding="utf-8")
    assert "<b id=x>" not in html and "&lt;b id=x&gt;9&lt;/b&gt;" in html
    assert "<b id=x>" not in md
    ok = {"version": "0.1.0", "golden_set": {"n": 8, "n_labeled": 6, "by_category": {"fact": {"n": 8, "share": 1.0}},
                                              "hard": {"n": 2, "n_total": 8, "share": 0.25, "categories": ["fact"]}}}
    folder2 = write_results(tmp_path / "ok", synth_cases(8), judge=False, summary=ok)
    paths = write_reports(folder2, n_resamples=100)
    assert "fact 8 (100.0%)" in paths["html"].read_text(encoding="utf-8")
    assert "hard cases: 2/8 = 25.0%" in paths["markdown"].read_text(encoding="utf-8")


@pytest.mark.parametrize("column,value", [
    ("category", [1, 2]), ("retrieval_mode", [1, 2]), ("n_expected_files", "two"), ("latency_ms", "slow"),
    ("latency_ms", [1.0]),
])
def test_a_column_of_the_wrong_type_is_named_not_a_traceback(tmp_path: Path, column: str, value: object) -> None:
    cases = synth_cases(8).with_columns(pl.lit(value).alias(column))
    folder = write_results(tmp_path / "run", cases, judge=False)
    proc = _report(str(folder), "--resamples", "100")
    assert proc.returncode == 2, proc.stderr[-800:]
    assert "Traceback" not in proc.stderr
    assert str(folder / "cases.parquet") in proc.stderr and column in proc.stderr
    assert _no_reports(folder)


def test_a_numeric_category_is_still_read() -> None:
    from ragmeter.report.data import _type_problems

    assert _type_problems(synth_cases(4).with_columns(pl.lit(3).alias("category"))) == []
