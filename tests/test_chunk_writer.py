"""chunks.parquet's writer (``ragmeter._io.write_parquet_parts``): the parts as they were, one row group each,
a dictionary for the texts when they repeat and none when they are distinct."""
from __future__ import annotations

import random

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from polars.testing import assert_frame_equal

import ragmeter
from ragmeter import _io
from ragmeter._dictionary_texts import large_strings as _large_strings
from ragmeter.retrieval import score_into

from test_score_streaming import make_case_files


def _chunk_parts(n_parts: int, rows: int, distinct: bool, seed: int = 3) -> list:
    rng = random.Random(seed)
    pool = ["".join(rng.choice("abc 大模型ＲＡＧ") for _ in range(40)) for _ in range(5)]
    parts = []
    for p in range(n_parts):
        texts = [f"{p}-{i} " + rng.choice(pool) if distinct else rng.choice(pool) for i in range(rows)]
        texts[rng.randrange(rows)] = None
        parts.append(pa.table({
            "id": pa.array([f"q{(p * rows + i) // 4}" for i in range(rows)], pa.large_string()),
            "rank": pa.array(np.arange(rows, dtype=np.int64) % 4 + 1),
            "text": pa.array(texts, pa.large_string()),
            "score": pa.array([rng.random() for _ in range(rows)]),
        }))
    return parts


def _text_encodings(path) -> set:
    meta = pq.ParquetFile(path).metadata
    column = meta.schema.names.index("text")
    return {e for g in range(meta.num_row_groups) for e in meta.row_group(g).column(column).encodings}


@pytest.mark.parametrize("distinct", [True, False])
def test_the_file_holds_the_parts_in_order(tmp_path, distinct):
    parts = _chunk_parts(3, 500, distinct)
    path = tmp_path / "chunks.parquet"
    _io.write_parquet_parts(iter(parts), path, parts[0].schema)
    assert pq.read_schema(path).remove_metadata() == parts[0].schema
    expected = pl.from_arrow(pa.concat_tables(parts))
    assert_frame_equal(pl.read_parquet(path), expected)
    meta = pq.ParquetFile(path).metadata
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == [500, 500, 500]
    assert bool({"RLE_DICTIONARY", "PLAIN_DICTIONARY"} & _text_encodings(path)) is not distinct
    ids = meta.schema.names.index("id")  # the ids repeat either way: they keep theirs
    assert "RLE_DICTIONARY" in meta.row_group(0).column(ids).encodings
    scores = meta.schema.names.index("score")  # distinct either way: none
    assert "RLE_DICTIONARY" not in meta.row_group(0).column(scores).encodings
    # min/max statistics for every column but the texts, whose bounds help no reader
    stats = {name: meta.row_group(0).column(i).is_stats_set for i, name in enumerate(meta.schema.names)}
    assert stats == {"id": True, "rank": True, "text": False, "score": True}


def test_repeated_texts_keep_their_dictionary_past_pyarrows_default_limit(tmp_path):
    """3,000 texts of 1 kB repeated: a 3 MB dictionary, beyond the 1 MB after which pyarrow would fall back."""
    pool = [f"{i:04d}" + "ｘ" * 332 for i in range(3000)]
    rng = np.random.default_rng(1)
    texts = pa.array([pool[i] for i in rng.integers(0, 3000, 30_000)], pa.large_string())
    part = pa.table({"text": texts})
    path = tmp_path / "chunks.parquet"
    _io.write_parquet_parts(iter([part]), path, part.schema)
    column = pq.ParquetFile(path).metadata.row_group(0).column(0)
    assert column.total_compressed_size < 4 << 20 and column.total_uncompressed_size < 5 << 20
    assert pq.read_table(path).column(0).combine_chunks().equals(texts)


def test_no_parts_give_an_empty_file_of_the_schema(tmp_path):
    schema = _chunk_parts(1, 4, True)[0].schema
    path = tmp_path / "chunks.parquet"
    _io.write_parquet_parts(iter([]), path, schema)
    table = pq.read_table(path)
    assert table.num_rows == 0 and table.schema.remove_metadata() == schema


