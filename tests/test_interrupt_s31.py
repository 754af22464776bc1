"""Interrupted and resumed runs lose nothing: no half-written results, no paid reply lost (session 31).

Each interruption lands at a known point: the scripted judge (tests/judge/fakeserver.py) answers a given number of
requests and holds every later one until released, so the signal finds the run waiting on them.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "judge"))

from fakeserver import FakeServer  # noqa: E402

PYTHON_DIR = HERE.parent / "python"
GOLDEN = PYTHON_DIR / "ragmeter" / "_example" / "golden.jsonl"
API_KEY = "sk-test-RAGMETER-SECRET-s31-0123456789"

# a Python target whose answers carry the system's version (read from the file `version` in the current folder)
VERSIONED_TARGET = """
def ask(case):
    with open('version') as f:
        version = f.read().strip()
    return {'answer': version + ' about ' + case['id'], 'retrieved': [{'file': 'a.md', 'text': 't'}]}
"""


@pytest.fixture()
def judge_server():
    server = FakeServer(api_key=API_KEY).start()
    yield server
    server.stop()


def _ragmeter(args: list, cwd: Path, **popen) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR), "RAGMETER_API_KEY": API_KEY}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.Popen([sys.executable, "-m", "ragmeter", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)


def _finish(proc: subprocess.Popen) -> tuple:
    out, err = proc.communicate(timeout=120)
    assert "Traceback" not in err, err
    return proc.returncode, out, err


def _interrupt_once_held(proc: subprocess.Popen, server: FakeServer, answered: int, sig: int) -> None:
    """Send ``sig`` once the server holds a request beyond the first ``answered`` (it answers those, holds the
    rest): the run is then waiting on the held calls, whatever the timing."""
    while server.requests <= answered:
        if proc.poll() is not None:
            pytest.fail(f"the run ended before the interrupt: {proc.communicate()[1]}")
        time.sleep(0.02)  # the server thread moves the counter
    os.kill(proc.pid, sig)


def _digests(folder: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


# -- eval --target: the folder's run.jsonl is the run its results measured, whatever stops the judging ---------------
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_eval_target_stopped_while_judging_leaves_the_previous_folder_as_it_was(tmp_path, judge_server, sig, code):
    (tmp_path / "versioned_rag.py").write_text(VERSIONED_TARGET)
    args = ["eval", "--golden", str(GOLDEN), "--target", "versioned_rag:ask", "--out", "out", "--cache", "c.sqlite",
            "--base-url", judge_server.base_url, "--model", "gpt-4o-mini", "--metrics", "correctness",
            "--no-progress", "--timeout", "5", "--retry-base-delay", "0.01", "--retry-max-delay", "0.05"]
    (tmp_path / "version").write_text("v1")
    first, _, err = _finish(_ragmeter(args, tmp_path))
    assert first == 0, err
    previous = _digests(tmp_path / "out")

    (tmp_path / "version").write_text("v2")  # the system changed: its answers are asked again
    (tmp_path / "collect.sqlite").unlink()
    answered = 5
    judge_server.requests = 0
    judge_server.rules = [(lambda info: judge_server.requests > answered, "hang")]
    proc = _ragmeter(args, tmp_path)
    _interrupt_once_held(proc, judge_server, answered, sig)
    got, _, err = _finish(proc)
    assert got == code, err
    # before: OUT/run.jsonl held the v2 answers beside the v1 results measured on v1's: `report` read it as whole
    assert _digests(tmp_path / "out") == previous, err
    assert "a rerun with the same --cache resumes" in err.strip().splitlines()[-1]

    judge_server.rules = []
    judge_server.release()
    judge_server.requests = 0
    again, _, err = _finish(_ragmeter(args, tmp_path))
    assert again == 0, err
    run_file = tmp_path / "out" / "run.jsonl"
    assert all(json.loads(line)["answer"].startswith("v2 ") for line in run_file.read_text().splitlines())
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["inputs"]["run"]["sha256"] == hashlib.sha256(run_file.read_bytes()).hexdigest()
    judged = summary["judge"]["metrics"]["correctness"]["n_scored"]
    assert judge_server.requests == judged - answered  # the replies kept at the interrupt are not paid again
    assert not [p.name for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]  # nothing left behind


def test_eval_target_killed_while_judging_gets_its_previous_run_file_back_on_the_next_eval(tmp_path):
    """kill -9 leaves no chance to put the run file back: the copy it kept (.run.jsonl.previous) is put back by the
    next eval --target when the folder's summary.json measured it."""
    import socket

    (tmp_path / "versioned_rag.py").write_text(VERSIONED_TARGET)
    args = ["eval", "--golden", str(GOLDEN), "--target", "versioned_rag:ask", "--out", "out", "--no-cache"]
    (tmp_path / "version").write_text("v1")
    first, _, err = _finish(_ragmeter(args + ["--no-judge"], tmp_path))
    assert first == 0, err
    out = tmp_path / "out"
    previous = _digests(out)
    # what a run killed while judging leaves: the previous run file kept aside, the new one in its place
    os.link(out / "run.jsonl", out / ".run.jsonl.previous")
    (out / "run.jsonl").unlink()
    (out / "run.jsonl").write_text((out / ".run.jsonl.previous").read_text().replace('"v1 ', '"v2 '))
    with socket.socket() as sock:  # a judge endpoint nothing listens on: the next eval stops, exit 2
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    (tmp_path / "version").write_text("v3")
    got, _, err = _finish(_ragmeter(args + ["--base-url", closed, "--model", "m", "--no-progress"], tmp_path))
    assert got == 2, err
    assert _digests(out) == previous, err
    assert not (out / ".run.jsonl.previous").exists()


