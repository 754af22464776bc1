"""Recognising what an input file is before (and after) parsing it as JSON Lines.

A golden set or run in the wrong shape (CSV, a JSON array, Parquet, gzip,
UTF-16, a pretty-printed object) should get one line saying what the file
looks like and what to do, not one ``invalid JSON`` per line. This module holds
those diagnoses and the nesting-depth guard: pyarrow's JSON reader crashes the
process (stack overflow) on deeply nested lines and ``json.loads`` raises
``RecursionError``, so nesting is checked before either sees a line.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ragmeter._magic import HEAD_BYTES, binary_kind, compressed_diagnosis
from ragmeter.errors import InputError

#: Deepest JSON nesting accepted in an input line (golden records need 3).
MAX_DEPTH = 64

FORMATS_HINT = "see README#formats"

_OPENERS_AND_NEWLINES = b"[{\n"
_ALL_BUT_OPENERS = bytes(b for b in range(256) if b not in _OPENERS_AND_NEWLINES)
# A JSON string (escapes included) or one bracket: strings are skipped whole.
_DEPTH_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def depth_exceeded_at(text: str, limit: int = MAX_DEPTH) -> Optional[int]:
    """Offset in ``text`` where JSON nesting first goes deeper than ``limit``, or None.

    A line with at most ``limit`` opening brackets cannot be deeper, so the
    precise scan (brackets outside strings) runs only on the rare line with more.
    """
    if text.count("[") + text.count("{") <= limit:
        return None
    depth = 0
    for token in _DEPTH_TOKEN.finditer(text):
        c = token.group()
        if c == "[" or c == "{":
            depth += 1
            if depth > limit:
                return token.start()
        elif c == "]" or c == "}":
            depth -= 1
    return None


def deep_lines(raw: bytes, limit: int = MAX_DEPTH) -> List[int]:
    """0-based indices of the LF-separated lines of ``raw`` nested deeper than ``limit``.

    One C-level pass keeps only opening brackets and line feeds (about 1% of a
    golden file), one regex pass over that finds the lines with more than
    ``limit`` opening brackets, and only those are scanned precisely.
    """
    skeleton = raw.translate(None, _ALL_BUT_OPENERS)
    found: List[int] = []
    line, counted = 0, 0
    lines: Optional[List[bytes]] = None
    for run in re.finditer(rb"[^\n]{%d,}" % (limit + 1), skeleton):
        line += skeleton.count(b"\n", counted, run.start())
        counted = run.start()
        if lines is None:
            lines = raw.split(b"\n")
        if depth_exceeded_at(lines[line].decode("utf-8", "replace"), limit) is not None:
            found.append(line)
    return found


def too_deep_message(limit: int = MAX_DEPTH) -> str:
    return f"JSON nested deeper than {limit} levels"


# ---------------------------------------------------------------------------
# Bytes -> text
# ---------------------------------------------------------------------------


def binary_diagnosis(path: Path, raw: bytes, what: str) -> Optional[str]:
    """One line naming what a non-text file is, or None when it may be text."""
    compressed = compressed_diagnosis(path, raw)
    if compressed:
        return compressed
    kind = binary_kind(raw)
    if kind == "a ZIP archive":
        return f"{path}: is a ZIP archive (an .xlsx workbook?); {what} are JSON Lines (one object per line), {FORMATS_HINT}"
    if kind:  # Parquet: reached only where it is not read (a reader that takes it looks first)
        return f"{path}: is {kind}; {what} are JSON Lines (one object per line), {FORMATS_HINT}"
    return None


def parquet_read_error(path: Path, exc: BaseException) -> InputError:
    """The error for a file a Parquet reader refused (``exc``): one line naming what the file is when its first
    bytes tell (``run.parquet: is gzip-compressed; decompress it first (gunzip -k run.parquet)``, a ZIP archive,
    a PDF), else the reader's own words after the file's name."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError:
        head = b""
    compressed = compressed_diagnosis(path, head)
    if compressed:
        return InputError(compressed)
    kind = binary_kind(head)
    if kind and kind != "a Parquet file":
        return InputError(f"{path}: is {kind}, not Parquet")
    return InputError(f"{path}: cannot read as Parquet: {exc}")


