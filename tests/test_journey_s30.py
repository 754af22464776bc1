"""A new team's first week with ragmeter (session 30): the steps of the journey that went wrong, each run as the
team ran it. A golden set kept in a spreadsheet had no documented way in (the CSV was refused with a pointer to a
section that does not say how to convert it), and report.md ran the calibration warning into the table below it."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "python" / "ragmeter" / "_example"

# A sheet as a team exports it: quoted commas, empty cells, a list of phrases in one cell (one per line, as the
# README says to write it), categories in mixed case, and Excel's byte-order mark.
SHEET = (
    "\ufeffid,question,expectedFileNames,expectedEvidence,referenceAnswer,category,source\r\n"
    'fact-01,"Which database is primary, and which version?",handbook.md,PostgreSQL 15,'
    '"PostgreSQL 15, with read replicas",Fact,wiki\r\n'
    'multi-01,Which DB version and which CI?,"handbook.md\nops.md","PostgreSQL 15\nGitHub Actions",'
    '"PostgreSQL 15; GitHub Actions",multihop,\r\n'
    "none-01,What is the CEO's salary?,,,,noanswer,wiki\r\n"
)


def _ragmeter(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "ragmeter", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def _readme_spreadsheet_script() -> str:
    """The Python block of the README's section on golden sets kept in a spreadsheet."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^### A golden set kept in a spreadsheet\n(.*?)(?=^#)", readme, re.M | re.S)
    assert section, "README.md has no section 'A golden set kept in a spreadsheet'"
    block = re.search(r"```python\n(.*?)```", section.group(1), re.S)
    assert block, "that section has no Python block"
    return block.group(1)


def test_a_csv_golden_set_is_refused_naming_how_to_convert_it(tmp_path: Path) -> None:
    (tmp_path / "golden.csv").write_text(SHEET, encoding="utf-8")
    done = _ragmeter("audit", "--golden", "golden.csv", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "ragmeter: error: golden.csv: looks like CSV (first line: id,question,expectedFileNames,expecte...); "
        "golden sets are JSON Lines (one object per line), see README#formats; a spreadsheet's CSV export "
        "converts with the script in README#a-golden-set-kept-in-a-spreadsheet"]


def test_the_readme_script_turns_a_spreadsheet_export_into_a_golden_set(tmp_path: Path) -> None:
    (tmp_path / "golden.csv").write_text(SHEET, encoding="utf-8")
    script = tmp_path / "sheet_to_jsonl.py"
    script.write_text(_readme_spreadsheet_script(), encoding="utf-8")
    subprocess.run([sys.executable, str(script)], cwd=tmp_path, check=True, timeout=60)

    from ragmeter.dataset import load_golden

    golden = load_golden(tmp_path / "golden.jsonl")
    rows = {r["id"]: r for r in golden.to_dicts()}
    assert rows["fact-01"]["question"] == "Which database is primary, and which version?"
    assert rows["fact-01"]["reference_answer"] == "PostgreSQL 15, with read replicas"
    assert rows["fact-01"]["expected_evidence"] == ["PostgreSQL 15"]
    assert rows["multi-01"]["expected_files"] == ["handbook.md", "ops.md"]
    assert rows["multi-01"]["expected_evidence"] == ["PostgreSQL 15", "GitHub Actions"]
    assert rows["multi-01"]["source"] is None  # an empty cell is no source, not a source named ''
    assert rows["none-01"]["expected_files"] == [] and rows["none-01"]["expected_evidence"] == []
    assert rows["none-01"]["reference_answer"] is None
    assert rows["fact-01"]["category"] == "Fact"  # kept as written: audit names the spelling variants


@pytest.fixture(scope="module")
def demo_with_low_agreement(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's folder with the example reviewer's sheet imported under a bar the judge misses (85% < 90%)."""
    cwd = tmp_path_factory.mktemp("demo")
    assert _ragmeter("demo", "--out", "demo", cwd=cwd).returncode == 0
    done = _ragmeter("review", "import", "demo", str(EXAMPLE / "review_filled.csv"), "--min-agreement", "0.9",
                     cwd=cwd)
    assert done.returncode == 0, done.stderr
    assert "below --min-agreement 90%" in done.stdout
    return cwd / "demo"


def test_report_md_keeps_the_calibration_warning_apart_from_its_table(demo_with_low_agreement: Path) -> None:
    """Without a blank line the table's header row continues the warning's paragraph: Markdown renderers that do
    not let a table interrupt a paragraph (Python-Markdown, pandoc's default) show the table as text."""
    lines = (demo_with_low_agreement / "report.md").read_text(encoding="utf-8").splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("**Warning:** agreement 85.0%"))
    assert lines[at + 1] == "", lines[at:at + 3]
    assert lines[at + 2].startswith("|")


def test_report_md_ends_with_a_line_break(demo_with_low_agreement: Path) -> None:
    """A text file's last line ends with a newline: `cat report.md` leaves the prompt on a line of its own, and a
    report kept in git diffs without 'No newline at end of file'."""
    assert (demo_with_low_agreement / "report.md").read_bytes().endswith(b"\n")
