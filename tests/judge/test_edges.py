"""Honest outcomes at the edges (issue 11): fatal endpoints stop the run, --max-failed and exit 3, cache faults,
a key in the URL, interrupts. Every case: the documented exit status, one line, no traceback."""
from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from ragmeter.judge import Cache, JudgeConfig, JudgeStopped, run_sync
from ragmeter.judge.stop import Breaker
from ragmeter.judge.urls import public_endpoint, scrub_urls, split_credentials

from evalcli import eval_cli
from test_cli import cli, write_cases

QUOTA = {"status": 429, "body": json.dumps({"error": {"message": "You exceeded your current quota",
                                                       "code": "insufficient_quota"}})}


def finish(p, timeout=60):
    out, err = p.communicate(timeout=timeout)
    assert "Traceback" not in err, err
    return p.returncode, out, err


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connection refused
    return port


# -- fatal answers stop the run ---------------------------------------------------------------------------
@pytest.mark.parametrize("action,kind,words", [
    (401, "auth", "refused the API key"), (403, "auth", "refused the API key"),
    (404, "not_found", "wrong --base-url or --model"), (QUOTA, "quota", "quota or credit exhausted"),
])
def test_fatal_answer_stops_the_run_after_one_request(tmp_path, server, api_key, action, kind, words):
    cases = write_cases(tmp_path / "cases.jsonl", 20)
    server.rules = [(lambda info: True, action)]
    code, out, err = finish(cli(tmp_path, server, "--cases", str(cases), "--concurrency", "8", key=api_key))
    assert code == 2
    assert server.requests == 1 and server.models_requests == 1  # the preflight, then the first call alone
    line = [x for x in err.splitlines() if x.startswith("ragmeter: error:")]
    assert len(line) == 1 and words in line[0] and server.base_url.rsplit("/", 1)[0] in line[0]
    assert "rerun with the same --cache resumes" in line[0]
    assert not (tmp_path / "out").exists()  # nothing marked as scored
    assert api_key not in out + err


def test_fatal_answer_in_the_library_is_a_judge_stopped_error(server, tmp_path, fast_retry):
    server.rules = [(lambda info: True, 401)]
    cases = [{"id": f"c{i}", "question": "q?", "reference_answer": "r", "answer": "a"} for i in range(10)]
    with pytest.raises(JudgeStopped) as ei:
        run_sync(cases, JudgeConfig(base_url=server.base_url, model="m", cache=None, retry=fast_retry,
                                    metrics=["correctness"]))
    assert ei.value.kind == "auth" and ei.value.exit_code == 2 and server.requests == 1


def test_preflight_401_on_models_is_fatal_before_any_paid_call(tmp_path, server, api_key):
    cases = write_cases(tmp_path / "cases.jsonl", 5)
    server.models_action = 401
    code, _, err = finish(cli(tmp_path, server, "--cases", str(cases), key=api_key))
    assert code == 2 and server.requests == 0 and server.models_requests == 1
    assert "GET /models" in err and "refused the API key" in err