def json_array_diagnosis(path: Path, text: str, what: str) -> Optional[str]:
    """A diagnosis when the whole file is one JSON array, for a reader of JSON Lines only, else None."""
    if json_array_items(path, text) is None:
        return None
    return (f"{path}: is a JSON array; {what} are JSON Lines (one object per line): "
            f"jq -c '.[]' {path} > {_jsonl_name(path)}")


def utf16_encoding(raw: bytes) -> Optional[str]:
    """The codec of UTF-16/32 text (with a byte-order mark, or ASCII-heavy without one), or None."""
    if raw.startswith((b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff")):
        return "utf-32"
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    head = raw[:4096]
    if len(head) >= 4 and b"\x00" in head:
        # ASCII in UTF-16 has a NUL in every other byte (odd positions little-endian). The other half may hold a
        # few: the low byte of a CJK character such as 一 (U+4E00) is 0.
        odd, even = head[1::2].count(0), head[0::2].count(0)
        if odd * 4 >= len(head) and even * 10 <= odd:
            return "utf-16-le"
        if even * 4 >= len(head) and odd * 10 <= even:
            return "utf-16-be"
    return None


def to_utf8(path: Path, raw: bytes, what: str) -> Tuple[bytes, str]:
    """``raw`` as UTF-8 bytes without a byte-order mark (UTF-16/32 transcoded) and as text; InputError for binary or non-UTF-8."""
    problem = binary_diagnosis(path, raw, what)
    if problem:
        raise InputError(problem)
    return decoded(path, raw, f"{what} are JSON Lines (one object per line), {FORMATS_HINT}")


def decoded(path: Path, raw: bytes, expected: str) -> Tuple[bytes, str]:
    """``raw`` as UTF-8 bytes without a byte-order mark (UTF-16/32 transcoded) and as text; an InputError naming
    the file (and the line of the first byte UTF-8 cannot read) otherwise. ``expected``: what the file should be,
    said after a binary file's diagnosis."""
    codec = utf16_encoding(raw)
    if codec:
        try:
            text = raw.decode(codec).lstrip("\ufeff")
            return text.encode("utf-8"), text
        except UnicodeDecodeError:
            raise InputError(f"{path}: looks like {codec.upper()} text but does not decode; save it as UTF-8") from None
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    nul = raw.find(b"\x00", 0, 1 << 16)
    if nul >= 0:
        raise InputError(f"{path}: is a binary file (a NUL byte at offset {nul}), not text; {expected}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError(f"{path}:{line}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {column}); "
                         f"{legacy_encoding_hint(raw)}") from None
    return raw, text


def json_document(path: Path, raw: bytes, expected: str, **loads: Any) -> Any:
    """The JSON value of a whole file (a ragmeter ``summary.json``), read as the input files are: a byte-order
    mark or UTF-16 (a Windows editor saved it again) is read; anything else is one InputError naming the file and
    line: empty, compressed or binary, not UTF-8, or not JSON (cut short, edited by hand). ``expected``: what to
    do, said after the diagnosis. ``loads``: :func:`json.loads`'s keyword arguments."""
    if not raw.strip():
        raise InputError(f"{path}: is empty; {expected}")
    compressed = compressed_diagnosis(path, raw)
    if compressed:
        raise InputError(compressed)
    kind = binary_kind(raw)
    if kind:
        raise InputError(f"{path}: is {kind}, not JSON; {expected}")
    _, text = decoded(path, raw, expected)
    try:
        return json.loads(text, **loads)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno}); {expected}") from None
    except RecursionError:
        raise InputError(f"{path}: {too_deep_message()}; {expected}") from None


