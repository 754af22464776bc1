"""Retrieval scoring at scale: score and sweep a generated Parquet run.

    python benches/bench_score.py [--cases 100000] [--chunks 20] [--chars 500] [--thresholds 100]

Generates (seeded) a golden set and a Parquet run of CASES x CHUNKS chunks of
CHARS characters (mixed ASCII / CJK with OCR artefacts), then times, end to end
in this process: loading, evidence matching, rank metrics and aggregates
(``ragmeter.score``), and a sweep over THRESHOLDS thresholds (``ragmeter.sweep``).
Peak RSS is read from /proc (VmHWM) and compared with the Parquet file size and
with the in-memory size of the text column.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ALPHABET = np.frombuffer("abcdefghijklmnopqrstuvwxyz     ".encode(), dtype=np.uint8)


def make_texts(n: int, chars: int, rng: np.random.Generator) -> pa.Array:
    data = ALPHABET[rng.integers(0, len(ALPHABET), size=n * chars, dtype=np.int64)]
    offsets = np.arange(0, (n + 1) * chars, chars, dtype=np.int64)
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data.tobytes()))


def generate(dir_: Path, cases: int, chunks: int, chars: int, seed: int = 7) -> tuple:
    rng = np.random.default_rng(seed)
    n = cases * chunks
    texts = make_texts(n, chars, rng)
    # Plant each case's evidence phrase (with a Kangxi radical) in one chunk of 60% of the cases.
    plant = rng.random(cases) < 0.6
    where = rng.integers(0, chunks, size=cases)
    text_list = texts.to_pylist() if n <= 200_000 else None
    ids = [f"cat{c % 7}-{c:06d}" for c in range(cases)]
    phrases = [f"evidence{c:06d}⼤" for c in range(cases)]
    files = pa.array([f"doc{c % 1000}.md" for c in range(cases)], pa.large_string())
    if text_list is not None:
        for c in np.flatnonzero(plant):
            i = c * chunks + where[c]
            text_list[i] = phrases[c].replace("⼤", "大") + text_list[i][20:]
        texts = pa.array(text_list, pa.large_string())
    else:
        # Overwrite bytes in place for large sizes (phrase is ASCII + one 3-byte char).
        buf = bytearray(texts.buffers()[2].to_pybytes())
        for c in np.flatnonzero(plant):
            start = (c * chunks + where[c]) * chars
            p = phrases[c].replace("⼤", "大").encode()
            buf[start:start + len(p)] = p
        offsets = np.arange(0, (n + 1) * chars, chars, dtype=np.int64)
        texts = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(bytes(buf)))
    chunk_files = pa.DictionaryArray.from_arrays(pa.array(np.repeat(np.arange(cases) % 1000, chunks), pa.int32()),
                                                 pa.array([f"doc{i}.md" for i in range(1000)], pa.large_string())).cast(pa.large_string())
    scores = pa.array(np.round(rng.random(n), 3))
    chunk_ids = pa.array(np.char.add("c", np.arange(n).astype(str)).astype(object), pa.large_string())
    struct = pa.StructArray.from_arrays([chunk_files, chunk_ids, texts, scores], names=["file", "chunk_id", "text", "score"])
    retrieved = pa.LargeListArray.from_arrays(pa.array(np.arange(0, n + 1, chunks, dtype=np.int64)), struct)
    table = pa.table({"id": pa.array(ids, pa.large_string()), "retrieved": retrieved,
                      "answer": pa.array(["a"] * cases, pa.large_string()), "retrieval_mode": pa.array(["hybrid"] * cases)})
    run = dir_ / "run.parquet"
    pq.write_table(table, run, compression="zstd")
    golden = dir_ / "golden.jsonl"
    with golden.open("w", encoding="utf-8") as fh:
        for c in range(cases):
            fh.write(json.dumps({"id": ids[c], "question": "q", "expectedFileNames": [files[c].as_py()],
                                 "expectedEvidence": [phrases[c]], "referenceAnswer": "r"}, ensure_ascii=False) + "\n")
    return golden, run, texts.nbytes


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--chunks", type=int, default=20)
    ap.add_argument("--chars", type=int, default=500)
    ap.add_argument("--thresholds", type=int, default=100)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        golden, run, text_bytes = generate(Path(d), args.cases, args.chunks, args.chars)
        gen = time.perf_counter() - t0
        base_rss = peak_rss_mb()
        import ragmeter

        t0 = time.perf_counter()
        result = ragmeter.score(golden, run, k=5)
        t_score = time.perf_counter() - t0
        t0 = time.perf_counter()
        thresholds = list(np.linspace(0, 1, args.thresholds))
        table = ragmeter.sweep(golden, run, thresholds, k=5)
        t_sweep = time.perf_counter() - t0
        size = os.path.getsize(run)
        print(f"cases={args.cases} chunks={args.chunks} chars={args.chars} parquet={size/1e6:.0f} MB "
              f"text={text_bytes/1e6:.0f} MB (generation {gen:.1f}s, rss after generation {base_rss:.0f} MB)")
        print(f"score end to end: {t_score:.2f} s   hit_rate={result.summary['overall']['hit_rate']['value']:.4f}")
        print(f"sweep of {args.thresholds} thresholds end to end (includes its own load + matching): {t_sweep:.2f} s "
              f"({table.height} rows)")
        print(f"peak RSS {peak_rss_mb():.0f} MB (includes the generator's copies)")


if __name__ == "__main__":
    main()
