"""``ragmeter.score`` on a Parquet run reads it slice by slice (ragmeter._stream_score): the same results and
the same input errors as the whole run loaded at once, whatever the slicing."""
from __future__ import annotations

import importlib.util
import json
import os
import random
import re
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from polars.testing import assert_frame_equal

import ragmeter
from ragmeter import _parquet_ahead, _stream_score, dataset
from ragmeter.dataset import load_run
from ragmeter.errors import InputError
from ragmeter.retrieval import _prepared_match, _score_prepared

WORDS = ["alpha", "beta", "gamma", "delta", "retrie-\nval", "React 18", "ＲＡＧ１", "⼤模型", "state-of-the-\nart",
         "1.5~2", "naïve", "ΣΟΦΙΑΣ", "x"]


@pytest.fixture
def tiny_slices(monkeypatch):
    """Slices of 1 to 3 rows, so that every run below spans many; texts read as a dictionary stay so (in slices
    of 3 rows most of the texts are distinct)."""
    monkeypatch.setattr(_parquet_ahead, "PARQUET_SLICE_BYTES", 1)
    monkeypatch.setattr(_parquet_ahead, "SLICE_ROWS", (3, 3))
    monkeypatch.setattr(_parquet_ahead, "MAX_DICTIONARY_SHARE", float("inf"))


