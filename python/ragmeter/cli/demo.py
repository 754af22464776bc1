"""``ragmeter demo``: the main job on the bundled example, offline."""
from __future__ import annotations

import argparse
from pathlib import Path

HELP = "score and sweep the bundled example (offline) and write a report"


def example_dir() -> Path:
    """The bundled example: inside the package, ./examples (a checkout), or the source tree's examples/."""
    here = Path(__file__).resolve()
    for candidate in (here.parent.parent / "examples", Path.cwd() / "examples", here.parents[3] / "examples"):
        if (candidate / "golden.jsonl").exists():
            return candidate
    from ragmeter.errors import InputError

    raise InputError("bundled example not found (expected ragmeter/examples or examples/ in the source tree)")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="ragmeter-demo", metavar="DIR", help="output folder (default ./ragmeter-demo)")
    parser.add_argument("--k", type=int, default=5, help="cut-off (default 5)")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ragmeter.cli._tables import print_score, print_sweep
    import polars as pl

    from ragmeter.evaluation import run_eval

    ex = example_dir()
    golden, run_file = ex / "golden.jsonl", ex / "run.jsonl"
    console = Console()
    console.print(f"[bold]ragmeter demo[/] on the bundled example: {golden.name} + {run_file.name} ({ex})")
    summary = run_eval(golden, run_file, args.out, k=args.k, thresholds=[0.0, 0.1, 0.2])
    print_score(summary["retrieval"], out_dir=None, console=console)
    print_sweep(pl.read_parquet(Path(args.out) / "sweep.parquet"), args.k, console=console)
    console.print("answers are not judged in the demo (no endpoint); `ragmeter eval --base-url URL --model M` adds the judge")
    console.print(f"wrote {args.out}/: cases.parquet, chunks.parquet, sweep.parquet, summary.json, report.html, report.md")
    return 0
