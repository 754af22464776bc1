"""``ragmeter sweep``: what a reranker score threshold does to retrieval."""
from __future__ import annotations

import argparse

HELP = "sweep reranker score thresholds: hit rate, MRR, empty retrievals and chunks kept per threshold"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--golden", required=True, metavar="G", help="golden set (JSONL)")
    parser.add_argument("--run", required=True, metavar="R", help="run (JSONL or Parquet) with candidate scores")
    parser.add_argument("--thresholds", default="0,0.1,0.2", help="comma-separated thresholds (default 0,0.1,0.2)")
    parser.add_argument("--k", type=int, default=5, help="cut-off after thresholding (default 5)")
    parser.add_argument("--out", metavar="FILE", help="also write the table (.parquet or .csv)")
    parser.add_argument("--json", action="store_true", help="print JSON rows instead of a table")


def parse_thresholds(text: str) -> list:
    from ragmeter.errors import InputError

    try:
        values = [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise InputError(f"--thresholds: expected comma-separated numbers, got {text!r}") from None
    if not values:
        raise InputError("--thresholds: give at least one threshold")
    return values


def run(args: argparse.Namespace) -> int:
    import json

    from ragmeter.retrieval import sweep

    table = sweep(args.golden, args.run, parse_thresholds(args.thresholds), k=args.k)
    if args.out:
        (table.write_csv if str(args.out).endswith(".csv") else table.write_parquet)(args.out)
    if args.json:
        print(json.dumps(table.to_dicts(), indent=2, ensure_ascii=False))
    else:
        from ragmeter.cli._tables import print_sweep

        print_sweep(table, args.k)
    return 0
