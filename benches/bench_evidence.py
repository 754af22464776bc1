"""Evidence matching incl. normalisation: Rust batch vs a straightforward Python version.

Generates a run (default 100,000 cases x 20 chunks x 500 characters of mixed
Chinese/English text with OCR artefacts, 3 evidence phrases and 1-2 expected
files per case), decides relevance for every chunk with
``ragmeter.evidence.match_relevance`` (Rust, all cores, GIL released), and
with the obvious Python code (``unicodedata.normalize`` + ``re.sub`` +
``.lower()`` + ``in``) on the first ``--py-cases`` cases (the Python side is
scaled down; throughputs are compared per chunk). Both run in the same
process, one after the other, and their answers are compared on the shared
cases.

    python benches/bench_evidence.py [--cases 100000] [--py-cases 5000] [--no-append]

Appends the table, the command and the machine to benches/RESULTS_evidence.md.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import re
import sys
import time
import unicodedata
from pathlib import Path
from typing import List, Tuple

import numpy as np
import polars as pl

from ragmeter.evidence import match_relevance

CHUNKS = 20
CHARS = 500
PHRASES = 3

CJK = [chr(c) for c in range(0x4E00, 0x4E00 + 2500)]
WORDS = (
    "retrieval augmented generation vector index chunk rerank latency hybrid dense sparse "
    "embedding query answer evidence document section table figure the of and to in is for with "
    "BM25 HNSW Kubernetes PostgreSQL API v2.0 2024 99.5% 1.5~2s"
).split()
# OCR/PDF artefacts mixed into the text: Kangxi radicals, full-width forms, ideographic spaces, broken lines.
ARTEFACTS = ["⼤", "⼈", "⾔", "ＡＰＩ", "１２", "　", "\n", "-\n", "（", "）", "：", "，", "。"]


def make_pool(rng: np.random.Generator, size: int) -> List[str]:
    """Distinct ~CHARS-character texts, about half CJK, half English words, with artefacts."""
    cjk = np.array(CJK)
    segments = ["".join(cjk[rng.integers(0, len(CJK), 6)]) for _ in range(6000)]
    segments += [" ".join(WORDS[i] for i in rng.integers(0, len(WORDS), 3)) + " " for _ in range(4500)]
    segments += ARTEFACTS * 100
    picks = rng.integers(0, len(segments), (size, CHARS // 6)).tolist()
    return ["".join([segments[i] for i in row])[:CHARS] for row in picks]


def make_batch(n_cases: int, seed: int = 7) -> Tuple[pl.DataFrame, List[str]]:
    rng = np.random.default_rng(seed)
    pool = make_pool(rng, min(50_000, max(1000, n_cases * CHUNKS // 8)))
    pool_s = pl.Series("text", pool)
    n_chunks = n_cases * CHUNKS
    text_idx = rng.integers(0, len(pool), n_chunks)
    file_idx = rng.integers(0, 200, n_chunks)
    files = pl.Series([f"docs/section-{i:03d}.pdf" for i in range(200)])
    flat = pl.DataFrame({
        "case": np.repeat(np.arange(n_cases, dtype=np.int64), CHUNKS),
        "file": files.gather(file_idx),
        "text": pool_s.gather(text_idx),
    })
    grouped = flat.group_by("case", maintain_order=True).agg(pl.col("file").alias("chunk_files"), pl.col("text").alias("chunk_texts"))
    # Expected files: the file of chunk 0..2 (basename, other case), sometimes a second one.
    first_rank = rng.integers(0, 5, n_cases)
    second = rng.integers(0, 200, n_cases).tolist()
    two_files = (rng.random(n_cases) >= 0.7).tolist()
    starts = rng.integers(0, CHARS - 20, (n_cases, PHRASES - 1)).tolist()
    lengths = rng.integers(6, 16, (n_cases, PHRASES - 1)).tolist()
    base_files = [f.split("/")[-1].upper() for f in files.to_list()]
    answer = (np.arange(n_cases) * CHUNKS + first_rank)
    answer_file = file_idx[answer].tolist()
    answer_text = text_idx[answer].tolist()
    exp_files = []
    phrases = []
    for c in range(n_cases):
        f = base_files[answer_file[c]]
        exp_files.append([f, f"docs/section-{second[c]:03d}.pdf"] if two_files[c] else [f])
        text = pool[answer_text[c]]
        ps = [text[i : i + n] for i, n in zip(starts[c], lengths[c])]
        ps.append("一二三 not in any chunk")
        phrases.append(ps)
    batch = grouped.with_columns(
        pl.Series("expected_files", exp_files, dtype=pl.List(pl.String)),
        pl.Series("expected_evidence", phrases, dtype=pl.List(pl.String)),
    )
    return batch, pool


# -- the straightforward Python version ------------------------------------------------

_WS = re.compile(r"\s+")


def py_normalize(text: str) -> str:
    return _WS.sub("", unicodedata.normalize("NFKC", text)).lower()


def py_relevance(batch: pl.DataFrame) -> List[bool]:
    out: List[bool] = []
    for files, phrases, chunk_files, chunk_texts in batch.select("expected_files", "expected_evidence", "chunk_files", "chunk_texts").iter_rows():
        wanted = [f.lower() for f in files]
        norm_phrases = [p for p in (py_normalize(p) for p in phrases) if p]
        for f, t in zip(chunk_files, chunk_texts):
            name = f.lower()
            file_ok = not wanted or any(name == w or name.endswith("/" + w) or w.endswith("/" + name) for w in wanted)
            norm = py_normalize(t)
            found = any(p in norm for p in norm_phrases)
            out.append(file_ok and (found or not norm_phrases))
    return out


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--py-cases", type=int, default=5_000)
    ap.add_argument("--repeat", type=int, default=3, help="Rust repetitions (best is reported)")
    ap.add_argument("--no-append", action="store_true", help="do not append to benches/RESULTS_evidence.md")
    args = ap.parse_args()

    load_before = os.getloadavg()
    t0 = time.perf_counter()
    batch, _ = make_batch(args.cases)
    gen_s = time.perf_counter() - t0
    n_chunks = args.cases * CHUNKS
    text_bytes = int(batch["chunk_texts"].list.eval(pl.element().str.len_bytes()).list.sum().sum())
    print(f"generated {args.cases:,} cases x {CHUNKS} chunks x {CHARS} chars ({text_bytes / 1e9:.2f} GB UTF-8) in {gen_s:.1f} s", flush=True)

    cols = [batch["expected_files"], batch["expected_evidence"], batch["chunk_files"], batch["chunk_texts"]]
    rust_times = []
    for _ in range(max(1, args.repeat)):
        t0 = time.perf_counter()
        m = match_relevance(*cols)
        rust_times.append(time.perf_counter() - t0)
    rust_s = min(rust_times)
    # The same match plus the run-wide check score() asks for (phrases found in no chunk of the run).
    wide_times = []
    for _ in range(max(1, args.repeat)):
        t0 = time.perf_counter()
        match_relevance(*cols, run_wide=True)
        wide_times.append(time.perf_counter() - t0)
    wide_s = min(wide_times)

    py_batch = batch.head(args.py_cases)
    py_chunks = py_batch.height * CHUNKS
    t0 = time.perf_counter()
    py_rel = py_relevance(py_batch)
    py_s = time.perf_counter() - t0

    rust_rel = m.relevant[:py_chunks].tolist()
    mismatches = sum(a != b for a, b in zip(rust_rel, py_rel))
    relevant_share = float(np.mean(m.relevant)) if n_chunks else 0.0

    rust_rate = n_chunks / rust_s
    wide_rate = n_chunks / wide_s
    py_rate = py_chunks / py_s
    rows = [
        ("Rust (ragmeter.evidence.match_relevance)", args.cases, n_chunks, rust_s, rust_rate, 1e6 / rust_rate, rust_rate / py_rate),
        ("Rust, run_wide=True (+ phrases found in no chunk of the run)", args.cases, n_chunks, wide_s, wide_rate, 1e6 / wide_rate, wide_rate / py_rate),
        ("Python (unicodedata + re.sub + lower + in)", py_batch.height, py_chunks, py_s, py_rate, 1e6 / py_rate, 1.0),
    ]
    header = "| implementation | cases | chunks | seconds | chunks/s | µs/chunk | speed-up |"
    sep = "|---|---:|---:|---:|---:|---:|---:|"
    lines = [header, sep] + [
        f"| {name} | {c:,} | {k:,} | {s:.2f} | {r:,.0f} | {us:.2f} | {x:.1f}x |" for name, c, k, s, r, us, x in rows
    ]
    table = "\n".join(lines)
    print()
    print(table)
    print()
    print(f"relevant chunks: {relevant_share:.1%}; Rust vs Python disagreements on the shared {py_chunks:,} chunks: {mismatches}")
    print(f"Rust runs (s): {', '.join(f'{t:.2f}' for t in rust_times)}; run_wide: {', '.join(f'{t:.2f}' for t in wide_times)}")
    load_after = os.getloadavg()
    load = f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after (other processes compete for the CPUs when this exceeds the CPU count)"
    print(load)

    if not args.no_append:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        machine = f"{os.cpu_count()} CPUs (nproc), {cpu_model()}, {mem:.0f} GiB RAM, Python {platform.python_version()}, polars {pl.__version__}"
        cmd = "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])
        with (Path(__file__).parent / "RESULTS_evidence.md").open("a", encoding="utf-8") as fh:
            fh.write(
                f"\n## {_dt.datetime.now().strftime('%Y-%m-%d %H:%M')}\n\n"
                f"Command: `{cmd}`  \nMachine: {machine}  \n"
                f"Data: {args.cases:,} cases x {CHUNKS} chunks x {CHARS} chars, mixed CJK/English with OCR artefacts, "
                f"{PHRASES} phrases per case ({text_bytes / 1e9:.2f} GB of chunk text). Python side on the first "
                f"{py_batch.height:,} cases; Rust time is the best of {len(rust_times)} runs, end to end from Polars columns.\n\n"
                f"{table}\n\nRust vs Python disagreements on shared chunks: {mismatches}; relevant chunks: {relevant_share:.1%}; "
                f"Rust runs (s): {', '.join(f'{t:.2f}' for t in rust_times)}; run_wide runs (s): {', '.join(f'{t:.2f}' for t in wide_times)}; {load}.\n"
            )


if __name__ == "__main__":
    main()
