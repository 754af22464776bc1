"""A system that echoes the caller's credential inside a *successful* reply (a debug field, a quoted prompt):
the token must reach neither the run file, the cache, the summary nor the terminal, and the user is told."""
from __future__ import annotations

import json
import sqlite3

from collect_helpers import GOLDEN, cli, golden_ids, write_target
from ragserver import RagServer, example_records

from ragmeter.dataset import load_run

SECRET = "tok-Echo/9f27c1b4"  # a '/' as in base64 tokens: JSON may send it escaped as '\/'


def _cached_values(path):
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("select value from judge_cache")]


def _echoing_records(ids):
    records = example_records()
    first = dict(records[ids[1]])
    first["answer"] = f"{first['answer']} (debug: Authorization=Bearer {SECRET})"
    second = dict(records[ids[2]])
    chunk = dict(second["retrieved"][0])
    chunk["text"] = chunk["text"] + f"\nX-Debug-Token: {SECRET}"
    second["retrieved"] = [chunk] + second["retrieved"][1:]
    second["debug"] = {SECRET: "key"}  # in a key too
    records[ids[1]], records[ids[2]] = first, second
    return records


def test_a_token_echoed_in_a_successful_reply_is_masked_everywhere_and_reported(tmp_path):
    ids = golden_ids()
    with RagServer(records=_echoing_records(ids)) as s:
        target = write_target(tmp_path / "t.toml", s.url, 'headers = { Authorization = "Bearer ${RAG_TOKEN}" }\n')
        args = ("collect", "--golden", str(GOLDEN), "--target", str(target))
        fresh = cli(*args, "--out", "fresh.jsonl", "--cache", "fresh.sqlite", cwd=tmp_path, env={"RAG_TOKEN": SECRET})
        # a cache written while the token was another one holds the raw text, as a cache of an earlier version
        # would: replayed with this token, it is masked on the way into the run file
        old = cli(*args, "--out", "old.jsonl", "--cache", "old.sqlite", cwd=tmp_path,
                  env={"RAG_TOKEN": "tok-Other-00000000"})
        replayed = cli(*args, "--out", "replayed.jsonl", "--cache", "old.sqlite", cwd=tmp_path,
                       env={"RAG_TOKEN": SECRET})
    assert fresh.returncode == old.returncode == replayed.returncode == 0, fresh.stderr + replayed.stderr
    assert any(SECRET in v for v in _cached_values(tmp_path / "old.sqlite"))  # the premise of the replay
    assert "51 from the cache" in replayed.stdout
    for out in (fresh, replayed):
        assert SECRET not in out.stdout + out.stderr
        said = " ".join((out.stdout + out.stderr).split())  # the terminal wraps the warning
        assert "2 collected case(s) came back with a value of a request header (a credential)" in said, said
        assert ids[1] in said and ids[2] in said
    for name in ("fresh.jsonl", "fresh.sqlite", "replayed.jsonl"):
        data = (tmp_path / name).read_bytes()
        assert SECRET.encode() not in data and SECRET.replace("/", "\\/").encode() not in data, name
    cached = _cached_values(tmp_path / "fresh.sqlite")  # read as rows: a value may straddle the file's pages
    assert not any(SECRET in v for v in cached) and sum("Authorization=***)" in v for v in cached) == 1
    for name in ("fresh.jsonl", "replayed.jsonl"):
        run = {r["id"]: r for r in load_run(tmp_path / name).iter_rows(named=True)}
        assert run[ids[1]]["answer"].endswith("(debug: Authorization=***)")  # the rest of the answer is kept
        assert "X-Debug-Token: ***" in run[ids[2]]["retrieved"][0]["text"]
        assert run[ids[3]]["answer"] == example_records()[ids[3]]["answer"]  # replies without it: untouched


def test_scrub_masks_every_string_of_a_decoded_reply_keys_included():
    from ragmeter.collect.runner import _Run, _scrub

    run = _Run.__new__(_Run)
    run.secrets = [SECRET]
    value = {"answer": f"x {SECRET} y", "retrieved": [{"text": SECRET, "file": "a"}], SECRET: [1, None, 2.5]}
    masked, found = _scrub(run, value)
    assert found and SECRET not in json.dumps(masked)
    assert masked == {"answer": "x *** y", "retrieved": [{"text": "***", "file": "a"}], "***": [1, None, 2.5]}
    assert _scrub(run, {"answer": "clean"}) == ({"answer": "clean"}, False)
    run.secrets = []
    assert _scrub(run, value) == (value, False)
