"""Side by side: the fixed rate policy (global pause on Retry-After), the adaptive one (judge.rate), and ragas.

Each scenario runs ``ragmeter.judge.run`` (metric correctness: one call per case) against
tests/judge/fakeserver.py in its own process: clean; 20% random 429s with ``Retry-After: 1``; a hidden
server-side token bucket of 30 requests/s (burst 30, ``Retry-After: 1``), no ``--rpm``; a server that
processes one request at a time (``--timeout`` 2 s, so a deep queue times out). Reported per run: wall
time, requests, 429s, client CPU, cases lost (rows not ok) and, for the bucket, the rate sustained over the
middle of the run (completions between 25% and 75% of the cases, over their span).

    python benches/judge_policies.py --runs 3          # writes the section of benches/RESULTS_judge.md
    python benches/judge_policies.py --cases 100 --no-write
    python benches/judge_policies.py --runs 2 --cpu-calls 0 --no-write   # the scenarios only

ragas runs when a venv with it is found (target/ecosystem-venv, or RAGMETER_ECOSYSTEM_VENV): see
benches/judge_bench.py (ragas_python, run_ragas); the report says so when it is absent.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "benches"))

from judge_bench import RAGAS_METRIC, loadavg, ragas_python, run_ragas, start_server  # noqa: E402

SCENARIOS = {
    "clean": [],
    "random 429 20%": ["--random-429", "0.2"],
    "hidden bucket 30/s": ["--bucket-rps", "30", "--bucket-burst", "30"],
    "serialising server": ["--serialise"],
}


def cases(n: int):
    return [{"id": f"c{i}", "question": f"What colour is product {i}?", "reference_answer": f"Product {i} is blue",
             "answer": f"Product {i} is blue.", "contexts": [f"product {i} is blue"]} for i in range(n)]


def one(scenario: str, policy: str, args: argparse.Namespace, tmp: str, k: int) -> dict:
    from ragmeter.judge import JudgeStopped, run
    from ragmeter.judge.retry import RetryPolicy

    proc, port = start_server(args.latency, *SCENARIOS[scenario], "--seed", str(k))
    ends: list = []
    try:
        timeout = 2.0 if scenario == "serialising server" else 30.0
        t0, c0 = time.monotonic(), time.process_time()
        try:
            result = asyncio.run(run(cases(args.cases), base_url=f"http://127.0.0.1:{port}/v1", model="m",
                                     metrics=["correctness"], concurrency=args.concurrency, timeout=timeout,
                                     cache=os.path.join(tmp, f"{scenario}-{policy}-{k}.sqlite"),
                                     rate_control=policy, retry=RetryPolicy(max_attempts=8)))
        except JudgeStopped as stopped:  # the breaker: time-outs in a row (the run is lost, exit 2)
            result, why = None, str(stopped).split(";")[0]
        wall, cpu = time.monotonic() - t0, time.process_time() - c0
    finally:
        proc.terminate()
        tail = proc.stdout.read() if proc.stdout else ""
        proc.wait(10)
    seen = json.loads(tail.strip().splitlines()[-1]) if tail.strip() else {}
    if result is None:
        return {"wall": wall, "cpu": cpu, "requests": seen.get("requests"), "throttled": seen.get("throttled"),
                "timeouts": float("nan"), "server_requests": seen.get("requests"), "abandoned": seen.get("abandoned"),
                "lost": args.cases, "rate": {"stopped": why}, "sustained": middle_rate(seen.get("ok_times") or [])}
    summ = result.summary
    rate = summ["rate"]
    lost = sum(r["status"] != "ok" for r in result.rows)
    return {"wall": wall, "cpu": cpu, "requests": summ["requests"], "throttled": rate["throttled"],
            "timeouts": sum(1 for r in result.rows for a in json.loads(r["attempt_log"] or "[]")
                            if a.get("outcome") == "timeout"),
            "server_requests": seen.get("requests"), "server_429": seen.get("throttled"),
            "abandoned": seen.get("abandoned"), "lost": lost, "rate": rate,
            "sustained": middle_rate(seen.get("ok_times") or [])}


def one_ragas(scenario: str, python: str, args: argparse.Namespace, k: int) -> dict:
    """ragas's evaluate() on the same cases against the same scenario and seed (its own venv, its own process)."""
    timeout = 2.0 if scenario == "serialising server" else 30.0
    r = run_ragas(python, args.latency, SCENARIOS[scenario] + ["--seed", str(k)], args.cases, args.concurrency,
                  timeout)
    return {"wall": r["wall"], "cpu": r["cpu"], "requests": r["server_requests"], "throttled": r["server_429"],
            "timeouts": float("nan"), "abandoned": r["abandoned"], "lost": r["cases"] - r["scored"],
            "rate": {"outside_calls": r["outside_calls"]}, "sustained": middle_rate(r["ok_times"])}


