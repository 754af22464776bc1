"""ragmeter review export / import / compare: the worked example end to end, the sheet in Chromium, bad input."""
from __future__ import annotations

import csv
import html as html_lib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import polars as pl
import pytest

REPO = Path(__file__).resolve().parent.parent
SENTINEL_REASON = "JUDGE-REASON-SENTINEL"
SENTINEL_SCORE = 4.375  # a judge score no page would show by chance

# The worked example: 50 cases, 7 judged incorrect (A), 4 judged correct with the evidence missed (B), 39 others.
A_IDS = [f"wrong-{i}" for i in range(7)]
B_IDS = [f"miss-{i}" for i in range(4)]
REST_IDS = [f"ok-{i:02d}" for i in range(39)]


def _case(case_id: str, correct: bool, hit: bool) -> Dict:
    return {"id": case_id, "category": case_id.split("-")[0], "labeled": True, "hit": hit, "correct": correct,
            "correctness_score": SENTINEL_SCORE if correct else 2.0, "correctness_status": "ok",
            "question": f"What about {case_id}?", "answer": f"The answer for {case_id}.",
            "reference_answer": (f"Reference for {case_id}." if case_id != "wrong-1"
                                 else 'Reference, "quoted",\nover two lines for wrong-1.'),
            "retrieved": [{"file": "doc.md", "chunk_id": "c1", "text": f"passage about {case_id}", "score": 0.5,
                           "relevant": hit}]}


def write_folder(path: Path, flip: Optional[str] = None, judged: bool = True) -> Path:
    """A results folder as `ragmeter eval` writes it (the columns the review reads); ``flip`` judges one B case
    incorrect (a second judge)."""
    from ragmeter._io import results_folder, strict_json, write_frame

    rows = ([_case(i, False, True) for i in A_IDS] + [_case(i, i != flip, False) for i in B_IDS]
            + [_case(i, True, True) for i in REST_IDS])
    cases = pl.DataFrame(rows)
    if not judged:
        cases = cases.drop("correct", "correctness_score", "correctness_status")
    judge = cases.select("id", pl.lit("correctness").alias("metric"), pl.lit("ok").alias("status"),
                         pl.lit(SENTINEL_REASON).alias("reason")) if judged else None
    files = ["cases.parquet"] + (["judge.parquet"] if judged else []) + ["summary.json"]
    with results_folder(path) as tmp:
        write_frame(cases, tmp / "cases.parquet")
        if judge is not None:
            write_frame(judge, tmp / "judge.parquet")
        (tmp / "summary.json").write_text(strict_json({"results_format": 1, "files": files}) + "\n")
    return path


