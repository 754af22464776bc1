"""Plain text for terminals and pipes: columns of CJK text, and lines wrapped at spaces with a hanging indent.

The audit, the review and the demo print lines of prose (findings, intervals, warnings) that must fit 80
columns when piped and read well when wrapped: a wrapped line is indented under its first line, and an interval
such as ``[0.34, 0.99]`` is never split between two lines.
"""
from __future__ import annotations

import html
import unicodedata
from typing import Dict, Iterable, List, Optional

WIDTH = 80


def printable(text: str, keep: str = "\n") -> str:
    """``text`` with its control characters (ESC, BEL, NUL, DEL, the C1 range, tabs) written as ``\\x1b``
    escapes: user text (a category, an id) must not drive the terminal or break a table's columns. The
    characters of ``keep`` stay as they are."""
    if text.isprintable() or not any(unicodedata.category(ch) == "Cc" and ch not in keep for ch in text):
        return text
    return "".join(repr(ch)[1:-1] if unicodedata.category(ch) == "Cc" and ch not in keep else ch for ch in text)


#: the two noncharacters XML 1.0 forbids besides the control characters
_XML_NONCHARACTERS = ("\ufffe", "\uffff")


def markup(value: object) -> str:
    """Any value as text for HTML or SVG (an attribute too): markup characters and quotes as entities, control
    characters but tab and newline as ``\\x1b`` escapes (:func:`printable`, as report.md and the terminal show
    them). XML 1.0 forbids those even written as entities, so an SVG chart with one is no longer XML."""
    text = printable("" if value is None else str(value), keep="\t\n")
    for nonchar in _XML_NONCHARACTERS:  # not control characters, so printable keeps them; XML forbids them too
        text = text.replace(nonchar, repr(nonchar)[1:-1])
    return html.escape(text, quote=True)


def columns(text: str) -> int:
    """Terminal columns of ``text`` (CJK and full-width characters take two)."""
    return sum(map(_char_columns, text))


def _char_columns(ch: str) -> int:
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def _words(text: str) -> List[str]:
    """The words of ``text``; a bracketed group (``[0.34, 0.99]``) is one word, so no line ends inside it."""
    words: List[str] = []
    open_group = False
    for word in text.split():
        if open_group:
            words[-1] += " " + word
        else:
            words.append(word)
        opened = words[-1].count("[") > words[-1].count("]")
        open_group = opened and len(words[-1]) <= 40  # a stray '[' does not swallow the rest of the line
    return words


def wrap(text: str, width: int = WIDTH, indent: str = "", subsequent: str = "    ") -> List[str]:
    """Break ``text`` at spaces into lines of at most ``width`` columns; a word wider than a line
    (a path, a run of CJK text) is cut where it must be."""
    lines: List[str] = []
    line = indent
    for word in _words(text):
        sep = "" if line.strip() == "" else " "
        if columns(line) + len(sep) + columns(word) <= width:
            line += sep + word
            continue
        if line.strip():
            lines.append(line)
            line = subsequent
        line = _cut_word(word, line, width, subsequent, lines)
    if line.strip() or not lines:
        lines.append(line)
    return lines


def _cut_word(word: str, line: str, width: int, subsequent: str, lines: List[str]) -> str:
    """Append to ``lines`` the lines ``word`` fills from ``line`` on, cut where each is full; return the last,
    unfinished line. Linear in the word: measured and sliced once a line, a 100,000-character evidence phrase
    took 20 s of a warning's wrapping, and one of 10 MB never ended."""
    start, left = 0, columns(word)
    while columns(line) + left > width:
        room, end, used = width - columns(line), start, 0
        while end < len(word) and used + _char_columns(word[end]) <= room:
            used += _char_columns(word[end])
            end += 1
        if end == start and columns(line) >= columns(subsequent):  # no room now nor on the next line
            used, end = _char_columns(word[start]), start + 1  # one character over the width, never a hang
        lines.append(line + word[start:end])
        line, start, left = subsequent, end, left - used
    return line + word[start:]


def hanging(lines: Iterable[str], width: int = WIDTH) -> List[str]:
    """Each line wrapped at ``width``, its continuation lines indented two columns under its own indent."""
    out: List[str] = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip()))
        out += wrap(line.strip(), width, indent=indent, subsequent=indent + "  ")
    return out


def whole_number(text: str) -> Optional[int]:
    """The integer a text writes: ``"4"``, ``" 4 "``, ``"-2"``, ``"4.0"``, ``"５"`` (any decimal digits, which
    ``int`` reads); None for anything else: ``"4.5"``, ``"four"``, and ``"²"``, a digit to ``str.isdigit`` that
    ``int`` refuses."""
    head, dot, tail = text.strip().partition(".")
    digits = head[1:] if head[:1] in "+-" else head
    if not digits.isdecimal() or (dot and tail.strip("0")):
        return None
    return int(head)


def threshold_labels(thresholds: Iterable[float]) -> Dict[float, str]:
    """Each threshold's label: ``:g``'s six significant digits, more when two thresholds would read alike
    (0.1234561 and 0.1234562 were both 0.123456)."""
    distinct = set(thresholds)
    labels: Dict[float, str] = {}
    for digits in range(6, 18):
        labels = {t: f"{t:.{digits}g}" for t in distinct}
        if len(set(labels.values())) == len(distinct):
            break
    return labels


def ellipsis_cut(text: str, limit: int) -> str:
    """``text`` cut at ``limit`` characters, ending in an ellipsis when cut, so a cut text never reads whole."""
    return text if len(text) <= limit else text[:limit] + "\u2026"