@pytest.mark.parametrize("status", [404, 405])
def test_preflight_without_a_models_route_goes_on(tmp_path, server, api_key, status):
    cases = write_cases(tmp_path / "cases.jsonl", 2)
    server.models_action = status
    code, _, err = finish(cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness", key=api_key))
    assert code == 0, err
    assert server.models_requests == 1 and server.requests == 2


def test_connection_refused_stops_at_once(tmp_path, server, api_key):
    cases = write_cases(tmp_path / "cases.jsonl", 20)
    url = f"http://127.0.0.1:{closed_port()}/v1"
    args = [sys.executable, "-m", "ragmeter", "judge", "--base-url", url, "--model", "gpt-4o-mini",
            "--cases", str(cases), "--cache", str(tmp_path / "c.sqlite"), "--out", str(tmp_path / "out"),
            "--no-progress", "--retry-base-delay", "0.01"]
    started = time.monotonic()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    code, _, err = finish(p)
    assert code == 2 and time.monotonic() - started < 20
    assert "cannot connect" in err and f"127.0.0.1:{url.split(':')[2].split('/')[0]}" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_endpoint_that_never_answers_stops_after_the_preflight(tmp_path, server, api_key):
    cases = write_cases(tmp_path / "cases.jsonl", 20)
    server.models_action = "hang"
    server.rules = [(lambda info: True, "hang")]
    code, _, err = finish(cli(tmp_path, server, "--cases", str(cases), "--timeout", "0.5", key=api_key))
    assert code == 2 and server.total_requests == 1
    assert "no answer to GET /models within --timeout 0.5s" in err


def test_breaker_stops_a_run_whose_calls_all_time_out(tmp_path, server, api_key):
    cases = write_cases(tmp_path / "cases.jsonl", 20)
    server.models_action = 404  # no preflight route: only the real calls can tell
    server.rules = [(lambda info: True, "timeout")]  # answers after 1 s, the client gives up at 0.3 s
    code, _, err = finish(cli(tmp_path, server, "--cases", str(cases), "--timeout", "0.3", "--concurrency", "2",
                              key=api_key))
    assert code == 2
    # 4 workers: each call fails once (4 requests), the next failure is some call's second and trips it; one more
    # may be in flight by then. Without the breaker: 20 cases x 7 calls x 6 attempts.
    assert server.requests <= 6
    assert "transport failures in a row across different calls" in err and "request timed out" in err


def test_breaker_rule():
    b = Breaker()
    assert not b.failed(1) and not b.failed(2) and not b.failed(3)  # three calls, none failed twice yet
    assert b.failed(1)
    b.answered()
    for _ in range(5):
        assert not b.failed(7)  # one call alone never trips it (its own retries decide)
    assert b.failed(8)

    # once the endpoint has answered in this run, two hung attempts per call are not enough (the end of a run
    # may hold only the calls whose requests hang); a third failure of one call is
    b.answered()
    assert not b.failed(1) and not b.failed(2) and not b.failed(1) and not b.failed(2)
    assert b.failed(1)
    fresh = Breaker()
    assert not fresh.failed(1) and not fresh.failed(2) and fresh.failed(1)  # never answered: two suffice


def test_one_flaky_call_does_not_trip_the_breaker(server, tmp_path, fast_retry):
    server.script = ["drop", "drop", "drop"]  # the first call fails three times, then recovers
    cases = [{"id": f"c{i}", "question": "q?", "reference_answer": "r", "answer": "r"} for i in range(4)]
    res = run_sync(cases, JudgeConfig(base_url=server.base_url, model="m", cache=None, retry=fast_retry,
                                      metrics=["correctness"], concurrency=2))
    assert [r["status"] for r in res.rows] == ["ok"] * 4


# -- --max-failed and exit 3 ------------------------------------------------------------------------------
@pytest.mark.parametrize("limit,code", [(None, 3), ("0", 3), ("1", 0), ("25%", 0), ("20%", 3)])
def test_max_failed_count_and_percent(tmp_path, server, api_key, limit, code):
    cases = write_cases(tmp_path / "cases.jsonl", 4)
    server.script = ["malformed", "malformed"]  # the first case's call and its repair: 1 failed row of 4
    extra = [] if limit is None else ["--max-failed", limit]
    got, out, err = finish(cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness",
                               "--concurrency", "1", "--no-cache", *extra, key=api_key))
    assert got == code, err
    assert (tmp_path / "out" / "judge.parquet").exists()  # written either way
    assert "failed 1 unparsable: correctness@" in out
    assert ("incomplete: 1 of 4 judge rows" in err) == (code == 3)


def test_max_failed_rejects_nonsense(tmp_path, server):
    cases = write_cases(tmp_path / "cases.jsonl", 1)
    for bad in ("-1", "many", "150%"):
        code, _, err = finish(cli(tmp_path, server, "--cases", str(cases), "--max-failed", bad))
        assert code == 2 and "--max-failed" in err
    assert server.total_requests == 0


def test_budget_skips_count_as_incomplete(tmp_path, server, api_key):
    cases = write_cases(tmp_path / "cases.jsonl", 6)
    code, out, err = finish(cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness",
                                "--concurrency", "1", "--budget", "0.0001", "--price", "1000,1000", key=api_key))
    summary = json.loads((tmp_path / "out" / "judge_summary.json").read_text())
    m = summary["metrics"]["correctness"]
    assert m["n_skipped_budget"] > 0 and summary["incomplete"]["skipped_budget"] == m["n_skipped_budget"]
    assert code == 3 and f"{m['n_skipped_budget']} skipped at --budget" in err  # a rerun with more budget can judge them
    assert f"skipped {m['n_skipped_budget']} budget: --budget" in out


