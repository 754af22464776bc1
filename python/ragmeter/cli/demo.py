"""``ragmeter demo``: the main job on the bundled example, offline."""
from __future__ import annotations

import argparse
from pathlib import Path

HELP = "score and sweep the bundled example (offline) and write a report"

OUTPUTS = ("cases.parquet", "chunks.parquet", "sweep.parquet", "summary.json", "report.html", "report.md")


def example_dir() -> Path:
    """The bundled example, shipped inside the package (``ragmeter/_example``)."""
    here = Path(__file__).resolve().parent.parent / "_example"
    if not (here / "golden.jsonl").exists():
        from ragmeter.errors import InputError

        raise InputError(f"bundled example not found at {here} (a broken installation? reinstall ragmeter)")
    return here


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="ragmeter-demo", metavar="DIR", help="output folder (default ./ragmeter-demo)")
    parser.add_argument("--k", type=int, default=5, help="cut-off (default 5)")


def run(args: argparse.Namespace) -> int:
    import polars as pl
    from rich.markup import escape

    from ragmeter.cli._tables import make_console, print_score, print_sweep
    from ragmeter.evaluation import run_eval

    ex = example_dir()
    golden, run_file = ex / "golden.jsonl", ex / "run.jsonl"
    console = make_console()
    console.print(f"[bold]ragmeter demo[/] on the bundled example: {golden.name} + {run_file.name}")
    console.print(f"(in {escape(str(ex))})", markup=True, highlight=False)
    summary = run_eval(golden, run_file, args.out, k=args.k, thresholds=[0.0, 0.1, 0.2])
    print_score(summary["retrieval"], out_dir=None, console=console)
    print_sweep(pl.read_parquet(Path(args.out) / "sweep.parquet"), args.k, console=console)
    console.print("answers are not judged in the demo (no endpoint); "
                  "`ragmeter eval --base-url URL --model M` adds the judge")
    out = Path(args.out).resolve()
    console.print(f"wrote {escape(str(out))}/: {', '.join(OUTPUTS)}", highlight=False)
    console.print(f"open {escape(str(out / 'report.html'))} in a browser for the report", highlight=False)
    return 0
