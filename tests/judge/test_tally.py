"""The interrupt message of ``ragmeter judge`` (``Tally.message``) accounts for every call that came back: the
ones that failed for good (nothing to cache), the ones answered by runs without the cache, the cached ones."""
from __future__ import annotations

import os
import re
import signal
import sqlite3
import time

from ragmeter.judge import JudgeConfig, Tally, run_sync

from test_cli import cli, write_cases  # noqa: E402 (tests/judge is on sys.path: conftest.py)
from test_edges import finish  # noqa: E402

LINE = re.compile(r"(\d+) calls came back this run \((\d+) failed, nothing to cache(?:; [^)]*)?\) and (\d+) replies are "
                  r"cached")


def cases(n):
    return [{"id": f"c{i}", "question": f"What colour is product {i}?", "reference_answer": f"Product {i} is blue",
             "answer": f"Product {i} is blue."} for i in range(n)]


def odd_case(info):
    """The requests of the odd-numbered cases (their payload names product 1, 3, 5...)."""
    return bool(re.search(r"product [13579]\b", str(info.get("payload", {})).lower()))


def cached_rows(path):
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0]


def numbers(message):
    m = LINE.search(message)
    assert m, message
    return tuple(int(x) for x in m.groups())


def test_failed_calls_are_counted_apart_from_the_cached_replies(server, tmp_path, fast_retry):
    server.rules = [(odd_case, 400)]  # a 400 fails the call at once: a failed row, no reply to cache
    tally = Tally()
    res = run_sync(cases(6), JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                                         cache=tmp_path / "c.sqlite", retry=fast_retry, tally=tally))
    failed_rows = sum(r["status"] == "failed" for r in res.rows)
    sent, failed, cached = numbers(tally.message())
    assert sent == server.requests == 6
    assert failed == failed_rows == sum(r["action"] == 400 for r in server.log) == 3
    assert cached == cached_rows(tmp_path / "c.sqlite") == 3
    assert sent - failed == cached  # every call is accounted for


def test_failed_embeddings_calls_are_counted_too(server, tmp_path, fast_retry):
    server.rules = [(lambda info: info["kind"] == "embeddings", 400)]
    tally = Tally()
    run_sync(cases(3), JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["answer_relevancy"],
                                   embeddings_model="e", cache=tmp_path / "c.sqlite", retry=fast_retry, tally=tally))
    sent, failed, cached = numbers(tally.message())
    embeds = len(server.by_task("embeddings"))
    assert sent == server.requests and failed == embeds > 0
    assert cached == cached_rows(tmp_path / "c.sqlite") == server.requests - embeds == sent - failed


def test_runs_without_the_cache_are_accounted_for(server, tmp_path, fast_retry):
    """As ``ragmeter eval --repeat``: the first run through the cache, a further one bypassing it, one tally."""
    server.rules = [(odd_case, 400)]
    tally = Tally()
    cfg = JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                      cache=tmp_path / "c.sqlite", retry=fast_retry, tally=tally)
    run_sync(cases(4), cfg)
    run_sync(cases(4), JudgeConfig(**{**cfg.__dict__, "cache": None}))
    message = tally.message()
    sent, failed, cached = numbers(message)
    bypass = re.search(r"; (\d+) answered by runs without the cache\)", message)
    assert bypass, message
    assert sent == server.requests == 8 and failed == 4 and int(bypass.group(1)) == 2
    assert cached == cached_rows(tmp_path / "c.sqlite") == sent - failed - int(bypass.group(1)) == 2
    assert "a rerun with the same cache= resumes" in message


def test_without_any_cache_the_message_says_so(server, tmp_path, fast_retry):
    server.rules = [(odd_case, 400)]
    tally = Tally()
    run_sync(cases(4), JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                                   cache=None, retry=fast_retry, tally=tally))
    message = tally.message()
    assert "4 calls came back this run (2 failed); no cache was used (cache=None)" in message, message
    assert "replies are cached" not in message


def test_interrupt_after_failed_calls_adds_up(tmp_path, server, api_key):
    path = write_cases(tmp_path / "cases.jsonl", 12)
    served = 8
    # the first requests: the odd-numbered cases fail at once (400), the others are answered; then every
    # request hangs until the interrupt
    server.rules = [(lambda info: server.requests > served, "hang"), (odd_case, 400)]
    p = cli(tmp_path, server, "--cases", str(path), "--metrics", "correctness", "--concurrency", "2", key=api_key)
    deadline = time.monotonic() + 30
    while server.requests <= served + 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)
    os.kill(p.pid, signal.SIGINT)
    got, out, err = finish(p, timeout=30)
    assert got == 130, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("ragmeter: interrupted: "), line
    sent, failed, cached = numbers(line)
    came_back = [r for r in server.log if "t_out" in r and r["action"] != "hang"]
    assert sent == len(came_back) == served
    assert failed == sum(r["action"] == 400 for r in came_back) > 0
    assert cached == cached_rows(tmp_path / "cache.sqlite") == sent - failed
    server.rules = []
    server.release()


def test_identical_requests_sharing_one_cache_entry_are_said(server, tmp_path, fast_retry):
    """Two cases asking the judge the same thing send the same request; both replies come back, one cache entry
    holds them. The message said "4 calls came back ... 3 replies are cached" with no word on the fourth."""
    same = cases(3) + [{**cases(1)[0], "id": "copy-of-c0"}]
    tally = Tally()
    run_sync(same, JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                               cache=tmp_path / "c.sqlite", retry=fast_retry, tally=tally, concurrency=4))
    message = tally.message()
    entries = cached_rows(tmp_path / "c.sqlite")
    sent = int(re.search(r"(\d+) calls came back", message).group(1))
    shared = sent - entries
    assert shared > 0, message  # the premise: identical requests, one entry
    assert f"{entries} replies are cached" in message
    assert f"{shared} identical request(s) share a cache entry with another" in message, message
