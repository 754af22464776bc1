"""``ragmeter score --out`` (:func:`ragmeter.retrieval.score_into`) writes ``chunks.parquet`` while a Parquet run
is scored: the same four files as ``ragmeter.score(...).write(dir)``, the file written in one pass when the run is
in golden order, the second read otherwise, and nothing half-written when scoring or writing fails."""
from __future__ import annotations

import errno
import os
import json
import threading
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import ragmeter
from ragmeter import _stream_score
from ragmeter.errors import InputError
from ragmeter.retrieval import score_into

from test_score_streaming import make_case_files, tiny_slices  # noqa: F401 - the fixture

FILES = ("cases.parquet", "chunks.parquet", "summary.json", "warnings.json")


def assert_same_folders(a: Path, b: Path) -> None:
    for name in FILES:
        if name.endswith(".parquet"):
            assert_frame_equal(pl.read_parquet(a / name), pl.read_parquet(b / name))
        else:
            assert json.loads((a / name).read_text()) == json.loads((b / name).read_text())


@pytest.fixture
def second_reads(monkeypatch):
    """How many times chunks.parquet was written from a second read of the run's texts."""
    calls = []
    real = _stream_score._ChunkSource.write

    def counted(self, path):  # type: ignore[no-untyped-def]
        calls.append(path)
        return real(self, path)

    monkeypatch.setattr(_stream_score._ChunkSource, "write", counted)
    return calls


def no_writer_thread() -> bool:
    return not any(t.name == "ragmeter-chunks" for t in threading.enumerate())


@pytest.mark.parametrize("seed,options,one_pass", [
    (11, {}, True), (12, {"missing": 4}, True), (13, {"null_files": "none"}, True),
    (14, {"shuffle": True}, False),  # not in golden order: read again
    (15, {"null_files": "all"}, True), (16, {"null_files": "all", "missing": 3, "repeat_texts": False}, True),
])
def test_the_folder_equals_the_api_write(tmp_path, tiny_slices, second_reads, seed, options, one_pass):
    golden, run = make_case_files(tmp_path, seed, **options)
    ragmeter.score(golden, run).write(tmp_path / "api")
    assert len(second_reads) == 1
    result = score_into(golden, run, tmp_path / "cli")
    assert len(second_reads) == (1 if one_pass else 2)
    assert_same_folders(tmp_path / "api", tmp_path / "cli")
    assert sorted(p.name for p in (tmp_path / "cli").iterdir()) == sorted(FILES)  # no temporary file left
    assert no_writer_thread()
    # the result can be written again elsewhere (the texts read again: the first file was moved into place)
    result.write(tmp_path / "again")
    assert_same_folders(tmp_path / "api", tmp_path / "again")


def test_marks_changed_after_the_last_slice_are_written_from_a_second_read(tmp_path, tiny_slices, second_reads,
                                                                             monkeypatch):
    """The file written while scoring has each slice's marks; if the whole run changes one (as
    ``mark_no_file_in_run`` may), the file is not kept."""
    real = _stream_score.mark_no_file_in_run

    def changed(match, expected_files):  # type: ignore[no-untyped-def]
        real(match, expected_files)
        match.relevant = match.relevant.copy()
        # a chunk of a decided case: an undecided case's chunks are null in the table whatever their mark
        decided = np.flatnonzero(np.repeat(match.labeled.astype(bool), np.diff(match.chunk_offsets)))
        match.relevant[decided[-1]] = not match.relevant[decided[-1]]

    monkeypatch.setattr(_stream_score, "mark_no_file_in_run", changed)
    golden, run = make_case_files(tmp_path, 20, null_files="all")
    ragmeter.score(golden, run).write(tmp_path / "api")
    score_into(golden, run, tmp_path / "cli")
    assert len(second_reads) == 2
    assert_same_folders(tmp_path / "api", tmp_path / "cli")
    assert sorted(p.name for p in (tmp_path / "cli").iterdir()) == sorted(FILES)


def test_the_command_writes_the_same_folder(tmp_path, tiny_slices):
    from ragmeter.cli import main

    golden, run = make_case_files(tmp_path, 21)
    ragmeter.score(golden, run).write(tmp_path / "api")
    assert main(["score", "--golden", str(golden), "--run", str(run), "--out", str(tmp_path / "cli")]) == 0
    assert_same_folders(tmp_path / "api", tmp_path / "cli")


def test_a_run_that_cannot_be_scored_leaves_the_folder_as_it_was(tmp_path, tiny_slices):
    golden, run = make_case_files(tmp_path, 17)
    rows = pl.read_parquet(run)
    pl.concat([rows, rows.head(1)]).write_parquet(run)  # a duplicate id, found after the last slice
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "chunks.parquet").write_text("an earlier run's")
    with pytest.raises(InputError, match="duplicate"):
        score_into(golden, run, out)
    assert sorted(p.name for p in out.iterdir()) == ["chunks.parquet", "notes.txt"]
    assert (out / "chunks.parquet").read_text() == "an earlier run's"
    with pytest.raises(InputError):
        score_into(golden, run, tmp_path / "new")
    assert not (tmp_path / "new").exists()
    assert no_writer_thread()


