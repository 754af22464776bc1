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
