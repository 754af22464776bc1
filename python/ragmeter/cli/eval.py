"""``ragmeter eval``: score retrieval, judge answers and write the reports, in one folder.

The exit status follows ``ragmeter judge`` (see :mod:`ragmeter.cli.judge`): 3 when the results were written but
more judge rows failed than ``--max-failed`` allows, or the run holds cases that failed when it was collected; 2
when the judge run had to stop (nothing is written then).
"""
from __future__ import annotations

import argparse
import contextlib
from typing import Any, Optional

from ragmeter.cli._inputs import share
from ragmeter.cli.judge import exit_epilog

HELP = "score + judge + report into one folder: tables, summary.json, report.html/.md"
EPILOG = exit_epilog("""       (or the run file holds cases that failed when it was collected: a
       failed_in_run warning names them)
""")
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
                             "metric and the share of cases whose verdict flips (default 1); a run with collected "
                             "repeats (collect --repeat) is judged once per repeat and refuses --repeat")
    from ragmeter.cli.collect import add_target_options

    add_target_options(parser, required=False)  # eval --target: collect into OUT/run.jsonl, then evaluate
    parser.add_argument("--review-rate", type=share, default=None, metavar="R",
                        help="share of cases sampled at random for human review, 0.1 or 10%% (review_reason "
                             "'sampled'; default 0.1); judge-failed and miss-but-correct cases always go to review")
    parser.add_argument("--review-seed", type=int, default=None, metavar="S",
                        help="seed of the per-case review draw (default fixed; recorded in summary.json)")