def test_summary_never_averages_a_failed_row_and_prints_na(tmp_path, server, api_key):
    cases = write_cases(tmp_path / "cases.jsonl", 2)
    server.rules = [(lambda info: info.get("task") == "correctness", "malformed")]
    code, out, err = finish(cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness,context_recall",
                                key=api_key))
    assert code == 3
    s = json.loads((tmp_path / "out" / "judge_summary.json").read_text())
    corr = s["metrics"]["correctness"]
    assert corr["mean"] is None and corr["n_scored"] == 0 and corr["n_failed"] == 2
    # no row scored: no rate, not 0.0% (it read as a measured 'never correct')
    assert corr["correct_rate"] is None and corr["correct_rate_denominator"] == 2
    assert corr["failures"]["unparsable"]["count"] == 2 and "unusable reply" in corr["failures"]["unparsable"]["example"]
    assert "mean   n/a (1-5)  scored 0/2  failed 2" in out and "mean 0.000" not in out
    assert "correct n/a (no row scored, 2 failed)" in out and "0.0%" not in out
    assert max(len(line) for line in out.splitlines() if line.startswith("    ")) <= 80
    assert "counted, never averaged as 0" in s["denominators"]


def test_eval_exit_3_and_failure_lines(tmp_path, server, api_key):
    server.rules = [(lambda info: info.get("payload", {}).get("question", "").startswith("How"), "malformed")]
    proc = eval_cli("--metrics", "correctness", "--no-cache", "--out", str(tmp_path / "ev"), server=server)
    assert "Traceback" not in proc.stderr
    summary = json.loads((tmp_path / "ev" / "summary.json").read_text())
    failed = summary["judge"]["metrics"]["correctness"]["n_failed"]
    assert failed > 0 and proc.returncode == 3, proc.stderr
    assert f"failed {failed} unparsable:" in proc.stdout and "incomplete:" in proc.stderr
    proc = eval_cli("--metrics", "correctness", "--no-cache", "--out", str(tmp_path / "ev2"), "--max-failed", "100%",
                    server=server)
    assert proc.returncode == 0, proc.stderr


def test_eval_stops_on_a_refused_key_and_writes_nothing(tmp_path, server, api_key):
    server.rules = [(lambda info: True, 401)]
    proc = eval_cli("--metrics", "correctness", "--no-cache", "--out", str(tmp_path / "ev"), server=server)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "refused the API key" in proc.stderr and server.requests == 1
    assert not (tmp_path / "ev" / "summary.json").exists()


def test_eval_has_no_cases_option():
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "eval", "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "--cases" not in proc.stdout
    proc = eval_cli("--cases", "x.jsonl")
    assert proc.returncode == 2 and "unrecognized arguments: --cases" in proc.stderr


