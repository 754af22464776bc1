"""``ragmeter trec QRELS RUN``: a drop-in for trec_eval 10.

It accepts trec_eval's own flag syntax (``-q``, ``-c``, ``-J``, ``-n``,
``-M100``, ``-l2``, ``-N n``, ``-m all_trec``, ``-m P.5,10``,
``-mndcg.1=3,2=9``), its long options (``--query_eval_wanted``, ...), ``-v``,
the default formats by name (``-R qrels``, ``-T trec_results``) and ``-`` for a
run on stdin, and prints the same output.

Start-up is most of the wall time on small and mid-sized files, so the usual
command lines are read by a small getopt-style parser and only the standard
library's ``sys`` and the compiled core are imported. Anything else (``-h``,
an unknown flag, a missing value, a bad number) goes to the argparse parser
that ``configure`` builds, which owns the help text and every usage error.
"""
from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing and argparse cost milliseconds to import; the fast path needs neither
    import argparse
    from typing import Any, Dict, List, Optional, Sequence, Tuple

HELP = "trec_eval-compatible evaluation of a TREC run against qrels"
EPILOG = ("trec_eval's long options (--query_eval_wanted, --measure, ...) are read too. Its -D (debug), "
          "-Z (z-scores) and -o (old output format) are not supported.")
PARSER_OPTIONS = {"add_help": True, "epilog": EPILOG}

#: trec_eval's switches and the argument name each sets.
SWITCHES = {"q": "per_query", "n": "no_summary", "c": "complete", "J": "judged_only"}
#: trec_eval's options that take a value: argument name, and whether it is an integer.
VALUED = {"M": ("max_docs", True), "l": ("level", True), "N": ("num_docs", True), "m": ("measures", False)}
#: Values of the arguments not given (``configure`` declares them from here too).
DEFAULTS = {"per_query": False, "no_summary": False, "complete": False, "judged_only": False,
            "max_docs": None, "level": 1, "num_docs": 0, "rel_info_format": "qrels", "results_format": "trec_results"}


def configure(parser: argparse.ArgumentParser) -> None:
    import argparse

    parser.add_argument("qrels", metavar="QRELS", help="qrels file: query iteration document relevance")
    parser.add_argument("run", metavar="RUN",
                        help="run file: query Q0 document rank score run_id; '-' reads it from stdin")
    parser.add_argument("-q", "--query_eval_wanted", action="store_true", dest="per_query",
                        help="print per-query values, then the summary")
    parser.add_argument("-n", "--nosummary", action="store_true", dest="no_summary", help="do not print the summary")
    parser.add_argument("-c", "--complete_rel_info_wanted", action="store_true", dest="complete",
                        help="average over every qrels query; queries missing from the run count as empty")
    parser.add_argument("-J", "--Judged_docs_only", action="store_true", dest="judged_only",
                        help="drop unjudged documents before measuring")
    parser.add_argument("-M", "--Max_retrieved_per_topic", type=int, dest="max_docs", metavar="N",
                        help="only the first N documents of each ranking")
    parser.add_argument("-l", "--level_for_rel", type=int, dest="level", default=DEFAULTS["level"], metavar="L",
                        help="a document is relevant when its judgement is >= L (default 1)")
    parser.add_argument("-N", "--Number_docs_in_coll", type=int, dest="num_docs", default=DEFAULTS["num_docs"],
                        metavar="N", help="number of documents in the collection (utility)")
    parser.add_argument("-m", "--measure", action="append", dest="measures", default=[], metavar="MEASURE[.PARAMS]",
                        help="measure or set (official, all_trec, set); repeatable; e.g. -m P.5,10 -m ndcg_cut.10")
    parser.add_argument("-R", "--Rel_info_format", dest="rel_info_format", default=DEFAULTS["rel_info_format"],
                        metavar="FORMAT",
                        help="format of QRELS: qrels (trec_eval's default; the only one read)")
    parser.add_argument("-T", "--Results_format", dest="results_format", default=DEFAULTS["results_format"],
                        metavar="FORMAT",
                        help="format of RUN: trec_results (trec_eval's default; the only one read)")
    print_version, not_supported = _actions()
    parser.add_argument("-v", "--version", action=print_version, nargs=0, default=argparse.SUPPRESS,
                        help="print the version on stderr, as trec_eval does, and exit")
    for flags, _what, nargs in _NOT_SUPPORTED:
        parser.add_argument(*flags, action=not_supported, nargs=nargs, default=argparse.SUPPRESS,
                            help=argparse.SUPPRESS)


#: trec_eval options ragmeter does not implement: flags, what the option does, values it takes
_NOT_SUPPORTED = [
    (("-D", "--Debug_level"), "-D (debug output)", None),
    (("-Z", "--Zscore"), "-Z (z-scores against a Zmean file)", None),
    (("-o", "--Output_old_results_format"), "-o (trec_eval's old output format)", 0),
]


def _version_text() -> str:
    from ragmeter import __version__

    return f"ragmeter trec {__version__} (trec_eval 10 compatible)"


def _actions() -> Any:
    """The argparse actions of ``-v`` and of the options in :data:`_NOT_SUPPORTED` (made when a parser is built:
    the fast path does not import argparse)."""
    import argparse

    class PrintVersion(argparse.Action):
        def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
            sys.stderr.write(_version_text() + "\n")  # where trec_eval -v prints it
            parser.exit(0)

    class NotSupported(argparse.Action):
        def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
            from ragmeter.errors import InputError

            what = next(w for flags, w, _n in _NOT_SUPPORTED if option_string in flags)
            raise InputError(f"{what} is not supported by ragmeter trec; run trec_eval itself for it")

    return PrintVersion, NotSupported