# -- ragmeter.evaluate() from Python: the KeyboardInterrupt says what was kept, as the CLI's last line does -----------
EVALUATE_SCRIPT = """
import sys
import ragmeter
from ragmeter.judge import JudgeConfig

config = JudgeConfig(base_url=sys.argv[1], model="gpt-4o-mini", metrics=["correctness"], cache=sys.argv[2],
                     timeout=5)
try:
    result = ragmeter.evaluate(sys.argv[3], sys.argv[4], judge=config)
except KeyboardInterrupt as exc:
    print("KeyboardInterrupt: " + str(exc))
    sys.exit(130)
print("correctness", result.summary["judge"]["metrics"]["correctness"]["mean"])
"""


def test_evaluate_interrupted_from_python_says_what_was_kept_and_the_rerun_pays_only_the_rest(tmp_path, judge_server):
    import sqlite3

    (tmp_path / "evaluate_script.py").write_text(EVALUATE_SCRIPT)
    run = GOLDEN.with_name("run.jsonl")
    args = ["evaluate_script.py", judge_server.base_url, "c.sqlite", str(GOLDEN), str(run)]
    env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR), "RAGMETER_API_KEY": API_KEY}
    answered = 5
    judge_server.rules = [(lambda info: judge_server.requests > answered, "hang")]
    proc = subprocess.Popen([sys.executable, *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _interrupt_once_held(proc, judge_server, answered, signal.SIGINT)
    code, out, err = _finish(proc)
    assert code == 130, err
    with sqlite3.connect(tmp_path / "c.sqlite") as conn:
        cached = conn.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0]
    assert cached == answered
    # before: a bare KeyboardInterrupt(), nothing said of the replies kept in the cache
    assert f"{answered} replies are cached in c.sqlite" in out and "a rerun with the same" in out, out

    judge_server.rules = []
    judge_server.release()
    judge_server.requests = 0
    again = subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0, again.stderr
    paid_by_the_rerun = judge_server.requests
    uninterrupted = subprocess.run([sys.executable, *args[:2], "fresh.sqlite", *args[3:]], cwd=tmp_path, env=env,
                                   capture_output=True, text=True, timeout=120)
    assert again.stdout == uninterrupted.stdout  # the same numbers as a run never interrupted
    assert paid_by_the_rerun == judge_server.requests - paid_by_the_rerun - answered  # none paid twice


# -- eval --run: Ctrl-C, SIGTERM, the endpoint going away: the previous folder stays, the rerun pays the rest ---------
def _judge_numbers(summary: dict) -> dict:
    return {name: {k: m.get(k) for k in ("mean", "n_scored", "n_failed", "n_skipped")}
            for name, m in summary["judge"]["metrics"].items()}


@pytest.mark.parametrize("interruption,code", [("SIGINT", 130), ("SIGTERM", 143), ("endpoint killed", 2)])
def test_eval_interrupted_keeps_the_previous_folder_a_healthy_cache_and_the_rerun_pays_only_the_rest(
        tmp_path, judge_server, interruption, code):
    run = GOLDEN.with_name("run.jsonl")

    def eval_args(cache: str) -> list:
        return ["eval", "--golden", str(GOLDEN), "--run", str(run), "--out", "out", "--cache", cache,
                "--base-url", judge_server.base_url, "--model", "gpt-4o-mini", "--metrics", "correctness,faithfulness",
                "--no-progress", "--timeout", "5", "--retry-base-delay", "0.01", "--retry-max-delay", "0.05"]

    first, _, err = _finish(_ragmeter(eval_args("uninterrupted.sqlite"), tmp_path))
    assert first == 0, err
    paid_uninterrupted = judge_server.requests
    previous = _digests(tmp_path / "out")
    reference = _judge_numbers(json.loads((tmp_path / "out" / "summary.json").read_text()))

    answered = 7
    judge_server.requests = 0
    judge_server.rules = [(lambda info: judge_server.requests > answered, "hang")]
    proc = _ragmeter(eval_args("c.sqlite"), tmp_path)
    if interruption == "endpoint killed":
        while judge_server.requests <= answered:
            time.sleep(0.02)
        port = judge_server.port
        judge_server.kill()
    else:
        _interrupt_once_held(proc, judge_server, answered, getattr(signal, interruption))
    got, _, err = _finish(proc)
    assert got == code, err
    assert _digests(tmp_path / "out") == previous  # nothing half-written, the previous results untouched
    last = err.strip().splitlines()[-1]
    assert f"{answered} replies" in last and "a rerun with the same --cache resumes" in last, last
    if interruption == "SIGTERM":  # before: "ragmeter: interrupted: waiting up to 5 s ...", then "terminated"
        assert "interrupted" not in err and "waiting up to 5 s" in err, err
    repair = _ragmeter(["cache", "repair", "c.sqlite"], tmp_path)
    repaired, said, _ = _finish(repair)
    assert repaired == 0 and "a healthy cache (7 entries): nothing to repair" in " ".join(said.split()), said
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert API_KEY.encode() not in path.read_bytes(), path

    if interruption == "endpoint killed":
        judge_server.start(port)  # the endpoint is back where it was
    judge_server.rules = []
    judge_server.release()
    judge_server.requests = 0
    again, _, err = _finish(_ragmeter(eval_args("c.sqlite"), tmp_path))
    assert again == 0, err
    assert judge_server.requests == paid_uninterrupted - answered  # no reply paid twice
    assert _judge_numbers(json.loads((tmp_path / "out" / "summary.json").read_text())) == reference


# -- collect: SIGTERM (a CI runner's time-out) and the system going away mid-run ----------------------------------
# a Python target answering the first three calls, then holding every later one until the file `go` appears
GATED_TARGET = """
import os, time
def ask(case):
    with open('calls.log', 'a') as f:
        f.write('start ' + case['id'] + '\\n')
    with open('calls.log') as f:
        nth = f.read().count('start')
    while nth > 3 and not os.path.exists('go'):
        time.sleep(0.01)
    with open('calls.log', 'a') as f:
        f.write('end ' + case['id'] + '\\n')
    return {'answer': 'about ' + case['id'], 'retrieved': [{'file': 'a.md', 'text': 't'}]}
"""


def _golden_ids() -> list:
    return [json.loads(line)["id"] for line in GOLDEN.read_text(encoding="utf-8").splitlines()
            if line.startswith("{")]


def _logged(words: list, event: str) -> list:
    """The case ids of ``event`` ("start" or "end") in the words of calls.log."""
    return [case_id for word, case_id in zip(words[::2], words[1::2]) if word == event]


def test_collect_terminated_keeps_every_answer_and_the_rerun_asks_only_the_rest(tmp_path):
    (tmp_path / "gated_rag.py").write_text(GATED_TARGET)
    args = ["collect", "--golden", str(GOLDEN), "--target", "gated_rag:ask", "--out", "run.jsonl", "--cache",
            "c.sqlite", "--concurrency", "2"]
    proc = _ragmeter(args, tmp_path)
    log = tmp_path / "calls.log"
    while not log.exists() or log.read_text().count("start") < 5:  # three answered, two held
        if proc.poll() is not None:
            pytest.fail(proc.communicate()[1])
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    (tmp_path / "go").touch()  # the two held calls come back during the grace the run gives them
    code, _, err = _finish(proc)
    assert code == 143, err
    assert err.strip().splitlines()[-1].startswith("ragmeter: terminated: ") and "a rerun resumes" in err
    assert "interrupted" not in err and "waiting up to 10 s" in err, err  # a CI log says what stopped it
    assert not (tmp_path / "run.jsonl").exists()  # nothing half-written
    first = log.read_text().split()
    answered = _logged(first, "end")
    assert len(answered) == 5
    again, _, err = _finish(_ragmeter(args, tmp_path))
    assert again == 0, err
    asked_again = _logged(log.read_text().split()[len(first):], "start")
    assert not set(asked_again) & set(answered)  # no reply paid for twice
    assert sorted(asked_again + answered) == sorted(_golden_ids())


def test_collect_whose_system_goes_away_keeps_the_answers_and_the_rerun_asks_only_the_rest(tmp_path):
    sys.path.insert(0, str(HERE / "collect"))
    from ragserver import RagServer

    ids = _golden_ids()
    server = RagServer(script={case_id: ["hang"] for case_id in ids[4:]}).start()
    try:
        (tmp_path / "t.toml").write_text(f'url = "{server.url}"\n')
        args = ["collect", "--golden", str(GOLDEN), "--target", "t.toml", "--out", "run.jsonl", "--cache",
                "c.sqlite", "--concurrency", "1", "--timeout", "5"]
        proc = _ragmeter(args, tmp_path)
        while sum(server.requests.values()) < 5:  # four answered, the fifth held
            if proc.poll() is not None:
                pytest.fail(proc.communicate()[1])
            time.sleep(0.01)
        port = server.port
        server.kill()
        code, _, err = _finish(proc)
        assert code == 2, err
        assert "stopped after" in err and "4 answered, cached: a rerun asks only the rest" in err, err
        assert not (tmp_path / "run.jsonl").exists()
        server.start(port)  # the system is back where it was
        server.release()
        asked_before = dict(server.requests)
        again, _, err = _finish(_ragmeter(args, tmp_path))
        assert again == 0, err
        asked_again = {i: n - asked_before.get(i, 0) for i, n in server.requests.items() if n - asked_before.get(i, 0)}
    finally:
        server.stop()
    assert sorted(asked_again) == sorted(ids[4:]) and set(asked_again.values()) == {1}  # none of the 4 asked twice


# -- kill -9 while the results are moved into place: never a mix that report or compare reads as one run --------------
KILLED_WHILE_MOVING = """
import os, signal, sys
import ragmeter._io as io
from ragmeter.cli import main

real_move = io._move_into_place

def move_then_die(tmp, out, name):
    real_move(tmp, out, name)
    if out.name == "out":  # the first new file is in the results folder, the others are not
        os.kill(os.getpid(), signal.SIGKILL)

io._move_into_place = move_then_die
sys.exit(main(sys.argv[1:]))
"""


def test_eval_killed_while_moving_its_results_into_place_leaves_no_folder_read_as_complete(tmp_path):
    (tmp_path / "killed_while_moving.py").write_text(KILLED_WHILE_MOVING)
    run = GOLDEN.with_name("run.jsonl")
    args = ["eval", "--golden", str(GOLDEN), "--run", str(run), "--out", "out", "--no-judge"]
    first, _, err = _finish(_ragmeter(args + ["--k", "3"], tmp_path))
    assert first == 0, err
    previous = _digests(tmp_path / "out")
    env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR)}
    killed = subprocess.run([sys.executable, "killed_while_moving.py", *args, "--k", "5"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    if _digests(tmp_path / "out") == previous:
        return  # the previous results, whole
    # before: cases.parquet of the k=5 run beside summary.json of the k=3 one, and `report` wrote a report of the mix
    report, _, err = _finish(_ragmeter(["report", "out"], tmp_path))
    assert report == 2 and "not a complete ragmeter results folder: missing summary.json" in err, err


def test_the_temporary_folder_of_a_killed_run_is_removed_by_the_next_run_and_a_live_ones_is_not(tmp_path):
    (tmp_path / "killed_while_moving.py").write_text(KILLED_WHILE_MOVING)
    args = ["eval", "--golden", str(GOLDEN), "--run", str(GOLDEN.with_name("run.jsonl")), "--out", "out",
            "--no-judge"]
    env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR)}
    killed = subprocess.run([sys.executable, "killed_while_moving.py", *args], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = [p.name for p in (tmp_path / "out").iterdir() if p.name.startswith(".ragmeter-")]
    assert len(left) == 1  # the killed run's: nothing could remove it
    # a run still writing (this process stands for it) and a folder of unknown origin are not another run's litter
    from ragmeter._io import _host

    live = tmp_path / "out" / f".ragmeter-{_host()}-{os.getpid()}-live"
    unknown = tmp_path / "out" / ".ragmeter-abc123"
    for folder in (live, unknown):
        folder.mkdir()
        (folder / "cases.parquet").write_bytes(b"being written")
    done, _, err = _finish(_ragmeter(args, tmp_path))
    assert done == 0, err
    # before: the killed run's folder stayed, one more after every kill -9, each as large as the results
    after = sorted(p.name for p in (tmp_path / "out").iterdir() if p.name.startswith(".ragmeter-"))
    assert after == sorted([live.name, unknown.name]), after


def test_eval_target_whose_collection_stops_leaves_the_folder_as_it_was(tmp_path):
    (tmp_path / "versioned_rag.py").write_text(VERSIONED_TARGET)
    args = ["eval", "--golden", str(GOLDEN), "--target", "versioned_rag:ask", "--out", "out", "--no-cache",
            "--no-judge"]
    (tmp_path / "version").write_text("v1")
    first, _, err = _finish(_ragmeter(args, tmp_path))
    assert first == 0, err
    previous = _digests(tmp_path / "out")
    (tmp_path / "version").unlink()  # the system now fails on every case: collect stops, nothing replaced
    got, _, err = _finish(_ragmeter(args, tmp_path))
    assert got == 2 and "same error for 5 cases in a row" in err, err
    assert _digests(tmp_path / "out") == previous
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(previous)  # no copy left behind


# -- the clock jumping (a laptop waking up, NTP stepping it back) during a run and before its rerun ---------------
def test_a_clock_jumping_back_and_forth_changes_no_number_and_the_rerun_pays_nothing(tmp_path, judge_server,
                                                                                     monkeypatch):
    from ragmeter.judge import JudgeConfig, RetryPolicy, run_sync

    real_time = time.time
    calls = [0]

    def jumping_clock() -> float:  # an hour back, then a day ahead, by turns
        calls[0] += 1
        return real_time() + (-3600.0 if calls[0] % 2 else 86400.0)

    monkeypatch.setenv("RAGMETER_API_KEY", API_KEY)
    cases = [{"id": f"q{i}", "question": f"What colour is product {i}?", "answer": f"Product {i} is blue.",
              "reference_answer": f"Product {i} is blue", "contexts": [f"useful: product {i} is blue"]}
             for i in range(6)]
    config = JudgeConfig(base_url=judge_server.base_url, model="gpt-4o-mini", cache=tmp_path / "c.sqlite",
                         metrics=["correctness", "faithfulness"], concurrency=2,
                         retry=RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05))
    steady = run_sync(cases, config, cache=tmp_path / "steady.sqlite").frame()
    paid = judge_server.requests
    monkeypatch.setattr(time, "time", jumping_clock)
    jumped = run_sync(cases, config).frame()
    assert judge_server.requests == 2 * paid
    again = run_sync(cases, config).frame()  # the clock still jumping
    monkeypatch.setattr(time, "time", real_time)
    assert judge_server.requests == 2 * paid  # every reply replayed from the cache
    numbers = ["id", "metric", "status", "score"]
    assert jumped.select(numbers).equals(steady.select(numbers)) and again.select(numbers).equals(steady.select(numbers))


@pytest.mark.parametrize("summary", ["judge_summary.json", "summary.json"])
def test_outputs_moved_into_place_put_their_summary_last(tmp_path, monkeypatch, summary):
    """judge --out and review import move their files in as eval does: the summary last, so that a reader seeing
    the new summary sees the files it describes (a kill -9 between two moves leaves the earlier summary beside the
    earlier files, never the earlier summary over new ones)."""
    import ragmeter._io as io

    moved = []
    real_move = io._move_into_place
    monkeypatch.setattr(io, "_move_into_place", lambda tmp, out, name: (moved.append(name), real_move(tmp, out, name)))
    with io.atomic_outputs(tmp_path / "out") as tmp:
        (tmp / summary).write_text("{}\n")  # written first: before, moved first too (the folder's listing order)
        for name in ("judge.parquet", "report.md", "z.parquet"):
            (tmp / name).write_text("x")
    assert moved[-1] == summary, moved
    assert sorted(moved) == sorted([summary, "judge.parquet", "report.md", "z.parquet"])