# -- cache faults -----------------------------------------------------------------------------------------
def filled_cache(tmp_path, server, api_key, n=6):
    cases = write_cases(tmp_path / "cases.jsonl", n)
    code, _, err = finish(cli(tmp_path, server, "--cases", str(cases), key=api_key))
    assert code == 0, err
    return cases, tmp_path / "cache.sqlite"


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_damaged_cache_exit_2_before_any_call_then_repair(tmp_path, server, api_key, damage):
    cases, path = filled_cache(tmp_path, server, api_key, n=30)
    sent = server.total_requests
    with Cache(path) as whole:
        entries = len(whole)
    data = path.read_bytes()
    damaged_bytes = data[: len(data) // 2] if damage == "truncated" else b"\x00garbage header" + data[16:]
    path.write_bytes(damaged_bytes)
    code, _, err = finish(cli(tmp_path, server, "--cases", str(cases), key=api_key))
    assert code == 2 and server.total_requests == sent
    assert err.strip() == err.strip().splitlines()[0]  # one line
    assert str(path) in err and "--no-cache" in err
    if damage == "garbage":  # SQLite cannot open it: nothing to salvage, so repair is not offered and refuses
        assert "not a judge cache (not an SQLite file" in err and "cache repair" not in err
        rep = repair_cli(path)
        assert rep.returncode == 2 and "does not look like a ragmeter cache, judge or collect (not an SQLite file)" in rep.stderr
        assert path.read_bytes() == damaged_bytes and not list(tmp_path.glob("cache.sqlite.damaged-*"))
        return
    assert f"ragmeter cache repair {path}" in err
    rep = subprocess.run([sys.executable, "-m", "ragmeter", "cache", "repair", str(path)], capture_output=True,
                         text=True)
    assert rep.returncode == 0 and "Traceback" not in rep.stderr
    damaged = [p for p in tmp_path.iterdir() if p.name.startswith("cache.sqlite.damaged-")
               and not p.name.endswith(("-wal", "-shm"))]
    assert len(damaged) == 1 and damaged[0].read_bytes() == damaged_bytes  # kept as it was
    salvaged = int(" ".join(rep.stdout.split()).split(" entries salvaged")[0].split()[-1])
    assert 0 < salvaged < entries
    assert f"thedamagedfileiskeptas{damaged[0]}" in "".join(rep.stdout.split())  # wrapped at 80 columns
    with Cache(path) as fresh:
        assert len(fresh) == salvaged
    before = server.requests
    code, _, err = finish(cli(tmp_path, server, "--cases", str(cases), key=api_key))
    assert code == 0, err
    assert server.requests - before == entries - salvaged  # the salvaged replies are not paid for twice


def test_one_undecodable_entry_is_a_miss_with_a_warning(tmp_path, server, api_key):
    cases, path = filled_cache(tmp_path, server, api_key)
    sent = server.requests
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE judge_cache SET value = '{not json' WHERE rowid = (SELECT min(rowid) FROM judge_cache)")
    code, _, err = finish(cli(tmp_path, server, "--cases", str(cases), key=api_key))
    assert code == 0, err
    assert server.requests == sent + 1  # only that call is asked again
    assert "cannot be read (value is not JSON" in err
    code, _, err = finish(cli(tmp_path, server, "--cases", str(cases), key=api_key))
    assert code == 0 and server.requests == sent + 1 and "cannot be read" not in err  # the new reply replaced it


def cache_of_five(path, undecodable=None):
    """A judge cache of entries k0..k4; ``undecodable``: the key whose value is made unreadable."""
    with Cache(path) as c:
        for i in range(5):
            c.put(f"k{i}", {"content": str(i)})
    if undecodable is not None:
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE judge_cache SET value = 'nope' WHERE key = ?", (undecodable,))
        conn.close()
    return path


def test_repair_drops_an_undecodable_entry(tmp_path):
    from ragmeter.judge import repair

    path = cache_of_five(tmp_path / "c.sqlite", undecodable="k2")
    result = repair(path)
    assert result["salvaged"] == 4 and result["dropped"] == 1
    with Cache(path) as c:
        assert len(c) == 4 and c.get("k2") is None and c.get("k3") == {"content": "3"}


def repair_cli(path):
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "cache", "repair", str(path)], capture_output=True,
                          text=True)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_repair_refuses_a_file_that_is_not_a_cache_and_changes_nothing(tmp_path):
    golden = tmp_path / "golden.jsonl"
    golden.write_text('{"id": "c1", "question": "q?", "reference_answer": "a"}\n' * 20, encoding="utf-8")
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:  # an SQLite database, but not a judge cache
        conn.execute("CREATE TABLE notes (t TEXT)")
    conn.close()
    for path, why in ((golden, "not an SQLite file"), (other, "no judge_cache table")):
        before, listing = path.read_bytes(), sorted(p.name for p in tmp_path.iterdir())
        proc = repair_cli(path)
        assert proc.returncode == 2, proc.stdout
        assert proc.stderr.strip() == (f"ragmeter: error: {path} does not look like a ragmeter cache, judge or collect ({why}); "
                                       "nothing changed")
        assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == listing


def test_repair_leaves_an_empty_or_healthy_cache_alone(tmp_path):
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    proc = repair_cli(empty)
    assert proc.returncode == 0 and "empty" in proc.stdout and "nothing changed" in proc.stdout
    assert empty.read_bytes() == b"" and [p.name for p in tmp_path.iterdir()] == ["empty.sqlite"]
    path = cache_of_five(tmp_path / "c.sqlite")
    before = path.read_bytes()
    proc = repair_cli(path)
    assert proc.returncode == 0, proc.stderr
    said = f"{path} is a healthy cache (5 entries): nothing to repair, nothing changed"
    assert "".join(proc.stdout.split()) == "".join(said.split())  # wrapped at 80 columns
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["c.sqlite", "empty.sqlite"]