def ragmeter(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    return subprocess.run([sys.executable, "-m", "ragmeter", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=env)


def fill(sheet: Path, out: Path, human_correct: Dict[str, bool], skip: tuple = ()) -> Path:
    """The reviewer: every point covered for a case they find correct, none for the others."""
    with sheet.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        if row["id"] not in skip:
            row["covered"] = "yes" if human_correct[row["id"]] else "0"
    with out.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return out


def human_truth(manifest: Dict) -> Dict[str, bool]:
    """A 7/7 (all wrong, as the judge said), B 1/4 (one really correct), C 4/4 (all correct)."""
    return {i: (s == "random" or i == "miss-0") for i, s in manifest["strata"].items()}


@pytest.fixture()
def exported(tmp_path: Path):
    folder = write_folder(tmp_path / "run")
    proc = ragmeter("review", "export", folder, "--random", "4", "--seed", "7")
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((folder / "review" / "manifest.json").read_text())
    return folder, manifest


def test_export_draws_the_strata(exported) -> None:
    folder, manifest = exported
    strata = manifest["strata"]
    assert sorted(i for i, s in strata.items() if s == "judge_incorrect") == A_IDS
    assert sorted(i for i, s in strata.items() if s == "miss_but_correct") == B_IDS
    random_ids = [i for i, s in strata.items() if s == "random"]
    assert len(random_ids) == 4 and set(random_ids) <= set(REST_IDS)
    assert manifest["seed"] == 7 and manifest["population"]["rest"] == 39 and len(manifest["results_sha256"]) == 64
    with (folder / "review" / "review.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["id", "point", "key_point", "core", "covered", "note"]
    assert len(rows) == 15 and all(r["covered"] == "" and r["core"] == "1" for r in rows)
    # the same seed draws the same sample; another seed another C
    again = ragmeter("review", "export", folder, "--random", "4", "--seed", "7", "--out", folder / "again")
    assert again.returncode == 0 and json.loads((folder / "again" / "manifest.json").read_text())["strata"] == strata
    other = ragmeter("review", "export", folder, "--random", "4", "--seed", "8", "--out", folder / "other")
    assert json.loads((folder / "other" / "manifest.json").read_text())["strata"] != strata


def test_export_refuses_to_replace_a_sheet_with_reviewer_verdicts(exported, tmp_path: Path) -> None:
    folder, manifest = exported
    sheet, written = folder / "review" / "review.csv", folder / "review" / "manifest.json"
    # an unfilled sheet (a fresh export) is replaced as before
    assert ragmeter("review", "export", folder, "--random", "4", "--seed", "7").returncode == 0
    fill(sheet, sheet, human_truth(manifest), skip=("wrong-0", "wrong-1"))  # 13 of the 15 rows filled
    filled, manifest_text = sheet.read_bytes(), written.read_text()
    proc = ragmeter("review", "export", folder, "--random", "4", "--seed", "8")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("ragmeter: error: ")
    assert str(sheet) in proc.stderr and "13 of 15 rows" in proc.stderr
    assert "--force" in proc.stderr and "--out" in proc.stderr
    assert sheet.read_bytes() == filled and written.read_text() == manifest_text  # the labels are still there
    assert not [p for p in (folder / "review").iterdir() if p.name.startswith(".")]  # no temporary folder left
    # another folder is free; --force replaces the filled sheet with a fresh one
    assert ragmeter("review", "export", folder, "--out", tmp_path / "second").returncode == 0
    proc = ragmeter("review", "export", folder, "--random", "4", "--seed", "8", "--force")
    assert proc.returncode == 0, proc.stderr
    with sheet.open() as fh:
        assert all(r["covered"] == "" for r in csv.DictReader(fh))
    assert json.loads(written.read_text())["seed"] == 8
    assert "--force" in ragmeter("review", "export", "--help").stdout


def test_worked_example_round_trip(exported, tmp_path: Path) -> None:
    folder, manifest = exported
    before = (folder / "summary.json").read_text()
    sheet = fill(folder / "review" / "review.csv", tmp_path / "filled.csv", human_truth(manifest))
    proc = ragmeter("review", "import", folder, sheet, "--json")
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    c = json.loads((folder / "summary.json").read_text())["calibration"]
    assert printed["agreement"] == c["agreement"] and before != (folder / "summary.json").read_text()
    assert c["n"] == 15 and c["agreement"]["agreed"] == 12 and c["agreement"]["value"] == pytest.approx(0.8)
    assert round(c["kappa"]["value"], 4) == 0.6087 and c["kappa"]["band"] == "substantial"
    assert c["cells"] == {"both_correct": 5, "judge_correct_human_wrong": 3, "judge_wrong_human_correct": 0,
                          "both_wrong": 7}
    per = {s: (row["agreed"], row["n_compared"]) for s, row in c["strata"].items()}
    assert per == {"judge_incorrect": (7, 7), "miss_but_correct": (1, 4), "judge_failed": (0, 0), "random": (4, 4)}
    assert c["disagreements"] == {"lenient": 3, "strict": 0}
    assert "lenient" in c["findings"][0] and "evidence was not retrieved" in c["findings"][0]
    assert not c["below_min_agreement"] and c["n_incomplete"] == 0
    # the judge says 43/50 = 86% correct; the human-corrected estimate rests on the 4 random labels
    ppi = c["ppi"]
    assert ppi["judge_rate"] == pytest.approx(0.86) and ppi["value"] == pytest.approx(0.80)
    assert ppi["n_random_labels"] == 4 and ppi["n_census_labelled"] == 11
    # C's 4/4 has the Wilson interval [0.510, 1]: the estimate's is (1 + 39 x that) / 50
    assert ppi["ci_low"] == pytest.approx((1 + 39 * 0.5101) / 50, abs=1e-4) and ppi["ci_high"] == pytest.approx(0.8)
    review = pl.read_parquet(folder / "review.parquet")
    assert review.height == 15 and {"stratum", "judge_correct", "human_correct", "human_score"} <= set(review.columns)
    assert review.filter(pl.col("id") == "miss-0")["human_score"].to_list() == [5]
    for name in ("report.html", "report.md"):
        text = (folder / name).read_text()
        assert "Calibration" in text and "0.6087" in text and "12/15 = 80.0%" in text, name
    # at 85% required agreement: a warning, in the section and the reports
    proc = ragmeter("review", "import", folder, sheet, "--min-agreement", "85%")
    assert proc.returncode == 0 and "below --min-agreement 85%" in " ".join(proc.stdout.split())
    assert "below --min-agreement 85%" in (folder / "report.md").read_text()


def test_incomplete_sheet_is_reported_not_guessed(exported, tmp_path: Path) -> None:
    folder, manifest = exported
    skip = ("wrong-0", "ok-00") if "ok-00" in manifest["strata"] else ("wrong-0",)
    sheet = fill(folder / "review" / "review.csv", tmp_path / "part.csv", human_truth(manifest), skip=skip)
    proc = ragmeter("review", "import", folder, sheet)
    assert proc.returncode == 3, proc.stderr
    c = json.loads((folder / "summary.json").read_text())["calibration"]
    assert c["n_incomplete"] == len(skip) and set(c["incomplete"]) == set(skip) and c["n"] == 15 - len(skip)
    assert c["ppi"]["value"] is None and "no human verdict" in c["ppi"]["reason"]  # stratum A is not complete
    assert "wrong-0" in proc.stdout


def test_sample_cases_deleted_from_the_sheet_are_incomplete_exit_3(exported, tmp_path: Path) -> None:
    """A reviewer who deletes (or filters out) rows of the sample has not reviewed those cases: exit 3, named."""
    folder, manifest = exported
    sheet = fill(folder / "review" / "review.csv", tmp_path / "filled.csv", human_truth(manifest))
    with sheet.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    dropped = sorted({r["id"] for r in rows})[:2]
    kept = [r for r in rows if r["id"] not in dropped]
    for where in (tmp_path / "sheet.csv", folder / "review" / "filtered.csv"):  # away from and next to the manifest
        with where.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(kept)
        proc = ragmeter("review", "import", folder, where)
        assert proc.returncode == 3, proc.stdout + proc.stderr
        c = json.loads((folder / "summary.json").read_text())["calibration"]
        assert c["missing_from_sheet"] == [i for i in manifest["ids"] if i in dropped]
        assert c["n_incomplete"] == 2 and set(c["incomplete"]) == set(dropped) and c["n"] == 13
        said = " ".join(proc.stdout.split())
        assert "incomplete: 2 case(s) not (fully) reviewed (2 of them with no row in the sheet)" in said, said
    # a sheet with a case the manifest does not list belongs to another export: the manifest is not used
    other = dict(manifest, ids=[i for i in manifest["ids"] if i != kept[0]["id"]])
    (folder / "review" / "manifest.json").write_text(json.dumps(other), encoding="utf-8")
    proc = ragmeter("review", "import", folder, tmp_path / "sheet.csv")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "missing_from_sheet" not in json.loads((folder / "summary.json").read_text())["calibration"]


def test_a_sheet_row_for_a_case_the_judge_skipped_names_its_line(exported, tmp_path: Path) -> None:
    folder, manifest = exported
    cases = pl.read_parquet(folder / "cases.parquet")
    skipped = next(i for i in cases["id"].to_list() if i not in manifest["ids"])
    cases = cases.with_columns(pl.when(pl.col("id") == skipped).then(pl.lit("skipped"))
                               .otherwise(pl.col("correctness_status")).alias("correctness_status"))
    cases.write_parquet(folder / "cases.parquet")
    sheet = fill(folder / "review" / "review.csv", tmp_path / "filled.csv", human_truth(manifest))
    with sheet.open("a", encoding="utf-8", newline="") as fh:
        n_lines = sheet.read_text(encoding="utf-8").count("\n")
        csv.writer(fh).writerow([skipped, "1", "", "yes", "yes"] + [""] * (len(_header(sheet)) - 5))
    line = _one_error_line(ragmeter("review", "import", folder, sheet))
    assert f"{sheet}:{n_lines + 1}: id: case {skipped!r} has no correctness verdict" in line, line


def _header(sheet: Path) -> list:
    with sheet.open(encoding="utf-8") as fh:
        return next(csv.reader(fh))


def _bad(folder: Path, sheet: Path, text: str) -> subprocess.CompletedProcess:
    sheet.write_text(text, encoding="utf-8")
    return ragmeter("review", "import", folder, sheet)


def test_bad_sheets_exit_2_naming_file_row_field_and_write_nothing(exported, tmp_path: Path) -> None:
    folder, _ = exported
    state = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    sheet = tmp_path / "bad.csv"
    cases = [
        ("id,point,core,covered,verdict\nwrong-0,1,1,1,x\n", f"{sheet}:1: unknown column(s) verdict"),
        ("id,point,covered\nwrong-0,1,1\n", f"{sheet}:1: missing column(s) core"),
        ("id,point,core,covered\nwrong-0,1,1,1\nwrong-1,1,1,maybe\n", f"{sheet}:3: covered: 'maybe' is not 1, 0, yes, no, true, false or empty"),
        ("id,point,core,covered\nnope,1,1,1\n", f"{sheet}:2: id: 'nope' is not a case of"),
        ("id,point,core,covered\nwrong-0,x,1,1\n", f"{sheet}:2: point:"),
        ("", f"{sheet}:1: empty sheet"),
    ]
    for text, message in cases:
        proc = _bad(folder, sheet, text)
        assert proc.returncode == 2, (text, proc.stderr)
        assert proc.stderr.startswith("ragmeter: error: ") and message in proc.stderr, (message, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == state
    missing = ragmeter("review", "import", folder, tmp_path / "absent.csv")
    assert missing.returncode == 2 and "absent.csv: review sheet not found" in missing.stderr
    line = _one_error_line(ragmeter("review", "import", folder, folder / "review"))  # the sheet's folder
    assert f"{folder / 'review'}: is a folder, not a sheet" in line and "review.csv" in line, line
    assert "not found" not in line


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr.strip()


def test_a_run_file_given_as_the_sheet_gets_one_diagnosis(exported, tmp_path: Path) -> None:
    folder, _ = exported
    state = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    run = tmp_path / "run.jsonl"
    run.write_text('{"id":"a-1","retrieved":[{"file":"f.md","text":"x"}]}\n'
                   '{"id":"a-2","retrieved":[{"file":"g.md","text":"y"}]}\n', encoding="utf-8")
    line = _one_error_line(ragmeter("review", "import", folder, run))
    assert line.startswith(f"ragmeter: error: {run}: not a review sheet (a CSV with the columns id, point, ")
    assert line.endswith("it looks like JSON Lines") and "unknown column" not in line and '"a-1"' not in line
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == state


@pytest.mark.parametrize("content, shape", [
    (b'[{"id": "a-1", "covered": 1}]', "a JSON array"),
    (b'{\n  "id": "a-1",\n  "covered": 1\n}\n', "JSON (one object)"),
    (b"\xef\xbb\xbf" + b'{"id":"a-1"}\n', "JSON Lines"),
    (b"# golden set, one case per line\n// v2\n" + b'{"id":"a-1"}\n', "JSON Lines"),  # README's comment lines
    (b"PK\x03\x04" + b"\x00" * 40, "an Excel workbook (.xlsx)"),
    ("id\tpoint\tcore\tcovered\nwrong-0\t1\t1\t1\n".encode("utf-16"), "UTF-16 text"),
    (b"PAR1" + b"\x00" * 40, "a binary file"),
])
def test_sheets_of_the_wrong_shape_are_named_before_their_columns(tmp_path: Path, content: bytes, shape: str) -> None:
    from ragmeter.errors import InputError
    from ragmeter.review.importer import read_sheet

    sheet = tmp_path / "sheet.csv"
    sheet.write_bytes(content)
    with pytest.raises(InputError) as err:
        read_sheet(sheet)
    message = str(err.value)
    assert message.startswith(f"{sheet}: not a review sheet (") and f"it looks like {shape}" in message, message
    assert "column(s)" not in message and "\n" not in message


def test_a_sheet_saved_as_windows_1252_names_the_line_and_column(exported, tmp_path: Path) -> None:
    folder, manifest = exported
    sheet = fill(folder / "review" / "review.csv", tmp_path / "filled.csv", human_truth(manifest))
    lines = sheet.read_text(encoding="utf-8").splitlines()
    at = next(i for i, text in enumerate(lines) if text.startswith("wrong-0,"))
    assert at > 0 and lines[at].endswith(",")  # the note, the last column, is empty
    lines[at] += "Caf\u00e9 au lait"  # Excel's plain "CSV" writes the é as the single byte 0xE9
    sheet.write_bytes(("\n".join(lines) + "\n").encode("cp1252"))
    line = _one_error_line(ragmeter("review", "import", folder, sheet))
    assert f"{sheet}:{at + 1}:" in line and "0xe9" in line and "note column" in line, line
    assert "CSV UTF-8" in line and "position" not in line and "probably Windows-1252" in line
    # a Chinese reviewer's Excel saves plain "CSV" in GBK: the message names that encoding, not Windows-1252
    lines[at] = lines[at].replace("Caf\u00e9 au lait", "\u7b54\u6848\u6b63\u786e\uff0c\u8bc1\u636e\u9f50\u5168")
    sheet.write_bytes(("\n".join(lines) + "\n").encode("gb18030"))
    line = _one_error_line(ragmeter("review", "import", folder, sheet))
    assert f"{sheet}:{at + 1}:" in line and "note column" in line and "probably GB18030 (GBK)" in line, line


def test_a_sheet_saved_as_csv_utf8_with_a_bom_is_read(exported, tmp_path: Path) -> None:
    folder, manifest = exported
    sheet = fill(folder / "review" / "review.csv", tmp_path / "filled.csv", human_truth(manifest))
    text = re.sub(r"(?m)^(wrong-0,.*,)$", "\\1Caf\u00e9", sheet.read_text(encoding="utf-8"), count=1)
    sheet.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))  # Excel's "CSV UTF-8" opens with a BOM
    proc = ragmeter("review", "import", folder, sheet, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((folder / "summary.json").read_text())["calibration"]["n"] == 15
    notes = pl.read_parquet(folder / "review.parquet").get_column("note").drop_nulls().to_list()
    assert notes == ["Caf\u00e9"]


def _excel(sheet: Path, out: Path, delimiter: str, encoding: str, note: str = "") -> Path:
    """The sheet as Excel saves it where the decimal mark is a comma: ';' between fields, CRLF line ends."""
    with sheet.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    rows[next(i for i, row in enumerate(rows) if row[0] == "wrong-0")][-1] = note
    with out.open("w", encoding=encoding, newline="") as fh:
        csv.writer(fh, delimiter=delimiter, lineterminator="\r\n").writerows(rows)
    return out


def test_a_sheet_saved_by_excel_with_semicolons_is_read(exported, tmp_path: Path) -> None:
    folder, manifest = exported
    sheet = fill(folder / "review" / "review.csv", tmp_path / "filled.csv", human_truth(manifest))
    semicolons = _excel(sheet, tmp_path / "excel.csv", ";", "utf-8-sig", note="Caf\u00e9; au lait, chaud")
    assert semicolons.read_bytes().startswith(b"\xef\xbb\xbfid;point;key_point;core;covered;note\r\n")
    proc = ragmeter("review", "import", folder, semicolons, "--json")
    assert proc.returncode == 0, proc.stderr
    calibration = json.loads((folder / "summary.json").read_text())["calibration"]
    assert calibration["n"] == 15 and calibration["agreement"]["agreed"] == 12
    notes = pl.read_parquet(folder / "review.parquet").get_column("note").drop_nulls().to_list()
    assert notes == ["Caf\u00e9; au lait, chaud"]
    # the same sheet in Windows-1252 (Excel's plain "CSV"): the column of the bad byte is still named
    line = _one_error_line(ragmeter("review", "import", folder,
                                    _excel(sheet, tmp_path / "cp1252.csv", ";", "cp1252", note="Caf\u00e9")))
    assert "0xe9 in the note column" in line, line


def test_folder_without_judge_results_is_an_input_error(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "unjudged", judged=False)
    proc = ragmeter("review", "export", folder)
    assert proc.returncode == 2 and "no judge results" in proc.stderr and "cases.parquet" in proc.stderr
    assert not (folder / "review").exists()
    sheet = tmp_path / "s.csv"
    sheet.write_text("id,point,core,covered\nwrong-0,1,1,1\n")
    proc = ragmeter("review", "import", folder, sheet)
    assert proc.returncode == 2 and "no judge results" in proc.stderr and not (folder / "review.parquet").exists()


def test_compare_judges_and_humans(exported, tmp_path: Path) -> None:
    folder, manifest = exported
    second = write_folder(tmp_path / "second", flip="miss-1")
    sheet = fill(folder / "review" / "review.csv", tmp_path / "filled.csv", human_truth(manifest))
    proc = ragmeter("review", "compare", folder, second, "--human", sheet, "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    pairs = {(r["a"], r["b"]): r for r in result["pairs"]}
    assert result["n_cases"] == 15 and len(pairs) == 3
    assert pairs[("run", "human")]["agreed"] == 12 and round(pairs[("run", "human")]["kappa"]["value"], 4) == 0.6087
    assert pairs[("second", "human")]["agreed"] == 13 and round(pairs[("second", "human")]["kappa"]["value"], 2) == 0.73
    assert pairs[("run", "second")]["agreed"] == 14 and round(pairs[("run", "second")]["kappa"]["value"], 2) == 0.87
    assert "markedly more" in result["finding"]
    text = ragmeter("review", "compare", folder, second, "--human", sheet)
    assert text.returncode == 0 and "run vs second | 15 | 14/15 = 93.3%" in text.stdout and "finding:" in text.stdout
    lines = text.stdout.splitlines()  # wrapped within 80 columns under each line, never at column 0
    assert all(len(line) <= 80 and line == line.rstrip() for line in lines), lines
    assert all(line.startswith(("verdicts:", "every pair", "pair |", "finding:", "  ")) or " vs " in line for line in lines), lines
    alone = ragmeter("review", "compare", folder)
    assert alone.returncode == 2 and "two results folders" in alone.stderr


# ------------------------------------------------------------------------------------------------ the sheet in Chromium


def _chromium() -> Optional[str]:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI"):
        pytest.fail("CI is set but no chromium binary was found: install Debian's `chromium` package")
    pytest.skip("no chromium binary (install Debian's `chromium`; this test is mandatory when CI is set)")


def _dump_dom(binary: str, page: Path, tmp: Path) -> str:
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--disable-extensions", "--disable-background-networking", f"--user-data-dir={tmp / 'profile'}",
           "--virtual-time-budget=5000", "--dump-dom", page.as_uri()]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    except subprocess.TimeoutExpired:  # headless Chromium now and then hangs on a loaded machine: once more
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout


#: ticks the boxes as a reviewer would (all points of a correct case, "none of these points" for the others) and
#: presses "Save as CSV"; the page keeps the CSV it saved in #csv-output
TICK = """<script>
(function(){ var truth = %s;
  Array.prototype.forEach.call(document.querySelectorAll('.card'), function(card){
    var id = card.getAttribute('data-id'); if(!(id in truth)) return;
    if(truth[id]) Array.prototype.forEach.call(card.querySelectorAll('input.kp'), function(b){ b.click(); });
    else card.querySelector('input.nonecovered').click();
    card.querySelector('textarea.note').value = 'seen, "quoted", ok';
  });
  document.getElementById('save').click();
})();
</script>"""


def test_sheet_in_headless_chromium(exported, tmp_path: Path) -> None:
    binary = _chromium()
    folder, manifest = exported
    page = folder / "review" / "review.html"
    dom = _dump_dom(binary, page, tmp_path)
    assert dom.count('class="card"') == 15 and 'id="save"' in dom
    # nothing of the judge's grading, nor the stratum, anywhere in the page
    for leak in (SENTINEL_REASON, str(SENTINEL_SCORE), "judge_incorrect", "miss_but_correct", "judge_failed",
                 "MISS_BUT_CORRECT", "stratum", "verdict", "correctness"):
        assert leak not in dom, leak
    assert "passage about wrong-0" in dom  # the source passages are there, collapsed
    # a reviewer ticks boxes and saves: the CSV the page builds is one import accepts
    truth = human_truth(manifest)
    truth.pop("wrong-3")  # one case left untouched: it stays unreviewed
    text = page.read_text(encoding="utf-8")
    text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", text)  # let the test's own script run
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", TICK % json.dumps(truth) + "</body>"), encoding="utf-8")
    dom = _dump_dom(binary, probe, tmp_path)
    found = re.search(r'<pre id="csv-output">(.*?)</pre>', dom, re.S)
    assert found and found.group(1).startswith("id,point,key_point,core,covered,note"), dom[-2000:]
    saved = tmp_path / "saved.csv"
    saved.write_text(html_lib.unescape(found.group(1)), encoding="utf-8")
    proc = ragmeter("review", "import", folder, saved)
    assert proc.returncode == 3, proc.stderr  # written, one case incomplete
    c = json.loads((folder / "summary.json").read_text())["calibration"]
    assert c["incomplete"] == ["wrong-3"] and c["n"] == 14 and c["agreement"]["agreed"] == 11
    review = pl.read_parquet(folder / "review.parquet")
    assert review.filter(pl.col("id") == "ok-00" if "ok-00" in truth else pl.col("id") == "wrong-0")["note"].to_list() \
        == ['seen, "quoted", ok']


# ------------------------------------------------------------------------------------------------ from ragmeter eval


def test_review_of_an_eval_run_with_the_scripted_judge(tmp_path: Path, monkeypatch) -> None:
    """`ragmeter eval` against the scripted judge: review_reason in cases.parquet, and C is the run's sample."""
    import zlib

    sys.path.insert(0, str(REPO / "tests" / "judge"))
    from evalcli import eval_cli
    from fakeserver import FakeServer

    monkeypatch.setenv("RAGMETER_API_KEY", "sk-test-review")
    monkeypatch.setenv("PYTHONPATH", str(REPO / "python"))

    def correctness(payload: Dict) -> Dict:
        ok = zlib.crc32((payload.get("question") or "").encode()) % 10 < 7
        return {"reason": SENTINEL_REASON, "score": 4 if ok else 2, "correct": ok}

    out = tmp_path / "ev"
    with FakeServer() as server:
        server.replies["correctness"] = correctness
        server.rules.append((lambda info: "How quickly must a P1 page be acknowledged?" in json.dumps(info.get("payload")), "malformed"))
        proc = eval_cli("--metrics", "correctness", "--no-cache", "--max-failed", "5", "--review-rate", "0.2",
                        "--review-seed", "11", "--out", str(out), server=server)
    assert proc.returncode == 0, proc.stderr
    cases = pl.read_parquet(out / "cases.parquet")
    reasons = dict(zip(cases["id"], cases["review_reason"]))
    assert {"judge_failed", "miss_but_correct", "sampled"} <= set(reasons.values())
    assert reasons["fact-03-p1-ack-time"] == "judge_failed"
    assert all(reasons[i] == "miss_but_correct" for i in cases.filter(pl.col("diagnosis") == "MISS_BUT_CORRECT")["id"])
    assert json.loads((out / "summary.json").read_text())["settings"]["review"] == {"rate": 0.2, "seed": 11}
    proc = ragmeter("review", "export", out)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / "review" / "manifest.json").read_text())
    assert manifest["seed"] == 11 and "sampled at run time" in manifest["random"]["method"]
    random_ids = {i for i, s in manifest["strata"].items() if s == "random"}
    assert random_ids and all(reasons[i] == "sampled" for i in random_ids)
    assert set(manifest["key_point_source"].values()) <= {"golden", "reference", "no-answer"}
    sheet = fill(out / "review" / "review.csv", tmp_path / "filled.csv", {i: True for i in manifest["strata"]})
    proc = ragmeter("review", "import", out, sheet)
    assert proc.returncode == 0, proc.stderr
    c = json.loads((out / "summary.json").read_text())["calibration"]
    assert c["n_reviewed"] == len(manifest["ids"]) and c["ppi"]["n_random_labels"] == len(random_ids)
    assert manifest["strata"]["fact-03-p1-ack-time"] == "judge_failed" and c["strata"]["judge_failed"]["n_reviewed"] == 1
    assert "review.parquet" in json.loads((out / "summary.json").read_text())["files"]


# ------------------------------------------------------------------------------------------------ the demo


def test_demo_reports_a_calibration_with_the_miss_but_correct_finding(tmp_path: Path) -> None:
    example = REPO / "python" / "ragmeter" / "_example"
    assert (example / "judge_replay.jsonl").read_text().startswith("# EXAMPLE DATA")
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "demo", "--out", "demo"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO / "python")})
    assert proc.returncode == 0, proc.stderr
    flat = " ".join(proc.stdout.split())
    assert "scripted example verdicts" in flat and "example data" in flat
    assert "calibration: 17/20 agree = 85.0%" in flat and "Cohen's kappa 0.6667" in flat
    assert "the judge is lenient when the evidence was not retrieved" in flat
    out = tmp_path / "demo"
    summary = json.loads((out / "summary.json").read_text())
    c = summary["calibration"]
    assert c["strata"]["miss_but_correct"]["agreed"] == 1 and c["strata"]["miss_but_correct"]["n_compared"] == 4
    assert c["n_incomplete"] == 0 and summary["settings"]["judge"]["model"] == "example-replay"
    # the bundled filled sheet covers exactly the sample the demo exports
    manifest = json.loads((out / "review" / "manifest.json").read_text())
    with (example / "review_filled.csv").open() as fh:
        assert {row["id"] for row in csv.DictReader(fh)} == set(manifest["ids"])
    assert "Calibration: judge vs human reviewers" in (out / "report.html").read_text()
    assert "Calibration: judge vs human reviewers" in (out / "report.md").read_text()


