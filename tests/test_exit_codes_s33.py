"""The README's exit-status table and bad input files, checked the way a CI script meets them: each case runs
``python -m ragmeter`` in a subprocess and checks the exit status, the one diagnosis line (naming the file), that
no traceback is printed and that nothing is left in ``--out``."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Sequence

import pytest

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "python" / "ragmeter" / "_example"
#: a loopback port nothing listens on: a judge pointed there can make no call
CLOSED = "http://127.0.0.1:9/v1"


def ragmeter(cwd: Path, *args: Any) -> subprocess.CompletedProcess:
    env = dict(os.environ, RAGMETER_API_KEY="sk-test-s33", PYTHONPATH=str(ROOT / "python"))
    return subprocess.run([sys.executable, "-m", "ragmeter", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


def refused(proc: subprocess.CompletedProcess) -> str:
    """The one error line of a refused command (exit 2, no traceback, nothing else on stderr but notes)."""
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("ragmeter: note:")]
    assert len(errors) == 1, proc.stderr
    prefix = "ragmeter: error: "
    assert errors[0].startswith(prefix), proc.stderr
    return errors[0][len(prefix):]


def records(path: Path) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("{")]


def write_jsonl(path: Path, rows: Sequence[Dict[str, Any]], encoding: str = "utf-8") -> Path:
    path.write_bytes("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode(encoding))
    return path


# ---------------------------------------------------------------------------
# Exit status 2: `judge` input of which every row lacks what its metric needs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["judge", "eval"])
def test_a_judge_with_nothing_to_judge_exits_2_and_writes_nothing(tmp_path: Path, command: str) -> None:
    """A run without a single answer, judged for correctness: nothing the user asked for can be measured. `judge`
    refused it; `eval` printed `correctness mean n/a scored 0/51` and exited 0, the status of a run measured in
    full, so a CI job whose collect target lost the answer field went on green."""
    write_jsonl(tmp_path / "run.jsonl", [{k: v for k, v in r.items() if k != "answer"} for r in records(EX / "run.jsonl")])
    said = refused(ragmeter(tmp_path, command, "--golden", EX / "golden.jsonl", "--run", "run.jsonl",
                            "--base-url", CLOSED, "--model", "m", "--metrics", "correctness", "--out", "out"))
    assert said.startswith("nothing to judge: all 51 judge rows (51 cases x 1 metrics) lack their input "
                           "(correctness: the run has no answer for this case); nothing written"), said
    assert not (tmp_path / "out").exists()


def test_eval_with_a_judge_of_a_run_whose_every_case_failed_keeps_exit_3(tmp_path: Path) -> None:
    """The exception the README names: a run whose cases all failed when collected is written, warned and 3."""
    rows = [dict(r, retrieved=None, answer=None, error="timeout") for r in records(EX / "run.jsonl")]
    write_jsonl(tmp_path / "run.jsonl", rows)
    proc = ragmeter(tmp_path, "eval", "--golden", EX / "golden.jsonl", "--run", "run.jsonl",
                    "--base-url", CLOSED, "--model", "m", "--metrics", "correctness", "--out", "out")
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    assert (tmp_path / "out" / "summary.json").is_file()


# ---------------------------------------------------------------------------
# Bad input files: encodings
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("word", ["Méridian", "Zürich", "Ärger"])
def test_latin1_text_is_told_to_convert_from_cp1252_not_gb18030(tmp_path: Path, word: str) -> None:
    """An accented letter before an ASCII one (é r) also reads as one GBK character, so a Latin-1 golden set was
    told "if it is Chinese text saved as GB18030 (GBK), convert it: iconv -f gb18030"."""
    rows = [r for r in records(EX / "golden.jsonl") if json.dumps(r, ensure_ascii=False).isascii()]
    rows[0]["question"] = f"Where is {word} office?"
    write_jsonl(tmp_path / "golden.jsonl", rows, encoding="latin-1")
    said = refused(ragmeter(tmp_path, "score", "--golden", "golden.jsonl", "--run", EX / "run.jsonl", "--out", "out"))
    assert said.startswith("golden.jsonl:1: not valid UTF-8 (byte 0x"), said
    assert said.endswith("if it is Latin-1 or Windows-1252 text, convert it: iconv -f cp1252 -t utf-8"), said
    assert not (tmp_path / "out").exists()


def test_utf16_without_a_byte_order_mark_is_read_when_its_chinese_has_a_nul_low_byte(tmp_path: Path) -> None:
    """UTF-16-LE without a BOM is recognised by the NUL in every other byte; a CJK character whose low byte is 0
    (一, U+4E00) put a NUL on the other side too, and the file was called "a binary file (a NUL byte at offset 1)"."""
    text = (EX / "golden.jsonl").read_text(encoding="utf-8")
    assert "一" in text  # the bundled golden set holds one (else this test proves nothing)
    (tmp_path / "utf16.jsonl").write_bytes(text.encode("utf-16-le"))
    expected = ragmeter(tmp_path, "score", "--golden", EX / "golden.jsonl", "--run", EX / "run.jsonl", "--json")
    got = ragmeter(tmp_path, "score", "--golden", "utf16.jsonl", "--run", EX / "run.jsonl", "--json")
    assert got.returncode == expected.returncode == 0, got.stderr
    assert json.loads(got.stdout)["overall"] == json.loads(expected.stdout)["overall"]


# ---------------------------------------------------------------------------
# Bad input files: a results folder's summary.json (report, compare)
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("s33") / "res"
    proc = ragmeter(folder.parent, "score", "--golden", EX / "golden.jsonl", "--run", EX / "run.jsonl", "--out", folder)
    assert proc.returncode == 0, proc.stderr
    return folder


def _with_summary(results: Path, tmp_path: Path, content: bytes) -> Path:
    folder = tmp_path / "res"
    shutil.copytree(results, folder)
    (folder / "summary.json").write_bytes(content)
    return folder


@pytest.mark.parametrize("encode", [
    pytest.param(lambda b: b"\xef\xbb\xbf" + b, id="utf8-bom"),
    pytest.param(lambda b: b.decode("utf-8").encode("utf-16"), id="utf16"),
    pytest.param(lambda b: b.replace(b"\n", b"\r\n"), id="crlf"),
])
def test_a_summary_re_saved_by_a_windows_editor_is_read(results: Path, tmp_path: Path, encode: Any) -> None:
    """A summary.json opened and saved again in Notepad (a BOM) or by PowerShell (UTF-16) holds the same JSON:
    `report` refused it with "invalid JSON (Unexpected UTF-8 BOM (decode using utf-8-sig): line 1 column 1
    (char 0))" or "'utf-8' codec can't decode byte 0xff in position 0"."""
    folder = _with_summary(results, tmp_path, encode((results / "summary.json").read_bytes()))
    proc = ragmeter(tmp_path, "report", folder, "--out", "rep")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "rep" / "report.html").is_file()