def _texts(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def make_case_files(tmp_path: Path, seed: int, *, n: int = 40, shuffle: bool = False, missing: int = 0,
                    null_files: str = "some", repeat_texts: bool = True, dictionary: bool = False) -> tuple:
    """A golden set and a Parquet run with the shapes the scorer must keep apart: phrases found only in
    another case's chunks (the run-wide check across slices), found nowhere, empty phrases, chunks without
    a file, empty retrievals, cases missing from the run, the same chunk text in many cases. ``dictionary``:
    the run is written by pyarrow in row groups of 7 cases with dictionary pages (Polars' writer stores the
    texts without), so that its texts are read as a dictionary array."""
    rng = random.Random(seed)
    pool = [_texts(rng, rng.randint(1, 8)) for _ in range(15)]
    golden, run = [], []
    for c in range(n):
        phrases = [rng.choice(["alpha beta", "retrieval", "ＲＡＧ1", "大模型", "1.5-2", f"only{c}", " ", "σοφιας",
                               f"other{(c + 7) % n}"]) for _ in range(rng.randint(0, 3))]
        files = [f"doc{c % 5}.md"] if rng.random() < 0.8 else []
        golden.append({"id": f"cat{c % 3}-{c:03d}", "question": "q", "expectedFileNames": files,
                       "expectedEvidence": phrases, "referenceAnswer": "r" if c % 4 else None})
        chunks = []
        for r in range(rng.randint(0, 5)):
            text = rng.choice(pool) if repeat_texts else _texts(rng, 6)
            if rng.random() < 0.2:
                text += f" other{c} only{(c + 1) % n}"
            file = None if (null_files == "all" or (null_files == "some" and rng.random() < 0.15)) else f"kb/doc{rng.randint(0, 5)}.md"
            chunks.append({"file": file, "chunk_id": f"c{r}" if rng.random() < 0.5 else None, "text": text,
                           "score": round(rng.random(), 3) if rng.random() < 0.9 else None})
        run.append({"id": golden[-1]["id"], "retrieved": chunks,
                    "retrieval_mode": "hybrid" if rng.random() < 0.9 else "bm25"})
    run = run[missing:]
    if shuffle:
        rng.shuffle(run)
    golden_path = tmp_path / f"golden-{seed}.jsonl"
    golden_path.write_text("".join(json.dumps(g, ensure_ascii=False) + "\n" for g in golden), encoding="utf-8")
    run_path = tmp_path / f"run-{seed}.parquet"
    schema = {"id": pl.String, "retrieval_mode": pl.String,
              "retrieved": pl.List(pl.Struct({"file": pl.String, "chunk_id": pl.String, "text": pl.String,
                                              "score": pl.Float64}))}
    frame = pl.DataFrame(run, schema=schema)
    if dictionary:
        pq.write_table(frame.to_arrow(), run_path, row_group_size=7, use_dictionary=True)
        assert _parquet_ahead.dictionary_text_path(_parquet_ahead.open_run(run_path)) == "retrieved.list.element.text"
        assert all(dictionary for _, dictionary in _text_kinds(run_path, 3))
    else:
        frame.write_parquet(run_path)
    return golden_path, run_path


def whole_run(golden: Path, run: Path, k: int = 5):
    """The run loaded at once (the path every other kind of run takes)."""
    return _score_prepared(_prepared_match(golden, run, run_wide=True), k)


def assert_same(streamed, whole) -> None:
    assert isinstance(streamed, _stream_score.StreamedScoreResult)
    assert_frame_equal(streamed.cases, whole.cases)
    assert_frame_equal(streamed.by_category, whole.by_category)
    assert_frame_equal(streamed.chunks, whole.chunks)
    assert json.dumps(streamed.summary, default=str) == json.dumps(whole.summary, default=str)


@pytest.mark.parametrize("seed,options", [
    (1, {}), (2, {"shuffle": True}), (3, {"missing": 5}), (4, {"null_files": "all"}), (5, {"null_files": "none"}),
    (6, {"repeat_texts": False, "shuffle": True, "missing": 3}), (7, {"null_files": "all", "missing": 4}),
    (1, {"dictionary": True}), (2, {"shuffle": True, "dictionary": True}), (3, {"missing": 5, "dictionary": True}),
    (6, {"repeat_texts": False, "shuffle": True, "dictionary": True}),
])
def test_streamed_score_equals_the_whole_run(tmp_path, tiny_slices, seed, options):
    golden, run = make_case_files(tmp_path, seed, **options)
    whole = whole_run(golden, run)
    assert_same(ragmeter.score(golden, run), whole)
    assert whole.summary["unfound_evidence"] or options.get("null_files") == "all"  # the check has work to do
    assert_same(ragmeter.score(golden, run, k=2), whole_run(golden, run, k=2))


def test_the_run_wide_check_sees_texts_of_earlier_and_later_slices(tmp_path, tiny_slices):
    golden = tmp_path / "g.jsonl"
    rows = [{"id": f"q{i}", "question": "q", "expectedFileNames": ["a.md"], "expectedEvidence": [f"phrase {i}"]}
            for i in range(9)]
    golden.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # Case i's phrase is only in a chunk of case (i + 4) % 9: in another slice, before or after its own.
    run_rows = [{"id": f"q{i}", "retrieved": [{"file": "b.md", "text": f"...phrase {(i - 4) % 9}...", "score": 1.0}]}
                for i in range(8)]  # q8 is missing: its chunk would hold phrase 4
    run = tmp_path / "r.parquet"
    pl.DataFrame(run_rows).write_parquet(run)
    result = ragmeter.score(golden, run)
    assert [u["id"] for u in result.summary["unfound_evidence"]] == ["q4"]
    assert_same(result, whole_run(golden, run))


def test_repeated_and_nearly_equal_texts_are_all_checked(tmp_path, tiny_slices):
    # The same text in many cases and slices, and texts that differ from it in four bytes only, each holding
    # the phrase of a case in another slice (before or after its own).
    base = "a" * 200
    golden = tmp_path / "g.jsonl"
    rows = [{"id": f"q{i}", "question": "q", "expectedFileNames": ["a.md"], "expectedEvidence": [f"qz{i}q"]}
            for i in range(7)]
    golden.write_text("".join(json.dumps(r) + "\n" for r in rows))
    texts = [base, base[:20] + "qz4q" + base[24:], base, base[:20] + "qz0q" + base[24:], base, base,
             base[:20] + "qz6q" + base[24:]]
    run_rows = [{"id": f"q{i}", "retrieved": [{"file": "b.md", "text": base, "score": 1.0},
                                              {"file": "b.md", "text": texts[i], "score": 0.5}]} for i in range(7)]
    run = tmp_path / "r.parquet"
    pl.DataFrame(run_rows).write_parquet(run)
    result = ragmeter.score(golden, run)
    assert sorted(u["id"] for u in result.summary["unfound_evidence"]) == ["q1", "q2", "q3", "q5"]
    assert_same(result, whole_run(golden, run))


def test_the_run_wide_check_keeps_no_text(tmp_path, tiny_slices, monkeypatch):
    """The slices' texts go through the index as they are matched: nothing reads them again for the check."""
    golden, run = make_case_files(tmp_path, 9, repeat_texts=False)
    whole = whole_run(golden, run)

    def no_second_read(reader):
        raise AssertionError("texts read again")

    monkeypatch.setattr(_stream_score, "_chunks_again", no_second_read)
    streamed = ragmeter.score(golden, run)
    assert_frame_equal(streamed.cases, whole.cases)
    assert json.dumps(streamed.summary, default=str) == json.dumps(whole.summary, default=str)
    assert whole.summary["unfound_evidence"]


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("dictionary", [False, True])
def test_written_folder_equals_the_whole_runs(tmp_path, tiny_slices, shuffle, dictionary):
    golden, run = make_case_files(tmp_path, 10, shuffle=shuffle, missing=2, dictionary=dictionary)
    streamed = ragmeter.score(golden, run)
    streamed.write(tmp_path / "streamed")
    whole_run(golden, run).write(tmp_path / "whole")
    for name in ("cases.parquet", "chunks.parquet"):
        assert_frame_equal(pl.read_parquet(tmp_path / "streamed" / name), pl.read_parquet(tmp_path / "whole" / name))
    for name in ("summary.json", "warnings.json"):
        assert (tmp_path / "streamed" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()


def _error(call) -> str:
    with pytest.raises(InputError) as info:
        call()
    return str(info.value)


BAD_RUNS = {
    "schema": {"id": ["a"], "retrieved": ["not a list"], "cost": ["cheap"]},
    "rows": {"id": ["a", "b", "a", None, "c", "", "a"],
             "retrieved": [[{"file": "x", "text": "t"}], [{"file": "y", "text": None}], [], [], [{"file": "z", "text": None}], [], []]},
    "field": {"id": ["a"], "retrieved": [[{"file": "x", "text": 3}]]},
    "qid": {"qid": ["a"], "retrieved": [[{"file": "x", "text": "t"}]]},
    "many": {"id": [None] * 60 + ["b"], "retrieved": [[]] * 61},
}


@pytest.mark.parametrize("name", sorted(BAD_RUNS))
def test_bad_parquet_runs_get_the_errors_of_the_whole_file(tmp_path, tiny_slices, name):
    golden = tmp_path / "g.jsonl"
    golden.write_text(json.dumps({"id": "a", "question": "q", "expectedEvidence": ["t"]}) + "\n")
    run = tmp_path / f"{name}.parquet"
    pl.DataFrame(BAD_RUNS[name]).write_parquet(run)
    expected = _error(lambda: load_run(run))
    assert _error(lambda: ragmeter.score(golden, run)) == expected
    assert f"{run}" in expected


def test_slices_are_checked_on_the_reading_thread_and_their_errors_raised_where_they_are_used(tmp_path, tiny_slices,
                                                                                           monkeypatch):
    """ParquetRun checks each slice on its read-ahead thread (the caller matches the slice before meanwhile);
    what the check raises there is raised to the caller as load_run raises it, not as an unreadable file."""
    import threading

    from ragmeter import dataset

    threads = []
    check = dataset._run_from_columns

    def recording(*args, **kwargs):
        threads.append(threading.current_thread())
        return check(*args, **kwargs)

    monkeypatch.setattr(dataset._run, "_run_from_columns", recording)  # where ParquetRun looks it up
    golden, run = make_case_files(tmp_path, 21)
    reader = dataset.ParquetRun(run)
    frames = [frame for _, frame in reader]
    reader.finish()
    assert len(frames) > 3 and len(threads) == len(frames)
    assert all(t is not threading.main_thread() for t in threads)
    assert_frame_equal(pl.concat(frames).select("id", "line"), load_run(run).select("id", "line"))
    for name in ("schema", "field", "rows"):
        bad = tmp_path / f"{name}.parquet"
        pl.DataFrame(BAD_RUNS[name]).write_parquet(bad)
        expected = _error(lambda: load_run(bad))
        assert "cannot read as Parquet" not in expected

        def read_all():
            reader = dataset.ParquetRun(bad)
            list(reader)
            reader.finish()
        assert _error(read_all) == expected


def test_run_ids_absent_from_the_golden_set_and_ids_from_lines(tmp_path, tiny_slices):
    golden = tmp_path / "g.jsonl"
    golden.write_text("".join(json.dumps({"id": i, "question": "q", "expectedEvidence": ["t"]}) + "\n" for i in "ab"))
    run = tmp_path / "r.parquet"
    pl.DataFrame({"id": ["a", "ghost", "b", "ghost2"], "retrieved": [[{"file": "x", "text": "t"}]] * 4}).write_parquet(run)
    assert _error(lambda: ragmeter.score(golden, run)) == _error(lambda: whole_run(golden, run))
    noid = tmp_path / "noid.parquet"
    pl.DataFrame({"retrieved": [[{"file": "x", "text": "t"}]] * 4}).write_parquet(noid)
    assert _error(lambda: ragmeter.score(golden, noid)) == _error(lambda: whole_run(golden, noid))


def test_an_unreadable_or_empty_parquet_run(tmp_path, tiny_slices):
    golden = tmp_path / "g.jsonl"
    golden.write_text(json.dumps({"id": "a", "question": "q", "expectedEvidence": ["t"]}) + "\n")
    fake = tmp_path / "fake.parquet"
    fake.write_text("not parquet")
    assert _error(lambda: ragmeter.score(golden, fake)).startswith(f"{fake}: cannot read as Parquet")
    assert _error(lambda: ragmeter.score(golden, tmp_path / "nope.parquet")) == f"{tmp_path / 'nope.parquet'}: no such file"
    empty = tmp_path / "empty.parquet"
    pl.DataFrame({"id": [], "retrieved": []}, schema={"id": pl.String, "retrieved": pl.List(pl.String)}).write_parquet(empty)
    # a run of no case measures nothing: refused, as an empty JSON Lines run is (it was scored as all missing)
    assert _error(lambda: ragmeter.score(golden, empty)) == _error(lambda: whole_run(golden, empty)) == \
        f"{empty}: no cases (the file has 0 rows)"
    wrong = tmp_path / "wrong.parquet"
    pl.DataFrame({"id": [], "retrieved": []}, schema={"id": pl.String, "retrieved": pl.Int64}).write_parquet(wrong)
    assert _error(lambda: ragmeter.score(golden, wrong)) == _error(lambda: load_run(wrong))


def test_plain_text_chunks_and_renamed_columns(tmp_path, tiny_slices):
    golden = tmp_path / "g.jsonl"
    golden.write_text("".join(json.dumps({"id": f"q{i}", "question": "q", "expectedEvidence": ["retrieval"]}) + "\n"
                              for i in range(5)))
    run = tmp_path / "r.parquet"
    pl.DataFrame({"case_id": [f"q{i}" for i in range(5)],
                  "retrieved_contexts": [["retrie-\nval here", "no"], [], ["x"], ["RETRIEVAL"], ["a", "b", "c"]]}).write_parquet(run)
    streamed = ragmeter.score(golden, run)
    assert_same(streamed, whole_run(golden, run))
    assert streamed.cases["hit"].to_list() == [True, False, False, True, False]


def test_kept_columns_do_not_hold_the_slices(tmp_path, tiny_slices):
    """What is kept of a slice is copied out of it: a column read zero-copy would keep its texts alive."""
    golden, run = make_case_files(tmp_path, 11)
    reader = dataset.ParquetRun(run)
    batch, frame = next(iter(reader))
    kept = _stream_score._detached(frame.select("id", "line"))
    assert all(not np.shares_memory(np.frombuffer(b, np.uint8), np.frombuffer(c, np.uint8))
               for col in kept.columns for chunk in col.chunks for b in chunk.buffers() if b is not None and b.size
               for src in batch.columns for c in src.buffers() if c is not None and c.size)


def test_slices_are_decoded_outside_the_default_pool(tmp_path, tiny_slices, monkeypatch):
    """The reader decodes into jemalloc's (else the system's) pool and leaves the process's default pool as
    it was; ARROW_DEFAULT_MEMORY_POOL, when set, is obeyed."""
    import pyarrow as pa

    golden, run = make_case_files(tmp_path, 12)
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    default = pa.default_memory_pool()
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:
        pool = pa.system_memory_pool()
    before = pool.bytes_allocated()
    reader = dataset.ParquetRun(run)
    assert pa.default_memory_pool().backend_name == default.backend_name
    batch, _ = next(iter(reader))
    texts = batch.column("retrieved").values.field("text").buffers()[2]
    assert texts.size > 0 and pool.bytes_allocated() - before >= texts.size  # the slice is in the chosen pool
    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", default.backend_name)
    with _parquet_ahead.slice_pool():
        assert pa.default_memory_pool().backend_name == default.backend_name
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL")
    with _parquet_ahead.slice_pool():
        assert pa.default_memory_pool().backend_name == pool.backend_name
    assert pa.default_memory_pool().backend_name == default.backend_name
    assert ragmeter.score(golden, run).summary["n_cases"] == 40


@pytest.mark.parametrize("slices", ["tiny", "one"])
def test_a_text_repeated_across_cases_is_matched_in_every_case(tmp_path, monkeypatch, slices):
    """A text probed once for the run-wide check (its first copy) is still matched against every later case
    that retrieves it: each case's own phrase is only in that shared text, at a different rank per case."""
    if slices == "tiny":
        monkeypatch.setattr(_parquet_ahead, "PARQUET_SLICE_BYTES", 1)
        monkeypatch.setattr(_parquet_ahead, "SLICE_ROWS", (2, 2))
    shared = "the shared chunk " + " ".join(f"phrase-{i}" for i in range(6))
    golden = tmp_path / "g.jsonl"
    rows = [{"id": f"q{i}", "question": "q", "expectedFileNames": ["a.md"], "expectedEvidence": [f"PHRASE-{i}"]}
            for i in range(6)]
    golden.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_rows = [{"id": f"q{i}", "retrieved": [{"file": "a.md", "text": f"own text {i}", "score": 1.0}] * (i % 3)
                 + [{"file": "a.md", "text": shared, "score": 0.5}]} for i in range(6)]
    run = tmp_path / "r.parquet"
    pl.DataFrame(run_rows).write_parquet(run)
    result = ragmeter.score(golden, run)
    assert result.cases["hit"].to_list() == [True] * 6
    assert result.cases["first_relevant_rank"].to_list() == [i % 3 + 1 for i in range(6)]
    assert result.summary["unfound_evidence"] == []
    assert_same(result, whole_run(golden, run))


_IMPORTS_AFTER_SCORE = """
import sys
from ragmeter.cli import main
code = main(["score", "--golden", sys.argv[1], "--run", sys.argv[2], "--out", sys.argv[3]])
print(code, "pandas" in sys.modules)
"""


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="pandas is not installed")
@pytest.mark.parametrize("shuffle", [False, True])
def test_score_does_not_import_pandas(tmp_path, shuffle):
    """``pa.array`` imports pandas when it is installed (about 0.2 s of the command); the score path builds its
    Arrow arrays from buffers instead: chunks written while scoring (golden order) or afterwards (shuffled), and
    chunks without a file (placeholder files)."""
    import subprocess
    import sys

    golden, run = make_case_files(tmp_path, 11, shuffle=shuffle)
    out = subprocess.run([sys.executable, "-c", _IMPORTS_AFTER_SCORE, str(golden), str(run), str(tmp_path / "out")],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out[-2:] == ["0", "False"]


_MODULES_WHEN_THE_EARLY_READER_STARTS = """
import sys
from ragmeter import _parquet_ahead
from ragmeter.cli import main
seen = []
start = _parquet_ahead.start
def recording_start(path):
    seen.append("polars" in sys.modules)
    return start(path)
_parquet_ahead.start = recording_start
code = main(["score", "--golden", sys.argv[1], "--run", sys.argv[2], "--k", "3"])
print(code, seen[0])
"""


def test_score_starts_the_early_reader_before_importing_polars(tmp_path):
    """The run's first slices are decoded while Polars is imported and the golden set loads: checking ``--k``
    imported ragmeter.retrieval, and with it Polars (0.15-0.45 s), before the reader started."""
    import subprocess
    import sys

    golden, run = make_case_files(tmp_path, 11)
    out = subprocess.run([sys.executable, "-c", _MODULES_WHEN_THE_EARLY_READER_STARTS, str(golden), str(run)],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out[-2:] == ["0", "False"]


@pytest.fixture
def tiny_early_slices(tiny_slices):
    """:func:`tiny_slices`, and no early reader left over."""
    yield
    _parquet_ahead.discard()


def _taken(monkeypatch) -> list:
    """What each ParquetRun got from :func:`ragmeter._parquet_ahead.take`."""
    taken: list = []
    take = _parquet_ahead.take

    def recording(path, batch_rows):
        taken.append(take(path, batch_rows))
        return taken[-1]

    monkeypatch.setattr(_parquet_ahead, "take", recording)
    return taken


@pytest.mark.parametrize("seed,options", [(13, {}), (14, {"shuffle": True, "null_files": "all"})])
def test_slices_decoded_before_scoring_are_the_slices_scored(tmp_path, tiny_early_slices, monkeypatch, seed, options):
    golden, run = make_case_files(tmp_path, seed, **options)
    _parquet_ahead.start(run)
    started = _parquet_ahead._started
    assert started is not None and started.batch_rows == 3
    taken = _taken(monkeypatch)
    made = []
    reader = _parquet_ahead.ReadAhead
    monkeypatch.setattr(_parquet_ahead, "ReadAhead", lambda items: made.append(1) or reader(items))
    streamed = ragmeter.score(golden, run)
    assert taken[0] is started.reader and not made  # the early reader fed the scoring: no other was made
    assert all(t is None for t in taken[1:])
    assert_same(streamed, whole_run(golden, run))
    streamed.write(tmp_path / "out")  # chunks.parquet reads the texts again, from a reader of its own
    assert_frame_equal(pl.read_parquet(tmp_path / "out" / "chunks.parquet"), whole_run(golden, run).chunks)


def test_an_early_reader_of_another_file_or_slice_size_is_stopped_and_not_used(tmp_path, tiny_early_slices,
                                                                               monkeypatch):
    golden, run = make_case_files(tmp_path, 15)
    _parquet_ahead.start(run)
    old = _parquet_ahead._started
    _golden, other = make_case_files(tmp_path, 16)
    os.replace(other, run)  # the same name, another file (ids are the same: cat*-NNN)
    taken = _taken(monkeypatch)
    assert_same(ragmeter.score(golden, run), whole_run(golden, run))
    # the scorer's own early start saw another file: it stopped the old reader and began one of its own
    assert taken[0] is not None and taken[0] is not old.reader and not old.reader._worker.is_alive()

    monkeypatch.setattr(_parquet_ahead, "SLICE_ROWS", (5, 5))  # begun in slices of another size than ParquetRun's
    _parquet_ahead.start(run)
    monkeypatch.setattr(_parquet_ahead, "SLICE_ROWS", (3, 3))
    old = _parquet_ahead._started
    assert old is not None and old.batch_rows == 5
    assert_same(ragmeter.score(golden, run), whole_run(golden, run))
    assert taken[1] is None and not old.reader._worker.is_alive()


def test_starting_early_is_silent_and_the_scorer_reports_the_file(tmp_path, tiny_early_slices):
    golden = tmp_path / "g.jsonl"
    golden.write_text(json.dumps({"id": "a", "question": "q", "expectedEvidence": ["t"]}) + "\n")
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"PAR1" + b"\0" * 64)
    text = tmp_path / "run.jsonl"
    text.write_text(json.dumps({"id": "a", "retrieved": []}) + "\n")
    for path in (tmp_path / "missing.parquet", corrupt, text, tmp_path):
        _parquet_ahead.start(path)
        assert _parquet_ahead._started is None, path
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "ragmeter", "score", "--golden", str(golden), "--run", str(corrupt)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{corrupt}: cannot read as Parquet" in proc.stderr


@pytest.mark.parametrize("caller", ["command", "api"])
def test_an_early_reader_is_stopped_when_the_golden_set_is_refused(tmp_path, monkeypatch, caller):
    """The command and ``ragmeter.score`` begin decoding the run before they load the golden set; a golden set
    they refuse leaves no reader running."""
    from ragmeter.cli import main

    _golden, run = make_case_files(tmp_path, 17)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    started = []
    start = _parquet_ahead.start

    def recording(path):
        start(path)
        started.append(_parquet_ahead._started)

    monkeypatch.setattr(_parquet_ahead, "start", recording)
    if caller == "command":
        assert main(["score", "--golden", str(bad), "--run", str(run)]) == 2
    else:
        with pytest.raises(InputError):
            ragmeter.score(bad, run)
    assert started[0] is not None and not started[0].reader._worker.is_alive()
    assert _parquet_ahead._started is None


def test_scoring_in_several_threads_at_once_gives_each_its_own_slices(tmp_path, tiny_early_slices):
    """Each ``ragmeter.score`` begins an early reader; one scorer takes a reader, the others read for themselves."""
    from concurrent.futures import ThreadPoolExecutor

    files = [make_case_files(tmp_path, seed) for seed in (19, 20)]
    expected = [whole_run(golden, run).cases for golden, run in files]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda i: ragmeter.score(*files[i % 2]).cases, range(12)))
    for i, cases in enumerate(got):
        assert_frame_equal(cases, expected[i % 2])
    assert _parquet_ahead._started is None


