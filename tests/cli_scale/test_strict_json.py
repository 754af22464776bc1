"""``strict_json`` keeps its guarantees (strict JSON, no NaN or Infinity, numpy scalars as numbers, ``default``
for other types) on the fast path, reads like ``json.dumps(indent=2)`` when small, and one line per member of
a large container."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragmeter._io import EXPANDED_MEMBERS, sanitise_json, strict_json


def _reference(value, indent=2):  # type: ignore[no-untyped-def]
    """What strict_json wrote before the fast path (the pure-Python indenting encoder)."""
    return json.dumps(sanitise_json(value), indent=indent, ensure_ascii=False, allow_nan=False, default=str)


SMALL = {
    "k": 5, "name": "中文 é", "ok": True, "none": None, "empty": {}, "nothing": [], "tuple": (1, 2),
    "overall": {"hit_rate": {"value": 0.5, "n_scored": 3, "n_total": 4}, "list": [1, [2, {"a": "b"}]]},
    7: "int key", None: "null key", False: "bool key", 1.5: "float key",
}


@pytest.mark.parametrize("indent", [2, 4])
def test_small_documents_read_as_before(indent: int) -> None:
    assert strict_json(SMALL, indent=indent) == _reference(SMALL, indent)


def test_without_indent_the_text_is_unchanged() -> None:
    value = {**SMALL, "nan": float("nan"), "np": [np.int64(3), np.float64(2.5), np.float32(0.25)]}
    assert strict_json(value, indent=None) == _reference(value, None)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), np.float64("nan"), np.float32("inf")])
def test_non_finite_numbers_become_null_at_any_depth(bad: float) -> None:
    value = {"a": [1, {"b": bad}], "big": {f"c{i}": {"v": bad if i == 150 else 1.0} for i in range(200)}}
    for indent in (2, None):
        text = strict_json(value, indent=indent)
        assert "NaN" not in text and "Infinity" not in text
        parsed = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict constant {c}"))
        assert parsed["a"][1]["b"] is None and parsed["big"]["c150"]["v"] is None


def test_numpy_scalars_are_numbers_and_other_types_go_through_default() -> None:
    value = {"i": np.int64(7), "f": np.float32(0.5), "b": np.bool_(True), "path": Path("/x/y"),
             "many": [np.int64(i) for i in range(EXPANDED_MEMBERS + 5)]}
    parsed = json.loads(strict_json(value))
    assert parsed["i"] == 7 and parsed["f"] == 0.5 and parsed["b"] is True and parsed["path"] == "/x/y"
    assert parsed["many"][-1] == EXPANDED_MEMBERS + 4
    with pytest.raises(TypeError):
        strict_json({"path": Path("/x")}, default=None)


def test_a_large_container_has_one_line_per_member() -> None:
    n = EXPANDED_MEMBERS + 1
    value = {"k": 5, "by_category": {f"c{i}": {"hit_rate": {"value": i / n, "n_scored": 1, "n_total": 1}}
                                     for i in range(n)}}
    text = strict_json(value)
    assert json.loads(text) == json.loads(_reference(value))
    lines = text.splitlines()
    assert len(lines) == n + 5  # {, "k", "by_category": {, one per category, }, }
    assert lines[3] == '    "c0": {"hit_rate": {"value": 0.0, "n_scored": 1, "n_total": 1}},'


def test_deep_nesting_is_valid_json() -> None:
    # 20 levels, well past EXPANDED_DEPTH; the levels share members, so the written tree grows as Fibonacci's
    # numbers (30 levels: a million nodes and 200 s in the reference encoder)
    value: list = [1]
    for _ in range(20):
        value = [value, {"x": value[:1]}]
    assert json.loads(strict_json(value)) == json.loads(_reference(value))
