"""ragmeter vs pytrec_eval vs ranx vs ir_measures on the same generated TREC data.

    python benches/bench_trec.py [--sizes 20000,100000] [--out benches/RESULTS.md]

Data: ``benches/gen_trec_data.py`` (seeded; cached in ``benches/data/``, which is
gitignored). Measures: map, recip_rank, ndcg_cut.10, P.5, recall.10, success.5.

(a) end to end from TREC files. ragmeter: the ``ragmeter trec`` command as a
    subprocess, wall time including interpreter start-up. Peers: one worker
    process per tool; the time is measured inside it around parse + evaluate +
    mean (imports and interpreter start-up excluded, which favours the peers).
    ranx's JIT is warmed on a tiny data set first.
(b) from in-memory ``{qid: {doc: value}}`` dicts (built once, not timed).
(c) ``ragmeter._core.rank_metrics`` alone on pre-built flat arrays, with
    ``RAYON_NUM_THREADS=1`` and ``2`` (each in its own process).
(d) peak RSS of ``ragmeter trec`` (GNU ``/usr/bin/time -f %M``) vs input size.

Run it from a virtual environment with a current pip, as users install a
command-line tool, so that ``ragmeter`` starts as it would for them: the
interpreter's own site-packages, and whatever ``.pth`` start-up hooks they hold,
are not loaded, and pip >= 24.1 writes console scripts that no longer import
``re`` (13-15 ms here). The environment used is recorded in the results::

    python -m venv .venv && .venv/bin/pip install -U pip && .venv/bin/pip install '.[bench]'
    .venv/bin/python benches/bench_trec.py --sizes 20000,100000 --repeat 5 --out benches/RESULTS.md

Times are the best of ``--repeat`` runs; peers run once on sizes above
``--large`` queries (``--large-repeat``). Everything is printed and written to
``--out`` (a hand-written section after the ``<!-- notes -->`` marker of an
existing file is kept).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gen_trec_data  # noqa: E402

MEASURES = ["map", "recip_rank", "ndcg_cut.10", "P.5", "recall.10", "success.5"]  # ragmeter / trec_eval -m
CANON = ["map", "recip_rank", "ndcg_cut_10", "P_5", "recall_10", "success_5"]  # output names (trec_eval, pytrec_eval)
RANX = ["map", "mrr", "ndcg@10", "precision@5", "recall@10", "hit_rate@5"]
IRM = ["AP", "RR", "nDCG@10", "P@5", "R@10", "Success@5"]
CORE = ["ap", "rr", "ndcg@10", "p@5", "recall@10", "hit@5"]
PEERS = ["pytrec_eval", "ranx", "ir_measures"]
NOTES_MARKER = "<!-- notes -->"


# --------------------------------------------------------------------------- workers
# Each worker runs in its own process and prints one JSON object as its last line.

def _mean(per_query: Dict[str, Dict[str, float]], key: str) -> float:
    return sum(v[key] for v in per_query.values()) / len(per_query)


def _read_dicts(qrels_path: str, run_path: str) -> Tuple[dict, dict]:
    qrels: Dict[str, Dict[str, int]] = {}
    with open(qrels_path) as fh:
        for line in fh:
            q, _, d, r = line.split()
            qrels.setdefault(q, {})[d] = int(r)
    run: Dict[str, Dict[str, float]] = {}
    with open(run_path) as fh:
        for line in fh:
            q, _, d, _, s, _ = line.split()
            run.setdefault(q, {})[d] = float(s)
    return qrels, run


def _tool_files(tool: str, qrels_path: str, run_path: str) -> Tuple[Dict[str, float], Dict[str, float]]:
    """Parse both files with the tool's own reader and evaluate; returns (means, phase times)."""
    t0 = time.perf_counter()
    if tool == "pytrec_eval":
        import pytrec_eval

        with open(qrels_path) as fh:
            qrels = pytrec_eval.parse_qrel(fh)
        with open(run_path) as fh:
            run = pytrec_eval.parse_run(fh)
        t1 = time.perf_counter()
        res = pytrec_eval.RelevanceEvaluator(qrels, set(MEASURES)).evaluate(run)
        means = {k: _mean(res, k) for k in CANON}
    elif tool == "ranx":
        import ranx

        qrels = ranx.Qrels.from_file(qrels_path, kind="trec")
        run = ranx.Run.from_file(run_path, kind="trec")
        t1 = time.perf_counter()
        res = ranx.evaluate(qrels, run, RANX)
        means = {c: float(res[r]) for c, r in zip(CANON, RANX)}
    elif tool == "ir_measures":
        import ir_measures

        qrels = list(ir_measures.read_trec_qrels(qrels_path))
        run = list(ir_measures.read_trec_run(run_path))
        t1 = time.perf_counter()
        ms = [ir_measures.parse_measure(m) for m in IRM]
        res = ir_measures.calc_aggregate(ms, qrels, run)
        means = {c: float(res[m]) for c, m in zip(CANON, ms)}
    else:
        raise ValueError(tool)
    t2 = time.perf_counter()
    del qrels, run, res
    return means, {"parse": t1 - t0, "evaluate": t2 - t1, "total": t2 - t0}


