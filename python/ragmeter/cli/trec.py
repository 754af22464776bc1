"""``ragmeter trec QRELS RUN``: a drop-in for trec_eval 10.

It accepts trec_eval's own flag syntax (``-q``, ``-c``, ``-J``, ``-n``,
``-M100``, ``-l2``, ``-N n``, ``-m all_trec``, ``-m P.5,10``,
``-mndcg.1=3,2=9``) and prints the same output.

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
    from typing import Any, Dict, List, Optional, Sequence

HELP = "trec_eval-compatible evaluation of a TREC run against qrels"
PARSER_OPTIONS = {"add_help": True}

#: trec_eval's switches and the argument name each sets.
SWITCHES = {"q": "per_query", "n": "no_summary", "c": "complete", "J": "judged_only"}
#: trec_eval's options that take a value: argument name, and whether it is an integer.
VALUED = {"M": ("max_docs", True), "l": ("level", True), "N": ("num_docs", True), "m": ("measures", False)}
#: Values of the arguments not given (``configure`` declares them from here too).
DEFAULTS = {"per_query": False, "no_summary": False, "complete": False, "judged_only": False,
            "max_docs": None, "level": 1, "num_docs": 0}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("qrels", metavar="QRELS", help="qrels file: query iteration document relevance")
    parser.add_argument("run", metavar="RUN", help="run file: query Q0 document rank score run_id")
    parser.add_argument("-q", action="store_true", dest="per_query", help="print per-query values, then the summary")
    parser.add_argument("-n", action="store_true", dest="no_summary", help="do not print the summary")
    parser.add_argument("-c", action="store_true", dest="complete",
                        help="average over every qrels query; queries missing from the run count as empty")
    parser.add_argument("-J", action="store_true", dest="judged_only", help="drop unjudged documents before measuring")
    parser.add_argument("-M", type=int, dest="max_docs", metavar="N", help="only the first N documents of each ranking")
    parser.add_argument("-l", type=int, dest="level", default=DEFAULTS["level"], metavar="L",
                        help="a document is relevant when its judgement is >= L (default 1)")
    parser.add_argument("-N", type=int, dest="num_docs", default=DEFAULTS["num_docs"], metavar="N",
                        help="number of documents in the collection (utility)")
    parser.add_argument("-m", action="append", dest="measures", default=[], metavar="MEASURE[.PARAMS]",
                        help="measure or set (official, all_trec, set); repeatable; e.g. -m P.5,10 -m ndcg_cut.10")


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

    parser = argparse.ArgumentParser(prog="ragmeter trec", description=HELP)
    configure(parser)
    return parser


def run(args: Any) -> int:
    """Evaluate and print; ``args`` has the attributes ``configure`` defines."""
    from ragmeter import _core
    from ragmeter._trec_files import check_file_head

    check_file_head(args.qrels)
    check_file_head(args.run)
    text = _core.trec_eval_text(
        args.qrels,
        args.run,
        list(args.measures),
        _core.TrecOptions(relevance_level=args.level, max_docs=args.max_docs, complete=args.complete,
                          judged_only=args.judged_only, num_docs_in_coll=args.num_docs),
        per_query=args.per_query,
        summary=not args.no_summary,
    )
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0


def main(argv: Sequence[str]) -> int:
    from types import SimpleNamespace

    common = parse_common(argv)
    return run(SimpleNamespace(**common) if common is not None else full_parser().parse_args(list(argv)))
