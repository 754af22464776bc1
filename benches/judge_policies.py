"""Side by side: the fixed rate policy (global pause on Retry-After) and the adaptive one (judge.rate).

Each scenario runs ``ragmeter.judge.run`` (metric correctness: one call per case) against
tests/judge/fakeserver.py in its own process: clean; 20% random 429s with ``Retry-After: 1``; a hidden
server-side token bucket of 30 requests/s (burst 30, ``Retry-After: 1``), no ``--rpm``; a server that
processes one request at a time (``--timeout`` 2 s, so a deep queue times out). Reported per run: wall
time, requests, 429s, client CPU, cases lost (rows not ok) and, for the bucket, the rate sustained over the
middle of the run (completions between 25% and 75% of the cases, over their span).

    python benches/judge_policies.py --runs 3          # writes the section of benches/RESULTS_judge.md
    python benches/judge_policies.py --cases 100 --no-write
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "benches"))

from judge_bench import loadavg, start_server  # noqa: E402

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
    from ragmeter.judge import run
    from ragmeter.judge.retry import RetryPolicy

    proc, port = start_server(args.latency, *SCENARIOS[scenario], "--seed", str(k))
    ends: list = []
    try:
        timeout = 2.0 if scenario == "serialising server" else 30.0
        t0, c0 = time.monotonic(), time.process_time()
        result = asyncio.run(run(cases(args.cases), base_url=f"http://127.0.0.1:{port}/v1", model="m",
                                 metrics=["correctness"], concurrency=args.concurrency, timeout=timeout,
                                 cache=os.path.join(tmp, f"{scenario}-{policy}-{k}.sqlite"), rate_control=policy,
                                 retry=RetryPolicy(max_attempts=8)))
        wall, cpu = time.monotonic() - t0, time.process_time() - c0
    finally:
        proc.terminate()
        tail = proc.stdout.read() if proc.stdout else ""
        proc.wait(10)
    seen = json.loads(tail.strip().splitlines()[-1]) if tail.strip() else {}
    summ = result.summary
    rate = summ["rate"]
    lost = sum(r["status"] != "ok" for r in result.rows)
    return {"wall": wall, "cpu": cpu, "requests": summ["requests"], "throttled": rate["throttled"],
            "timeouts": sum(1 for r in result.rows for a in json.loads(r["attempt_log"] or "[]")
                            if a.get("outcome") == "timeout"),
            "server_requests": seen.get("requests"), "server_429": seen.get("throttled"),
            "abandoned": seen.get("abandoned"), "lost": lost, "rate": rate,
            "sustained": middle_rate(seen.get("ok_times") or [])}


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
    args = ap.parse_args()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.runs):
            for scenario in args.scenarios.split(","):
                for policy in ("fixed", "adaptive"):
                    load = loadavg()
                    r = one(scenario, policy, args, tmp, k)
                    r["load"] = load
                    out.setdefault((scenario, policy), []).append(r)
                    print(f"run {k + 1} {scenario:20s} {policy:8s} load {load}: {r['wall']:.2f} s, "
                          f"{r['requests']} requests, {r['throttled']} 429s, {r['timeouts']} time-outs, "
                          f"CPU {r['cpu']:.2f} s, lost {r['lost']}, rate {r['rate']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
