"""A Python target's name is what its cache entries are filed under: two different functions must never share
them, or a rerun replays one system's answers as the other's."""
from __future__ import annotations

import functools

import ragmeter
from ragmeter.collect import resolve_target
from ragserver import GOLDEN


def _answers(result) -> set:
    return {r["answer"] for r in result.records}


def _answering(text: str):
    return lambda case: {"answer": text, "retrieved": [{"file": "a.md", "text": text}]}


def _retriever(case, top_k=5):
    return {"answer": f"top {top_k}", "retrieved": [{"file": "a.md", "text": "t"}] * top_k}


def module_level(case):
    return {"answer": "m", "retrieved": []}


def test_two_lambdas_with_one_cache_do_not_replay_each_other(tmp_path):
    cache = tmp_path / "c.sqlite"
    first = ragmeter.collect(GOLDEN, target=lambda case: {"answer": "first", "retrieved": []}, cache=cache)
    second = ragmeter.collect(GOLDEN, target=lambda case: {"answer": "second", "retrieved": []}, cache=cache)
    assert _answers(first) == {"first"}
    assert _answers(second) == {"second"}  # was "first": replayed from the other lambda


def test_closures_and_partials_of_one_function_are_told_apart(tmp_path):
    """The same code with other captured values or bound arguments is another system."""
    cache = tmp_path / "c.sqlite"
    for text in ("one", "two"):
        result = ragmeter.collect(GOLDEN, target=_answering(text), cache=cache)
        assert _answers(result) == {text}
    for k in (2, 3):
        result = ragmeter.collect(GOLDEN, target=functools.partial(_retriever, top_k=k), cache=cache)
        assert _answers(result) == {f"top {k}"}


def test_a_module_level_function_keeps_its_plain_name():
    """Its name alone is unique in its module, and caches written before keep serving it."""
    assert resolve_target(module_level).name == f"{__name__}:module_level"
    again = resolve_target(lambda case: None).name
    assert again.startswith(f"{__name__}:") and again != resolve_target(lambda case: 1).name
    assert resolve_target(_answering("x")).name == resolve_target(_answering("x")).name  # stable, so it resumes