def legacy_encoding(raw: bytes) -> str:
    """The likelier encoding of text that is not UTF-8: ``gb18030`` (GBK, GB2312: Windows' default for Chinese,
    and what many PDF and OCR tools write) when it reads as that and its non-ASCII characters are mostly
    Chinese, else ``cp1252`` (Windows' Western code page, a superset of Latin-1's letters)."""
    try:
        text = raw.decode("gb18030")
    except UnicodeDecodeError:
        return "cp1252"
    wide = [c for c in text if ord(c) > 0x7F]
    chinese = sum(_common_chinese(c) for c in wide)
    return "gb18030" if wide and chinese * 10 >= len(wide) * 9 else "cp1252"


def _common_chinese(char: str) -> bool:
    """Whether ``char`` is a Chinese character or punctuation of GB2312, the common set, whose two GBK bytes are
    both 0xA1 or above. A Latin-1 accented letter before an ASCII letter (é r in "Méridian", ü r in "Zürich")
    reads as a rarer GBK character whose second byte is that ASCII letter: not counted, so such text is told to
    convert from cp1252."""
    if not ("\u3000" <= char <= "\u303f" or "\u4e00" <= char <= "\u9fff" or "\uff00" <= char <= "\uffef"):
        return False
    encoded = char.encode("gb18030")
    return len(encoded) == 2 and encoded[1] >= 0xA1


def legacy_encoding_hint(raw: bytes) -> str:
    """How to convert text that is not UTF-8 (see :func:`legacy_encoding`)."""
    if legacy_encoding(raw) == "gb18030":
        return "if it is Chinese text saved as GB18030 (GBK), convert it: iconv -f gb18030 -t utf-8"
    return "if it is Latin-1 or Windows-1252 text, convert it: iconv -f cp1252 -t utf-8"


# ---------------------------------------------------------------------------
# Whole-file JSON (an array, or objects spread over several lines)
# ---------------------------------------------------------------------------


def json_array_items(path: Path, text: str) -> Optional[Iterator[Tuple[int, Any]]]:
    """``(line, item)`` for each element when the whole file is one JSON array, else None.

    The line is where the element starts, so problems can still name it. An
    element nested deeper than :data:`MAX_DEPTH` is an InputError naming its
    line (``json`` raises RecursionError rather than crashing, and the depth of
    each element is checked by the count-then-scan of :func:`depth_exceeded_at`).
    A file that opens a pretty-printed array (``[`` alone on line 1) and does
    not parse is an InputError at the first bad line, not one per line.
    """
    start = _skip_space(text, 0)
    if text[start : start + 1] != "[":
        return None
    pretty = text[start + 1 : text.find("\n", start) if "\n" in text else len(text)].strip() == ""
    decoder = json.JSONDecoder()
    items: List[Tuple[int, Any]] = []
    i = _skip_space(text, start + 1)
    line, counted = 1, 0  # line numbers counted incrementally (linear in the file)
    if text[i : i + 1] == "]":
        return iter(items) if not text[_skip_space(text, i + 1):].strip() else None
    while True:
        line += text.count("\n", counted, i)
        counted = i
        try:
            value, end = decoder.raw_decode(text, i)
        except RecursionError:
            raise InputError(f"{path}:{line}: {too_deep_message()}") from None
        except json.JSONDecodeError as exc:
            if pretty:
                raise InputError(f"{path}:{exc.lineno}: invalid JSON in the array: {exc.msg} (column {exc.colno})") from None
            return None
        deep_at = depth_exceeded_at(text[i:end]) if isinstance(value, (list, dict)) else None
        if deep_at is not None:
            raise InputError(f"{path}:{line + text.count(chr(10), i, i + deep_at)}: {too_deep_message()}")
        items.append((line, value))
        i = _skip_space(text, end)
        if text[i : i + 1] == ",":
            i = _skip_space(text, i + 1)
            continue
        if text[i : i + 1] == "]" and not text[i + 1 :].strip():
            return iter(items)
        if pretty:
            raise InputError(f"{path}:{line + text.count(chr(10), counted, i)}: invalid JSON in the array: expected ',' or ']'")
        return None


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def spread_object_diagnosis(path: Path, text: str, what: str) -> Optional[str]:
    """A diagnosis when the file holds JSON object(s) spread over several lines, else None."""
    start = _skip_space(text, 0)
    if text[start : start + 1] != "{":
        return None
    end = text.find("\n", start)
    if end < 0:
        return None
    try:
        json.loads(text[start:end])
        return None  # the first line is a whole object: JSON Lines, whatever else is wrong
    except (json.JSONDecodeError, RecursionError):
        pass
    stripped = text.strip()
    decoder = json.JSONDecoder()
    objects: List[Any] = []
    i = 0
    while i < len(stripped):
        try:
            value, end = decoder.raw_decode(stripped, i)
        except (json.JSONDecodeError, RecursionError):
            return None
        objects.append(value)
        i = _skip_space(stripped, end)
    if not all(isinstance(o, dict) for o in objects):
        return None
    out = _jsonl_name(path)
    if len(objects) == 1:
        return wrapped_records_diagnosis(path, objects[0], what) or (
            f"{path}: is one JSON object spread over several lines; {what} are JSON Lines (one object per line): "
            f"jq -c . {path} > {out}")
    return (f"{path}: holds {len(objects)} JSON objects spread over several lines (pretty-printed); {what} are JSON Lines "
            f"(one object per line): jq -c . {path} > {out}")


