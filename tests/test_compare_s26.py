"""Review session 26 of `ragmeter compare`: defects found comparing results folders, each with the test that
failed before its fix."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import polars as pl
import pytest

from ragmeter.compare import CompareRefused, compare

sys.path.insert(0, str(Path(__file__).resolve().parent))  # works under any --import-mode
from compare_runs import GOLDEN, eval_folder, golden_cases, run_cases, write_jsonl  # noqa: E402
from test_compare_output import _cli  # noqa: E402


def _relabelled(path: Path, ids) -> Path:  # type: ignore[no-untyped-def]
    rows = golden_cases()
    for row in rows:
        if row["id"] in ids:
            row["expectedEvidence"] = ["a phrase no chunk holds"]
    return write_jsonl(path, rows)


# -- a golden set edited in place: a label change is not a system regression -------------------------------------
def test_a_label_changed_in_a_golden_file_edited_in_place_is_refused(tmp_path: Path) -> None:
    golden = tmp_path / "golden.jsonl"
    shutil.copy(GOLDEN, golden)
    before = eval_folder(tmp_path / "before", golden=golden)
    ids = [r["id"] for r in golden_cases() if r["id"].startswith("fact-0")]
    _relabelled(golden, ids)  # the baseline's recorded golden file no longer has its recorded SHA-256
    after = eval_folder(tmp_path / "after", golden=golden)
    # before: "hit -20.0pp" and 9 regressions from the same run file, the gate failed (exit 1), with only a note
    # that the labels were not compared
    with pytest.raises(CompareRefused, match=r"golden sets differ in \d+ case.*expected_evidence differs"):
        compare(before, after)
    proc = _cli(str(before), str(after), "--gate", "hit>=-2pp")
    assert proc.returncode == 2 and "expected_evidence differs" in proc.stderr, proc.stderr


def test_a_folder_without_its_labels_and_another_golden_file_is_refused(tmp_path: Path) -> None:
    # folders written before cases.parquet carried the labels: whether they changed cannot be told
    golden = tmp_path / "golden.jsonl"
    shutil.copy(GOLDEN, golden)
    before = eval_folder(tmp_path / "before", golden=golden)
    _relabelled(golden, [])
    golden.write_text("# reformatted\n" + golden.read_text(encoding="utf-8"), encoding="utf-8")
    after = eval_folder(tmp_path / "after", golden=golden)
    for folder in (before, after):
        path = folder / "cases.parquet"
        pl.read_parquet(path).drop("expected_files", "expected_evidence").write_parquet(path)
    with pytest.raises(CompareRefused, match="labels .*cannot be compared"):
        compare(before, after)
    forced = compare(before, after, force=True, n_resamples=200)
    assert forced.forced and forced.n_paired == 51


def test_a_reformatted_golden_file_with_the_same_labels_still_compares(tmp_path: Path) -> None:
    golden = tmp_path / "golden.jsonl"
    shutil.copy(GOLDEN, golden)
    before = eval_folder(tmp_path / "before", golden=golden)
    golden.write_text("# reformatted\n" + golden.read_text(encoding="utf-8"), encoding="utf-8")
    after = eval_folder(tmp_path / "after", golden=golden)
    comp = compare(before, after, n_resamples=200)
    assert not comp.forced and comp.n_paired == 51
    assert any("differ byte for byte" in n and "not compared" not in n for n in comp.notes)


# -- a case that failed when it was collected is not a change of retrieval modes ----------------------------------
def test_a_case_that_failed_when_collected_does_not_refuse_the_comparison(tmp_path: Path) -> None:
    base = eval_folder(tmp_path / "base")
    rows = run_cases()
    failed = rows[3]["id"]
    rows[3] = {"id": failed, "error": "HTTP 500", "retrieved": [], "answer": None, "retrieval_mode": None}
    run = write_jsonl(tmp_path / "run_failed.jsonl", rows)
    from ragmeter.cli import main

    assert main(["eval", "--golden", str(GOLDEN), "--run", str(run), "--out", str(tmp_path / "cand"), "--no-judge",
                 "--no-progress"]) == 3  # results written, the failed case named
    # before: "refusing ... retrieval-mode mix differs: ... '(none)': 1", exit 2
    comp = compare(base, tmp_path / "cand", n_resamples=200)
    assert not comp.forced
    assert any(failed in w for w in comp.warnings), comp.warnings


# -- --json / --out never overwrite an input ------------------------------------------------------------------------
@pytest.mark.parametrize("side", ["base", "cand"])
def test_a_json_output_that_is_an_input_is_refused(tmp_path: Path, side: str) -> None:
    base = eval_folder(tmp_path / "base")
    cand = tmp_path / "cand"
    shutil.copytree(base, cand)
    target = "summary.json"
    before = (tmp_path / side / target).read_bytes()
    proc = _cli(str(base), str(cand), "--json", str(tmp_path / side / target))
    # before: the baseline's summary.json was replaced by the comparison, and the k and golden checks were then
    # skipped for that folder
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "writing there would replace it" in proc.stderr
    assert (tmp_path / side / target).read_bytes() == before


# -- control characters in a category reach neither the terminal nor a pipe -------------------------------------------
def test_control_characters_in_a_category_are_shown_escaped(tmp_path: Path) -> None:
    rows = golden_cases()
    for row in rows:
        if row["id"].startswith("fact"):
            row["category"] = "x\x1b[31mred\x07"
    golden = write_jsonl(tmp_path / "golden.jsonl", rows)
    base = eval_folder(tmp_path / "base", golden=golden)
    cand = tmp_path / "cand"
    shutil.copytree(base, cand)
    proc = _cli(str(base), str(cand), "--gate", "hit>=-50pp")
    assert proc.returncode == 0, proc.stderr
    # before: the ESC and BEL bytes were printed as they are (a terminal turned the rest of the table red)
    assert "\x1b" not in proc.stdout + proc.stderr and "\x07" not in proc.stdout + proc.stderr
    assert "x\\x1b[31mred\\x07" in proc.stdout
    import subprocess

    score = subprocess.run([sys.executable, "-m", "ragmeter", "score", "--golden", str(golden), "--run",
                            str(Path(__file__).resolve().parent.parent / "python/ragmeter/_example/run.jsonl")],
                           capture_output=True, text=True, timeout=120)
    assert "\x1b" not in score.stdout + score.stderr and "x\\x1b[31mred\\x07" in score.stdout


def test_printable_keeps_text_and_shows_control_characters() -> None:
    from ragmeter._text import printable

    assert printable("plain 中文 café") == "plain 中文 café"
    assert printable("a\x1b[31mb\x07\x00\x7f\x9b") == "a\\x1b[31mb\\x07\\x00\\x7f\\x9b"
    assert printable("tab\there") == "tab\\there"


def test_a_reader_that_stops_early_is_not_a_failed_gate(tmp_path: Path) -> None:
    import subprocess

    base = eval_folder(tmp_path / "base")
    cmd = f"{sys.executable} -m ragmeter compare {base} {base} --gate 'hit>=-50pp' --resamples 200 | head -1; " \
          "exit ${PIPESTATUS[0]}"
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
    # before: rich's broken-pipe handler exited 1, the status of a failed gate
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr


# -- the cases a metric lost on one side, or on both, are named -----------------------------------------------------------
def test_cases_scored_on_one_side_or_neither_are_named(tmp_path: Path) -> None:
    from test_report import synth_cases, write_results

    base = synth_cases(60, seed=4)
    judged = base.filter((pl.col("correctness_status") == "ok") & (pl.col("category") != "noanswer"))
    lost = sorted(judged.get_column("id").to_list())[:3]
    failed = pl.col("id").is_in(lost)
    cand = base.with_columns(
        pl.when(failed).then(pl.lit("failed")).otherwise(pl.col("correctness_status")).alias("correctness_status"),
        *[pl.when(failed).then(None).otherwise(pl.col(c)).alias(c) for c in ("correct", "correctness_score")])
    comp = compare(write_results(tmp_path / "b", base), write_results(tmp_path / "c", cand), n_resamples=200)
    one_side = next(w for w in comp.warnings if "scored in the baseline only" in w)
    # before: "correct: 3 case(s) scored in the baseline only" and no id anywhere
    assert all(i in one_side for i in lost), one_side
    both = compare(write_results(tmp_path / "c2", cand), write_results(tmp_path / "c3", cand), n_resamples=200)
    neither = next(w for w in both.warnings if w.startswith("correct:") and "scored in neither run" in w)
    assert all(i in neither for i in lost), neither


def test_n_total_counts_the_cases_a_metric_applies_to(tmp_path: Path) -> None:
    base = eval_folder(tmp_path / "base")
    comp = compare(base, base, n_resamples=200)
    # before: all_files_hit 13/51, though it applies to the 13 cases expecting two or more files (summary.json: 13)
    row = comp.row("all_files_hit")
    assert (row.n_paired, row.n_total) == (13, 13)
    assert comp.row("hit").n_total == 51
