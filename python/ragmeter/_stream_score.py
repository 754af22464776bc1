"""``ragmeter.score`` on a Parquet run, a slice of rows at a time.

The run is read with :class:`ragmeter.dataset.ParquetRun` (a few thousand rows per slice, whatever the
file's row groups; every slice validated as :func:`ragmeter.dataset.load_run` validates the whole file,
every problem of every slice reported at once at the end). Each slice is matched in Rust and only its match
is kept: per chunk its relevance marks (a few bytes), not its text, file, chunk id or score, which
``chunks.parquet`` and :attr:`ScoreResult.chunks` read again from the file with the texts. The slices'
matches are then put in the golden set's order as one :class:`EvidenceMatch`, and the tables and summary
are those of :func:`ragmeter.retrieval._score_prepared`, so the results are the ones the whole run loaded at
once gives.

The run-wide "phrase found in no chunk" check needs every chunk text of the run, and a phrase's own case may
be in a later slice than the chunk that holds it: a :class:`ragmeter.evidence.RunPhrases` index over every
phrase of the golden set lives across the slices, and each slice's chunk texts are checked against it in
Rust while they are matched. No text is kept from one slice to the next.

``chunks.parquet``: when the caller names its file before scoring (:func:`ragmeter.retrieval.score_into`,
``ragmeter score --out``), each slice's chunk rows are written while the slice is in memory (:class:`_ChunkSpool`)
and the file is kept if the run lists its cases in the golden set's order and the whole-run marks equal the
slices' (they differ only for a run that gives no file for any chunk); otherwise, and for
:meth:`ScoreResult.write`, the texts are read a second time, slice by slice when the run is in golden order,
else the chunk table is built in memory (as for :attr:`ScoreResult.chunks`).
"""
from __future__ import annotations

import contextlib
import os
import queue
import threading
from pathlib import Path
from typing import Any, Iterator, List, Optional, Tuple

import numpy as np
import polars as pl
import pyarrow as pa

from ragmeter import _dictionary_texts, _parquet_ahead
from ragmeter._columns import dictionary_text_column, offsets_from_lengths, string_column
from ragmeter._dictionary_texts import large_strings
from ragmeter._io import release_slice_memory, write_chunk_frame, write_parquet_parts
from ragmeter.dataset import ParquetRun, arrow_chunk_texts, check_run_against_golden, load_golden
from ragmeter.evidence import EvidenceMatch, RunPhrases, mark_no_file_in_run, match_relevance, retrieved_columns
from ragmeter.retrieval import ScoreResult, _check_k, _PreparedMatch, _score_tables, source_name

__all__ = ["score_parquet"]

_CHUNK_FIELDS = ("file", "chunk_id", "score")
#: their types in the chunk table
_FIELDS_SCHEMA = {"file": pl.String, "chunk_id": pl.String, "score": pl.Float64}


class _Slice:
    """What is kept of one matched slice: its cases' golden positions, the match, and how many of its chunks
    name no file (the chunks' strings are not kept: at 100,000 cases they held 70 MB, and twice that while
    they were put in golden order)."""

    def __init__(self, positions: np.ndarray, match: EvidenceMatch, files_null: int) -> None:
        self.positions = positions
        self.match = match
        self.files_null = files_null