def cpu_at_600(policy: str, args: argparse.Namespace, tmp: str, k: int) -> dict:
    """Client CPU per call at --rpm 600 with the progress bar on (stderr on a pseudo-terminal, drained)."""
    import pty
    import threading

    from ragmeter.judge import run

    proc, port = start_server(args.latency)
    master, slave = pty.openpty()
    drain = threading.Thread(target=lambda: _drain(master), daemon=True)
    drain.start()
    saved = sys.stderr
    sys.stderr = os.fdopen(slave, "w", buffering=1)
    try:
        t0, c0 = time.monotonic(), time.process_time()
        result = asyncio.run(run(cases(args.cpu_calls), base_url=f"http://127.0.0.1:{port}/v1", model="m",
                                 metrics=["correctness"], concurrency=8, rpm=600, progress=True,
                                 cache=os.path.join(tmp, f"cpu-{policy}-{k}.sqlite"), rate_control=policy))
        wall, cpu = time.monotonic() - t0, time.process_time() - c0
    finally:
        sys.stderr.close()
        sys.stderr = saved
        os.close(master)
        proc.terminate()
        proc.wait(10)
    calls = result.summary["requests"]
    return {"wall": wall, "cpu": cpu, "calls": calls, "ms_per_call": 1000.0 * cpu / calls}


async def paced_floor(base_url: str, n: int, rps: float = 10.0) -> float:
    """CPU ms per call of bare aiohttp posting a judge request at ``rps`` (no ragmeter code): at 10 calls/s
    every send is its own event-loop wake-up and loopback round trip, which the kernel charges to the client."""
    import json

    import aiohttp

    from judge_bench import messages

    data = json.dumps({"model": "m", "messages": messages(0), "max_tokens": 500}).encode()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=12)) as s:
        async def one() -> None:
            async with s.post(base_url + "/chat/completions", data=data) as r:
                json.loads(await r.read())
        c0 = time.process_time()
        tasks = []
        for _ in range(n):
            tasks.append(asyncio.ensure_future(one()))
            await asyncio.sleep(1.0 / rps)
        await asyncio.gather(*tasks)
        return (time.process_time() - c0) / n * 1000.0


def floor_at_600(args: argparse.Namespace) -> float:
    proc, port = start_server(args.latency)
    try:
        return asyncio.run(paced_floor(f"http://127.0.0.1:{port}/v1", args.cpu_calls))
    finally:
        proc.terminate()
        proc.wait(10)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 65536):
            pass
    except OSError:
        pass


