"""Benchmark of the judge client against the local OpenAI-compatible test server.

Targets (issue 4): against a server with 200 ms latency, sustained throughput at
least 97% of a configured 600 requests/minute; client CPU at most 1 ms per
call; memory flat across 20,000 calls.

The server runs in its own process (tests/judge/fakeserver.py) so that only the
client's CPU is measured. Each call goes through the whole engine path: cache
lookup, limits, HTTP, retry layer, response parsing, cost, cache commit
(SQLite WAL, temporary file, group commit). Prompts are unique, so nothing is
a cache hit. ``--runs N`` repeats everything N times and reports every run;
the target verdict uses the worst run.

    python benches/judge_bench.py --runs 3             # full run (~6 minutes), writes benches/RESULTS_judge.md
    python benches/judge_bench.py --rpm-calls 120 --calls 2000 --no-write   # quick check
"""
from __future__ import annotations

import argparse
import asyncio
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


NOTES = """Notes:
- Throughput: the limiter allows a burst of rpm/60 requests, then rpm minus that burst per minute, so no
  60-second window exceeds the configured rpm; 590/min at --rpm 600 is 98.3% by design.
- Memory: what growth there is comes from SQLite's page cache filling up to its default cap (about 2 MB)
  and the 8-byte-per-call latency array kept for p50/p95 (160 KB at 20,000 calls); it levels off.
- CPU: process time of the client process (all its threads) divided by calls; the server is another
  process. The bare-aiohttp column is the floor for the same HTTP traffic, measured in the same run;
  "ragmeter" is the difference: prompt building, cache key, cache lookup, limits, request encoding,
  retry layer, response parsing, attempt records, cost and the cache commit.
- Cache writes use a group commit (python/ragmeter/judge/cache.py): a reply is queued, written with the
  others that arrive within 25 ms (or 256 of them) in one transaction, and handed back to the caller only
  once committed. "Finished" means committed: nothing uses a reply before its commit, so a SIGKILL can
  only lose replies no part of the run had used, and a rerun re-sends exactly those
  (tests/judge/test_cli.py::test_sigkill_mid_run_then_rerun_repeats_no_finished_request). The window
  between a response arriving and its commit is at most 25 ms instead of microseconds.
- The machine is a shared VM; other developers' jobs run on the same 2 CPUs now and then. The load
  average (from /proc/loadavg) is recorded before each run: CPU per call rises under contention
  (cache and frequency effects), so compare runs at similar load.
- Before this version (one SQLite commit per call, stdlib json, the key header re-encoded per call, the
  URL re-parsed by aiohttp per request) three runs gave 0.990, 1.005 and 1.18 ms CPU per call; the same
  code alternated with this one on 6,000-call runs gave 0.928 / 0.865 ms against 0.810 / 0.730 ms.
"""


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def start_server(latency: float, *extra: str) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "judge" / "fakeserver.py"), "--latency", str(latency),
                             *extra], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port = int(proc.stdout.readline().strip())
    return proc, port


# -- ragas side by side (benches/judge_policies.py runs it in every scenario when ragas is installed) ------------
#: where ragas lives: its own venv that sees the shared packages (scripts/test.sh, RAGMETER_ECOSYSTEM=1, builds it)
ECOSYSTEM_VENVS = [Path(p) for p in os.environ.get("RAGMETER_ECOSYSTEM_VENV", "").split(os.pathsep) if p] + [
    ROOT / "target" / "ecosystem-venv"]
#: the ragas metric run: one verdict per case, as ragmeter's correctness (faithfulness would be two calls a case)
RAGAS_METRIC = "AspectCritic (strictness 1: one call a case, a 0/1 verdict)"


