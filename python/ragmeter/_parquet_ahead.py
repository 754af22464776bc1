"""A Parquet run's slices decoded on a helper thread, from before the command has finished starting.

:class:`ragmeter.dataset.ParquetRun` reads a run a slice at a time, each slice decoded, and checked, on a
helper thread (:class:`ReadAhead`, :class:`Prepared`) while the caller matches the one before. pyarrow
decodes a column on one thread, and on CJK text that thread is the slowest part of ``ragmeter score``. The
command therefore calls :func:`start` first, before it imports Polars and the scorer and loads the golden set
(0.3-0.4 s), so the first slices are decoded on the second core in that time; :func:`ragmeter.score` calls it
too, before it loads the golden set. :class:`ParquetRun` then takes the reader over (:func:`take`) when it
opens the same, unchanged file with the same slice size; otherwise the early reader is stopped and the file
read as it would have been. :func:`start` reports nothing: any problem of the file is found again, and
reported, by :class:`ParquetRun`.

This module imports only pyarrow (when :func:`start` is called), not Polars.
"""
from __future__ import annotations

import contextlib
import os
import queue
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional, Tuple

__all__ = ["EARLY_SLICES", "MAX_DICTIONARY_BYTES", "MAX_DICTIONARY_SHARE", "MAX_SLICES_PER_DICTIONARY",
           "PARQUET_SLICE_BYTES", "RETRIEVED_NAMES", "SLICE_ROWS", "TEXT_NAMES", "Prepared", "ReadAhead", "chunk_texts",
           "dictionary_text_path", "discard", "has_dictionary", "is_parquet", "open_run", "pq_file", "slice_pool",
           "slice_rows", "slices", "start", "take", "texts_in_text_field"]

#: Text per slice of a Parquet run: about this many bytes of chunk text, whatever the file's row groups.
PARQUET_SLICE_BYTES = 32 << 20
#: the fewest and the most rows of a slice
SLICE_ROWS = (256, 8192)
#: Slices :func:`start` may decode before the scorer takes its reader (then one ahead, as every reader). The
#: command's imports and golden set take 0.4-0.7 s, which decode about three slices; on 20,000-case runs
#: three instead of one took 0.1-0.4 s off the command, and six raised its peak memory by 40-50 MB
#: (benches/RESULTS_score.md, 2026-12-04).
EARLY_SLICES = 3

_POOL_LOCK = threading.Lock()
_END = object()


def is_parquet(path: Path, raw: Optional[bytes] = None) -> bool:
    """By content (Parquet files start with ``PAR1``) whatever the name, else by name; but JSON exported under a
    ``.parquet`` name (JSON Lines, a JSON array) is read as the JSON it is: it was "Parquet magic bytes not
    found"."""
    named = path.suffix.lower() in (".parquet", ".pq")
    if raw is None:
        try:
            with open(path, "rb") as f:
                raw = f.read(4096 if named else 4)
        except OSError:
            return named  # the reader reports why it cannot be read
    if raw.startswith(b"PAR1"):
        return True
    return named and not _starts_as_json(raw[:4096])  # a loader passes the whole file


def _starts_as_json(head: bytes) -> bool:
    """The first line that is not blank or a ``#``/``//`` comment (as the JSON readers skip) opens a JSON object
    or array."""
    for line in head.lstrip(b"\xef\xbb\xbf").splitlines():
        line = line.strip()
        if line and not line.startswith((b"#", b"//")):
            return line.startswith((b"{", b"["))
    return False


@contextlib.contextmanager
def slice_pool() -> Iterator[None]:
    """Make the Arrow memory pool a run's slices are decoded into jemalloc's (else the system's), unless
    ``ARROW_DEFAULT_MEMORY_POOL`` names one: a Parquet reader takes the default pool when it is made, so the
    default is switched only while the reader is made, then put back (an embedding application's pool stays
    its own; a buffer is freed into the pool it came from, whatever the default is by then).

    Why: each slice's buffers (tens of MB) are freed before the next slice's are allocated, and Arrow's
    default mimalloc pool hands such blocks back to the kernel and faults fresh, zeroed huge pages in for the
    next slice; that cost ``ragmeter score`` on a 20,000-case run 0.6-1.2 s of system time
    (``benches/RESULTS_score.md``, 2026-12-02)."""
    import pyarrow as pa

    from ragmeter._io import slice_memory_pool

    pool = slice_memory_pool()
    if pool is None:
        yield
        return
    with _POOL_LOCK:
        default = pa.default_memory_pool()
        pa.set_memory_pool(pool)
        try:
            yield
        finally:
            pa.set_memory_pool(default)


