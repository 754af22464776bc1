"""Adaptive rate control: the pure controller under a fake clock, then the client against the scripted server.

Speed is measured in benches/judge_policies.py; these tests assert counts (requests, 429s, cuts, pauses)."""
from __future__ import annotations

import pytest

from ragmeter.judge import JudgeStopped, Limits, RetryPolicy, run_sync
from ragmeter.judge.rate import RateController


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def steady(ctl: RateController, clock: Clock, rps: float, seconds: float, throttled=lambda i, t: False) -> int:
    """Send at ``rps`` (as far as the bucket lets) for ``seconds``; answers come back at once. Returns sends."""
    sent, i, end = 0, 0, clock.t + seconds
    while clock.t < end:
        wait = ctl.reserve()
        clock.t += max(wait, 1.0 / rps)
        at = ctl.sent()
        if throttled(i, clock.t):
            ctl.throttle(at, retry_after=1.0)
        else:
            ctl.answered(at, 0.2)
        sent += 1
        i += 1
    return sent


def test_unlimited_until_the_first_throttle_then_cut_by_beta():
    clock = Clock()
    ctl = RateController(16, clock=clock)
    steady(ctl, clock, 40.0, 1.0)
    assert ctl.current_rate() is None and ctl.reserve() == 0.0
    at = ctl.sent()
    ctl.throttle(at, retry_after=1.0)
    assert ctl.cuts == 1 and ctl.throttled == 1
    # the first cut starts from the pace the concurrency allows at the latency seen (16 / 0.2 s), when higher
    # than the sends of the last second
    assert ctl.current_rate() == pytest.approx(0.7 * max(80.0, ctl.measured_rate(clock.t)), rel=0.05)


def test_throttles_of_requests_sent_before_the_cut_do_not_cut_again():
    clock = Clock()
    ctl = RateController(16, clock=clock)
    steady(ctl, clock, 40.0, 1.0)
    in_flight = [ctl.sent() for _ in range(10)]
    clock.t += 0.01
    for at in in_flight:  # ten answers of one burst: one cut, not ten
        ctl.throttle(at, retry_after=1.0)
    assert ctl.cuts == 1 and ctl.throttled == 10


def test_rate_regrows_along_the_cubic_curve_back_to_the_rate_at_the_throttle():
    clock = Clock()
    ctl = RateController(16, clock=clock, recovery=1.0)
    steady(ctl, clock, 40.0, 1.0)
    ctl.throttle(ctl.sent(), retry_after=1.0)
    w_max = ctl.current_rate() / 0.7
    steady(ctl, clock, 100.0, 0.5)
    half = ctl.current_rate()
    steady(ctl, clock, 100.0, 0.5)
    back = ctl.current_rate()
    assert 0.7 * w_max < half < back
    assert back == pytest.approx(w_max, rel=0.08)


def test_a_hidden_limit_is_learnt_and_kept():
    clock = Clock()
    ctl = RateController(16, clock=clock)
    tokens = {"n": 10.0, "t": 0.0}

    def bucket(i, t, rate=30.0):
        tokens["n"] = min(10.0, tokens["n"] + (t - tokens["t"]) * rate)
        tokens["t"] = t
        if tokens["n"] < 1:
            return True
        tokens["n"] -= 1
        return False

    steady(ctl, clock, 200.0, 2.0, bucket)       # discovery from 200 requests/s
    before = ctl.throttled
    sent = steady(ctl, clock, 200.0, 10.0, bucket)  # then 10 s of steady state
    assert ctl.undone == 0 and ctl.noise == 0.0  # a limit that depends on the load is not taken for noise
    assert sent >= 0.85 * 30 * 10
    assert (ctl.throttled - before) <= 0.1 * sent
    assert ctl.current_rate() < 45


