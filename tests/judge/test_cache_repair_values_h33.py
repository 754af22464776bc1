"""`ragmeter cache repair` drops an entry a run would not serve (h33): a judge entry that is JSON but not a reply,
a collect entry without its response; each is counted among the dropped entries with its reason."""
from __future__ import annotations

import sqlite3
import subprocess
import sys

from ragmeter.judge.cache import Cache, repair

REPLY = {"content": '{"score": 5}', "finish_reason": "stop"}


def _cache(path, entries):
    """A cache holding ``entries`` (key, value, prompt), then each value overwritten as stored text."""
    with Cache(path) as cache:
        for key, _, prompt in entries:
            cache.put(key, REPLY, prompt=prompt, model="m")
    with sqlite3.connect(path) as conn:
        conn.executemany("UPDATE judge_cache SET value = ? WHERE key = ?", [(v, k) for k, v, _ in entries])
    conn.close()


def _keys(path):
    with sqlite3.connect(path) as conn:
        keys = {k for (k,) in conn.execute("SELECT key FROM judge_cache")}
    conn.close()
    return keys


def test_repair_drops_judge_and_collect_entries_a_run_would_ask_again(tmp_path):
    path = tmp_path / "cache.sqlite"
    _cache(path, [
        ("good-reply", '{"content": "{\\"score\\": 5}", "finish_reason": "stop"}', "correctness@1"),
        ("good-vectors", '{"vectors": [[0.1, 0.2]]}', "embeddings"),
        ("good-collect", '{"response": {"answer": "a"}, "latency_ms": 1.0}', "collect"),
        ("no-content", '{"verdict": 1}', "correctness@1"),
        ("content-null", '{"content": null}', "faithfulness@1+repair"),
        ("reason-number", '{"content": "x", "finish_reason": 7}', "correctness@1"),
        ("no-response", '{"error": "boom"}', "collect"),
        ("not-json", "{not json", "correctness@1"),
    ])
    result = repair(path)
    assert not result["healthy"] and result["salvaged"] == 3 and result["dropped"] == 5
    assert _keys(path) == {"good-reply", "good-vectors", "good-collect"}
    assert result["dropped_reasons"] == {"no reply text in it": 2, "its finish reason is not a text": 1,
                                         "no response in it": 1, "value is not JSON": 1}


def test_the_cli_says_why_entries_were_dropped(tmp_path):
    path = tmp_path / "cache.sqlite"
    _cache(path, [("good", '{"content": "ok"}', "correctness@1"), ("bad", '{"verdict": 1}', "correctness@1")])
    done = subprocess.run([sys.executable, "-m", "ragmeter", "cache", "repair", str(path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert "1 entries salvaged, 1 unreadable entries dropped (1 no reply text in it)" in said


def test_a_cache_of_replies_only_is_still_healthy(tmp_path):
    path = tmp_path / "cache.sqlite"
    _cache(path, [("good", '{"content": "ok", "finish_reason": "stop"}', "correctness@1"),
                  ("vec", '{"vectors": [[1.0]]}', "embeddings"), ("col", '{"response": "a"}', "collect")])
    result = repair(path)
    assert result["healthy"] and result["salvaged"] == 3 and result["dropped"] == 0
