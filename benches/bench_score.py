"""Retrieval scoring at scale: score and sweep a generated Parquet run.

    python benches/bench_score.py [--cases 100000] [--chunks 20] [--chars 500] [--thresholds 100]
                                   [--row-group-size 10000] [--data DIR] [--no-append]

Generates (seeded) a golden set and a Parquet run of CASES x CHUNKS chunks of
CHARS characters (random lower-case ASCII words; each case's evidence
phrase ends in a Kangxi radical, planted with the unified ideograph in 60% of the cases), then times, end to end
in a fresh child process: loading, evidence matching, rank metrics and aggregates
(``ragmeter.score``), and a sweep over THRESHOLDS thresholds (``ragmeter.sweep``,
end to end, and the sweep alone on an already prepared match). The Parquet run
is written in row groups of ROW_GROUP_SIZE cases (10,000 by default), as a real
run file would be. The measurement runs in a fresh child process, whose peak RSS
(VmHWM from /proc) is compared with the Parquet file size and with the chunk
text size. ``--data DIR`` keeps the generated files for re-runs. Appends the
results, command, machine and load average to benches/RESULTS_score.md.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# numpy and pyarrow are imported where data is generated: the timed child processes (the plain-Python scorers
# above all) pay only for what they use themselves.
ALPHABET = "abcdefghijklmnopqrstuvwxyz     "


def make_texts(n: int, chars: int, rng):  # type: ignore[no-untyped-def]
    import numpy as np
    import pyarrow as pa

    alphabet = np.frombuffer(ALPHABET.encode(), dtype=np.uint8)
    data = alphabet[rng.integers(0, len(alphabet), size=n * chars, dtype=np.int64)]
    offsets = np.arange(0, (n + 1) * chars, chars, dtype=np.int64)
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data.tobytes()))


def generate(dir_: Path, cases: int, chunks: int, chars: int, seed: int = 7, row_group_size: int = 10_000) -> tuple:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

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
    # Row groups as a real run file would have them (one row group would serialise the read).
    pq.write_table(table, run, compression="zstd", row_group_size=row_group_size)
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


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def measure(golden: Path, run: Path, n_thresholds: int) -> dict:
    """Score and sweep in this (fresh) process; returns timings and peak RSS."""
    import numpy as np
    import polars as pl

    import ragmeter

    base_rss = peak_rss_mb()
    t0 = time.perf_counter()
    result = ragmeter.score(golden, run, k=5)
    t_score = time.perf_counter() - t0
    rss_score = peak_rss_mb()
    del result
    thresholds = list(np.linspace(0, 1, n_thresholds))
    t0 = time.perf_counter()
    table = ragmeter.sweep(golden, run, thresholds, k=5)
    t_sweep = time.perf_counter() - t0
    # The sweep proper, given the prepared match (what a caller that already scored pays).
    from ragmeter.retrieval import _prepared_match, _sweep_prepared

    prepared = _prepared_match(golden, run)
    t0 = time.perf_counter()
    _sweep_prepared(prepared, thresholds, 5)
    t_sweep_only = time.perf_counter() - t0
    res = ragmeter.score(golden, run, k=5)
    return {
        "score_s": t_score, "sweep_s": t_sweep, "sweep_only_s": t_sweep_only, "rows": table.height,
        "hit_rate": res.summary["overall"]["hit_rate"]["value"], "n_unfound": len(res.summary["unfound_evidence"]),
        "base_rss_mb": base_rss, "score_rss_mb": rss_score, "peak_rss_mb": peak_rss_mb(), "polars": pl.__version__,
    }


# ---------------------------------------------------------------------------
# --compare: ragmeter score vs the plain-Python scorer, three text kinds
# ---------------------------------------------------------------------------

KIND_PLANT = {"ascii": ("evidence{c:06d}x", "evidence{c:06d}X"), "cjk-pdf": ("证据{c:06d}大", "证据{c:06d}⼤"), "mix": ("证据 {c:06d} API", "证据{c:06d}ＡＰＩ")}


def generate_kind(dir_: Path, cases: int, chunks: int, kind: str, seed: int = 11) -> None:
    """A golden set and Parquet run whose chunk texts are of one kind of bench_normalize.py (500 characters),
    drawn from a pool of 3,000 texts (the same chunk retrieved for many questions); ``KIND-distinct``: each
    chunk's first 8 characters are its own number, so that no two texts are the same."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    sys.path.insert(0, str(Path(__file__).parent))
    from bench_normalize import KINDS

    distinct = kind.endswith("-distinct")
    kind = kind.removesuffix("-distinct")
    rng = np.random.default_rng(seed)
    pool = KINDS[kind](rng, 3000)
    n = cases * chunks
    idx = rng.integers(0, len(pool), n)
    texts = [pool[i] for i in idx.tolist()]
    if distinct:
        texts = [f"{j:08d}" + t[8:] for j, t in enumerate(texts)]
    plant = rng.random(cases) < 0.6
    where = rng.integers(0, chunks, cases)
    in_text, in_golden = KIND_PLANT[kind]
    for c in np.flatnonzero(plant).tolist():
        i = c * chunks + int(where[c])
        p = in_text.format(c=c)
        texts[i] = texts[i][:100] + p + texts[i][100 + len(p):]
    case_of = np.repeat(np.arange(cases), chunks)
    rank = np.tile(np.arange(chunks), cases)
    same_file = (rank % 4 == 0) | (rank == np.repeat(where, chunks))
    file_no = np.where(same_file, case_of % 1000, (case_of + rank + 1) % 1000)
    files = pa.array([f"kb/doc{f}.md" for f in file_no.tolist()], pa.large_string())
    struct = pa.StructArray.from_arrays([files, pa.array(texts, pa.large_string()), pa.array(np.round(rng.random(n), 3))],
                                        names=["file", "text", "score"])
    retrieved = pa.LargeListArray.from_arrays(pa.array(np.arange(0, n + 1, chunks, dtype=np.int64)), struct)
    ids = [f"q{c:06d}" for c in range(cases)]
    pq.write_table(pa.table({"id": pa.array(ids, pa.large_string()), "retrieved": retrieved}), dir_ / "run.parquet",
                   compression="zstd", row_group_size=10_000)
    write_kind_golden(dir_, cases, kind)