def run(args: argparse.Namespace) -> int:
    from ragmeter.cli._tables import make_console, print_audit_pointer, print_diagnosis, print_prose, print_score
    from ragmeter.cli.sweep import parse_thresholds
    from ragmeter.errors import InputError
    from ragmeter.evaluation import run_eval

    if not (args.golden and (args.run or args.target)):
        raise InputError("--golden G and --run R (or --target TARGET) are required")
    if args.thresholds is not None and not args.thresholds.strip():
        raise InputError("--thresholds: empty; give comma-separated thresholds (e.g. 0,0.1,0.2) or leave it out")
    # a malformed list is an error before anything is collected (--target asks the live system) or judged
    thresholds = parse_thresholds(args.thresholds) if args.thresholds else None
    if not args.dry_run:  # a dry run writes nothing
        from ragmeter.cli._inputs import check_out

        # before anything is collected or judged; the files every eval writes, and a judge's
        judged = ("judge.parquet",) if not args.no_judge and (args.base_url or args.model) else ()
        check_out(args.out, files=("cases.parquet", "chunks.parquet", "summary.json", "warnings.json",
                                   "report.html", "report.md") + judged)
    from ragmeter._args import check_arg

    from ragmeter.cli._inputs import check_k_flag

    check_arg("--repeat", args.repeat, "int", low=1)
    check_k_flag(args.k)
    from ragmeter.cli.judge import apply_preset

    apply_preset(args)  # --concurrency serves --target's collection too, judged or not (its timeout is collect's 60 s)
    from ragmeter.calibration import review_settings

    # a bad rate is an error before anything is judged
    review_settings(args.review_rate, args.review_seed, names=("--review-rate", "--review-seed"))
    judge = None
    if not args.no_judge and (args.base_url or args.model):
        if not (args.base_url and args.model):
            raise InputError("judging needs both --base-url and --model (or pass --no-judge)")
        from ragmeter.cli.judge import build_config

        judge = build_config(args)
    from ragmeter.evaluation import check_repeat_judged

    check_repeat_judged(args.repeat, judge)  # before anything is collected
    if judge is None and not args.dry_run:  # retrieval is all there is to measure, before anything is collected
        from ragmeter.cli._inputs import refuse_unlabelled_golden

        refuse_unlabelled_golden(args.golden, _JUDGE_REMEDY)
    # With --json, stdout holds the summary alone and every other line goes to stderr.
    console = make_console(stderr=args.json)
    from ragmeter.cli.judge import incomplete_exit, judge_lines, judged
    if args.dry_run and not args.target:  # eval --target --dry-run: collect_for_eval refuses it below
        run = args.run
        if judge is None:
            if args.no_judge:  # the endpoint may well be there: it was turned off
                raise InputError("--dry-run estimates the judge's calls and cost, and --no-judge turns the judge "
                                 "off: drop one of them")
            raise InputError("--dry-run estimates the judge's calls and cost: pass --base-url and --model")
        from ragmeter.cli.judge import print_estimate
        from ragmeter.evaluation import estimate_eval

        estimate = estimate_eval(args.golden, run, judge, repeat=args.repeat)
        if args.json:
            from ragmeter._io import strict_json

            print(strict_json(estimate))
        else:
            print_estimate(estimate, len(judge.metrics))
            if estimate.get("collected_repeats"):
                from ragmeter._text import hanging

                for line in hanging([f"  totals over {estimate['collected_repeats']} collected repeats (collect "
                                     "--repeat), each judged once through the cache"]):
                    print(line)
        return 0
    from ragmeter.cli.collect import previous_run_kept

    # eval --target replaces OUT/run.jsonl before judging: a stop before the results are written puts the old one back
    with previous_run_kept(args.out) if args.target else contextlib.nullcontext():
        collected = 0
        if args.target:
            from ragmeter.cli.collect import collect_for_eval

            collected = collect_for_eval(args, console)
        run = args.run  # a run with collected repeats (a repeat column) is evaluated repeat by repeat
        if judge is None:
            why = "--no-judge" if args.no_judge else "no judge endpoint given"
            print_prose([f"{why}: answers are not judged; judge metrics are reported as not measured"], console,
                        "yellow")
        summary = judged(lambda: run_eval(args.golden, run, args.out, k=args.k, judge=judge,
                                          thresholds=thresholds, repeat=args.repeat,
                                          review_rate=args.review_rate, review_seed=args.review_seed,
                                          refuse_unmeasured=_JUDGE_REMEDY), judge)
    if args.json:
        from ragmeter._io import strict_json

        print(strict_json(summary))
        print_audit_pointer(args.golden, console, summary.get("golden_set"))
        return max(collected, _failed_in_run(summary),
                   incomplete_exit(_judge_outcome(summary), args.max_failed, args.out))
    if summary.get("collected_repeats"):
        console.print(f"{args.run}: {summary['collected_repeats']['n']} collected repeats (collect --repeat), each "
                      f"scored{' and judged' if judge is not None else ''}; the tables are repeat 1, the spread "
                      f"across repeats follows", markup=False, highlight=False)
    print_score(summary["retrieval"], out_dir=None, console=console, more_in=f"{args.out}/summary.json")
    _print_sweep(args, console)
    print_audit_pointer(args.golden, console, summary.get("golden_set"))
    if summary.get("judge"):
        note = _refusal_rule_note(args.out)
        for line in judge_lines(summary["judge"]):
            console.print(line, markup=False, highlight=False)
            if note and line.startswith("    correct "):  # under the rate it explains, not under the last metric
                print_prose([note], console)
                note = None
        if note:  # no correct rate printed (correctness not judged): after the judge's lines
            print_prose([note], console)
    print_diagnosis(summary.get("diagnosis"), console)
    if summary.get("repeats"):
        from ragmeter._text import hanging
        from ragmeter.repeats import incomplete_runs, repeat_table

        headers, rows = repeat_table(summary["repeats"])
        console.print(f"repeats: {summary['repeats']['n']} (repeats 2..N bypassed the cache)")
        # a row wider than the console goes on indented under itself, never at column 0
        for line in hanging(["  " + " | ".join(row) for row in [headers, *rows]]
                            + ["  " + line for line in incomplete_runs(summary["repeats"])], console.width):
            console.print(line, markup=False, highlight=False, crop=False, soft_wrap=True)
    if summary.get("collected_repeats"):
        print_collected(summary["collected_repeats"], console)
    if summary.get("cost"):
        console.print(cost_line(summary["cost"], judged=bool(summary.get("judge"))), markup=False, highlight=False)
    files = summary.get("files") or ["cases.parquet", "summary.json", "report.html", "report.md"]
    print_prose([f"wrote {args.out}/: " + ", ".join(files)], console)
    return max(collected, _failed_in_run(summary),
                   incomplete_exit(_judge_outcome(summary), args.max_failed, args.out))


_JUDGE_REMEDY = "pass --base-url and --model to judge the answers"


def _refusal_rule_note(out: str) -> Optional[str]:
    """The line saying, under the judge's correct rate, that the reports' Correct also counts no-answer cases the
    judge did not grade (by the refusal rule): otherwise the terminal and report.md give two 'correct' numbers
    unexplained. None when there are none."""
    from pathlib import Path

    import polars as pl

    from ragmeter.report.data import counted_by_refusal_rule

    path = Path(out) / "cases.parquet"
    try:
        columns = set(pl.read_parquet_schema(path))
        wanted = [c for c in ("correctness_status", "is_noanswer", "answer_correct") if c in columns]
        by_rule = counted_by_refusal_rule(pl.read_parquet(path, columns=wanted))
    except (OSError, pl.exceptions.PolarsError):  # the folder's own files were written just before
        return None
    if by_rule is None:
        return None
    n, refused = by_rule
    return (f"    the reports' Correct also counts {n} no-answer case(s) the judge did not grade (no "
            f"reference answer, or the budget) by the refusal rule ({refused} of {n} refused)")