@pytest.mark.parametrize("seed", range(12))
def test_random_throttles_never_collapse_the_rate(seed):
    # issue 17's first target at the controller's scale: 80 requests/s, 20% refused whatever the rate
    import random

    rnd = random.Random(seed)
    clock = Clock()
    ctl = RateController(16, clock=clock)
    steady(ctl, clock, 80.0, 0.2)
    sent = steady(ctl, clock, 80.0, 6.0, lambda i, t: rnd.random() < 0.2)
    assert ctl.undone >= 1 or ctl.cuts <= 2  # the cuts are undone (or there were hardly any)
    # the floor: never far below what passed (before it, one run fell to 2.8/s)
    assert ctl.min_seen is None or ctl.min_seen >= 0.2 * 80
    assert sent >= 0.6 * 80 * 6
    last = steady(ctl, clock, 80.0, 2.0, lambda i, t: rnd.random() < 0.2)
    assert last >= 0.85 * 80 * 2  # and the client is back at its own pace


def bucket_server(rate: float, burst: float):
    """A hidden token bucket (the server's): throttles whatever it cannot take, at once."""
    tokens = {"n": burst, "t": 0.0}

    def throttled(i, t):
        tokens["n"] = min(burst, tokens["n"] + (t - tokens["t"]) * rate)
        tokens["t"] = t
        if tokens["n"] < 1:
            return True
        tokens["n"] -= 1
        return False
    return throttled


@pytest.mark.parametrize("burst", [1.0, 10.0, 30.0])
def test_a_hidden_bucket_with_a_burst_is_found_with_few_throttles(burst):
    # issue 17's second target at the controller's scale: a client pacing 80/s against a hidden 30/s
    clock = Clock()
    ctl = RateController(16, clock=clock)
    steady(ctl, clock, 80.0, 0.2)  # the first answers (the client's first request goes alone)
    sent = steady(ctl, clock, 80.0, 10.0, bucket_server(30.0, burst))
    assert ctl.throttled <= 0.05 * sent, (ctl.throttled, sent)
    assert sent >= 0.85 * 30 * 10  # (a bucket without a burst refuses every overshoot: 88% here, 99% with one)
    assert ctl.undone == 0 and 27 <= ctl.limit_estimate <= 33


def test_load_independent_throttles_are_learnt_as_noise_and_the_cuts_undone():
    import random

    rnd = random.Random(3)
    clock = Clock()
    ctl = RateController(16, clock=clock)
    steady(ctl, clock, 80.0, 0.2)  # a few answers first, as the client's first request goes alone
    steady(ctl, clock, 80.0, 5.0, lambda i, t: rnd.random() < 0.2)
    assert ctl.undone >= 1 and 0.05 < ctl.noise < 0.5
    sent = steady(ctl, clock, 80.0, 4.0, lambda i, t: rnd.random() < 0.2)
    assert sent >= 0.7 * 80 * 4  # back near the client's own pace, not at the cut rate


def test_user_ceiling_caps_the_learnt_rate():
    clock = Clock()
    ctl = RateController(16, clock=clock, ceiling_rps=5.0)
    steady(ctl, clock, 5.0, 1.0)
    ctl.throttle(ctl.sent(), retry_after=1.0)
    steady(ctl, clock, 100.0, 5.0)
    assert ctl.current_rate() <= 5.0


def test_concurrency_halves_on_time_outs_and_shrinks_when_answers_queue():
    clock = Clock()
    ctl = RateController(16, clock=clock)
    for _ in range(5):
        ctl.answered(ctl.sent(), 0.2)
        clock.t += 0.05
    ctl.timed_out(ctl.sent() - 0.001)
    assert ctl.concurrency == 8 and ctl.timeouts == 1
    # latency climbing to 5x the baseline (a queue), one cut per round
    for k in range(40):
        clock.t += 0.3
        ctl.answered(ctl.sent(), 1.0)
    assert ctl.concurrency < 8 and ctl.min_concurrency >= 1
    # latency back to the baseline: regrown towards the ceiling, one per round trip
    low = ctl.concurrency
    for _ in range(200):
        clock.t += 0.05
        ctl.answered(ctl.sent(), 0.2)
    assert ctl.concurrency > low and ctl.concurrency <= 16