def worker_files(tool: str, qrels_path: str, run_path: str, reps: int, tiny_qrels: str, tiny_run: str) -> Dict[str, Any]:
    if tool == "ranx":  # compile numba functions before timing
        _tool_files(tool, tiny_qrels, tiny_run)
    out: Dict[str, Any] = {"tool": tool, "runs": []}
    for _ in range(reps):
        means, phases = _tool_files(tool, qrels_path, run_path)
        out["runs"].append(phases)
        out["means"] = means
    return out


def _tool_dicts(tool: str, qrels: dict, run: dict, tiny: bool = False) -> Tuple[Dict[str, float], Optional[dict]]:
    """Evaluate dicts; returns (means, per-query {qid: {canon: value}} where cheap to get)."""
    if tool == "ragmeter":
        import ragmeter.trec

        df = ragmeter.trec.evaluate(qrels, run, measures=MEASURES, per_query=True)
        means = {c: float(df[c].mean()) for c in CANON}
        if tiny:
            return means, None
        cols = df.select(["query"] + CANON).to_dict(as_series=False)
        per = {q: {c: cols[c][i] for c in CANON} for i, q in enumerate(cols["query"])}
        return means, per
    if tool == "pytrec_eval":
        import pytrec_eval

        res = pytrec_eval.RelevanceEvaluator(qrels, set(MEASURES)).evaluate(run)
        return {k: _mean(res, k) for k in CANON}, res
    if tool == "ranx":
        import ranx

        res = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), RANX)
        return {c: float(res[r]) for c, r in zip(CANON, RANX)}, None
    if tool == "ir_measures":
        import ir_measures

        ms = [ir_measures.parse_measure(m) for m in IRM]
        res = ir_measures.calc_aggregate(ms, qrels, run)
        return {c: float(res[m]) for c, m in zip(CANON, ms)}, None
    raise ValueError(tool)


def worker_dicts(qrels_path: str, run_path: str, reps: int, tools: Sequence[str], tiny_qrels: str, tiny_run: str) -> Dict[str, Any]:
    import gc

    tq, tr = _read_dicts(tiny_qrels, tiny_run)
    for tool in tools:  # imports and JIT warm-up, untimed
        try:
            _tool_dicts(tool, tq, tr, tiny=True)
        except Exception:
            pass
    t0 = time.perf_counter()
    qrels, run = _read_dicts(qrels_path, run_path)
    out: Dict[str, Any] = {"build_dicts": time.perf_counter() - t0, "tools": {}}
    per_query: Dict[str, dict] = {}
    for tool in tools:
        entry: Dict[str, Any] = {"times": []}
        try:
            per = None
            for _ in range(max(1, reps)):
                gc.collect()
                t = time.perf_counter()
                means, per = _tool_dicts(tool, qrels, run)
                entry["times"].append(time.perf_counter() - t)
                entry["means"] = means
            if per is not None:
                per_query[tool] = per
            del per
        except Exception as exc:  # report and carry on
            entry["error"] = f"{type(exc).__name__}: {exc}"
        out["tools"][tool] = entry
    if "ragmeter" in per_query and "pytrec_eval" in per_query:
        a, b = per_query["ragmeter"], per_query["pytrec_eval"]
        diff = {c: max(abs(a[q][c] - b[q][c]) for q in b) for c in CANON}
        out["per_query_diff_api_vs_pytrec"] = diff
        out["per_query_missing"] = len(set(a) ^ set(b))
    return out


