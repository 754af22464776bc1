"""Writing outputs all-or-nothing, and JSON that any parser reads.

Files go to a temporary folder first and are moved into place only when every
one of them was written. A write that fails (a full disk, a folder that cannot
be written, polars' own write errors) becomes an :class:`OSError` naming the
file, which the command line prints as one line with exit status 2; nothing
half-written is left behind.
"""
from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import platform
import re
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, List, Optional, Tuple

__all__ = [
    "RESULT_FILES", "output_path_problem", "same_path", "input_overwritten", "ensure_folder", "atomic_outputs", "results_folder", "check_out_folder", "atomic_file",
    "write_frame", "write_parquet_parts", "write_chunk_frame", "slice_memory_pool", "release_slice_memory", "write_text",
    "strict_json", "write_json", "sanitise_json", "OneLineMembers",
]

#: every file ragmeter writes into a results folder; only these are ever replaced or removed there
RESULT_FILES = ("cases.parquet", "chunks.parquet", "judge.parquet", "sweep.parquet", "summary.json",
                "warnings.json", "report.html", "report.md", "review.parquet", "repeats.parquet")


def output_path_problem(path: Any, *, folder: bool) -> Optional[str]:
    """What keeps ``path`` from being written because a part of it that must be a folder is a file: its parent
    folders, and ``path`` itself when it is to be a folder (``folder``). ``"afile is a file, not a folder"``
    names the part (``"is a file, not a folder"`` when it is ``path`` itself); None when there is no such part
    (a part that does not exist yet is created; one that cannot be looked at is left to the write to report).
    Every output's message: :func:`ensure_folder` and :func:`atomic_file` raise it as an ``OSError`` naming
    ``path``, and the command line says it with the flag before any work (``ragmeter.cli._inputs.check_out``)."""
    import stat

    target = Path(path)
    for part in [*reversed(target.parents), *([target] if folder else [])]:
        try:
            mode = os.stat(part).st_mode
        except OSError:  # missing (so is all below it) or not to be looked at
            return None
        if not stat.S_ISDIR(mode):
            return "is a file, not a folder" if part == target else f"{part} is a file, not a folder"
    return None


