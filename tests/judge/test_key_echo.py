"""A judge reply that carries the API key (a proxy that echoes the request, a debug field) must not put it on
disk: not in judge.parquet (reason, raw output), not in the cache."""
from __future__ import annotations

import json
import sqlite3

from ragmeter.judge import JudgeConfig, run_sync


def test_a_reply_echoing_the_key_is_masked_before_the_cache_and_the_rows(server, api_key, tmp_path, fast_retry):
    reply = {"reason": f"checked with Authorization: Bearer {api_key}", "score": 5, "correct": True}
    server.script = [{"content": json.dumps(reply)}, {"content": '{"reason": ' + json.dumps(api_key) + "}"}] + \
        ["ok"] * 6  # the second: an unusable reply holding the key (kept as raw output), retried
    cases = [{"id": f"c{i}", "question": f"q{i}", "reference_answer": "blue", "answer": "blue"} for i in range(2)]
    cache = tmp_path / "c.sqlite"
    res = run_sync(cases, JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                                      cache=cache, retry=fast_retry, concurrency=1))
    out = res.write(tmp_path / "out")
    assert {r["status"] for r in res.rows} == {"ok"}
    assert any("Bearer ***" in (r.get("reason") or "") for r in res.rows), [r.get("reason") for r in res.rows]
    written = [(out / "judge.parquet").read_bytes(), (out / "judge_summary.json").read_bytes(), cache.read_bytes()]
    with sqlite3.connect(cache) as db:
        written += [str(row).encode() for row in db.execute("select * from judge_cache")]
    for blob in written:
        assert api_key.encode() not in blob