@pytest.mark.parametrize("command", ["report", "compare"])
@pytest.mark.parametrize("damage,said", [
    pytest.param(lambda b: gzip.compress(b), "res/summary.json: is gzip-compressed; decompress it first "
                 "(gunzip -k res/summary.json)", id="gzip"),
    pytest.param(lambda b: b[: len(b) // 2], "res/summary.json:{line}: invalid JSON: ", id="truncated"),
    pytest.param(lambda b: b.replace(b'"n_labeled"', '"n_labelled_à"'.encode("latin-1"), 1),
                 "res/summary.json:{line}: not valid UTF-8 (byte 0xe0 at column ", id="latin1"),
    pytest.param(lambda b: b"", "res/summary.json: is empty", id="empty"),
])
def test_a_damaged_summary_is_one_line_naming_the_file_and_line(results: Path, tmp_path: Path, command: str,
                                                                damage: Any, said: str) -> None:
    """Before: "res/summary.json: invalid JSON ('utf-8' codec can't decode byte 0x8b in position 1: invalid start
    byte)" for a gzip file, Python's decoder words and a character offset for the others."""
    raw = (results / "summary.json").read_bytes()
    bad = damage(raw)
    folder = _with_summary(results, tmp_path, bad)
    args = ["report", "res", "--out", "rep"] if command == "report" else ["compare", "res", results, "--json", "c.json"]
    line = _first_bad_line(bad)
    got = refused(ragmeter(tmp_path, *args))
    assert got.startswith(said.format(line=line)), got
    assert not (tmp_path / "rep").exists() and not (tmp_path / "c.json").exists()
    assert folder.is_dir()


def _first_bad_line(raw: bytes) -> int:
    """The line where JSON decoding of ``raw`` first fails (the last line of a file cut short)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return raw[: exc.start].count(b"\n") + 1
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return exc.lineno
    return 0


# ---------------------------------------------------------------------------
# Bad input files: trec
# ---------------------------------------------------------------------------


def _parquet_of(path: Path, out: Path) -> Path:
    import polars as pl

    pl.read_csv(path, separator=" ", has_header=False).write_parquet(out)
    return out


@pytest.mark.parametrize("which", ["qrels", "run"])
@pytest.mark.parametrize("shape,said", [
    ("parquet", "is a Parquet file; qrels and runs are"),
    ("utf16-no-bom", "is UTF-16 text (a PowerShell redirect?)"),
])
def test_a_trec_file_in_another_shape_gets_one_diagnosis_of_the_whole_file(tmp_path: Path, which: str, shape: str,
                                                                          said: str) -> None:
    """Before: "qrels.bad:1: not valid UTF-8 text" for Parquet, and 'relevance "\\00\\0" is not an integer' for
    UTF-16 without a byte order mark."""
    good = {"qrels": EX / "trec" / "qrels.txt", "run": EX / "trec" / "run.txt"}
    bad = tmp_path / f"{which}.bad"
    if shape == "parquet":
        _parquet_of(good[which], bad)
    else:
        bad.write_bytes(good[which].read_text(encoding="utf-8").encode("utf-16-le"))
    args = [bad.name, good["run"]] if which == "qrels" else [good["qrels"], bad.name]
    got = refused(ragmeter(tmp_path, "trec", "-c", *args))
    assert got.startswith(f"{bad.name}: {said}"), got


# ---------------------------------------------------------------------------
# Bad input files: judge --cases
# ---------------------------------------------------------------------------


def test_a_judge_cases_file_cut_short_names_its_last_line_in_the_readers_words(tmp_path: Path) -> None:
    """The golden and run readers say 'invalid JSON: Unterminated string starting at (column 80)'; --cases said
    'Unterminated string starting at at column 80'."""
    rows = [{"id": f"c{i}", "question": "q?", "reference_answer": "r", "answer": "a", "contexts": ["x"]}
            for i in range(3)]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    (tmp_path / "cases.jsonl").write_text(text[: text.rindex('"a"') + 2])  # the last line cut inside a string
    got = refused(ragmeter(tmp_path, "judge", "--cases", "cases.jsonl", "--base-url", CLOSED, "--model", "m",
                           "--out", "out"))
    assert got.startswith("cases.jsonl:3: invalid JSON: Unterminated string starting at (column "), got
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------
# Bad input files: a --cache that is another program's SQLite database
# ---------------------------------------------------------------------------


def _someone_elses_database(path: Path) -> bytes:
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.execute("INSERT INTO users VALUES ('ada')")
    conn.commit()
    conn.close()
    return path.read_bytes()


@pytest.mark.parametrize("command", ["judge", "collect"])
def test_a_cache_that_is_another_programs_sqlite_database_is_refused_and_left_alone(tmp_path: Path,
                                                                                 command: str) -> None:
    """`cache repair` refuses such a file ('no judge_cache table'); a run took it: it added its table to the
    user's database, switched it to WAL journaling and exited 0."""
    before = _someone_elses_database(tmp_path / "app.db")
    (tmp_path / "target.py").write_text("def ask(case):\n    return {'answer': 'a', 'retrieved': []}\n")
    args = (["judge", "--golden", EX / "golden.jsonl", "--run", EX / "run.jsonl", "--base-url", CLOSED,
             "--model", "m", "--out", "out"] if command == "judge" else
            ["collect", "--golden", EX / "golden.jsonl", "--target", "target:ask", "--out", "out/run.jsonl"])
    got = refused(ragmeter(tmp_path, *args, "--cache", "app.db"))
    assert got.startswith(f"app.db: not a {command} cache: an SQLite database with other tables (users)"), got
    assert (tmp_path / "app.db").read_bytes() == before
    assert not (tmp_path / "app.db-wal").exists()
    assert not (tmp_path / "out" / ("judge.parquet" if command == "judge" else "run.jsonl")).exists()
    if command == "collect":  # the folder made for --out dir/run.jsonl is not left behind, empty
        assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------
# Exit status 2: a run whose every case failed when it was collected (score, sweep, eval without a judge)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["score", "--out", "out"], ["sweep", "--out", "out.csv"],
                                     ["eval", "--no-judge", "--out", "out"]])