#: A golden set's categories and sources, as a real one has them (before 2026-12-03 the bench's golden set had
#: neither, so every id was a category of its own and the audit pointer was skipped)
CATEGORIES = ("term", "semantic", "multi", "boundary", "conflict", "table", "numeric", "negation")
SOURCES = ("deepseek", "zhipu", "bailian")


def write_kind_golden(dir_: Path, cases: int, kind: str) -> None:
    in_golden = KIND_PLANT[kind.removesuffix("-distinct")][1]
    with (dir_ / "golden.jsonl").open("w", encoding="utf-8") as fh:
        for c in range(cases):
            fh.write(json.dumps({"id": f"q{c:06d}", "question": f"question {c}?", "expectedFileNames": [f"doc{c % 1000}.md"],
                                 "expectedEvidence": [in_golden.format(c=c)], "referenceAnswer": "r",
                                 "category": CATEGORIES[c % len(CATEGORIES)], "source": SOURCES[c % len(SOURCES)]},
                                ensure_ascii=False) + "\n")


def _golden_is_current(path: Path) -> bool:
    with path.open(encoding="utf-8") as fh:
        return "category" in json.loads(fh.readline())


def plain_python_hits(golden: Path, run: Path, top: int, cases: int) -> tuple:
    """The script a user would write: NFKC, drop white space, lower-case, `in`, over the first `top` chunks.
    Reads the whole golden set and run as the script would, then scores the first ``cases`` cases. Returns the
    hits and the seconds of that per-case part (taking the chunks out of the frame and the loop), the only part
    a shorter run (--py-cases) scales."""
    import re
    import unicodedata

    import polars as pl

    ws = re.compile(r"\s+")

    def norm(t: str) -> str:
        return ws.sub("", unicodedata.normalize("NFKC", t)).lower()

    gold = {}
    with golden.open(encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            gold[r["id"]] = ([f.lower() for f in r["expectedFileNames"]], [norm(p) for p in r["expectedEvidence"]])
    # The whole file is read, as the script would. Before 2026-12-05 only the rows scored were read and that read
    # (whole row groups of 10,000 cases) was scaled with the loop, as was the golden set's: --py-cases 5,000 made
    # the top-5 scorer of 20,000 ASCII cases 1.75 s where it runs in 1.0 s.
    df = pl.read_parquet(run)
    t0 = time.perf_counter()
    heads = df.head(cases).select("id", pl.col("retrieved").list.head(top).list.eval(pl.element().struct.field("file")).alias("f"),
                      pl.col("retrieved").list.head(top).list.eval(pl.element().struct.field("text")).alias("t"))
    hits = []
    for cid, fs, ts in zip(heads["id"].to_list(), heads["f"].to_list(), heads["t"].to_list()):
        exp_files, phrases = gold[cid]
        first = 0
        for r, (f, t) in enumerate(zip(fs, ts), start=1):
            if any(f.lower().endswith("/" + e) or f.lower() == e for e in exp_files):
                nt = norm(t)
                if any(p and p in nt for p in phrases):
                    first = r
                    break
        hits.append(0 < first <= 5)
    return hits, time.perf_counter() - t0


def compare_child(mode: str, golden: Path, run: Path, cases: int) -> dict:
    t0 = time.perf_counter()
    if mode == "ragmeter":
        import ragmeter

        t_import = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = ragmeter.score(golden, run, k=5)
        t = time.perf_counter() - t0
        hits = res.cases["hit"].head(cases).to_list()
        return {"s": t, "import_s": t_import, "hits": hits, "unfound": len(res.summary["unfound_evidence"])}
    if mode == "read-floor":  # what any scorer that reads the run with Polars pays before it scores
        import polars as pl

        pl.read_parquet(run)
        return {"s": time.perf_counter() - t0, "hits": []}
    top = 5 if mode == "python-top5" else 10**9
    hits, per_case_s = plain_python_hits(golden, run, top, cases)
    return {"s": time.perf_counter() - t0, "per_case_s": per_case_s, "hits": hits}


#: Runs argv[2:] as its child and writes the child's peak RSS (kB) to the file argv[1]. Linux carries a
#: process's RSS high-water mark over fork and exec, so a child forked straight from this bench (which may
#: have grown to GBs generating the data) would report the bench's peak; this launcher is a few MB.
_LAUNCHER = """import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    fh.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def _child(argv: list, env: dict = None) -> tuple:
    """Run ``argv`` in a fresh process: (exit status, stdout, wall seconds, peak RSS in MB of that child alone,
    by way of :data:`_LAUNCHER`)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", _LAUNCHER, rss.name, *map(str, argv)],
                                stdout=out, stderr=err, env=env)
        proc.wait()
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        text, errors = out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")
        peak_kb = int(rss.read() or 0)
    if proc.returncode:
        raise SystemExit(f"{' '.join(map(str, argv))}: exit status {proc.returncode}\n{errors[-2000:]}")
    return proc.returncode, text, wall, peak_kb / 1024