def test_demo_rerun_keeps_a_filled_sheet_and_writes_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    demo = [sys.executable, "-m", "ragmeter", "demo", "--out", "demo"]
    assert subprocess.run(demo, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env).returncode == 0
    out = tmp_path / "demo"
    example = REPO / "python" / "ragmeter" / "_example"
    shutil.copyfile(example / "review_filled.csv", out / "review" / "review.csv")
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.is_file()}
    proc = subprocess.run(demo, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    message = " ".join(proc.stderr.split())
    assert "already filled in by a reviewer" in message and "--out another folder" in message
    assert "--force" not in message and "Traceback" not in proc.stderr  # demo has no --force to suggest
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.is_file()} == before
    assert (out / "review" / "review.csv").read_bytes() == (example / "review_filled.csv").read_bytes()


# ------------------------------------------------------------------------------------------------ key points by endpoint


def test_key_points_from_the_judge_endpoint_are_cached_and_fall_back(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "tests" / "judge"))
    from fakeserver import FakeServer

    from ragmeter.judge import JudgeConfig
    from ragmeter.review import export_sheet

    folder = write_folder(tmp_path / "run")

    def split(payload: Dict) -> Dict:
        ref = payload["reference_answer"]
        return {"points": [{"text": f"core of {ref}", "core": True}, {"text": f"detail of {ref}", "core": False}]}

    with FakeServer() as server:
        server.replies["key-points"] = split
        server.rules.append((lambda info: "wrong-2" in json.dumps(info.get("payload")), "malformed"))
        cfg = JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", cache=str(tmp_path / "cache.sqlite"),
                          api_key="sk-test", progress=False)
        manifest = export_sheet(folder, tmp_path / "sheet", random_n=4, seed=7, judge=cfg)
        sent = server.requests
        again = export_sheet(folder, tmp_path / "again", random_n=4, seed=7, judge=cfg)
        assert sent == 14 + 2  # one call per reference; the malformed one got its repair turn
        assert server.requests == sent  # the second export is answered from the cache (replies cached as received)
    assert again["key_points"] == manifest["key_points"]
    points = manifest["key_points"]["wrong-0"]
    assert points == [{"text": "core of Reference for wrong-0.", "core": True},
                      {"text": "detail of Reference for wrong-0.", "core": False}]
    assert manifest["key_point_source"]["wrong-0"] == "endpoint"
    assert manifest["key_point_source"]["wrong-2"] == "reference"  # unusable reply: the whole reference
    assert any("1 of 15 reference(s) could not be split" in n for n in manifest["notes"])
    assert all(p["task"] == "key-points" for p in server.log if p.get("kind") == "chat")
    with (tmp_path / "sheet" / "review.csv").open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["id"] == "wrong-0"]
    assert [(r["point"], r["core"]) for r in rows] == [("1", "1"), ("2", "0")]