def score_parquet(golden: Any, run: Path, k: int, chunks_to: Optional[Path] = None) -> ScoreResult:
    """:func:`ragmeter.score` of a Parquet run read slice by slice (see the module docs). ``chunks_to``: the
    chunk table is written there while the slices are read, when it can be (see the module docs)."""
    _parquet_ahead.start(run)  # its first slices are decoded while the golden set loads
    try:
        g = load_golden(golden)
        reader = ParquetRun(run)  # takes the early reader over
    finally:
        _parquet_ahead.discard()  # not taken: a bad golden set, or a file ParquetRun refused
    golden_name = source_name(golden, "golden")
    # A dict built once: a Polars join, or a cast to an Enum of the golden ids, hashes every golden id again
    # for each slice (3-10 ms a slice at 100,000 cases, against 0.3 ms for the slice's ids looked up here).
    position_of = dict(zip(g["id"].to_list(), range(g.height)))
    run_phrases = RunPhrases(g["expected_evidence"])
    slices: List[_Slice] = []
    run_rows: List[pl.DataFrame] = []
    spool = _ChunkSpool(chunks_to) if chunks_to is not None else None
    try:
        for batch, frame in reader:
            run_rows.append(_detached(frame.select("id", "line", "id_from_line", "retrieval_mode", "run_error",
                                                 "retrieved_null")))
            if reader.problems or frame.height == 0:
                continue  # reader.finish() raises them
            found = [position_of.get(case_id) for case_id in frame["id"].to_list()]
            if None in found:
                continue  # ids not in the golden set: check_run_against_golden raises
            position = np.fromiter(found, dtype=np.int64, count=len(found))
            slices.append(_match_slice(g, batch, frame, position, run_phrases, spool))
        reader.finish()
        if spool is not None:
            spool.close()
    finally:
        if spool is not None:
            spool.stop()
        release_slice_memory()
    run_frame = pl.from_arrow(pa.concat_tables(run_rows)) if run_rows else pl.DataFrame(schema={"id": pl.String, "line": pl.Int64,
                                                                           "id_from_line": pl.Boolean,
                                                                           "retrieval_mode": pl.String,
                                                                           "run_error": pl.String,
                                                                           "retrieved_null": pl.Boolean})
    run_rows.clear()
    missing = check_run_against_golden(g, run_frame, run_source=str(run), golden_source=golden_name)
    joined = g.join(run_frame.select("id", "retrieval_mode", "run_error", "retrieved_null"), on="id", how="left", maintain_order="left").with_columns(
        pl.col("id").is_in(pl.Series(missing, dtype=pl.Utf8).implode()).alias("missing_from_run"))
    del run_frame
    assembled = _assemble(g, slices, missing)
    slices.clear()  # their matches are in the assembled one: not held twice while the tables are made
    assembled.match.phrase_in_run = run_phrases.phrase_in_run()
    _check_k(k)
    prepared = _PreparedMatch(joined=joined, missing=missing, match=assembled.match)
    cases, by_category, summary = _score_tables(prepared, k, assembled.files_null)
    source = _ChunkSource(reader, joined["id"], assembled)
    spooled = chunks_to if spool is not None and spool.kept(source) else None
    return StreamedScoreResult(cases=cases, by_category=by_category, summary=summary, chunk_source=source,
                               spooled=spooled)


def _match_slice(g: pl.DataFrame, batch: Any, frame: pl.DataFrame, position: np.ndarray,
                 run_phrases: RunPhrases, spool: Optional["_ChunkSpool"] = None) -> _Slice:
    files, fields = _chunk_fields(frame)
    texts, flat = _texts_for_rust(batch, frame)
    match = match_relevance(g["expected_files"].gather(position), g["expected_evidence"].gather(position), files,
                            texts, no_file_in_run=False, run_index=run_phrases, run_cases=position)
    if spool is not None:
        spool.add(position, _chunk_table(frame["id"], match, fields), flat)
    return _Slice(position, match, fields["file"].null_count())


def _chunk_fields(frame: pl.DataFrame) -> Tuple[pl.Series, pl.DataFrame]:
    """A slice's chunk files per case (a list column, for matching), and its chunks' file, chunk id and score,
    one row per chunk."""
    fields = frame.select(pl.col("retrieved").list.eval(pl.element().struct.field(name)).alias(name)
                          for name in _CHUNK_FIELDS)
    files = fields["file"]
    return files, fields.select(pl.col(name).explode(empty_as_null=False, keep_nulls=False) for name in _CHUNK_FIELDS)


def _detached(frame: pl.DataFrame) -> Any:
    """``frame`` as a pyarrow table of its own buffers. Columns read from a slice share its Arrow buffers, and
    any one of them keeps the whole slice (its texts) alive, so what is kept of a slice is copied."""
    table = frame.to_arrow(compat_level=pl.CompatLevel.oldest())
    return pa.table([_copied(column.combine_chunks()) for column in table.columns], names=table.column_names)


def _copied(array: Any) -> Any:
    """A flat Arrow array with its buffers copied into memory of its own (numpy's, outside the Arrow pool, where
    small buffers kept for the whole run would pin the pool's large freed blocks)."""
    buffers = [None if b is None else pa.py_buffer(np.frombuffer(b, np.uint8).copy()) for b in array.buffers()]
    return pa.Array.from_buffers(array.type, len(array), buffers, null_count=array.null_count, offset=array.offset)


