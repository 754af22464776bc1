"""Chunk texts read as a dictionary array (see :func:`ragmeter._parquet_ahead.dictionary_text_path`).

A slice of a Parquet run read that way holds each distinct text of its row group once, and per chunk the
index of its text. The texts go to the matcher in that form (:func:`ragmeter._columns.dictionary_text_column`);
the slice's frame, which is validated like any run's, gets empty texts in their place
(:func:`texts_left_out`), so Polars neither copies the texts nor makes them a categorical column (whose
strings Polars keeps for the whole process); the chunk table and a slice whose lists have nulls get them
written out (:func:`plain_strings`, :func:`plain_texts`).

Only pyarrow and numpy: no ``pyarrow.compute`` (0.15 s of the command's start).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

__all__ = ["as_dictionary", "large_strings", "plain_strings", "plain_texts", "texts_left_out"]


def plain_strings(values: Any) -> Any:
    """A pyarrow dictionary array of strings written out as a large_string array (its nulls kept)."""
    from ragmeter._columns import dictionary_text_column

    (offsets, data), ids = dictionary_text_column(values)
    return _gathered(offsets, data, ids)


def _gathered(offsets: np.ndarray, data: np.ndarray, ids: np.ndarray) -> Any:
    """The strings ``ids`` (negative: null) of the string column ``(offsets, data)`` (an Arrow buffer's) as a
    large_string array, gathered in Rust."""
    import pyarrow as pa

    from ragmeter import _core

    data = data.view()
    data.flags.writeable = False  # immutable Arrow buffer: borrowed by the binding, not copied
    out_offsets, out_data = _core.strings_gather(offsets, data, ids)
    nulls = int(np.count_nonzero(ids < 0))
    return pa.Array.from_buffers(pa.large_string(), len(ids), [_validity(ids), pa.py_buffer(out_offsets),
                                                               pa.py_buffer(out_data)], null_count=nulls)


def _validity(ids: np.ndarray) -> Any:
    """An Arrow validity bitmap marking the negative ``ids`` null; None when there are none."""
    import pyarrow as pa

    return pa.py_buffer(np.packbits(ids >= 0, bitorder="little")) if np.any(ids < 0) else None


def as_dictionary(texts: Any) -> Any:
    """A pyarrow string array (plain or dictionary) as a dictionary array of large_string values, sharing its
    buffers: what the chunk writer takes when the first slice's texts came as a dictionary (a plain array is
    the dictionary of itself, as a slice read plain after the reader stopped reading dictionaries)."""
    import pyarrow as pa

    if pa.types.is_dictionary(texts.type):
        return _used_values_only(texts)
    positions = pa.py_buffer(np.arange(len(texts), dtype=np.int32))
    indices = pa.Array.from_buffers(pa.int32(), len(texts), [None, positions])
    return pa.DictionaryArray.from_arrays(indices, large_strings(texts))


def _used_values_only(texts: Any) -> Any:
    """The dictionary array ``texts`` with only the values its indices use, as large_string (a slice read from a
    row group gets the dictionary of the row group so far: written as it is, each row group of the chunk table
    would repeat the values of the slices before it)."""
    import pyarrow as pa

    from ragmeter._columns import dictionary_text_column

    (offsets, data), ids = dictionary_text_column(texts)
    used = np.flatnonzero(np.bincount(ids[ids >= 0], minlength=len(offsets) - 1))
    new_id = np.zeros(len(offsets) - 1, np.int32)
    new_id[used] = np.arange(len(used), dtype=np.int32)
    remapped = pa.py_buffer(np.where(ids >= 0, new_id[ids], 0))
    indices = pa.Array.from_buffers(pa.int32(), len(ids), [_validity(ids), remapped], null_count=texts.null_count)
    return pa.DictionaryArray.from_arrays(indices, _gathered(offsets, data, used.astype(np.int32)))


def large_strings(values: Any) -> Any:
    """A pyarrow string array as large_string, the chunk table's text type, sharing its characters (``cast``
    would import ``pyarrow.compute``, 0.15 s of the command's start); a dictionary array written out."""
    import pyarrow as pa

    if pa.types.is_large_string(values.type):
        return values
    if pa.types.is_dictionary(values.type):
        return plain_strings(values)
    validity, offsets, data = values.buffers()
    wide = np.frombuffer(offsets, np.int32, count=values.offset + len(values) + 1).astype(np.int64)
    return pa.Array.from_buffers(pa.large_string(), len(values), [validity, pa.py_buffer(wide), data],
                                 null_count=values.null_count, offset=values.offset)


def _empty_strings(values: Any) -> Any:
    """As many empty strings as ``values`` (a dictionary array) has entries, null where it is."""
    import pyarrow as pa

    indices = values.indices
    offsets = pa.py_buffer(np.zeros(indices.offset + len(indices) + 1, np.int64))
    return pa.Array.from_buffers(pa.large_string(), len(indices), [indices.buffers()[0], offsets, pa.py_buffer(b"")],
                                 null_count=values.null_count, offset=indices.offset)


def texts_left_out(batch: Any) -> Any:
    """``batch`` with empty strings for its dictionary-encoded chunk texts (the batch itself when they are not)."""
    return _with_texts(batch, _empty_strings)


def plain_texts(batch: Any) -> Any:
    """``batch`` with its dictionary-encoded chunk texts written out (the batch itself when they are not)."""
    return _with_texts(batch, plain_strings)


def _with_texts(batch: Any, make: Callable[[Any], Any]) -> Any:
    import pyarrow as pa

    from ragmeter._parquet_ahead import RETRIEVED_NAMES, has_dictionary

    name = next((n for n in RETRIEVED_NAMES if n in batch.schema.names), None)
    if name is None or not has_dictionary(batch.schema.field(name).type):
        return batch
    at = batch.schema.get_field_index(name)
    column = _replaced(batch.column(at), make)
    if column is None:
        return batch
    field = batch.schema.field(at).with_type(column.type)
    return pa.RecordBatch.from_arrays([column if i == at else batch.column(i) for i in range(batch.num_columns)],
                                      schema=batch.schema.set(at, field))


def _replaced(column: Any, make: Callable[[Any], Any]) -> Optional[Any]:
    """The list column ``column`` with ``make(texts)`` for its texts (the list's strings, or its structs' field
    ``text``) when they are a dictionary array; None when they are not."""
    import pyarrow as pa

    from ragmeter._parquet_ahead import texts_in_text_field

    if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)):
        return None
    child = column.values  # the whole child, whatever the list's offset
    if pa.types.is_dictionary(child.type):
        new_child = make(child)
    elif pa.types.is_struct(child.type) and texts_in_text_field(child.type) and child.offset == 0:
        at = child.type.get_field_index("text")
        fields = [child.field(i) for i in range(child.type.num_fields)]
        if not pa.types.is_dictionary(fields[at].type):
            return None
        fields[at] = make(fields[at])
        struct = pa.struct([child.type.field(i).with_type(fields[i].type) for i in range(len(fields))])
        new_child = pa.Array.from_buffers(struct, len(child), [child.buffers()[0]], null_count=child.null_count,
                                          children=fields)
    else:
        return None
    value_field = column.type.value_field.with_type(new_child.type)
    list_type = pa.large_list(value_field) if pa.types.is_large_list(column.type) else pa.list_(value_field)
    return pa.Array.from_buffers(list_type, len(column), column.buffers()[:2], null_count=column.null_count,
                                 offset=column.offset, children=[new_child])
