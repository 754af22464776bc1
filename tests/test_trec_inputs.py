"""``ragmeter trec`` / ``ragmeter.trec.evaluate`` on input files in shapes trec_eval misreads or cannot read."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ragmeter.errors import InputError
from ragmeter.trec import evaluate

QRELS = "1 0 d1 1\n1 0 d2 0\n2 0 d3 1\n"
RUN = "1 Q0 d1 1 0.5 r\n1 Q0 d2 2 0.4 r\n2 Q0 d3 1 0.3 r\n"
BOM = b"\xef\xbb\xbf"


def trec(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmeter", "trec", *args], capture_output=True, text=True, cwd=tmp_path)


def write(tmp_path: Path, qrels: bytes, run: bytes) -> None:
    (tmp_path / "q").write_bytes(qrels)
    (tmp_path / "r").write_bytes(run)


@pytest.mark.parametrize("which", ["q", "r"])
def test_a_byte_order_mark_is_refused_not_glued_to_the_first_query_id(tmp_path: Path, which: str) -> None:
    """Read as trec_eval reads it, the BOM makes the first line's query '\\ufeff1', a query of its own: the numbers
    were wrong with no word (3 queries instead of 2)."""
    qrels, run = QRELS.encode(), RUN.encode()
    write(tmp_path, BOM + qrels if which == "q" else qrels, BOM + run if which == "r" else run)
    proc = trec(tmp_path, "-q", "-m", "map", "q", "r")
    assert proc.returncode == 2, proc.stdout
    assert proc.stdout == "" and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(f"ragmeter: error: {which}:1: starts with a UTF-8 byte order mark"), proc.stderr
    where = re.escape(str(tmp_path / which))
    with pytest.raises(InputError, match=f"^{where}:1: starts with a UTF-8 byte order mark"):
        evaluate(tmp_path / "q", tmp_path / "r", "map")
    with pytest.raises(InputError, match=f"^{where}:1: starts with a UTF-8 byte order mark"):  # one file, one table
        evaluate(tmp_path / which, {"1": {"d1": 1}}, "map") if which == "q" else evaluate({"1": {"d1": 1}}, tmp_path / "r", "map")
    write(tmp_path, qrels, run)  # the same files without the BOM
    assert trec(tmp_path, "-m", "num_q", "q", "r").stdout == "num_q                 \tall\t2\n"


@pytest.mark.parametrize("which", ["q", "r"])
def test_a_gzip_file_gets_one_diagnosis_of_the_whole_file(tmp_path: Path, which: str) -> None:
    """A gzipped qrels or run (as TREC distributes them) was 'FILE:1: not valid UTF-8 text'."""
    import gzip

    qrels, run = QRELS.encode(), RUN.encode()
    write(tmp_path, gzip.compress(qrels) if which == "q" else qrels, gzip.compress(run) if which == "r" else run)
    proc = trec(tmp_path, "q", "r")
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr == f"ragmeter: error: {which}: is gzip-compressed; decompress it first (gunzip -k {which})\n"
    with pytest.raises(InputError, match=f"^{re.escape(str(tmp_path / which))}: is gzip-compressed"):
        evaluate(tmp_path / "q", tmp_path / "r", "map")


@pytest.mark.parametrize("which", ["q", "r"])
def test_a_utf16_file_gets_one_diagnosis_of_the_whole_file(tmp_path: Path, which: str) -> None:
    """A run written by a PowerShell redirect is UTF-16: it was 'FILE:1: not valid UTF-8 text'."""
    qrels, run = QRELS.encode(), RUN.encode()
    write(tmp_path, QRELS.encode("utf-16") if which == "q" else qrels, RUN.encode("utf-16") if which == "r" else run)
    proc = trec(tmp_path, "q", "r")
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(f"ragmeter: error: {which}: is UTF-16 text (a PowerShell redirect?)"), proc.stderr
    with pytest.raises(InputError, match=f"^{re.escape(str(tmp_path / which))}: is UTF-16 text"):
        evaluate(tmp_path / "q", tmp_path / "r", "map")


#: trec_eval 10's long options (its getopt_long table) and the short flag each stands for
LONG_OPTIONS = [
    (["--query_eval_wanted"], ["-q"]),
    (["--nosummary", "--query_eval_wanted"], ["-n", "-q"]),
    (["--complete_rel_info_wanted"], ["-c"]),
    (["--Judged_docs_only"], ["-J"]),
    (["--measure", "P.1,2"], ["-m", "P.1,2"]),
    (["--measure=map"], ["-m", "map"]),
    (["--level_for_rel", "2"], ["-l", "2"]),
    (["--Number_docs_in_coll", "10", "--measure", "utility"], ["-N", "10", "-m", "utility"]),
    (["--Max_retrieved_per_topic", "1"], ["-M", "1"]),
    (["--Rel_info_format", "qrels", "--Results_format", "trec_results"], []),
    (["-R", "qrels", "-Ttrec_results"], []),
]


@pytest.mark.parametrize("long_args,short_args", LONG_OPTIONS)
def test_trec_eval_s_long_options_mean_what_its_short_flags_mean(tmp_path: Path, long_args: list,
                                                                 short_args: list) -> None:
    """Scripts written for trec_eval 10 pass its long options (and the default formats by name): they were
    usage errors."""
    write(tmp_path, QRELS.replace("d2 0", "d2 2").encode(), RUN.encode())
    by_long, by_short = trec(tmp_path, *long_args, "q", "r"), trec(tmp_path, *short_args, "q", "r")
    assert by_long.returncode == 0, by_long.stderr
    assert by_long.stdout == by_short.stdout and by_long.stdout


def test_dash_v_prints_the_version_on_stderr_and_exits_0(tmp_path: Path) -> None:
    """trec_eval -v (and --version) prints its version on stderr and exits 0, with no files given."""
    import ragmeter

    for flag in ("-v", "--version"):
        proc = trec(tmp_path, flag)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "" and ragmeter.__version__ in proc.stderr and "trec_eval" in proc.stderr


@pytest.mark.parametrize("args,said", [
    (["-R", "prefs"], "-R prefs: ragmeter trec reads qrels files only"),
    (["--Results_format", "trec_results_x"], "-T trec_results_x: ragmeter trec reads trec_results files only"),
    (["-Z", "zmeans.txt"], "-Z (z-scores against a Zmean file) is not supported"),
    (["-D", "1"], "-D (debug output) is not supported"),
    (["-o"], "-o (trec_eval's old output format) is not supported"),
])
def test_trec_eval_options_ragmeter_does_not_implement_are_named(tmp_path: Path, args: list, said: str) -> None:
    """Not 'unrecognized arguments: -Z zmeans.txt' (which reads as a typo): the option exists in trec_eval and is
    not implemented here; exit 2, nothing on stdout."""
    write(tmp_path, QRELS.encode(), RUN.encode())
    proc = trec(tmp_path, *args, "q", "r")
    assert proc.returncode == 2 and proc.stdout == ""
    assert said in proc.stderr and "Traceback" not in proc.stderr


def test_a_run_on_stdin_is_read_as_trec_eval_reads_results_file_dash(tmp_path: Path) -> None:
    """trec_eval reads the results file from stdin when it is '-' (`ranker | trec_eval qrels -`)."""
    write(tmp_path, QRELS.encode(), RUN.encode())
    from_file = trec(tmp_path, "-q", "-m", "all_trec", "q", "r")
    piped = subprocess.run([sys.executable, "-m", "ragmeter", "trec", "-q", "-m", "all_trec", "q", "-"],
                           input=RUN, capture_output=True, text=True, cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == from_file.stdout and "map" in piped.stdout
    bad = subprocess.run([sys.executable, "-m", "ragmeter", "trec", "q", "-"], input=RUN + "2 Q0 d4 4 x r\n",
                         capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("ragmeter: error: stdin:4: "), bad.stderr
    bom = subprocess.run([sys.executable, "-m", "ragmeter", "trec", "q", "-"], input=BOM + RUN.encode(),
                         capture_output=True, cwd=tmp_path)
    assert bom.returncode == 2 and b"stdin:1: starts with a UTF-8 byte order mark" in bom.stderr, bom.stderr


def test_a_qrels_file_beside_a_dict_run_is_named_with_its_own_line_numbers(tmp_path: Path) -> None:
    """A qrels file read into columns (the other input a dict) named its errors 'qrels:N' with N a row: the blank
    line and comment-free padding the parser skips made N differ from the file's line."""
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 1\n\n   \nq1 0 d2 0\n\nq1 0 d1 1\n")
    (tmp_path / "run.txt").write_text("q1 Q0 d1 1 0.5 r\n")
    with pytest.raises(InputError) as both_files:
        evaluate(qrels, tmp_path / "run.txt", "map")
    with pytest.raises(InputError) as mixed:
        evaluate(qrels, {"q1": {"d1": 0.5}}, "map")
    assert str(mixed.value) == str(both_files.value)
    assert str(mixed.value) == f"{qrels}:6: document d1 is judged twice for query q1 (first at line 1)"