def _texts_for_rust(batch: Any, frame: pl.DataFrame) -> Tuple[Any, pl.Series]:
    """The slice's chunk texts for :func:`match_relevance` (Arrow buffers when the batch allows) and flat."""
    arrow = arrow_chunk_texts(batch, frame)
    if arrow is None:
        # A slice's dictionary-encoded texts are not in its frame; every such slice has the plain layout
        # (ParquetRun writes out the texts of a slice whose lists have nulls).
        assert _dictionary_texts.plain_texts(batch) is batch, "dictionary-encoded texts of an unusual slice"
        texts = retrieved_columns(frame["retrieved"])[1]
        flat = texts.explode(empty_as_null=False, keep_nulls=False).to_arrow(compat_level=pl.CompatLevel.oldest())
        return texts, flat.combine_chunks() if hasattr(flat, "combine_chunks") else flat
    offsets, values = arrow
    if pa.types.is_dictionary(values.type):
        column, ids = dictionary_text_column(values)
    else:
        column, ids = string_column(values), None
    data = column[1].view()
    data.flags.writeable = False  # immutable Arrow buffer: borrowed by the binding, not copied
    return (offsets, (column[0], data)) if ids is None else (offsets, (column[0], data), ids), values


# ---------------------------------------------------------------------------
# The slices' matches as one match, in golden order
# ---------------------------------------------------------------------------


class _Assembled:
    def __init__(self, match: EvidenceMatch, chunk_order: Optional[np.ndarray], files_null: int) -> None:
        self.match = match
        self.chunk_order = chunk_order  # per chunk (golden order), its index in the file's order; None: the same
        self.files_null = files_null


def _regroup(offsets: np.ndarray, order: Optional[np.ndarray]) -> Tuple[Optional[np.ndarray], np.ndarray]:
    """Indices that put the groups of ``offsets`` (source order) in the order ``order``, and their new offsets;
    None for the indices when ``order`` is None (the source order)."""
    if order is None:
        return None, offsets
    lengths = np.diff(offsets)[order]
    new = offsets_from_lengths(lengths)
    index = np.arange(new[-1], dtype=np.int64) - np.repeat(new[:-1] - offsets[:-1][order], lengths)
    return index, new


def _assemble(g: pl.DataFrame, slices: List[_Slice], missing: List[str]) -> _Assembled:
    parts = [s.match for s in slices]
    positions = [s.positions for s in slices]
    if missing:  # golden cases absent from the run: empty retrievals
        where = g.select("id").with_row_index("_position").filter(pl.col("id").is_in(pl.Series(missing).implode()))
        position = where["_position"].to_numpy().astype(np.int64)
        empty = pl.repeat(pl.lit([], dtype=pl.List(pl.String)), len(position), eager=True)
        parts.append(match_relevance(g["expected_files"].gather(position), g["expected_evidence"].gather(position),
                                     empty, empty, no_file_in_run=False))
        positions.append(position)
    source = np.concatenate(positions) if positions else np.zeros(0, np.int64)
    golden = np.arange(g.height)
    # golden case i is source case order[i]; None: the run lists the golden cases in their order (no index
    # arrays of every chunk, 50 MB at 100,000 cases, and no copies through them)
    order: Optional[np.ndarray] = None if np.array_equal(source, golden) else np.argsort(source, kind="stable")
    if order is not None and (len(order) != g.height or not np.array_equal(source[order], golden)):  # pragma: no cover
        raise AssertionError("streamed scoring: the run's cases do not cover the golden set once each")

    def cat(name: str, index: Optional[np.ndarray]) -> np.ndarray:
        values = np.concatenate([getattr(m, name) for m in parts])
        return values if index is None else values[index]

    chunk_index, chunk_offsets = _regroup(offsets_from_lengths(np.concatenate([np.diff(m.chunk_offsets) for m in parts])), order)
    phrase_index, phrase_offsets = _regroup(offsets_from_lengths(np.concatenate([np.diff(m.phrase_offsets) for m in parts])), order)
    file_index, file_offsets = _regroup(offsets_from_lengths(np.concatenate([np.diff(m.file_offsets) for m in parts])), order)
    file_unknown = None
    placeholder = None
    if any(m.file_unknown is not None for m in parts):
        file_unknown = np.concatenate([m.file_unknown if m.file_unknown is not None else np.zeros(m.n_cases, bool)
                                       for m in parts])
        file_unknown = file_unknown if order is None else file_unknown[order]
        placeholder = np.concatenate([m.file_placeholder if m.file_placeholder is not None
                                      else np.zeros(len(m.relevant), bool) for m in parts])
        placeholder = placeholder if chunk_index is None else placeholder[chunk_index]
    match = EvidenceMatch(
        labeled=cat("labeled", order), chunk_offsets=chunk_offsets, phrase_offsets=phrase_offsets,
        file_offsets=file_offsets, file_match=cat("file_match", chunk_index), relevant=cat("relevant", chunk_index),
        phrases_found=cat("phrases_found", chunk_index), phrase_first_rank=cat("phrase_first_rank", phrase_index),
        phrase_any_rank=cat("phrase_any_rank", phrase_index), phrase_empty=cat("phrase_empty", phrase_index),
        file_first_rank=cat("file_first_rank", file_index), file_unknown=file_unknown, file_placeholder=placeholder)
    if chunk_index is not None and np.array_equal(chunk_index, np.arange(len(chunk_index))):
        chunk_index = None  # cases out of golden order whose chunks are not (cases without chunks)
    files_null = sum(s.files_null for s in slices)
    if files_null and files_null == len(match.relevant):
        mark_no_file_in_run(match, g["expected_files"])
    return _Assembled(match, chunk_index, files_null)


