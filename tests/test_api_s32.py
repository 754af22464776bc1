"""The Python API as a platform embedding ragmeter uses it (docs/api.md, docs/collect.md): a library call
reports through its return value and its exceptions, never on stderr, and leaves the process as it found it."""
from __future__ import annotations

import pytest

import ragmeter

GOLDEN = [{"id": f"c{i}", "question": f"question {i}?", "expectedFileNames": ["a.md"]} for i in range(4)]


def test_a_callable_raising_stop_iteration_fails_that_case_as_an_exception_and_prints_nothing(capfd):
    """``next(it)`` on an exhausted iterator inside the user's function: asyncio cannot put a StopIteration into a
    Future, so the call never came back. Each attempt printed an 'Exception in callback' traceback on stderr,
    waited for the time-out and was retried: the case failed as a ``timeout`` after six attempts."""

    def answer(case):
        if case["id"] == "c2":
            return next(iter([]))
        return {"answer": f"about {case['id']}", "retrieved": [{"file": "a.md", "text": "t"}]}

    result = ragmeter.collect(GOLDEN, target=answer, timeout=1, concurrency=1)
    failed = [r for r in result.records if r.get("error")]
    assert [r["id"] for r in failed] == ["c2"], failed
    assert failed[0]["error_kind"] == "exception" and failed[0]["attempts"] == 1, failed[0]
    assert failed[0]["error"].startswith("StopIteration"), failed[0]["error"]
    assert capfd.readouterr().err == ""
