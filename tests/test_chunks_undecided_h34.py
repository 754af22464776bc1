"""chunks.parquet (h34): a chunk of a case whose relevance was not decided (an unlabelled case, or a labelled one
whose ``hit`` is null) has ``relevant`` null, not false, so that counting ``relevant`` never counts it as a miss;
``file_match`` is null in an unlabelled case (it expects nothing to match) and keeps its meaning in a labelled one.
The same values whatever path wrote the table: a JSONL run loaded whole, a Parquet run streamed in golden order
(written while scored) or shuffled (read again), ``ragmeter.score(...).chunks`` and eval's ``retrieved``."""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import ragmeter
from ragmeter.cli import main

from test_score_streaming import assert_same, make_case_files, tiny_slices, whole_run  # noqa: F401 - the fixture

GOLDEN = [
    # labelled: a file and a phrase
    {"id": "a-1", "question": "q", "expected_files": ["a.md"], "expected_evidence": ["alpha"]},
    # unlabelled: no file, no phrase
    {"id": "u-1", "question": "q"},
    # unlabelled: its only phrase normalises to nothing
    {"id": "u-2", "question": "q", "expected_evidence": [" "]},
    # expects files alone and its chunks give none: hit null
    {"id": "f-1", "question": "q", "expected_files": ["b.md"]},
    # expects files alone, one chunk without a file: hit null, the other chunk keeps the file rule
    {"id": "f-2", "question": "q", "expected_files": ["b.md"]},
    # labelled by a phrase alone: any file passes the file half
    {"id": "e-1", "question": "q", "expected_evidence": ["eps"]},
]
RUN = [
    {"id": "a-1", "retrieved": [{"file": "a.md", "text": "alpha here"}, {"file": "x.md", "text": "alpha too"},
                                {"file": "a.md", "text": "nothing"}]},
    {"id": "u-1", "retrieved": [{"file": "a.md", "text": "alpha"}, {"file": None, "text": "beta"}]},
    {"id": "u-2", "retrieved": [{"file": "c.md", "text": "gamma"}]},
    {"id": "f-1", "retrieved": [{"file": None, "text": "b text"}, {"file": None, "text": "more"}]},
    {"id": "f-2", "retrieved": [{"file": None, "text": "b text"}, {"file": "b.md", "text": "b again"}]},
    {"id": "e-1", "retrieved": [{"file": "z.md", "text": "eps is here"}, {"file": "z.md", "text": "no"}]},
]
#: per case, in rank order: (relevant, file_match)
EXPECTED: Dict[str, List[Tuple[Optional[bool], Optional[bool]]]] = {
    "a-1": [(True, True), (False, False), (False, True)],
    "u-1": [(None, None), (None, None)],
    "u-2": [(None, None)],
    "f-1": [(None, None), (None, None)],
    "f-2": [(None, None), (None, True)],
    "e-1": [(True, True), (False, True)],
}
CHUNK_SCHEMA = {"id": pl.String, "retrieved": pl.List(pl.Struct({"file": pl.String, "text": pl.String}))}


def _write_inputs(tmp_path: Path, run_rows: List[dict]) -> Tuple[Path, Path, Path]:
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(json.dumps(g) + "\n" for g in GOLDEN), encoding="utf-8")
    jsonl = tmp_path / "run.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in run_rows), encoding="utf-8")
    parquet = tmp_path / "run.parquet"
    pl.DataFrame(run_rows, schema=CHUNK_SCHEMA).write_parquet(parquet)
    return golden, jsonl, parquet


def _marks(chunks: pl.DataFrame) -> Dict[str, List[Tuple[Optional[bool], Optional[bool]]]]:
    marks: Dict[str, List[Tuple[Optional[bool], Optional[bool]]]] = {}
    for row in chunks.sort("id", "rank").iter_rows(named=True):
        marks.setdefault(row["id"], []).append((row["relevant"], row["file_match"]))
    return marks


def _score_folder(golden: Path, run: Path, out: Path) -> pl.DataFrame:
    assert main(["score", "--golden", str(golden), "--run", str(run), "--out", str(out)]) == 0
    return pl.read_parquet(out / "chunks.parquet")


@pytest.mark.parametrize("shuffle", [False, True])
def test_score_out_writes_null_relevance_for_chunks_of_undecided_cases(tmp_path, capsys, shuffle):
    # before: every chunk of u-1, u-2, f-1 and f-2 had relevant false (a miss to anyone counting the column), and
    # the chunks of u-1 and u-2 had file_match true ("the case expects no file")
    run_rows = list(RUN)
    if shuffle:  # a Parquet run out of golden order: its chunk table is built from a second read
        random.Random(3).shuffle(run_rows)
    golden, jsonl, parquet = _write_inputs(tmp_path, run_rows)
    from_jsonl = _score_folder(golden, jsonl, tmp_path / "jsonl")
    from_parquet = _score_folder(golden, parquet, tmp_path / "parquet")
    assert _marks(from_jsonl) == EXPECTED
    assert_frame_equal(from_parquet, from_jsonl)
    cases = pl.read_parquet(tmp_path / "jsonl" / "cases.parquet").sort("id")
    # null exactly in the cases the per-case table calls undecided (labeled false, or hit null)
    undecided = cases.filter(~pl.col("labeled") | pl.col("hit").is_null())["id"].to_list()
    assert undecided == ["f-1", "f-2", "u-1", "u-2"]
    nulls = from_jsonl.filter(pl.col("relevant").is_null())["id"].unique().sort().to_list()
    assert nulls == undecided
    # a mean over the column counts the decided chunks only: 2 relevant of the 5 chunks of a-1 and e-1
    assert from_jsonl["relevant"].mean() == pytest.approx(2 / 5)