def test_the_reader_decodes_one_slice_ahead_not_more():
    """While the consumer holds a slice, the helper decodes the next one and then waits: a third slice is
    not begun until the second is taken (each slice is tens of MB of text)."""
    import threading
    import time

    pulled: list = []
    second = threading.Event()

    def items():
        for i in range(5):
            pulled.append(i)
            if i == 1:
                second.set()
            yield i

    ahead = _parquet_ahead.ReadAhead(items())
    it = iter(ahead)
    assert next(it) == 0
    assert second.wait(5)
    time.sleep(0.3)
    assert pulled == [0, 1]
    assert next(it) == 1
    assert list(it) == [2, 3, 4]
    assert pulled == [0, 1, 2, 3, 4]


def test_the_chunk_writer_is_handed_a_slice_once_it_has_written_the_last(tmp_path, tiny_slices, monkeypatch):
    """Each slice's chunk rows wait for the writer to finish the slice before: never two slices' texts in
    the writer's hands (the queue is empty whenever it writes a part), and the file is the chunk table."""
    import time

    real = _stream_score.write_parquet_parts
    seen: list = []
    spools: list = []
    make = _stream_score._ChunkSpool

    def spool(path):
        spools.append(make(path))
        return spools[-1]

    def slow(parts, path, schema):
        def watched():
            for part in parts:
                time.sleep(0.02)
                seen.append(spools[-1]._queue.qsize())
                yield part
        real(watched(), path, schema)

    monkeypatch.setattr(_stream_score, "_ChunkSpool", spool)
    monkeypatch.setattr(_stream_score, "write_parquet_parts", slow)
    golden, run = make_case_files(tmp_path, 21)
    result = ragmeter.retrieval.score_into(golden, run, tmp_path / "out")
    assert len(seen) > 5 and not any(seen[:-1])  # at the last part, close() may have queued its end mark
    assert_frame_equal(pl.read_parquet(tmp_path / "out" / "chunks.parquet"), whole_run(golden, run).chunks)
    assert_frame_equal(result.cases, whole_run(golden, run).cases)


