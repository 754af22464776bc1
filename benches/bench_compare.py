"""Benchmark: `compare` with 10,000 paired-bootstrap resamples on 100,000 paired cases.

    python benches/bench_compare.py [--cases 100000] [--resamples 10000] [--threads N] [--engine auto|numpy]

Measures, in one run:

1. ``ragmeter.compare.compare_frames`` end to end (every metric, overall and per
   category, 10,000 resamples) on ``--cases`` paired cases (target: < 10 s);
2. the bootstrap engine alone for one continuous metric and one boolean metric;
3. side by side on a smaller size, the same paired bootstrap done plainly: a
   pure-Python loop and a naive numpy version (one ``rng.integers`` index matrix
   and a gather per chunk, one metric at a time), reported as draws per second
   and extrapolated to the full size.
"""
from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import time
from typing import Dict

import numpy as np
import polars as pl

from ragmeter import stats
from ragmeter.compare import compare_frames
from ragmeter.diagnosis import diagnose


def make_cases(n: int, seed: int, shift: float = 0.0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    cats = np.array(["fact", "paraphrase", "multihop", "conflict", "private", "crossdoc", "noanswer"])[rng.integers(0, 7, n)]
    labeled = cats != "noanswer"
    rank = np.where(rng.random(n) < 0.75 + shift, rng.integers(1, 6, n), 0)
    hit = rank > 0
    correct = rng.random(n) < 0.7 + shift
    status = np.where(rng.random(n) < 0.02, "failed", "ok")

    def masked(x: np.ndarray, mask: np.ndarray) -> pl.Series:
        return pl.Series(np.where(mask, x, np.nan)).fill_nan(None)

    return pl.DataFrame({
        "id": [f"c{i:06d}" for i in range(n)],
        "category": cats,
        "labeled": labeled,
        "hit": pl.Series(hit).zip_with(pl.Series(labeled), pl.Series([None] * n, dtype=pl.Boolean)),
        "reciprocal_rank": masked(np.where(rank > 0, 1.0 / np.maximum(rank, 1), 0.0), labeled),
        "average_precision": masked(np.where(rank > 0, rng.random(n), 0.0), labeled),
        "ndcg": masked(np.where(rank > 0, rng.random(n), 0.0), labeled),
        "precision": masked(hit * 0.2, labeled),
        "file_hit": pl.Series(hit | (rng.random(n) < 0.5)).zip_with(pl.Series(labeled), pl.Series([None] * n, dtype=pl.Boolean)),
        "evidence_recall": masked(hit * 1.0, labeled),
        "retrieval_mode": ["hybrid"] * n,
        "answer": ["an answer"] * n,
        "correct": pl.Series(correct).zip_with(pl.Series(status == "ok"), pl.Series([None] * n, dtype=pl.Boolean)),
        "correctness_status": status,
        "correctness_score": masked(np.where(correct, 4.0, 2.0), status == "ok"),
        "faithfulness_score": np.clip(rng.beta(5, 1.5, n) + shift, 0, 1),
        "answer_relevancy_score": rng.random(n),
        "context_precision_score": rng.random(n),
        "context_recall_score": rng.random(n),
    })


def perturb(df: pl.DataFrame, seed: int, flip: float = 0.05, noise: float = 0.05) -> pl.DataFrame:
    """A candidate run: the same cases with ~5% of booleans flipped and noise on scores."""
    rng = np.random.default_rng(seed)
    n = df.height
    out = []
    for name, dtype in df.schema.items():
        col = df.get_column(name)
        if name in ("labeled", "id", "category") or not (dtype == pl.Boolean or dtype == pl.Float64):
            out.append(col)
        elif dtype == pl.Boolean:
            out.append(pl.Series(name, np.where(rng.random(n) < flip, ~col.fill_null(False).to_numpy(), col.fill_null(False).to_numpy()))
                       .zip_with(col.is_not_null(), col))
        else:
            out.append((col + pl.Series(rng.normal(0.005, noise, n))).clip(0, 5 if name == "correctness_score" else 1).alias(name))
    return pl.DataFrame(out)


def naive_numpy(d: np.ndarray, n_resamples: int, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    n = d.size
    means = np.empty(n_resamples)
    chunk = max(1, 2_000_000 // n)
    for s in range(0, n_resamples, chunk):
        c = min(chunk, n_resamples - s)
        idx = rng.integers(0, n, size=(c, n))
        means[s : s + c] = d[idx].mean(axis=1)
    return tuple(np.percentile(means, [2.5, 97.5]))


def plain_python(d: list, n_resamples: int, seed: int) -> tuple:
    rnd = random.Random(seed)
    n = len(d)
    means = sorted(sum(d[rnd.randrange(n)] for _ in range(n)) / n for _ in range(n_resamples))
    return means[int(0.025 * n_resamples)], means[int(0.975 * n_resamples) - 1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--small", type=int, default=20_000, help="cases for the side-by-side baselines")
    ap.add_argument("--engine", choices=stats.ENGINES, default="auto",
                    help="bootstrap engine: auto (the Rust kernel) or numpy (the reference, the former default)")
    args = ap.parse_args()
    if args.engine != "auto":
        import functools

        stats.bootstrap_means = functools.partial(stats.bootstrap_means, engine=args.engine)  # type: ignore[assignment]

    print(f"# machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} CPUs, "
          f"Python {sys.version.split()[0]}, numpy {np.__version__}, polars {pl.__version__}; engine {args.engine}")
    t = time.perf_counter()
    base = diagnose(make_cases(args.cases, 1))
    cand = diagnose(perturb(make_cases(args.cases, 1), 2))
    print(f"data: {args.cases} paired cases built in {time.perf_counter() - t:.1f}s")

    timings: Dict[str, float] = {}
    t = time.perf_counter()
    comp = compare_frames(base, cand, n_resamples=args.resamples, seed=7, threads=args.threads)
    timings["compare_frames"] = time.perf_counter() - t
    r = comp.row("correct")
    print(f"compare_frames: {len(comp.metrics)} metrics x (overall + {len(comp.groups)} categories), "
          f"{args.resamples} resamples, {args.cases} cases: {timings['compare_frames']:.2f}s "
          f"(target < 10 s); correct delta {100 * r.delta:+.2f}pp [{100 * r.ci_low:+.2f}, {100 * r.ci_high:+.2f}]")

    fb = base.get_column("faithfulness_score").to_numpy()
    fc = cand.get_column("faithfulness_score").to_numpy()
    t = time.perf_counter()
    ci = stats.paired_bootstrap_ci(fb, fc, n_resamples=args.resamples, seed=7)
    timings["engine_continuous"] = time.perf_counter() - t
    print(f"engine, one continuous metric: {timings['engine_continuous']:.2f}s  CI {ci[0]:+.4f} .. {ci[1]:+.4f}")
    cb = base.get_column("correct").cast(pl.Float64).to_numpy()
    cc = cand.get_column("correct").cast(pl.Float64).to_numpy()
    t = time.perf_counter()
    stats.paired_bootstrap_ci(cb, cc, n_resamples=args.resamples, seed=7)
    timings["engine_boolean"] = time.perf_counter() - t
    print(f"engine, one boolean metric (multinomial over distinct values): {timings['engine_boolean']:.3f}s")

    # side by side on a smaller size
    m = args.small
    d = (fc - fb)[:m]
    draws_full = args.cases * args.resamples
    b_small = 1_000
    t = time.perf_counter()
    stats.paired_bootstrap_ci(fb[:m], fc[:m], n_resamples=b_small, seed=7)
    eng = time.perf_counter() - t
    t = time.perf_counter()
    naive_numpy(d, b_small, 7)
    nai = time.perf_counter() - t
    py_b = 50
    t = time.perf_counter()
    plain_python(d.tolist(), py_b, 7)
    py = time.perf_counter() - t
    print(f"\nside by side, one continuous metric, {m} cases:")
    for name, secs, b in (("ragmeter.stats engine", eng, b_small), ("naive numpy (index matrix + gather)", nai, b_small), ("plain Python loop", py, py_b)):
        rate = m * b / secs
        print(f"  {name:<38} {b:>5} resamples {secs:7.2f}s  {rate / 1e6:8.1f} M draws/s  "
              f"-> {draws_full / rate:8.1f}s extrapolated to {args.cases} x {args.resamples}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
