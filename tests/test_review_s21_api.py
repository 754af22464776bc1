"""Review of the embeddable Python API (session 21): a platform catches ragmeter's typed errors."""
from __future__ import annotations

from pathlib import Path

import pytest

import ragmeter
from ragmeter.errors import InputError

EXAMPLE = Path(__file__).resolve().parents[1] / "python" / "ragmeter" / "_example"


@pytest.mark.parametrize("target", [42, None, 3.5])
def test_collect_with_a_target_of_another_type_is_an_input_error(target):
    with pytest.raises(InputError, match=f"target: expected a TOML file, 'module:function' or a callable, got "
                                         f"{type(target).__name__}"):
        ragmeter.collect(EXAMPLE / "golden.jsonl", target=target)


def test_assert_scores_usage_errors_are_ragmeter_input_errors():
    from ragmeter.testing import assert_scores

    result = ragmeter.evaluate(EXAMPLE / "golden.jsonl", EXAMPLE / "run.jsonl")
    with pytest.raises(InputError, match="unknown metric 'hitt'"):
        assert_scores(result, {"hitt": ">=0.5"})
    with pytest.raises(InputError, match="rule 'at least 0.5'"):
        assert_scores(result, {"hit": "at least 0.5"})
