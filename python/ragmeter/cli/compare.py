"""``ragmeter compare BASE_DIR CAND_DIR [--gate RULES]``: paired comparison and CI gate.

Output: tables for the terminal (fitting 80 columns; plain text at 80 columns
without control codes when stdout is not a terminal); ``--markdown`` prints
the Markdown summary instead, ``--out FILE.md`` writes it; ``--json`` prints
strict JSON (``--json FILE`` writes it to a file instead).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, List, Optional, Tuple

HELP = "compare two results folders case by case and gate regressions"

EPILOG = """exit status: 0 = compared (and every gate rule held); 1 = a gate rule was
violated; 2 = bad input (runs not comparable without --force, runs sharing no
case, unreadable folders, rules that do not parse or can never fail).

Gate rules, comma-separated, NAME[category] OP LIMIT:
  hit>=-2pp           delta (candidate - baseline) of at least -2 points
  faithfulness>=0.80  the candidate's value (also correct>=75%)
  refusal<=+2pp       refusals on answerable questions: lower is better
  regressions<=0      flips to worse of every outcome both runs have (hit,
                      correct, refusal); the output names each one counted
  correct_regressions<=0, hit_wins>=1   one metric's cases that got worse/better
  hit[fact]>=-5pp     one category
A rule that can never fail or never pass (hit>=-2: Hit@k is never below 0) is
an error with a suggestion (did you mean hit>=-2pp?). A rule on a metric that
was not measured fails: faithfulness with no case scored, correct>=75% or
correct>=-2pp on answers that were not judged, any rule on a metric that one
run scored on cases the other did not (a failed judge call)."""

PARSER_OPTIONS = {"epilog": EPILOG, "formatter_class": argparse.RawDescriptionHelpFormatter}

#: width of the plain-text output when stdout is not a terminal
PLAIN_WIDTH = 80


#: the most bootstrap resamples compare takes
MAX_RESAMPLES = 1_000_000


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", metavar="BASE_DIR", help="baseline results directory")
    parser.add_argument("candidate", metavar="CAND_DIR", help="candidate results directory")
    parser.add_argument("--gate", metavar="RULES", default=None, help="comma-separated gate rules (see below)")
    parser.add_argument("--force", action="store_true", help="compare even if golden sets, retrieval-mode mixes, k or judge models differ (warns loudly)")
    parser.add_argument("--markdown", action="store_true", help="print the Markdown summary instead of tables")
    parser.add_argument("--out", metavar="FILE.md", default=None, help="also write the Markdown summary here")
    parser.add_argument("--json", metavar="FILE.json", nargs="?", const="-", default=None,
                        help="print the full comparison as strict JSON instead of tables (with FILE: write it there)")
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (at most 1,000,000; default 10000)")
    parser.add_argument("--seed", type=int, default=None, help="bootstrap seed (default: fixed, reproducible)")


def _write_all(outputs: List[Tuple[str, str]]) -> None:
    """Write each (path, text) of ``outputs``, all or none: every file is written beside its place first, and
    moved there only when all were (the Markdown summary was left behind when the JSON then failed). A file that
    cannot be written is named, not its folder."""
    import contextlib
    from pathlib import Path

    from ragmeter._io import atomic_file, write_text

    with contextlib.ExitStack() as stack:
        temporary = []
        for path, _text in outputs:
            Path(path).parent.mkdir(parents=True, exist_ok=True)  # a new folder for the file, as every --out
            temporary.append(stack.enter_context(atomic_file(path)))
        for tmp, (_path, text) in zip(temporary, outputs):
            write_text(tmp, text)


def run(args: argparse.Namespace) -> int:
    from ragmeter import gate
    from ragmeter.compare import compare, to_json, to_markdown
    from ragmeter.errors import InputError
    from ragmeter.report.data import register_folder_metrics

    from ragmeter.stats import check_resampling

    check_resampling(args.resamples, args.seed, names=("--resamples", "--seed"))
    if args.resamples > MAX_RESAMPLES:
        raise InputError(f"--resamples must be at most {MAX_RESAMPLES:,} (the paired intervals settle long before; "
                         f"memory grows with it), got {args.resamples}")
    register_folder_metrics(args.base, args.candidate)  # custom judge metrics are gate names like built-in ones
    rules = gate.parse_rules(args.gate) if args.gate is not None else None
    from ragmeter.cli._inputs import check_out

    # before the names' extensions: an empty --out (an unset variable) is said to be empty, not to lack .md.
    # The .json and .md outputs could only land on a folder's summary.json among the files compare reads.
    from ragmeter._io import RESULT_FILES

    # nor over a file of either folder: `--out BASE/report.md` replaced the baseline's own report
    inputs = [(f"the {side}'s {name}", Path(folder) / name) for name in RESULT_FILES
              for side, folder in (("baseline", args.base), ("candidate", args.candidate))]
    check_out(args.out, folder=False, inputs=inputs)  # before the comparison is computed
    check_out(args.json if args.json != "-" else None, folder=False, flag="--json", inputs=inputs)
    if args.out is not None and not args.out.lower().endswith((".md", ".markdown")):
        raise InputError(f"--out {args.out}: the summary is Markdown; name the file .md")
    if args.json not in (None, "-") and args.json.strip() and not args.json.lower().endswith(".json"):
        raise InputError(f"--json {args.json}: the comparison is JSON; name the file .json (or give no file to print it)")
    if args.json == "-" and args.markdown:
        raise InputError("--json and --markdown both print the comparison on stdout: give one (or --json FILE.json "
                         "to write the JSON to a file beside the Markdown)")
    comp = compare(args.base, args.candidate, force=args.force, n_resamples=args.resamples, seed=args.seed)
    results = gate.evaluate(rules, comp) if rules is not None else None
    for w in comp.warnings:
        _stderr("ragmeter: warning: ", w)
    if comp.forced:
        _stderr("ragmeter: WARNING: ", "--force: comparing runs that are not comparable: " + "; ".join(comp.problems))
    if args.json == "-":
        print(to_json(comp, results))
    elif args.markdown:
        print(to_markdown(comp, results))
    else:
        render(comp, results)
    outputs = [(args.out, to_markdown(comp, results))] if args.out else []
    if args.json not in (None, "-"):
        outputs.append((args.json, to_json(comp, results) + "\n"))
    _write_all(outputs)
    if outputs:  # every command that writes a file says where; stdout stays the JSON or Markdown it prints
        print("wrote " + ", ".join(path for path, _ in outputs),
              file=sys.stderr if args.json == "-" or args.markdown else sys.stdout)
    if results is not None and not all(r.passed for r in results):
        failed = [r.detail.replace("`", "") for r in results if not r.passed]
        _stderr("ragmeter: gate failed: ", "; ".join(failed))
        return 1
    return 0


def _stderr(head: str, text: str) -> None:
    """``head`` and ``text`` on stderr, wrapped at its width (80 when it is not a terminal) as the other commands'
    warnings (``print_warning``)."""
    from ragmeter.cli._tables import make_console, print_warning

    print_warning(text, make_console(stderr=True), head=head)


# --------------------------------------------------------------------------- terminal tables


def _console() -> Any:
    from ragmeter.cli._tables import _PipeConsole  # `| head` ends with status 0, not rich's 1 (a failed gate's)

    if sys.stdout.isatty():
        return _PipeConsole(file=sys.stdout, highlight=False, emoji=False)
    return _PipeConsole(file=sys.stdout, width=PLAIN_WIDTH, color_system=None, force_terminal=False,
                        force_interactive=False, highlight=False, emoji=False)


def _table(title: str, headers: List[str], first_left: int = 1) -> Any:
    from rich import box
    from rich.table import Table

    from ._tables import one_line_title

    table = Table(title=one_line_title(title), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False,
                  padding=(0, 1))
    for i, h in enumerate(headers):
        # never an ellipsis: a value too long for its column folds onto the next line
        table.add_column(h, justify="left" if i < first_left else "right", overflow="fold",
                         no_wrap=i >= first_left)
    return table


def render(comp: Any, gate_results: Optional[List[Any]] = None, console: Any = None) -> None:
    """Print the comparison as terminal tables (every table fits 80 columns)."""
    from ragmeter.compare import LEGEND, flip_lines, fmt_ci, fmt_delta, fmt_mdd, fmt_p, fmt_value, gate_lines, header_sentence

    from ragmeter.cli._tables import print_prose, print_warning

    console = console or _console()

    def say(text: str, style: Optional[str] = None) -> None:
        # prose wrapped at the console's width with a hanging indent, never inside an interval, no trailing spaces
        # (rich would wrap it at column 0 and split "n = 45" or "[-14.9pp, +0.0pp]"); markup never parsed
        print_prose([text], console, style=style)
    if comp.forced:
        say("FORCED COMPARISON: these runs are not comparable; the numbers compare only the "
            f"{comp.n_paired} common cases and may be meaningless:", "bold red")
        for p in comp.problems:
            say(f"  - {p}", "red")
        say("")
    say(header_sentence(comp))
    if gate_results is not None:
        head, *items = gate_lines(gate_results)
        say("")
        say(head, "bold red" if "FAILED" in head else "bold green")
        for item in items:
            say("  " + item.replace("`", ""), "red" if item.startswith("FAILED") else None)
    overall = [r for r in comp.rows if r.group == "overall"]
    deltas = _table("Deltas (candidate - baseline, cases scored in both runs)",
                    ["metric", "baseline", "candidate", "delta", "95% CI"])
    for r in overall:
        deltas.add_row(r.metric, fmt_value(r.baseline, r.kind), fmt_value(r.candidate, r.kind),
                       fmt_delta(r.delta, r.kind) + ("*" if r.significant else " "), fmt_ci(r))
    moved = _table("Cases that moved (better/worse in the metric's direction)",
                   ["metric", "n", "better", "worse", "same", "McNemar p", "MDD"])
    for r in overall:
        moved.add_row(r.metric + (" (lower is better)" if r.better == "lower" else ""), f"{r.n_paired}/{r.n_total}",
                      str(r.wins), str(r.regressions), str(r.ties), fmt_p(r.p_value), fmt_mdd(r))
    say("")
    console.print(deltas)
    say("")
    console.print(moved)
    say(LEGEND)
    _per_category(comp, console, say)
    lines = flip_lines(comp)
    if lines:
        say("")
        for line in lines:
            say(line)
    for w in comp.warnings:
        print_warning(w, console)
    for n in comp.notes:
        say(f"note: {n}")


def _per_category(comp: Any, console: Any, say: Any) -> None:
    """One table per key metric: every category, or at most ``MAX_ROWS`` (the largest drop in the metric's
    direction, then the rest by the same order) with a count of the others."""
    from rich.text import Text

    from ragmeter._text import printable
    from ragmeter.cli._tables import MAX_ROWS, print_more, worst_first
    from ragmeter.compare import CATEGORY_METRICS, category_caution, fmt_ci, fmt_delta, fmt_value, label

    key = [m for m in CATEGORY_METRICS if m in comp.metrics]
    groups = comp.groups
    if not groups:
        return
    rows = {(r.metric, r.group): r for r in comp.rows}  # comp.row() scans every row: quadratic in categories
    for m in key:
        # a category with no case the metric applies to (correct without a judge: the no-answer cases only) would
        # be a row of n/a 0/0: counted under the table instead
        applies = [g for g in groups if (m, g) in rows and (rows[(m, g)].n_total or rows[(m, g)].n_paired)]
        if not applies:
            continue
        shown, n_more = worst_first(applies, lambda g: _signed_delta(rows.get((m, g))),
                                    lambda g: rows[(m, g)].n_paired if (m, g) in rows else 0)
        table = _table(f"{label(m)} per category", ["category", "baseline", "candidate", "delta", "95% CI", "n"])
        for g in shown:
            r = rows.get((m, g))
            if r is None or not r.n_paired:
                table.add_row(Text(printable(g)), "n/a", "n/a", "n/a", "n/a", f"0/{r.n_total if r else 0}")
                continue
            table.add_row(Text(printable(g)), fmt_value(r.baseline, r.kind), fmt_value(r.candidate, r.kind),
                          fmt_delta(r.delta, r.kind) + ("*" if r.significant else " "), fmt_ci(r),
                          f"{r.n_paired}/{r.n_total}")
        say("")
        console.print(table)
        print_more(n_more, "categories", None, f"the {MAX_ROWS} that lost most (in the metric's direction), more "
                   "paired cases first among equals", console)
        left_out = len(groups) - len(applies)
        if left_out:
            say(f"{left_out} {'category' if left_out == 1 else 'categories'} with no case {label(m)} applies to, "
                "not shown")
    caution = category_caution(comp)
    if caution:
        say(caution)


def _signed_delta(r: Any) -> Optional[float]:
    """The delta with its sign in the metric's direction (negative = worse); None when no case is paired."""
    if r is None or not r.n_paired or r.delta is None or r.delta != r.delta:
        return None
    return -r.delta if r.better == "lower" else r.delta