def parse_common(argv: Sequence[str]) -> Optional[Dict[str, Any]]:
    """The arguments of a usual command line, exactly as ``configure``'s parser reads
    them, or ``None`` for anything less usual (that parser then decides)."""
    args: Dict[str, Any] = dict(DEFAULTS)
    measures: List[str] = []
    positionals: List[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if not arg.startswith("-"):
            positionals.append(arg)
            continue
        if arg == "-" or arg.startswith("--"):
            return None
        for j in range(1, len(arg)):
            flag = arg[j]
            if flag in SWITCHES:
                args[SWITCHES[flag]] = True
                continue
            if flag not in VALUED:
                return None
            value = arg[j + 1:]
            if not value:
                if i == len(argv) or argv[i].startswith("-"):
                    return None
                value, i = argv[i], i + 1
            elif value.startswith("="):
                return None
            name, integer = VALUED[flag]
            if not integer:
                measures.append(value)
                break
            try:
                args[name] = int(value)  # argparse's own conversion (type=int)
            except ValueError:
                return None
            break
    if len(positionals) != 2:
        return None
    args["qrels"], args["run"] = positionals
    args["measures"] = measures
    return args


def full_parser() -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(prog="ragmeter trec", description=HELP, epilog=EPILOG)
    configure(parser)
    return parser


#: the run's name in messages when it is read from stdin
STDIN_NAME = "stdin"


def _check_formats(args: Any) -> None:
    """trec_eval's ``-R`` and ``-T`` name the input formats; ragmeter reads trec_eval's defaults only."""
    from ragmeter.errors import InputError

    for flag, given, known, of in (("-R", args.rel_info_format, "qrels", "qrels"),
                                   ("-T", args.results_format, "trec_results", "run")):
        if given != known:
            raise InputError(f"{flag} {given}: ragmeter trec reads {known} files only (trec_eval's default {of} "
                             f"format); run trec_eval itself for {given}")


def _check_ranges(args: Any) -> None:
    """-l, -M and -N are 64-bit integers in the engine (trec_eval's C ``long``): a larger number is refused naming
    its flag (``-l 99999999999999999999`` was an OverflowError traceback from the binding)."""
    from ragmeter._trec_files import INT64
    from ragmeter.errors import InputError

    for flag, value in (("-l", args.level), ("-M", args.max_docs), ("-N", args.num_docs)):
        if value is not None and not INT64[0] <= value <= INT64[1]:
            raise InputError(f"{flag} {value}: out of range (trec_eval's options are 64-bit integers, "
                             f"{INT64[0]} to {INT64[1]})")


def _pytrec_eval_spelling_hint(measures: Sequence[str]) -> Optional[str]:
    """trec_eval refuses ``-m P_5`` and so does ``ragmeter trec``, but pytrec_eval takes it (it is the output's
    name): the message for a user coming from it, telling the syntax rather than the 40 known measures. Called
    on the error path only, so that the trec front imports nothing more when it succeeds."""
    from ragmeter.trec import known_measures, pytrec_eval_spelling

    known = set(known_measures())
    for name in measures:
        spelled = pytrec_eval_spelling(name, known)
        if spelled is not None:
            return (f"unknown measure '{name}': trec_eval's syntax for it is -m {spelled} "
                    f"({name} is the name of its output)")
    return None


def run(args: Any) -> int:
    """Evaluate and print; ``args`` has the attributes ``configure`` defines."""
    from ragmeter import _core
    from ragmeter._trec_files import HEAD_BYTES, check_file_head, check_head

    _check_formats(args)
    _check_ranges(args)
    check_file_head(args.qrels)
    run_name, run_text = args.run, None
    if args.run == "-":  # trec_eval's results file '-': stdin
        run_name, run_text = STDIN_NAME, sys.stdin.buffer.read()
        check_head(run_text[:HEAD_BYTES], run_name)
    else:
        check_file_head(args.run)
    try:
        text, not_utf8 = _core.trec_eval_output(
            args.qrels,
            run_name,
            list(args.measures),
            _core.TrecOptions(relevance_level=args.level, max_docs=args.max_docs, complete=args.complete,
                              judged_only=args.judged_only, num_docs_in_coll=args.num_docs),
            per_query=args.per_query,
            summary=not args.no_summary,
            run_text=run_text,
        )
    except _core.MeasureError:
        hint = _pytrec_eval_spelling_hint(args.measures)
        if hint is None:
            raise
        raise _core.MeasureError(hint) from None
    if not_utf8 is None:
        sys.stdout.write(text)
    else:
        _write_bytes_read(text, not_utf8, (args.qrels, run_name))
    sys.stdout.flush()
    return 0


def _write_bytes_read(text: str, not_utf8: Tuple[str, int], files: Tuple[str, ...]) -> None:
    """Print the output of files read as bytes (one character per byte: Latin-1) as the bytes themselves, ids
    exactly as in the files and as trec_eval prints them, after one note on stderr saying why."""
    from ragmeter._trec_files import bytes_note

    path, line = not_utf8
    sys.stderr.write(f"ragmeter: note: {bytes_note(path, line, files)}\n")
    sys.stderr.flush()
    out = getattr(sys.stdout, "buffer", None)
    if out is None:  # a text-only stdout (io.StringIO in a test): the characters
        sys.stdout.write(text)
        return
    sys.stdout.flush()
    out.write(text.encode("latin-1"))
    out.flush()


def main(argv: Sequence[str]) -> int:
    from types import SimpleNamespace

    common = parse_common(argv)
    return run(SimpleNamespace(**common) if common is not None else full_parser().parse_args(list(argv)))