# ---------------------------------------------------------------------------
# The chunks read again
# ---------------------------------------------------------------------------


def _chunks_again(reader: ParquetRun) -> Iterator[Tuple[pl.DataFrame, Any]]:
    """Per slice of the file, in its order: the chunks' file, chunk id and score (one row per chunk) and their
    texts (a pyarrow large_string array), as the scoring pass read them."""
    for first, batch in reader.batches():
        frame = reader.frame(batch, first, record=False)
        yield _chunk_fields(frame)[1], large_strings(_texts_for_rust(batch, frame)[1])


def _text_series(values: Any) -> pl.Series:
    """A pyarrow string array as a Series named ``text``, by way of a record batch: ``pl.Series(name, array)``
    imports ``pyarrow.compute`` (0.15 s of the command's start) for a check that only dictionary arrays need."""
    return pl.from_arrow(pa.record_batch([values], names=["text"])).to_series()


# ---------------------------------------------------------------------------
# The chunk table: while the slices are read, or from a second read of the texts
# ---------------------------------------------------------------------------


def _chunk_table(ids: pl.Series, match: EvidenceMatch, fields: Optional[pl.DataFrame]) -> pl.DataFrame:
    """The chunk table of ``match``'s cases (``ids`` one per case) but its text; without its file, chunk id and
    score when ``fields`` is None (:func:`_with_fields` adds them)."""
    lengths = np.diff(match.chunk_offsets)
    case = np.repeat(np.arange(len(lengths)), lengths)
    rank = np.arange(len(case), dtype=np.int64) - np.repeat(match.chunk_offsets[:-1], lengths) + 1
    rest = pl.DataFrame([ids.gather(case).alias("id"), pl.Series("rank", rank, dtype=pl.Int64), *match.chunk_marks()])
    return rest if fields is None else _with_fields(rest, fields)


def _with_fields(rest: pl.DataFrame, fields: pl.DataFrame) -> pl.DataFrame:
    """The chunk table (but its text) from ``rest`` (its other columns, as :func:`_chunk_table` without
    fields gives them) and the chunks' ``fields``, in the same rows."""
    if fields.height != rest.height:
        raise _ChangedWhileScored()
    columns = rest.get_columns()
    columns[2:2] = [fields["file"], fields["chunk_id"], fields["score"]]
    return pl.DataFrame(columns)


class _ChangedWhileScored(Exception):
    """The run's chunks read again are not the chunks scored (:meth:`_ChunkSource._checked` reports it)."""


#: where the chunk table's text column goes: after the chunk id, before the score
_TEXT_AT = 4


def _with_texts(marks: pl.DataFrame, texts: Any, dictionary: bool = False) -> Any:
    """The chunk rows ``marks`` (the chunk table but its text) with their texts (a pyarrow string array), as the
    pyarrow table :func:`ragmeter._io.write_parquet_parts` writes: texts as large_string (a dictionary array's
    written out, on the chunk writer's thread when it writes), or, with ``dictionary``, as a dictionary array
    (:func:`ragmeter._dictionary_texts.as_dictionary`: each distinct text of a slice read as a dictionary is
    written once, not gathered into every chunk and hashed again by the writer); buffers are not copied."""
    column = _dictionary_texts.as_dictionary(texts) if dictionary else large_strings(texts)
    return marks.to_arrow(compat_level=pl.CompatLevel.oldest()).add_column(_TEXT_AT, "text", column)


