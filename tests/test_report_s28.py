"""Session 28: the reports on user text and columns a real user meets (control characters in SVG labels, a
cases.parquet holding judge verdicts but no answers)."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import polars as pl

from test_report import synth_cases, write_results

#: characters XML 1.0 forbids even as entities (and that HTML calls parse errors): C0 but tab, newline and
#: carriage return, then DEL and the C1 range
FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
HOSTILE = "x\x1b[31m<b>red</b>\x07&\x00\x85\x9b"


def _page_without_case_data(html: str) -> str:
    """The report without its scripts (the case data is base64, the script is ours)."""
    return re.sub(r"<script[^>]*>.*?</script>", "", html, flags=re.S)


def test_user_text_in_the_html_report_and_its_svg_charts_shows_control_characters_as_escapes(tmp_path: Path) -> None:
    # before: a category, source, warning or run name holding ESC / BEL / NUL / C1 characters went into report.html
    # raw, markup escaped but control characters not: an SVG chart copied out of the page was not XML (an XML
    # parser stops at the first), while report.md showed the same text as \x1b escapes
    from ragmeter.report import write_reports

    cases = synth_cases(16).with_columns(
        pl.when(pl.int_range(pl.len()) % 4 == 0).then(pl.lit(HOSTILE)).otherwise(pl.col("category")).alias("category"))
    folder = write_results(tmp_path / "run", cases, sweep=True, summary={
        "version": "0.1.0", "name": "run\x1b]0;title\x07",
        "warnings": [{"code": "note\x1b", "message": "case a\x00b said so\x7f"}],
        "golden_set": {"n": 16, "n_labeled": 12, "by_category": {HOSTILE: {"n": 4, "share": 0.25}},
                       "by_source": {"src\x1b\x9b<i>": {"n": 16, "share": 1.0}},
                       "hard": {"n": 4, "n_total": 16, "share": 0.25, "categories": [HOSTILE]}}})
    html = write_reports(folder, n_resamples=100)["html"].read_text(encoding="utf-8")
    page = _page_without_case_data(html)
    assert not FORBIDDEN.search(page), repr(FORBIDDEN.search(page))
    svgs = re.findall(r"<svg .*?</svg>", page, flags=re.S)
    assert svgs
    for svg in svgs:
        ET.fromstring(svg)  # each chart is XML on its own (saved as .svg, opened by another tool)
    shown = "x\\x1b[31m&lt;b&gt;red&lt;/b&gt;\\x07&amp;\\x00\\x85\\x9b"
    assert shown in page  # shown, not dropped, as report.md shows it
    cut = shown[:len("x\\x1b[31m&lt;b&gt;")]
    assert any(shown in svg or cut in svg for svg in svgs)  # the chart's label too (cut at 14 characters)
    assert "src\\x1b\\x9b&lt;i&gt;" in page and "run\\x1b]0;title\\x07" in page and "a\\x00b said so\\x7f" in page


def test_tabs_and_newlines_in_user_text_stay_as_they_are_in_the_html_report() -> None:
    # white space is legal XML and HTML folds it: only the characters XML forbids are rewritten
    from ragmeter.report.svg import esc

    assert esc("a\tb\nc <d>") == "a\tb\nc &lt;d&gt;"
    assert esc("a\x1bb\x9b\x7f") == "a\\x1bb\\x9b\\x7f"
    # the two noncharacters XML 1.0 also forbids (not control characters: the terminal shows them as they are)
    assert esc("a\ufffeb\uffff") == "a\\ufffeb\\uffff"


def _overall_rows(md: str) -> dict:
    """report.md's Overall table: metric label -> its cells (value, interval, n)."""
    table = md.split("| metric | value | 95% CI | n |")[1].split("\n\n")[0]
    return {cells[0]: cells[1:] for cells in (line.strip("| ").split(" | ") for line in table.splitlines()[2:])}