def test_a_run_whose_every_case_failed_says_so_not_write_an_empty_list(tmp_path: Path, command: List[str]) -> None:
    """Nothing to measure (exit 2, as before), but the reason is the collection: the line said "'retrieved' is
    null in every case of the run (no chunk list) ... write [] for a retriever that found nothing", advice for an
    answer-only run, not for a collect run that failed on every case."""
    rows = [dict(r, retrieved=None, answer=None, error="no reply in 30 s", error_kind="timeout")
            for r in records(EX / "run.jsonl")]
    rows[0].update(error="HTTP 500", error_kind="http_500")
    write_jsonl(tmp_path / "run.jsonl", rows)
    got = refused(ragmeter(tmp_path, command[0], "--golden", EX / "golden.jsonl", "--run", "run.jsonl", *command[1:]))
    assert got == (f"run.jsonl: every case of the run failed when it was collected ({len(rows) - 1} timeout, "
                   "1 http_500), so there is nothing to measure; rerun `ragmeter collect` (the run file keeps each "
                   "case's error)"), got
    assert not (tmp_path / command[-1]).exists()


# ---------------------------------------------------------------------------
# Bad input files: a results folder's cases.parquet (report, compare)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("damage,said", [
    pytest.param(lambda b: b"", "is empty", id="empty"),
    pytest.param(lambda b: (EX / "run.jsonl").read_bytes(), "is JSON text, not Parquet", id="jsonl"),
    pytest.param(lambda b: gzip.compress(b), "is gzip-compressed, not Parquet", id="gzip"),
    pytest.param(lambda b: b[: len(b) // 2], "is cut short (no Parquet footer)", id="truncated"),
])
@pytest.mark.parametrize("command", ["report", "compare"])
def test_a_damaged_cases_table_is_one_line_saying_what_the_file_is(results: Path, tmp_path: Path, command: str,
                                                                  damage: Any, said: str) -> None:
    """Before: 'cannot read Parquet file (parquet: File out of specification: The file must end with PAR1 or PARE)'
    whatever the file held."""
    folder = tmp_path / "res"
    shutil.copytree(results, folder)
    (folder / "cases.parquet").write_bytes(damage((results / "cases.parquet").read_bytes()))
    args = ["report", "res", "--out", "rep"] if command == "report" else ["compare", "res", results, "--json", "c.json"]
    got = refused(ragmeter(tmp_path, *args))
    # the fixture's folder is one `ragmeter score` wrote, and its summary.json says so
    assert got == f"res/cases.parquet: {said}; restore it, or write the folder again with `ragmeter score --out DIR`", got
    assert not (tmp_path / "rep").exists() and not (tmp_path / "c.json").exists()


@pytest.mark.parametrize("command", ["report", "compare"])
def test_a_folder_in_place_of_the_cases_table_is_named_as_a_folder(results: Path, tmp_path: Path,
                                                                   command: str) -> None:
    """A partitioned write (Spark, polars' partitioned sink) leaves cases.parquet a folder. Before: 'missing
    cases.parquet', though it is there."""
    folder = tmp_path / "res"
    shutil.copytree(results, folder)
    (folder / "cases.parquet").unlink()
    (folder / "cases.parquet").mkdir()
    args = ["report", "res", "--out", "rep"] if command == "report" else ["compare", "res", results, "--json", "c.json"]
    got = refused(ragmeter(tmp_path, *args))
    assert got.startswith("res/cases.parquet: is a folder, not a file"), got
    assert not (tmp_path / "rep").exists() and not (tmp_path / "c.json").exists()
