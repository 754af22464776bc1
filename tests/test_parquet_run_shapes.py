"""A run written as Parquet in the shapes pandas, pyarrow and Polars give it is scored as the same run written as
JSON Lines (``ragmeter.score(golden, run).cases`` and ``.summary`` equal), or refused with one line naming the
file and the column."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ragmeter
from ragmeter.errors import InputError

EX = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"
GOLDEN = EX / "golden.jsonl"
RUN = [json.loads(line) for line in (EX / "run.jsonl").read_text(encoding="utf-8").splitlines()
       if line.startswith("{")]


def write_jsonl(path: Path, rows: List[Dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def assert_scored_as_jsonl(tmp_path: Path, parquet: Path, rows: List[Dict[str, Any]]) -> None:
    reference = ragmeter.score(GOLDEN, write_jsonl(tmp_path / "reference.jsonl", rows))
    got = ragmeter.score(GOLDEN, parquet)
    assert got.cases.equals(reference.cases, null_equal=True)
    assert got.summary == reference.summary
    assert got.chunks.equals(reference.chunks, null_equal=True)


def cli_error(tmp_path: Path, run: Path) -> str:
    """The one line ``ragmeter score`` prints for a refused run (exit 2, no traceback)."""
    done = subprocess.run([sys.executable, "-m", "ragmeter", "score", "--golden", str(GOLDEN), "--run", str(run)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("ragmeter: note:")]
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize("row_group_size", [None, 1])
def test_a_zero_row_file_from_pyarrow_is_refused_as_having_no_case(tmp_path, row_group_size):
    # pyarrow stores the texts of a zero-row file in a dictionary page; the scorer read such a file's schema as a
    # table (chunked columns) and crashed: AttributeError: 'pyarrow.lib.ChunkedArray' object has no attribute 'values'.
    # A run of no case measures nothing: refused in one line, as an empty JSON Lines run is
    path = tmp_path / "empty.parquet"
    pq.write_table(pa.Table.from_pylist(RUN).slice(0, 0), path, row_group_size=row_group_size)
    for call in (lambda: ragmeter.score(GOLDEN, path), lambda: ragmeter.dataset.load_run(path)):
        with pytest.raises(ragmeter.errors.InputError, match="no cases \\(the file has 0 rows\\)"):
            call()


@pytest.mark.parametrize("field, spelling", [("file", "fileName"), ("file", "file_name"), ("text", "content"),
                                             ("text", "page_content"), ("chunk_id", "chunkId")])
@pytest.mark.parametrize("row_group_size", [None, 7])
def test_item_field_aliases_are_read_from_parquet_as_from_json_lines(tmp_path, field, spelling, row_group_size):
    # A run file's items may spell their fields as README's "Formats" table says. JSON Lines accepted them; Parquet
    # ignored fileName/file_name (every file-level metric silently unscored, "no file" warning) and chunkId (chunk
    # ids null), and refused content/page_content ("column 'retrieved' has no field 'text'").
    rows = [dict(r, retrieved=[{(spelling if k == field else k): v for k, v in item.items()} for item in r["retrieved"]])
            for r in RUN]
    path = tmp_path / "run.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=row_group_size)
    assert_scored_as_jsonl(tmp_path, path, rows)
    assert_scored_as_jsonl(tmp_path, path, RUN)


def test_two_spellings_of_an_item_field_with_different_values_are_refused_naming_the_row(tmp_path):
    rows = [dict(r, retrieved=[dict(item, fileName=item["file"]) for item in r["retrieved"]]) for r in RUN]
    rows[3]["retrieved"][1]["fileName"] = "other.md"
    path = tmp_path / "run.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    line = cli_error(tmp_path, path)
    assert line == (f"ragmeter: error: {path}: row 4: both 'retrieved.file' and 'retrieved.fileName' given "
                    f"with different values")
    same = [dict(r, retrieved=[dict(item, fileName=item["file"]) for item in r["retrieved"]]) for r in RUN]
    pq.write_table(pa.Table.from_pylist(same), path)
    assert_scored_as_jsonl(tmp_path, path, RUN)


@pytest.mark.parametrize("use_dictionary", [True, False])
def test_an_item_with_text_null_and_content_given_is_matched_on_its_content(tmp_path, use_dictionary):
    # Items giving both 'text' and 'content' (one null where the other is given) are read as JSON Lines reads them
    # (the first spelling not null). The scorer matched the Arrow 'text' field: its null text went unmatched
    # (plain pages: different scores, silently) or its dictionary texts were blanked before the spellings were
    # compared (dictionary pages: every row refused for 'different values').
    rows = [dict(r, retrieved=[dict(item, content=item["text"]) for item in r["retrieved"]]) for r in RUN]
    rows[0]["retrieved"][1]["text"] = None
    path = tmp_path / "run.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path, use_dictionary=use_dictionary)
    assert_scored_as_jsonl(tmp_path, path, RUN)


def _dictionary_encoded(table: pa.Table, name: str) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, table.column(name).dictionary_encode())


@pytest.mark.parametrize("writer", ["pandas-category-id", "pandas-category-mode", "polars-categorical-id",
                                    "polars-enum-mode", "pyarrow-dictionary-id", "pyarrow-dictionary-item-file"])
def test_categorical_string_columns_are_read_as_their_strings(tmp_path, writer):
    # A string column stored as a dictionary in the file's Arrow schema (pandas' category, Polars' Categorical and
    # Enum, a pyarrow dictionary array) is read back by Polars as Categorical; the run was refused: "column 'id' has
    # type Categorical, expected string".
    path = tmp_path / "run.parquet"
    if writer.startswith("pandas"):
        import pandas as pd

        frame = pd.DataFrame(RUN)
        column = "id" if writer.endswith("id") else "retrieval_mode"
        frame[column] = frame[column].astype("category")
        frame.to_parquet(path)
    elif writer == "polars-categorical-id":
        pl.DataFrame(RUN).with_columns(pl.col("id").cast(pl.Categorical)).write_parquet(path)
    elif writer == "polars-enum-mode":
        modes = sorted({r["retrieval_mode"] for r in RUN})
        pl.DataFrame(RUN).with_columns(pl.col("retrieval_mode").cast(pl.Enum(modes))).write_parquet(path)
    elif writer == "pyarrow-dictionary-id":
        pq.write_table(_dictionary_encoded(pa.Table.from_pylist(RUN), "id"), path)
    else:
        table = pa.Table.from_pylist(RUN)
        lists = table.column("retrieved").combine_chunks()
        items = lists.values
        fields = [items.field(i) for i in range(items.type.num_fields)]
        fields[items.type.get_field_index("file")] = fields[items.type.get_field_index("file")].dictionary_encode()
        struct = pa.StructArray.from_arrays(fields, names=[f.name for f in items.type])
        table = table.set_column(table.schema.get_field_index("retrieved"), "retrieved",
                                 pa.ListArray.from_arrays(lists.offsets, struct))
        pq.write_table(table, path)
    assert_scored_as_jsonl(tmp_path, path, RUN)
    whole = ragmeter.score(GOLDEN, ragmeter.dataset.load_run(path))
    assert whole.cases.equals(ragmeter.score(GOLDEN, path).cases, null_equal=True)


@pytest.mark.parametrize("items", ["struct", "string"])
@pytest.mark.parametrize("options", [{}, {"use_dictionary": False}, {"row_group_size": 7}])
def test_a_fixed_size_list_of_retrieved_items(tmp_path, items, options):
    # A run whose retrievals all have k items may be written as a fixed-size list (numpy arrays, pyarrow
    # list_(type, k)). It crashed (InvalidOperationError: list.eval operation not supported for dtype
    # array[struct[4], 3]), or with dictionary pages was refused ("field retrieved.text has type Categorical").
    k = 3
    filler = {"file": "none.md", "chunk_id": "none.md#0", "text": "nothing", "score": 0.0}
    rows = [dict(r, retrieved=((r["retrieved"] or [filler]) * k)[:k]) for r in RUN]
    if items == "string":
        rows = [dict(r, retrieved=[item["text"] for item in r["retrieved"]]) for r in rows]
    table = pa.Table.from_pylist(rows)
    lists = table.column("retrieved").combine_chunks()
    fixed = pa.FixedSizeListArray.from_arrays(lists.values, k)
    table = table.set_column(table.schema.get_field_index("retrieved"), "retrieved", fixed)
    path = tmp_path / "run.parquet"
    pq.write_table(table, path, **options)
    assert pq.read_schema(path).field("retrieved").type == fixed.type
    assert_scored_as_jsonl(tmp_path, path, rows)


def test_two_spellings_differing_on_every_row_are_counted_over_the_whole_file(tmp_path, monkeypatch):
    # The file is read in slices; the rows where 'retrieved' and 'retrieved_contexts' differ were raised with the
    # first slice's type checks, so the error counted the first slice's rows only ("3 rows" of 49).
    from ragmeter import _parquet_ahead

    monkeypatch.setattr(_parquet_ahead, "PARQUET_SLICE_BYTES", 1)
    monkeypatch.setattr(_parquet_ahead, "SLICE_ROWS", (3, 3))
    rows = [dict(r, retrieved_contexts=[item["text"] for item in r["retrieved"]]) for r in RUN]
    path = tmp_path / "run.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    with pytest.raises(InputError) as streamed:
        ragmeter.score(GOLDEN, path)
    with pytest.raises(InputError) as whole:
        ragmeter.dataset.load_run(path)
    assert str(streamed.value) == str(whole.value)
    assert str(streamed.value).startswith(f"{path}: 49 rows: both 'retrieved' and 'retrieved_contexts' given with "
                                          f"different values (rows 1, 2, 3, 4, 5, ...)")