def wrapped_records_diagnosis(path: Path, obj: Dict[str, Any], what: str) -> Optional[str]:
    """A diagnosis when ``obj`` (a file's only object) holds the records in a list under a key, else None."""
    lists = [k for k, v in obj.items() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)]
    if not lists:
        return None
    key = lists[0]
    return (f"{path}: is one JSON object whose {key!r} holds {len(obj[key])} records; {what} are JSON Lines "
            f"(one object per line): jq -c '.{key}[]' {path} > {_jsonl_name(path)}")


def _jsonl_name(path: Path) -> str:
    return f"{path.stem}.jsonl" if path.suffix != ".jsonl" else f"{path.stem}.lines.jsonl"


# ---------------------------------------------------------------------------
# After line-by-line parsing failed on most lines
# ---------------------------------------------------------------------------

_YAML_LINE = re.compile(r"^(?:-\s|[A-Za-z_][\w .-]*:\s|---\s*$)")


def text_shape_diagnosis(path: Path, first_line: str, what: str, where: str = FORMATS_HINT) -> Optional[str]:
    """What a text file whose lines are mostly not JSON looks like (CSV, TSV, a Markdown table, YAML, XML), or None.
    ``where``: the pointer to the documentation of the format (``see README#formats``)."""
    line = first_line.strip()
    if line[:1] in ("{", "["):
        return None
    jsonl = f"{what} are JSON Lines (one object per line), {where}"
    if line.startswith("|"):
        return f"{path}: looks like a Markdown table; {jsonl}"
    if "\t" in line:
        return f"{path}: looks like TSV (first line: {_clip(line)}); {jsonl}{_sheet_hint(what, 'TSV')}"
    if "," in line or ";" in line:
        return f"{path}: looks like CSV (first line: {_clip(line)}); {jsonl}{_sheet_hint(what, 'CSV')}"
    if line.startswith("<"):
        return f"{path}: looks like XML or HTML; {jsonl}"
    if _YAML_LINE.match(line):
        return f"{path}: looks like YAML; {jsonl}"
    return None


def _sheet_hint(what: str, kind: str) -> str:
    """Where a golden set kept in a spreadsheet finds its way in: teams write their questions in one."""
    if what != "golden sets":
        return ""
    return f"; a spreadsheet's {kind} export converts with the script in README#a-golden-set-kept-in-a-spreadsheet"


def _clip(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."