def _cli() -> list:
    """The ``ragmeter`` command as users run it (the console script, else ``python -m ragmeter``)."""
    import shutil

    script = shutil.which("ragmeter")
    if script and "/shims/" in script:  # pyenv's shim is a bash script that finds the real one (0.1 s here)
        found = subprocess.run(["pyenv", "which", "ragmeter"], capture_output=True, text=True)
        script = found.stdout.strip() if found.returncode == 0 else script
    return [script] if script else [sys.executable, "-m", "ragmeter"]


def _cli_hits(out_dir: Path, cases: int) -> list:
    import polars as pl

    return pl.read_parquet(out_dir / "cases.parquet", columns=["hit"])["hit"].head(cases).to_list()


def _same_folders(a: Path, b: Path) -> bool:
    """The four files of two results folders: the JSON byte for byte, the Parquet files frame-equal."""
    import polars as pl

    for name in ("summary.json", "warnings.json"):
        if (a / name).read_bytes() != (b / name).read_bytes():
            return False
    return all(pl.read_parquet(a / name).equals(pl.read_parquet(b / name), null_equal=True)
               for name in ("cases.parquet", "chunks.parquet"))


def cpu_times() -> list:
    """The machine's CPU time counters (the ``cpu`` line of /proc/stat), or [] where there is none."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            return [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return []


def steal_share(before: list, after: list) -> str:
    """The share of all CPU time between two :func:`cpu_times` readings that a virtual machine's host took for
    others (``steal``, the eighth counter): on a shared VM every timing is that much slower."""
    if len(before) < 8 or len(after) < 8:
        return "not known"
    total = sum(after) - sum(before)
    return f"{100 * (after[7] - before[7]) / total:.0f}%" if total > 0 else "not known"


def _runs(values: list, fmt: str = "{:.2f}") -> str:
    return ", ".join(fmt.format(v) for v in values)


def compare(args) -> None:
    """Per text kind: the command ``ragmeter score --golden G --run R --out DIR`` end to end (a fresh process:
    interpreter start, imports, scoring, the four files, the tables), the in-process ``ragmeter.score`` API,
    and the two plain-Python scorers (each in a fresh process too)."""
    kinds = args.kinds.split(",")
    rows = []
    load_before = os.getloadavg()
    steal_before = cpu_times()
    cli = _cli()
    baseline_env = {**os.environ, "PYTHONPATH": str(args.baseline)} if args.baseline else None
    same_files = True
    with tempfile.TemporaryDirectory() as tmp:
        base = args.data or Path(tmp)
        for kind in kinds:
            d = base / f"compare-{kind}-{args.cases}x{args.chunks}"
            if not (d / "run.parquet").exists():
                d.mkdir(parents=True, exist_ok=True)
                generate_kind(d, args.cases, args.chunks, kind)
            elif not _golden_is_current(d / "golden.jsonl"):
                write_kind_golden(d, args.cases, kind)
            size = os.path.getsize(d / "run.parquet")
            golden, run = d / "golden.jsonl", d / "run.parquet"
            got = {}
            for mode, n in (("ragmeter", args.cases), ("python-top5", args.py_cases or args.cases),
                            ("python-all", args.py_all_cases or args.py_cases or args.cases),
                            ("read-floor", args.cases)):
                runs = []
                for _ in range(args.repeat if mode in ("ragmeter", "read-floor") else 1):
                    _, out, wall, rss = _child([sys.executable, __file__, "--_compare", mode, str(golden), str(run), str(n)])
                    r = json.loads(out.strip().splitlines()[-1])
                    # Only the per-case part is scaled; the interpreter, imports and whole-file reads are paid
                    # once whatever N.
                    extra = r.get("per_case_s", r["s"]) * (args.cases / n - 1)
                    r["wall"] = wall + extra
                    r["s"] += extra
                    r["child_rss"] = rss
                    runs.append(r)
                got[mode] = {"s": [r["s"] for r in runs], "wall": [r["wall"] for r in runs], "n": n,
                             "hits": runs[0]["hits"], "rss_mb": runs[0]["child_rss"]}
            cli_wall, cli_rss, base_wall, base_rss = [], [], [], []
            for i in range(args.repeat):
                command = cli + ["score", "--golden", str(golden), "--run", str(run), "--out"]
                if args.baseline:  # interleaved, so that both see the same load
                    _, _, wall, rss = _child(command + [str(Path(tmp) / f"base-{kind}-{i}")], baseline_env)
                    base_wall.append(wall)
                    base_rss.append(rss)
                out_dir = Path(tmp) / f"cli-{kind}-{i}"
                _, _, wall, rss = _child(command + [str(out_dir)])
                cli_wall.append(wall)
                cli_rss.append(rss)
                cli_hits = _cli_hits(out_dir, args.cases)
                if args.baseline:
                    same_files = same_files and _same_folders(Path(tmp) / f"base-{kind}-{i}", out_dir)
            rm = got["ragmeter"]
            same = all(rm["hits"][: got[m]["n"]] == got[m]["hits"] for m in ("python-top5", "python-all")) \
                and cli_hits == rm["hits"]
            best, best_api = min(cli_wall), min(rm["s"])
            star = lambda m: "*" if got[m]["n"] < args.cases else ""  # noqa: E731
            baseline_cells = (f"| {min(base_wall):.2f} s ({_runs(base_wall)}) | {max(base_rss):.0f} MiB "
                              if args.baseline else "")
            # Peak RSS is in MiB (2^20 bytes) and the file in MB (10^6 bytes); the ratio is bytes over bytes (before
            # 2026-12-05 it divided MiB by MB, 4.9% under the true ratio).
            rows.append(f"| {kind} | {args.cases:,} | {size / 1e6:.0f} MB {baseline_cells}| **{best:.2f} s** ({_runs(cli_wall)}) "
                        f"| {max(cli_rss):.0f} MiB ({max(cli_rss) * 2**20 / size:.2f}x) "
                        f"| {best_api:.2f} s ({_runs(rm['s'])}) | {rm['rss_mb']:.0f} MiB "
                        f"| {got['python-top5']['wall'][0]:.1f} s{star('python-top5')} | {got['python-top5']['wall'][0] / best:.1f}x "
                        f"| {got['python-all']['wall'][0]:.1f} s{star('python-all')} | {got['python-all']['wall'][0] / best:.1f}x "
                        f"| {min(got['read-floor']['wall']):.2f} s | {got['python-top5']['wall'][0] / min(got['read-floor']['wall']):.1f}x / "
                        f"{got['python-all']['wall'][0] / min(got['read-floor']['wall']):.1f}x "
                        f"| {'identical' if same else 'DIFFER'} |")
            print(rows[-1], flush=True)
    load_after = os.getloadavg()
    steal = steal_share(steal_before, cpu_times())
    baseline_head = "| baseline command (runs) | its peak RSS " if args.baseline else ""
    header = [f"| text | cases | run.parquet {baseline_head}| `ragmeter score --out` (runs) | its peak RSS (x Parquet) "
              "| `ragmeter.score()` API (runs) | API process RSS | Python top-5 | speed-up | Python all chunks "
              "| speed-up | read floor | ceiling top-5 / all | hits@5 |",
              "|---|---:|---:|" + ("---:|---:|" if args.baseline else "") + "---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    machine = (f"{os.cpu_count()} CPUs (nproc), {cpu_model()}, "
               f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB RAM, Python {platform.python_version()}")
    cmd = "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])
    note = (f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after; CPU time the hypervisor stole "
            f"during the runs (`steal` in /proc/stat): {steal}. "
            f"`ragmeter score --out`: the command `{' '.join(Path(c).name for c in cli)} score --golden G --run R --out DIR` "
            "in a fresh process, wall clock from start to exit (interpreter, imports, scoring, the four files, the "
            "tables on a pipe), peak RSS of that process. The API column is `ragmeter.score(G, R)` alone "
            "in its own process (imports excluded). The Python scorers: wall clock of their own fresh process "
            "(interpreter, imports, reading, scoring); speed-ups are Python's wall clock over the command's best. "
            "Read floor: a fresh process that imports Polars and reads the whole run file with `pl.read_parquet` "
            "and nothing else (best of the runs); the ceiling is each Python scorer's wall clock over it, the "
            "largest speed-up any scorer that reads this file with Polars could show. "
            "Each child is started by a small launcher whose os.wait4 gives that child's own peak RSS. "
            "Hits: the command's cases.parquet, the API's and each Python scorer's, case by case. "
            + ("* the Python scorers scored the first cases only (--py-cases / --py-all-cases), after reading the "
               "whole golden set and run: the time of their per-case part is scaled linearly to all cases (their "
               "start-up and reads are not) and hits are compared on those cases. " if (args.py_cases or args.py_all_cases) else "")
            + (f"Baseline: the same command with PYTHONPATH={args.baseline}, run before each run of this checkout; "
               f"its four files and this checkout's: {'the same (summary.json, warnings.json byte for byte, the Parquet files frame-equal)' if same_files else 'DIFFER'}. "
               if args.baseline else ""))
    text = "\n".join(header + rows) + "\n\n" + note + "\n"
    print(text)
    if not args.no_append:
        with (Path(__file__).parent / "RESULTS_score.md").open("a", encoding="utf-8") as fh:
            fh.write(f"\n## {_dt.datetime.now().strftime('%Y-%m-%d %H:%M')} ragmeter score (the command) vs plain Python\n\n"
                     f"Command: `{cmd}`  \nMachine: {machine}\n\n" + text)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--chunks", type=int, default=20)
    ap.add_argument("--chars", type=int, default=500)
    ap.add_argument("--thresholds", type=int, default=100)
    ap.add_argument("--row-group-size", type=int, default=10_000, help="Parquet row group size (cases)")
    ap.add_argument("--data", type=Path, help="keep the generated files here and reuse them when present")
    ap.add_argument("--no-append", action="store_true", help="do not append to benches/RESULTS_score.md")
    ap.add_argument("--_measure", nargs=3, metavar=("GOLDEN", "RUN", "THRESHOLDS"), help=argparse.SUPPRESS)
    ap.add_argument("--compare", action="store_true",
                    help="ragmeter score vs the plain-Python scorer (top-5 and all chunks) on three text kinds (default 20,000 cases)")
    ap.add_argument("--py-cases", type=int, help="with --compare: the Python scorers read everything but score the first N cases only (the time "
                         "of their per-case part scaled to all cases; default: all cases, no scaling)")
    ap.add_argument("--py-all-cases", type=int, help="with --compare: the same for the all-chunks Python scorer alone")
    ap.add_argument("--repeat", type=int, default=2, help="with --compare: ragmeter runs per kind")
    ap.add_argument("--kinds", default="ascii,cjk-pdf,mix",
                    help="with --compare: text kinds, comma-separated (default the three; KIND-distinct: no two "
                         "chunk texts the same)")
    ap.add_argument("--baseline", type=Path, metavar="DIR",
                    help="with --compare: also run the command with PYTHONPATH=DIR (another checkout's python folder), "
                         "interleaved with this one's runs, and compare their files")
    ap.add_argument("--_compare", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._compare:
        mode, golden, run, n = args._compare
        print(json.dumps(compare_child(mode, Path(golden), Path(run), int(n))))
        return
    if args.compare:
        if "--cases" not in sys.argv:
            args.cases = 20_000
        compare(args)
        return
    if args._measure:
        golden, run, n = args._measure
        print(json.dumps(measure(Path(golden), Path(run), int(n))))
        return

    with tempfile.TemporaryDirectory() as tmp:
        d = args.data or Path(tmp)
        tag = f"{args.cases}x{args.chunks}x{args.chars}-rg{args.row_group_size}"
        d = d / tag
        golden, run = d / "golden.jsonl", d / "run.parquet"
        t0 = time.perf_counter()
        if not (golden.exists() and run.exists()):
            d.mkdir(parents=True, exist_ok=True)
            generate(d, args.cases, args.chunks, args.chars, row_group_size=args.row_group_size)
        gen = time.perf_counter() - t0
        import pyarrow.parquet as pq

        meta = pq.ParquetFile(run).metadata
        text_bytes = args.cases * args.chunks * args.chars  # one byte per character except the planted phrases
        load_before = os.getloadavg()
        # Measure in a fresh process so that peak RSS excludes the generator.
        out = subprocess.run([sys.executable, __file__, "--_measure", str(golden), str(run), str(args.thresholds)],
                             check=True, capture_output=True, text=True)
        m = json.loads(out.stdout.strip().splitlines()[-1])
        load_after = os.getloadavg()
        size = os.path.getsize(run)
        lines = [
            f"cases={args.cases:,} chunks={args.chunks} chars={args.chars}: run.parquet {size / 1e6:.0f} MB "
            f"({meta.num_row_groups} row groups of <= {args.row_group_size:,} cases, zstd), chunk text {text_bytes / 1e6:.0f} MB, "
            f"golden.jsonl {golden.stat().st_size / 1e6:.0f} MB (generation {gen:.1f} s)",
            f"score end to end (ragmeter.score: load golden + Parquet run, match, metrics, aggregates, warnings): {m['score_s']:.2f} s"
            f"   hit_rate={m['hit_rate']:.4f}, unfound evidence phrases={m['n_unfound']:,}",
            f"sweep of {args.thresholds} thresholds end to end (ragmeter.sweep: its own load + matching + sweep): {m['sweep_s']:.2f} s "
            f"({m['rows']} rows); the sweep alone on a prepared match: {m['sweep_only_s']:.2f} s",
            f"peak RSS of the measuring process: {m['score_rss_mb']:.0f} MB after score, {m['peak_rss_mb']:.0f} MB overall "
            f"(after imports {m['base_rss_mb']:.0f} MB) = {m['score_rss_mb'] / (size / 1e6):.1f}x the Parquet file, "
            f"{m['score_rss_mb'] / (text_bytes / 1e6):.1f}x the chunk text",
            f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after",
        ]
        print("\n".join(lines))
        if not args.no_append:
            machine = (f"{os.cpu_count()} CPUs (nproc), {cpu_model()}, "
                       f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB RAM, "
                       f"Python {platform.python_version()}, polars {m['polars']}")
            cmd = "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])
            with (Path(__file__).parent / "RESULTS_score.md").open("a", encoding="utf-8") as fh:
                fh.write(f"\n## {_dt.datetime.now().strftime('%Y-%m-%d %H:%M')}\n\nCommand: `{cmd}`  \nMachine: {machine}\n\n")
                fh.write("\n".join(f"- {x}" for x in lines) + "\n")


if __name__ == "__main__":
    main()
