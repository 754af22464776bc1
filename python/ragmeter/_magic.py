"""What a file is from its first bytes, when it is not the text or Parquet an input should be: one table for every
reader's one-line diagnosis (golden sets and runs, TREC files, a results folder's files, review sheets).

Imports nothing: ``ragmeter trec`` reads it on its fast start-up path (``tests/test_trec.py``).
"""
from __future__ import annotations

#: how many first bytes :func:`compression` and :func:`binary_kind` need to tell every format they know
HEAD_BYTES = 10

#: compressed formats: first bytes, the name said ("gzip-compressed"), and the command that decompresses the file
#: and keeps it (``unzstd`` keeps its input unless told not to)
_COMPRESSED = (
    (b"\x1f\x8b", "gzip", "gunzip -k"),
    (b"\xfd7zXZ\x00", "xz", "unxz -k"),
    (b"\x28\xb5\x2f\xfd", "zstd", "unzstd"),
)
#: bzip2 opens with "BZh", a block size digit, then a block's or the end's magic number (checked too: "BZh" alone
#: could open a text line)
_BZIP2_BLOCK = (b"1AY&SY", b"\x17rE8P\x90")
#: other formats given where text is read
_BINARY = ((b"PAR1", "a Parquet file"), (b"PK\x03\x04", "a ZIP archive"), (b"%PDF", "a PDF document"))


def compression(head: bytes) -> "tuple[str, str] | None":
    """``(name, command)`` of the compressed format ``head`` (a file's first :data:`HEAD_BYTES` bytes) opens,
    e.g. ``("gzip", "gunzip -k")``; None for any other file."""
    for magic, name, command in _COMPRESSED:
        if head.startswith(magic):
            return name, command
    if head[:3] == b"BZh" and head[3:4] in b"123456789" and len(head) >= 10 and head[4:10] in _BZIP2_BLOCK:
        return "bzip2", "bunzip2 -k"
    return None


def compressed_diagnosis(path: object, head: bytes) -> "str | None":
    """``PATH: is gzip-compressed; decompress it first (gunzip -k PATH)`` for a compressed file, else None."""
    found = compression(head)
    if found is None:
        return None
    name, command = found
    return f"{path}: is {name}-compressed; decompress it first ({command} {path})"


def binary_kind(head: bytes) -> "str | None":
    """What a file is ("a Parquet file", "a ZIP archive", "a PDF document", "gzip-compressed", ...) when its first
    bytes ``head`` are those of a binary format this module knows; None otherwise."""
    found = compression(head)
    if found is not None:
        return f"{found[0]}-compressed"
    return next((what for magic, what in _BINARY if head.startswith(magic)), None)
