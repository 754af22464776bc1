"""Retrieval scoring of a Ray Dataset of run rows: ``ragmeter.ray.score_dataset(ds, golden, k=5)``.

Each block is scored on the cluster by :func:`ragmeter.score_batch` (``map_batches`` with
``batch_format="pyarrow"``); the per-case columns come back to the driver and are aggregated once, so the
numbers are those of :func:`ragmeter.score` on the same data. Install with ``pip install 'ragmeter[ray]'``.

Judging: ``ragmeter.ray.judge_dataset(ds, config, workers=2)`` judges the rows with many Ray tasks under one
shared rate controller (a Ray actor holding the token bucket, the budget and the cache writes); see
:mod:`ragmeter.ray_judge` and docs/scale-out.md.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ragmeter.ray_judge import connect, judge_dataset

__all__ = ["score_dataset", "judge_dataset", "connect"]


def score_dataset(ds: Any, golden: Any, k: int = 5, *, batch_size: Optional[int] = 4096,
                  workers: Optional[int] = None, address: Optional[str] = None) -> Dict[str, Any]:
    """Score the run rows of the Ray Dataset ``ds`` against ``golden``; returns ``{"cases": polars.DataFrame}`` and
    every key of :func:`ragmeter.score`'s summary (``overall``, ``by_category``, ``warnings``, ...; see
    :func:`ragmeter.batch.reduce_batches`). A block that fails (a schema that is not a run, an id absent from the
    golden set) raises :class:`~ragmeter.errors.InputError` naming the batch; an id in two blocks is refused
    rather than counted twice. ``workers``: at most that many scoring tasks at once (None: as many as Ray
    schedules). ``address``: the cluster to join when not joined yet (see :func:`connect`)."""
    import ray

    from ragmeter.batch import reduce_batches, score_batch
    from ragmeter.dataset import load_golden
    from ragmeter._args import check_arg
    from ragmeter.errors import InputError
    from ragmeter.retrieval import _check_k

    k = _check_k(k)  # before the cluster is joined
    batch_size = check_arg("batch_size", batch_size, "int", low=1, optional=True)
    workers = check_arg("workers", workers, "int", low=1, optional=True)
    connect(address)
    if not (hasattr(ds, "map_batches") and hasattr(ds, "schema")):
        raise InputError(f"score_dataset: expected a Ray Dataset (ray.data.from_items(records) makes one; "
                         f"ragmeter.score scores records on one machine), got {type(ds).__name__}")
    g = load_golden(golden)
    schema = ds.schema()
    if schema is not None:  # the union of the blocks' columns: Ray fills a column a block lacks with nulls
        ds = ds.map_batches(_same_columns, fn_kwargs={"columns": list(schema.names)}, batch_format="pyarrow",
                            batch_size=None, zero_copy_batch=True)
    scored = ds.map_batches(score_batch, fn_kwargs={"golden": g, "k": k}, batch_format="pyarrow",
                            batch_size=batch_size, zero_copy_batch=True, concurrency=workers)
    try:
        tables = [ray.get(ref) for ref in scored.to_arrow_refs()]
    except ray.exceptions.RayError as err:
        message = _input_error(err, InputError)
        if message is not None:
            raise InputError(message) from None
        raise
    return reduce_batches(tables, g, k=k)


def _same_columns(block: Any, columns: List[str]) -> Any:
    """``block`` unchanged when it has the dataset's id and retrieved columns; else an InputError naming the block.
    Without this check a block lacking ``retrieved`` would reach :func:`~ragmeter.batch.score_batch` merged with
    another block, its rows silently scored as empty retrievals. An optional column (``contexts``, ``answer``...)
    a block lacks is filled with nulls, which is what the run loader reads for a record without that field."""
    from ragmeter.dataset import _ID_NAMES, _RETRIEVED_NAMES
    from ragmeter.errors import InputError

    names = list(block.column_names)
    required = set(_ID_NAMES) | set(_RETRIEVED_NAMES)
    if set(names) & required == set(columns) & required:
        return block
    first = block.column("id")[0].as_py() if "id" in names and block.num_rows else None
    label = f"block of {block.num_rows} rows" + (f" from id {first!r}" if first is not None else "")
    missing = [c for c in columns if c not in names and c in required]
    extra = [c for c in names if c not in columns and c in required]
    raise InputError(f"{label}: its columns differ from the other blocks'"
                     + (f"; missing {', '.join(map(repr, missing))}" if missing else "")
                     + (f"; not in the others: {', '.join(map(repr, extra))}" if extra else ""))


def _input_error(err: BaseException, kind: type) -> Optional[str]:
    """The message of the InputError a worker raised, from Ray's wrappers: the exception itself when Ray kept
    it (a cause), else its text in the wrapper's traceback (Ray Data keeps only that)."""
    import re

    todo, seen = [err], 0
    while todo and seen < 20:
        e = todo.pop()
        seen += 1
        if isinstance(e, kind) and not type(e).__module__.startswith("ray"):
            return str(e)
        for nxt in (getattr(e, "cause", None), e.__cause__, e.__context__):
            if isinstance(nxt, BaseException):
                todo.append(nxt)
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(err))
    found = re.search(r"InputError: (.*?)(?:\n\s*\n|\Z)", text, re.S)
    return found.group(1).strip() if found else None
