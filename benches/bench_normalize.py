"""Normalise + match alone, one thread: ragmeter's batch matcher vs CPython's pipeline.

    python benches/bench_normalize.py [--mb 20] [--repeat 5]
    python benches/bench_normalize.py --candidates [--mb 20] [--repeat 5]   # issue 15 item 1, builds ICU4X

Three text kinds, each about MB megabytes of UTF-8 in 500-character texts:

* ``ascii``: English words, spaces and line breaks;
* ``cjk-pdf``: Chinese text as a PDF extractor gives it, with about 2% Kangxi
  radicals, full-width digits and punctuation (，。：（）), line breaks;
* ``mix``: the adversarial mix of ``bench_evidence.py`` (half CJK, half
  English, Kangxi radicals, full-width forms, ideographic spaces, broken lines).

Each text is normalised with ``ragmeter._core.evidence_normalize`` (Rust, one
call per text, so the per-call overhead is included) and with the plain
Python pipeline (``unicodedata.normalize('NFKC')``, ``re.sub(r'\\s+', '')``,
``lower()``); the outputs of both are compared (the Python one differs from
the definition only in the invisible characters, which these texts lack).
Reports MB/s of input UTF-8 per thread: best and spread over ``--repeat`` runs.
To compare two builds, run it with each one's PYTHONPATH.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

import numpy as np

CHARS = 500
WORDS = ("retrieval augmented generation vector index chunk rerank latency hybrid dense sparse embedding "
         "query answer evidence document section table figure the of and to in is for with BM25 HNSW API").split()
CJK = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
KANGXI = ["⼤", "⼈", "⾔", "⽂", "⼒", "⽇", "⽉", "⼭"]
PUNCT = ["，", "。", "：", "（", "）", "、", "；", "“", "”"]
FULL_DIGITS = [chr(0xFF10 + d) for d in range(10)]


def ascii_texts(rng, n):
    out = []
    for _ in range(n):
        words = [WORDS[i] for i in rng.integers(0, len(WORDS), CHARS // 5)]
        t = " ".join(words)
        t = t.replace(" the ", " the\n", 3)
        out.append(t[:CHARS])
    return out


def cjk_pdf_texts(rng, n):
    out = []
    for _ in range(n):
        chars = []
        for _ in range(CHARS):
            r = rng.random()
            if r < 0.02:
                chars.append(KANGXI[rng.integers(len(KANGXI))])
            elif r < 0.03:
                chars.append(FULL_DIGITS[rng.integers(10)])
            elif r < 0.08:
                chars.append(PUNCT[rng.integers(len(PUNCT))])
            elif r < 0.09:
                chars.append("\n")
            elif r < 0.10:
                chars.append(" ")
            else:
                chars.append(CJK[rng.integers(len(CJK))])
        out.append("".join(chars))
    return out


def mix_texts(rng, n):
    artefacts = ["⼤", "⼈", "⾔", "ＡＰＩ", "１２", "　", "\n", "-\n", "（", "）", "：", "，", "。"]
    segs = ["".join(CJK[i] for i in rng.integers(0, len(CJK), 6)) for _ in range(600)]
    segs += [" ".join(WORDS[i] for i in rng.integers(0, len(WORDS), 3)) + " " for _ in range(450)]
    segs += artefacts * 10
    return ["".join(segs[i] for i in rng.integers(0, len(segs), CHARS // 6))[:CHARS] for _ in range(n)]


KINDS = {"ascii": ascii_texts, "cjk-pdf": cjk_pdf_texts, "mix": mix_texts}
_WS = re.compile(r"\s+")


def python_pipeline(t: str) -> str:
    return _WS.sub("", unicodedata.normalize("NFKC", t)).lower()


def timed(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def batch(texts, rng):
    """Cases of 20 chunks, 3 phrases each cut out of the case's texts (so that some match)."""
    n_cases = len(texts) // 20
    chunk_texts = [texts[c * 20:(c + 1) * 20] for c in range(n_cases)]
    phrases = []
    for c in range(n_cases):
        picks = []
        for _ in range(3):
            t = chunk_texts[c][int(rng.integers(0, 20))]
            i = int(rng.integers(0, max(1, len(t) - 12)))
            picks.append(t[i:i + 10])
        phrases.append(picks)
    return chunk_texts, phrases


def kind_texts(kind: str, mb: float):
    """About MB megabytes of texts of one kind (a multiple of 20), and the generator for what follows."""
    rng = np.random.default_rng(7)
    sample = KINDS[kind](rng, 200)
    per_text = sum(len(t.encode()) for t in sample) / len(sample)
    n = int(mb * 1e6 / per_text) // 20 * 20
    return rng, KINDS[kind](rng, n)


