"""``ragmeter review``: check the judge against human reviewers.

``export`` writes the stratified review sheet of a results folder, ``import`` reads the filled sheet back and
reports agreement, Cohen's kappa and a prediction-powered correct rate, ``compare`` puts several judges (eval runs
of the same cases) and the human labels side by side.
"""
from __future__ import annotations

import argparse

from ragmeter.cli._inputs import fraction

HELP = "judge vs humans: export a review sheet, import it (agreement, kappa, PPI), compare raters"

EPILOG = """exit status: 0 = done; 2 = bad input (a sheet naming unknown cases,
unknown columns, values other than 1/0/yes/no/true/false/empty, a folder
without judge results, an export over a review.csv a reviewer has begun to
fill in or of another shape (--force replaces it); nothing is written);
3 (import) = written, but some cases of the sheet are not (fully) reviewed:
they are listed and left out, never guessed.
Verdict rules: correct = every core point covered; score 5 = every point,
4 = every core point but not every point, 3 = some core points, 2 = no core
point but another point, 1 = nothing covered."""

PARSER_OPTIONS = {"epilog": EPILOG, "formatter_class": argparse.RawDescriptionHelpFormatter}


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="review_command", metavar="SUBCOMMAND", required=True)
    export = sub.add_parser("export", help="write review.html, review.csv and manifest.json for a results folder")
    export.add_argument("results", metavar="RESULTS_DIR")
    export.add_argument("--out", metavar="SHEET_DIR", help="sheet folder (default RESULTS_DIR/review)")
    export.add_argument("--force", action="store_true",
                        help="replace SHEET_DIR/review.csv even when a reviewer has filled some of it in (without "
                             "it, such a sheet is kept and the export stops with status 2)")
    export.add_argument("--random", type=int, metavar="N",
                        help="review a seeded random N of the other cases judged correct (default: the cases "
                             "the run sampled, review_reason 'sampled'; else 4)")
    export.add_argument("--seed", type=int, metavar="S", help="seed of that draw and of the card order "
                        "(default: the run's own, eval --review-seed)")
    export.add_argument("--base-url", metavar="URL", help="split references without keyPoints into key points "
                        "with this OpenAI-compatible endpoint (one cached call per reference; key from "
                        "RAGMETER_API_KEY or OPENAI_API_KEY)")
    export.add_argument("--model", metavar="M", help="the model for --base-url")
    export.add_argument("--cache", default=".ragmeter/cache.sqlite", metavar="PATH",
                        help="judge cache for those calls (default .ragmeter/cache.sqlite)")
    export.add_argument("--no-cache", action="store_true", help="send every key-point call, cache nothing")
    imp = sub.add_parser("import", help="read a filled sheet: agreement, kappa, strata, PPI; update summary and reports")
    imp.add_argument("results", metavar="RESULTS_DIR")
    imp.add_argument("sheet", metavar="SHEET.csv")
    imp.add_argument("--min-agreement", type=fraction, default=0.8, metavar="F",
                     help="warn when agreement is below this (default 80%%)")
    imp.add_argument("--json", action="store_true", help="print the calibration section as JSON")
    cmp_ = sub.add_parser("compare", help="pairwise agreement and kappa between judges and the human labels")
    cmp_.add_argument("results", nargs="+", metavar="RESULTS_DIR")
    cmp_.add_argument("--human", metavar="SHEET.csv", help="a filled review sheet: compare every judge with it too")
    cmp_.add_argument("--json", action="store_true", help="print the table as JSON")


def run(args: argparse.Namespace) -> int:
    return {"export": _export, "import": _import, "compare": _compare}[args.review_command](args)


def _export(args: argparse.Namespace) -> int:
    from ragmeter.cli._inputs import check_out
    from ragmeter.cli._tables import make_console, print_prose
    from ragmeter.review import export_sheet
    from ragmeter.review.sampling import STRATUM_LABELS

    check_out(args.out)

    judge = None
    if args.base_url or args.model:
        if not (args.base_url and args.model):
            from ragmeter.errors import InputError

            raise InputError("key points from an endpoint need both --base-url and --model")
        from ragmeter.judge import JudgeConfig

        judge = JudgeConfig(base_url=args.base_url, model=args.model, metrics=["correctness"],
                            cache=None if args.no_cache else args.cache, progress=False)
    manifest = export_sheet(args.results, args.out, random_n=args.random, seed=args.seed, judge=judge,
                            force=args.force)
    console = make_console()
    counts = {s: list(manifest["strata"].values()).count(s) for s in STRATUM_LABELS}
    print_prose([f"review sample: {len(manifest['ids'])} cases: " + ", ".join(
                    f"{STRATUM_LABELS[s]} {n}" for s, n in counts.items() if n),
                 f"  C: {manifest['random']['method']}",
                 *(f"  note: {note}" for note in manifest["notes"]),
                 f"wrote {manifest['out']}/: review.html, review.csv, manifest.json"], console)
    return 0


def _import(args: argparse.Namespace) -> int:
    from ragmeter._io import strict_json
    from ragmeter.cli._tables import make_console, print_prose
    from ragmeter.review import import_sheet
    from ragmeter.review.render import text_lines

    section = import_sheet(args.results, args.sheet, min_agreement=args.min_agreement)
    if args.json:
        print(strict_json(section))
    else:
        console = make_console()
        print_prose([*text_lines(section),
                     f"wrote {args.results}/: review.parquet, summary.json (calibration), report.html, report.md"],
                    console)
    return 3 if section["n_incomplete"] else 0


def _compare(args: argparse.Namespace) -> int:
    from ragmeter._io import strict_json
    from ragmeter.cli._tables import make_console, print_prose
    from ragmeter.review.raters import compare_raters
    from ragmeter.review.render import interval, kappa_text, pct

    result = compare_raters(args.results, args.human)
    if args.json:
        print(strict_json(result))
        return 0
    console = make_console()
    lines = ["verdicts: " + ", ".join(f"{name} {c['n_judged']} of {c['n_total']} cases"
                                      for name, c in result["n_judged"].items())]
    if result["n_cases"] is not None:
        left = (f" (of {result['n_in_sheet']} in the sheet; {result['n_unreviewed']} not (fully) reviewed, left out)"
                if result.get("n_unreviewed") else "")
        lines.append(f"every pair compared on the {result['n_cases']} human-reviewed cases{left}")
    lines.append("pair | n | agreement (95%) | Cohen's kappa (95%), band")
    lines += [f"{row['a']} vs {row['b']} | {row['n']} | {row['agreed']}/{row['n']} = {pct(row['value'])} "
              f"{interval(row['ci_low'], row['ci_high'])} | {kappa_text(row['kappa'])}" for row in result["pairs"]]
    if result["finding"]:
        lines.append(f"finding: {result['finding']}")
    print_prose(lines, console)
    return 0
