"""chunks.parquet's writers side by side: what writing a run's chunk table costs on top of reading the run.

    python benches/bench_chunk_writer.py RUN.parquet [RUN.parquet ...] [--repeat 2]

Each RUN is read slice by slice as ``ragmeter score`` reads it (``ragmeter.dataset.ParquetRun``), and each
slice's chunk rows (id, rank, file, chunk_id, text, score and two marks) are written as one Parquet file by:

- ``read only``: nothing (the cost of reading and building the rows, subtracted from the others);
- ``polars``: Polars' streaming writer (``sink_parquet``), the texts as Polars strings (what ragmeter used
  before 2026-12-02);
- ``pyarrow``: pyarrow's ParquetWriter, one row group per slice, the slices' own Arrow text buffers, no
  dictionary for the texts;
- ``pyarrow+dict``: the same with a dictionary for every column (up to 64 MB per column chunk);
- ``ragmeter``: ``ragmeter._io.write_parquet_parts``: the last two, chosen per column by the first slice
  (a dictionary for the columns that repeat).

Every writer runs in a fresh process (its CPU time, wall clock and peak RSS above the read-only baseline's
start); the table prints the file size too. Runs of `benches/bench_score.py --compare --data DIR` make good
inputs: `DIR/compare-cjk-pdf-20000x20/run.parquet` (texts from a pool of 3,000) and
`--kinds cjk-pdf-distinct` (every text distinct).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WRITERS = ("read only", "polars", "pyarrow", "pyarrow+dict", "ragmeter")


def child(run: Path, writer: str, out: Path) -> dict:
    """Read ``run`` and write its chunk rows with ``writer``; CPU seconds, wall seconds, peak RSS."""
    import itertools

    import numpy as np
    import polars as pl
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ragmeter import _io
    from ragmeter._stream_score import _CHUNK_FIELDS, _large_strings, _with_texts
    from ragmeter.dataset import ParquetRun, arrow_chunk_texts

    reader = ParquetRun(run)

    def parts():  # type: ignore[no-untyped-def]
        for batch, frame in reader:
            offsets, texts = arrow_chunk_texts(batch, frame)
            lengths = np.diff(offsets)
            case = np.repeat(np.arange(len(lengths)), lengths)
            rows = frame.select(pl.col("retrieved").list.eval(pl.element().struct.field(f)).alias(f)
                                for f in _CHUNK_FIELDS)
            rows = rows.select(pl.all().explode(empty_as_null=False, keep_nulls=False))
            marks = pl.DataFrame([frame["id"].gather(case), pl.Series("rank", np.arange(len(case)) + 1),
                                  rows["file"], rows["chunk_id"], rows["score"],
                                  pl.Series("relevant", np.zeros(len(case), bool)),
                                  pl.Series("file_match", np.zeros(len(case), bool))])
            yield _with_texts(marks, _large_strings(texts))  # the chunk table's columns, as the spool writes them

    start_cpu, start = time.process_time(), time.monotonic()
    stream = parts()
    if writer == "read only":
        for _ in stream:
            pass
    elif writer == "ragmeter":
        first = next(stream)
        _io.write_parquet_parts(itertools.chain([first], stream), out, first.schema)
    elif writer == "polars":
        from polars.io.plugins import register_io_source

        first = next(stream)
        frames = (pl.from_arrow(p) for p in itertools.chain([first], stream))
        register_io_source(io_source=lambda *_: frames, schema=pl.from_arrow(first.schema.empty_table()).schema
                           ).sink_parquet(out)
    else:
        first = next(stream)
        dictionary = True if writer == "pyarrow+dict" else [n for n in first.schema.names if n != "text"]
        with pq.ParquetWriter(out, first.schema, compression="zstd", use_dictionary=dictionary,
                              dictionary_pagesize_limit=64 << 20) as w:
            for part in itertools.chain([first], stream):
                w.write_table(part)
    cpu, wall = time.process_time() - start_cpu, time.monotonic() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return {"cpu": cpu, "wall": wall, "peak_mb": peak, "size_mb": out.stat().st_size / 2**20 if out.exists() else 0,
            "pa": pa.__version__, "pl": pl.__version__}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--repeat", type=int, default=2, help="runs of each writer (the best is shown)")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        for run in args.runs:
            print(f"\n{run} ({run.stat().st_size / 2**20:.0f} MB)")
            print("| writer | CPU s (runs) | over read only | wall s | peak RSS MB | over read only | file MB |")
            print("|---|---:|---:|---:|---:|---:|---:|")
            base = None
            for writer in WRITERS:
                got = []
                for _ in range(args.repeat):
                    out = Path(tmp) / "chunks.parquet"
                    out.unlink(missing_ok=True)
                    proc = subprocess.run([sys.executable, __file__, "--_child", str(run), writer, str(out)],
                                          capture_output=True, text=True, check=True)
                    got.append(json.loads(proc.stdout.strip().splitlines()[-1]))
                best = min(got, key=lambda r: r["cpu"])
                if base is None:
                    base = best
                runs = ", ".join(f"{r['cpu']:.2f}" for r in got)
                print(f"| {writer} | {best['cpu']:.2f} ({runs}) | {best['cpu'] - base['cpu']:+.2f} "
                      f"| {best['wall']:.2f} "
                      f"| {best['peak_mb']} | {best['peak_mb'] - base['peak_mb']:+d} | {best['size_mb']:.0f} |")
            print(f"pyarrow {base['pa']}, polars {base['pl']}; load average after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--_child":
        print(json.dumps(child(Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]))))
    else:
        main()