def _arrow_schema(marks: pl.DataFrame, dictionary: bool = False) -> Any:
    """The Arrow schema of the chunk table whose other columns are those of ``marks``."""
    return _with_texts(marks.clear(), pa.nulls(0, pa.large_string()), dictionary).schema


class _ChunkSpool:
    """``chunks.parquet`` written while the run is scored: each slice's chunk rows, with the slice's own text
    buffers, go to :func:`ragmeter._io.write_parquet_parts` (one row group per slice, as
    :meth:`_ChunkSource.write` writes it), on a thread of its own so that the scoring stays in the main thread,
    where Ctrl-C and SIGTERM are seen (pyarrow's writer lets go of the GIL), one slice at a time: the next is
    handed over once the writer has written the last (a slice's texts are tens of MB, and writing one is
    quicker than matching it). Only a run in golden order can be written this way; :meth:`kept` says whether
    the file is the chunk table, and removes it if not."""

    _DONE = object()

    def __init__(self, path: Path) -> None:
        self.path = path
        self.in_order = True  # every slice so far came after the previous one in the golden set
        self._last = -1
        self._rows = 0
        self._marks: List[pl.DataFrame] = []  # relevant and file_match of the rows written, to check at the end
        self._schema: Optional[pl.Schema] = None  # of the rows but their texts
        self._dictionary = False  # texts written as a dictionary array (see _with_texts)
        self._queue: "queue.Queue[Any]" = queue.Queue()
        self._room = threading.Semaphore(1)  # released by the writer when it has written a slice
        self._stopped = threading.Event()
        self._error: Optional[BaseException] = None
        self._thread: Optional[threading.Thread] = None

    def add(self, positions: np.ndarray, part: pl.DataFrame, texts: Any) -> None:
        """Write the chunk rows of one slice (its cases at golden ``positions``; ``part`` without the texts,
        ``texts`` a pyarrow string array, of the slice's buffers)."""
        if not self.in_order:
            return
        if len(positions) and (positions[0] <= self._last or np.any(np.diff(positions) <= 0)):
            self._give_up()
            return
        if len(positions):
            self._last = int(positions[-1])
        if self._schema is None:
            self._dictionary = pa.types.is_dictionary(texts.type)  # the first slice's texts decide the file's
            self._start(part.schema)
        elif part.schema != self._schema:
            self._give_up()
            return
        self._marks.append(part.select("relevant", "file_match"))
        self._rows += part.height
        self._put((part, texts))

    def close(self) -> None:
        """Wait for the writer to finish the file (a failed write raises, naming the file)."""
        if self._thread is not None:
            self._put(self._DONE)
            self._ended()

    def stop(self) -> None:
        """End the writer (after :meth:`close`, or when scoring failed: the file is then incomplete)."""
        self._stopped.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def kept(self, source: "_ChunkSource") -> bool:
        """Is the file written the chunk table of ``source`` (the same rows and marks: the other columns were
        read from the same slices)? If not, it is removed and the table is written again from the texts
        (:meth:`_ChunkSource.write`)."""
        if self._schema is not None and self.in_order and source.assembled.chunk_order is None:
            marks = pl.DataFrame(source.assembled.match.chunk_marks())
            if marks.height == self._rows and marks.equals(pl.concat(self._marks), null_equal=True):
                return True
        self.path.unlink(missing_ok=True)
        return False

    def _start(self, schema: pl.Schema) -> None:
        self._schema = schema
        self._thread = threading.Thread(target=self._write, name="ragmeter-chunks", daemon=True)
        self._thread.start()

    def _give_up(self) -> None:
        """Stop writing: the slices are not in golden order (or not of one schema); :meth:`kept` removes the file."""
        self.in_order = False
        self._marks = []
        self.stop()

    def _put(self, item: Any) -> None:
        """Hand ``item`` to the writer once it has written the last; a writer that failed raises its error."""
        assert self._thread is not None
        while self._thread.is_alive():
            if item is self._DONE or self._room.acquire(timeout=0.1):
                self._queue.put(item)
                return
        self._ended()

    def _ended(self) -> None:
        """Join the writer's thread; raise its error if it had one."""
        assert self._thread is not None
        self._thread.join()
        self._thread = None
        if self._error is not None:
            raise self._error

    def _write(self) -> None:
        assert self._schema is not None
        try:
            write_parquet_parts(self._parts(), self.path, _arrow_schema(pl.DataFrame(schema=self._schema),
                                                                        self._dictionary))
        except _Stopped:
            pass
        except BaseException as exc:  # noqa: BLE001 - raised in the main thread by close()
            self._error = exc

    def _parts(self) -> Iterator[Any]:
        while True:
            try:
                part = self._queue.get(timeout=0.1)
            except queue.Empty:
                if self._stopped.is_set():
                    raise _Stopped() from None
                continue
            if part is self._DONE:
                return
            table = _with_texts(*part, self._dictionary)
            part = None
            yield table  # the writer asks for the next part once it has written this one
            table = None
            self._room.release()