def same_path(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` (paths; anything else is never the same) name one file: the same path once
    resolved, or two names (a link) of one existing file."""
    if not isinstance(a, (str, os.PathLike)) or not isinstance(b, (str, os.PathLike)):
        return False
    try:
        first, second = Path(a), Path(b)
        return first.resolve() == second.resolve() or (first.exists() and second.exists() and first.samefile(second))
    except OSError:
        return False


def input_overwritten(out: Any, inputs: Iterable[Tuple[str, Any]]) -> Optional[str]:
    """The description of the first of ``inputs`` ((what, path) pairs, e.g. ``("the golden set (--golden)", G)``)
    that ``out`` would overwrite, or None."""
    return next((what for what, path in inputs if same_path(out, path)), None)


def _refuse_file_in_the_way(path: Path, *, folder: bool) -> None:
    problem = output_path_problem(path, folder=folder)
    if problem is not None:
        raise OSError(errno.ENOTDIR, problem, str(path))


def ensure_folder(out_dir: Any) -> Path:
    """``out_dir`` as a folder, created if need be; a file of that name (or of a parent's) is an error, not
    overwritten."""
    out = Path(out_dir)
    _refuse_file_in_the_way(out, folder=True)
    out.mkdir(parents=True, exist_ok=True)
    return out


def _temporary_folder(out: Path) -> Path:
    """A new folder in ``out`` named after this host and process, ``.ragmeter-HOST-PID-*``, for the outputs being
    written; the folders a killed run (kill -9, a power cut) left there are removed first."""
    prefix = f".ragmeter-{_host()}-{os.getpid()}-"
    _remove_folders_of_dead_runs(out)
    try:
        return Path(tempfile.mkdtemp(prefix=prefix, dir=out))
    except OSError as exc:  # name the folder asked for, not the temporary one
        raise OSError(exc.errno, exc.strerror, str(out)) from None


def _host() -> str:
    return "".join(c if c.isalnum() else "_" for c in (platform.node() or "host"))


def _remove_folders_of_dead_runs(out: Path) -> None:
    """Remove the temporary folders in ``out`` of runs of this host whose process is gone: each is as large as the
    results it was writing, and nothing else would remove it. A folder of another host (a shared disk) or of a
    live process (a run writing now) is left alone, as is one whose name does not say."""
    mine = f".ragmeter-{_host()}-"
    with contextlib.suppress(OSError):
        for folder in out.iterdir():
            pid = folder.name[len(mine):].split("-", 1)[0]
            if folder.name.startswith(mine) and pid.isdigit() and not _process_alive(int(pid)) and folder.is_dir():
                shutil.rmtree(folder, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    if os.name == "nt":  # os.kill there terminates the process whatever the signal: never ask, assume it lives
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process (EPERM), or a platform without signal 0: assume it lives
        return True
    return True


@contextlib.contextmanager
def atomic_outputs(out_dir: Any) -> Iterator[Path]:
    """Yield a temporary folder inside ``out_dir``; on success move every file in it into ``out_dir``."""
    out = ensure_folder(out_dir)
    tmp = _temporary_folder(out)
    try:
        with _final_names(tmp, out):
            yield tmp
        names = [item.name for item in tmp.iterdir()]
        _check_destinations(tmp, out, names)
        for name in sorted(names, key=_is_summary):
            _move_into_place(tmp, out, name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_out_folder(out_dir: Any, name: str = "out_dir") -> Path:
    """``out_dir`` as a Path; an ``InputError`` naming ``name`` for anything but a path, and for an empty one (an
    unset variable: it would be the current folder, whose earlier ragmeter outputs a results folder replaces)."""
    from ragmeter.errors import InputError

    if not isinstance(out_dir, (str, os.PathLike)):
        raise InputError(f"{name}: expected a folder (a path), got {type(out_dir).__name__}")
    if os.fspath(out_dir) in ("", b""):
        raise InputError(f"{name}: an empty path (an unset variable?); name the folder to write")
    return Path(out_dir)


@contextlib.contextmanager
def results_folder(out_dir: Any) -> Iterator[Path]:
    """Like :func:`atomic_outputs`, and the folder then holds one run: every ragmeter output
    (:data:`RESULT_FILES`) that the new run did not write is removed, so no earlier run's
    ``judge.parquet`` or ``sweep.parquet`` is read as this run's. Other files are left alone.
    A write that fails leaves the folder as it was (a folder created for the run is removed again)."""
    check_out_folder(out_dir)
    existed = Path(out_dir).is_dir()
    out = ensure_folder(out_dir)
    tmp = _temporary_folder(out)
    try:
        with _final_names(tmp, out):
            yield tmp
        written = {item.name for item in tmp.iterdir()}
        _check_destinations(tmp, out, written)
        for name in RESULT_FILES:
            if name not in written and (out / name).is_file():
                (out / name).unlink()
        if "summary.json" in written:
            # the earlier summary goes first: a folder caught between the moves (kill -9) then has none, and
            # report and compare call it incomplete instead of reading new tables under the earlier run's summary
            with contextlib.suppress(FileNotFoundError):
                (out / "summary.json").unlink()
        for name in sorted(written, key=_is_summary):
            _move_into_place(tmp, out, name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if not existed:
            with contextlib.suppress(OSError):
                out.rmdir()  # only if empty: the run wrote nothing


def written_by(command: str) -> dict:
    """The keys that say which ragmeter wrote a folder (eval's and score's summary.json, judge_summary.json), and
    with which ``command`` (``"score"``, ``"eval"``, ``"demo"``, ``"judge"``; the Python API records the command it
    is the library form of): a script tells a folder written before a key or column was added by them, the
    reports refuse another results_format, and the advice on a damaged folder names the command that writes it
    again (:func:`ragmeter.report.data.rewrite_advice`) instead of guessing it from the folder's contents."""
    from ragmeter import __version__
    from ragmeter.report.data import RESULTS_FORMAT

    return dict(zip(WRITER_KEYS, (RESULTS_FORMAT, "ragmeter", __version__, command)))


#: the keys :func:`written_by` puts first in a summary
WRITER_KEYS = ("results_format", "tool", "version", "command")


def _is_summary(name: str) -> bool:
    """Whether ``name`` is a summary (``summary.json``, ``judge_summary.json``): moved in last, so that a reader
    that sees the new summary sees the files it describes."""
    return name == "summary.json" or name.endswith("_summary.json")


def _check_destinations(tmp: Path, out: Path, names: Iterable[str]) -> None:
    """Refuse before anything is moved when a file cannot replace what is at its final place (a folder of that
    name): found while moving, the folder would be left half old run, half new."""
    for name in names:
        if (out / name).is_dir() and not (tmp / name).is_dir():
            raise OSError(errno.EISDIR, "is a folder, not a file", str(out / name))


def _move_into_place(tmp: Path, out: Path, name: str) -> None:
    try:
        os.replace(tmp / name, out / name)
    except OSError as exc:  # name the file asked for, not the temporary one it came from
        raise OSError(exc.errno, exc.strerror, str(out / name)) from None


@contextlib.contextmanager
def atomic_file(path: Any) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it replaces ``path`` in one step."""
    target = Path(path)
    if target.is_dir():
        raise OSError(errno.EISDIR, "is a folder, not a file", str(target))
    _refuse_file_in_the_way(target, folder=False)
    try:
        tmp = _new_temporary_file(target)
    except OSError as exc:  # a missing or unwritable folder: name the file asked for
        raise OSError(exc.errno, exc.strerror, str(target)) from None
    try:
        with _final_names(tmp, target):
            yield tmp
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def _new_temporary_file(target: Path) -> Path:
    """An empty new file beside ``target`` (``.NAME.XXXXXXXX.tmp``) with the mode a plain ``open()`` gives.

    ``tempfile.mkstemp`` creates its file 0600, and the file keeps that mode when it replaces ``target``, so
    report.html came out 0600 beside a 0644 summary.json. Created here with 0666, the kernel applies the umask
    (and a folder's default ACL) itself, as for every other output: no umask to read, which can only be done by
    setting it (``os.umask``, process-wide, racing other threads' file creation) or from Linux's /proc."""
    folder = target.parent or Path(".")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        # no '.' in the random part: _final_file_name maps the name back to the file asked for
        path = folder / f".{target.name}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(path, flags, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return path
    raise OSError(errno.EEXIST, "no free temporary file name", str(target))


@contextlib.contextmanager
def _final_names(tmp: Path, final: Path) -> Iterator[None]:
    """A failed write names the file the user asked for, not the temporary one it was going to."""
    try:
        yield
    except OSError as exc:
        name = str(exc.filename or "")
        if name == str(tmp) or name.startswith(str(tmp) + os.sep):
            rest = Path(name).relative_to(tmp)
            # the temporary file of an atomic report inside the temporary folder: .report.html.XXXX.tmp
            rest = Path(*rest.parts[:-1], _final_file_name(rest.name)) if rest.parts else rest
            raise OSError(exc.errno, exc.strerror, str(final / rest) if rest.parts else str(final)) from None
        raise


def _final_file_name(name: str) -> str:
    match = re.fullmatch(r"\.(.+)\.[^.]+\.tmp", name)
    return match.group(1) if match else name


_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def _write_error(exc: BaseException, path: Path) -> OSError:
    """One :class:`OSError` naming ``path`` for a failed write (polars raises its own error types)."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return OSError(exc.errno, exc.strerror or os.strerror(exc.errno), str(path))
    found = _OS_ERROR.search(str(exc))
    code = int(found.group(1)) if found else errno.EIO
    return OSError(code, os.strerror(code) if found else f"cannot write ({exc})", str(path))


def _guard_write(path: Path, write: Callable[[], Any]) -> None:
    import polars as pl

    try:
        write()
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise _write_error(exc, path) from None


def write_frame(frame: Any, path: Any, fmt: Optional[str] = None) -> None:
    """Write a polars DataFrame as Parquet (or ``fmt`` "csv" / "json"); a failure names ``path``."""
    path = Path(path)
    kind = fmt or "parquet"
    writers = {"parquet": frame.write_parquet, "csv": frame.write_csv, "json": _json_rows_writer(frame)}
    _guard_write(path, lambda: writers[kind](path))


#: a column is dictionary-encoded when its first part has at most this share of distinct values
DISTINCT_SHARE = 0.5
#: rows per row group of a chunk table written from memory (a few tens of MB of texts)
PART_ROWS = 1 << 16
#: how large a column chunk's dictionary may grow before the writer falls back to plain values: a run's repeated
#: chunk texts fit (pyarrow's default, 1 MB, holds 1,000 texts of 1 kB)
_DICTIONARY_LIMIT = 64 << 20


def slice_memory_pool() -> Any:
    """The Arrow memory pool for buffers of tens of MB freed and allocated again slice after slice (a run's
    slices, the chunk table's row groups): jemalloc's (else the system's), or None (the default pool) when
    ``ARROW_DEFAULT_MEMORY_POOL`` names one. Arrow's default mimalloc pool hands such blocks back to the kernel
    and faults fresh, zeroed pages in for the next slice (:func:`ragmeter._parquet_ahead.slice_pool`)."""
    import pyarrow as pa

    global _decay_set
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return None
    try:
        pool = pa.jemalloc_memory_pool()
    except (NotImplementedError, AttributeError):  # a pyarrow built without jemalloc (Windows wheels)
        return pa.system_memory_pool()
    if not _decay_set:
        _decay_set = True
        # jemalloc keeps freed pages for 10 s by default: the whole of a scoring run, ~100 MB more peak memory
        # at 100,000 cases (benches/RESULTS_score.md, 2026-12-04). With 0 each slice's pages went back at once
        # and the next slice, and the chunk writer's next row group, faulted fresh zeroed pages in: about half
        # the command's system time (1.0-1.1 s against 0.5-0.7 s at 100,000 ASCII cases). 50 ms keeps them
        # from one slice to the next: `ragmeter score --out` 9-15% faster at 100,000 cases, 4-15% at 20,000
        # (2026-12-05); what is still held when the slices are read is handed back by release_slice_memory.
        # pyarrow's jemalloc serves only the pools that name it (ragmeter's slices and its chunk writer);
        # Arrow's default pool is mimalloc.
        pa.jemalloc_set_decay_ms(JEMALLOC_DECAY_MS)
    return pool


#: how long pyarrow's jemalloc keeps freed pages before handing them back (see slice_memory_pool)
JEMALLOC_DECAY_MS = 50

_decay_set = False


def release_slice_memory() -> None:
    """Hand the pages :func:`slice_memory_pool` still keeps back to the system, once a run's slices are read:
    the tables made after them would otherwise peak on top of the last slices' pages (at 100,000 ASCII cases,
    396 MB against 384 MB with a decay of 0, 2026-12-05)."""
    if not _decay_set or os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    import pyarrow as pa

    try:
        pa.jemalloc_memory_pool().release_unused()
    except (NotImplementedError, AttributeError):  # pragma: no cover - a pyarrow built without jemalloc
        pass


def write_parquet_parts(parts: Iterable[Any], path: Any, schema: Any) -> None:
    """Write the pyarrow tables ``parts`` (each of ``schema``; a chunk table's rows, a slice of a run at a
    time) as one Parquet file by pyarrow's writer, one row group per part, handed the parts' own buffers; a
    failed write raises an :class:`OSError` naming ``path``.

    A column is dictionary-encoded when its first part repeats its values (the same chunk retrieved for many
    questions, a case's id on each of its chunks), and not when they are distinct, so that distinct texts are
    not hashed into a dictionary only to be thrown away. Polars' writer is not used: on 400,000 distinct texts
    of 1 kB it took 4.5 s of CPU and 690 MB of memory beyond reading the run, this writer 0.9 s and 150 MB
    (Polars copies every row group's texts out of its string views, tries a dictionary and compresses at zstd
    level 3; a dictionary in pyarrow would cost 1.2 s more); on texts drawn from 3,000, Polars' took 1.2 s and
    610 MB, this one 0.4 s and 80 MB, for a file of 65 MB instead of 24 (one dictionary per row group). ``benches/bench_chunk_writer.py``,
    ``benches/RESULTS_score.md`` (2026-12-02).

    A dictionary array (the texts of a run read as a dictionary) is written as one: its values once, not every
    chunk's text hashed again. The Arrow schema such a file stores names the dictionary's value type instead
    (:func:`_schema_without_dictionaries`): pyarrow's own would name the column a dictionary, which Polars reads
    as a categorical, and none at all made pyarrow read the texts as ``string`` where a run loaded whole gives
    ``large_string``, so that two runs' chunk tables did not concatenate (``pa.concat_tables``)."""
    import itertools

    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    parts = iter(parts)
    first = next(parts, None)
    writer = None
    try:
        writer = pq.ParquetWriter(path, schema, compression="zstd", dictionary_pagesize_limit=_DICTIONARY_LIMIT,
                                  use_dictionary=True if first is None else _dictionary_columns(first),
                                  memory_pool=slice_memory_pool(),
                                  write_statistics=[name for name in schema.names if name not in _NO_STATISTICS],
                                  store_schema=not any(pa.types.is_dictionary(field.type) for field in schema))
        # add_key_value_metadata is pyarrow 13's: an older one stores no schema (texts then read as `string`)
        if any(pa.types.is_dictionary(field.type) for field in schema) and hasattr(writer, "add_key_value_metadata"):
            writer.add_key_value_metadata({"ARROW:schema": _schema_without_dictionaries(schema)})
        if first is not None:
            # Each part is let go as soon as it is written (a part holds a slice's texts, tens of MB): neither
            # ``first`` nor the loop's name keeps one while the next is made.
            rest = itertools.chain([first], parts)
            first = None
            for part in rest:
                writer.write_table(part)
                part = None
        writer, closing = None, writer
        closing.close()  # writes the footer: a full disk shows here
    except OSError as exc:  # pyarrow's ArrowIOError among them
        raise _write_error(exc, path) from None
    finally:
        if writer is not None:  # a part failed, or the parts' producer raised: the file is incomplete anyway
            with contextlib.suppress(OSError):
                writer.close()


def _schema_without_dictionaries(schema: Any) -> str:
    """``schema`` with each dictionary field as its value type, serialised as pyarrow stores an Arrow schema in
    a Parquet file (``ARROW:schema``, base64 of the IPC message): readers take the texts as the plain strings a
    run loaded whole gives, while the pages keep their dictionary."""
    import base64

    import pyarrow as pa

    plain = pa.schema([field.with_type(field.type.value_type) if pa.types.is_dictionary(field.type) else field
                       for field in schema], metadata=schema.metadata)
    return base64.b64encode(plain.serialize().to_pybytes()).decode("ascii")


#: columns written without min/max statistics: a chunk text's bounds help no reader, and computing them over
#: every text took a fifth of the writer's time (0.12 of 0.53 s of CPU at 100,000 ASCII cases, 2026-12-05)
_NO_STATISTICS = ("text",)


def write_chunk_frame(frame: Any, path: Any) -> None:
    """Write a polars DataFrame of texts (a chunk table) by :func:`write_parquet_parts`, :data:`PART_ROWS` rows
    a row group, converted to Arrow a row group at a time."""
    import polars as pl

    write_parquet_parts(_arrow_parts(frame), path, frame.clear().to_arrow(compat_level=pl.CompatLevel.oldest()).schema)


def _arrow_parts(frame: Any) -> Iterator[Any]:
    import polars as pl

    for start in range(0, frame.height, PART_ROWS):
        yield frame.slice(start, PART_ROWS).to_arrow(compat_level=pl.CompatLevel.oldest())


def _dictionary_columns(part: Any) -> List[str]:
    """The columns of the pyarrow table ``part`` to dictionary-encode: those with at most :data:`DISTINCT_SHARE`
    distinct values."""
    import polars as pl
    import pyarrow as pa

    # a dictionary array is written as one (Polars would make it a categorical, whose strings it keeps)
    encoded = [field.name for field in part.schema if pa.types.is_dictionary(field.type)]
    frame = pl.from_arrow(part.drop_columns(encoded))
    assert isinstance(frame, pl.DataFrame)
    if frame.height == 0:
        return part.column_names
    counts = frame.select(pl.all().n_unique()).row(0)
    return encoded + [name for name, count in zip(frame.columns, counts) if count <= DISTINCT_SHARE * frame.height]


def _json_rows_writer(frame: Any) -> Callable[[Path], Any]:
    return lambda path: path.write_text(strict_json(frame.to_dicts()) + "\n", encoding="utf-8")


def write_text(path: Any, text: str) -> None:
    path = Path(path)
    _guard_write(path, lambda: path.write_text(text, encoding="utf-8"))


def sanitise_json(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, +-inf) replaced by None, for strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: sanitise_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [sanitise_json(v) for v in value]
    if hasattr(value, "dtype") and hasattr(value, "item"):  # a numpy scalar
        return sanitise_json(value.item())
    return value


#: a container with more members than this is written one member per line, each member on one line: the
#: pure-Python indenting encoder costs about 0.5 us per value, so a 20,000-category summary took 10 s that way
EXPANDED_MEMBERS = 100
#: containers nested deeper than this are written on one line
EXPANDED_DEPTH = 8


def strict_json(value: Any, *, indent: Optional[int] = 2, default: Optional[Callable[[Any], Any]] = str) -> str:
    """JSON text every parser accepts: non-finite numbers become null (never ``NaN`` or ``Infinity``), numpy
    scalars their Python value, anything else JSON has no type for ``default(value)`` (its text by default).

    Written by the C encoder: with ``indent`` the outer levels are indented (to :data:`EXPANDED_DEPTH`) and a
    value that is a member of a large container (over :data:`EXPANDED_MEMBERS` members) or nested deeper is
    written on one line, so a small document reads as ``json.dumps(indent=2)`` and a large one stays fast.
    The members of a large container are written by orjson when it can (:func:`_one_line_members`), in the
    same layout; numbers may then be spelled differently (``0.00001`` for ``1e-05``), never with another value.
    """
    return "".join(piece if isinstance(piece, str) else piece[0].join(piece[1])
                   for piece in _json_pieces(value, indent, default))


def write_json(path: Any, value: Any, *, indent: Optional[int] = 2, default: Optional[Callable[[Any], Any]] = str) -> None:
    """Write ``strict_json(value)`` and a line break to ``path`` (UTF-8), the members of a
    :class:`OneLineMembers` a part at a time instead of in one text (tens of MB at 100,000 categories);
    a failed write names ``path``."""
    path = Path(path)
    pieces = _json_pieces(value, indent, default)

    def write() -> None:
        with open(path, "wb") as fh:
            for piece in pieces:
                if isinstance(piece, str):
                    fh.write(piece.encode("utf-8"))
                else:
                    piece[0].write(fh, piece[1])
            fh.write(b"\n")

    _guard_write(path, write)


def _json_pieces(value: Any, indent: Optional[int], default: Optional[Callable[[Any], Any]]) -> List[Any]:
    """:func:`strict_json`'s text as pieces: texts, and ``(OneLineMembers, separator)`` for members not yet joined."""
    try:
        return _dumps(value, indent, default)
    except ValueError:  # a non-finite float somewhere: only then walk the whole document in Python
        return _dumps(sanitise_json(value), indent, default)


class OneLineMembers:
    """A large JSON object whose members are already written, one line each (``"key": value``), as
    :func:`strict_json` writes the members of an object of more than :data:`EXPANDED_MEMBERS` members: a table
    of many rows can then be written from its columns instead of from a dict per row. ``join(separator)`` gives
    the member lines joined by ``separator``; ``count`` is how many there are. Only :func:`strict_json` with
    ``indent``, above :data:`EXPANDED_DEPTH`, takes it (where such an object is one member per line); anywhere
    else it is a TypeError."""

    def __init__(self, join: Callable[[str], str], count: int,
                 write: Optional[Callable[[Any, str], None]] = None) -> None:
        if count <= EXPANDED_MEMBERS:
            raise ValueError(f"OneLineMembers: {count} members are written expanded, not one per line")
        self.join = join
        self.count = count
        self._write = write

    def write(self, fh: Any, separator: str) -> None:
        """Write the members joined by ``separator`` to the binary file ``fh`` (UTF-8), a part at a time when
        ``write(fh, separator)`` was given, else as one text."""
        if self._write is not None:
            self._write(fh, separator)
        else:
            fh.write(self.join(separator).encode("utf-8"))


def _fallback(default: Optional[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    """An encoder's ``default``: a numpy scalar becomes its Python value (as sanitise_json takes it), anything
    else ``default(obj)``, or a TypeError without ``default``."""
    def fallback(obj: Any) -> Any:
        if isinstance(obj, OneLineMembers):  # its layout is the indented one: nowhere else
            raise TypeError("OneLineMembers is only written by strict_json with indent, above EXPANDED_DEPTH")
        if hasattr(obj, "dtype") and hasattr(obj, "item"):
            return obj.item()
        if default is None:
            raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")
        return default(obj)

    return fallback


def _dumps(value: Any, indent: Optional[int], default: Optional[Callable[[Any], Any]]) -> List[Any]:
    encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=_fallback(default))
    if indent is None:
        return [encoder.encode(value)]
    out: List[Any] = []
    _indented(value, encoder.encode, " " * indent, 0, out)
    return out


def _indented(value: Any, encode: Callable[[Any], str], step: str, depth: int, out: List[Any]) -> None:
    """Append ``value`` as JSON indented by ``step`` per level (see :func:`strict_json` for what stays on one line);
    a :class:`OneLineMembers` is appended as ``(members, separator)``, joined by the caller."""
    if isinstance(value, OneLineMembers) and depth < EXPANDED_DEPTH:
        inner = "\n" + step * (depth + 1)
        out += ["{" + inner, (value, "," + inner), "\n" + step * depth + "}"]
        return
    is_dict = isinstance(value, dict)
    if not (is_dict or isinstance(value, (list, tuple))) or not value or depth >= EXPANDED_DEPTH:
        out.append(encode(value))
        return
    flat = len(value) > EXPANDED_MEMBERS
    inner = "\n" + step * (depth + 1)
    out.append("{" if is_dict else "[")
    if flat:
        texts = _one_line_members(list(value.values()) if is_dict else list(value))
        if texts is not None:
            keys = [_key(key, encode) + ": " for key in value] if is_dict else [""] * len(texts)
            out.append(inner + ("," + inner).join([key + text for key, text in zip(keys, texts)]))
            out.append("\n" + step * depth + ("}" if is_dict else "]"))
            return
    for i, member in enumerate(value.items() if is_dict else value):
        out.append(inner if i == 0 else "," + inner)
        if is_dict:
            key, member = member
            out.append(_key(key, encode) + ": ")
        if flat:
            out.append(encode(member))
        else:
            _indented(member, encode, step, depth + 1, out)
    out.append("\n" + step * depth + ("}" if is_dict else "]"))


def _one_line_members(members: List[Any]) -> Optional[List[str]]:
    """Each member as one line of JSON, as the C encoder writes it (``", "`` and ``": "`` between items), by
    orjson: a tenth of the time on a 20,000-category summary. None when orjson cannot say the same: a value it
    has no type for (numpy scalars aside: their Python value, as :func:`strict_json`) or writes as another
    value (a date, a dataclass), an integer past 64 bits, a string with an escape, or a comma or colon inside
    a string (the separators are spaced by replacing every ``,`` and ``:``, exact only without those)."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - a dependency
        return None
    import numpy as np

    options = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
    texts: List[str] = []
    for start in range(0, len(members), _MEMBERS_AT_ONCE):  # a few MB of text at a time, not the whole document
        try:
            # compact JSON has no raw line break, so one joins the members and splits them apart again
            text = b"\n".join([orjson.dumps(member, default=_numpy_item, option=options)
                               for member in members[start:start + _MEMBERS_AT_ONCE]])
        except (orjson.JSONEncodeError, ValueError):
            return None
        if b"\\" in text:  # without escapes every '"' opens or closes a string
            return None
        data = np.frombuffer(text, dtype=np.uint8)
        inside = (np.cumsum(data == ord('"'), dtype=np.uint8) & 1).view(bool)  # wraps past 255: parity is kept
        if np.any(inside & ((data == ord(",")) | (data == ord(":")))):
            return None
        texts += text.replace(b",", b", ").replace(b":", b": ").decode("utf-8").split("\n")
    return texts


_MEMBERS_AT_ONCE = 4096


#: orjson's ``default``: numpy scalars only (anything else falls back to the C encoder, which applies ``default``)
_numpy_item = _fallback(None)


def _key(key: Any, encode: Callable[[Any], str]) -> str:
    """A member name as ``json.dumps`` writes it (numbers, booleans and None become text)."""
    if isinstance(key, str):
        return encode(key)
    text = encode({key: 0})  # the encoder's own rule for non-string keys (and its error for other types)
    return text[1:text.rindex(":")]
