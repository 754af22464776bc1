"""Group commit of the cache, stable cache keys, and --refresh-failed."""
from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3

import pytest
from hypothesis import given, settings, strategies as st

from ragmeter.judge import Cache, ClientConfig, JudgeClient, JudgeConfig, Limits, PriceTable, cache_key, run_sync
from ragmeter.judge.cache import messages_json
from ragmeter.judge.engine import Budget, Engine, RowStats

from test_cli import cli, write_cases


def reference_key(endpoint, model, params, prompt, inputs):
    """The cache key exactly as the first release computed it (stdlib json); keys must never drift."""
    head = {"v": 1, "endpoint": endpoint, "model": model, "params": dict(params), "prompt": prompt}
    h = hashlib.sha256(json.dumps(head, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode())
    h.update(b"\n")
    h.update(json.dumps(inputs, ensure_ascii=False, separators=(",", ":")).encode())
    return h.hexdigest()


TRICKY = ["", "plain", 'quote " backslash \\ slash /', "tab\tnl\ncr\rbs\bff\f", "\x00\x01\x1f\x7f",
          "中文：第1号产品是蓝色的。", "emoji 😀 and \u2028\u2029 separators", "\ufeffbom", "é" * 50]

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(text, text, max_size=3), max_size=3) | st.lists(text, max_size=4))
def test_messages_encoding_is_the_stdlib_one(inputs):
    assert messages_json(inputs) == json.dumps(inputs, ensure_ascii=False, separators=(",", ":"))


def test_cache_keys_unchanged_and_engine_key_matches():
    params = {"temperature": 0.0, "max_tokens": 500, "json_mode": "auto"}
    client = JudgeClient(ClientConfig(base_url="http://h:1/v1", model="m"))
    engine = Engine(client, Cache(None), PriceTable(), Budget(None), max_tokens=500)
    for t in TRICKY:
        msgs = [{"role": "system", "content": "Task: x"}, {"role": "user", "content": t}]
        ref = reference_key("http://h:1/v1", "m", params, "p@v1", msgs)
        assert cache_key(endpoint="http://h:1/v1", model="m", params=params, prompt="p@v1", inputs=msgs) == ref
        assert engine.chat_key("p@v1", msgs) == ref
        assert engine.chat_key("p@v1", msgs, messages_json(msgs)) == ref
    # the per-prompt header state follows a change of parameters
    engine.max_tokens = 100
    msgs = [{"role": "user", "content": "x"}]
    assert engine.chat_key("p@v1", msgs) == reference_key("http://h:1/v1", "m", {**params, "max_tokens": 100},
                                                          "p@v1", msgs)


def test_group_commit_returns_only_once_committed(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = Cache(path, flush_interval=0.05)
    seen = []

    async def main():
        async def one(i):
            await cache.commit(f"k{i}", {"content": str(i)})
            # when commit returns, another connection (another process) sees the entry
            with sqlite3.connect(path) as other:
                seen.append(other.execute("SELECT value FROM judge_cache WHERE key = ?", (f"k{i}",)).fetchone())

        tasks = [asyncio.create_task(one(i)) for i in range(20)]
        await asyncio.sleep(0)
        assert cache.pending == 20 and cache.get("k3") == {"content": "3"}  # queued entries are visible
        with sqlite3.connect(path) as other:
            assert other.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0] == 0
        await asyncio.gather(*tasks)

    asyncio.run(main())
    assert all(row is not None for row in seen) and len(seen) == 20
    assert cache.transactions == 1  # one transaction for all twenty
    cache.close()


def test_group_commit_flushes_at_flush_rows_and_on_close(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = Cache(path, flush_interval=60.0, flush_rows=5)

    async def main():
        done = [asyncio.create_task(cache.commit(f"k{i}", {"content": i})) for i in range(5)]
        await asyncio.wait_for(asyncio.gather(*done), 5)  # the 5th entry triggers the write, no 60 s wait
        stuck = asyncio.create_task(cache.commit("late", {"content": "late"}))
        await asyncio.sleep(0.01)
        stuck.cancel()  # e.g. the run is interrupted: the reply is still kept

    asyncio.run(main())
    cache.close()
    with Cache(path) as again:
        assert len(again) == 6 and again.get("late") == {"content": "late"}


def test_engine_reply_is_committed_before_it_is_returned(server, tmp_path):
    path = tmp_path / "c.sqlite"

    async def main():
        client = JudgeClient(ClientConfig(base_url=server.base_url, model="m"), Limits(4))
        cache = Cache(path)
        engine = Engine(client, cache, PriceTable(), Budget(None))
        msgs = [{"role": "system", "content": "Task: correctness (prompt v1)\n"}, {"role": "user", "content": "{}"}]
        async with client:
            await engine.complete("p@v1", msgs, RowStats())
        with sqlite3.connect(path) as other:
            assert other.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0] == 1
        cache.close()

    asyncio.run(main())


def _cases(n):
    return [{"id": f"c{i}", "question": f"What colour is item {i}?", "reference_answer": f"Item {i} is blue",
             "answer": f"Item {i} is blue.", "contexts": [f"item {i} is blue"], "category": "fact"}
            for i in range(n)]


def test_refresh_failed_rerequests_cached_unparsable_replies(server, tmp_path, fast_retry):
    cfg = JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", cache=tmp_path / "c.sqlite", retry=fast_retry,
                      metrics=["correctness"], concurrency=1)
    # c0: unparsable twice (fails); c1: unparsable once, repaired (ok)
    server.script = ["malformed", "malformed", "malformed"]
    first = run_sync(_cases(2), cfg)
    assert [r["status"] for r in first.rows] == ["failed", "ok"] and server.requests == 4
    # a plain rerun replays the cached replies: same failure, nothing sent
    again = run_sync(_cases(2), cfg)
    assert [r["status"] for r in again.rows] == ["failed", "ok"] and server.requests == 4
    assert again.rows[0]["cached"] and again.rows[0]["error_kind"] == "unparsable"
    # --refresh-failed: only the failed call is asked again (the repaired row is replayed)
    fresh = run_sync(_cases(2), cfg, refresh_failed=True)
    assert [r["status"] for r in fresh.rows] == ["ok", "ok"] and server.requests == 5
    assert fresh.rows[0]["score"] == 5.0 and not fresh.rows[0]["cached"] and fresh.rows[0]["raw_output"] is None
    assert fresh.rows[1]["cached"] and fresh.summary["refreshed_calls"] == 1
    # the new reply replaced the bad one in the cache
    last = run_sync(_cases(2), cfg)
    assert [r["status"] for r in last.rows] == ["ok", "ok"] and server.requests == 5
    assert all(r["cached"] for r in last.rows)


def test_refresh_failed_still_fails_explicitly_when_the_new_reply_is_bad(server, tmp_path, fast_retry):
    cfg = JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", cache=tmp_path / "c.sqlite", retry=fast_retry,
                      metrics=["correctness"], concurrency=1)
    server.script = ["malformed", "malformed"]
    run_sync(_cases(1), cfg)
    assert run_sync(_cases(1), cfg, dry_run=True).estimate["cached_calls"] == 1
    est = run_sync(_cases(1), cfg, dry_run=True, refresh_failed=True).estimate
    assert est["calls"] == 1 and est["cached_calls"] == 0  # the dry run knows it will be re-sent
    server.script = [{"content": "still not json"}, {"content": "nope"}]
    res = run_sync(_cases(1), cfg, refresh_failed=True)
    row = res.rows[0]
    assert row["status"] == "failed" and row["error_kind"] == "unparsable" and row["raw_output"] == "nope"
    assert server.requests == 4 and row["calls"] == 4 and row["cached_calls"] == 2


def test_cli_refresh_failed(tmp_path, server, api_key):
    cases = write_cases(tmp_path / "cases.jsonl", 1)
    server.script = ["malformed", "malformed"]
    p = cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness", key=api_key)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 3, err  # results written, one row failed: more than --max-failed 0
    assert "failed 1 unparsable:" in out and "incomplete: 1 of 1 judge rows" in err
    import polars as pl

    assert pl.read_parquet(tmp_path / "out" / "judge.parquet")["status"].to_list() == ["failed"]
    p = cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness", key=api_key)
    p.communicate(timeout=60)
    assert server.requests == 2  # replayed
    p = cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness", "--refresh-failed", key=api_key)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert server.requests == 3 and "1 failed replies re-requested" in out
    assert pl.read_parquet(tmp_path / "out" / "judge.parquet")["status"].to_list() == ["ok"]


def test_eval_and_judge_parsers_accept_refresh_failed():
    from ragmeter.cli import build_parser
    from ragmeter.cli.judge import build_config

    parser = build_parser()
    for cmd in ("judge", "eval"):
        args = parser.parse_args([cmd, "--golden", "g", "--run", "r", "--base-url", "http://h/v1", "--model", "m",
                                  "--refresh-failed"])
        assert build_config(args).refresh_failed is True
        args = parser.parse_args([cmd, "--golden", "g", "--run", "r", "--base-url", "http://h/v1", "--model", "m"])
        assert build_config(args).refresh_failed is False