# -- against the scripted server --------------------------------------------------------------------------
CASES = [{"id": f"c{i}", "question": f"q{i}", "reference_answer": f"a{i}", "answer": f"a{i}"} for i in range(120)]


def judge(server, control, *, concurrency=16, timeout=10.0, cases=CASES):
    return run_sync(cases, base_url=server.base_url, model="m", metrics=["correctness"], concurrency=concurrency,
                    cache=None, rate_control=control, timeout=timeout, retry=RetryPolicy(max_attempts=8))


def test_random_429s_lose_no_case_and_pause_nobody_for_the_full_retry_after(server):
    server.latency = 0.05
    server.random_429 = 0.2
    adaptive = judge(server, "adaptive")
    assert all(r["status"] == "ok" for r in adaptive.rows) and len(adaptive.rows) == len(CASES)
    rate = adaptive.summary["rate"]
    assert rate["policy"] == "adaptive" and rate["throttled"] == server.throttled > 0
    assert rate["others_held_s"] <= 0.1 * rate["cuts"] + 1e-9  # the others held briefly, never 1 s per 429
    assert rate["cuts"] <= 2 or rate["cuts_undone"] >= 1  # cuts that did not lower the share are undone
    server.throttled = 0
    fixed = judge(server, "fixed")
    assert all(r["status"] == "ok" for r in fixed.rows)
    assert fixed.summary["rate"]["pauses"] == fixed.summary["rate"]["throttled"] == server.throttled > 0
    # the old policy stopped every request for a full second per 429, the new one for at most 0.1 s per cut
    assert rate["others_held_s"] < 0.5 * fixed.summary["rate"]["pauses"] * 1.0


def test_hidden_bucket_draws_far_fewer_429s_than_the_fixed_policy(server):
    # the client's pace (8 in flight, 0.1 s each: 80/s) against a hidden 30/s, as in the benchmark
    server.latency = 0.1
    server.bucket_rps, server.bucket_burst = 30.0, 10.0
    many = [{"id": f"b{i}", "question": f"q{i}", "reference_answer": f"a{i}", "answer": f"a{i}"} for i in range(300)]
    adaptive = judge(server, "adaptive", concurrency=8, cases=many)
    n_adaptive = server.throttled
    server.throttled, server._tokens = 0, None
    fixed = judge(server, "fixed", concurrency=8, cases=many)
    n_fixed = server.throttled
    failed = [(r["error_kind"], r["error"]) for r in adaptive.rows if r["status"] != "ok"]
    assert not failed, failed[:3]  # (the fixed policy may lose some: its pauses end for everyone at once)
    share_adaptive = n_adaptive / adaptive.summary["requests"]
    share_fixed = n_fixed / fixed.summary["requests"]
    assert share_adaptive < 0.6 * share_fixed, (share_adaptive, share_fixed)
    assert share_adaptive <= 0.07  # (issue 17's target on the benchmark's scale: 5%; 3.5-3.9% here)
    assert adaptive.summary["rate"]["cuts"] >= 1 and adaptive.summary["rate"]["cuts_undone"] == 0


def test_serialising_server_lowers_concurrency_instead_of_abandoning_work(server):
    server.latency = 0.05
    server.serialise = True
    adaptive = judge(server, "adaptive", concurrency=16, timeout=0.5)
    assert all(r["status"] == "ok" for r in adaptive.rows)
    assert adaptive.summary["rate"]["min_concurrency"] < 16
    abandoned_adaptive = server.abandoned
    server.abandoned = 0
    # a queue of 16 x 50 ms against a 0.5 s time-out: the fixed policy gives up on queued requests, and its
    # time-outs in a row may even trip the breaker
    try:
        judge(server, "fixed", concurrency=16, timeout=0.5)
    except JudgeStopped:
        pass
    assert server.abandoned > abandoned_adaptive