def _failed_in_run(summary: dict) -> int:
    """3 when the run (any collected repeat of it) holds cases that failed when it was collected."""
    from ragmeter.cli._inputs import failed_in_run_exit

    repeats = (summary.get("collected_repeats") or {}).get("run_errors") or []
    return failed_in_run_exit((summary.get("retrieval") or {}).get("run_errors"), *repeats)


def _judge_outcome(summary: dict) -> Optional[dict]:
    """What ``--max-failed`` is checked against: the judge rows of every repeat (collected, or judged again with
    ``--repeat N``), else the judge's."""
    for key in ("collected_repeats", "repeats"):
        section = summary.get(key) or {}
        if summary.get("judge") and section.get("judge_incomplete"):
            return {"incomplete": section["judge_incomplete"]}
    return summary.get("judge")


def _rate_or_score(kind: str, value: Optional[float], spread: bool = False) -> str:
    if value is None:
        return "n/a"
    if kind == "rate":
        return f"{100 * value:.1f}" + ("pp" if spread else "%")
    return f"{value:.3f}"


def print_collected(section: dict, console: Any) -> None:
    """The spread across collected repeats, one row per metric, within 80 columns (a long per-repeat list
    folds onto further lines, never cut)."""
    from rich.text import Text

    from ragmeter.cli._tables import _table

    n = section.get("n")
    table = _table(f"Spread across {n} collected repeats (the tables above are repeat 1)", console)
    table.add_column("metric", justify="left", overflow="fold")
    for col in ("mean", "std", "min", "max", "n", "flipped"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("per repeat", justify="left", overflow="fold")
    for name, e in (section.get("metrics") or {}).items():
        kind = e.get("kind", "score")
        scored, totals = e.get("n_scored") or [], e.get("n_total") or []
        low, high = (min(scored), max(scored)) if scored else (0, 0)
        count = f"{low}/{max(totals) if totals else 0}" if low == high else f"{low}-{high}/{max(totals)}"
        flips = "n/a" if e.get("flip_rate") is None else f"{e['n_flipped']}/{e['n_compared']}"
        table.add_row(name, _rate_or_score(kind, e.get("mean")), _rate_or_score(kind, e.get("std"), spread=True),
                      _rate_or_score(kind, e.get("min")), _rate_or_score(kind, e.get("max")), count, flips,
                      " ".join(_rate_or_score(kind, v) for v in e.get("per_repeat") or []))
    console.print(table)
    console.print(Text("mean, std (ddof=1; pp = points), min, max: of the per-repeat means. n: cases scored/all "
                       "per repeat. flipped: cases whose value differs between repeats, of those scored in two or "
                       "more. Per case and repeat: repeats.parquet.", style="dim"))


def cost_line(cost: dict, judged: bool) -> str:
    """``cost: system $X (n/N cases), judge $Y, judge share Z%``; an unreported cost is n/a, never $0."""
    def usd(v: object) -> str:
        return "n/a" if v is None else f"${v:.4f}"

    unit = f"case-repeats of {cost['n_repeats']} collected repeats" if cost.get("n_repeats") else "cases"
    system = (f"cost: system {usd(cost.get('system_cost_usd'))} "
              f"({cost.get('n_cases_with_cost')}/{cost.get('n_cases')} {unit} report one)")
    if not judged:
        return system + "; not judged"
    share = cost.get("judge_cost_share")
    return (f"{system}, judge {usd(cost.get('judge_cost_usd'))}, total {usd(cost.get('total_cost_usd'))}, "
            f"judge share {'n/a' if share is None else f'{100 * share:.1f}%'}")


def _print_sweep(args: argparse.Namespace, console: Any) -> None:
    """The threshold sweep ``--thresholds`` asked for, as ``ragmeter sweep`` prints it (its file: sweep.parquet)."""
    from pathlib import Path

    path = Path(args.out) / "sweep.parquet"
    if args.thresholds is None or not path.is_file():
        return
    import polars as pl

    from ragmeter.cli._tables import print_sweep

    print_sweep(pl.read_parquet(path), args.k, console, more_in=str(path))
