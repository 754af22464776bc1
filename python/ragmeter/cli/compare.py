"""``ragmeter compare BASE_DIR CAND_DIR [--gate RULES]``: paired comparison and CI gate."""
from __future__ import annotations

import argparse
import sys

HELP = "compare two results directories case by case (paired bootstrap, McNemar) and gate regressions"

EPILOG = """exit status: 0 = compared (and every gate rule held), 1 = a gate rule was violated,
2 = bad input (runs not comparable without --force, missing files, rules that do not parse).
Gate rules, comma-separated: hit>=-2pp (delta in percentage points), faithfulness>=0.80
(candidate value), correct>=75%, regressions<=5 (right->wrong cases on `correct`, else `hit`),
hit_regressions<=3, hit[fact]>=-5pp (one category)."""

PARSER_OPTIONS = {"epilog": EPILOG, "formatter_class": argparse.RawDescriptionHelpFormatter}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", metavar="BASE_DIR", help="baseline results directory")
    parser.add_argument("candidate", metavar="CAND_DIR", help="candidate results directory")
    parser.add_argument("--gate", metavar="RULES", default=None, help="comma-separated gate rules (see below)")
    parser.add_argument("--force", action="store_true", help="compare even if golden sets or retrieval-mode mixes differ (warns loudly)")
    parser.add_argument("--out", metavar="FILE.md", default=None, help="also write the Markdown summary here")
    parser.add_argument("--json", metavar="FILE.json", default=None, help="write the full comparison as JSON")
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    parser.add_argument("--seed", type=int, default=None, help="bootstrap seed (default: fixed, reproducible)")


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from ragmeter import gate
    from ragmeter.compare import compare, to_markdown
    from ragmeter.errors import InputError

    rules = gate.parse_rules(args.gate) if args.gate is not None else None
    if args.resamples < 100:
        raise InputError(f"--resamples: need at least 100, got {args.resamples}")
    comp = compare(args.base, args.candidate, force=args.force, n_resamples=args.resamples, seed=args.seed)
    results = gate.evaluate(rules, comp) if rules is not None else None
    md = to_markdown(comp, results)
    if comp.forced:
        print("ragmeter: WARNING: --force: comparing runs that are not comparable: " + "; ".join(comp.problems), file=sys.stderr)
    print(md)
    if args.out:
        Path(args.out).write_text(md, encoding="utf-8")
    if args.json:
        payload = comp.to_dict()
        if results is not None:
            payload["gate"] = gate.summary(results)
        Path(args.json).write_text(json.dumps(payload, indent=2, ensure_ascii=False), encoding="utf-8")
    if results is not None and not all(r.passed for r in results):
        failed = [r.detail for r in results if not r.passed]
        print("ragmeter: gate failed: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0