def test_an_interrupt_while_scoring_stops_the_writer(tmp_path, tiny_slices, monkeypatch):
    golden, run = make_case_files(tmp_path, 18)
    real = _stream_score.match_relevance
    calls = []

    def interrupted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 4:  # the writer has rows of three slices by now
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(_stream_score, "match_relevance", interrupted)
    with pytest.raises(KeyboardInterrupt):
        score_into(golden, run, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert no_writer_thread()


def test_a_failed_chunk_write_names_the_file_and_writes_nothing(tmp_path, tiny_slices, monkeypatch, capsys):
    import pyarrow.parquet as pq

    from ragmeter.cli import main

    class FullDisk(pq.ParquetWriter):
        def write_table(self, table, row_group_size=None):  # type: ignore[no-untyped-def]
            super().write_table(table, row_group_size)  # the first slice is written, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq, "ParquetWriter", FullDisk)
    golden, run = make_case_files(tmp_path, 19)
    out = tmp_path / "out"
    with pytest.raises(OSError) as raised:
        score_into(golden, run, out)
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(out / "chunks.parquet")
    assert not out.exists() and no_writer_thread()
    assert main(["score", "--golden", str(golden), "--run", str(run), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(out / "chunks.parquet") in err[0] and "No space left" in err[0]
    assert not out.exists()


def test_the_script_writes_everything_before_its_quick_exit(tmp_path):
    """``ragmeter score`` ends with os._exit once its output is flushed: the folder and a JSON summary larger
    than any pipe buffer still arrive whole."""
    import os
    import subprocess
    import sys

    from ragmeter._io import strict_json

    golden, run = make_case_files(tmp_path, 22, n=3000)
    expected = ragmeter.score(golden, run)
    expected.write(tmp_path / "api")
    env = {**os.environ, "PYTHONPATH": str(Path(ragmeter.__file__).parent.parent)}
    command = [sys.executable, "-m", "ragmeter", "score", "--golden", str(golden), "--run", str(run)]
    proc = subprocess.run(command + ["--out", str(tmp_path / "cli"), "--json"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout) > 1 << 16 and proc.stdout == strict_json(expected.summary) + "\n"
    for name in ("summary.json", "warnings.json"):
        assert (tmp_path / "cli" / name).read_bytes() == (tmp_path / "api" / name).read_bytes()
    assert_same_folders(tmp_path / "api", tmp_path / "cli")


_BLAS_PROBE = """
import os, sys
from ragmeter.cli import _numpy_without_blas_threads
before = len(os.listdir("/proc/self/task"))
if sys.argv[1] == "quiet":
    _numpy_without_blas_threads()
import numpy
print(len(os.listdir("/proc/self/task")) - before, os.environ.get("OPENBLAS_NUM_THREADS"))
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir() or (os.cpu_count() or 1) < 2, reason="Linux, 2+ cores")
def test_the_command_imports_numpy_without_starting_blas_threads():
    """The commands import numpy with one OpenBLAS thread (starting one per core cost 0.1 s of CPU at start-up)
    and leave the environment as they found it; a number the user set is kept."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}

    def probe(mode, **extra):
        out = subprocess.run([sys.executable, "-c", _BLAS_PROBE, mode], capture_output=True, text=True, check=True,
                             env={**env, **extra}).stdout.split()
        return int(out[0]), out[1]

    plain, quiet = probe("plain"), probe("quiet")
    assert plain[0] > quiet[0] == 0 and quiet[1] == "None"
    assert probe("quiet", OPENBLAS_NUM_THREADS="2") == (1, "2")  # one thread besides the caller


@pytest.mark.parametrize("command", [["score"], ["sweep", "--thresholds", "0,0.5"]])
def test_a_golden_set_without_any_label_is_refused_before_any_work(tmp_path, capsys, command):
    """Nothing could be scored: exit 2 naming the file, not a table of dashes and exit 0."""
    from ragmeter.cli import main

    golden, run = make_case_files(tmp_path, 5, n=6)
    cases = [json.loads(line) for line in golden.read_text(encoding="utf-8").splitlines()]
    golden.write_text("".join(json.dumps({**c, "expectedFileNames": [], "expectedEvidence": []}) + "\n"
                              for c in cases), encoding="utf-8")
    out = tmp_path / ("out" if command[0] == "score" else "sweep.parquet")
    assert main([*command, "--golden", str(golden), "--run", str(run), "--out", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{golden}: no case has expected files or evidence phrases (6 cases)" in err
    assert not out.exists()
    # one labelled case is enough: it is scored, and the others are reported as unlabelled
    cases[0] = {**cases[0], "expectedEvidence": ["alpha beta"]}
    golden.write_text("".join(json.dumps({**c, "expectedFileNames": []} if i else c) + "\n"
                              for i, c in enumerate(cases)), encoding="utf-8")
    assert main([*command, "--golden", str(golden), "--run", str(run), "--out", str(out)]) == 0
