"""Checks of a TREC qrels or run file before the engine reads it, shared by ``ragmeter trec`` and
:func:`ragmeter.trec.evaluate`. Imports nothing but the compiled core: the command's start-up stays
without ``typing`` and ``re`` (``tests/test_trec.py``)."""
from __future__ import annotations

import os

from ragmeter import _magic

#: the range of the engine's integer options (-l, -M, -N, and their keyword arguments): trec_eval's C ``long``
INT64 = (-2**63, 2**63 - 1)
#: how many first bytes :func:`check_head` looks at
HEAD_BYTES = _magic.HEAD_BYTES


def check_file_head(path: "str | os.PathLike[str]") -> None:
    """:func:`check_head` of a file's first bytes. A file that cannot be opened is left to the engine's error."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return
    check_head(head, os.fspath(path))


def check_head(head: bytes, name: str) -> None:
    """An ``InputError`` for a qrels or run (named ``name``) whose first bytes (``head``, :data:`HEAD_BYTES` when
    it has them) are a UTF-8 byte order mark: trec_eval (and the engine, which reads as it does) would take it for part
    of the first query id, making that line a query of its own; and one diagnosis for a gzip-compressed, Parquet
    or UTF-16 file, with or without a byte order mark (the engine would call its first line not UTF-8, or read
    the NUL bytes of UTF-16 into its fields: 'relevance "\\00\\0" is not an integer')."""
    compressed = _magic.compressed_diagnosis(name, head)
    if compressed:
        from ragmeter._core import InputError

        raise InputError(compressed)
    kind = _magic.binary_kind(head)
    if kind:
        from ragmeter._core import InputError

        raise InputError(f"{name}: is {kind}; qrels and runs are whitespace-separated text, one judgement or "
                         "result per line (qrels: query iteration document relevance; run: query Q0 document rank "
                         "score tag)")
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or _utf16_without_bom(head):  # a PowerShell redirect writes it
        from ragmeter._core import InputError

        raise InputError(f"{name}: is UTF-16 text (a PowerShell redirect?); trec_eval reads ASCII or "
                         "UTF-8: save it as UTF-8 (Out-File -Encoding utf8, or iconv -f utf-16 -t utf-8)")
    if head[:3] == b"\xef\xbb\xbf":
        from ragmeter._core import InputError

        raise InputError(f"{name}:1: starts with a UTF-8 byte order mark (BOM), which trec_eval reads as part of the "
                         f"first query id; save the file without it: sed -i '1s/^\\xEF\\xBB\\xBF//' {name}")


def bytes_note(path: str, line: int, files: "tuple[str, ...]", python: bool = False) -> str:
    """The note saying that TREC files were read as bytes because ``path`` is not UTF-8 at ``line``: trec_eval
    compares ids as C strings, byte for byte, and so does the engine when either file of a pair is not UTF-8 (both
    are then read as bytes, so that the same bytes still match). ``files``: the files so read. ``python``: for a
    caller of :func:`ragmeter.trec.evaluate`, who gets each id as text, one character per byte (Latin-1)."""
    read = "read it" if len(files) == 1 else "read " + " and ".join(files)
    said = f"{path} is not UTF-8 at line {line}: {read} as bytes, as trec_eval does"
    if python:
        return (f"{said}; ids are given one character per byte (Latin-1: query.encode('latin-1') is the id's bytes "
                "in the file)")
    return f"{said} (ids compared and printed byte for byte)"


def _utf16_without_bom(head: bytes) -> bool:
    """Whether ``head`` reads as two ASCII characters in UTF-16 (a NUL beside each): a text qrels or run never
    holds a NUL."""
    if len(head) < 4:
        return False
    little = head[1] == head[3] == 0 and head[0] != 0 and head[2] != 0
    big = head[0] == head[2] == 0 and head[1] != 0 and head[3] != 0
    return little or big