def test_correct_is_computed_from_the_judge_verdicts_of_a_folder_without_answers(tmp_path: Path) -> None:
    # before: a cases.parquet holding the judge's `correct` verdicts but no `answer` column lost its Correct row in
    # both reports, with nothing said: the verdicts were there, the reports dropped answer_correct with the answers
    import subprocess
    import sys

    cases = synth_cases(40, seed=3)
    with_answers = write_results(tmp_path / "with", cases)
    without = write_results(tmp_path / "without", cases.drop("answer"))
    for folder in (with_answers, without):
        proc = subprocess.run([sys.executable, "-m", "ragmeter", "report", str(folder), "--resamples", "200"],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
    md = {f.name: (f / "report.md").read_text(encoding="utf-8") for f in (with_answers, without)}
    expected = _overall_rows(md["with"])["Correct"]
    ok = cases.filter(pl.col("correctness_status") == "ok")
    assert expected[-1] == f"{ok.height}/{cases.height}"
    assert expected[0] == f"{100 * ok['correct'].mean():.1f}%"  # by hand: the verdicts' mean over the scored rows
    assert _overall_rows(md["without"])["Correct"] == expected
    assert "| Correct |" in md["without"].split("### Per category")[1].split("\n\n")[1]
    html = (without / "report.html").read_text(encoding="utf-8")
    assert f"<td>Correct</td><td class=\"num\">{expected[0]}</td>" in html
    assert "Correct by category" in html


def test_correct_and_refusal_without_answers_or_verdicts_are_shown_as_not_measured_with_the_reason(
        tmp_path: Path) -> None:
    # before: a folder without answers and without verdicts (ragmeter score, or a cases.parquet cut down) showed
    # neither Correct nor the refusal rate in its Overall table: a metric that was not measured vanished
    from ragmeter.report import write_reports

    cases = synth_cases(20, seed=4).drop("answer", "correct", "correctness_score", "correctness_status")
    folder = write_results(tmp_path / "run", cases, judge=False)
    paths = write_reports(folder, n_resamples=100)
    md, html = (paths[k].read_text(encoding="utf-8") for k in ("markdown", "html"))
    rows = _overall_rows(md)
    n_answerable = cases.filter(pl.col("category") != "noanswer").height
    assert rows["Correct"] == ["not measured: no answers in this folder", "n/a", f"0/{cases.height}"]
    assert rows["Refusal rate (answerable questions)"] == ["not measured: no answers in this folder", "n/a",
                                                          f"0/{n_answerable}"]
    assert f"<td>Correct</td><td class=\"num\">not measured: no answers in this folder</td>" in html
    assert f"<td class=\"num\">0/{cases.height}</td>" in html.split("<td>Correct</td>")[1].split("</tr>")[0]


def test_refusal_rows_stored_by_eval_are_kept_when_the_answers_are_dropped_afterwards(tmp_path: Path) -> None:
    # `ragmeter eval` stores refusal and answer_correct per case (read from the answers at the time): without the
    # answer column later, the stored values still measure them, and the rows read as they did
    import subprocess
    import sys

    example = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "eval", "--golden", str(example / "golden.jsonl"),
                           "--run", str(example / "run.jsonl"), "--no-judge", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    md_before = (out / "report.md").read_text(encoding="utf-8")
    before = _overall_rows(md_before)
    pl.read_parquet(out / "cases.parquet").drop("answer").write_parquet(out / "cases.parquet")
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "report", str(out)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    md_after = (out / "report.md").read_text(encoding="utf-8")
    after = _overall_rows(md_after)
    for label in ("Refusal rate (answerable questions)", "No-answer cases refused (refusal detection; answers not judged)"):
        assert after[label] == before[label], label
    # the readings say the same as the table above them, not "no answers in this folder"
    refusals = [line for line in md_before.splitlines() if line.startswith("Refusals:")]
    assert refusals and refusals == [line for line in md_after.splitlines() if line.startswith("Refusals:")]