def test_repair_leaves_no_wal_or_shm_beside_the_damaged_copy(tmp_path):
    from ragmeter.judge import repair

    path = cache_of_five(tmp_path / "c.sqlite", undecodable="k2")
    result = repair(path)
    assert result["salvaged"] == 4 and not result["healthy"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.sqlite", Path(result["damaged"]).name]


def _read_only(tmp_path):
    """A folder with a cache in it that cannot be written: a read-only tmpfs as root, else chmod."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() == 0:
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(folder)],
                          capture_output=True).returncode != 0:
            pytest.skip("running as root without permission to mount a read-only tmpfs")
        Cache(folder / "cache.sqlite").close()
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        return folder, lambda: subprocess.run(["umount", str(folder)], check=False)
    Cache(folder / "cache.sqlite").close()
    os.chmod(folder / "cache.sqlite", 0o444)
    os.chmod(folder, 0o555)
    return folder, lambda: os.chmod(folder, 0o755)


def test_read_only_cache_is_found_before_the_first_paid_call(tmp_path, server, api_key):
    folder, undo = _read_only(tmp_path)
    try:
        cases = write_cases(tmp_path / "cases.jsonl", 3)
        args = ["--cases", str(cases), "--cache", str(folder / "cache.sqlite")]
        code, _, err = finish(cli(tmp_path, server, *args, key=api_key))
    finally:
        undo()
    assert code == 2 and server.total_requests == 0
    assert f"{folder / 'cache.sqlite'}: the judge cache cannot be written" in err and "--no-cache" in err


class _FullDisk:
    """A connection whose group commits fail with SQLITE_FULL after ``ok`` of them (the disk filled up)."""

    def __init__(self, conn, ok):
        self._conn, self._ok = conn, ok

    def executemany(self, sql, rows):
        if self._ok <= 0:
            raise sqlite3.OperationalError("database or disk is full")
        self._ok -= 1
        return self._conn.executemany(sql, rows)

    def __getattr__(self, name):
        return getattr(self._conn, name)


def test_disk_full_while_caching_stops_and_keeps_the_paid_replies(tmp_path, server, api_key, capsys, monkeypatch):
    import ragmeter.judge.cache as cache_mod
    from ragmeter.cli import main

    real = cache_mod._open
    monkeypatch.setattr(cache_mod, "_open", lambda path, writable: _FullDisk(real(path, writable), ok=3))
    cases = write_cases(tmp_path / "cases.jsonl", 30)
    out_dir = tmp_path / "results" / "out"
    code = main(["judge", "--base-url", server.base_url, "--model", "gpt-4o-mini", "--cases", str(cases),
                 "--cache", str(tmp_path / "cache.sqlite"), "--out", str(out_dir), "--no-progress",
                 "--concurrency", "2"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "cannot write the judge cache (database or disk is full)" in err
    assert server.requests < 30  # stopped launching calls: far from 150 rows' worth
    with Cache(tmp_path / "cache.sqlite") as cache:
        cached = {k for (k,) in cache._conn.execute("SELECT key FROM judge_cache")}
    spills = list(tmp_path.glob("cache.sqlite.unsaved-*.jsonl"))
    assert len(spills) == 1
    spilled = [json.loads(line) for line in spills[0].read_text().splitlines()]
    assert spilled and f"{len(spilled)} paid replies could not be cached and were written to {spills[0]}" in err
    answered = sum(1 for r in server.log if r.get("action") == "ok" and "t_out" in r)
    assert len(cached) + len(spilled) == answered  # every reply received is kept somewhere
    assert not out_dir.exists()


# -- secrets ----------------------------------------------------------------------------------------------
def test_url_helpers():
    assert split_credentials("http://user:KEY@host:8/v1?x=1") == ("http://host:8/v1?x=1", "KEY")
    assert split_credentials("http://host/v1") == ("http://host/v1", None)
    assert public_endpoint("https://u:KEY@h.example/v1/?api-key=KEY") == "https://h.example/v1"
    assert scrub_urls("failed http://u:KEY@h/v1 and https://x@y/z") == "failed http://h/v1 and https://y/z"
    cfg = JudgeConfig(base_url="http://user:KEY123@h/v1", model="m")
    assert "KEY123" not in repr(cfg) and cfg.base_url == "http://h/v1" and cfg.api_key == "KEY123"


def test_key_in_the_url_is_used_and_never_shown_or_written(tmp_path, server, api_key, monkeypatch):
    monkeypatch.delenv("RAGMETER_API_KEY", raising=False)
    secret = api_key  # the server wants it as the bearer key
    url = server.base_url.replace("http://", f"http://user:{secret}@")
    cases = write_cases(tmp_path / "cases.jsonl", 2)
    args = [sys.executable, "-m", "ragmeter", "judge", "--base-url", url, "--model", "gpt-4o-mini", "--cases",
            str(cases), "--cache", str(tmp_path / "c.sqlite"), "--out", str(tmp_path / "out"), "--no-progress", "-v"]
    env = {k: v for k, v in os.environ.items() if k not in ("RAGMETER_API_KEY", "OPENAI_API_KEY")}
    code, out, err = finish(subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                             env=env))
    assert code == 0, err
    assert all(r["auth_ok"] for r in server.log)
    proc = eval_cli("--base-url", url, "--model", "gpt-4o-mini", "--metrics", "correctness", "--no-progress",
                    "--cache", str(tmp_path / "c.sqlite"), "--out", str(tmp_path / "ev"))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "ev" / "summary.json").read_text())
    assert summary["settings"]["judge"]["base_url"] == server.base_url
    # refused: the error line names the endpoint, not the key
    server.rules = [(lambda info: True, 401)]
    code2, out2, err2 = finish(subprocess.Popen(args + ["--no-cache"], stdout=subprocess.PIPE,
                                                stderr=subprocess.PIPE, text=True, env=env))
    assert code2 == 2 and "refused the API key" in err2
    for text in (out, err, proc.stdout, proc.stderr, out2, err2):
        assert secret not in text
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


# -- interrupts -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sig,code,word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_interrupt_says_what_was_done_and_keeps_the_replies(tmp_path, server, api_key, sig, code, word):
    cases = write_cases(tmp_path / "cases.jsonl", 8)
    served = 12
    server.rules = [(lambda info: server.requests > served, "hang")]
    p = cli(tmp_path, server, "--cases", str(cases), "--concurrency", "4", key=api_key)
    deadline = time.monotonic() + 30
    while server.requests <= served + 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)
    os.kill(p.pid, sig)
    got, out, err = finish(p, timeout=30)
    assert got == code, err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"ragmeter: {word}: ") and "a rerun with the same --cache resumes" in line
    with sqlite3.connect(tmp_path / "cache.sqlite") as conn:
        n = conn.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0]
    assert n == served and f"{n} replies are cached" in line
    server.rules = []
    server.release()
    before = server.requests
    again, _, err = finish(cli(tmp_path, server, "--cases", str(cases), key=api_key))
    assert again == 0, err
    df = pl.read_parquet(tmp_path / "out" / "judge.parquet")
    assert df["cached_calls"].sum() == served  # every reply kept at the interrupt is replayed, none paid twice
    assert set(df["status"]) == {"ok"}


def test_unknown_embeddings_model_stops_after_one_embeddings_request(server, tmp_path, fast_retry):
    server.rules = [(lambda info: info["kind"] == "embeddings", 404)]
    cases = [{"id": f"c{i}", "question": f"q{i}?", "answer": f"a{i}"} for i in range(6)]
    with pytest.raises(JudgeStopped) as ei:
        run_sync(cases, JudgeConfig(base_url=server.base_url, model="m", embeddings_model="no-such-embedder",
                                    cache=None, retry=fast_retry, metrics=["answer_relevancy"], concurrency=4))
    assert ei.value.kind == "not_found" and "model no-such-embedder" in str(ei.value)
    assert len(server.by_task("embeddings")) == 1


def test_a_real_full_disk_spills_next_to_out(tmp_path, server, api_key):
    """As root: the cache on a 192 KiB tmpfs that fills up mid-run; the spill beside it cannot be written either,
    so the paid replies go next to --out."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root; the injected ENOSPC test covers the logic")
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=192k", "tmpfs", str(small)],
                      capture_output=True).returncode != 0:
        pytest.skip("no permission to mount a tmpfs")
    try:
        cases = write_cases(tmp_path / "cases.jsonl", 60)
        server.replies["correctness"] = lambda payload: {"reason": "x" * 3000, "score": 5, "correct": True}
        args = ["--cases", str(cases), "--cache", str(small / "cache.sqlite"), "--out", str(tmp_path / "res" / "out"),
                "--metrics", "correctness", "--concurrency", "4"]
        p = cli(tmp_path, server, *args, key=api_key)
        code, out, err = finish(p, timeout=120)
        spills = list((tmp_path / "res").glob("cache.sqlite.unsaved-*.jsonl"))
        kept = sum(1 for _ in spills[0].open()) if spills else 0
        conn = sqlite3.connect(small / "cache.sqlite")
        try:
            cached = conn.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0]
        finally:
            conn.close()  # an open file keeps the mount busy
    finally:
        subprocess.run(["umount", str(small)], check=True)
    assert code == 2, err
    assert "cannot write the judge cache" in err and "full" in err
    assert len(spills) == 1 and kept > 0 and f"written to {spills[0]}" in err
    answered = sum(1 for r in server.log if r.get("action") == "ok" and "t_out" in r)
    assert cached + kept == answered and server.requests < 60
