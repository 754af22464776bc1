"""The Ray scaling curve here: scoring and judging on one machine, then on Ray with 1 and 2 workers.

    python benches/bench_ray.py                       # --repeat 2; writes benches/RESULTS_ray.md
    python benches/bench_ray.py --cases 5000 --judge-cases 100 --no-write
    python benches/bench_ray.py --only judge --no-write   # the judging half only

In one run, side by side on the same data:

* scoring: ``ragmeter.score`` on a generated Parquet run (benches/bench_score.py's generator: CASES cases x
  CHUNKS chunks), then ``ragmeter.ray.score_dataset(ray.data.read_parquet(run), golden, workers=W)`` for W = 1, 2;
  the aggregates are checked equal to the single-machine ones;
* judging: ``ragmeter.judge.run`` on JUDGE_CASES cases (metric correctness: one call each) against
  tests/judge/fakeserver.py in its own process (200 ms a request), concurrency 16, then
  ``ragmeter.ray.judge_dataset(..., workers=W)`` under one controller actor; the rows are checked equal.

Wall times exclude Ray's start-up (reported once); each measurement gets a fresh cache. The load average is
recorded before and after every measurement (the machine is shared).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "benches"))

from bench_score import cpu_model, generate  # noqa: E402
from judge_bench import loadavg, start_server  # noqa: E402

RESULTS = ROOT / "benches" / "RESULTS_ray.md"


def judge_cases(n: int):
    return [{"id": f"c{i:04d}", "question": f"What colour is product {i}?", "reference_answer": f"Product {i} is blue",
             "answer": f"Product {i} is blue.", "contexts": [f"product {i} is blue"]} for i in range(n)]


def timed(fn):
    load = loadavg()
    t0 = time.monotonic()
    out = fn()
    return time.monotonic() - t0, out, load, loadavg()


def bench_scoring(args, tmp: Path, rows: list) -> None:
    import ray

    import ragmeter
    from ragmeter.ray import score_dataset

    golden, run, _ = generate(tmp, args.cases, args.chunks, args.chars, row_group_size=args.row_group)
    # Ray reads one Parquet file as one block, whatever its row groups: the same rows in one file per row group,
    # so that there is something to spread over the workers
    import pyarrow.parquet as pq

    parts = tmp / "run-parts"
    parts.mkdir()
    whole = pq.read_table(run)
    for i, start in enumerate(range(0, whole.num_rows, args.row_group)):
        pq.write_table(whole.slice(start, args.row_group), parts / f"part-{i:03d}.parquet", compression="zstd")
    reference = None
    for k in range(args.repeat):
        wall, res, before, after = timed(lambda: ragmeter.score(golden, run))
        reference = res.summary["overall"]
        rows.append(("score", "single machine (ragmeter.score)", k + 1, wall, before, after, ""))
        for workers in (1, 2):
            ds = ray.data.read_parquet(str(parts))
            wall, res, before, after = timed(lambda: score_dataset(ds, golden, workers=workers))
            same = "aggregates equal" if res["overall"] == reference else "AGGREGATES DIFFER"
            rows.append(("score", f"score_dataset, {workers} worker{'s' * (workers > 1)}", k + 1, wall, before, after,
                         same))


def bench_judging(args, tmp: Path, rows: list) -> None:
    from ragmeter.judge import JudgeConfig, run_sync
    from ragmeter.ray import judge_dataset

    proc, port = start_server(args.latency)
    try:
        data = judge_cases(args.judge_cases)

        def cfg(name: str) -> JudgeConfig:
            return JudgeConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", metrics=["correctness"],
                               concurrency=args.concurrency, timeout=30, cache=tmp / f"{name}.sqlite")

        for k in range(args.repeat):
            wall, single, before, after = timed(lambda: run_sync(data, cfg(f"single-{k}")))
            reference = single.frame().drop("latency_ms", "attempt_log")
            rows.append(("judge", "single machine (ragmeter.judge.run)", k + 1, wall, before, after,
                         f"{single.summary['requests']} requests"))
            for size in args.batch_sizes:
                for workers in (1, 2):
                    name = f"ray{workers}-{size}-{k}"
                    wall, res, before, after = timed(lambda: judge_dataset(data, cfg(name), workers=workers,
                                                                           batch_size=size))
                    same = res.frame().drop("latency_ms", "attempt_log").equals(reference)
                    rows.append(("judge", f"judge_dataset, {workers} worker{'s' * (workers > 1)}, batches of {size}",
                                 k + 1, wall, before, after,
                                 f"{res.summary['requests']} requests, max "
                                 f"{res.summary['ray']['max_requests_in_flight']} in flight; "
                                 f"rows {'equal' if same else 'DIFFER'}"))
    finally:
        proc.terminate()
        proc.wait(10)


def report(args, rows: list, startup: float, startup_load: str) -> str:
    lines = [
        "# Ray scale-out benchmark", "",
        f"Command: `python benches/bench_ray.py{' ' + ' '.join(sys.argv[1:]) if sys.argv[1:] else ''}`", "",
        f"Machine: {platform.platform()}, Python {platform.python_version()}, nproc {os.cpu_count()}, CPU "
        f"{cpu_model()}; Ray {__import__('ray').__version__}, a local cluster of {args.cpus} CPUs on loopback "
        f"(start-up {startup:.1f} s at load {startup_load}, not in the times below). The machine is shared "
        f"with other work: see the load averages (1/5/15 min) beside each number.", "",
        f"Scoring: {args.cases} cases x {args.chunks} chunks of {args.chars} characters (benches/bench_score.py's "
        f"generator); the single machine reads one Parquet file, Ray the same rows in "
        f"{-(-args.cases // args.row_group)} files of {args.row_group} cases (one block each). "
        f"Judging: {args.judge_cases} cases, metric correctness (one call each), fake server "
        f"(tests/judge/fakeserver.py, own process) with {args.latency * 1000:.0f} ms a request, concurrency "
        f"{args.concurrency} (one global ceiling across the workers), batches of "
        f"{' and '.join(map(str, args.batch_sizes))} cases.", "",
        "| task | path | run | wall s | load before | load after | check |", "|---|---|---|---|---|---|---|",
    ]
    for task, path, k, wall, before, after, note in rows:
        lines.append(f"| {task} | {path} | {k} | {wall:.2f} | {before} | {after} | {note} |")
    lines += ["", "Medians:", ""]
    for path in dict.fromkeys((task, path) for task, path, *_ in rows):
        walls = [r[3] for r in rows if (r[0], r[1]) == path]
        lines.append(f"- {path[0]}, {path[1]}: {statistics.median(walls):.2f} s (runs: "
                     f"{', '.join(f'{w:.2f}' for w in walls)})")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--cases", type=int, default=20000)
    ap.add_argument("--chunks", type=int, default=10)
    ap.add_argument("--chars", type=int, default=300)
    ap.add_argument("--row-group", type=int, default=2500)
    ap.add_argument("--judge-cases", type=int, default=300)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[50, 150], help="cases per judge batch")
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--only", choices=("score", "judge"), help="run one of the two parts")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    import ray

    startup_load = loadavg()
    t0 = time.monotonic()
    ray.init(num_cpus=args.cpus, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    startup = time.monotonic() - t0
    rows: list = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if args.only in (None, "score"):
                bench_scoring(args, Path(tmp), rows)
            if args.only in (None, "judge"):
                bench_judging(args, Path(tmp), rows)
    finally:
        ray.shutdown()
    text = report(args, rows, startup, startup_load)
    print(text)
    if not args.no_write:
        RESULTS.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