def ragas_python() -> tuple[str | None, str]:
    """(python of a venv where ``import ragas`` works, its version) or (None, why not)."""
    for venv in ECOSYSTEM_VENVS:
        python = venv / "bin" / "python"
        if not python.exists():
            continue
        probe = subprocess.run([str(python), "-c", "import ragas; print(ragas.__version__)"], capture_output=True,
                               text=True, timeout=120, env={**os.environ, **RAGAS_ENV})
        if probe.returncode == 0:
            return str(python), probe.stdout.strip()
    return None, ("ragas is not installed: no venv with it at " + ", ".join(map(str, ECOSYSTEM_VENVS))
                  + " (RAGMETER_ECOSYSTEM=1 bash scripts/test.sh builds target/ecosystem-venv)")


#: no telemetry, no hub, no tracing; the key is a dummy (the server is local)
RAGAS_ENV = {"RAGAS_DO_NOT_TRACK": "true", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
             "LANGCHAIN_TRACING_V2": "false", "OPENAI_API_KEY": "sk-dummy-local"}


def start_ragas_server(latency: float, *extra: str) -> tuple[subprocess.Popen, int]:
    """tests/judge/fakeserver.py's server (the same latency, 429s, bucket and serialising modes) answering ragas's
    prompts, in its own process: ``python benches/judge_bench.py --serve-ragas ...``."""
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve-ragas", "--latency", str(latency),
                             *extra], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline().strip())


def ragas_reply(prompt: str) -> dict:
    """A well-formed answer to a ragas prompt, from the input it ends with (``input: {...}\nOutput: ``): an
    AspectCritic verdict, or faithfulness's statements and their verdicts."""
    import json
    import re

    start = prompt.rfind("input: ")
    try:
        data = json.loads(prompt[start + len("input: "):prompt.rfind("Output:")]) if start >= 0 else {}
    except ValueError:
        data = {}
    text = json.dumps(data).lower()
    if "statements" in data and "context" in data:  # faithfulness, NLI over the statements
        return {"statements": [{"statement": st, "reason": "r", "verdict": int(st.lower() in text)}
                               for st in data["statements"]]}
    if "StatementGeneratorOutput" in prompt:
        return {"statements": [x.strip() for x in re.split(r"[.!?]+", data.get("answer", "")) if x.strip()]}
    return {"reason": "fake verdict", "verdict": int("blue" in text)}