def test_the_api_and_eval_give_the_same_marks(tmp_path):
    golden, jsonl, parquet = _write_inputs(tmp_path, RUN)
    assert _marks(ragmeter.score(golden, jsonl).chunks) == EXPECTED
    assert _marks(ragmeter.score(golden, parquet).chunks) == EXPECTED  # streamed, read again from the file
    assert _marks(ragmeter.score(GOLDEN, RUN).chunks) == EXPECTED  # records in memory
    result = ragmeter.evaluate(golden, jsonl)
    assert _marks(result.chunks) == EXPECTED
    # eval's cases.parquet keeps each case's chunks as `retrieved`, with the same `relevant`
    retrieved = result.cases.select("id", pl.col("retrieved").list.eval(pl.element().struct.field("relevant")))
    assert dict(retrieved.iter_rows()) == {i: [r for r, _ in marks] for i, marks in EXPECTED.items()}
    result.write(tmp_path / "eval")
    assert _marks(pl.read_parquet(tmp_path / "eval" / "chunks.parquet")) == EXPECTED
    assert _marks(ragmeter.EvalResult.load(tmp_path / "eval").chunks) == EXPECTED


@pytest.mark.parametrize("seed,options", [
    (21, {}), (22, {"shuffle": True}), (23, {"null_files": "all"}), (24, {"null_files": "all", "missing": 3}),
    (25, {"dictionary": True}), (26, {"shuffle": True, "dictionary": True}),
])
def test_streamed_and_whole_chunk_tables_agree_on_undecided_cases(tmp_path, tiny_slices, seed, options):
    # many slices of 1 to 3 cases, unlabelled cases and cases expecting files alone among them
    golden, run = make_case_files(tmp_path, seed, **options)
    whole = whole_run(golden, run)
    streamed = ragmeter.score(golden, run)
    assert_same(streamed, whole)
    undecided = whole.cases.filter(~pl.col("labeled") | pl.col("hit").is_null())["id"]
    chunks = whole.chunks.with_columns(pl.col("id").is_in(undecided.implode()).alias("undecided"))
    assert chunks.filter("undecided").height  # the generated set has such cases with chunks
    assert chunks.filter("undecided")["relevant"].null_count() == chunks.filter("undecided").height
    assert chunks.filter(~pl.col("undecided"))["relevant"].null_count() == 0
    # and the folder written while scoring (golden order) or from a second read equals the whole run's
    ragmeter.retrieval.score_into(golden, run, tmp_path / "streamed")
    whole.write(tmp_path / "whole")
    assert_frame_equal(pl.read_parquet(tmp_path / "streamed" / "chunks.parquet"),
                       pl.read_parquet(tmp_path / "whole" / "chunks.parquet"))


def _as_written_by_earlier_builds(folder: Path) -> None:
    """``folder``'s chunks.parquet as builds before h34 wrote it: relevant false where it is now null, and
    file_match true in every chunk of an unlabelled case."""
    path = folder / "chunks.parquet"
    unlabelled = pl.read_parquet(folder / "cases.parquet").filter(~pl.col("labeled"))["id"].implode()
    pl.read_parquet(path).with_columns(
        pl.col("relevant").fill_null(False),
        pl.when(pl.col("id").is_in(unlabelled)).then(True).otherwise(pl.col("file_match")).alias("file_match"),
    ).write_parquet(path)


@pytest.mark.parametrize("earlier_build", [False, True])
def test_the_report_explorer_tells_an_unlabelled_chunk_from_an_undecided_one(tmp_path, capsys, earlier_build):
    # before: the chunks of u-1 and f-1 read '✗ not relevant', as a miss would; and still did for a folder an
    # earlier build wrote (relevant false there), though the case's labeled and hit say it was not decided
    from test_report import _chromium
    from test_report_html_s29 import _open, explore

    if _chromium() is None:
        pytest.skip("no chromium binary (Debian's `chromium` package)")
    golden, jsonl, _ = _write_inputs(tmp_path, RUN)
    out = tmp_path / "scored"
    _score_folder(golden, jsonl, out)
    if earlier_build:
        _as_written_by_earlier_builds(out)
    assert main(["report", str(out)]) == 0
    heads = {}
    for case_id in ("a-1", "u-1", "f-1"):
        (tmp_path / case_id).mkdir()
        views, console = explore(out / "report.html", _open(out, case_id), tmp_path / case_id)
        assert console == []
        opened = next(v for v in views if v["detail"] == "Case " + case_id)
        heads[case_id] = [c["head"].split(" #")[0] for c in opened["chunks"]]
    assert heads == {"a-1": ["\u2713 relevant", "\u2717 not relevant", "\u2717 not relevant"],
                     "u-1": ["? unlabelled", "? unlabelled"], "f-1": ["? not decided", "? not decided"]}
