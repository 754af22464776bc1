"""Checks of a TREC qrels or run file before the engine reads it, shared by ``ragmeter trec`` and
:func:`ragmeter.trec.evaluate`. Imports nothing but the compiled core: the command's start-up stays
without ``typing`` and ``re`` (``tests/test_trec.py``)."""
from __future__ import annotations

import os

#: the range of the engine's integer options (-l, -M, -N, and their keyword arguments): trec_eval's C ``long``
INT64 = (-2**63, 2**63 - 1)


def check_file_head(path: "str | os.PathLike[str]") -> None:
    """:func:`check_head` of a file's first bytes. A file that cannot be opened is left to the engine's error."""
    try:
        with open(path, "rb") as f:
            head = f.read(3)
    except OSError:
        return
    check_head(head, os.fspath(path))


def check_head(head: bytes, name: str) -> None:
    """An ``InputError`` for a qrels or run (named ``name``) whose first bytes (``head``, at least 3 when it has
    them) are a UTF-8 byte order mark: trec_eval (and the engine, which reads as it does) would take it for part
    of the first query id, making that line a query of its own; and one diagnosis for a gzip-compressed or UTF-16
    file (the engine would call its first line not UTF-8)."""
    if head.startswith(b"\x1f\x8b"):
        from pathlib import Path

        from ragmeter._core import InputError
        from ragmeter._sniff import binary_diagnosis

        raise InputError(binary_diagnosis(Path(name), head, "qrels and runs"))
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):  # what a PowerShell redirect (`> run.txt`) writes
        from ragmeter._core import InputError

        raise InputError(f"{name}: is UTF-16 text (a PowerShell redirect?); trec_eval reads ASCII or "
                         "UTF-8: save it as UTF-8 (Out-File -Encoding utf8, or iconv -f utf-16 -t utf-8)")
    if head[:3] == b"\xef\xbb\xbf":
        from ragmeter._core import InputError

        raise InputError(f"{name}:1: starts with a UTF-8 byte order mark (BOM), which trec_eval reads as part of the "
                         f"first query id; save the file without it: sed -i '1s/^\\xEF\\xBB\\xBF//' {name}")