def best_schedule(n: int, concurrency: int, latency: float, share: float, seed: int, retry_after: float = 1.0) -> float:
    """Seconds the best schedule that honours every Retry-After for its own request needs: the same fault pattern
    as tests/judge/fakeserver.py with ``--random-429 share --seed seed`` (the k-th request to arrive is refused iff
    the k-th draw of ``random.Random(seed)`` is below ``share``, whatever the schedule), ``concurrency`` requests
    in flight, ``latency`` seconds per answered request and a refusal answered at once. The schedule never cuts
    its rate, never lets a slot idle while a case can be sent, and resends a refused case the moment its
    Retry-After is over (ahead of new cases). Client overheads are not modelled (its fault-free time is
    ``ceil(n / concurrency) * latency``)."""
    import heapq
    import random

    draw = random.Random(seed).random
    now, answers, retries, new, done = 0.0, [], [], n, 0  # answers: end times in flight; retries: ready times
    while done < n:
        while len(answers) < concurrency:
            if retries and retries[0] <= now:
                heapq.heappop(retries)
            elif new > 0:
                new -= 1
            else:
                break
            if draw() < share:
                heapq.heappush(retries, now + retry_after)
            else:
                heapq.heappush(answers, now + latency)
        free = len(answers) < concurrency
        now = min(answers[0] if answers else float("inf"), retries[0] if retries and free else float("inf"))
        while answers and answers[0] <= now + 1e-12:
            heapq.heappop(answers)
            done += 1
    return now


def middle_rate(times: list) -> float:
    """Answers per second between the 25% and the 75% answer (the middle of the run)."""
    ts = sorted(times)
    if len(ts) < 8:
        return float("nan")
    lo, hi = ts[len(ts) // 4], ts[(3 * len(ts)) // 4]
    n = (3 * len(ts)) // 4 - len(ts) // 4
    return n / (hi - lo) if hi > lo else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--cpu-calls", type=int, default=300, help="calls of the CPU measure at --rpm 600 (0: skip it)")
    ap.add_argument("--no-ragas", action="store_true", help="leave ragas out even when its venv is there")
    args = ap.parse_args()
    ragas, ragas_version = (None, "left out (--no-ragas)") if args.no_ragas else ragas_python()
    args.ragas_note = (f"ragas {ragas_version} ({ragas}), metric {RAGAS_METRIC}" if ragas else
                       f"ragas: not run, {ragas_version}")
    print(args.ragas_note, file=sys.stderr)
    out = {}
    cpu_runs: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.runs):
            for policy in ("fixed", "adaptive") if args.cpu_calls else ():
                load = loadavg()
                r = cpu_at_600(policy, args, tmp, k)
                r["load"] = load
                cpu_runs.setdefault(policy, []).append(r)
                print(f"run {k + 1} cpu at 600/min {policy:8s} load {load}: {r['calls']} calls in {r['wall']:.1f} s, "
                      f"CPU {r['cpu']:.2f} s = {r['ms_per_call']:.3f} ms/call", file=sys.stderr)
            if args.cpu_calls:
                load = loadavg()
                bare = {"ms_per_call": floor_at_600(args), "wall": args.cpu_calls / 10.0, "load": load}
                cpu_runs.setdefault("bare aiohttp, same requests at 10/s", []).append(bare)
                print(f"run {k + 1} bare aiohttp at 600/min load {load}: {bare['ms_per_call']:.3f} ms/call",
                      file=sys.stderr)
            for scenario in args.scenarios.split(","):
                for policy in ("fixed", "adaptive"):
                    load = loadavg()
                    r = one(scenario, policy, args, tmp, k)
                    r["load"] = load
                    out.setdefault((scenario, policy), []).append(r)
                    print(f"run {k + 1} {scenario:20s} {policy:8s} load {load}: {r['wall']:.2f} s, "
                          f"{r['requests']} requests, {r['throttled']} 429s, {r['timeouts']} time-outs, "
                          f"CPU {r['cpu']:.2f} s, lost {r['lost']}, middle {r['sustained']:.1f}/s, "
                          f"rate {r['rate']}", file=sys.stderr)
                if ragas:
                    load = loadavg()
                    r = one_ragas(scenario, ragas, args, k)
                    r["load"] = load
                    out.setdefault((scenario, f"ragas {ragas_version}"), []).append(r)
                    print(f"run {k + 1} {scenario:20s} ragas    load {load}: {r['wall']:.2f} s, {r['requests']} "
                          f"requests, {r['throttled']} 429s, CPU {r['cpu']:.2f} s, lost {r['lost']}, middle "
                          f"{r['sustained']:.1f}/s, outside calls {len(r['rate']['outside_calls'])}", file=sys.stderr)
    text = report(out, args, cpu_runs)
    print(text)
    if not args.no_write:
        path = ROOT / "benches" / "RESULTS_judge.md"
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        head = old.split(MARK)[0].rstrip()
        path.write_text(head + "\n\n" + text + "\n", encoding="utf-8")
    return 0


