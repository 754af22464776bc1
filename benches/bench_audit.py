"""Golden-set audit with the corpus check: 100,000 chunks x 10,000 evidence phrases.

Generates a corpus (default 2,000 files x 50 chunks of ~300 characters of mixed
Chinese/English text with OCR artefacts: Kangxi radicals, full-width forms,
ideographic spaces, line breaks) and a golden set (5,000 cases x 2 phrases, one
expected file each). Most phrases are copied from a chunk of the case's file;
2% (``--slips``) carry a label slip (one character changed, or ``~`` written ``-``), 0.5% come
from another file and 0.5% occur nowhere. Writes both to a temporary folder
(corpus as Parquet, golden set as JSONL) and times ``ragmeter.audit(golden,
corpus=...)`` end to end (reading, matching in Rust, suggestions), ``--repeat``
times.

    python benches/bench_audit.py [--files 2000] [--chunks 50] [--cases 5000] [--slips 0.02] [--repeat 3] [--no-append]

Appends the timings, the command, ``uptime`` and the machine to benches/RESULTS_audit.md.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path
from typing import List, Tuple

import numpy as np
import polars as pl

import ragmeter

CJK = [chr(c) for c in range(0x4E00, 0x4E00 + 2500)]
WORDS = ("retrieval augmented generation vector index chunk rerank latency hybrid dense sparse embedding "
         "query answer evidence document section table BM25 HNSW API v2.0 2024 99.5% 1.5~2 个月").split()
ARTEFACTS = ["⼤", "⼈", "⽇", "ＡＰＩ", "１２", "　", "\n", "（", "）", "：", "，", "。"]
SEGMENTS_PER_CHUNK = 40


def make_segments(rng: np.random.Generator) -> List[str]:
    cjk = np.array(CJK)
    segments = ["".join(cjk[rng.integers(0, len(CJK), 6)]) for _ in range(20000)]
    segments += [" ".join(WORDS[i] for i in rng.integers(0, len(WORDS), 2)) + " " for _ in range(8000)]
    return segments + ARTEFACTS * 200


def make_data(files: int, chunks_per_file: int, cases: int, slips: float = 0.02, seed: int = 11) -> Tuple[pl.DataFrame, List[dict]]:
    rng = np.random.default_rng(seed)
    segments = make_segments(rng)
    n_chunks = files * chunks_per_file
    picks = rng.integers(0, len(segments), (n_chunks, SEGMENTS_PER_CHUNK))
    texts = ["".join(segments[i] for i in row) for row in picks.tolist()]
    names = [f"dept{f % 40}/doc{f:05d}.pdf" for f in range(files)]
    corpus = pl.DataFrame({
        "file": [names[i // chunks_per_file] for i in range(n_chunks)],
        "chunk_id": [str(i % chunks_per_file) for i in range(n_chunks)],
        "text": texts,
    })
    golden = []
    kinds = rng.random((cases, 2))
    for c in range(cases):
        f = int(rng.integers(0, files))
        phrases = []
        for j in range(2):
            kind = kinds[c, j]
            source_file = f if kind < 0.99 or kind >= 0.995 else (f + 1 + int(rng.integers(0, files - 1))) % files
            chunk = source_file * chunks_per_file + int(rng.integers(0, chunks_per_file))
            start = int(rng.integers(0, SEGMENTS_PER_CHUNK - 3))
            phrase = "".join(segments[i] for i in picks[chunk, start:start + 3]).strip()
            if 0.99 - slips <= kind < 0.99 - slips / 2:  # a slip of one character
                k = len(phrase) // 2
                phrase = phrase[:k] + ("丙" if phrase[k] != "丙" else "丁") + phrase[k + 1:]
            elif 0.99 - slips / 2 <= kind < 0.99:  # the label writes - where the chunk has ~ (or adds a dash)
                phrase = phrase.replace("~", "-") if "~" in phrase else phrase[:4] + "-" + phrase[4:]
            elif kind >= 0.995:  # occurs nowhere
                phrase = f"absent phrase {c}-{j} 不存在的证据"
            phrases.append(phrase)
        golden.append({"id": f"c{c:05d}", "question": f"question {c}?", "category": ("term", "semantic", "multi")[c % 3],
                       "source": ("a", "b", "c")[c % 3], "expectedFileNames": [f"doc{f:05d}.pdf"], "expectedEvidence": phrases})
    return corpus, golden


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "uptime unavailable"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--chunks", type=int, default=50, help="chunks per file")
    ap.add_argument("--cases", type=int, default=5000, help="cases (2 phrases each)")
    ap.add_argument("--slips", type=float, default=0.02, help="share of phrases with a label slip (at most 0.98)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args()

    corpus, golden = make_data(args.files, args.chunks, args.cases, slips=args.slips)
    with tempfile.TemporaryDirectory() as tmp:
        corpus_path, golden_path = Path(tmp) / "chunks.parquet", Path(tmp) / "golden.jsonl"
        corpus.write_parquet(corpus_path)
        golden_path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in golden), encoding="utf-8")
        load_before = uptime()
        times, result = [], None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            result = ragmeter.audit(str(golden_path), corpus=str(corpus_path))
            times.append(time.perf_counter() - t0)
        load_after = uptime()
    assert result is not None
    c = result.corpus
    mb = float(corpus["text"].str.len_bytes().sum()) / 1e6
    codes = result.codes()
    with_hint = sum(1 for w in result.warnings if w.code == "evidence_not_in_corpus" and "the chunk" in w.message)
    lines = [
        f"## {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC",
        "",
        f"Command: `python benches/bench_audit.py --files {args.files} --chunks {args.chunks} --cases {args.cases} --slips {args.slips} --repeat {args.repeat}`  ",
        f"Machine: {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, Python {platform.python_version()}, polars {pl.__version__}  ",
        f"Load: before `{load_before}`; after `{load_after}`  ",
        f"Data: {c['chunks']:,} chunks in {c['files']:,} files ({mb:.1f} MB of text), {len(golden):,} cases, {c['phrases']:,} phrases",
        "",
        "| run | seconds |",
        "|---:|---:|",
        *[f"| {i + 1} | {t:.2f} |" for i, t in enumerate(times)],
        "",
        f"min {min(times):.2f} s, median {sorted(times)[len(times) // 2]:.2f} s, max {max(times):.2f} s "
        f"(spread {max(times) - min(times):.2f} s). Found {c['found']:,}, only in another file {c['in_other_file']:,}, "
        f"not in the corpus {c['not_in_corpus']:,} ({with_hint:,} with a suggestion); warnings by code: "
        + ", ".join(f"{k} {codes.count(k)}" for k in dict.fromkeys(codes)),
        "",
    ]
    print("\n".join(lines))
    if not args.no_append:
        out = Path(__file__).with_name("RESULTS_audit.md")
        head = "" if out.exists() else ("# Golden-set audit with the corpus check\n\n"
                                        "Appended by `benches/bench_audit.py` (one section per run).\n\n")
        with out.open("a", encoding="utf-8") as f:
            f.write(head + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