def open_run(path: Path) -> Any:
    """``pyarrow.parquet.ParquetFile`` of ``path``, decoding into :func:`slice_pool`'s pool, a column read in
    1 MB pieces (not a whole row group's pages at once). The chunk texts are read as a dictionary array when
    the file stores them in dictionary pages (see :func:`dictionary_text_path`)."""
    with slice_pool():
        file = pq_file(path)
        text = dictionary_text_path(file)
        return file if text is None else pq_file(path, metadata=file.metadata, read_dictionary=[text])


#: the run's names of the retrieved chunks (``ragmeter.dataset`` reads the same ones), and of a chunk's text
RETRIEVED_NAMES = ("retrieved", "retrieved_contexts", "retrieval_context")
TEXT_NAMES = ("text", "content", "page_content")


def texts_in_text_field(item_type: Any) -> bool:
    """Are the texts of retrieved items of the Arrow struct type ``item_type`` its field ``text``, with no other
    spelling of it beside (``content``, ``page_content``: an item's text is then the first of them not null,
    which ``ragmeter.dataset`` picks per item, and the Arrow ``text`` field alone is not the texts)?"""
    present = [n for n in TEXT_NAMES if item_type.get_field_index(n) >= 0]
    return present == ["text"]


def dictionary_text_path(file: Any) -> Optional[str]:
    """The Parquet path of the chunk texts of ``file`` when they are best read as a dictionary array, else None.

    Runs retrieve the same chunks for many questions, and Parquet writers (pyarrow's by default) store such a
    column in dictionary pages: read as a dictionary, each distinct text of a row group is decoded once, not once
    per chunk (0.20 against 0.33 s for a 20,000-case run on one core, with a tenth of the system time), and
    the matcher knows the copies without hashing them (``benches/RESULTS_score.md``, 2026-12-05). So when every
    row group stores the texts with a dictionary page, and reading a row group at a time (pyarrow cannot join
    dictionary arrays of several row groups into one nested column) makes at most twice as many slices, none
    of its row groups cut into more than :data:`MAX_SLICES_PER_DICTIONARY`."""
    import pyarrow as pa

    names = file.schema_arrow.names
    name = next((n for n in RETRIEVED_NAMES if n in names), None)
    if name is None:
        return None
    schema = file.schema
    paths = [schema.column(i).path for i in range(len(schema))]
    text = next((p for p in (f"{name}.list.element.text", f"{name}.list.item.text", f"{name}.list.element",
                             f"{name}.list.item") if p in paths), None)
    meta = file.metadata
    if text is None or meta.num_row_groups == 0 or schema.column(paths.index(text)).physical_type != "BYTE_ARRAY":
        return None
    item = file.schema_arrow.field(name).type
    if not (pa.types.is_list(item) or pa.types.is_large_list(item)):
        return None  # a fixed-size list, whose texts chunk_texts does not take from the batch
    if pa.types.is_struct(item.value_type) and not texts_in_text_field(item.value_type):
        return None
    at = paths.index(text)
    if not all(meta.row_group(g).column(at).has_dictionary_page for g in range(meta.num_row_groups)):
        return None
    rows = slice_rows(meta)
    per_group = [-(-meta.row_group(g).num_rows // rows) for g in range(meta.num_row_groups)]
    if sum(per_group) > 2 * -(-meta.num_rows // rows):
        return None  # row groups much smaller than a slice: as many small slices
    if max(per_group) > MAX_SLICES_PER_DICTIONARY:
        return None  # each slice would copy a dictionary of the row group so far
    return text


#: The most slices a row group may be cut into for its texts to be read as a dictionary: pyarrow gives each
#: slice the dictionary of its row group so far, so a large row group costs a growing copy per slice. A
#: 100,000-case cjk-pdf run written as one row group (pyarrow's default for up to 1Mi rows) took 19.0 s read
#: as a dictionary in 89 slices, 9.1 s plain (2026-12-05); the bench's runs have 4 to 9 slices a row group.
MAX_SLICES_PER_DICTIONARY = 16

#: A run's texts stop being read as a dictionary from the slice where more than this share of its texts are
#: distinct (pyarrow then hashes every one into a dictionary that each slice copies), or where the dictionary
#: holds more than this many bytes (a large row group of many distinct texts).
MAX_DICTIONARY_SHARE = 0.5
MAX_DICTIONARY_BYTES = PARQUET_SLICE_BYTES


def slices(file: Any, path: Path, batch_rows: int, columns: Optional[List[str]] = None) -> Iterator[Any]:
    """The record batches of ``file`` (:func:`open_run` of ``path``) in order, about ``batch_rows`` rows each:
    when its texts are read as a dictionary, a row group at a time, each cut into equal slices (pyarrow cannot
    read a dictionary array across row groups), and from the first slice whose texts are too distinct for a
    dictionary (:func:`_too_distinct`) on, as if the file had none (that row group's slices already given are
    decoded again and skipped); else across row groups."""
    if not any(has_dictionary(field.type) for field in file.schema_arrow):
        yield from file.iter_batches(batch_size=batch_rows, columns=columns, use_threads=True)
        return
    meta = file.metadata
    plain = None
    for g in range(meta.num_row_groups):
        rows = meta.row_group(g).num_rows
        if not rows:
            continue
        size = -(-rows // -(-rows // batch_rows))
        given = 0
        if plain is None:
            for batch in file.iter_batches(batch_size=size, row_groups=[g], columns=columns, use_threads=True):
                if _too_distinct(batch):
                    with slice_pool():
                        plain = pq_file(path, metadata=meta)
                    break
                given += 1
                yield batch
        if plain is not None:
            for i, batch in enumerate(plain.iter_batches(batch_size=size, row_groups=[g], columns=columns,
                                                         use_threads=True)):
                if i >= given:
                    yield batch


def pq_file(path: Path, **options: Any) -> Any:
    """``pyarrow.parquet.ParquetFile`` of ``path``, a column read in 1 MB pieces (not a whole row group's pages
    at once)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20, **options)


def chunk_texts(batch: Any) -> Optional[Tuple[Any, Any]]:
    """The retrieved chunks of a run's record batch: the list column and its texts (the list's values, or its
    structs' field ``text``; all of them, whatever the list's offset), or None when the batch has no list
    column of that shape."""
    import pyarrow as pa

    name = next((n for n in RETRIEVED_NAMES if n in batch.schema.names), None)
    if name is None:
        return None
    column = batch.column(name)
    if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)):
        return None
    texts = column.values
    if pa.types.is_struct(texts.type):
        if not texts_in_text_field(texts.type):
            return None
        texts = texts.field("text")
    return column, texts


def _too_distinct(batch: Any) -> bool:
    """Are ``batch``'s texts, read as a dictionary, too distinct for one (:data:`MAX_DICTIONARY_SHARE` of them
    distinct values, counted by the values they use: the dictionary a row group stores may hold more than a
    slice uses), or is its dictionary past :data:`MAX_DICTIONARY_BYTES`?"""
    import numpy as np
    import pyarrow as pa

    from ragmeter._columns import dictionary_text_column

    found = chunk_texts(batch)
    if found is None or not pa.types.is_dictionary(found[1].type):
        return False
    texts = found[1]
    if texts.dictionary.nbytes > MAX_DICTIONARY_BYTES:
        return True
    ids = dictionary_text_column(texts)[1]
    used = np.count_nonzero(np.bincount(ids[ids >= 0], minlength=len(texts.dictionary)))
    return used > MAX_DICTIONARY_SHARE * len(texts)


def has_dictionary(arrow_type: Any) -> bool:
    """Is ``arrow_type`` a dictionary type, or does it nest one?"""
    import pyarrow as pa

    if pa.types.is_dictionary(arrow_type):
        return True
    return any(has_dictionary(arrow_type.field(i).type) for i in range(arrow_type.num_fields))


def slice_rows(meta: Any) -> int:
    """Rows per slice of a file with metadata ``meta``: about :data:`PARQUET_SLICE_BYTES` of decoded data,
    within :data:`SLICE_ROWS` (read when called: tests make the slices tiny)."""
    n_rows = meta.num_rows
    size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    per_row = size / n_rows if n_rows else 1
    return int(min(max(PARQUET_SLICE_BYTES // max(per_row, 1), SLICE_ROWS[0]), SLICE_ROWS[1]))


class Prepared:
    """The slices of ``items`` (in the file's order), each as ``(first_row, slice, made)``: ``first_row`` is
    the file's row (from 1) the slice starts at; once :attr:`prepare` is set, the slice is handed to it with
    that row, on the thread that takes the slice from ``items``, and ``(slice, made)`` is what it returns;
    before, ``made`` is None. Read through :class:`ReadAhead`, the preparing is done on the read-ahead thread,
    while the caller works on the slice before (:class:`ragmeter.dataset.ParquetRun` checks each slice there)."""

    def __init__(self, items: Iterator[Any]) -> None:
        self._items = items
        self._next_row = 1
        #: ``prepare(slice, first_row) -> (slice, made)``, or None
        self.prepare: Optional[Callable[[Any, int], Tuple[Any, Any]]] = None

    def __iter__(self) -> "Prepared":
        return self

    def __next__(self) -> Tuple[int, Any, Any]:
        batch = next(self._items)
        first = self._next_row
        self._next_row += batch.num_rows
        prepare = self.prepare
        if prepare is None:
            return first, batch, None
        batch, made = prepare(batch, first)
        return first, batch, made


class ReadAhead:
    """``items``, each produced on a helper thread while the previous one is used (one item ahead), from
    the moment this is made. Iterate once; an exception of the producer is raised there, and :meth:`close`
    (or leaving the iteration) stops the producer.

    One item ahead, not more: the producer begins the next item only once the one it made last has been
    taken, so at most two items are in memory (the one in use and the next), not three; a slice is about
    :data:`PARQUET_SLICE_BYTES` of text, and decoding one takes less time than matching it. ``first``: how
    many items may be made before the first is taken (an early reader's, :data:`EARLY_SLICES`); one ahead once
    they have been taken."""

    def __init__(self, items: Iterator[Any], first: int = 1) -> None:
        self.items = items
        self._slots: "queue.Queue[Tuple[str, Any]]" = queue.Queue()
        self._room = threading.Semaphore(first)  # released when an item is taken
        self._unreleased = first - 1  # the first items taken release no room: one item ahead from then on
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._produce, args=(items,), name="ragmeter-parquet-read",
                                        daemon=True)
        self._worker.start()

    def _produce(self, items: Iterator[Any]) -> None:
        try:
            while self._wait_for_room():
                item = next(items, _END)
                if item is _END:
                    self._slots.put(("end", None))
                    return
                self._slots.put(("item", item))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            self._slots.put(("error", exc))

    def _wait_for_room(self) -> bool:
        """Wait until the last item made has been taken; False when stopped."""
        while not self._stop.is_set():
            if self._room.acquire(timeout=0.1):
                return not self._stop.is_set()
        return False

    def __iter__(self) -> Iterator[Any]:
        try:
            while True:
                kind, value = self._slots.get()
                if kind == "end":
                    return
                if kind == "error":
                    raise value
                if self._unreleased:
                    self._unreleased -= 1
                else:
                    self._room.release()
                yield value
                value = None  # not kept while the next item is waited for
        finally:
            self.close()

    def close(self) -> None:
        self._stop.set()
        while self._worker.is_alive():
            try:
                self._slots.get_nowait()
            except queue.Empty:
                self._worker.join(0.05)


class _Started:
    """An early reader of the file ``key`` names, in slices of ``batch_rows``."""

    def __init__(self, key: Tuple[Any, ...], file: Any, batch_rows: int) -> None:
        self.key = key
        self.batch_rows = batch_rows
        self.reader = ReadAhead(Prepared(slices(file, Path(key[0]), batch_rows)), first=EARLY_SLICES)


_started: Optional[_Started] = None
#: guards ``_started``: a reader is taken by one scorer only, whatever the threads (``ragmeter.score`` in several)
_STARTED_LOCK = threading.Lock()


def _key(path: Path) -> Tuple[Any, ...]:
    """The file as it is now: a file replaced or written to since :func:`start` is not the one it read."""
    st = os.stat(path)
    return (os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def start(path: Any) -> None:
    """Start decoding the run ``path`` on a helper thread, when it is a Parquet file (see the module docs).
    Silent: a file that is not there or cannot be read is left for :class:`ParquetRun` to report."""
    global _started
    try:
        run = Path(path)
        if not run.is_file() or not is_parquet(run):
            return
        key = _key(run)
        with _STARTED_LOCK:
            if _started is not None and _started.key == key:
                return  # begun already (by the command, before the scorer)
        file = open_run(run)
        fresh = _Started(key, file, slice_rows(file.metadata))
    except Exception:  # noqa: BLE001 - reported by ParquetRun, which reads the file again
        return
    with _STARTED_LOCK:
        earlier, _started = _started, fresh
    if earlier is not None:
        earlier.reader.close()


def _pop() -> Optional[_Started]:
    global _started
    with _STARTED_LOCK:
        started, _started = _started, None
    return started


def take(path: Path, batch_rows: int) -> Optional[ReadAhead]:
    """The reader of ``path``'s slices that :func:`start` began, if it is the same file, unchanged, read in
    slices of ``batch_rows``; else None (and an early reader for another file or another slice size is
    stopped). Taken once."""
    started = _pop()
    if started is None:
        return None
    try:
        same = started.key == _key(path) and started.batch_rows == batch_rows
    except OSError:
        same = False
    if not same:
        started.reader.close()
        return None
    return started.reader


def discard() -> None:
    """Stop an early reader nobody took."""
    started = _pop()
    if started is not None:
        started.reader.close()
