"""A compressed input (gzip, bzip2, xz, zstd: the forms TREC collections and data dumps are shipped in) gets one line
saying what it is and how to decompress it, from every reader: ``ragmeter trec`` and ``ragmeter.trec.evaluate``,
a golden set or run, a results folder's summary.json and tables, a review sheet. Only gzip was recognised; a
bzip2, xz or zstd file was 'not valid UTF-8 (byte 0x.. at column ..)' with an encoding hint, a Parquet reader's
'File out of specification', or, for a small TREC file without a NUL byte, read as Latin-1 text and refused
line by line."""
from __future__ import annotations

import bz2
import gzip
import json
import lzma
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from ragmeter import _magic
from ragmeter._sniff import json_document
from ragmeter.errors import InputError
from ragmeter.report.data import not_parquet_diagnosis
from ragmeter.trec import evaluate

QRELS = b"1 0 d1 1\n1 0 d2 0\n2 0 d3 1\n"
RUN = b"1 Q0 d1 1 0.5 r\n1 Q0 d2 2 0.4 r\n2 Q0 d3 1 0.3 r\n"

COMPRESSORS = {
    "gzip": (gzip.compress, "gunzip -k"),
    "bzip2": (bz2.compress, "bunzip2 -k"),
    "xz": (lzma.compress, "unxz -k"),
    "zstd": (lambda data: pa.compress(data, codec="zstd", asbytes=True), "unzstd"),
}


def _ragmeter(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmeter", *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
@pytest.mark.parametrize("which", ["q", "r"])
def test_trec_names_the_compression_and_the_command(tmp_path: Path, kind: str, which: str) -> None:
    compress, command = COMPRESSORS[kind]
    (tmp_path / "q").write_bytes(compress(QRELS) if which == "q" else QRELS)
    (tmp_path / "r").write_bytes(compress(RUN) if which == "r" else RUN)
    proc = _ragmeter(tmp_path, "trec", "q", "r")
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr == f"ragmeter: error: {which}: is {kind}-compressed; decompress it first ({command} {which})\n"
    with pytest.raises(InputError, match=f"^{re.escape(str(tmp_path / which))}: is {kind}-compressed"):
        evaluate(tmp_path / "q", tmp_path / "r", "map")


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_a_compressed_run_on_stdin_is_named(tmp_path: Path, kind: str) -> None:
    compress, command = COMPRESSORS[kind]
    (tmp_path / "q").write_bytes(QRELS)
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "trec", "q", "-"], input=compress(RUN),
                          capture_output=True, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == b""
    assert f"is {kind}-compressed; decompress it first ({command} ".encode() in proc.stderr, proc.stderr


def test_a_qrels_whose_first_query_is_spelled_like_bzip2_is_text(tmp_path: Path) -> None:
    """"BZh" and a digit can open a query id: bzip2 is told by the block magic number after them."""
    (tmp_path / "q").write_bytes(b"BZh9 0 d1 1\n")
    (tmp_path / "r").write_bytes(b"BZh9 Q0 d1 1 0.5 r\n")
    proc = _ragmeter(tmp_path, "trec", "-m", "num_q", "-m", "map", "q", "r")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "num_q                 \tall\t1\nmap                   \tall\t1.0000\n"
    assert _magic.compression(b"BZh91AY&SY") == ("bzip2", "bunzip2 -k")
    assert _magic.compression(b"BZh9\x17rE8P\x90") == ("bzip2", "bunzip2 -k")  # an empty file's
    assert _magic.compression(b"BZh9 0 d1 ") is None


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_a_compressed_golden_set_is_named(tmp_path: Path, kind: str) -> None:
    compress, command = COMPRESSORS[kind]
    golden = {"id": "q1", "question": "Q?", "expectedFiles": ["a.md"], "expectedEvidence": ["x"], "category": "c"}
    (tmp_path / "g.jsonl").write_bytes(compress((json.dumps(golden) + "\n").encode()))
    (tmp_path / "r.jsonl").write_text(json.dumps({"id": "q1", "retrieved": [{"file": "a.md", "text": "x"}]}) + "\n")
    proc = _ragmeter(tmp_path, "score", "--golden", "g.jsonl", "--run", "r.jsonl")
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr == f"ragmeter: error: g.jsonl: is {kind}-compressed; decompress it first ({command} g.jsonl)\n"


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_a_compressed_summary_and_table_of_a_results_folder_are_named(tmp_path: Path, kind: str) -> None:
    compress, command = COMPRESSORS[kind]
    summary = tmp_path / "summary.json"
    with pytest.raises(InputError) as raised:
        json_document(summary, compress(b'{"k": 5}'), "write the folder again")
    assert str(raised.value) == f"{summary}: is {kind}-compressed; decompress it first ({command} {summary})"
    cases = tmp_path / "cases.parquet"
    cases.write_bytes(compress(b"PAR1" + b"\0" * 64 + b"PAR1"))
    assert str(not_parquet_diagnosis(cases)).startswith(f"{cases}: is {kind}-compressed, not Parquet; ")


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_a_compressed_review_sheet_is_named(tmp_path: Path, kind: str) -> None:
    from ragmeter.review.importer import _sheet_text

    compress, _ = COMPRESSORS[kind]
    with pytest.raises(InputError, match=f"a binary file \\({kind}-compressed\\), not text"):
        _sheet_text(tmp_path / "sheet.csv", compress(b"id,verdict\nq1,correct\n"))


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
@pytest.mark.parametrize("which", ["golden", "run"])
def test_a_compressed_parquet_file_is_named(tmp_path: Path, kind: str, which: str) -> None:
    """A `.parquet` file that was compressed whole (`gzip run.parquet`, renamed back) was 'cannot read as Parquet:
    Parquet magic bytes not found in footer...'."""
    import polars as pl

    compress, command = COMPRESSORS[kind]
    pl.DataFrame([{"id": "q1", "question": "Q?", "expectedFiles": ["a.md"], "expectedEvidence": ["x"],
                   "category": "c"}]).write_parquet(tmp_path / "golden.parquet")
    pl.DataFrame([{"id": "q1", "retrieved": [{"file": "a.md", "text": "x"}]}]).write_parquet(tmp_path / "run.parquet")
    target = tmp_path / f"{which}.parquet"
    target.write_bytes(compress(target.read_bytes()))
    proc = _ragmeter(tmp_path, "score", "--golden", "golden.parquet", "--run", "run.parquet")
    assert proc.returncode == 2, proc.stdout
    name = f"{which}.parquet"
    assert proc.stderr == f"ragmeter: error: {name}: is {kind}-compressed; decompress it first ({command} {name})\n"


def test_a_zip_archive_named_parquet_is_named(tmp_path: Path) -> None:
    import zipfile

    with zipfile.ZipFile(tmp_path / "run.parquet", "w") as archive:
        archive.writestr("run.jsonl", "{}")
    (tmp_path / "g.jsonl").write_text(json.dumps({"id": "q1", "question": "Q?", "expectedEvidence": ["x"]}) + "\n")
    proc = _ragmeter(tmp_path, "score", "--golden", "g.jsonl", "--run", "run.parquet")
    assert (proc.returncode, proc.stderr) == (2, "ragmeter: error: run.parquet: is a ZIP archive, not Parquet\n")
