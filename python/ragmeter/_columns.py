"""Columns for the Rust boundary.

Strings cross into Rust as one Arrow-style column: ``offsets`` (int64, length
n + 1) and ``data`` (the UTF-8 bytes of every value, concatenated), never as a
list of Python ``str`` objects. Numbers cross as contiguous numpy arrays.
"""
from __future__ import annotations

from typing import Any, Iterable, List, Optional, Tuple

import numpy as np

StringColumn = Tuple[np.ndarray, np.ndarray]


def string_column(values: Any) -> StringColumn:
    """Return ``(offsets, data)`` for a Polars Series, a pyarrow array or an iterable of str.

    Nulls become empty strings; callers that must tell them apart pass a mask.
    """
    import pyarrow as pa

    if hasattr(values, "to_arrow") and not isinstance(values, pa.Array):
        values = values.to_arrow()
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        values = pa.array(list(values), type=pa.large_string())
    if pa.types.is_string_view(values.type) if hasattr(pa.types, "is_string_view") else False:
        values = values.cast(pa.large_string())
    if pa.types.is_string(values.type):
        values = values.cast(pa.large_string())
    if not pa.types.is_large_string(values.type):
        raise TypeError(f"expected a string column, got {values.type}")
    if values.null_count:
        values = values.fill_null("")  # copies the column: only when needed
    _validity, offsets_buf, data_buf = values.buffers()
    n = len(values)
    offsets = np.frombuffer(offsets_buf, dtype=np.int64, count=n + 1 + values.offset)[values.offset :]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return np.ascontiguousarray(offsets), data


def arrow_string_buffers(values: Any) -> StringColumn:
    """``(offsets, data)`` of a pyarrow string or large_string array, sharing its characters (a cast would import
    ``pyarrow.compute``, 0.15 s of the command's start). Null entries read as whatever their offsets span: callers
    that may meet nulls mark them (:func:`dictionary_text_column`)."""
    import pyarrow as pa

    _validity, offsets_buf, data_buf = values.buffers()
    n = len(values)
    width = np.int64 if pa.types.is_large_string(values.type) else np.int32
    offsets = np.frombuffer(offsets_buf, dtype=width, count=n + 1 + values.offset)[values.offset:].astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return offsets, data


def dictionary_text_column(values: Any) -> Tuple[StringColumn, np.ndarray]:
    """A pyarrow dictionary array of strings (what a Parquet reader gives for a column written with dictionary
    pages) as its dictionary's ``(offsets, data)`` and, per entry, the index of its value (int32, -1 for a
    null): the form ``ragmeter._core`` takes dictionary-encoded texts in, and gathers into a plain column."""
    indices = values.indices
    ids = np.frombuffer(indices.buffers()[1], dtype=np.int32, count=indices.offset + len(indices))[indices.offset:]
    if values.null_count:
        valid = np.unpackbits(np.frombuffer(indices.buffers()[0], np.uint8), bitorder="little")
        ids = np.where(valid[indices.offset:indices.offset + len(indices)].astype(bool), ids, np.int32(-1))
    return arrow_string_buffers(values.dictionary), np.ascontiguousarray(ids, dtype=np.int32)


def ascii_list_column(items: List[Any]) -> Optional[StringColumn]:
    """``(offsets, data)`` of a list of ``str`` that are all ASCII, built without pyarrow; ``None`` for anything
    else (non-``str`` items, non-ASCII text, a NUL character), which :func:`string_column` handles. pyarrow's
    first conversion costs a few tenths of a second, and ``len()`` per item is slower than one join."""
    if not items:
        return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.uint8)
    try:
        text = "\0".join(items)
    except TypeError:
        return None
    if not text.isascii():
        return None
    raw = text.encode("ascii")
    joined = np.frombuffer(raw, dtype=np.uint8)
    ends = np.flatnonzero(joined == 0)
    if len(ends) != len(items) - 1:  # an item holds a NUL itself
        return None
    offsets = np.empty(len(items) + 1, dtype=np.int64)
    offsets[0] = 0
    # The k-th separator sits after k + 1 items: without the separators, item k ends at ends[k] - k.
    offsets[1:-1] = ends - np.arange(len(ends), dtype=np.int64)
    offsets[-1] = len(joined) - len(ends)
    return offsets, np.frombuffer(raw.replace(b"\0", b""), dtype=np.uint8)


def arrow_from_numpy(values: np.ndarray) -> Any:
    """A pyarrow array over the numbers or booleans of ``values`` (numbers zero-copy), built from its buffers.
    ``pa.array`` imports pandas whenever pandas is installed, to ask whether the input is one of its types: about
    0.2 s of a command's start-up, on whichever thread calls it first."""
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    if values.dtype == np.bool_:
        bits = np.packbits(values, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def offsets_from_lengths(lengths: Iterable[int]) -> np.ndarray:
    """Offsets (n + 1, int64) of consecutive groups with the given lengths."""
    lengths = np.asarray(list(lengths) if not isinstance(lengths, np.ndarray) else lengths, dtype=np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets
