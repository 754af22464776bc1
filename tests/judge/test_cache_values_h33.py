"""A judge cache row whose stored value is not a reply (h33): never taken as a verdict, asked again."""
from __future__ import annotations

import json
import sqlite3

import polars as pl
import pytest

from test_cli import cli, write_cases
from test_edges import finish


def _damage_one_entry(path, value):
    """Overwrite the stored value of the first correctness entry (a single-call metric: one row depends on it)."""
    with sqlite3.connect(path) as conn:
        key = conn.execute("SELECT key FROM judge_cache WHERE prompt LIKE 'correctness@%' "
                           "ORDER BY rowid LIMIT 1").fetchone()[0]
        conn.execute("UPDATE judge_cache SET value = ? WHERE key = ?", (value, key))
    conn.close()
    return key


@pytest.mark.parametrize("value", [
    "{not json",                                  # not JSON
    "[1, 2]",                                     # JSON, not an object
    '{"verdict": 1}',                             # an object without the reply's content
    '{"content": null}',                          # content that is no text
    '{"content": 5}',
    '{"content": {"reason": "r", "score": 5, "correct": true}}',  # a verdict object, not the reply text
    '{"content": "{\\"score\\": 5}", "finish_reason": 7}',       # a finish reason that is no text
])
def test_a_cached_value_that_is_not_a_reply_is_asked_again_never_a_verdict(tmp_path, server, api_key, value):
    cases = write_cases(tmp_path / "cases.jsonl", 4)
    code, _, err = finish(cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness", key=api_key))
    assert code == 0, err
    good = pl.read_parquet(tmp_path / "out" / "judge.parquet").sort("id")
    path = tmp_path / "cache.sqlite"
    _damage_one_entry(path, value)
    sent = server.requests
    code, _, err = finish(cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness", key=api_key))
    assert code == 0, err
    assert server.requests == sent + 1  # that call alone is asked again: no repair turn built on the bad value
    assert "cannot be read" in err and str(path) in err
    rows = pl.read_parquet(tmp_path / "out" / "judge.parquet").sort("id")
    # every row is the verdict of a real reply: the same as the first run's, and three of four served from cache
    assert rows.select("id", "status", "score", "correct").equals(good.select("id", "status", "score", "correct"))
    assert rows["cached"].to_list().count(False) == 1
    summary = json.loads((tmp_path / "out" / "judge_summary.json").read_text())
    assert summary["cache_undecodable"] == 1 and summary["calls"] == 1 and summary["cached_calls"] == 3
    # the new reply replaced the bad entry: a third run sends nothing and warns of nothing
    code, _, err = finish(cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness", key=api_key))
    assert code == 0 and server.requests == sent + 1 and "cannot be read" not in err, err


def test_the_dry_run_estimate_counts_a_cached_value_that_is_not_a_reply_as_a_call_to_send(tmp_path, server, api_key):
    # a run asks it again (above): the estimate must not call it free
    from ragmeter.judge import Cache, JudgeConfig
    from ragmeter.judge.runner import _cases, estimate

    cases = write_cases(tmp_path / "cases.jsonl", 4)
    code, _, err = finish(cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness", key=api_key))
    assert code == 0, err
    path = tmp_path / "cache.sqlite"
    _damage_one_entry(path, '{"content": {"score": 5}}')
    cfg = JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"], cache=str(path))
    records = [json.loads(line) for line in cases.read_text(encoding="utf-8").splitlines()]
    with Cache(path) as cache:
        est = estimate(_cases(records, cfg), cfg, cache=cache)
    assert est["calls"] == 1 and est["cached_calls"] == 3, est  # calls: the ones to send


@pytest.mark.parametrize("content", ["{not json", '{"score": "high"}', "[5]"])
def test_a_cached_reply_text_that_is_no_verdict_is_never_scored_without_asking(tmp_path, server, api_key, content):
    # a reply text is cached as received (an unusable one too), so it cannot be told from a real unusable reply:
    # it gets the repair turn, as it did when it came, and the row's verdict is the judge's repaired one
    cases = write_cases(tmp_path / "cases.jsonl", 4)
    code, _, err = finish(cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness", key=api_key))
    assert code == 0, err
    good = pl.read_parquet(tmp_path / "out" / "judge.parquet").sort("id")
    _damage_one_entry(tmp_path / "cache.sqlite", json.dumps({"content": content, "finish_reason": "stop"}))
    sent = server.requests
    code, _, err = finish(cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness", key=api_key))
    assert code == 0, err
    assert server.requests == sent + 1  # the repair turn, answered by the judge
    rows = pl.read_parquet(tmp_path / "out" / "judge.parquet").sort("id")
    assert rows.select("id", "status", "score", "correct").equals(good.select("id", "status", "score", "correct"))
    assert rows["cached"].to_list().count(False) == 1