def candidates(mb: float, repeat: int, dump_dir: str, samples_per_range: int) -> None:
    """Issue 15 item 1: the normaliser candidates of benches/normalize_candidates/ on the same texts.

    Writes each kind's texts NUL-separated to DUMP_DIR, then runs the Rust package's `check` (ICU4X's pipeline
    against ragmeter's normaliser on these texts, the shared vectors, every scalar value and random strings
    from every block) and `bench` (MB/s per candidate, one thread). Uses CARGO_TARGET_DIR if set.
    """
    root = Path(__file__).resolve().parents[1]
    out = Path(dump_dir)
    out.mkdir(parents=True, exist_ok=True)
    for kind in KINDS:
        texts = kind_texts(kind, mb)[1]
        assert not any("\0" in t for t in texts)
        (out / f"{kind}.txt").write_text("\0".join(texts), encoding="utf-8")
    manifest = root / "benches" / "normalize_candidates" / "Cargo.toml"
    run = ["cargo", "run", "--quiet", "--release", "--manifest-path", str(manifest), "--"]
    subprocess.run(run + ["check", str(out), str(root / "testdata" / "evidence_vectors.json"), str(samples_per_range)], check=True)
    print(f"load before: {os.getloadavg()}", flush=True)
    subprocess.run(run + ["bench", str(out), str(repeat)], check=True)
    print(f"load after: {os.getloadavg()}")


def one_kind(kind: str, mb: float, repeat: int) -> None:
    import polars as pl

    from ragmeter.evidence import match_relevance

    rng, texts = kind_texts(kind, mb)
    size = sum(len(t.encode()) for t in texts) / 1e6
    chunk_texts, phrases = batch(texts, rng)
    n_cases = len(chunk_texts)
    cols = [pl.Series([[] for _ in range(n_cases)], dtype=pl.List(pl.String)), pl.Series(phrases, dtype=pl.List(pl.String)),
            pl.Series([["f.md"] * 20] * n_cases, dtype=pl.List(pl.String)), pl.Series(chunk_texts, dtype=pl.List(pl.String))]
    out = {}
    for run_wide in (False, True):
        out[run_wide] = timed(lambda: match_relevance(*cols, run_wide=run_wide), repeat)
    m = match_relevance(*cols)

    def python_all():
        found = []
        for case_texts, case_phrases in zip(chunk_texts, phrases):
            ps = [python_pipeline(p) for p in case_phrases]
            for t in case_texts:
                nt = python_pipeline(t)
                found.append(sum(p in nt for p in ps if p))
        return found

    py_cases = max(1, n_cases // 5)
    full = (chunk_texts, phrases)
    chunk_texts, phrases = full[0][:py_cases], full[1][:py_cases]
    t0 = time.perf_counter()
    py_found = python_all()
    py = (time.perf_counter() - t0) * n_cases / py_cases
    same = py_found == m.phrases_found[: py_cases * 20].tolist()
    best, best_w = min(out[False]), min(out[True])
    print(f"{kind:8} {size:6.1f} {size / best:8.0f} ({size / max(out[False]):.0f}-{size / best:.0f})"
          f" {size / best_w:8.0f} ({size / max(out[True]):.0f}-{size / best_w:.0f}) {100 * (best_w / best - 1):+5.0f}%"
          f" {size / py:9.1f} {py / best:6.1f}  {'same hits' if same else 'HITS DIFFER'}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--kind", choices=list(KINDS), help=argparse.SUPPRESS)  # child process
    ap.add_argument("--candidates", action="store_true",
                    help="measure the normaliser candidates (benches/normalize_candidates/, builds ICU4X) instead")
    ap.add_argument("--dump-dir", default="/tmp/ragmeter-normalize-candidates", help="where --candidates writes the texts")
    ap.add_argument("--samples-per-range", type=int, default=24,
                    help="--candidates: random strings per 16-code-point range in the equality check")
    args = ap.parse_args()
    if args.candidates:
        candidates(args.mb, args.repeat, args.dump_dir, args.samples_per_range)
        return
    if args.kind:
        one_kind(args.kind, args.mb, args.repeat)
        return
    print(f"load before: {os.getloadavg()}; one thread (RAYON_NUM_THREADS=1); MB = UTF-8 of the chunk texts")
    print(f"{'kind':8} {'MB':>6} {'match MB/s (spread)':>20} {'+run-wide (spread)':>20} {'cost':>5} {'python MB/s':>9} {'x':>6}")
    env = dict(os.environ, RAYON_NUM_THREADS="1")
    for kind in KINDS:
        subprocess.run([sys.executable, __file__, "--kind", kind, "--mb", str(args.mb), "--repeat", str(args.repeat)], env=env, check=True)
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