def serve_ragas(argv: list) -> int:
    import argparse as ap_

    sys.path.insert(0, str(ROOT / "tests" / "judge"))
    import fakeserver

    class RagasServer(fakeserver.FakeServer):
        async def _chat(self, request):  # type: ignore[no-untyped-def]
            body, info = await self._common(request, "chat")
            prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages") or [])
            return await self._act(request, info, lambda: __import__("json").dumps(ragas_reply(prompt)))

    parser = ap_.ArgumentParser()
    for flag in ("--latency", "--random-429"):
        parser.add_argument(flag, type=float, default=0.0)
    parser.add_argument("--bucket-rps", type=float, default=None)
    parser.add_argument("--bucket-burst", type=float, default=None)
    parser.add_argument("--serialise", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    a = parser.parse_args(argv)
    fakeserver.FakeServer = RagasServer  # fakeserver.main builds "FakeServer": this one
    return fakeserver.main(["--latency", str(a.latency), "--random-429", str(a.random_429), "--seed", str(a.seed)]
                           + (["--bucket-rps", str(a.bucket_rps)] if a.bucket_rps is not None else [])
                           + (["--bucket-burst", str(a.bucket_burst)] if a.bucket_burst is not None else [])
                           + (["--serialise"] if a.serialise else []))


def loopback_guard() -> list:
    """Refuse, and record, every connection and name look-up beyond loopback (ragas must send nothing outside)."""
    import ipaddress
    import socket

    outside: list = []
    connect, connect_ex, getaddrinfo = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo

    def check(address) -> None:  # type: ignore[no-untyped-def]
        if not isinstance(address, tuple) or address[0] in (None, "", "localhost"):
            return
        try:
            if ipaddress.ip_address(str(address[0]).split("%")[0]).is_loopback:
                return
        except ValueError:
            pass
        outside.append(repr(address[:2]))
        raise OSError(f"judge_bench: connection to {address!r} refused (loopback only)")

    socket.socket.connect = lambda self, a: (check(a), connect(self, a))[1]  # type: ignore[method-assign]
    socket.socket.connect_ex = lambda self, a: (check(a), connect_ex(self, a))[1]  # type: ignore[method-assign]
    socket.getaddrinfo = lambda host, *x, **k: (check((host,)), getaddrinfo(host, *x, **k))[1]  # type: ignore
    return outside


def ragas_child(argv: list) -> int:
    """In the ecosystem venv: ragas's evaluate() on N cases against ``--base-url``; one JSON line on stdout."""
    import argparse as ap_
    import json
    import math
    import warnings

    parser = ap_.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=30.0)
    a = parser.parse_args(argv)
    os.environ.update(RAGAS_ENV)
    os.environ["OPENAI_BASE_URL"] = a.base_url
    outside = loopback_guard()
    warnings.simplefilter("ignore")
    from langchain_openai import ChatOpenAI
    from ragas import EvaluationDataset, SingleTurnSample, evaluate
    from ragas.llms import LangchainLLMWrapper
    from ragas.metrics import AspectCritic
    from ragas.run_config import RunConfig

    samples = [SingleTurnSample(user_input=f"What colour is product {i}?", response=f"Product {i} is blue.",
                                reference=f"Product {i} is blue", retrieved_contexts=[f"product {i} is blue"])
               for i in range(a.cases)]
    # the openai client's own retries (Retry-After honoured) under ragas's: 8 attempts in all, as ragmeter's runs
    llm = LangchainLLMWrapper(ChatOpenAI(model="gpt-4o-mini", base_url=a.base_url, api_key="sk-dummy-local",
                                         timeout=a.timeout, max_retries=7))
    metric = AspectCritic(name="correct", definition="Is the response correct given the reference?", llm=llm)
    t0, c0 = time.monotonic(), time.process_time()
    result = evaluate(EvaluationDataset(samples=samples), metrics=[metric], llm=llm, show_progress=False,
                      run_config=RunConfig(max_workers=a.concurrency, timeout=max(a.timeout, 30.0), max_retries=1),
                      raise_exceptions=False)
    wall, cpu = time.monotonic() - t0, time.process_time() - c0
    scores = [s.get("correct") for s in result.scores]
    scored = sum(1 for v in scores if isinstance(v, (int, float)) and not math.isnan(v))
    print(json.dumps({"wall": wall, "cpu": cpu, "scored": scored, "cases": a.cases, "outside_calls": outside}))
    return 0


def run_ragas(python: str, latency: float, extra: list, cases: int, concurrency: int, timeout: float) -> dict:
    """One ragas run against a fresh server of the scenario ``extra``: what the child measured and what the server
    saw (requests, 429s, answer times)."""
    import json

    proc, port = start_ragas_server(latency, *extra)
    try:
        child = subprocess.run([python, str(Path(__file__).resolve()), "--ragas-child", "--base-url",
                                f"http://127.0.0.1:{port}/v1", "--cases", str(cases), "--concurrency",
                                str(concurrency), "--timeout", str(timeout)], capture_output=True, text=True,
                               timeout=1800, env={**os.environ, **RAGAS_ENV})
    finally:
        proc.terminate()
        tail = proc.stdout.read() if proc.stdout else ""
        proc.wait(10)
    seen = json.loads(tail.strip().splitlines()[-1]) if tail.strip() else {}
    lines = child.stdout.strip().splitlines()
    if child.returncode != 0 or not lines:
        raise RuntimeError(f"ragas run failed (exit {child.returncode}): {child.stderr.strip()[-2000:]}")
    out = json.loads(lines[-1])
    out.update(server_requests=seen.get("requests"), server_429=seen.get("throttled"),
               abandoned=seen.get("abandoned"), ok_times=seen.get("ok_times") or [])
    return out


def messages(i: int):
    from ragmeter.judge.prompts import CORRECTNESS

    return CORRECTNESS.messages({"question": f"What colour is product {i}?", "reference_answer": f"Product {i} is blue",
                                 "answer": f"Product {i} is blue.", "contexts": [f"product {i} is blue"]}, "en")


