"""Where the memory of one ``ragmeter score`` run goes, over time (a diagnostic, not a benchmark).

Runs the command in this process with a sampler thread that reads, every 5 ms: the resident set (all of it,
and the part mapped from files: the libraries' code), the bytes held by pyarrow's jemalloc pool (the run's
slices), glibc malloc's bytes in use (numpy, the Rust core, Python's larger objects) and the main thread's
innermost ragmeter frame. Prints the peak with its breakdown, then a line per ``--step`` seconds.

    python benches/score_memory.py --step 0.5 -- score --golden G --run R --out DIR

What the breakdown does not name (the resident set less the four parts) is mostly Polars' own jemalloc,
Python's small-object arenas and thread stacks. Linux with glibc only (``/proc/self/statm``, mallinfo2).
"""
from __future__ import annotations

import argparse
import ctypes
import os
import sys
import threading
import time
from typing import List, NamedTuple

PAGE = os.sysconf("SC_PAGE_SIZE")


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]


class Sample(NamedTuple):
    t: float
    rss: int
    file_backed: int
    arrow_jemalloc: int
    malloc: int
    where: str


def _mb(n: int) -> int:
    return n >> 20


def _where(frame) -> str:  # type: ignore[no-untyped-def]
    while frame is not None:
        name = frame.f_code.co_filename
        if "ragmeter" in name and "score_memory" not in name:
            return f"{os.path.basename(name)}:{frame.f_code.co_name}"
        frame = frame.f_back
    return "-"


def sample_while(run, step: float = 0.005) -> List[Sample]:  # type: ignore[no-untyped-def]
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    main = threading.get_ident()
    samples: List[Sample] = []
    done = threading.Event()
    start = time.perf_counter()

    def sampler() -> None:
        while not done.is_set():
            with open("/proc/self/statm") as f:
                fields = f.read().split()
            arrow = sys.modules.get("pyarrow")
            try:
                pool = arrow.jemalloc_memory_pool().bytes_allocated() if arrow is not None else 0
            except (AttributeError, NotImplementedError):
                pool = 0
            info = libc.mallinfo2()
            samples.append(Sample(time.perf_counter() - start, int(fields[1]) * PAGE, int(fields[2]) * PAGE, pool,
                                  info.uordblks + info.hblkhd, _where(sys._current_frames().get(main))))
            time.sleep(step)

    thread = threading.Thread(target=sampler, daemon=True)
    thread.start()
    try:
        run()
    finally:
        done.set()
        thread.join()
    return samples


def _line(s: Sample) -> str:
    rest = s.rss - s.file_backed - s.arrow_jemalloc - s.malloc
    return (f"{s.t:6.2f} s  rss {_mb(s.rss):5d}  code/files {_mb(s.file_backed):4d}"
            f"  arrow pool {_mb(s.arrow_jemalloc):4d}  malloc {_mb(s.malloc):4d}  other {_mb(rest):4d}  {s.where}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--step", type=float, default=0.25, help="seconds between the lines printed")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="the ragmeter command line, after --")
    args = ap.parse_args()
    argv = args.command[1:] if args.command[:1] == ["--"] else args.command
    from ragmeter.cli import main as ragmeter_main

    codes: List[int] = []
    samples = sample_while(lambda: codes.append(ragmeter_main(argv)))
    peak = max(samples, key=lambda s: s.rss)
    print(f"exit {codes[0] if codes else '?'}; peak (MB):", _line(peak), sep="\n", file=sys.stderr)
    last = -args.step
    for s in samples:
        if s.t - last >= args.step:
            last = s.t
            print(_line(s), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