def worker_compute(n_queries: int, seed: int, reps: int) -> Dict[str, Any]:
    import numpy as np

    from ragmeter import _core

    arrays = gen_trec_data.flat_arrays(gen_trec_data.generate(n_queries, 100, seed))
    args = (arrays["offsets"], arrays["grades"], arrays["num_relevant"], CORE)
    kw = dict(relevance_level=1.0, ideal_offsets=arrays["ideal_offsets"], ideal_grades=arrays["ideal_grades"])
    _core.rank_metrics(*args, **kw)  # warm-up (page faults, thread pool)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        m = _core.rank_metrics(*args, **kw)
        times.append(time.perf_counter() - t)
    return {
        "threads": os.environ.get("RAYON_NUM_THREADS"),
        "positions": int(arrays["grades"].size),
        "times": times,
        "means": {c: float(v) for c, v in zip(CANON, np.asarray(m).mean(axis=0))},
    }


def worker_rust_phase(qrels_path: str, run_path: str, reps: int) -> Dict[str, Any]:
    """ragmeter's in-process time for the CLI's work (read, parse, evaluate, format) and its import time."""
    t = time.perf_counter()
    from ragmeter import _core
    import ragmeter.cli.trec  # noqa: F401

    imp = time.perf_counter() - t
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        _core.trec_eval_output(qrels_path, run_path, MEASURES)
        times.append(time.perf_counter() - t)
    return {"import": imp, "times": times}


def worker_main(argv: List[str]) -> None:
    mode = argv[0]
    if mode == "files":
        res = worker_files(argv[1], argv[2], argv[3], int(argv[4]), argv[5], argv[6])
    elif mode == "dicts":
        res = worker_dicts(argv[1], argv[2], int(argv[3]), argv[4].split(","), argv[5], argv[6])
    elif mode == "compute":
        res = worker_compute(int(argv[1]), int(argv[2]), int(argv[3]))
    elif mode == "rust_phase":
        res = worker_rust_phase(argv[1], argv[2], int(argv[3]))
    else:
        raise SystemExit(f"unknown worker mode {mode}")
    print(json.dumps(res))


# --------------------------------------------------------------------------- parent

TIME = "/usr/bin/time"


