"""``ragmeter score``: chunk-level retrieval scoring of a run against a golden set."""
from __future__ import annotations

import argparse

HELP = "score retrieval per case and category (chunk-level by evidence phrase, file-level alongside)"
EPILOG = """exit status: 0 = scored; 2 = bad input, nothing written (a malformed
file, ids not in the golden set, a golden set without a single label, a
run whose 'retrieved' is null in every case); 3 =
scored and written, but the run file holds cases that failed when it was
collected (a failed_in_run warning names them); 130 = interrupted."""
PARSER_OPTIONS = {"epilog": EPILOG, "formatter_class": argparse.RawDescriptionHelpFormatter}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--golden", required=True, metavar="G", help="golden set (JSON Lines, JSON array or Parquet)")
    parser.add_argument("--run", required=True, metavar="R", help="run (JSONL or Parquet)")
    parser.add_argument("--k", type=int, default=5, help="cut-off (default 5)")
    parser.add_argument("--out", metavar="DIR", help="write DIR/cases.parquet, DIR/chunks.parquet, DIR/summary.json and DIR/warnings.json")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON instead of tables")


def run(args: argparse.Namespace) -> int:
    from ragmeter import _parquet_ahead
    from ragmeter.cli._inputs import check_out

    from ragmeter.cli._inputs import check_k_flag

    check_k_flag(args.k)
    check_out(args.out)  # before any work

    # The run's first slices are decoded on a helper thread while Polars and the scorer are imported and the
    # golden set is loaded (ragmeter._parquet_ahead).
    _parquet_ahead.start(args.run)
    try:
        from ragmeter.dataset import reusing_golden_loads

        with reusing_golden_loads():  # the audit pointer reads the golden set the scoring read
            return _score_and_print(args)
    finally:
        _parquet_ahead.discard()  # not taken: the golden set or the arguments were refused first


def _score_and_print(args: argparse.Namespace) -> int:
    from ragmeter.cli._inputs import failed_in_run_exit, refuse_unlabelled_golden
    from ragmeter.retrieval import no_chunk_list_error, no_chunk_list_in_run, run_error_counts, score, score_into

    refuse_unlabelled_golden(args.golden)

    if args.out:
        result = score_into(args.golden, args.run, args.out, k=args.k, refuse_no_chunk_list=True)
    else:
        result = score(args.golden, args.run, k=args.k)
        if no_chunk_list_in_run(result.cases):
            raise no_chunk_list_error(args.run, cases=result.cases)
    from ragmeter.cli._tables import MAX_ROWS, make_console, print_audit_pointer, print_score

    if args.json:
        from rich.console import Console

        print(result.summary_json())
        print_audit_pointer(args.golden, Console(stderr=True))  # stdout holds the JSON alone
    else:
        console = make_console()
        print_score(result.table_summary(MAX_ROWS), out_dir=args.out, console=console)
        print_audit_pointer(args.golden, console)
    # from the cases, not result.summary: that would build the per-category dicts the tables did without
    return failed_in_run_exit(run_error_counts(result.cases))