MARK = "## Rate policies side by side"


def _spread(xs: list, fmt: str = "{:.2f}") -> str:
    xs = [x for x in xs if x == x]
    if not xs:
        return "n/a"
    med = statistics.median(xs)
    return fmt.format(med) + (f" ({fmt.format(min(xs))}-{fmt.format(max(xs))})" if len(xs) > 1 else "")


def _bound_lines(out: dict, args: argparse.Namespace, clean: float) -> list:
    """ragmeter's time under 20% random 429s against the fault-free time and against the best schedule that
    honours each Retry-After (:func:`best_schedule`, same seed and so the same fault pattern as the run)."""
    ideal_clean = best_schedule(args.cases, args.concurrency, args.latency, 0.0, 0)
    overhead = clean - ideal_clean  # what the client adds to the ideal without faults (start-up, first request)
    lines = [f"20% random 429s against the best schedule that honours each Retry-After (an event simulation of "
             f"the same seeds: never cuts, never idles a slot, resends each refused case the moment its Retry-After "
             f"ends; fault-free {ideal_clean:.2f} s, to which the client adds {overhead:.2f} s when nothing fails):",
             "", "| run (seed) | best schedule s | its ratio to fault-free | ragmeter adaptive s | x fault-free | "
             "x (best schedule + client overhead) |", "|---|---|---|---|---|---|"]
    for k, r in enumerate(out[("random 429 20%", "adaptive")]):
        best = best_schedule(args.cases, args.concurrency, args.latency, 0.2, k)
        lines.append(f"| {k + 1} ({k}) | {best:.2f} | {best / ideal_clean:.2f}x | {r['wall']:.2f} | "
                     f"{r['wall'] / clean:.2f}x | {r['wall'] / (best + overhead):.2f}x |")
    ratios = sorted(best_schedule(args.cases, args.concurrency, args.latency, 0.2, k) / ideal_clean
                    for k in range(100))
    lines += ["", f"The best schedule over seeds 0-99: {ratios[0]:.2f}x-{ratios[-1]:.2f}x the fault-free time, median "
                  f"{ratios[50]:.2f}x, {sum(x <= 1.3 for x in ratios)} of 100 seeds within 1.3x: the end of the run "
                  "waits for the last refused cases (a case refused k times ends no sooner than k seconds after its "
                  "first attempt), whatever the client does."]
    return lines


def _ragas_line(out: dict, args: argparse.Namespace) -> str:
    note = getattr(args, "ragas_note", "ragas: not run")
    ragas = [r for (_, policy), rs in out.items() if policy.startswith("ragas") for r in rs]
    if not ragas:
        return note + "."
    outside = sum(len(r["rate"]["outside_calls"]) for r in ragas)
    return (f"{note}: ragas's evaluate() in its own process from that venv, against the same server (tests/judge/"
            f"fakeserver.py's modes, answering ragas's prompts: benches/judge_bench.py --serve-ragas) with the same "
            f"seed, max_workers {args.concurrency}, the OpenAI client's retries (Retry-After honoured; 8 attempts in "
            f"all), the same time-out; a dummy key and OPENAI_BASE_URL on loopback. Connections or look-ups beyond "
            f"loopback attempted by ragas (refused and counted): {outside}. Its time-outs are not counted (n/a); "
            f"its 429s and requests are the server's counts; cases lost = cases without a score (NaN).")