class _Stopped(Exception):
    """The writer of a :class:`_ChunkSpool` was stopped before the last slice (scoring failed or gave up)."""


class _ChunkSource:
    def __init__(self, reader: ParquetRun, ids: pl.Series, assembled: _Assembled) -> None:
        self.reader = reader
        self.ids = ids  # per case, golden order
        self.assembled = assembled

    def _rest(self) -> pl.DataFrame:
        """The chunk table's columns that are not read from the file (id, rank and the marks), golden order."""
        return _chunk_table(self.ids, self.assembled.match, None)

    def _chunks(self) -> Iterator[Tuple[pl.DataFrame, Any]]:
        return _chunks_again(self.reader)

    def frame(self) -> pl.DataFrame:
        """The whole chunk table in memory (texts included)."""
        with self._checked():
            return self._frame()

    def _frame(self) -> pl.DataFrame:
        rest = self._rest()
        parts = list(self._chunks()) if rest.height else []
        fields = pl.concat([f for f, _ in parts]) if parts else pl.DataFrame(schema=_FIELDS_SCHEMA)
        texts = pl.concat([_text_series(t) for _, t in parts]) if parts else pl.Series("text", [], dtype=pl.String)
        if fields.height != rest.height:  # checked before the gather, which would hide it
            raise _ChangedWhileScored()
        if self.assembled.chunk_order is not None:
            fields, texts = fields[self.assembled.chunk_order], texts.gather(self.assembled.chunk_order)
        return _with_fields(rest, fields).insert_column(_TEXT_AT, texts.alias("text"))

    def write(self, path: Path) -> None:
        """Write the chunk table as Parquet (:func:`ragmeter._io.write_parquet_parts`), slice by slice when the run
        is in golden order."""
        if self.assembled.chunk_order is not None:
            write_chunk_frame(self.frame(), path)
            return
        with self._checked():
            self._write(path)

    def _write(self, path: Path) -> None:
        rest = self._rest()
        written = [0]

        def parts() -> Iterator[Any]:
            for fields, texts in self._chunks():
                part = _with_texts(_with_fields(rest.slice(written[0], len(texts)), fields), texts)
                written[0] += len(texts)
                yield part

        schema = _arrow_schema(_with_fields(rest.clear(), pl.DataFrame(schema=_FIELDS_SCHEMA)))
        write_parquet_parts(parts(), path, schema)
        if written[0] != rest.height:
            raise _ChangedWhileScored()

    @contextlib.contextmanager
    def _checked(self) -> Iterator[None]:
        """Report chunks read again that are not the chunks scored as the input error it is."""
        try:
            yield
        except _ChangedWhileScored:
            from ragmeter.errors import InputError

            raise InputError(f"{self.reader.path}: changed while it was being scored (read it again)") from None


class StreamedScoreResult(ScoreResult):
    """A :class:`ScoreResult` whose chunk table is read from the run file when asked for (see the module docs)."""

    def __init__(self, cases: pl.DataFrame, by_category: pl.DataFrame, summary: Any, chunk_source: _ChunkSource,
                 spooled: Optional[Path] = None) -> None:
        self.cases = cases
        self.by_category = by_category
        self.summary = summary
        self._chunk_source = chunk_source
        self._chunks: Optional[pl.DataFrame] = None
        self._spooled = spooled  # chunks.parquet, written while scoring (score_parquet's chunks_to)

    @property  # type: ignore[override]
    def chunks(self) -> pl.DataFrame:
        if self._chunks is None:
            self._chunks = self._chunk_source.frame()
        return self._chunks

    def _write_chunks(self, path: Path) -> None:
        """``chunks.parquet``: the file written while scoring (moved there the first time), else slice by slice
        from the run file, unless the table is already in memory."""
        spooled, self._spooled = self._spooled, None
        if spooled is not None and spooled.is_file():
            if spooled != path:
                os.replace(spooled, path)
        elif self._chunks is not None:
            super()._write_chunks(path)
        else:
            self._chunk_source.write(path)
