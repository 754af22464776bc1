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


def test_credentials_in_the_target_url_are_masked_like_header_values(tmp_path):
    """A key in the url (``?api_key=``, ``user:password@``) is a credential as a header value is: a system that
    echoes its request url (or the Basic header made of the password) must not put it on disk or the terminal."""
    import base64

    ids = golden_ids()
    password, key = "PassWord-Url-7c1e", "Query-Key/59ab3f0e"
    basic = base64.b64encode(f"ragmeter:{password}".encode()).decode()
    secrets = (password, key, key.replace("/", "%2F"), basic)
    with RagServer(echo_url=True, script={ids[3]: [{"status": 500, "echo": True}] * 3}) as s:
        url = s.url.replace("http://", f"http://ragmeter:{password}@") + f"?api_key={key.replace('/', '%2F')}&mode=x"
        target = write_target(tmp_path / "t.toml", url)
        proc = cli("collect", "--golden", str(GOLDEN), "--target", str(target), "--out", "run.jsonl", "--cache",
                   "c.sqlite", "--retry-attempts", "3", cwd=tmp_path)
        echoed = s.auth_headers[0]
        with RagServer(echo_url=True, script={ids[0]: [{"status": 400, "echo": True}]}) as s2:  # exit 2 on case 1
            url2 = s2.url.replace("http://", f"http://ragmeter:{password}@") + f"?api_key={key}"
            first = cli("collect", "--golden", str(GOLDEN), "--target", str(write_target(tmp_path / "t2.toml", url2)),
                        "--out", "run2.jsonl", "--no-cache", cwd=tmp_path)
    assert echoed == f"Basic {basic}"  # the premise: the client sends the url's password as a Basic header
    assert proc.returncode == 3, proc.stderr  # ids[3] failed, its error page echoing the url
    assert first.returncode == 2 and "HTTP 400" in first.stderr and "***" in first.stderr, first.stderr
    said = " ".join((proc.stdout + proc.stderr).split())
    assert "collected case(s) came back with a value of a request header (a credential)" in said, said
    # the case whose error page echoed the credential is named too (before: only the answered cases were; it is
    # the fourth case, so among the five the warning names)
    echo_warning = said[said.index("came back with a value of a request header"):]
    assert ids[3] in echo_warning[:echo_warning.index(" more")], echo_warning[:400]
    run = {r["id"]: r for r in load_run(tmp_path / "run.jsonl").iter_rows(named=True)}
    assert "api_key=***" in run[ids[1]]["answer"] and "with Basic ***" in run[ids[1]]["answer"]
    assert "mode=x" in run[ids[1]]["answer"]  # a parameter that is no credential is kept
    raw = {r["id"]: r for r in map(json.loads, (tmp_path / "run.jsonl").read_text().splitlines())}
    assert raw[ids[3]]["error_kind"] == "server" and "***" in raw[ids[3]]["error"]
    cached = _cached_values(tmp_path / "c.sqlite")
    assert len(cached) == len(ids) - 1
    for text in [proc.stdout, proc.stderr, first.stdout, first.stderr, (tmp_path / "run.jsonl").read_text(),
                 *cached]:
        assert not any(secret in text for secret in secrets), text[:300]