def test_a_run_file_beside_dict_qrels_is_named_with_its_own_line_numbers(tmp_path: Path) -> None:
    run = tmp_path / "run.txt"
    run.write_text("\nq1 Q0 d1 1 0.5 r\n\nq1 Q0 d2 2 0.4 r\n \t\nq1 Q0 d1 3 0.3 r\n")
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\n")
    with pytest.raises(InputError) as both_files:
        evaluate(tmp_path / "qrels.txt", run, "map")
    with pytest.raises(InputError) as mixed:
        evaluate({"q1": {"d1": 1}}, run, "map")
    assert str(mixed.value) == str(both_files.value)
    assert str(mixed.value) == f"{run}:6: document d1 appears twice in the ranking of query q1 (first at line 2)"


def test_a_judged_query_missing_from_a_run_file_beside_dict_qrels_names_the_run_file(tmp_path: Path) -> None:
    run = tmp_path / "run.txt"
    run.write_text("q1 Q0 d1 1 0.5 r\n")
    with pytest.raises(InputError) as mixed:
        evaluate({"q1": {"d1": 1}, "q2": {"d2": 1}}, run, "map")
    assert str(mixed.value).startswith(f"{run}: query q2 has judgements in qrels but no ranking in the run; "
                                       "pass complete=True"), str(mixed.value)


