"""``ragmeter report DIR``: rebuild report.html and report.md from stored results."""
from __future__ import annotations

import argparse

HELP = "rebuild report.html and report.md from a results directory"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("results_dir", metavar="DIR", help="results directory (cases.parquet, summary.json, ...)")
    parser.add_argument("--out", metavar="DIR", default=None, help="write the reports here instead of DIR")
    parser.add_argument("--resamples", type=int, default=None, help="bootstrap resamples for the intervals (100 to 100,000; default 2000)")
    parser.add_argument("--seed", type=int, default=None, help="bootstrap seed (default: fixed, reproducible)")


def run(args: argparse.Namespace) -> int:
    from ragmeter.report import DEFAULT_REPORT_RESAMPLES, check_report_resampling, write_reports

    from ragmeter.cli._inputs import check_out
    from ragmeter.cli._tables import make_console, print_warning

    resamples = DEFAULT_REPORT_RESAMPLES if args.resamples is None else args.resamples
    check_report_resampling(resamples, args.seed, names=("--resamples", "--seed"))
    check_out(args.out)
    paths = write_reports(args.results_dir, out_dir=args.out, n_resamples=resamples, seed=args.seed,
                          # wrapped at stderr's width, control characters as escapes, as every command's warnings
                          on_warning=lambda text: print_warning(text, make_console(stderr=True),
                                                                head="ragmeter: warning: "))
    print(f"wrote {paths['html']}")
    print(f"wrote {paths['markdown']}")
    return 0
