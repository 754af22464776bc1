"""``ragmeter eval``: score retrieval, judge answers and write the reports, in one folder.

The exit status follows ``ragmeter judge`` (see :mod:`ragmeter.cli.judge`): 3 when the results were written but
more judge rows failed than ``--max-failed`` allows, 2 when the judge run had to stop (nothing is written then).
"""
from __future__ import annotations

import argparse

from ragmeter.cli.judge import EPILOG  # the same exit statuses

HELP = "score + judge + report into one folder: tables, summary.json, report.html/.md"
PARSER_OPTIONS = {"epilog": EPILOG, "formatter_class": argparse.RawDescriptionHelpFormatter}


def configure(parser: argparse.ArgumentParser) -> None:
    from ragmeter.cli import judge as judge_cli

    judge_cli.configure(parser, cases=False)  # eval scores retrieval too: it needs --golden and --run
    # Judging is optional here: without --base-url/--model only retrieval is scored.
    for action in parser._actions:
        if action.dest in ("base_url", "model"):
            action.required = False
        if action.dest == "out":
            action.default = "ragmeter-eval"
            action.help = "results folder (default ragmeter-eval)"
    parser.add_argument("--k", type=int, default=5, help="retrieval cut-off (default 5)")
    parser.add_argument("--thresholds", metavar="LIST", help="also sweep these reranker thresholds, e.g. 0,0.1,0.2")
    parser.add_argument("--no-judge", action="store_true", help="score retrieval only, even if an endpoint is given")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="judge every case N times (repeats 2..N bypass the cache) and report the spread per "
                             "metric and the share of cases whose verdict flips (default 1)")
    from ragmeter.cli.collect import add_target_options

    add_target_options(parser, required=False)  # eval --target: collect into OUT/run.jsonl, then evaluate
    parser.add_argument("--review-rate", type=float, default=None, metavar="R",
                        help="share of cases sampled at random for human review (review_reason 'sampled'; "
                             "default 0.1); judge-failed and miss-but-correct cases always go to review")
    parser.add_argument("--review-seed", type=int, default=None, metavar="S",
                        help="seed of the per-case review draw (default fixed; recorded in summary.json)")


def run(args: argparse.Namespace) -> int:
    from ragmeter.cli._tables import make_console, print_audit_pointer, print_score
    from ragmeter.cli.sweep import parse_thresholds
    from ragmeter.errors import InputError
    from ragmeter.evaluation import run_eval

    if not (args.golden and (args.run or args.target)):
        raise InputError("--golden G and --run R (or --target TARGET) are required")
    if args.repeat < 1:
        raise InputError("--repeat: must be at least 1")
    from ragmeter.cli.judge import apply_preset

    apply_preset(args)  # --concurrency and --timeout serve --target's collection too, judged or not
    from ragmeter.calibration import review_settings

    review_settings(args.review_rate, args.review_seed)  # a bad rate is an error before anything is judged
    judge = None
    if not args.no_judge and (args.base_url or args.model):
        if not (args.base_url and args.model):
            raise InputError("judging needs both --base-url and --model (or pass --no-judge)")
        from ragmeter.cli.judge import build_config

        judge = build_config(args)
    # With --json, stdout holds the summary alone and every other line goes to stderr.
    console = make_console(stderr=args.json)
    collected = 0
    if args.target:
        from ragmeter.cli.collect import collect_for_eval

        collected = collect_for_eval(args, console)
    from ragmeter.cli.collect import run_for_eval

    run = run_for_eval(args.run, console)
    from ragmeter.cli.judge import incomplete_exit, judge_lines, judged
    if args.dry_run:
        if judge is None:
            raise InputError("--dry-run estimates the judge's calls and cost: pass --base-url and --model")
        from ragmeter.cli.judge import print_estimate
        from ragmeter.evaluation import estimate_eval

        estimate = estimate_eval(args.golden, run, judge, repeat=args.repeat)
        if args.json:
            from ragmeter._io import strict_json

            print(strict_json(estimate))
        else:
            print_estimate(estimate, len(judge.metrics))
        return 0
    if judge is None:
        console.print("[yellow]no judge endpoint given: answers are not judged; judge metrics are reported as not measured[/]")
    thresholds = parse_thresholds(args.thresholds) if args.thresholds else None
    if judge is None and args.repeat > 1:
        console.print("[yellow]--repeat applies to judging only: nothing is repeated without a judge[/]")
    summary = judged(lambda: run_eval(args.golden, run, args.out, k=args.k, judge=judge,
                                      thresholds=thresholds, repeat=args.repeat,
                                      review_rate=args.review_rate, review_seed=args.review_seed), judge)
    if args.json:
        from ragmeter._io import strict_json

        print(strict_json(summary))
        print_audit_pointer(args.golden, console, summary.get("golden_set"))
        return max(collected, incomplete_exit(summary.get("judge"), args.max_failed, args.out))
    print_score(summary["retrieval"], out_dir=None, console=console)
    print_audit_pointer(args.golden, console, summary.get("golden_set"))
    if summary.get("judge"):
        for line in judge_lines(summary["judge"]):
            console.print(line, markup=False, highlight=False)
    if summary.get("repeats"):
        from ragmeter.repeats import repeat_table

        headers, rows = repeat_table(summary["repeats"])
        console.print(f"repeats: {summary['repeats']['n']} (repeats 2..N bypassed the cache)")
        console.print("  " + " | ".join(headers), markup=False)
        for row in rows:
            console.print("  " + " | ".join(row), markup=False)
    if summary.get("cost"):
        console.print(cost_line(summary["cost"], judged=bool(summary.get("judge"))), markup=False, highlight=False)
    files = summary.get("files") or ["cases.parquet", "summary.json", "report.html", "report.md"]
    console.print(f"wrote {args.out}/: " + ", ".join(files), markup=False, highlight=False)
    return max(collected, incomplete_exit(summary.get("judge"), args.max_failed, args.out))


def cost_line(cost: dict, judged: bool) -> str:
    """``cost: system $X (n/N cases), judge $Y, judge share Z%``; an unreported cost is n/a, never $0."""
    def usd(v: object) -> str:
        return "n/a" if v is None else f"${v:.4f}"

    system = (f"cost: system {usd(cost.get('system_cost_usd'))} "
              f"({cost.get('n_cases_with_cost')}/{cost.get('n_cases')} cases report one)")
    if not judged:
        return system + "; not judged"
    share = cost.get("judge_cost_share")
    return (f"{system}, judge {usd(cost.get('judge_cost_usd'))}, total {usd(cost.get('total_cost_usd'))}, "
            f"judge share {'n/a' if share is None else f'{100 * share:.1f}%'}")