async def drive(base_url: str, n: int, *, concurrency: int, rpm, cache_path: str, samples: list | None = None):
    from ragmeter.judge import Cache, ClientConfig, JudgeClient, Limits, PriceTable
    from ragmeter.judge.engine import Budget, Engine, RowStats

    limits = Limits(concurrency=concurrency, rpm=rpm)
    client = JudgeClient(ClientConfig(base_url=base_url, model="gpt-4o-mini", timeout=30), limits)
    cache = Cache(cache_path)
    engine = Engine(client, cache, PriceTable(), Budget(None), max_tokens=500)
    tx0 = cache.transactions
    counter = iter(range(n))
    ends: list[float] = []
    done = 0

    async def worker():
        nonlocal done
        for i in counter:
            await engine.complete("correctness@v1", messages(i), RowStats())
            ends.append(time.monotonic())
            done += 1
            if samples is not None and done % 2000 == 0:
                samples.append((done, rss_mb()))

    t0 = time.monotonic()
    c0 = time.process_time()
    async with client:
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.monotonic() - t0
    cpu = time.process_time() - c0
    commits = cache.transactions - tx0
    cache.close()
    return {"n": n, "wall": wall, "cpu": cpu, "ends": ends, "requests": client.stats.requests, "commits": commits,
            "retries": client.stats.retries, "p50": sorted(engine.call_latencies)[len(engine.call_latencies) // 2]}


async def floor(base_url: str, n: int, concurrency: int) -> float:
    """CPU per call of bare aiohttp posting the same request and parsing the reply (no ragmeter code)."""
    import json

    import aiohttp

    data = json.dumps({"model": "m", "messages": messages(0), "max_tokens": 500}).encode()
    it = iter(range(n))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency + 4)) as s:
        async def w() -> None:
            for _ in it:
                async with s.post(base_url + "/chat/completions", data=data) as r:
                    json.loads(await r.read())
        c0 = time.process_time()
        await asyncio.gather(*(w() for _ in range(concurrency)))
        return (time.process_time() - c0) / n * 1000.0


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def one_run(args: argparse.Namespace, base: str, tmp: str, k: int) -> dict:
    load = loadavg()
    # phase 1: throughput at the configured rpm
    r1 = asyncio.run(drive(base, args.rpm_calls, concurrency=8, rpm=args.rpm,
                           cache_path=os.path.join(tmp, f"c1-{k}.sqlite")))
    # sustained: completions after the first two seconds (start-up burst) over their span
    ends = sorted(r1["ends"])
    steady = [t for t in ends if t >= ends[0] + 2.0]
    span = steady[-1] - steady[0] if len(steady) > 1 else 0.0
    sustained = (len(steady) - 1) / span * 60.0 if span > 0 else float("nan")
    overall = r1["n"] / r1["wall"] * 60.0
    floor_ms = asyncio.run(floor(base, min(args.calls, 4000), args.concurrency))
    # phase 2: CPU and memory over many calls, no rate limit
    samples: list = []
    rss0 = rss_mb()
    r2 = asyncio.run(drive(base, args.calls, concurrency=args.concurrency, rpm=None,
                           cache_path=os.path.join(tmp, f"c2-{k}.sqlite"), samples=samples))
    return {"load": load, "load_after": loadavg(), "sustained": sustained, "overall": overall, "n1": r1["n"],
            "floor": floor_ms, "cpu": r2["cpu"] / r2["n"] * 1000.0, "n2": r2["n"], "rss0": rss0,
            "samples": samples, "p50": r2["p50"], "rows_per_commit": r2["n"] / max(1, r2["commits"])}


