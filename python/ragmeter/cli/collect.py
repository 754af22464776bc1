"""``ragmeter collect``: call the live RAG system once per golden case and write a run file."""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any, Iterator

HELP = "ask the live RAG system every golden question (HTTP or Python); write a run file"

EPILOG = """exit status:
  0  every case collected
  2  bad target, unusable first response (not JSON, a mapping path that
     matches nothing), a refused key (401/403), no such route (404), an
     exhausted quota, an unreachable system, a damaged cache: nothing is
     written; finished replies stay cached and a rerun resumes
  3  run file written but incomplete: some cases failed (records with 'error'),
     or a case ran in another mode than --expect-mode
See docs/collect.md."""

PARSER_OPTIONS = {"epilog": EPILOG, "formatter_class": argparse.RawDescriptionHelpFormatter}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--golden", required=True, metavar="G", help="golden set (JSONL): the questions to ask")
    add_target_options(parser)
    parser.add_argument("--out", required=True, metavar="RUN", help="run file to write: .jsonl, or .parquet")
    parser.add_argument("--concurrency", type=int, default=8, metavar="N", help="concurrent calls (default 8)")
    parser.add_argument("--rpm", type=float, metavar="N", help="requests per minute (default: no limit)")
    from ragmeter.cli.judge import add_rate_control

    add_rate_control(parser, ceilings="--rpm and --concurrency")  # collect has no --tpm
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="collect N runs of the golden set (a 'repeat' column, 1..N; default 1)")
    parser.add_argument("--cache", default=None, metavar="PATH",
                        help="cache of the system's finished replies (default .ragmeter/collect.sqlite)")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="S", help="seconds per attempt (default 60)")
    parser.add_argument("--retry-attempts", type=int, default=6, metavar="N",
                        help="attempts per case on 429/5xx/time-outs (default 6)")
    parser.add_argument("--refresh", action="store_true", help="call the system again for cached cases")
    parser.add_argument("--expect-mode", metavar="MODE",
                        help="every case must run in this retrieval mode (e.g. hybrid); another mode gives exit 3")


def add_target_options(parser: argparse.ArgumentParser, required: bool = True) -> None:
    what = "target TOML file (url, method, headers, body, [response]) or module:function"
    parser.add_argument("--target", required=required, metavar="TARGET", help=what if required else
                        f"instead of --run: collect the run first from this {what}, into OUT/run.jsonl")


def collect_from(args: argparse.Namespace, golden: str, out: Any, cache: Any, console: Any) -> int:
    """Collect into ``out`` and print the outcome; 3 when the run file is incomplete, else 0."""
    from ragmeter.collect import collect
    from ragmeter.judge.retry import RetryPolicy, check_retry_attempts

    # 0 or -1 silently meant 1; 10**9 retried a failing case for practically ever
    policy = RetryPolicy(max_attempts=check_retry_attempts(getattr(args, "retry_attempts", 6)))
    result = collect(golden, args.target, out, concurrency=args.concurrency, rpm=getattr(args, "collect_rpm", None),
                     repeat=getattr(args, "collect_repeat", 1), cache=cache, timeout=args.collect_timeout,
                     refresh=bool(getattr(args, "refresh", False)), expect_mode=getattr(args, "expect_mode", None),
                     policy=policy, rate_control=getattr(args, "rate_control", "adaptive"))
    print_summary(result.summary, console)
    return incomplete_exit(result, out)


def print_summary(summary: dict, console: Any) -> None:
    """:func:`summary_lines` on the terminal, each wrapped under itself at the console's width."""
    from ragmeter.cli._tables import print_prose, print_warning

    for line in summary_lines(summary):
        if line.startswith("warning: "):
            print_warning(line[len("warning: "):], console)
        else:
            print_prose([line], console)


def summary_lines(s: dict) -> list:
    from ragmeter._warnings import messages

    lat = s["latency_ms"]
    p = lambda v: "n/a" if v is None else f"{v:.0f} ms"  # noqa: E731
    lines = [f"collected {s['n_collected']} of {s['n_records']} cases ({s['n_failed']} failed, {s['n_cached']} from "
             f"the cache, {s['n_requests']} requests, {s['n_empty_retried']} empty answers asked again)",
             f"latency p50 {p(lat['p50'])}, p95 {p(lat['p95'])} ({lat['n']} cases); retrieval modes: "
             + (", ".join(f"{m} {n}" for m, n in s["retrieval_modes"].items()) or "none")]
    if s.get("n_empty_retrievals"):  # a retriever that came back with nothing is seen now, not at eval
        lines.append(_empty_retrievals_line(s["n_empty_retrievals"], s.get("n_empty_retrievals_unlabelled", 0)))
    for kind, f in s["failures"].items():
        lines.append(f"failed ({kind}): {f['count']}, first {f['first_case']}: {f['example']}")
    lines += [f"warning: {m}" for m in messages(s.get("warnings"))]
    return lines