def test_a_judged_query_of_a_qrels_file_missing_from_a_dict_run_names_the_qrels_file(tmp_path: Path) -> None:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 1\nq2 0 d2 1\n")
    with pytest.raises(InputError) as mixed:
        evaluate(qrels, {"q1": {"d1": 0.5}}, "map")
    assert str(mixed.value).startswith(f"run: query q2 has judgements in {qrels} but no ranking in the run; "
                                       "pass complete=True"), str(mixed.value)



@pytest.mark.parametrize("lines,said", [([1], "qrels: 1 line numbers but 2 values"),
                                        ([1, 0], "qrels_file lines: line numbers must be positive")])
def test_file_facts_that_do_not_fit_the_columns_are_an_input_error_not_a_panic(lines: list, said: str) -> None:
    """The binding takes a file's facts (path, line of each row, first line not UTF-8) beside its columns; facts a
    caller got wrong are refused in words."""
    import numpy as np

    from ragmeter import _core
    from ragmeter.trec import _qrels_columns, _run_columns

    *q, q_groups, _ = _qrels_columns({"q1": {"d1": 1, "d2": 0}})
    *r, r_groups, _ = _run_columns({"q1": {"d1": 0.5}})
    facts = ("q.txt", np.array(lines, dtype=np.int64), None)
    with pytest.raises(InputError, match=re.escape(said)):
        _core.trec_evaluate_columns(*q, *r, "r", ["map"], None, qrels_groups=q_groups, run_groups=r_groups,
                                    qrels_file=facts)


def test_a_file_read_by_trec_read_run_carries_its_facts(tmp_path: Path) -> None:
    from ragmeter import _core

    (tmp_path / "r").write_bytes(b"\n1 Q0 d1 1 0.5 r\n1 Q0 d\xe9 2 0.4 r\n")
    *_, (path, lines, not_utf8_line) = _core.trec_read_run(str(tmp_path / "r"))
    assert (path, list(lines), not_utf8_line) == (str(tmp_path / "r"), [2, 3], 3)
