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


@pytest.mark.parametrize("option, message", [
    ({"refresh": "no"}, "refresh"),       # was read as true: every cached reply paid for again
    ({"timeout": True}, "timeout"),       # was a time-out of 1 s
    ({"rpm": True}, "rpm"),               # was 1 request per minute
    ({"expect_mode": 5}, "expect_mode"),  # was compared with each case's mode: every case 'in another mode'
    ({"cache": 5}, "cache"),              # was a cache file named '5' in the current folder
])
def test_collect_refuses_an_option_of_the_wrong_type_before_any_call(option, message, tmp_path, monkeypatch):
    from ragmeter.errors import InputError

    monkeypatch.chdir(tmp_path)
    calls = []

    def answer(case):
        calls.append(case["id"])
        return {"answer": "a", "retrieved": [{"file": "a.md", "text": "t"}]}

    with pytest.raises(InputError, match=message):
        ragmeter.collect(GOLDEN, target=answer, **option)
    assert calls == [] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("option, message", [
    # named as the Python argument, not the command line's flag (session 33)
    ({"timeout": True}, "^timeout"),          # was a time-out of 1 s
    ({"rpm": True}, "^rpm"),                  # was 1 request per minute: a 51-case run took most of an hour
    ({"concurrency": True}, "^concurrency"),  # was 1
    ({"concurrency": "8"}, "^concurrency"),   # was int("8")
    ({"max_tokens": 2.5}, "^max_tokens"),     # was int(2.5) = 2
    ({"cache": 5}, "^cache"),                 # was a TypeError from os.fspath when the run began
])
def test_judge_config_refuses_an_option_of_the_wrong_type(option, message):
    from ragmeter.errors import InputError
    from ragmeter.judge import JudgeConfig

    with pytest.raises(InputError, match=message):
        JudgeConfig(base_url="http://127.0.0.1:9/v1", model="m", **option)
