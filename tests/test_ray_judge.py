"""ragmeter.ray.judge_dataset on a local Ray cluster (started on loopback by the test, stopped after) against the
scripted judge server; skipped without ray (CI installs it)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

if os.environ.get("CI", "") not in ("", "0", "false"):
    import ray  # CI installs it (scripts/test.sh): a missing Ray fails there instead of skipping
else:
    ray = pytest.importorskip("ray", reason="ray is not installed (RAGMETER_RAY=1 bash scripts/test.sh installs it)")

sys.path.insert(0, str(Path(__file__).parent / "judge"))

from fakeserver import FakeServer  # noqa: E402

from ragmeter.errors import InputError  # noqa: E402
from ragmeter.judge import JudgeConfig, RetryPolicy, metric, run_sync  # noqa: E402
from ragmeter.judge.stop import JudgeStopped  # noqa: E402
from ragmeter.ray import judge_dataset  # noqa: E402

# the test's custom metric runs in Ray's worker processes, which cannot import this module: ship it by value
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

FAST_RETRY = RetryPolicy(max_attempts=5, base_delay=0.01, max_delay=0.05, max_retry_after=2.0)
DRIVER_PID = os.getpid()
#: columns that differ between a run and its replay from the cache (wall time, what was served, what was paid)
RUN_DEPENDENT = ["latency_ms", "attempt_log", "cached", "cached_calls", "calls", "attempts", "prompt_tokens",
                 "completion_tokens", "cost_usd"]


@pytest.fixture()
def server():
    s = FakeServer(timeout_sleep=1.0)
    s.start()
    yield s
    s.stop()


def cases(n):
    return [{"id": f"c{i:02d}", "question": f"What colour is item {i}?", "reference_answer": f"Item {i} is blue",
             "answer": f"Item {i} is blue. It ships in {i} days." if i % 3 else f"Item {i} is red.",
             "contexts": ["noise", f"useful: item {i} is blue", "useful: more"], "category": "fact" if i % 2 else "x",
             "cost": 0.001} for i in range(n)]


def config(server, cache, **kw):
    base = dict(base_url=server.base_url, model="gpt-4o-mini", cache=cache, retry=FAST_RETRY, timeout=2.0,
                concurrency=4, api_key="sk-unused", metrics=("correctness", "faithfulness"))
    base.update(kw)
    return JudgeConfig(**base)


def summary_numbers(summary):
    """The per-metric aggregates (counts, means, costs) without the latency percentiles."""
    return {m: {k: v for k, v in entry.items() if not k.startswith("latency")}
            for m, entry in summary["metrics"].items()}


def test_rows_equal_the_single_machine_run_and_a_rerun_sends_nothing(ray_cluster, server, tmp_path):
    data = cases(24)
    single = run_sync(data, config(server, tmp_path / "single.sqlite"))
    sent_single = server.requests
    ds = ray.data.from_arrow([pl.DataFrame(data[i:i + 8]).to_arrow() for i in (0, 8, 16)])
    res = judge_dataset(ds, config(server, tmp_path / "ray.sqlite"), workers=2, batch_size=5)
    assert server.requests - sent_single == sent_single  # every call once, none twice
    assert_frame_equal(res.frame().drop("latency_ms", "attempt_log"), single.frame().drop("latency_ms", "attempt_log"))
    assert summary_numbers(res.summary) == summary_numbers(single.summary)
    for key in ("n_cases", "n_rows", "incomplete", "calls", "requests", "prompt_tokens", "completion_tokens",
                "judge_cost_usd", "system_cost_usd"):
        assert res.summary[key] == single.summary[key], key
    assert res.summary["usage_estimated_requests"] == single.summary["usage_estimated_requests"] == 0
    assert res.summary["ray"]["batches"] == 3 * 2  # 3 blocks of 8 rows, cut in 5 + 3
    assert res.summary["ray"]["retried"] == []

    before = server.requests
    again = judge_dataset(ds, config(server, tmp_path / "ray.sqlite"), workers=2, batch_size=5)
    assert server.requests == before  # every reply is replayed from the controller's cache
    assert again.frame()["cached"].all() and again.summary["calls"] == 0
    assert_frame_equal(again.frame().drop(RUN_DEPENDENT), res.frame().drop(RUN_DEPENDENT))


def test_replies_without_usage_are_counted_as_estimated_across_workers(ray_cluster, server, tmp_path):
    # before: a Ray run's summary said None (not counted) where a single-machine run counts the replies whose
    # tokens, and so cost, are estimates
    no_usage = {"status": 200, "body": json.dumps({"choices": [{"message": {"content": '{"reason": "ok", "score": 5, "correct": true}'},
                                                                "finish_reason": "stop"}]})}
    server.rules = [(lambda info: "item 3?" in json.dumps(info.get("payload")) or
                     "item 11?" in json.dumps(info.get("payload")), no_usage)]
    cfg = dict(metrics=("correctness",))
    single = run_sync(cases(16), config(server, tmp_path / "single.sqlite", **cfg))
    res = judge_dataset(cases(16), config(server, tmp_path / "ray.sqlite", **cfg), workers=2, batch_size=4)
    assert single.summary["usage_estimated_requests"] == 2
    assert res.summary["usage_estimated_requests"] == 2
    assert res.summary["judge_cost_usd"] == single.summary["judge_cost_usd"]


def test_one_concurrency_ceiling_holds_across_two_workers(ray_cluster, server, tmp_path):
    server.latency = 0.05
    res = judge_dataset(cases(24), config(server, tmp_path / "c.sqlite", concurrency=3, metrics=("correctness",)),
                        workers=2, batch_size=6)
    assert res.frame()["status"].to_list() == ["ok"] * 24
    # each worker alone would allow 3 in flight (6 together): the server never sees more than 3
    assert 2 <= server.max_in_flight <= 3
    assert res.summary["ray"]["max_requests_in_flight"] <= 3


def test_one_rpm_ceiling_holds_across_two_workers(ray_cluster, server, tmp_path):
    # rpm 120: a burst of 2, then one request every ~0.51 s for both workers together (one worker's own limiter
    # each would let 4 go at once and finish in half the time)
    res = judge_dataset(cases(10), config(server, tmp_path / "r.sqlite", rpm=120, metrics=("correctness",)),
                        workers=2, batch_size=5)
    assert res.frame()["status"].to_list() == ["ok"] * 10
    arrivals = sorted(r["t_in"] for r in server.log)
    assert len(arrivals) == 10
    first = arrivals[0]
    assert sum(t - first < 0.3 for t in arrivals) <= 2
    assert arrivals[-1] - first >= (10 - 2) * 60 / 118 * 0.85


def dying_metric(flag: Path, always: bool = False):
    """A custom metric that kills its Ray worker process when it scores case c03 (after the reply is paid for and
    cached): the first time only, or ``always``. Built in a function: the flag travels with it to the workers."""

    @metric(name="dies_once", prompt='Rate "answer". Schema: {"score": <integer>}', schema={"score": int},
            fields=("answer",))
    def dies_once(reply, case):
        if case.id == "c03" and os.getpid() != DRIVER_PID and (always or not flag.exists()):
            flag.write_text("died")
            os._exit(1)
        return reply["score"] / 5

    return dies_once


def test_a_worker_that_dies_mid_batch_loses_no_row_and_pays_nothing_twice(ray_cluster, server, tmp_path):
    flag = tmp_path / "died.flag"
    cfg = config(server, tmp_path / "d.sqlite", metrics=("correctness", dying_metric(flag)), concurrency=2)
    res = judge_dataset(cases(12), cfg, workers=2, batch_size=6, retries=1)
    assert flag.exists()
    frame = res.frame()
    assert frame.height == 12 * 2 and frame.select("id", "metric").is_unique().all()
    assert frame["status"].to_list() == ["ok"] * 24
    assert [r["batch"] for r in res.summary["ray"]["retried"]] == [1]
    assert "ActorDiedError" in res.summary["ray"]["retried"][0]["errors"][0]  # its worker actor died
    # the reply whose scoring killed the worker had been committed: the retry replayed it
    dying = [r for r in server.log if r["task"] == "custom-dies-once" and "Item 3 is red" in json.dumps(r["payload"])]
    assert len(dying) == 1
    assert frame.filter((pl.col("id") == "c03") & (pl.col("metric") == "dies_once"))["cached"].to_list() == [True]
    # every call of the run is now in the cache: a rerun sends none
    before = server.requests
    again = judge_dataset(cases(12), cfg, workers=2, batch_size=6)
    assert server.requests == before
    assert_frame_equal(again.frame().drop(RUN_DEPENDENT), frame.drop(RUN_DEPENDENT))


def test_a_worker_that_keeps_dying_stops_the_run_naming_its_batch(ray_cluster, server, tmp_path):
    cfg = config(server, tmp_path / "k.sqlite", metrics=(dying_metric(tmp_path / "flag", always=True),))
    with pytest.raises(JudgeStopped, match=r"batch 1 of 2 \(records 0-5, first id 'c00'\): its worker died 2 times"
                                           r".*replies of this run are in the cache") as caught:
        judge_dataset(cases(12), cfg, workers=1, batch_size=6, retries=1)
    assert caught.value.kind == "worker_died"


def test_a_block_whose_schema_differs_names_the_batch_before_any_call(ray_cluster, server, tmp_path):
    good = pl.DataFrame(cases(4)).to_arrow()
    other = pl.DataFrame(cases(8)[4:]).rename({"answer": "response"}).to_arrow()
    ds = ray.data.from_arrow([good, other])
    with pytest.raises(InputError, match=r"batch 2 of 2 \(rows 0-3 of block 1, first id 'c04'\): its columns differ "
                                         r"from batch 1's; missing 'answer'; not in batch 1: 'response'"):
        judge_dataset(ds, config(server, tmp_path / "s.sqlite"), workers=2, batch_size=10)
    assert server.requests == 0 and server.models_requests == 0


def test_an_id_in_two_blocks_is_refused_naming_both(ray_cluster, server, tmp_path):
    ds = ray.data.from_arrow([pl.DataFrame(cases(4)).to_arrow(), pl.DataFrame(cases(4)[2:]).to_arrow()])
    with pytest.raises(InputError, match=r"batch 2 of 2 .*id 'c02' is also in batch 1 of 2"):
        judge_dataset(ds, config(server, tmp_path / "t.sqlite"), workers=2)
    assert server.requests == 0


def test_an_unreachable_cluster_address_is_one_line(tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = ("import sys\n"
            "from ragmeter.ray import judge_dataset, score_dataset\n"
            "from ragmeter.errors import InputError\n"
            "for call in (lambda: judge_dataset([{'id': 'a', 'question': 'q', 'answer': 'a'}], model='m', cache=None,\n"
            "                                   base_url='http://127.0.0.1:9/v1', address=sys.argv[1]),\n"
            "             lambda: score_dataset(None, 'golden.jsonl', address=sys.argv[1])):\n"
            "    try:\n"
            "        call()\n"
            "    except InputError as e:\n"
            "        print('InputError:', e)\n")
    out = subprocess.run([sys.executable, "-c", code, f"127.0.0.1:{port}"], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "RAY_ADDRESS": ""})
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    assert lines == [f"InputError: ray address 127.0.0.1:{port}: no Ray cluster answers there (Connection refused); "
                     f"start one with `ray start --head` or pass the address it printed"] * 2
    assert "Traceback" not in out.stderr


def test_a_refused_key_stops_every_worker_with_its_kind(ray_cluster, server, tmp_path):
    server.rules = [(lambda info: True, 401)]
    cfg = config(server, tmp_path / "a.sqlite", metrics=("correctness",))
    with pytest.raises(JudgeStopped, match=r"batch \d of 4 \(records .*\): .*refused the API key") as caught:
        judge_dataset(cases(20), cfg, workers=2, batch_size=5)
    assert caught.value.kind == "auth"
    assert server.requests <= 2  # each running batch's first request goes alone; the refusal stops the rest


def test_one_budget_for_every_worker(ray_cluster, server, tmp_path):
    cfg = config(server, tmp_path / "b.sqlite", metrics=("correctness",), concurrency=1,
                 prices={"gpt-4o-mini": (100.0, 100.0)}, max_tokens=100, budget=0.1)
    res = judge_dataset(cases(20), cfg, workers=2, batch_size=10)
    statuses = [r["status"] for r in res.rows]
    assert "skipped" in statuses and "ok" in statuses and "failed" not in statuses
    assert all(r["error_kind"] == "budget" for r in res.rows if r["status"] == "skipped")
    # a budget per worker would let each of the two batches spend up to 0.1
    assert res.summary["budget_reached"] and res.summary["judge_cost_usd"] <= 0.1
    assert server.requests == statuses.count("ok")


def controller_killing_metric(flag: Path):
    """A custom metric that kills the run's controller actor (rate bucket, cache writer, budget) when it scores case
    c03, the first time only, and waits until it is dead; the replies in flight meanwhile reach the worker with
    nobody left to commit them."""

    @metric(name="kills_controller", prompt='Rate "answer". Schema: {"score": <integer>}', schema={"score": int},
            fields=("answer",))
    def kills_controller(reply, case):
        if case.id == "c03" and os.getpid() != DRIVER_PID and not flag.exists():
            import time

            from ragmeter.ray_judge import CONTROLLER_NAME

            flag.write_text("killed")
            name = next(n for n in ray.util.list_named_actors() if n.startswith(CONTROLLER_NAME))
            controller = ray.get_actor(name)
            ray.kill(controller)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                try:
                    ray.get(controller.state.remote(), timeout=1)
                except ray.exceptions.RayActorError:
                    break
                except ray.exceptions.GetTimeoutError:
                    pass
            time.sleep(0.3)  # the requests in flight are answered meanwhile
        return reply["score"] / 5

    return kills_controller


def test_a_controller_that_dies_stops_the_run_keeping_every_paid_reply(ray_cluster, server, tmp_path):
    from ragmeter.judge.cache import Cache

    server.latency = 0.1
    cache = tmp_path / "dead.sqlite"
    cfg = config(server, cache, metrics=("correctness", controller_killing_metric(tmp_path / "killed.flag")))
    with pytest.raises(JudgeStopped, match=r"^the rate controller actor died \(ActorDiedError: .*\); unfinished: "
                                           r"batch(es)? [0-9, -]+ of 3 \(none of their rows is returned\); \d+ paid "
                                           r"replies it had not acknowledged were written to the cache by the "
                                           r"driver; the replies committed before it died are in the cache, a rerun "
                                           r"with the same cache resumes$") as caught:
        judge_dataset(cases(18), cfg, workers=2, batch_size=6)
    assert caught.value.kind == "controller_died" and caught.value.exit_code == 2
    assert "\n" not in str(caught.value)
    paid = server.requests
    assert 0 < paid < 18 * 2
    with Cache(cache) as kept:
        assert len(kept) == paid  # every reply the endpoint sent is in the cache: the controller's and the driver's

    again = judge_dataset(cases(18), cfg, workers=2, batch_size=6)
    frame = again.frame()
    assert frame["status"].to_list() == ["ok"] * 36 and frame.select("id", "metric").is_unique().all()
    assert again.summary["calls"] == 36 - paid  # the rest is replayed, nothing is lost
    assert frame["cached"].sum() == paid
    assert server.requests == 36 and set(server.count_by_key.values()) == {1}  # nothing was sent twice


def test_sibling_clients_share_one_session_and_one_endpoint_check(server):
    """What a worker actor does for its batches (no cluster needed): one GET /models, one lone first request, one
    session that outlives the batches' clients; each batch its own statistics."""
    import asyncio

    from ragmeter.judge import Limits
    from ragmeter.judge.client import ClientConfig, JudgeClient

    server.latency = 0.05

    async def main():
        base = JudgeClient(ClientConfig(base_url=server.base_url, model="gpt-4o-mini", api_key="sk-unused"),
                           Limits(4))
        await base.check_endpoint()
        batches = [base.sibling(Limits(4)) for _ in range(2)]
        msgs = [{"role": "user", "content": "Task: correctness (prompt v1)"}, {"role": "user", "content": "{}"}]
        await asyncio.gather(*(b.chat(msgs, max_tokens=50) for b in batches for _ in range(3)))
        for b in batches:
            await b.close()
        assert base._session is not None and not base._session.closed  # the worker's session outlives them
        await base.close()
        return base, batches

    base, batches = asyncio.run(main())
    assert server.models_requests == 1 and base.stats.preflight_requests == 1
    assert [b.stats.requests for b in batches] == [3, 3] and server.requests == 6
    assert all(b.stats.preflight_requests == 0 for b in batches)
    first, *rest = sorted(server.log, key=lambda r: r["t_in"])
    assert first["t_out"] <= min(r["t_in"] for r in rest)  # one lone first request for both batches, not one each


@pytest.mark.parametrize("data, kw, message", [
    (None, {}, r"judge_dataset: expected a Ray Dataset or a list of records, got NoneType"),
    ("cases.jsonl", {}, r"judge_dataset: expected a Ray Dataset or a list of records, got str"),
    ([], {"workers": "2"}, r"workers must be a positive integer, got '2' \(a str\)"),
    ([], {"batch_size": 0}, r"batch_size must be a positive integer, got 0"),
    ([], {"retries": -1}, r"retries must be .*got -1"),
])
def test_bad_arguments_are_one_input_error_before_the_cluster(tmp_path, data, kw, message):
    # checked before the cluster is joined: one InputError, not a TypeError from inside judge_dataset
    with pytest.raises(InputError, match=message):
        judge_dataset(data, model="m", base_url="http://127.0.0.1:9/v1", cache=None, **kw)