def run_measured(cmd: Sequence[str], env: Optional[dict] = None) -> Tuple[float, int, str, str, int]:
    """Run a command; returns (wall seconds, max RSS bytes, stdout, stderr, exit status).

    Max RSS comes from GNU time (``/usr/bin/time -f %M``): Linux carries a
    process's peak RSS across fork and exec, so the rusage of a child forked
    from this (numpy-loaded) process would report at least our own peak.
    GNU time is a small C program; its fork adds ~1 ms to the wall time.
    Without it, RSS is polled with psutil every 5 ms.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        use_time = os.access(TIME, os.X_OK)
        full = [TIME, "-f", "%M", "-o", tf.name, *cmd] if use_time else list(cmd)
        peak = 0
        t = time.perf_counter()
        p = subprocess.Popen(full, stdout=out, stderr=err, env=env)
        if use_time:
            p.wait()
        else:
            import psutil

            proc = psutil.Process(p.pid)
            while p.poll() is None:
                try:
                    peak = max(peak, proc.memory_info().rss)
                except psutil.Error:
                    pass
                time.sleep(0.005)
        wall = time.perf_counter() - t
        if use_time:
            tf.seek(0)
            lines = [l for l in tf.read().split() if l.isdigit()]
            peak = int(lines[-1]) * 1024 if lines else 0
        out.seek(0)
        err.seek(0)
        return wall, peak, out.read().decode(), err.read().decode(), p.returncode


def run_worker(args: Sequence[str], env: Optional[dict] = None) -> Tuple[Optional[dict], float, int, str]:
    wall, rss, out, err, rc = run_measured([sys.executable, str(Path(__file__).resolve()), "--worker", *args], env)
    if rc != 0:
        return None, wall, rss, (err.strip().splitlines() or ["exit status %d" % rc])[-1]
    return json.loads(out.strip().splitlines()[-1]), wall, rss, ""


def ragmeter_exe() -> str:
    exe = Path(sysconfig.get_path("scripts")) / "ragmeter"
    if exe.exists():
        return str(exe)
    import shutil

    return shutil.which("ragmeter") or "ragmeter"


def parse_trec_output(text: str) -> Dict[str, float]:
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "all":
            try:
                out[parts[0]] = float(parts[2])
            except ValueError:
                pass
    return out


def sh(cmd: str) -> str:
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:
        return ""


def machine() -> Dict[str, str]:
    cpu = ""
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = ""
    try:
        kb = int(next(l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal")))
        mem = f"{kb / 1024 ** 2:.1f} GiB"
    except (OSError, StopIteration):
        pass
    versions = {}
    import importlib.metadata as md

    for pkg in ("ragmeter", "pytrec-eval-terrier", "ranx", "ir-measures", "numba", "numpy", "polars"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = "not installed"
    return {
        "nproc": sh("nproc") or str(os.cpu_count()),
        "cpu": cpu,
        "memory": mem,
        "os": platform.platform(),
        "python": platform.python_version(),
        "rustc": sh("rustc --version") or "unknown",
        "commit": sh(f"git -C {HERE.parent} rev-parse --short HEAD"),
        "versions": ", ".join(f"{k} {v}" for k, v in versions.items()),
        "python environment": python_environment(),
        "trec_eval": trec_eval_status(),
    }


def python_environment() -> str:
    """Where the interpreter runs from, and the ``.pth`` files that run code at its start."""
    import site

    venv = sys.prefix != sys.base_prefix
    where = f"virtual environment {sys.prefix}" if venv else f"the interpreter's own prefix {sys.prefix}"
    hooks = []
    for directory in site.getsitepackages():
        for pth in sorted(Path(directory).glob("*.pth")):
            try:
                if any(l.startswith(("import ", "import\t")) for l in pth.read_text(errors="replace").splitlines()):
                    hooks.append(pth.name)
            except OSError:
                pass
    return f"{where}; `.pth` files that run code at start-up: {', '.join(hooks) or 'none'}"


def trec_eval_status() -> str:
    import shutil

    if shutil.which("trec_eval"):
        return "binary found: " + shutil.which("trec_eval")
    policy = sh("apt-cache policy trec-eval")
    if policy:
        return "apt-cache policy trec-eval: " + " ".join(policy.split())[:120]
    return "not available (no trec_eval binary; `apt-cache policy trec-eval` shows no Debian package), not run"


def loadavg() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def best(xs: Sequence[float]) -> float:
    return min(xs) if xs else float("nan")


def fmt_s(x: Optional[float]) -> str:
    return "—" if x is None or x != x else (f"{x:.3f}" if x < 10 else f"{x:.1f}")


def fmt_ratio(x: Optional[float], base: Optional[float]) -> str:
    if x is None or base is None or x != x or base != base or base <= 0:
        return "—"
    return f"{x / base:.1f}x"


def mb(b: float) -> str:
    return f"{b / 1e6:.0f} MB"


def bench_size(n: int, a: argparse.Namespace, tiny: Tuple[Path, Path], log) -> Dict[str, Any]:
    res: Dict[str, Any] = {"n": n, "load_before": loadavg()}
    t = time.perf_counter()
    qrels, run = gen_trec_data.ensure(n, a.seed, a.data_dir)
    res["gen_seconds"] = time.perf_counter() - t
    res["input_bytes"] = qrels.stat().st_size + run.stat().st_size
    res["qrels"], res["run"] = str(qrels), str(run)
    res["run_lines"] = n * 100
    large = n > a.large
    peer_reps = a.large_repeat if large else a.repeat
    res["peer_reps"] = peer_reps
    log(f"\n== {n} queries x 100 docs: {qrels.name} + {run.name} = {mb(res['input_bytes'])} (data ready in {res['gen_seconds']:.1f} s)")

    # (a) ragmeter CLI, best of --repeat, with max RSS
    cmd = [ragmeter_exe(), "trec"] + [x for m in MEASURES for x in ("-m", m)] + [str(qrels), str(run)]
    res["cli_cmd"] = " ".join(["ragmeter"] + cmd[1:])
    walls, rsss = [], []
    for _ in range(a.repeat):
        wall, rss, out, err, rc = run_measured(cmd)
        if rc != 0:
            raise SystemExit(f"ragmeter trec failed ({rc}): {err.strip()}")
        walls.append(wall)
        rsss.append(rss)
        res["cli_means"] = parse_trec_output(out)
    res["cli_walls"], res["cli_rss"] = walls, rsss
    log(f"(a) ragmeter trec CLI: best {best(walls):.3f} s of {[round(w, 3) for w in walls]}, max RSS {mb(max(rsss))}")

    # ragmeter phases: interpreter + imports vs the Rust call
    ph, _, _, perr = run_worker(["rust_phase", str(qrels), str(run), str(a.repeat)])
    if ph:
        res["rust_phase"] = ph
        log(f"    in-process: import {ph['import'] * 1e3:.0f} ms, _core.trec_eval_output best {best(ph['times']):.3f} s")
    else:
        log(f"    in-process phase worker failed: {perr}")

    # (a) peers
    res["files"] = {}
    for tool in PEERS:
        r, wall, rss, err = run_worker(["files", tool, str(qrels), str(run), str(peer_reps), str(tiny[0]), str(tiny[1])])
        if r is None:
            res["files"][tool] = {"error": err}
            log(f"(a) {tool}: FAILED: {err}")
            continue
        r["process_wall"], r["rss"] = wall, rss
        res["files"][tool] = r
        bt = best([x["total"] for x in r["runs"]])
        bx = min(r["runs"], key=lambda x: x["total"])
        log(f"(a) {tool}: best {bt:.3f} s (parse {bx['parse']:.3f} + evaluate {bx['evaluate']:.3f}) of {len(r['runs'])}; "
            f"process wall {wall:.1f} s, max RSS {mb(rss)}; {fmt_ratio(bt, best(walls))} ragmeter")

    # (b) dicts, all tools in one process on the same dicts
    tools = ["ragmeter"] + PEERS
    r, wall, rss, err = run_worker(["dicts", str(qrels), str(run), str(peer_reps), ",".join(tools), str(tiny[0]), str(tiny[1])])
    if r is None:
        res["dicts"] = {"error": err}
        log(f"(b) dicts worker FAILED: {err}")
    else:
        res["dicts"] = r
        base = best(r["tools"].get("ragmeter", {}).get("times", []))
        log(f"(b) dicts built in {r['build_dicts']:.1f} s (untimed)")
        for tool, e in r["tools"].items():
            if "error" in e:
                log(f"(b) {tool}: FAILED: {e['error']}")
            else:
                log(f"(b) {tool}: best {best(e['times']):.3f} s of {[round(x, 3) for x in e['times']]}; {fmt_ratio(best(e['times']), base)} ragmeter")

    # (c) compute phase, 1 and 2 threads
    res["compute"] = {}
    for threads in (1, 2):
        env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
        c, _, _, err = run_worker(["compute", str(n), str(a.seed), str(max(a.repeat, 5))], env)
        if c is None:
            res["compute"][threads] = {"error": err}
            log(f"(c) rank_metrics {threads} thread(s): FAILED: {err}")
            continue
        c["rate"] = c["positions"] / best(c["times"])
        res["compute"][threads] = c
        log(f"(c) rank_metrics, {threads} thread(s): best {best(c['times']) * 1e3:.1f} ms for {c['positions']:,} positions "
            f"= {c['rate'] / 1e6:.1f} M positions/s")
    res["load_after"] = loadavg()
    return res


def agreement(res: Dict[str, Any]) -> Dict[str, Any]:
    """Max abs differences of means vs pytrec_eval (CLI vs pytrec rounded to 4 decimals)."""
    out: Dict[str, Any] = {}
    ref = res["files"].get("pytrec_eval", {}).get("means")
    if ref is None:
        ref = res.get("dicts", {}).get("tools", {}).get("pytrec_eval", {}).get("means")
    if ref is None:
        return out
    cli = res.get("cli_means", {})
    if cli:
        out["ragmeter CLI (4 decimals) vs round(pytrec_eval, 4)"] = max(abs(cli[c] - round(ref[c], 4)) for c in CANON)
    api = res.get("dicts", {}).get("tools", {}).get("ragmeter", {}).get("means")
    if api:
        out["ragmeter API (dicts, full precision)"] = max(abs(api[c] - ref[c]) for c in CANON)
    pq = res.get("dicts", {}).get("per_query_diff_api_vs_pytrec")
    if pq:
        out["ragmeter API per query (max over queries and measures)"] = max(pq.values())
    comp = res.get("compute", {}).get(1, {}).get("means")
    if comp:
        out["ragmeter _core.rank_metrics (flat arrays)"] = max(abs(comp[c] - ref[c]) for c in CANON)
    for tool in ("ranx", "ir_measures"):
        m = res["files"].get(tool, {}).get("means")
        if m:
            worst = max(CANON, key=lambda c: abs(m[c] - ref[c]))
            out[f"{tool} (files)"] = (abs(m[worst] - ref[worst]), worst)
    return out


def render(mach: Dict[str, str], cmdline: str, results: List[Dict[str, Any]], started: str, elapsed: float) -> str:
    L: List[str] = []
    L.append("# ragmeter rank-metric benchmarks (issue 2, deliverable 7)")
    L.append("")
    L.append(f"Generated by `{cmdline}` on {started} in {elapsed / 60:.1f} min (commit {mach['commit']}).")
    L.append("")
    L.append("## Machine")
    L.append("")
    for k in ("nproc", "cpu", "memory", "os", "python", "python environment", "rustc", "versions", "trec_eval"):
        L.append(f"- **{k}**: {mach[k]}")
    loads = ", ".join(f"{r['n']:,}q: {r['load_before']} → {r['load_after']}" for r in results)
    L.append(f"- **load average (1/5/15 min) before → after each size**: {loads}. The machine is shared with "
             "other developers (builds, test runs); a 1-min load above ~1 means another process competed for the "
             "2 cores and the timings are noisy (best-of-N softens this but does not remove it).")
    L.append("")
    L.append("## Data")
    L.append("")
    L.append("`benches/gen_trec_data.py` (seed 7): per query 100 retrieved documents, 10-30 judged documents with "
             "grades 0-3 (about 60% of them retrieved; most retrieved documents are unjudged; every query has at least "
             "one grade >= 1). 90% of queries have distinct scores `k/1024` (exact in float32, so pytrec_eval's float32 "
             "scores rank exactly as ragmeter's float64); 10% have scores rounded to 1 decimal (heavy ties, broken by "
             "document id descending in trec_eval/pytrec_eval/ragmeter, arbitrarily in ranx). Document ids are `d` + 3-6 "
             "digits, so string order differs from numeric order.")
    L.append("")
    for r in results:
        L.append(f"- {r['n']:,} queries: `{Path(r['qrels']).name}` + `{Path(r['run']).name}` = {mb(r['input_bytes'])} "
                 f"({r['run_lines']:,} run lines)")
    L.append("")
    L.append("Measures: map, recip_rank, ndcg_cut.10, P.5, recall.10, success.5 (ranx: map, mrr, ndcg@10, precision@5, "
             "recall@10, hit_rate@5; ir_measures: AP, RR, nDCG@10, P@5, R@10, Success@5).")
    L.append("")
    L.append("## (a) From TREC files, and (b) from in-memory dicts")
    L.append("")
    L.append("Seconds, best of N (N in the last column); ratio = tool time / ragmeter time (higher = ragmeter faster).")
    L.append("(a) ragmeter = `ragmeter trec -m map -m recip_rank -m ndcg_cut.10 -m P.5 -m recall.10 -m success.5 QRELS RUN` "
             "as a subprocess, wall time **including interpreter start-up**. Peers: time inside a worker process "
             "around the tool's own file reading + evaluate + means, **excluding interpreter start-up and imports** "
             "(their whole-process wall time is in the column `process`). pytrec_eval: `parse_qrel`/`parse_run` + "
             "`RelevanceEvaluator.evaluate`; ranx: `Qrels.from_file`/`Run.from_file` + `evaluate` (numba JIT warmed "
             "on 200 queries first; numba uses both cores); ir_measures: `read_trec_qrels`/`read_trec_run` + "
             "`calc_aggregate`.")
    L.append("(b) the same dicts `{qid: {doc: rel|score}}` in one process: `ragmeter.trec.evaluate(qrels, run, "
             "measures, per_query=True)` (+ column means), `pytrec_eval.RelevanceEvaluator(qrels, ...).evaluate(run)` "
             "(+ means), `ranx.evaluate(Qrels(qrels), Run(run), ...)`, `ir_measures.calc_aggregate(...)`.")
    L.append("")
    L.append("| queries | tool | (a) files: s | parse + evaluate | ratio | process | max RSS | (b) dicts: s | ratio | N |")
    L.append("|---:|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        base_a = best(r["cli_walls"])
        dt = r.get("dicts", {}).get("tools", {})
        base_b = best(dt.get("ragmeter", {}).get("times", []))
        ph = r.get("rust_phase")
        split = f"Rust call {best(ph['times']):.3f} (+ start-up, {r['tiny_wall']:.3f} on tiny files)" if ph else ""
        L.append(f"| {r['n']:,} | **ragmeter** | **{fmt_s(base_a)}** | {split} | 1.0x | {fmt_s(base_a)} | "
                 f"{mb(max(r['cli_rss']))} | **{fmt_s(base_b)}** | 1.0x | {len(r['cli_walls'])} |")
        for tool in PEERS:
            f = r["files"].get(tool, {})
            d = dt.get(tool, {})
            if "error" in f:
                a_cells = f"failed: {f['error'][:60]} | | | | "
            else:
                bx = min(f["runs"], key=lambda x: x["total"])
                a_cells = (f"{fmt_s(bx['total'])} | {bx['parse']:.2f} + {bx['evaluate']:.2f} | {fmt_ratio(bx['total'], base_a)} | "
                           f"{fmt_s(f['process_wall'])} | {mb(f['rss'])} | ")
            if "error" in d or not d:
                b_cells = f"failed: {d.get('error', 'not run')[:60]} | |"
            else:
                b_cells = f"{fmt_s(best(d['times']))} | {fmt_ratio(best(d['times']), base_b)} |"
            L.append(f"| {r['n']:,} | {tool} | {a_cells}{b_cells} {r['peer_reps']} |")
    L.append("")
    r0 = results[0]
    L.append(f"Start-up: `ragmeter trec -m map` on the 200-query files takes {r0['tiny_wall'] * 1e3:.0f} ms "
             f"(a bare `python -c pass` {r0['python_wall'] * 1e3:.0f} ms in the same environment: see "
             "**python environment** above). The `ragmeter` console script is called directly (not through a pyenv shim). "
             "For ragmeter, `parse + evaluate` shows the best in-process `_core.trec_eval_output` call (Rust: read, parse, "
             "evaluate, format; measured separately, so it can come out close to or even above the CLI's best wall "
             "time when the machine is noisy).")
    L.append("")
    L.append("trec_eval C binary: " + mach["trec_eval"] + ".")
    L.append("")
    L.append("## (c) Compute phase alone: `ragmeter._core.rank_metrics`")
    L.append("")
    L.append("Pre-built flat arrays (offsets int64, grades f64 in trec_eval ranking order, relevant counts, ideal "
             "grades for nDCG), 6 metrics (`ap, rr, ndcg@10, p@5, recall@10, hit@5`), best of 5 calls in a process with "
             "`RAYON_NUM_THREADS` set. The time includes the binding's copy of the input arrays.")
    L.append("")
    L.append("| queries | positions | 1 thread: ms | M positions/s | 2 threads: ms | M positions/s |")
    L.append("|---:|---:|---:|---:|---:|---:|")
    for r in results:
        c1, c2 = r["compute"].get(1, {}), r["compute"].get(2, {})
        cell = lambda c: (f"{best(c['times']) * 1e3:.1f} | {c['rate'] / 1e6:.1f}" if "rate" in c else "failed | —")
        L.append(f"| {r['n']:,} | {r['run_lines']:,} | {cell(c1)} | {cell(c2)} |")
    L.append("")
    L.append("## (d) Peak memory of `ragmeter trec`")
    L.append("")
    L.append("Max RSS of the `ragmeter trec` process (GNU `/usr/bin/time -f %M`; the largest of the runs) vs the two input files. "
             "An empty-ish run (`ragmeter trec` on the 200-query files) peaks at "
             f"{mb(results[0].get('tiny_rss', 0))} (interpreter + module baseline).")
    L.append("")
    L.append("| queries | input files | max RSS | RSS / input |")
    L.append("|---:|---:|---:|---:|")
    for r in results:
        L.append(f"| {r['n']:,} | {mb(r['input_bytes'])} | {mb(max(r['cli_rss']))} | {max(r['cli_rss']) / r['input_bytes']:.2f}x |")
    L.append("")
    L.append("## Numeric agreement with pytrec_eval (max abs difference of the 6 means)")
    L.append("")
    L.append("pytrec_eval parses scores as float32; the generated scores are exact in float32 or 1-decimal values whose "
             "order float32 preserves, so all trec_eval-semantics tools see the same rankings and ties.")
    L.append("")
    L.append("ranx is expected to differ: it breaks score ties in an unspecified order instead of by document id "
             "(on the 20,000-query set, every query where ranx disagrees with pytrec_eval is one of the tied queries).")
    L.append("")
    L.append("| queries | comparison | max abs diff | within 1e-9 |")
    L.append("|---:|---|---:|---|")
    for r in results:
        for k, v in agreement(r).items():
            if isinstance(v, tuple):
                L.append(f"| {r['n']:,} | {k} | {v[0]:.3g} (worst: {v[1]}) | {'yes' if v[0] <= 1e-9 else 'no'} |")
            else:
                L.append(f"| {r['n']:,} | {k} | {v:.3g} | {'yes' if v <= 1e-9 else 'NO'} |")
    L.append("")
    L.append("## Targets (issue 2)")
    L.append("")
    L.append("| queries | target | measured | met? |")
    L.append("|---:|---|---|---|")
    for r in results:
        base = best(r["cli_walls"])
        for tool in ("pytrec_eval", "ranx"):
            f = r["files"].get(tool, {})
            if "runs" in f:
                ratio = best([x["total"] for x in f["runs"]]) / base
                L.append(f"| {r['n']:,} | >= 20x faster than {tool} from files (CLI incl. start-up) | {ratio:.1f}x | "
                         f"{'yes' if ratio >= 20 else '**no**'} |")
            else:
                L.append(f"| {r['n']:,} | >= 20x faster than {tool} from files | {tool} failed | — |")
        c1 = r["compute"].get(1, {})
        if "rate" in c1:
            L.append(f"| {r['n']:,} | >= 50 M positions/s on one core (`rank_metrics`) | {c1['rate'] / 1e6:.1f} M/s | "
                     f"{'yes' if c1['rate'] >= 50e6 else '**no**'} |")
        ratio = max(r["cli_rss"]) / r["input_bytes"]
        L.append(f"| {r['n']:,} | peak memory <= 2x input files | {ratio:.2f}x | {'yes' if ratio <= 2 else '**no**'} |")
    L.append("")
    return "\n".join(L)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description="ragmeter vs pytrec_eval vs ranx vs ir_measures (TREC rank metrics)")
    ap.add_argument("--sizes", default="20000,100000", help="comma-separated query counts (x 100 docs)")
    ap.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    ap.add_argument("--repeat", type=int, default=3, help="best of N (default 3)")
    ap.add_argument("--large", type=int, default=50000, help="sizes above this run peers --large-repeat times")
    ap.add_argument("--large-repeat", type=int, default=1)
    ap.add_argument("--seed", type=int, default=gen_trec_data.DEFAULT_SEED)
    ap.add_argument("--data-dir", type=Path, default=gen_trec_data.DEFAULT_DIR)
    a = ap.parse_args()
    python = "python"
    if sys.prefix != sys.base_prefix:  # name the virtual environment (relative to the checkout when inside it)
        venv = Path(sys.prefix)
        python = str((venv.relative_to(HERE.parent) if venv.is_relative_to(HERE.parent) else venv) / "bin" / "python")
    cmdline = f"{python} benches/bench_trec.py" + "".join(f" {x}" for x in sys.argv[1:])
    started = time.strftime("%Y-%m-%d %H:%M %Z")
    t0 = time.perf_counter()
    mach = machine()
    print(f"machine: {mach['nproc']} x {mach['cpu']}, {mach['memory']}, Python {mach['python']}, {mach['rustc']}")
    print(f"trec_eval: {mach['trec_eval']}")
    print(f"python environment: {mach['python environment']}")
    print(f"load average: {loadavg()}")
    tiny = gen_trec_data.ensure(200, a.seed, a.data_dir)
    tiny_walls, tiny_rss = [], []
    for _ in range(3):
        w, rss, _, _, _ = run_measured([ragmeter_exe(), "trec", "-m", "map", str(tiny[0]), str(tiny[1])])
        tiny_walls.append(w)
        tiny_rss.append(rss)
    py_walls = [run_measured([sys.executable, "-c", "pass"])[0] for _ in range(3)]
    print(f"ragmeter trec start-up (200-query files): best {best(tiny_walls) * 1e3:.0f} ms, RSS {mb(max(tiny_rss))}; "
          f"bare `python -c pass`: best {best(py_walls) * 1e3:.0f} ms")
    results = []
    for n in [int(x) for x in a.sizes.split(",") if x.strip()]:
        r = bench_size(n, a, tiny, lambda s: print(s, flush=True))
        r["tiny_rss"], r["tiny_wall"], r["python_wall"] = max(tiny_rss), best(tiny_walls), best(py_walls)
        results.append(r)
        print("agreement vs pytrec_eval:")
        for k, v in agreement(r).items():
            print(f"    {k}: {v if isinstance(v, tuple) else f'{v:.3g}'}")
    elapsed = time.perf_counter() - t0
    text = render(mach, cmdline, results, started, elapsed)
    if a.out.exists():
        old = a.out.read_text()
        if NOTES_MARKER in old:
            text += "\n" + NOTES_MARKER + old.split(NOTES_MARKER, 1)[1]
    a.out.write_text(text)
    print("\n" + text)
    print(f"written {a.out} in {elapsed / 60:.1f} min total")


if __name__ == "__main__":
    main()