def _empty_retrievals_line(n_empty: int, n_unlabelled: int) -> str:
    """Only a case with expected files or evidence scores its empty retrieval as a miss: a no-answer case's is
    left out of retrieval (and is what a good system does), so the two are counted apart."""
    if not n_unlabelled:
        return f"{n_empty} empty retrievals (retrieved: [], scored as misses)"
    n_labelled = n_empty - n_unlabelled
    labelled = f"{n_labelled} of a labelled case, scored as a miss" if n_labelled == 1 else \
        f"{n_labelled} of labelled cases, scored as misses"
    unlabelled = f"{n_unlabelled} of a case" if n_unlabelled == 1 else f"{n_unlabelled} of cases"
    return (f"{n_empty} empty retrievals (retrieved: []): {labelled}; {unlabelled} without expected files or "
            "evidence, not scored for retrieval")


def incomplete_exit(result: Any, out: Any) -> int:
    s = result.summary
    if not result.incomplete:
        return 0
    reasons = []
    if s["n_failed"]:
        reasons.append(f"{s['n_failed']} of {s['n_records']} cases failed (recorded with 'error' in {out})")
    expect = s.get("expect_mode")
    if expect and expect["n_other"]:
        reasons.append(f"{expect['n_other']} case(s) ran in another mode than --expect-mode {expect['mode']}, "
                       f"first {expect['first_case']} ({expect['first_mode']})")
    print("ragmeter: incomplete: " + "; ".join(reasons), file=sys.stderr)
    return 3


def run(args: argparse.Namespace) -> int:
    from ragmeter.cli._inputs import check_out
    from ragmeter.cli._tables import make_console
    from ragmeter.collect import DEFAULT_PATH

    check_out(args.out, folder=False)  # before any case is asked
    args.collect_rpm, args.collect_repeat, args.collect_timeout = args.rpm, args.repeat, args.timeout
    cache = None if args.no_cache else (args.cache or DEFAULT_PATH)
    console = make_console()
    code = collect_from(args, args.golden, args.out, cache, console)
    console.print(f"wrote {args.out}", markup=False, highlight=False)
    return code


# -- ragmeter eval --target / a run file with repeats ------------------------------------------------------
@contextlib.contextmanager
def previous_run_kept(out_dir: Any) -> Iterator[None]:
    """``eval --target`` collects into OUT/run.jsonl before judging: until the block ends the previous run file is
    kept beside it (a hard link, else a copy) and put back if the block stops (Ctrl-C, SIGTERM, an error), so the
    folder's run.jsonl stays the run its summary.json measured. A copy left by a killed run (kill -9) is put back
    first when the folder's summary.json measured it, else dropped."""
    from pathlib import Path

    from ragmeter.evaluation import _sha256

    run = Path(out_dir) / "run.jsonl"
    kept = run.with_name(".run.jsonl.previous")
    if kept.is_file():
        if _sha256(kept) == _measured_run_sha256(Path(out_dir)):
            _put_back(kept, run)
        else:
            kept.unlink()
    if not run.is_file():
        yield
        return
    import shutil

    try:
        os.link(run, kept)  # collect replaces run.jsonl by another file: the link keeps the old one, copying nothing
    except OSError:
        shutil.copy2(run, kept)
    try:
        yield
    except BaseException:
        _put_back(kept, run)
        raise
    kept.unlink()


def _put_back(kept: Any, run: Any) -> None:
    if run.is_file() and os.path.samefile(kept, run):
        kept.unlink()  # never replaced: a rename onto another link of the same file would do nothing, keep both
    else:
        os.replace(kept, run)


def _measured_run_sha256(out: Any) -> Any:
    """The run file's sha256 as the results folder ``out``'s summary.json records it (None without one)."""
    import json

    try:
        return json.loads((out / "summary.json").read_text(encoding="utf-8"))["inputs"]["run"]["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def collect_for_eval(args: argparse.Namespace, console: Any) -> int:
    """``eval --target``: collect into OUT/run.jsonl (with collect's defaults, eval's --concurrency and
    --no-cache), point ``args.run`` at it; returns 3 when some cases failed, else 0."""
    from pathlib import Path

    from ragmeter.collect import DEFAULT_PATH
    from ragmeter.errors import InputError

    if args.run:
        raise InputError("pass --run or --target, not both (--target collects the run into the results folder)")
    if not args.golden:
        raise InputError("--target needs --golden G (the questions to ask)")
    if args.dry_run:
        raise InputError("--dry-run estimates the judge only: run ragmeter collect first, then eval --run --dry-run")
    from ragmeter.cli._inputs import check_out

    check_out(args.out)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    args.collect_timeout = 60.0
    cache = None if args.no_cache else str(Path(args.cache).with_name(Path(DEFAULT_PATH).name))
    args.run = str(out / "run.jsonl")
    code = collect_from(args, args.golden, args.run, cache, console)
    console.print(f"collected the run into {args.run}", markup=False, highlight=False)
    return code
