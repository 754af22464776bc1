"""``ragmeter audit``: is the golden set balanced, labelled and findable in the corpus?"""
from __future__ import annotations

import argparse
import sys

from ragmeter.cli._inputs import fraction

HELP = "audit a golden set: balance by category and source, blind spots, gap to a target, resolution, evidence vs corpus"

EPILOG = """exit status: 0 = audited (warnings are printed but do not fail), 1 = --strict
and at least one warning, 2 = bad input (golden set, corpus, targets spec,
a --hard list naming no category of the set).
Warning codes: hard_share_low, source_share_low, source_missing, empty_cell,
unlabeled, uncategorised, spelling_variants, duplicate_question,
evidence_not_in_corpus, file_not_in_corpus, evidence_in_other_file.
--targets: category=term:50,multi:15;source=deepseek:40,zhipu:40
(or a .toml/.json file)."""

PARSER_OPTIONS = {"epilog": EPILOG, "formatter_class": argparse.RawDescriptionHelpFormatter}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--golden", required=True, metavar="G", help="golden set (JSON Lines, JSON array or Parquet)")
    parser.add_argument("--corpus", metavar="C", help="chunk export (JSONL/Parquet: file, chunk_id, text) or a folder of text/Markdown files")
    parser.add_argument("--target", type=int, metavar="N", help="target size: gap to even shares of N over the categories and sources seen")
    parser.add_argument("--targets", metavar="SPEC", help="per-value targets: category=a:50,b:30;source=x:40,y:40 (or a .toml/.json file)")
    parser.add_argument("--hard", metavar="CATS", help="comma-separated hard categories (default: a 'difficulty' field, else multi, boundary, conflict, crossdoc, noanswer, ...)")
    parser.add_argument("--min-hard-share", type=fraction, default=0.30, metavar="F", help="warn below this share of hard cases (default 0.30)")
    parser.add_argument("--min-source-share", type=fraction, default=None, metavar="F", help="warn for a source below this share (default 75%% of an even share)")
    parser.add_argument("--by", default="source", metavar="FIELD", help="second dimension (default: source)")
    parser.add_argument("--rate", type=fraction, default=None, metavar="P", help="hit/correct rate for the detectable difference (default 0.5, the worst case)")
    parser.add_argument("--results", metavar="DIR", help="take the observed hit and correct rates from a results folder (eval/score --out)")
    parser.add_argument("--json", action="store_true", help="print the audit as one JSON object")
    parser.add_argument("--strict", action="store_true", help="exit 1 when there is any warning (for CI)")
    parser.add_argument("--out", metavar="DIR", help="write DIR/audit.json and DIR/audit.md")


def run(args: argparse.Namespace) -> int:
    from ragmeter._args import check_arg
    from ragmeter._io import strict_json
    from ragmeter.audit import audit, render

    from ragmeter.cli._inputs import check_out

    from ragmeter.audit.targets import MAX_TARGET

    # the flag, not audit()'s keyword, in the error
    check_arg("--target", args.target, "int", low=1, high=MAX_TARGET, optional=True)
    check_out(args.out)
    hard = args.hard.split(",") if args.hard is not None else None
    result = audit(args.golden, corpus=args.corpus, target=args.target, targets=args.targets, hard=hard,
                   min_hard_share=args.min_hard_share, min_source_share=args.min_source_share, by=args.by,
                   rate=args.rate, results=args.results)
    d = result.to_dict()
    if args.out:
        from ragmeter._io import atomic_outputs

        with atomic_outputs(args.out) as tmp:
            (tmp / "audit.json").write_text(strict_json(d) + "\n", encoding="utf-8")
            (tmp / "audit.md").write_text(render.markdown(d), encoding="utf-8")
    if args.json:
        print(strict_json(d))
    elif sys.stdout.isatty():
        from rich.console import Console

        console = Console(width=min(Console().width, render.WIDTH))
        render.rich(d, console)
    else:
        print(render.plain(d))
    if args.out and not args.json:
        print(f"wrote {args.out}/audit.json, {args.out}/audit.md")
    if args.strict and result.warnings:
        print(f"ragmeter: audit: {len(result.warnings)} warning(s) and --strict", file=sys.stderr)
        return 1
    return 0
