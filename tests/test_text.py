"""Prose for terminals and pipes (ragmeter._text): wrapped within the width, a hanging indent, intervals whole."""
from __future__ import annotations

import re

from ragmeter._text import columns, hanging, wrap

CALIBRATION = ("calibration: 17/20 agree = 85.0% [64.0%, 94.8%]; Cohen's kappa 0.6667 [0.34, 0.99], substantial; "
               "prediction-powered estimate 70.0% [36.7%, 70.0%], resting on 4 random label(s)")


def test_wrapped_prose_keeps_every_word_and_every_interval_on_one_line():
    for width in range(30, 100, 7):
        lines = hanging([CALIBRATION, "  finding: " + CALIBRATION], width)
        assert all(columns(line) <= width and line == line.rstrip() for line in lines), (width, lines)
        for line in lines:  # no line ends inside an interval
            assert line.count("[") == line.count("]"), (width, line)
        assert " ".join(" ".join(lines).split()) == " ".join((CALIBRATION + " finding: " + CALIBRATION).split())
        first = lines.index(next(line for line in lines if line.startswith("  finding:")))
        assert all(line.startswith("  ") and not line.startswith("   ") for line in lines[1:first])  # hanging
        assert all(line.startswith("    ") for line in lines[first + 1:])  # under its own indent


def test_a_word_wider_than_the_line_is_cut_and_a_stray_bracket_swallows_nothing():
    cjk = "年终奖为一点五到两个月月薪" * 4  # no spaces: cut where it must be, two columns a character
    lines = wrap("note: " + cjk, 30)
    assert all(columns(line) <= 30 for line in lines) and "".join(re.sub(r"^ +", "", x) for x in lines[1:])
    assert "".join(line.strip() for line in lines).replace("note:", "") == cjk
    stray = "a [ b " + "word " * 30
    lines = wrap(stray, 40)
    assert len(lines) > 3 and all(columns(line) <= 40 for line in lines)


def test_wrap_ends_when_the_indent_leaves_no_room():
    # an indent as wide as the line (a deep table cell, a narrow terminal) looped forever: no character fitted
    # the room left, and the next line had no more room; now each line takes at least one character
    from ragmeter._text import wrap

    assert wrap("abcdef", 4, subsequent="    ") == ["abcd", "    e", "    f"]
    assert "".join(line.strip() for line in wrap("一二三", 3, subsequent="   ")) == "一二三"