@pytest.mark.parametrize("shuffle", [False, True])
def test_a_run_changed_after_scoring_is_reported_when_its_chunks_are_read_again(tmp_path, tiny_slices, shuffle):
    """``chunks`` and ``write`` read the chunks again from the file: a file rewritten in place since it was
    scored is an input error naming it (not a table of mismatched rows, nor a traceback), and nothing is
    written."""
    golden, run = make_case_files(tmp_path, 22, shuffle=shuffle)
    result = ragmeter.score(golden, run)
    frame = pl.read_parquet(run)
    frame.with_columns(pl.col("retrieved").list.head(1)).write_parquet(run)  # the same cases, fewer chunks
    with pytest.raises(InputError, match=f"^{re.escape(str(run))}: "):
        result.chunks
    with pytest.raises(InputError, match=f"^{re.escape(str(run))}: "):
        result.write(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_early_reader_decodes_a_few_slices_before_it_is_taken_then_one_ahead():
    """Before the scorer takes it, an early reader may decode ``first`` slices (the command's start-up leaves
    the second core idle); once they are taken it is one slice ahead, as every reader."""
    import threading
    import time

    pulled: list = []
    events = [threading.Event() for _ in range(6)]

    def items():
        for i in range(6):
            pulled.append(i)
            events[i].set()
            yield i

    it = iter(_parquet_ahead.ReadAhead(items(), first=3))
    assert events[2].wait(5)
    time.sleep(0.3)
    assert pulled == [0, 1, 2]
    assert [next(it), next(it)] == [0, 1]
    time.sleep(0.3)
    assert pulled == [0, 1, 2]  # the first two taken make no room: the third is still ahead
    assert next(it) == 2
    assert events[3].wait(5)
    time.sleep(0.3)
    assert pulled == [0, 1, 2, 3]
    assert list(it) == [3, 4, 5]


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("change", [-1, 1])
def test_chunks_read_again_that_are_not_the_chunks_scored_are_an_input_error(tmp_path, tiny_slices, monkeypatch,
                                                                            shuffle, change):
    """Whatever the second read of the file returns, a chunk table whose rows are not the chunks scored is not
    made: one chunk fewer or more is an input error naming the file (for a run out of golden order too, where
    the rows are put in golden order by position)."""
    golden, run = make_case_files(tmp_path, 23, shuffle=shuffle)
    result = ragmeter.score(golden, run)
    real = _stream_score._chunks_again

    def off_by_one(reader):
        parts = list(real(reader))
        fields, texts = parts[-1]
        if change < 0:
            parts[-1] = (fields.head(fields.height - 1), texts.slice(0, len(texts) - 1))
        else:
            parts[-1] = (pl.concat([fields, fields.head(1)]), pa.concat_arrays([texts, texts.slice(0, 1)]))
        return iter(parts)

    monkeypatch.setattr(_stream_score, "_chunks_again", off_by_one)
    with pytest.raises(InputError, match="changed while it was being scored"):
        result.chunks
    with pytest.raises(InputError, match="changed while it was being scored"):
        result.write(tmp_path / "out")
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------
# Chunk texts read as a dictionary array (ragmeter._dictionary_texts)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("shuffle", [False, True])
def test_a_dictionary_run_scored_into_a_folder_equals_the_whole_run(tmp_path, tiny_slices, shuffle):
    """``ragmeter score --out``'s path: the chunk table written while the slices are read, from texts the
    reader gave as dictionary arrays."""
    golden, run = make_case_files(tmp_path, 13, shuffle=shuffle, missing=1, dictionary=True)
    ragmeter.retrieval.score_into(golden, run, tmp_path / "streamed")
    whole_run(golden, run).write(tmp_path / "whole")
    for name in ("cases.parquet", "chunks.parquet"):
        assert_frame_equal(pl.read_parquet(tmp_path / "streamed" / name), pl.read_parquet(tmp_path / "whole" / name))
    for name in ("summary.json", "warnings.json"):
        assert (tmp_path / "streamed" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()
    # the texts written as a dictionary, read as strings (no Arrow schema stored that would make them categorical)
    assert pl.read_parquet_schema(tmp_path / "streamed" / "chunks.parquet")["text"] == pl.String
    written = pq.ParquetFile(tmp_path / "streamed" / "chunks.parquet").metadata
    assert "RLE_DICTIONARY" in written.row_group(0).column(4).encodings


def _dictionary_run(path: Path, table: pa.Table, row_group_size: int = 4) -> Path:
    pq.write_table(table, path, row_group_size=row_group_size, use_dictionary=True)
    assert _parquet_ahead.dictionary_text_path(_parquet_ahead.open_run(path)) is not None
    return path


def test_null_lists_texts_and_chunks_of_a_dictionary_run(tmp_path, tiny_slices):
    """Null retrievals (a slice with one has its texts written out: a null list may span values) score as the
    whole run loaded at once; null texts and null chunks get the whole run's input error."""
    golden = tmp_path / "g.jsonl"
    golden.write_text("".join(json.dumps({"id": f"q{i}", "question": "q", "expectedFileNames": ["a.md"],
                                          "expectedEvidence": ["shared text", f"own{i}"]}) + "\n" for i in range(12)))
    chunk = pa.struct([("file", pa.string()), ("text", pa.string()), ("score", pa.float64())])

    def run(text=lambda i: f"own{i} " * (i % 3), chunk2=lambda i, c: c) -> Path:
        rows = [None if i in (3, 8) else
                [{"file": "a.md", "text": "the shared text", "score": 0.5},
                 chunk2(i, {"file": "b.md" if i % 4 == 1 else "a.md", "text": text(i), "score": 0.1})]
                for i in range(12)]
        table = pa.table({"id": [f"q{i}" for i in range(12)], "retrieved": pa.array(rows, pa.list_(chunk))})
        return _dictionary_run(tmp_path / "r.parquet", table)

    path = run()
    streamed = ragmeter.score(golden, path)
    assert_same(streamed, whole_run(golden, path))
    assert streamed.cases["hit"].to_list() == [i not in (3, 8) for i in range(12)]
    for bad in (run(text=lambda i: None if i % 5 == 2 else "x"), run(chunk2=lambda i, c: None if i == 5 else c)):
        assert "has no 'text'" in _error(lambda: ragmeter.score(golden, bad)) == _error(lambda: whole_run(golden, bad))


def test_plain_text_lists_read_as_a_dictionary(tmp_path, tiny_slices):
    golden = tmp_path / "g.jsonl"
    golden.write_text("".join(json.dumps({"id": f"q{i}", "question": "q", "expectedEvidence": ["retrieval"]}) + "\n"
                              for i in range(9)))
    texts = [["retrie-\nval here", "no"], [], ["x"], ["RETRIEVAL"], ["a", "b", "c"], ["no"], ["retrieval"], [], ["x"]]
    run = _dictionary_run(tmp_path / "r.parquet", pa.table({"case_id": [f"q{i}" for i in range(9)],
                                                           "retrieved_contexts": texts}))
    streamed = ragmeter.score(golden, run)
    assert_same(streamed, whole_run(golden, run))
    assert streamed.cases["hit"].to_list() == [True, False, False, True, False, False, True, False, False]


def test_texts_are_read_as_a_dictionary_only_where_it_pays(tmp_path, tiny_slices):
    """Dictionary pages in every row group, row groups that do not multiply the slices, and none cut into more
    than MAX_SLICES_PER_DICTIONARY slices."""
    table = pa.table({"id": [f"q{i}" for i in range(60)],
                      "retrieved": [[{"file": "a.md", "text": f"text {i % 4}"}] for i in range(60)]})
    plain, small, large = tmp_path / "plain.parquet", tmp_path / "small.parquet", tmp_path / "large.parquet"
    pq.write_table(table, plain, use_dictionary=False)
    pq.write_table(table, small, row_group_size=1, use_dictionary=True)  # 60 slices instead of 20
    pq.write_table(table, large, use_dictionary=True)  # one row group of 20 slices, each copying its dictionary
    assert _parquet_ahead.MAX_SLICES_PER_DICTIONARY < 20
    for path in (plain, small, large):
        assert _parquet_ahead.dictionary_text_path(_parquet_ahead.open_run(path)) is None, path.name
    dictionary = _dictionary_run(tmp_path / "d.parquet", table, 9)
    assert _parquet_ahead.dictionary_text_path(_parquet_ahead.open_run(dictionary))
    file = _parquet_ahead.open_run(tmp_path / "d.parquet")
    sizes = [b.num_rows for b in _parquet_ahead.slices(file, tmp_path / "d.parquet", 3)]
    assert sizes == [3] * 18 + [3, 3]  # six row groups of 9 rows in three slices each, the last of 6 in two


def _text_kinds(path: Path, batch_rows: int) -> list:
    """Per slice of the run ``path``: its ids, and whether its texts came as a dictionary."""
    file = _parquet_ahead.open_run(path)
    return [(b.column("id").to_pylist(), pa.types.is_dictionary(_parquet_ahead.chunk_texts(b)[1].type))
            for b in _parquet_ahead.slices(file, path, batch_rows)]


@pytest.mark.parametrize("switch", ["distinct", "bytes"])
def test_texts_too_distinct_for_a_dictionary_are_read_plain_from_there_on(tmp_path, tiny_slices, monkeypatch, switch):
    """Distinct texts (pyarrow would hash each into a dictionary every slice copies), or a dictionary past
    MAX_DICTIONARY_BYTES: the slices from there on are read plain, none lost or given twice."""
    if switch == "distinct":
        golden, run = make_case_files(tmp_path, 14, n=42, repeat_texts=False, dictionary=True)
        monkeypatch.setattr(_parquet_ahead, "MAX_DICTIONARY_SHARE", 0.5)
    else:  # a row group of short texts, then one of few long ones (past 600 bytes in its first slice)
        golden, _ = make_case_files(tmp_path, 14, n=12)
        ids = [json.loads(line)["id"] for line in golden.read_text().splitlines()]
        texts = [f"short {i % 2}" if i < 6 else f"{i % 2} long other{i} " * 30 for i in range(12)]
        table = pa.table({"id": ids, "retrieved": [[{"file": "kb/doc1.md", "text": t}] * 4 for t in texts]})
        run = _dictionary_run(tmp_path / "r.parquet", table, row_group_size=6)
        monkeypatch.setattr(_parquet_ahead, "MAX_DICTIONARY_BYTES", 600)
    kinds = _text_kinds(run, 3)
    assert [i for ids, _ in kinds for i in ids] == pl.read_parquet(run)["id"].to_list()
    assert kinds[0][1] is (switch == "bytes") and not kinds[-1][1]
    assert_same(ragmeter.score(golden, run), whole_run(golden, run))