def test_key_points_with_a_refused_key_stop_the_export_and_write_nothing(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "tests" / "judge"))
    from fakeserver import FakeServer

    from ragmeter.errors import InputError
    from ragmeter.judge import JudgeConfig
    from ragmeter.review import export_sheet

    folder = write_folder(tmp_path / "run")
    with FakeServer(api_key="sk-the-right-one") as server:
        server.models_action = 401
        cfg = JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", cache=None, api_key="sk-wrong",
                          progress=False)
        with pytest.raises(InputError) as stopped:
            export_sheet(folder, tmp_path / "sheet", random_n=4, seed=7, judge=cfg)
    assert getattr(stopped.value, "exit_code", 2) == 2 and "sk-wrong" not in str(stopped.value)
    assert not (tmp_path / "sheet").exists()


def test_compare_of_runs_that_share_no_case_is_refused(exported, tmp_path: Path) -> None:
    folder, manifest = exported
    other = write_folder(tmp_path / "other")
    cases = pl.read_parquet(other / "cases.parquet").with_columns(("x" + pl.col("id")).alias("id"))
    cases.write_parquet(other / "cases.parquet")  # the same judge, on other cases (another golden set)
    line = _one_error_line(ragmeter("review", "compare", folder, other))
    assert "run and other" in line and "no case" in line, line
    sheet = fill(folder / "review" / "review.csv", tmp_path / "filled.csv", human_truth(manifest))
    line = _one_error_line(ragmeter("review", "compare", folder, other, "--human", sheet))
    assert "run and other" in line and "no case" in line, line


def test_export_asking_more_random_cases_than_there_are_says_how_many_it_drew(tmp_path: Path) -> None:
    folder = write_folder(tmp_path / "run")
    proc = ragmeter("review", "export", folder, "--random", "1000")
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((folder / "review" / "manifest.json").read_text())
    assert manifest["random"]["n"] == len(REST_IDS)
    assert f"seeded random {len(REST_IDS)} of the {len(REST_IDS)} other" in manifest["random"]["method"]
    assert "1000" not in proc.stdout
