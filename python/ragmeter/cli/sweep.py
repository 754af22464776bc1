"""``ragmeter sweep``: what a reranker score threshold does to retrieval."""
from __future__ import annotations

import argparse

TYPE_CHECKING = False
if TYPE_CHECKING:  # polars is imported when the command runs
    import polars as pl

HELP = "sweep reranker score thresholds: hit rate, MRR, empty retrievals and chunks kept per threshold"
EPILOG = """exit status: 0 = swept; 2 = bad input, nothing written (a malformed
file, a golden set without a single label, a run without a single chunk list
or chunk score); 3 = swept and written, but the run file holds cases that
failed when it was collected (a failed_in_run warning names them: an empty
retrieval at every threshold); 130 = interrupted. With --json the warnings go
to stderr."""
PARSER_OPTIONS = {"epilog": EPILOG, "formatter_class": argparse.RawDescriptionHelpFormatter}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--golden", required=True, metavar="G", help="golden set (JSON Lines, JSON array or Parquet)")
    parser.add_argument("--run", required=True, metavar="R", help="run (JSONL or Parquet) with candidate scores")
    parser.add_argument("--thresholds", default="0,0.1,0.2",
                        help="comma-separated thresholds, negative ones too (-2,-1,0); default 0,0.1,0.2")
    parser.add_argument("--k", type=int, default=5, help="cut-off after thresholding (default 5)")
    parser.add_argument("--out", metavar="FILE", help="also write the table (.parquet, .csv or .json, by extension)")
    parser.add_argument("--json", action="store_true", help="print JSON rows instead of a table (there, and in a "
                        ".json --out, an infinite threshold is \"inf\" or \"-inf\")")


def parse_thresholds(text: str) -> list:
    from ragmeter.errors import InputError

    try:
        values = [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise InputError(f"--thresholds: expected comma-separated numbers, got {text!r}") from None
    if not values:
        raise InputError("--thresholds: give at least one threshold")
    from ragmeter.retrieval import check_thresholds

    try:
        return check_thresholds(values)
    except InputError as exc:
        raise InputError(f"--{exc}") from None


#: --out FILE extension -> format
OUT_FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "json"}


def out_format(path: str) -> str:
    """The format an ``--out FILE`` names by its extension; any other extension is a usage error."""
    from pathlib import Path

    from ragmeter.errors import InputError

    if Path(path).is_dir():
        raise InputError(f"--out {path} is a folder: sweep writes one table file (FILE.parquet, FILE.csv or FILE.json)")
    name = Path(path).name.lower()
    if name in OUT_FORMATS:  # '.csv' is a hidden file without an extension to Path
        raise InputError(f"--out {path}: no file name before {name!r} (FILE{name})")
    suffix = Path(path).suffix.lower()
    if suffix not in OUT_FORMATS:
        raise InputError(f"--out {path}: unknown extension {suffix or '(none)'!r}: use .parquet, .csv or .json")
    return OUT_FORMATS[suffix]


def json_rows(table: "pl.DataFrame") -> list:
    """The sweep's rows for JSON, an infinite threshold spelt ``"inf"`` / ``"-inf"`` (strict JSON has no infinity:
    as null, -inf and inf rows would read alike)."""
    from ragmeter.evaluation import json_threshold

    rows = table.to_dicts()
    for row in rows:
        row["threshold"] = json_threshold(row["threshold"])
    return rows


def run(args: argparse.Namespace) -> int:
    from ragmeter.cli._inputs import check_k_flag, failed_in_run_warned, refuse_unlabelled_golden
    from ragmeter.dataset import reusing_golden_loads
    from ragmeter.retrieval import sweep_with_warnings

    from ragmeter.cli._inputs import check_out

    check_k_flag(args.k)
    # the format first: a folder given as --out is told what sweep writes instead
    fmt = out_format(args.out) if args.out and args.out.strip() else None
    check_out(args.out, folder=False,  # before any work
              inputs=[("the golden set (--golden)", args.golden), ("the run (--run)", args.run)])
    thresholds = parse_thresholds(args.thresholds)
    with reusing_golden_loads():  # the label check and the sweep parse the golden set once
        refuse_unlabelled_golden(args.golden)
        table, warnings = sweep_with_warnings(args.golden, args.run, thresholds, k=args.k)
    if args.out:
        from ragmeter._io import atomic_file, strict_json, write_frame, write_text

        from pathlib import Path

        Path(args.out).parent.mkdir(parents=True, exist_ok=True)  # as score --out and compare --out do
        with atomic_file(args.out) as tmp:
            if fmt == "json":
                write_text(tmp, strict_json(json_rows(table)) + "\n")
            else:
                write_frame(table, tmp, fmt)
    from ragmeter._warnings import messages
    from ragmeter.cli._tables import make_console, print_warning

    if args.json:
        from rich.console import Console

        from ragmeter._io import strict_json

        print(strict_json(json_rows(table)))
        console = Console(stderr=True)  # stdout holds the rows alone
    else:
        from ragmeter.cli._tables import print_sweep

        console = make_console()
        print_sweep(table, args.k, console=console, more_in=args.out)
    for text in messages(warnings):
        print_warning(text, console)
    if args.out:  # as every command that writes a file says where (on stderr with --json: stdout is the rows)
        console.print(f"wrote {args.out}", markup=False, highlight=False)
    return failed_in_run_warned(warnings)
