"""Review of ragmeter collect as a demanding user runs it: mistakes in the target file and the flags are one
line naming the file and field (or the flag), exit 2, nothing written and nothing sent."""
from __future__ import annotations

import pytest
from collect_helpers import GOLDEN, cli

from ragmeter.collect import load_target
from ragmeter.errors import InputError


@pytest.mark.parametrize("content, words", [
    ('url = "http://127.0.0.1:1/ask"\nresponse = "data.answer"\n', ["response: must be a table"]),
    ('url = "http://127.0.0.1:1/ask"\nresponse = 5\n', ["response: must be a table"]),
    ('url = "http://"\n', ["url: has no host name"]),
    ('url = "http:///ask"\n', ["url: has no host name"]),
    ('url = "http://127.0.0.1:99999/ask"\n', ["url: not a valid address", "Port out of range"]),
    ('url = "http://[::1/ask"\n', ["url: not a valid address"]),
])
def test_a_target_file_with_a_wrong_type_or_an_unusable_url_is_one_line_exit_2(tmp_path, content, words):
    (tmp_path / "t.toml").write_text(content)
    with pytest.raises(InputError) as err:
        load_target(tmp_path / "t.toml")
    assert str(err.value).startswith(f"{tmp_path / 't.toml'}: ") and all(w in str(err.value) for w in words)
    proc = cli("collect", "--golden", str(GOLDEN), "--target", "t.toml", "--out", "r.jsonl", "--no-cache",
               cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr  # not a traceback (exit 1), not 51 failed records (exit 3)
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("ragmeter: error: t.toml: "), proc.stderr
    assert not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize("flags, words", [
    (["--rpm", "-5"], "--rpm: must be a number > 0 (leave it out for no limit), got -5.0"),
    (["--rpm", "0"], "--rpm: must be a number > 0"),
    (["--rpm", "nan"], "--rpm: must be a number > 0"),
    (["--rpm", "inf"], "--rpm: must be a number > 0"),
    (["--timeout", "nan"], "--timeout: must be a number of seconds > 0, got nan"),
    (["--timeout", "inf"], "--timeout: must be a number of seconds > 0, got inf"),
    (["--retry-attempts", "0"], "--retry-attempts: must be an integer between 1 and 100"),
    (["--retry-attempts", "-1"], "--retry-attempts: must be an integer between 1 and 100"),
])
def test_a_nonsense_rate_time_out_or_attempt_count_is_a_usage_error_before_any_call(tmp_path, flags, words):
    from ragserver import RagServer

    from collect_helpers import write_target

    with RagServer() as s:
        write_target(tmp_path / "t.toml", s.url)
        proc = cli("collect", "--golden", str(GOLDEN), "--target", "t.toml", "--out", "r.jsonl", "--no-cache",
                   *flags, cwd=tmp_path, timeout=30)  # --rpm -5 / nan / inf used to hang after the first case
        sent = sum(s.requests.values())
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr == f"ragmeter: error: {words}\n" or (proc.stderr.startswith(f"ragmeter: error: {words}")
                                                            and proc.stderr.count("\n") == 1), proc.stderr
    assert sent == 0 and not (tmp_path / "r.jsonl").exists()


def test_a_system_that_answers_201_created_is_collected_not_rejected(tmp_path):
    """Any 2xx is an answer: a 201 made the first case 'the system rejected the request' (exit 2)."""
    import ragmeter
    from collect_helpers import FAST, golden_ids, write_target
    from ragserver import RagServer

    ids = golden_ids()
    with RagServer(ok_status=201, modes=None, script={ids[4]: ["garbage"] * 3}) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        result = ragmeter.collect(GOLDEN, target=target, out=tmp_path / "run.jsonl", policy=FAST)
        with RagServer(ok_status=201, script={ids[0]: ["garbage"]}) as s2:  # the first case: named as it came
            with pytest.raises(InputError, match=r"is not JSON \(HTTP 201, starts '<html>upstream error"):
                ragmeter.collect(GOLDEN, target=write_target(tmp_path / "t2.toml", s2.url), policy=FAST)
    records = {r["id"]: r for r in result.records}
    assert result.summary["n_collected"] == len(ids) - 1 and records[ids[1]]["answer"]
    assert records[ids[4]]["error_kind"] == "bad_response" and s.requests[ids[4]] == FAST.max_attempts


@pytest.mark.parametrize("out, what", [("g.jsonl", "the golden set (--golden)"),
                                       ("./t.toml", "the target file (--target)"),
                                       ("c.sqlite", "the collect cache (--cache)")])
def test_out_over_an_input_is_refused_before_any_call_and_the_input_is_kept(tmp_path, out, what):
    import shutil

    from collect_helpers import write_target
    from ragserver import RagServer

    shutil.copy(GOLDEN, tmp_path / "g.jsonl")
    with RagServer() as s:
        write_target(tmp_path / "t.toml", s.url)
        ok = cli("collect", "--golden", "g.jsonl", "--target", "t.toml", "--out", "first.jsonl", "--cache",
                 "c.sqlite", "--concurrency", "1", cwd=tmp_path)
        assert ok.returncode == 0, ok.stderr
        before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
        n_sent = sum(s.requests.values())
        proc = cli("collect", "--golden", "g.jsonl", "--target", "t.toml", "--out", out, "--cache", "c.sqlite",
                   "--refresh", cwd=tmp_path)
        sent = sum(s.requests.values()) - n_sent
    assert proc.returncode == 2, proc.stdout + proc.stderr
    from pathlib import Path

    assert proc.stderr == f"ragmeter: error: --out {Path(out)}: is {what}; writing the run there would replace it, " \
                          f"choose another --out\n"
    assert sent == 0
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_callable_that_calls_sys_exit_fails_that_case_and_the_run_goes_on(tmp_path, asynchronous):
    """sys.exit() inside the user's function (a library giving up) escaped the worker thread or the task: a
    traceback, exit 1, nothing written. It is that case's failure, as any exception the function raises."""
    import json
    import sys

    import ragmeter
    from collect_helpers import golden_ids

    ids = golden_ids()

    def answer(case):
        if case["id"] == ids[2]:
            sys.exit(4)
        return {"answer": f"about {case['id']}", "retrieved": [{"file": "a.md", "text": "t"}]}

    async def answer_async(case):
        return answer(case)

    result = ragmeter.collect(GOLDEN, target=answer_async if asynchronous else answer, out=tmp_path / "run.jsonl")
    records = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == ids and result.summary["n_failed"] == 1
    failed = records[2]
    assert failed["error_kind"] == "exception" and failed["answer"] is None and failed["attempts"] == 1
    assert failed["error"] == "SystemExit(4): the function called sys.exit()"
    assert records[3]["answer"] == f"about {ids[3]}"


def test_a_cache_that_is_not_sqlite_is_named_the_collect_cache(tmp_path):
    from ragmeter.collect.cache import CacheError, open_cache

    (tmp_path / "c.sqlite").write_text("not a database\n")
    with pytest.raises(CacheError) as err:
        open_cache(str(tmp_path / "c.sqlite"))
    assert "not a collect cache" in str(err.value) and "judge" not in str(err.value), str(err.value)


def test_a_function_whose_later_return_value_is_unusable_says_function_not_endpoint(tmp_path):
    import ragmeter
    from collect_helpers import FAST, golden_ids

    ids = golden_ids()

    def answer(case):
        if case["id"] == ids[1]:
            return ["not", "a", "record"]
        return {"answer": "a", "retrieved": []}

    result = ragmeter.collect(GOLDEN, target=answer, policy=FAST)
    failed = result.records[1]
    assert failed["error_kind"] == "bad_response" and failed["attempts"] == FAST.max_attempts
    assert failed["error"].startswith("unusable return value of the function: the response is list"), failed
    assert "endpoint" not in failed["error"]
