"""``ragmeter cache repair PATH``: salvage a damaged cache (``judge``/``eval``'s or ``collect``'s: one file format)."""
from __future__ import annotations

import argparse
import os

HELP = "cache upkeep (judge or collect): `cache repair PATH` salvages every readable entry of a damaged cache"

EPILOG = """exit status: 0 = repaired, or nothing to repair (an empty or healthy cache is left as it is); 2 = PATH is
missing, unreadable or not a ragmeter cache, judge or collect (not an SQLite file, or no judge_cache table): nothing
is changed."""


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    repair = sub.add_parser("repair", help="copy every readable entry into a new cache at PATH; the damaged file "
                                           "is kept beside it as PATH.damaged-<timestamp>",
                            description="Copy every readable entry of the cache (judge or collect) at PATH into a new file at "
                                        "PATH; the damaged file is kept beside it as PATH.damaged-<timestamp>.",
                            epilog=EPILOG)
    repair.add_argument("path", metavar="PATH", help="the cache file (e.g. .ragmeter/cache.sqlite, or collect's .ragmeter/collect.sqlite)")


def run(args: argparse.Namespace) -> int:
    from ragmeter.errors import InputError
    from ragmeter.judge.cache import repair

    if not args.path:
        raise InputError("cache repair: an empty path (an unset variable?); name the cache file, e.g. "
                         ".ragmeter/cache.sqlite")
    if os.path.isdir(args.path):
        inside = os.path.join(args.path, "cache.sqlite")
        hint = f"; did you mean {inside}?" if os.path.isfile(inside) else ""
        raise InputError(f"{args.path} is a folder, not a cache file{hint} (nothing changed)")
    result = repair(args.path)
    from ragmeter.cli._tables import make_console, print_prose

    console = make_console()  # 80 columns, as every command's prose
    if result["healthy"]:
        what = ("an empty cache" if result["salvaged"] == 0
                else f"a healthy cache ({result['salvaged']} entries)")
        print_prose([f"{result['path']} is {what}: nothing to repair, nothing changed"], console)
        return 0
    dropped = f", {result['dropped']} unreadable entries dropped ({_reasons(result['dropped_reasons'])})" \
        if result["dropped"] else ""
    lines = [f"repaired {result['path']}: {result['salvaged']} entries salvaged{dropped}; the damaged file is kept "
             f"as {result['damaged']}"]
    if result["errors"]:
        lines.append(f"  SQLite reported: {result['errors'][0]}" + (f" (and {len(result['errors']) - 1} more)"
                                                                    if len(result["errors"]) > 1 else ""))
    print_prose(lines, console)
    return 0


def _reasons(counts: dict) -> str:
    """``{"value is not JSON": 2, ...}`` as ``2 value is not JSON, ...``: why each was dropped (a run would have
    asked again for every one of them)."""
    return ", ".join(f"{n} {why}" for why, n in counts.items())
