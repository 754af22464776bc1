"""Session 27: `ragmeter report` / `eval` reports on folders and text a real user meets (a judge.parquet or
sweep.parquet whose columns another tool or an edit gave another type, control characters in user text)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from test_report import synth_cases, write_results


def _report(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmeter", "report", *args], capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("name,column,value", [
    ("judge.parquet", "status", pl.lit([], dtype=pl.List(pl.Utf8))),
    ("judge.parquet", "reason", pl.lit([], dtype=pl.List(pl.Utf8))),
    ("judge.parquet", "latency_ms", pl.lit("850 ms")),
    ("judge.parquet", "repeat", pl.lit("1")),
    ("sweep.parquet", "threshold", pl.lit("0.1")),
    ("sweep.parquet", "category", pl.lit([], dtype=pl.List(pl.Utf8))),
])
def test_a_judge_or_sweep_column_of_another_type_is_an_input_error_naming_the_file(
        tmp_path: Path, name: str, column: str, value: pl.Expr) -> None:
    # before: a Polars traceback from deep inside the report (exit 1), e.g. "cannot cast List type" or
    # "cannot compare string with numeric type"; cases.parquet's columns were checked, these were not
    folder = write_results(tmp_path / "run", synth_cases(12), sweep=True)
    path = folder / name
    pl.read_parquet(path).with_columns(value.alias(column)).write_parquet(path)
    proc = _report(str(folder))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert name in proc.stderr and column in proc.stderr
    assert not (folder / "report.html").exists() and not (folder / "report.md").exists()


def test_the_markdown_report_writes_control_characters_as_escapes(tmp_path: Path) -> None:
    # before: a category, id or warning holding ESC / BEL / NUL went raw into report.md, so `cat report.md`
    # recoloured (or rang) the terminal; the terminal tables already show them as \x1b escapes
    from ragmeter.report import write_reports

    cases = synth_cases(12).with_columns(
        pl.when(pl.int_range(pl.len()) < 6).then(pl.lit("x\x1b[31mred\x07")).otherwise(pl.col("category"))
        .alias("category"))
    folder = write_results(tmp_path / "run", cases, judge=False, summary={
        "version": "0.1.0", "warnings": [{"code": "note", "message": "id a\x00b\x1b]0;title\x07 said so\x7f"}]})
    md = write_reports(folder, n_resamples=100)["markdown"].read_text(encoding="utf-8")
    assert not any(ch in md for ch in "\x1b\x07\x00\x7f")
    assert "x\\x1b\\[31mred\\x07" in md  # shown, not dropped (the bracket escaped for Markdown)
    assert "a\\x00b\\x1b\\]0;title\\x07 said so\\x7f" in md


def test_a_warning_cut_in_report_md_says_so_as_report_html_does(tmp_path: Path) -> None:
    # before: report.md cut a long warning at 400 characters with no mark (the list of cases looked complete and
    # a phrase ended mid-word), while report.html ended the same cut with an ellipsis
    from ragmeter.report import write_reports

    ids = [f"case-{i:03d}-" + "x" * 60 for i in range(5)]
    message = "5 golden case(s) missing from the run, scored as empty retrievals: " + ", ".join(ids) + " ... tail"
    folder = write_results(tmp_path / "run", synth_cases(12), judge=False, summary={
        "version": "0.1.0", "warnings": [{"code": "missing_from_run", "message": message, "count": 5,
                                          "cases": ids}]})
    paths = write_reports(folder, n_resamples=100)
    md = paths["markdown"].read_text(encoding="utf-8")
    line = next(x for x in md.splitlines() if x.startswith("- `missing_from_run`"))
    assert "tail" not in line  # cut...
    assert line.endswith("\u2026")  # ...and saying so
    assert "\u2026" in paths["html"].read_text(encoding="utf-8").split("missing_from_run</code>", 1)[1][:1000]


@pytest.mark.parametrize("where,value", [
    (("judge", "metrics"), ["correctness"]),
    (("judge", "metrics", "correctness", "n_total"), "51 rows"),
    (("judge", "metrics", "correctness", "failures"), {"client": 9}),
    (("cost", "judge_cost_share"), "82%"),
    (("golden_set", "hard"), "26 of 51"),
    (("golden_set", "warnings"), "none"),
    (("repeats", "metrics", "correctness", "per_repeat"), "2.06, 2.06"),
    (("repeats", "runs"), [3]),
])
def test_a_summary_json_part_of_another_shape_is_an_input_error_naming_the_file_and_the_key(
        tmp_path: Path, where: tuple, value: object) -> None:
    # before: a traceback (AttributeError "'list' object has no attribute 'values'", ValueError "could not
    # convert string to float: '82%'", ...) and exit 1 for a summary.json another tool wrote or a hand edited
    summary = {
        "version": "0.1.0", "results_format": 1,
        "judge": {"metrics": {"correctness": {"n_total": 12, "n_scored": 11, "failures": {
            "client": {"count": 1, "example": "HTTP 400"}}, "skips": {}}}},
        "cost": {"judge_cost_share": 0.5},
        "golden_set": {"n": 12, "n_labeled": 12, "by_category": {"fact": {"n": 12, "share": 1.0}},
                       "hard": {"n": 0, "n_total": 12, "share": 0.0, "categories": []}, "warnings": []},
        "repeats": {"n": 2, "metrics": {"correctness": {"per_repeat": [0.5, 0.5], "n_scored": [12, 12],
                                                         "n_total": [12, 12], "mean": 0.5, "std": 0.0, "min": 0.5,
                                                         "max": 0.5, "n_compared": 12, "n_flipped": 0,
                                                         "flip_rate": 0.0}},
                    "runs": [{"repeat": 1, "incomplete": {"rows": 0, "of": 12}}]},
    }
    folder = write_results(tmp_path / "run", synth_cases(12), summary=summary)
    from ragmeter.report import write_reports

    write_reports(folder, n_resamples=100)  # the well-formed folder is reported
    (folder / "report.html").unlink()
    (folder / "report.md").unlink()
    node = summary
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    (folder / "summary.json").write_text(__import__("json").dumps(summary), encoding="utf-8")
    proc = _report(str(folder))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "summary.json" in proc.stderr and ".".join(where) in proc.stderr
    assert not (folder / "report.html").exists() and not (folder / "report.md").exists()


def test_the_html_judge_cost_is_the_cost_of_every_repeat_as_summary_json_and_the_terminal_say(tmp_path: Path) -> None:
    # before: with --repeat N, report.html's "judge cost (USD)" was repeat 1's alone (judge.judge_cost_usd: 0.0000
    # when repeat 1 was replayed from the cache) beside a judge share of 90% computed over every repeat, while
    # summary.json's cost.judge_cost_usd and the terminal's "cost:" line said 0.0502
    from ragmeter.report import write_reports

    folder = write_results(tmp_path / "run", synth_cases(12), summary={
        "version": "0.1.0", "judge": {"judge_cost_usd": 0.0},
        "repeats": {"n": 3, "runs": [{"repeat": r, "judge_cost_usd": c} for r, c in ((1, 0.0), (2, 0.0251),
                                                                                    (3, 0.0251))]},
        "cost": {"system_cost_usd": 0.0055, "judge_cost_usd": 0.0502, "total_cost_usd": 0.0557,
                 "judge_cost_share": 0.9013}})
    html = write_reports(folder, n_resamples=100)["html"].read_text(encoding="utf-8")
    cell = html.split("judge cost (USD)</td>")[1].split("</tr>")[0]
    assert "0.0502" in cell and "0.0000" not in cell


def test_eval_repeats_table_on_the_terminal_keeps_its_rows_within_80_columns_indented(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # before: each row of the --repeat table ("  correctness | 2.060 | 0.000 | ... | 0/50 (0.0%)", about 100
    # columns) was broken at column 80 by the console and went on at column 0 ("2.060 (50/51) | 0/50 (0.0%)"),
    # so the rows of the table could not be told apart
    import os
    import unicodedata

    sys.path.insert(0, str(Path(__file__).parent / "judge"))
    from evalcli import eval_cli
    from fakeserver import FakeServer

    key = "sk-test-RAGMETER-S27-0123456789abcdef"
    monkeypatch.setenv("RAGMETER_API_KEY", key)
    monkeypatch.setenv("COLUMNS", "80")
    server = FakeServer(api_key=key)
    server.start()
    try:
        proc = eval_cli("--repeat", "2", "--no-cache", "--metrics", "correctness,faithfulness", "--out",
                        str(tmp_path / "out"), server=server)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("repeats:"))
    end = next(i for i, x in enumerate(lines) if x.startswith("cost:"))
    block = lines[start + 1:end]
    assert any("correctness" in x for x in block) and any("faithfulness" in x for x in block)
    width = [sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in x) for x in block]
    assert max(width) <= 80, block
    assert all(x.startswith("  ") for x in block), block  # a row's continuation is indented under it
    assert os.environ["RAGMETER_API_KEY"] not in proc.stdout + proc.stderr


def test_report_warnings_on_stderr_fit_80_columns_and_show_control_characters_as_escapes(tmp_path: Path) -> None:
    # before: `ragmeter report` printed each warning as one raw line (282 columns for non-finite values in 51
    # rows), and an id holding ESC went to the terminal as it is; every other command wraps its warnings at 80
    # columns under a hanging indent and writes control characters as \x1b escapes
    import unicodedata

    cases = synth_cases(30).with_columns(
        pl.lit(float("nan")).alias("reciprocal_rank"),
        pl.when(pl.int_range(pl.len()) == 0).then(pl.lit("id-\x1b[2Jcleared")).otherwise(pl.col("id")).alias("id"))
    folder = write_results(tmp_path / "run", cases, judge=False)
    proc = _report(str(folder))
    assert proc.returncode == 0, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert lines and lines[0].startswith("ragmeter: warning: ") and "non-finite" in lines[0]
    assert max(sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in x) for x in lines) <= 80, lines
    assert "\x1b" not in proc.stderr and "id-\\x1b[2Jcleared" in proc.stderr


@pytest.mark.parametrize("metric,count,scale", [("answer_mentions_the_refund_policy", 50, "0-1"),  # a custom metric
                                                ("correctness", 100_000, "1-5")])                  # a large run
def test_the_judge_lines_eval_prints_stay_within_80_columns(metric: str, count: int, scale: str) -> None:
    # before: a metric's first line was never wrapped, though judge_lines promises "every line within width":
    # 81 columns for a custom metric named answer_mentions_the_refund_policy, 86 for correctness over 100,000
    # cases of which 12,345 failed and 23,456 were skipped
    from ragmeter.cli.judge import judge_lines

    summary = {"metrics": {metric: {"mean": 0.5, "scale": scale, "n_scored": count - 35_801 if count > 50 else 40,
                                    "n_total": count, "n_failed": 12_345 if count > 50 else 6,
                                    "n_skipped": 23_456 if count > 50 else 4, "failures": {}, "skips": {}}}}
    lines = judge_lines(summary)
    assert max(len(x) for x in lines) <= 80, lines
    assert all(x.startswith("  ") for x in lines)
    text = " ".join(" ".join(lines).split())
    assert f"{metric} mean 0.500" in text  # the line as it was, only wrapped
    assert f"scored {summary['metrics'][metric]['n_scored']}/{count}" in text


def test_refusal_and_unjudged_correct_count_n_total_over_the_cases_they_apply_to(tmp_path: Path) -> None:
    # the refusal rate is over answerable questions and refusal detection grades no-answer ones: their n_total
    # counted every case (44/51, 6/51), as all_files_hit counts the cases expecting two or more files (13/13)
    example = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "eval", "--golden", str(example / "golden.jsonl"),
                           "--run", str(example / "run.jsonl"), "--no-judge", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    cases = pl.read_parquet(tmp_path / "out" / "cases.parquet")
    n_noanswer = int(cases["is_noanswer"].sum())
    rows = {line.split(" | ")[0].lstrip("| "): line.rstrip(" |").split(" | ")[-1]
            for line in (tmp_path / "out" / "report.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| ")}
    assert rows["Refusal rate (answerable questions)"].endswith(f"/{cases.height - n_noanswer}")
    assert rows["No-answer cases refused (refusal detection; answers not judged)"] == f"{n_noanswer}/{n_noanswer}"


def test_eval_thresholds_are_shown_on_the_terminal_and_in_report_md(tmp_path: Path) -> None:
    # the sweep's numbers were only in sweep.parquet (and a chart in report.html)
    example = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "eval", "--golden", str(example / "golden.jsonl"),
                           "--run", str(example / "run.jsonl"), "--no-judge", "--thresholds", "0,0.2",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    sweep = pl.read_parquet(tmp_path / "out" / "sweep.parquet").filter(pl.col("category") == "ALL")
    at = {row["threshold"]: row for row in sweep.iter_rows(named=True)}
    hit = f"{100 * at[0.2]['hit_rate']:.1f}%"
    assert "Threshold sweep" in proc.stdout
    assert any(line.split()[:3] == ["0.2", "ALL", hit] for line in proc.stdout.splitlines()), proc.stdout
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "### Threshold sweep" in md
    assert f"| 0.2 | {hit} | {at[0.2]['mrr']:.3f} | {at[0.2]['n_scored']}/{at[0.2]['n_total']} |" in md


@pytest.mark.parametrize("edit", [
    lambda c: c.update(cells={}),
    lambda c: c.update(strata={"A": "x"}),
    lambda c: c.update(agreement={"n": 3}),
    lambda c: c.update(incomplete=5, n_incomplete=2),
])
def test_a_calibration_section_of_another_shape_is_an_input_error(tmp_path: Path, edit) -> None:
    # calibration.cells = {} was KeyError: 'both_correct', a traceback and exit 1
    import json

    out = tmp_path / "demo"
    assert subprocess.run([sys.executable, "-m", "ragmeter", "demo", "--out", str(out)], capture_output=True).returncode == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    edit(summary["calibration"])
    (out / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    before = (out / "report.md").read_bytes()
    proc = _report(str(out))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "summary.json" in proc.stderr and "calibration" in proc.stderr and "review import" in proc.stderr
    assert (out / "report.md").read_bytes() == before


def test_the_repeats_table_shows_a_rate_as_a_percentage_as_the_rest_of_the_report() -> None:
    # correct's mean of repeats read 0.020 where every other table of the report reads 2.0%
    from ragmeter.repeats import repeat_table

    entry = {"per_repeat": [0.02, 0.04], "n_scored": [50, 50], "n_total": [51, 51], "mean": 0.03, "std": 0.01,
             "min": 0.02, "max": 0.04, "n_compared": 50, "n_flipped": 1, "flip_rate": 0.02}
    _headers, rows = repeat_table({"n": 2, "metrics": {"correct": entry, "correctness": dict(entry, mean=2.5)}})
    correct, correctness = rows
    assert correct[1:4] == ["3.0%", "1.0pp", "2.0% .. 4.0%"] and correct[4] == "2.0% (50/51), 4.0% (50/51)"
    assert correctness[1] == "2.500"


def test_compare_resamples_beyond_a_million_are_refused_naming_the_flag(tmp_path: Path) -> None:
    # the kernel's own refusal named 'n_resamples', which compare's command line does not have
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "compare", str(tmp_path), str(tmp_path), "--resamples",
                           "100000000000"], capture_output=True, text=True)
    assert proc.returncode == 2 and "--resamples must be at most 1,000,000" in proc.stderr, proc.stderr


def test_a_long_judge_failure_example_ends_in_an_ellipsis_where_it_is_cut(tmp_path: Path) -> None:
    # report.md cut it at 200 characters and report.html at 300, mid-word, with no mark
    from ragmeter.report import write_reports

    example = "upstream error " + "x" * 600 + " END"
    summary = {"version": "0.1.0", "k": 5, "judge": {"metrics": {"correctness": {
        "n_total": 20, "failures": {"server": {"count": 2, "example": example}}, "skips": {}}}}}
    folder = write_results(tmp_path / "r", synth_cases(20), summary=summary)
    paths = write_reports(folder)
    md = paths["markdown"].read_text(encoding="utf-8")
    html = paths["html"].read_text(encoding="utf-8")
    assert "END" not in md and "x" * 180 + "\u2026" in md
    assert "END" not in html and "x" * 280 + "\u2026" in html
