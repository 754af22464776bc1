"""``ragmeter trec QRELS RUN``: a drop-in for trec_eval 10.

It accepts trec_eval's own flag syntax (``-q``, ``-c``, ``-J``, ``-n``,
``-M100``, ``-l2``, ``-N n``, ``-m all_trec``, ``-m P.5,10``,
``-mndcg.1=3,2=9``) and prints the same output. Only the standard library and
the compiled core are imported, so start-up stays fast.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

HELP = "trec_eval-compatible evaluation of a TREC run against qrels"
PARSER_OPTIONS = {"add_help": True}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("qrels", metavar="QRELS", help="qrels file: query iteration document relevance")
    parser.add_argument("run", metavar="RUN", help="run file: query Q0 document rank score run_id")
    parser.add_argument("-q", action="store_true", dest="per_query", help="print per-query values, then the summary")
    parser.add_argument("-n", action="store_true", dest="no_summary", help="do not print the summary")
    parser.add_argument("-c", action="store_true", dest="complete",
                        help="average over every qrels query; queries missing from the run count as empty")
    parser.add_argument("-J", action="store_true", dest="judged_only", help="drop unjudged documents before measuring")
    parser.add_argument("-M", type=int, dest="max_docs", metavar="N", help="only the first N documents of each ranking")
    parser.add_argument("-l", type=int, dest="level", default=1, metavar="L",
                        help="a document is relevant when its judgement is >= L (default 1)")
    parser.add_argument("-N", type=int, dest="num_docs", default=0, metavar="N",
                        help="number of documents in the collection (utility)")
    parser.add_argument("-m", action="append", dest="measures", default=[], metavar="MEASURE[.PARAMS]",
                        help="measure or set (official, all_trec, set); repeatable; e.g. -m P.5,10 -m ndcg_cut.10")


def run(args: argparse.Namespace) -> int:
    from ragmeter import _core

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
    parser = argparse.ArgumentParser(prog="ragmeter trec", description=HELP)
    configure(parser)
    return run(parser.parse_args(list(argv)))

