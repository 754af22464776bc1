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