@pytest.mark.parametrize("distinct", [True, False])
def test_a_frame_is_written_as_its_parts_would_be(tmp_path, distinct):
    frame = pl.from_arrow(pa.concat_tables(_chunk_parts(2, 40_000, distinct)))
    path = tmp_path / "chunks.parquet"
    _io.write_chunk_frame(frame, path)
    assert_frame_equal(pl.read_parquet(path), frame)
    assert pq.ParquetFile(path).metadata.num_row_groups == 2  # 80,000 rows, 65,536 a row group
    assert bool({"RLE_DICTIONARY", "PLAIN_DICTIONARY"} & _text_encodings(path)) is not distinct


def test_short_strings_become_large_ones_sharing_their_characters():
    values = pa.array(["ab", None, "", "大模型", "x" * 300, "end"], pa.string()).slice(1, 4)
    large = _large_strings(values)
    assert large.type == pa.large_string() and large.to_pylist() == values.to_pylist()
    assert large.buffers()[2].address == values.buffers()[2].address
    assert _large_strings(large) is large


@pytest.mark.parametrize("repeat_texts", [True, False])
def test_streamed_chunks_file_equals_the_whole_runs(tmp_path, repeat_texts):
    """A run whose texts are Arrow `string` (not `large_string`), streamed in slices: chunks.parquet is the chunk
    table of the run loaded at once, with large_string texts."""
    golden, run = make_case_files(tmp_path, 31, n=300, repeat_texts=repeat_texts)
    table = pq.read_table(run)
    small = pa.large_list(pa.struct([("file", pa.string()), ("chunk_id", pa.string()), ("text", pa.string()),
                                     ("score", pa.float64())]))
    column = table.schema.get_field_index("retrieved")
    retrieved = pa.array(table.column(column).to_pylist(), small)
    pq.write_table(table.set_column(column, "retrieved", retrieved), run, row_group_size=64)
    whole = ragmeter.score(golden, pl.read_parquet(run))
    score_into(golden, run, tmp_path / "out")
    written = pl.read_parquet(tmp_path / "out" / "chunks.parquet")
    assert pq.read_schema(tmp_path / "out" / "chunks.parquet").field("text").type == pa.large_string()
    assert_frame_equal(written, whole.chunks)


def test_the_writer_takes_the_slices_pool_unless_the_environment_names_one(tmp_path, monkeypatch):
    """Its row groups' buffers come from the pool the reader decodes into (jemalloc's, else the system's), not
    from the default mimalloc pool; ``ARROW_DEFAULT_MEMORY_POOL`` set, the default pool is used."""
    pools = []

    class Recording(pq.ParquetWriter):
        def __init__(self, *args, **options):  # type: ignore[no-untyped-def]
            pools.append(options.get("memory_pool"))
            super().__init__(*args, **options)

    monkeypatch.setattr(pq, "ParquetWriter", Recording)
    part = _chunk_parts(1, 50, True)[0]
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    _io.write_parquet_parts(iter([part]), tmp_path / "a.parquet", part.schema)
    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "system")
    _io.write_parquet_parts(iter([part]), tmp_path / "b.parquet", part.schema)
    try:
        expected = pa.jemalloc_memory_pool().backend_name
    except NotImplementedError:  # a pyarrow built without jemalloc
        expected = "system"
    assert pools[0] is not None and pools[0].backend_name == expected
    assert pools[1] is None


def test_texts_for_the_writer_as_a_dictionary_of_the_values_used():
    """A slice's dictionary holds the values of its row group so far: the writer gets the ones the slice uses
    (else each row group would repeat the ones before it); a plain array is the dictionary of itself."""
    from ragmeter._dictionary_texts import as_dictionary

    values = pa.array(["earlier", "b", "unused", "a"], pa.string())
    texts = pa.DictionaryArray.from_arrays(pa.array([3, 1, 3, None, 1], pa.int32()), values).slice(1)
    written = as_dictionary(texts)
    assert written.type == pa.dictionary(pa.int32(), pa.large_string())
    assert written.dictionary.to_pylist() == ["b", "a"] and written.to_pylist() == ["b", "a", None, "b"]
    plain = as_dictionary(pa.array(["x", "y", "x"], pa.string()))
    assert plain.dictionary.to_pylist() == ["x", "y", "x"] and plain.to_pylist() == ["x", "y", "x"]
