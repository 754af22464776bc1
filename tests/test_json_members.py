"""The members of a large container in ``strict_json`` are written by orjson (``_one_line_members``) only when the
text means what the C encoder's would: the same values for every kind of member, the same layout, and the C
encoder's own text whenever orjson cannot tell the separators apart or would write another value."""
from __future__ import annotations

import dataclasses
import datetime
import json
from typing import Any

import numpy as np
import pytest

from ragmeter import _io
from ragmeter._io import EXPANDED_MEMBERS, sanitise_json, strict_json


def reference(value: Any) -> str:
    """strict_json without orjson: the C encoder for every member."""
    saved = _io._one_line_members
    try:
        _io._one_line_members = lambda members: None  # type: ignore[assignment]
        return strict_json(value)
    finally:
        _io._one_line_members = saved


def many(member: Any, n: int = EXPANDED_MEMBERS + 1) -> dict:
    return {"k": 5, "by_category": {f"c{i}": member(i) for i in range(n)}}


@dataclasses.dataclass
class Point:
    x: int


@pytest.mark.parametrize("member", [
    lambda i: {"hit_rate": {"value": i / 7, "n_scored": i, "n_total": 9}, "empty": {}, "none": [], "ok": True},
    lambda i: [i, -i * 1e-7, None, False, "plain text", "中文 ＲＡＧ", 2.5e20],
    lambda i: {"np": [np.int64(i), np.float32(0.1), np.float64(1 / 3), np.bool_(True)], 7: "int key", None: 1},
    lambda i: {"nan": float("nan"), "inf": [float("inf")], "np_nan": np.float64("nan")},
])
def test_the_same_values_as_the_c_encoder(member):
    value = many(member)
    text = strict_json(value)
    assert json.loads(text) == json.loads(reference(value))
    assert "NaN" not in text and "Infinity" not in text
    assert len(text.splitlines()) == EXPANDED_MEMBERS + 1 + 5  # still one line per member


@pytest.mark.parametrize("member", [
    lambda i: {"phrase": f"1,5 {i}"},  # a comma inside a string
    lambda i: {"id": f"q{i}", "note": "ratio 1:2"},  # a colon inside a string
    lambda i: {"a,b": i},  # in a key
    lambda i: {"line": "two\nlines", "quote": 'say "x"'},  # escapes
    lambda i: {"big": 2 ** 70 + i},  # past 64 bits
    lambda i: {"when": datetime.date(2026, 1, 1 + i % 28)},  # orjson's ISO text, json's default=str
    lambda i: {"point": Point(i)},  # orjson would write an object, json default=str its repr
    lambda i: {"array": np.arange(3)},
])
def test_what_orjson_would_write_differently_keeps_the_c_encoders_text(member):
    value = many(member)
    try:
        expected = reference(value)
    except (TypeError, ValueError) as exc:
        with pytest.raises(type(exc)):
            strict_json(value)
        return
    assert strict_json(value) == expected
    assert _io._one_line_members(list(value["by_category"].values())) is None


def test_the_layout_is_the_c_encoders_when_orjson_writes_it():
    value = many(lambda i: {"hit_rate": {"value": i / 4, "n_scored": 1, "n_total": 1}, "ids": ["a", "b"]})
    assert _io._one_line_members(list(value["by_category"].values())) is not None
    assert strict_json(value) == reference(value)
    assert strict_json(value, indent=4) == reference_indent(value, 4)


def reference_indent(value: Any, indent: int) -> str:
    saved = _io._one_line_members
    try:
        _io._one_line_members = lambda members: None  # type: ignore[assignment]
        return strict_json(value, indent=indent)
    finally:
        _io._one_line_members = saved


def test_a_large_list_of_strings_and_numbers():
    value = {"ids": [f"case-{i}" for i in range(500)], "values": [i / 3 for i in range(500)]}
    assert strict_json(value) == reference(value)
    assert json.loads(strict_json(value)) == json.loads(json.dumps(sanitise_json(value)))
