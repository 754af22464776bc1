"""Interrupted and resumed runs lose nothing: no half-written results, no paid reply lost (session 30).

Each interruption lands at a known point: the scripted server (or target) holds the calls after a given count,
and a full disk is a cache connection whose commits fail after a given number of them.
"""
from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "judge"))

from test_edges import _FullDisk  # noqa: E402  (a cache connection whose commits fail once the disk is full)

GOLDEN = HERE.parent / "python" / "ragmeter" / "_example" / "golden.jsonl"

# a Python target counting its calls in calls.log (in the current folder) and answering every case
COUNTING_TARGET = """
def ask(case):
    with open('calls.log', 'a') as f:
        f.write(case['id'] + '\\n')
    return {'answer': 'about ' + case['id'], 'retrieved': [{'file': 'a.md', 'text': 't'}]}
"""


def _calls(folder: Path) -> list:
    log = folder / "calls.log"
    return log.read_text().split() if log.exists() else []


def _cached_keys(path: Path) -> set:
    with sqlite3.connect(path) as conn:
        return {k for (k,) in conn.execute("SELECT key FROM judge_cache")}


# -- collect: a disk that fills up while caching keeps the paid replies, and the rerun reads them back ---------------
def test_collect_on_a_full_disk_keeps_every_answered_reply_and_the_rerun_asks_only_the_rest(tmp_path, monkeypatch,
                                                                                            capsys):
    import ragmeter.judge.cache as cache_mod
    from ragmeter.cli import main

    (tmp_path / "counting_rag.py").write_text(COUNTING_TARGET)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    real_open = cache_mod._open
    monkeypatch.setattr(cache_mod, "_open", lambda path, writable: _FullDisk(real_open(path, writable), ok=3))
    args = ["collect", "--golden", str(GOLDEN), "--target", "counting_rag:ask", "--out", "run.jsonl",
            "--cache", "c.sqlite", "--concurrency", "1"]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert "cannot write the collect cache (database or disk is full)" in err
    assert not (tmp_path / "run.jsonl").exists()  # nothing half-written
    answered = _calls(tmp_path)
    spills = list(tmp_path.glob("c.sqlite.unsaved-*.jsonl"))
    # before: the reply whose commit failed was paid for and thrown away; nothing was written but the cache
    assert len(spills) == 1, (err, sorted(p.name for p in tmp_path.iterdir()))
    spilled = [json.loads(line)["key"] for line in spills[0].read_text().splitlines()]
    assert f"{len(spilled)} paid replies could not be cached and were written to {spills[0].name}" in err  # as --cache names it
    monkeypatch.setattr(cache_mod, "_open", real_open)  # the disk has room again
    assert len(_cached_keys(tmp_path / "c.sqlite")) + len(spilled) == len(answered)

    assert main(args) == 0, capsys.readouterr().err
    asked_again = _calls(tmp_path)[len(answered):]
    assert not set(asked_again) & set(answered)  # no reply paid for twice
    assert sorted(answered + asked_again) == sorted(json.loads(line)["id"] for line in GOLDEN.read_text().splitlines()
                                                    if line.startswith("{"))
    assert not list(tmp_path.glob("c.sqlite.unsaved-*.jsonl"))  # read back into the cache, then deleted
    rows = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert [r["answer"] for r in rows] == [f"about {r['id']}" for r in rows] and len(rows) == len(answered +
                                                                                                   asked_again)
