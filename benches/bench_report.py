"""`ragmeter report` on a large results folder (issue 5 target: 100,000 cases under 15 s).

    python benches/bench_report.py [--cases 100000]

Builds (seeded) a results folder shaped like `ragmeter eval`'s output, with
every judge metric and five chunks per case, then times `ragmeter report DIR`
as a subprocess (start-up included), best of 2, and reports the HTML size.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_report import synth_cases, write_results  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=100_000)
    args = ap.parse_args()
    base = synth_cases(5_000, seed=7)
    reps = max(1, args.cases // base.height)
    cases = pl.concat([base.with_columns((pl.col("id") + f"-{k}").alias("id")) for k in range(reps)]).head(args.cases)
    with tempfile.TemporaryDirectory() as d:
        out = write_results(Path(d) / "results", cases, judge=True, sweep=True)
        times = []
        for _ in range(2):
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "ragmeter", "report", str(out)], capture_output=True, text=True)
            times.append(time.perf_counter() - t)
            if proc.returncode != 0:
                raise SystemExit(proc.stderr)
        size = (out / "report.html").stat().st_size
        print(f"cases={cases.height} report best of 2: {min(times):.2f} s (runs: {', '.join(f'{t:.2f}' for t in times)}); "
              f"report.html {size / 1e6:.0f} MB; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