def main() -> int:
    if sys.argv[1:2] == ["--serve-ragas"]:
        return serve_ragas(sys.argv[2:])
    if sys.argv[1:2] == ["--ragas-child"]:
        return ragas_child(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--rpm", type=float, default=600)
    ap.add_argument("--rpm-calls", type=int, default=600, help="calls in the throughput phase (600 = one minute)")
    ap.add_argument("--calls", type=int, default=20000, help="calls in the CPU/memory phase")
    ap.add_argument("--concurrency", type=int, default=100, help="concurrency of the CPU/memory phase")
    ap.add_argument("--runs", type=int, default=1, help="repeat the whole benchmark N times (all runs reported)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "python"))
    from ragmeter.judge import _json

    proc, port = start_server(args.latency)
    base = f"http://127.0.0.1:{port}/v1"
    runs = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for k in range(args.runs):
                runs.append(one_run(args, base, tmp, k))
                r = runs[-1]
                print(f"run {k + 1}: load {r['load']}: {r['cpu']:.3f} ms CPU/call (floor {r['floor']:.3f}), "
                      f"{r['sustained']:.1f}/min", file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(10)
    worst_cpu = max(r["cpu"] for r in runs)
    worst_thr = min(r["sustained"] for r in runs)
    growth = [(r["samples"][-1][1] - r["samples"][0][1]) if r["samples"] else float("nan") for r in runs]
    cmd = f"python benches/judge_bench.py{' ' + ' '.join(sys.argv[1:]) if sys.argv[1:] else ''}"
    lines = [
        "# Judge client benchmark",
        "",
        f"Command: `{cmd}`",
        "",
        f"Machine: {platform.platform()}, Python {platform.python_version()}, nproc {os.cpu_count()}, "
        f"CPU {cpu_model()}; JSON: {'orjson' if _json.HAVE_ORJSON else 'stdlib json'}; "
        f"server: tests/judge/fakeserver.py in its own process, {args.latency * 1000:.0f} ms latency per request. "
        "Each call: prompt building, cache key and lookup, limits, HTTP POST, retry layer, parsing, cost, "
        "SQLite WAL group commit.",
        "",
        f"## Targets ({len(runs)} run{'s' if len(runs) > 1 else ''}; verdict on the worst run)",
        "",
        "| measure | target | worst run | holds |",
        "|---|---|---|---|",
        f"| sustained throughput at --rpm {args.rpm:g} (concurrency 8, {runs[0]['n1']} calls) | >= 97% "
        f"({0.97 * args.rpm:.0f}/min) | {worst_thr:.1f}/min ({worst_thr / args.rpm:.1%}) | "
        f"{'yes' if worst_thr >= 0.97 * args.rpm else 'NO'} |",
        f"| client CPU per call ({runs[0]['n2']} calls, concurrency {args.concurrency}) | <= 1 ms | "
        f"{worst_cpu:.3f} ms | {'yes' if worst_cpu <= 1.0 else 'NO'} |",
        f"| RSS growth across {runs[0]['n2']} calls (from the first sample) | flat | {max(growth):+.1f} MB | "
        f"{'yes' if max(growth) < 10 else 'NO'} |",
        "",
        "## Every run",
        "",
        "| run | load avg before (1/5/15 min) | load after | throughput /min (sustained; overall) | "
        "CPU ms/call | bare aiohttp ms/call | ragmeter ms/call | rows per commit | RSS MB (before; first; last) "
        "| median latency ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k, r in enumerate(runs, 1):
        first = r["samples"][0][1] if r["samples"] else float("nan")
        last = r["samples"][-1][1] if r["samples"] else float("nan")
        lines.append(
            f"| {k} | {r['load']} | {r['load_after']} | {r['sustained']:.1f} ({r['sustained'] / args.rpm:.1%}); "
            f"{r['overall']:.1f} | {r['cpu']:.3f} | {r['floor']:.3f} | {r['cpu'] - r['floor']:.3f} | "
            f"{r['rows_per_commit']:.1f} | {r['rss0']:.1f}; {first:.1f}; {last:.1f} | {r['p50']:.1f} |")
    lines += [
        "",
        "RSS samples of the last run (calls: MB): " + ", ".join(f"{n}: {m:.1f}" for n, m in runs[-1]["samples"]),
        "",
        NOTES,
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        (ROOT / "benches" / "RESULTS_judge.md").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
