"""`ragmeter report` on a large results folder, and the report opened in headless Chromium.

    python benches/bench_report.py [--cases 100000] [--repeat 3] [--chromium /usr/bin/chromium]

Builds (seeded) a results folder shaped like `ragmeter eval`'s output, with
every judge metric and five chunks per case, then

* times `ragmeter report DIR` as a subprocess (start-up included), best of 2
  (issue 5 target: 100,000 cases under 15 s), and reports the size of
  report.html and of its static part (everything but the explorer's data);
* opens report.html in headless Chromium (`--virtual-time-budget=10000
  --dump-dom`, browser start-up included) and an empty page the same way,
  alternating, `--repeat` times (issue 15 target: under 3 s at 100,000 cases).
  Each run must show the explorer rendered ("page 1 / P · N of N cases" and a
  case's detail); the page time is the total minus the median of the empty
  page's totals (one slow start-up of the empty page would make a round's own
  difference negative);
* opens an instrumented copy (the Content-Security-Policy dropped, a script in
  <head> logging to the console at its start, at DOMContentLoaded and when the
  explorer has rendered its first page and case) with `--enable-logging`, and
  reads the real-time stamps of those lines: browser start-up, parsing the
  page, and the explorer, separately (in-page clocks run on virtual time under
  --virtual-time-budget, so they cannot be used).
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from test_report import synth_cases, write_results  # noqa: E402

BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-extensions", "--disable-background-networking", "--virtual-time-budget=10000"]

#: logs a line when the page starts, when it is parsed, and when the explorer shows its first page and case
PROBE = """<script>console.log('probe:start');
document.addEventListener('DOMContentLoaded', function(){ console.log('probe:dcl'); });
new MutationObserver(function(_, obs){ var p = document.getElementById('pageinfo'), d = document.getElementById('detail');
  if (p && d && /^page /.test(p.textContent) && d.querySelector('h3')) { console.log('probe:explorer'); obs.disconnect(); }
}).observe(document, {subtree: true, childList: true, characterData: true});</script>"""

LOG_STAMP = re.compile(r"^\[\d+:\d+:(\d{4})/(\d{6}\.\d{6}):INFO:CONSOLE[^\]]*\] \"(probe:\w+)\"", re.M)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def open_page(chromium: str, page: Path, profile: Path, extra: List[str] = ()) -> Tuple[float, str, str]:
    """Wall-clock seconds from launch to exit of one headless Chromium run, its stdout and stderr."""
    shutil.rmtree(profile, ignore_errors=True)
    cmd = [chromium, *BROWSER_FLAGS, f"--user-data-dir={profile}", *extra, "--dump-dom", page.as_uri()]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    return time.perf_counter() - t, proc.stdout, proc.stderr


def probe_marks(chromium: str, page: Path, profile: Path) -> Dict[str, float]:
    """Seconds from launch to each probe line (real time, from Chromium's log stamps), and to exit."""
    shutil.rmtree(profile, ignore_errors=True)
    launched = time.time()
    _, _, err = open_page(chromium, page, profile, ["--enable-logging=stderr", "--v=0"])
    year = dt.datetime.now().year
    marks = {"exit": time.time() - launched}
    for mmdd, hms, name in LOG_STAMP.findall(err):
        stamp = dt.datetime.strptime(f"{year}{mmdd}{hms}", "%Y%m%d%H%M%S.%f").timestamp()
        marks.setdefault(name.split(":")[1], stamp - launched)
    return marks


def instrumented_copy(report: Path, out: Path) -> Path:
    html = report.read_text(encoding="utf-8")
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html, count=1)
    out.write_text(html.replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    return out


def bench_browser(chromium: str, report: Path, n_cases: int, repeat: int, work: Path) -> None:
    empty = work / "empty.html"
    empty.write_text("<!DOCTYPE html><html><head><title>empty</title></head><body></body></html>", encoding="utf-8")
    probe = instrumented_copy(report, work / "probe.html")
    expected = f" of {n_cases} cases"
    totals, empties, runs = [], [], []
    for r in range(repeat):
        before = load()
        t_empty, _, _ = open_page(chromium, empty, work / "profile")
        t_report, dom, err = open_page(chromium, report, work / "profile")
        info = re.search(r'id="pageinfo"[^>]*>([^<]*)<', dom)
        if not info or expected not in info.group(1) or "<h3>Case " not in dom:
            raise SystemExit(f"the explorer did not render in run {r + 1}: {info.group(1) if info else err[-2000:]}")
        marks = probe_marks(chromium, probe, work / "profile")
        totals.append(t_report)
        empties.append(t_empty)
        runs.append((t_report, t_empty, marks, before, load()))
    startup = statistics.median(empties)
    rows = [f"| {r + 1} | {total:.2f} s | {t_empty:.2f} s | {total - startup:.2f} s | "
            + " | ".join(f"{marks[k]:.2f} s" if k in marks else "n/a" for k in ("start", "dcl", "explorer", "exit"))
            + f" | {before} / {after} |" for r, (total, t_empty, marks, before, after) in enumerate(runs)]
    print(f"explorer: {info.group(1)}")
    print("| run | report (total) | empty page | report - median empty | probe: page starts | parsed (DOMContentLoaded) "
          "| explorer rendered | exit | load average before / after |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    print("\n".join(rows))
    print(f"median: report {statistics.median(totals):.2f} s, empty page {startup:.2f} s, "
          f"report - empty {statistics.median(totals) - startup:.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3, help="browser rounds (empty page, report, instrumented report)")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    ap.add_argument("--no-browser", action="store_true")
    args = ap.parse_args()
    base = synth_cases(5_000, seed=7)
    reps = max(1, -(-args.cases // base.height))
    cases = pl.concat([base.with_columns((pl.col("id") + f"-{k}").alias("id")) for k in range(reps)]).head(args.cases)
    with tempfile.TemporaryDirectory() as d:
        out = write_results(Path(d) / "results", cases, judge=True, sweep=True)
        times = []
        before = load()
        for _ in range(2):
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "ragmeter", "report", str(out)], capture_output=True, text=True)
            times.append(time.perf_counter() - t)
            if proc.returncode != 0:
                raise SystemExit(proc.stderr)
        report = out / "report.html"
        html = report.read_text(encoding="utf-8")
        data = re.search(r'id="case-data"[^>]*>([^<]*)</script>', html).group(1)
        print(f"cases={cases.height} report best of 2: {min(times):.2f} s (runs: {', '.join(f'{t:.2f}' for t in times)}); "
              f"report.html {len(html.encode()) / 1e6:.1f} MB, of which static {(len(html) - len(data)) / 1e3:.1f} kB; "
              f"load average {before} / {load()}")
        if not args.no_browser:
            bench_browser(args.chromium, report, cases.height, args.repeat, Path(d))


if __name__ == "__main__":
    main()
