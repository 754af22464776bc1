"""Session 28: `ragmeter review` on inputs a real user meets."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest


def test_the_review_sheet_shows_control_characters_as_escapes_and_keeps_the_ids_it_reads_back() -> None:
    # before: the sheet escaped markup but wrote ESC / BEL / C1 characters of a question, answer, passage or id
    # into the page raw (the report's own rule, ragmeter._text.markup, shows them as \x1b escapes)
    from ragmeter.review.export import KeyPoint
    from ragmeter.review.sheet import render_sheet

    card = {"id": "q\x1b1", "question": "why\x07?", "answer": "<b>no</b>\x9b", "points": [KeyPoint("p\x1b<1>", True)],
            "passages": [{"file": "f\x00.md", "text": "text\x1b[2J"}]}
    page = render_sheet([card], title="run\x1b")
    visible = re.sub(r'data-(id|text)="[^"]*"', "", re.sub(r"<script>.*?</script>", "", page, flags=re.S))
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", visible)
    for shown in ("q\\x1b1", "why\\x07?", "&lt;b&gt;no&lt;/b&gt;\\x9b", "p\\x1b&lt;1&gt;", "f\\x00.md", "text\\x1b[2J",
                  "run\\x1b"):
        assert shown in visible, shown
    # what the sheet's script copies into the CSV is the exact text, so that import finds the id and the point
    assert 'data-id="q\x1b1"' in page and 'data-text="p\x1b&lt;1&gt;"' in page


def _kappa_by_hand(a, b):
    """Cohen's kappa and its Fleiss-Cohen-Everitt (1969) standard error for two yes/no raters, from the 2x2 table."""
    n = len(a)
    p = {(x, y): sum(1 for u, v in zip(a, b) if (u, v) == (x, y)) / n for x in (0, 1) for y in (0, 1)}
    row = {x: p[(x, 0)] + p[(x, 1)] for x in (0, 1)}
    col = {y: p[(0, y)] + p[(1, y)] for y in (0, 1)}
    po, pe = p[(0, 0)] + p[(1, 1)], row[0] * col[0] + row[1] * col[1]
    k = (po - pe) / (1 - pe)
    var = (sum(p[(i, i)] * (1 - (row[i] + col[i]) * (1 - k)) ** 2 for i in (0, 1))
           + (1 - k) ** 2 * sum(p[(i, j)] * (col[i] + row[j]) ** 2 for i in (0, 1) for j in (0, 1) if i != j)
           - (k - pe * (1 - k)) ** 2) / (n * (1 - pe) ** 2)
    return k, max(var, 0.0) ** 0.5


@pytest.mark.parametrize("a, b", [
    ([1, 0] * 10, [1, 0] * 10),  # 20 of 20 agree
    ([1, 0], [1, 0]),  # two cases
    ([1, 0, 0, 1], [0, 1, 1, 0]),  # every case disagrees
])
def test_kappa_at_perfect_agreement_or_disagreement_has_no_interval_rather_than_one_of_no_width(a, b) -> None:
    # before: kappa 1.0 [1.00, 1.00] for 2 cases as for 20 (and -1.0 [-1.00, -1.00]): the large-sample standard
    # error is 0 there, so the interval claimed certainty, while agreement's Wilson interval on 2/2 is [34%, 100%]
    from ragmeter.calibration import cohen_kappa
    from ragmeter.review.render import kappa_text

    k = cohen_kappa(a, b)
    expected, se = _kappa_by_hand(a, b)
    assert se == 0.0 and k.value == pytest.approx(expected)
    assert k.ci_low is None and k.ci_high is None
    assert "interval" in k.ci_reason and str(len(a)) in k.ci_reason
    text = kappa_text(k.to_dict())
    assert "[" not in text and "n/a" in text and k.ci_reason in text


def test_the_kappa_interval_is_the_fleiss_cohen_everitt_one_computed_by_hand() -> None:
    from ragmeter.calibration import Z95, cohen_kappa

    a = [1] * 5 + [1] * 3 + [0] * 7 + [0] * 2
    b = [1] * 5 + [0] * 3 + [0] * 7 + [1] * 2
    k = cohen_kappa(a, b)
    expected, se = _kappa_by_hand(a, b)
    assert k.value == pytest.approx(expected) and k.ci_reason is None
    assert (k.ci_low, k.ci_high) == (pytest.approx(expected - Z95 * se), pytest.approx(min(1.0, expected + Z95 * se)))


def test_review_export_of_a_folder_without_answers_is_refused_naming_the_file(tmp_path) -> None:
    # before: a cases.parquet without an answer column (the judge's verdicts kept, the answers dropped) gave a sheet
    # whose every card read "(no answer)": a reviewer would tick "none of these points" on all of them, and the
    # import would call the judge lenient on every case it found correct
    import subprocess
    import sys

    from test_report import synth_cases, write_results

    folder = write_results(tmp_path / "run", synth_cases(30).drop("answer"))
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "review", "export", str(folder), "--random", "3"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "cases.parquet" in proc.stderr and "answer" in proc.stderr
    assert not (folder / "review").exists()


def test_a_key_point_row_added_to_the_sheet_is_named_as_added_not_as_rows_deleted(tmp_path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_audit_review_s24 import _export_with_key_points, _rows, _write
    from test_review import fill, human_truth

    from ragmeter.review import import_sheet
    from ragmeter.review.render import text_lines

    folder, manifest = _export_with_key_points(tmp_path)
    rows = _rows(fill(folder / "review" / "review.csv", tmp_path / "f.csv", human_truth(manifest)))
    first = next(row for row in rows if row[0] == "miss-1")
    rows.append([first[0], "5", "a point the reviewer wrote in", "1", "1"] + first[5:])
    section = import_sheet(folder, _write(tmp_path / "added.csv", rows))
    # before: "1 with key-point rows deleted from it" (points 3 and 4 counted as deleted), none was
    assert "miss-1" in section["incomplete"] and section["points_added_to_sheet"] == {"miss-1": [5]}
    assert "miss-1" not in (section.get("points_missing_from_sheet") or {})
    text = " ".join(text_lines(section))
    assert "1 with key-point rows the export did not write" in text and "deleted" not in text