def report(out: dict, args: argparse.Namespace, cpu_runs: Optional[dict] = None) -> str:
    cmd = f"python benches/judge_policies.py{' ' + ' '.join(sys.argv[1:]) if sys.argv[1:] else ''}"
    runs = max(len(v) for v in out.values())
    lines = [MARK, "", f"Command: `PYTHONPATH=python {cmd}`", "",
             f"{args.cases} cases x 1 call (metric correctness), {args.latency * 1000:.0f} ms server latency, "
             f"concurrency {args.concurrency}, retries up to 8 attempts; the server is tests/judge/fakeserver.py in its "
             f"own process. {runs} run(s) of each; median (min-max). The serialising server runs with --timeout 2 s.",
             "", _ragas_line(out, args),
             "", "| scenario | policy | wall s | requests | 429s | time-outs | abandoned by the client | client CPU s "
             "| cases lost | middle of the run /s | load avg before |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for (scenario, policy), rs in out.items():
        lines.append(f"| {scenario} | {policy} | {_spread([r['wall'] for r in rs])} | "
                     f"{_spread([r['requests'] for r in rs], '{:.0f}')} | {_spread([r['throttled'] for r in rs], '{:.0f}')} | "
                     f"{_spread([r['timeouts'] for r in rs], '{:.0f}')} | "
                     f"{_spread([float(r['abandoned'] or 0) for r in rs], '{:.0f}')} | {_spread([r['cpu'] for r in rs])} | "
                     f"{_spread([r['lost'] for r in rs], '{:.0f}')} | {_spread([r['sustained'] for r in rs], '{:.1f}')} | "
                     f"{'; '.join(r['load'] for r in rs)} |")
    def worst(scenario, policy, key, fn=max):
        rs = out.get((scenario, policy)) or []
        return fn(r[key] for r in rs) if rs else float("nan")
    clean = statistics.median(r["wall"] for r in out.get(("clean", "adaptive"), [{"wall": float("nan")}]))
    lines += ["", "Targets (issue 17), adaptive policy, worst run:", ""]
    if ("random 429 20%", "adaptive") in out:
        w = worst("random 429 20%", "adaptive", "wall")
        lost = worst("random 429 20%", "adaptive", "lost")
        lines.append(f"- 20% random 429s: {w:.2f} s = {w / clean:.2f}x the fault-free median {clean:.2f} s "
                     f"(target <= 1.3x: {'holds' if w <= 1.3 * clean else 'does NOT hold'}); cases lost {lost} "
                     f"({'holds' if lost == 0 else 'does NOT hold'}).")
    if ("random 429 20%", "adaptive") in out:
        lines += ["", *_bound_lines(out, args, clean), ""]
    if ("hidden bucket 30/s", "adaptive") in out:
        rs = out[("hidden bucket 30/s", "adaptive")]
        mid = min(r["sustained"] for r in rs)
        share = max(r["throttled"] / r["requests"] for r in rs)
        lines.append(f"- hidden 30/s bucket, no --rpm: {mid:.1f}/s sustained over the middle of the run = "
                     f"{mid / 30:.0%} of 30/s (target >= 90%: {'holds' if mid >= 27 else 'does NOT hold'}); "
                     f"{share:.1%} of requests answered 429 (target <= 5%: "
                     f"{'holds' if share <= 0.05 else 'does NOT hold'}).")
    if cpu_runs:
        lines += ["", "Client CPU at --rpm 600 with the progress bar on (stderr on a pseudo-terminal; "
                      f"{args.cpu_calls} calls, concurrency 8, SQLite cache; process time of the client, imports "
                      "excluded):", "",
                  "| policy | ms CPU per call | wall s | load avg before |", "|---|---|---|---|"]
        for policy, rs in cpu_runs.items():
            lines.append(f"| {policy} | {_spread([r['ms_per_call'] for r in rs], '{:.3f}')} | "
                         f"{_spread([r['wall'] for r in rs], '{:.1f}')} | {'; '.join(r['load'] for r in rs)} |")
        worst_cpu = max(r["ms_per_call"] for r in cpu_runs.get("adaptive", cpu_runs.get("fixed", [])))
        lines += ["", "- client CPU at 600 requests/min, progress bar on, adaptive, worst run: "
                      f"{worst_cpu:.3f} ms per call (target <= 1 ms: {'holds' if worst_cpu <= 1.0 else 'does NOT hold'})."]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