def test_progress_line_and_summary_name_the_rate(server):
    from ragmeter.judge.runner import _rate_fields

    limits = Limits(4)
    assert _rate_fields(limits) == []
    ctl = limits.controller
    ctl.answered(ctl.sent(), 0.2)  # a throttle before any answer says nothing about the pace: no cut
    ctl.throttle(ctl.sent(), retry_after=1.0)
    limits.throttled = 3
    fields = _rate_fields(limits)
    assert fields[0].endswith("/s") and fields[1] == "429 x3"
    assert Limits(4, control="fixed").summary()["policy"] == "fixed"
    with pytest.raises(ValueError):
        Limits(4, control="bogus")


@pytest.mark.parametrize("control", ["adaptive", "fixed"])
def test_cli_rate_control_flag_reaches_judge_summary(tmp_path, server, api_key, control):
    import json

    from test_cli import cli, write_cases

    server.random_429 = 0.3
    cases = write_cases(tmp_path / "cases.jsonl", 8)
    p = cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness", "--rate-control", control,
            key=api_key)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    rate = json.loads((tmp_path / "out" / "judge_summary.json").read_text(encoding="utf-8"))["rate"]
    assert rate["policy"] == control and rate["throttled"] == server.throttled > 0
    assert ("pauses" in rate) == (control == "fixed")


def burst_start(ctl: RateController, clock: Clock, refused) -> None:
    """The runner's start: one request alone, then a slot's worth at once (16), refused ones answered at once."""
    ctl.answered(ctl.sent(), 0.2)
    clock.t += 0.2
    batch = [ctl.sent() for _ in range(16)]
    clock.t += 0.005
    for i, at in enumerate(batch):
        if refused(i, clock.t):
            ctl.throttle(at, retry_after=1.0)


def test_refusals_from_the_first_requests_on_are_taken_for_noise_after_one_slower_probe():
    # the second before the first cut is the reference: 20% refused at 80/s and still 20% refused at 0.7x that is
    # noise, found by the first slower probes instead of a series of cuts (which cost 1-3 s of a 300-case run at
    # reduced rate). Over 12 seeds: before this reference, 3-7 cuts and 10 of 12 undone only after 1.2-3 s, or not
    # at all, 1801 sends in all; with it 2 cuts and 0.8-1.25 s in 10 of 12, 2298 sends.
    import random

    undone_soon, sends = 0, 0
    for seed in range(12):
        rnd = random.Random(seed)
        clock = Clock()
        ctl = RateController(16, clock=clock)
        refused = lambda i, t: rnd.random() < 0.2  # noqa: E731
        burst_start(ctl, clock, refused)
        while clock.t < 1.5 and not ctl.undone:
            sends += steady(ctl, clock, 80.0, 0.1, refused)
        undone_soon += ctl.undone >= 1
        sends += steady(ctl, clock, 80.0, 3.2 - clock.t, refused)
    assert undone_soon >= 10
    assert sends >= 0.7 * 80 * 3.2 * 12


@pytest.mark.parametrize("burst", [10.0, 30.0])
def test_a_share_that_rises_at_the_slower_rate_is_a_spent_burst_not_noise(burst):
    # a hidden bucket whose burst hid the limit before the first cut: few refusals in the reference second, many
    # at the slower rate; the noise test must not undo these cuts
    clock = Clock()
    ctl = RateController(16, clock=clock)
    server = bucket_server(30.0, burst)
    burst_start(ctl, clock, server)
    steady(ctl, clock, 80.0, 6.0, server)
    assert ctl.undone == 0 and ctl.noise == 0.0
    assert 25 <= ctl.limit_estimate <= 35


def test_a_cut_voids_the_send_times_reserved_at_the_old_rate():
    clock = Clock()
    ctl = RateController(16, clock=clock)
    steady(ctl, clock, 80.0, 0.5)
    ctl.throttle(ctl.sent(), retry_after=1.0)  # first cut: a bucket at 0.7x the pace
    clock.t += 0.15
    probe = [ctl.sent() for _ in range(12)]
    waits = [ctl.reserve() for _ in range(30)]  # thirty requests take their places at that rate
    assert waits[-1] > 0.3
    before = ctl.schedule
    for at in probe:
        ctl.throttle(at, retry_after=1.0)  # the probe throttled: cut again
    assert ctl.cuts == 2 and ctl.schedule == before + 1
    # the places reserved before are void (limits.Limits reserves again when ``schedule`` moved): the next place
    # is after the brief hold, not behind the thirty old ones
    first = ctl.reserve()
    assert first == pytest.approx(max(0.1, 1.0 / ctl.current_rate()), rel=0.01)
    assert ctl.reserve() - first == pytest.approx(1.0 / ctl.current_rate(), rel=0.05)


