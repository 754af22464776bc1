"""Review of ragmeter collect (session 28): honest outcomes, the target file and flags as a demanding user meets
them. Loopback HTTP targets (ragserver) and Python callables only."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from collect_helpers import FAST, GOLDEN, cli, golden_ids, write_target
from ragserver import RagServer, example_records

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for loopback
from loopback import LoopbackApp  # noqa: E402

import ragmeter
from ragmeter.errors import InputError


def test_a_null_retrieved_list_is_a_failed_case_not_a_silent_empty_retrieval(tmp_path):
    """``"retrieved": null`` in a run record (no [response] mapping, or a function's return value) was written as
    ``retrieved: []`` and counted as collected: a system that lost its chunk list scored as one that found
    nothing, exit 0. (A mapped path holding null was already refused as not a list.)"""
    ids = golden_ids()
    records = example_records()
    records[ids[1]] = dict(records[ids[1]], retrieved=None)
    with RagServer(records=records, modes=None) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        result = ragmeter.collect(GOLDEN, target=target, out=tmp_path / "run.jsonl", policy=FAST)
    failed = {r["id"]: r for r in result.records}[ids[1]]
    assert failed["error_kind"] == "bad_response" and "retrieved" in failed["error"], failed
    assert result.incomplete and result.summary["n_failed"] == 1
    with pytest.raises(InputError, match="not a run record: 'retrieved' is null, not a list"):
        ragmeter.collect(GOLDEN, target=lambda case: {"answer": "a", "retrieved": None})


def test_an_empty_retrieval_is_kept_and_counted_in_the_summary(tmp_path):
    """An empty list is the system's answer (nothing found): collected as it is, and counted, so a retriever
    that came back empty for every case is seen at collection time."""
    ids = golden_ids()
    records = example_records()
    for case_id in ids[3:6]:
        records[case_id] = dict(records[case_id], retrieved=[])
    with RagServer(records=records, modes=None) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        proc = cli("collect", "--golden", str(GOLDEN), "--target", "t.toml", "--out", "run.jsonl", "--no-cache",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    empty = [i for i in ids if not records.get(i, {"retrieved": []})["retrieved"]]  # the example has some
    assert set(ids[3:6]) <= set(empty)
    rows = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows if r["retrieved"] == []] == empty and not any("error" in r for r in rows)
    assert f"{len(empty)} empty retrievals" in " ".join(proc.stdout.split()), proc.stdout
    result = ragmeter.collect(GOLDEN, target=lambda case: {"answer": "a", "retrieved": []})
    assert result.summary["n_empty_retrievals"] == len(ids)


@pytest.mark.parametrize("value, words", [("sk-secret-0123456789\n", "a line break"),
                                          ("sk-secret-0123456789\r", "a line break"),
                                          ("sk-secret\x01-0123456789", "a control character")])
def test_a_header_variable_holding_a_control_character_is_one_line_before_any_call(tmp_path, value, words):
    """A token read from a file with its line break failed every case ('Forbidden control character detected in
    headers', error_kind client), exit 3 with a run file of failures, '51 requests' though none was sent, and
    no word of which header or variable."""
    with RagServer() as s:
        write_target(tmp_path / "t.toml", s.url, 'headers = { Authorization = "Bearer ${RAG_TOKEN}" }\n')
        proc = cli("collect", "--golden", str(GOLDEN), "--target", "t.toml", "--out", "run.jsonl", "--no-cache",
                   cwd=tmp_path, env={"RAG_TOKEN": value})
        sent = sum(s.requests.values())
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("ragmeter: error: t.toml: headers.Authorization: environment variable RAG_TOKEN "
                                  f"holds {words}") and proc.stderr.count("\n") == 1, proc.stderr
    assert "0123456789" not in proc.stderr + proc.stdout  # the value itself is never shown
    assert sent == 0 and not (tmp_path / "run.jsonl").exists()


@pytest.mark.parametrize("header", ["Bearer ${RAG_TOKEN", "Bearer $RAG_TOKEN", "$RAG_TOKEN"])
def test_a_header_variable_written_another_way_is_refused_not_sent_literally(tmp_path, header):
    """``${RAG_TOKEN`` (no closing brace) and ``$RAG_TOKEN`` (the shell's way) were sent as they are written:
    the system got the text '$RAG_TOKEN' as the credential."""
    with RagServer() as s:
        write_target(tmp_path / "t.toml", s.url, f'headers = {{ Authorization = "{header}" }}\n')
        proc = cli("collect", "--golden", str(GOLDEN), "--target", "t.toml", "--out", "run.jsonl", "--no-cache",
                   cwd=tmp_path, env={"RAG_TOKEN": "sk-secret-0123456789"})
        sent = sum(s.requests.values())
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("ragmeter: error: t.toml: headers.Authorization: ") and "${RAG_TOKEN}" in \
        proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert sent == 0


@pytest.mark.parametrize("source, words", [("x = 1 / 0\n", "ZeroDivisionError: division by zero"),
                                           ("def ask(:\n", "SyntaxError"),
                                           ("import sys\nsys.exit(3)\n", "SystemExit")])
def test_a_target_module_that_fails_to_import_is_one_line(tmp_path, source, words):
    """A module raising anything but ImportError while it was imported was a traceback, exit 1."""
    (tmp_path / "brokenrag.py").write_text(source)
    proc = cli("collect", "--golden", str(GOLDEN), "--target", "brokenrag:ask", "--out", "run.jsonl",
               "--no-cache", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("ragmeter: error: --target brokenrag:ask: cannot import brokenrag (") and \
        words in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "run.jsonl").exists()


def test_a_function_that_cannot_take_the_case_is_refused_before_the_first_call(tmp_path):
    """A function of no argument (or of two) failed every case with a TypeError, exit 3: 51 failed records of one
    mistake in the target."""
    (tmp_path / "myrag.py").write_text("def ask():\n    return {'answer': 'a', 'retrieved': []}\n"
                                       "def ask2(case, top_k):\n    return {'answer': 'a', 'retrieved': []}\n"
                                       "def ask3(case, top_k=5, **kw):\n    return {'answer': 'a', 'retrieved': []}\n")
    for name in ("ask", "ask2"):
        proc = cli("collect", "--golden", str(GOLDEN), "--target", f"myrag:{name}", "--out", "run.jsonl",
                   "--no-cache", cwd=tmp_path)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.startswith(f"ragmeter: error: --target myrag:{name}: ") and "one argument" in \
            proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
        assert not (tmp_path / "run.jsonl").exists()
    proc = cli("collect", "--golden", str(GOLDEN), "--target", "myrag:ask3", "--out", "run.jsonl", "--no-cache",
               cwd=tmp_path)  # extra arguments with defaults are fine
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("flags, words", [
    (["--repeat", "1001"], "--repeat must be an integer between 1 and 1000"),
    (["--repeat", "0"], "--repeat must be an integer between 1 and 1000"),
    (["--concurrency", "100000000"], "--concurrency must be an integer between 1 and 1000"),
    (["--concurrency", "-1"], "--concurrency must be an integer between 1 and 1000"),
])
def test_a_huge_repeat_or_concurrency_is_refused_naming_the_flag(tmp_path, flags, words):
    """--repeat 100000000 built every (case, repeat) job first: a MemoryError traceback, exit 1, once the
    machine's memory ran out (not run here: 1001 shows the bound); --concurrency 100000000 was taken as given."""
    proc = cli("collect", "--golden", str(GOLDEN), "--target", "os.path:join", "--out", "run.jsonl", "--no-cache",
               *flags, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"ragmeter: error: {words}") and proc.stderr.count("\n") == 1, proc.stderr
    assert not (tmp_path / "run.jsonl").exists()


def test_ctrl_c_keeps_the_replies_a_function_gives_after_it_and_the_rerun_asks_only_the_rest(tmp_path):
    """A sync function's calls in flight at Ctrl-C cannot be stopped: the process waited for them at exit, then
    threw their replies away, and the rerun called the function again for those cases (paid twice)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from collect_helpers import PYTHON_DIR

    (tmp_path / "slowrag.py").write_text(
        "import time\n"
        "def ask(case):\n"
        "    with open('calls.log', 'a') as f:\n"
        "        f.write('start ' + case['id'] + '\\n')\n"
        "    time.sleep(0.5)\n"
        "    with open('calls.log', 'a') as f:\n"
        "        f.write('end ' + case['id'] + '\\n')\n"
        "    return {'answer': 'about ' + case['id'], 'retrieved': [{'file': 'a.md', 'text': 't'}]}\n")
    args = ["collect", "--golden", str(GOLDEN), "--target", "slowrag:ask", "--out", "run.jsonl", "--cache",
            "c.sqlite", "--concurrency", "3"]
    env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR)}
    proc = subprocess.Popen([sys.executable, "-m", "ragmeter", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    log = tmp_path / "calls.log"
    deadline = time.monotonic() + 60
    while (not log.exists() or log.read_text().count("start") < 5) and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 130 and "Traceback" not in err and "waiting up to" in err, err
    assert not (tmp_path / "run.jsonl").exists()  # nothing half-written
    first = log.read_text().split("\n")
    returned = [line.split()[1] for line in first if line.startswith("end ")]
    in_flight = [i for i in (line.split()[1] for line in first if line.startswith("start ")) if i not in returned]
    assert not in_flight  # the process waited for every call it started
    rerun = cli(*args, cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stderr
    again = [line.split()[1] for line in log.read_text().split("\n")[len(first) - 1:] if line.startswith("start ")]
    assert not set(again) & set(returned), sorted(set(again) & set(returned))  # no reply paid for twice
    assert sorted(again + returned) == sorted(golden_ids())
    rows = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert [r["answer"] for r in rows] == [f"about {i}" for i in golden_ids()]


class _Redirector(LoopbackApp):
    """A loopback server whose ``/old`` redirects (307) to ``location`` and whose ``/ask`` answers a run record;
    it records the X-Api-Key header of every request."""

    def __init__(self, location=None):
        self.location, self.keys = location, []
        super().__init__(self._routes)

    def _routes(self, app):
        from aiohttp import web

        async def old(request):
            self.keys.append(request.headers.get("X-Api-Key"))
            raise web.HTTPTemporaryRedirect(self.location or f"http://127.0.0.1:{self.port}/ask")

        async def ask(request):
            self.keys.append(request.headers.get("X-Api-Key"))
            payload = await request.json()
            return web.json_response({"answer": f"about {payload['id']}", "retrieved": [{"file": "a.md", "text": "t"}]})

        app.router.add_post("/old", old)
        app.router.add_post("/ask", ask)


def test_a_redirect_to_another_host_never_carries_the_headers_there(tmp_path):
    """A 307 to another host was followed with every header but Authorization (aiohttp drops that one only):
    an X-Api-Key went to whatever host the redirect named. A redirect on the same host is still followed."""
    key = "sk-secret-0123456789"
    with _Redirector() as other, _Redirector(location=None) as same:
        with _Redirector(location=f"http://localhost:{other.port}/ask") as system:
            write_target(tmp_path / "t.toml", f"http://127.0.0.1:{system.port}/old",
                         'headers = { X-Api-Key = "${RAG_KEY}" }\n')
            proc = cli("collect", "--golden", str(GOLDEN), "--target", "t.toml", "--out", "run.jsonl",
                       "--no-cache", cwd=tmp_path, env={"RAG_KEY": key})
        write_target(tmp_path / "same.toml", f"http://127.0.0.1:{same.port}/old",
                     'headers = { X-Api-Key = "${RAG_KEY}" }\n')
        followed = cli("collect", "--golden", str(GOLDEN), "--target", "same.toml", "--out", "same.jsonl",
                       "--no-cache", cwd=tmp_path, env={"RAG_KEY": key})
    assert key not in other.keys, other.keys
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("ragmeter: error: t.toml: ") and f"localhost:{other.port}/ask" in proc.stderr \
        and "another host" in proc.stderr and proc.stderr.count("\n") == 1 and key not in proc.stderr, proc.stderr
    assert not (tmp_path / "run.jsonl").exists()
    assert followed.returncode == 0, followed.stderr
    assert same.keys and set(same.keys) == {key}  # the same host: followed, with the headers


def _collect_with_target_lines(tmp_path, lines):
    """``ragmeter collect`` with a target file holding ``lines`` beside its url: (the process, requests sent)."""
    with RagServer() as s:
        write_target(tmp_path / "t.toml", s.url, lines)
        proc = cli("collect", "--golden", str(GOLDEN), "--target", "t.toml", "--out", "run.jsonl", "--no-cache",
                   cwd=tmp_path)
        return proc, sum(s.requests.values())


@pytest.mark.parametrize("body, shown", [('{ id = "{id}", question = "{questoin}" }', "'{questoin}'"),
                                         ('{ query = "{Question}", top_k = 5 }', "'{Question}'"),
                                         ('{ query = "what is it", filters = { team = "{category}" } }', None)])
def test_a_body_that_never_sends_the_question_is_refused_before_any_call(tmp_path, body, shown):
    """A body template without {question} (a typo in the placeholder, or none) sent the same request for every
    case: the run measured one question asked 51 times, exit 0."""
    proc, sent = _collect_with_target_lines(tmp_path, f"body = {body}\n")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("ragmeter: error: t.toml: body: ") and "{question}" in proc.stderr and \
        proc.stderr.count("\n") == 1, proc.stderr
    assert shown is None or shown in proc.stderr, proc.stderr
    assert sent == 0 and not (tmp_path / "run.jsonl").exists()


@pytest.mark.parametrize("name", ['"Bad Header"', '"X-Key:"', '""'])
def test_a_header_name_no_request_can_carry_is_refused_naming_it(tmp_path, name):
    """A header name with a space or a colon was sent as it is: a strict server answered 400 on the first case
    ('the system rejected the request'), a lenient one may read another header."""
    proc, sent = _collect_with_target_lines(tmp_path, f'headers = {{ {name} = "value-of-it" }}\n')
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"ragmeter: error: t.toml: headers.{name.strip(chr(34))}: not a header name") \
        and proc.stderr.count("\n") == 1, proc.stderr
    assert sent == 0


@pytest.mark.parametrize("spec, words", [("myrag.ask", "no such target file, and not module:function"),
                                         ("myrag:", "no such target file, and not module:function"),
                                         ("myrag:aks", "myrag has no aks (did you mean ask?)")])
def test_a_misspelt_module_function_target_says_what_was_meant(tmp_path, spec, words):
    """``myrag.ask`` (a dot for the colon) said only 'no such target file', as if a TOML file were meant; a
    misspelt function name gave no hint of the one the module has."""
    (tmp_path / "myrag.py").write_text("def ask(case):\n    return {'answer': 'a', 'retrieved': []}\n")
    proc = cli("collect", "--golden", str(GOLDEN), "--target", spec, "--out", "run.jsonl", "--no-cache",
               cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert words in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_a_stopped_run_keeps_the_replies_already_on_their_way_as_the_judge_does(tmp_path):
    """A stop (here a refused key on one case) cancelled the requests in flight at once: the system answered
    them, and the rerun asked them again. The judge gives them a grace to come back and caches them; so does
    collect now (not when the system is unreachable)."""
    ids = golden_ids()
    slow = ids[1:3]
    with RagServer(script={**{i: ["timeout"] for i in slow}, ids[3]: [401]}, timeout_sleep=1.0) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        with pytest.raises(ragmeter.collect.CollectStopped, match="HTTP 401"):
            ragmeter.collect(GOLDEN, target=target, cache=tmp_path / "c.sqlite", concurrency=3, policy=FAST)
        asked = dict(s.requests)
        assert all(asked[i] == 1 for i in slow)
        result = ragmeter.collect(GOLDEN, target=target, cache=tmp_path / "c.sqlite", concurrency=3, policy=FAST)
    again = {i: s.requests[i] - asked.get(i, 0) for i in ids}
    assert [i for i in slow if again[i]] == []  # answered while the run stopped: cached, not asked again
    assert not result.incomplete and result.summary["n_cached"] >= 1 + len(slow)


@pytest.mark.parametrize("rpm", ["1e-300", "0.01"])
def test_an_rpm_that_would_never_send_the_second_case_is_refused(tmp_path, rpm):
    """--rpm 1e-300 passed the > 0 check and hung after the first case (its next request was due in 1e300
    minutes) until killed, nothing written."""
    proc = cli("collect", "--golden", str(GOLDEN), "--target", "os.path:join", "--out", "run.jsonl", "--no-cache",
               "--rpm", rpm, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("ragmeter: error: --rpm: must be at least 0.1 (one request every 10 minutes)") \
        and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.parametrize("record,field", [
    ({"retrieval_mode": {"x": 1}}, "retrieval_mode"),
    ({"retrieved": [{"file": "a.md", "chunk_id": {"k": 1}, "text": "t", "score": 0.5}]}, "chunk_id"),
    ({"retrieved": [{"file": "a.md", "chunk_id": ["c", 1], "text": "t", "score": 0.5}]}, "chunk_id"),
])
def test_an_object_where_a_text_belongs_is_refused_as_score_would_refuse_it(record, field):
    # before: written as its printed form ("{'x': 1}"), exit 0; `score` refuses the same record as given
    reply = {"answer": "a", "retrieved": [{"file": "a.md", "chunk_id": "c1", "text": "t", "score": 0.5}], **record}
    with pytest.raises(InputError, match=rf"not a run record: .*{field}.* must be a string, got an? (object|list)"):
        ragmeter.collect(GOLDEN, target=lambda case: reply)


def test_a_number_where_a_text_belongs_is_still_written_as_text(tmp_path):
    reply = {"answer": 42, "retrieval_mode": "hybrid",
             "retrieved": [{"file": "a.md", "chunk_id": 7, "text": "t", "score": 0.5}]}
    result = ragmeter.collect(GOLDEN, target=lambda case: reply, out=tmp_path / "run.jsonl")
    first = result.records[0]
    assert first["retrieved"][0]["chunk_id"] == "7" and first["answer"] == "42" and not result.incomplete


def test_ctrl_c_gives_the_http_calls_in_flight_time_to_come_back_and_the_rerun_asks_only_the_rest(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from collect_helpers import PYTHON_DIR

    with RagServer(delay=1.0) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR)}
        args = [sys.executable, "-m", "ragmeter", "collect", "--golden", str(GOLDEN), "--target", str(target),
                "--out", "run.jsonl", "--cache", "c.sqlite", "--concurrency", "2"]
        proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        deadline = time.monotonic() + 60
        while sum(s.requests.values()) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)  # two requests of a second each are on their way
        err = proc.communicate(timeout=60)[1]
        assert proc.returncode == 130 and "Traceback" not in err and "waiting up to" in err, err
        rerun = subprocess.run(args[:-1] + ["8"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stderr
        asked = sum(s.requests.values())
    # before: the two in flight were cancelled at once, their answers lost, and the rerun asked them again
    assert asked == len(golden_ids()), asked


def test_a_function_raising_the_same_error_case_after_case_stops_the_run():
    calls = []

    def ask(case):
        calls.append(case["id"])
        raise RuntimeError("RAG_API_KEY is not set")

    # before: called for all 51 cases, each failing the same way (exit 3), however long each call took
    with pytest.raises(InputError, match=r"raised the same error for 5 cases in a row, nothing answered between "
                                         r"\(RuntimeError: RAG_API_KEY is not set\)"):
        ragmeter.collect(GOLDEN, target=ask, concurrency=1)
    assert len(calls) == 5


def test_a_function_failing_on_some_cases_only_fails_those_cases():
    def ask(case):
        if sum(map(ord, case["id"])) % 2:
            raise ValueError(f"no document for {case['id']}")  # a different message each time, and answers between
        return {"answer": "a", "retrieved": [{"file": "a.md", "text": "t"}]}

    result = ragmeter.collect(GOLDEN, target=ask, concurrency=1)
    failed = [r for r in result.records if "error" in r]
    assert 0 < len(failed) < len(result.records) and result.incomplete


def test_ctrl_c_without_a_cache_does_not_wait_for_answers_it_could_not_keep(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from collect_helpers import PYTHON_DIR

    with RagServer(delay=5.0) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR)}
        proc = subprocess.Popen([sys.executable, "-m", "ragmeter", "collect", "--golden", str(GOLDEN), "--target",
                                 str(target), "--out", "run.jsonl", "--no-cache", "--concurrency", "2"], cwd=tmp_path,
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while sum(s.requests.values()) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)  # two requests of five seconds each on their way, and nowhere to keep them
        err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 130 and "Traceback" not in err and "waiting" not in err, err