def test_a_measured_limit_is_held_before_it_is_probed_again():
    clock = Clock()
    ctl = RateController(16, clock=clock, recovery=1.0, plateau=3.0)
    server = bucket_server(30.0, 1.0)
    steady(ctl, clock, 80.0, 0.2)
    steady(ctl, clock, 80.0, 2.0, server)
    assert ctl.cuts >= 2 and ctl.limit_estimate is not None
    # regrowth after the last probe's cut (the limit gone now): back at the estimate after ``recovery``, then flat
    # for ``plateau``, then probed beyond along the cubic
    cut_at, back = ctl._curve_start, ctl._w_max
    steady(ctl, clock, 200.0, cut_at + 1.0 + 2.9 - clock.t)
    assert ctl.current_rate() == pytest.approx(back, abs=0.1)
    steady(ctl, clock, 200.0, 2.0)
    assert ctl.current_rate() > back + 1.0


@pytest.mark.parametrize("control", ["adaptive", "fixed"])
def test_a_case_waiting_out_a_retry_after_does_not_hold_back_the_others(server, control):
    # concurrency 1 runs 2 workers; the first two requests are refused with Retry-After: 1 s and both workers'
    # cases wait it out. The other cases are judged meanwhile (by stand-in workers), not after the second.
    server.latency = 0.02
    throttle = {"status": 429, "headers": {"Retry-After": "1"}}
    server.script = [throttle, throttle]
    few = CASES[:8]
    result = judge(server, control, concurrency=1, cases=few)
    assert [r["status"] for r in result.rows] == ["ok"] * len(few)
    order = [entry["key"] for entry in server.log]
    refused = order[:2]
    retried_at = [i for i, key in enumerate(order) if key in refused][2:]
    others = [i for i, key in enumerate(order) if key not in refused]
    assert len(retried_at) == 2 and len(others) == len(few) - 2
    if control == "adaptive":  # (the fixed policy pauses every request for the full Retry-After)
        assert max(others) < min(retried_at), order


def test_the_progress_line_is_cut_to_the_terminal_width_in_cells(monkeypatch):
    import os
    import shutil

    from rich.cells import cell_len

    from ragmeter.judge.runner import _Progress, fit_cells

    progress = _Progress(False, 300)
    progress.done, progress.failed = 12, 1
    full = progress.line()
    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback=(80, 24): os.terminal_size((30, 24)))
    cut = progress.line()
    assert len(full) > 29 and cut == full[:29]  # one column left free: the cursor never wraps the line
    # a wide (CJK) character takes two cells; one that would be cut in half is left out
    assert fit_cells("判断结果 ok", 5) == "判断"
    assert fit_cells("ab判断", 3) == "ab" and cell_len(fit_cells("ab判断", 4)) == 4
    assert fit_cells("判断", 4) == "判断" and fit_cells("abc", 10) == "abc"


def test_judge_summary_json_is_strict_json(tmp_path):
    import json

    from ragmeter.judge.runner import JudgeResult

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    summary = {"n_rows": 0, "metrics": {"custom": {"mean": float("nan"), "max": float("inf")}}, "note": "ok"}
    out = JudgeResult(rows=[], summary=summary).write(tmp_path / "out")
    text = (out / "judge_summary.json").read_text(encoding="utf-8")
    written = json.loads(text, parse_constant=refuse)
    assert [written.pop(k) for k in ("results_format", "tool", "command")] == [1, "ragmeter", "judge"]
    assert written.pop("version")
    assert written == {"n_rows": 0, "metrics": {"custom": {"mean": None, "max": None}}, "note": "ok"}
