"""Rich tables for the command line (imported only by commands that print them).

Every table fits 80 columns without cutting a cell: short headers, explained by a
legend line under the table, and no vertical rules. Output that is not a
terminal (a pipe, a file, a CI log) is plain text 80 columns wide.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text
from ragmeter._text import printable

_PERCENT = ("hit_rate", "file_hit_rate", "evidence_recall", "all_files_hit_rate")
PLAIN_WIDTH = 80
#: a table of categories (or any list that grows with the data) prints at most this many of them; the rest is
#: counted on one line under the table and is complete in the files written
MAX_ROWS = 20

T = TypeVar("T")


def worst_first(items: Sequence[T], value: Callable[[T], Optional[float]], size: Callable[[T], int],
                limit: int = MAX_ROWS) -> Tuple[List[T], int]:
    """``items`` unchanged when there are at most ``limit``; else the ``limit`` with the lowest ``value`` (more
    cases first among equal values, then the given order; no value last), and how many were left out."""
    if len(items) <= limit:
        return list(items), 0
    order = sorted(range(len(items)), key=lambda i: _worst_key(value(items[i]), size(items[i]), i))
    return [items[i] for i in order[:limit]], len(items) - limit


def _worst_key(value: Optional[float], size: int, position: int) -> Tuple[bool, float, int, int]:
    if value is None or value != value:  # NaN sorts nowhere: it goes with the unscored
        return (True, 0.0, -size, position)
    return (False, float(value), -size, position)


def print_more(n_more: int, noun: str, where: Optional[str], shown: str, console: Console) -> None:
    """``... and 19,980 more categories (all in DIR/summary.json); shown: ...``: what a bounded table left out,
    counted, and which rows it kept; without ``where`` (nothing written) the line says how to get them all.
    ASCII dots: rich marks a cut cell with an ellipsis character, and this line is no cut."""
    if n_more:
        where_all = f"(all in {where})" if where else "(all with --out or --json)"
        console.print(Text(f"... and {n_more:,} more {noun} {where_all}; shown: {shown}"))


class _PipeConsole(Console):
    """rich's Console, except that a reader who stops early (``| head``) raises BrokenPipeError, which the command
    line ends with status 0 (rich exits with status 1, README's status of a failed gate)."""

    def on_broken_pipe(self) -> None:
        import os
        import sys

        self.quiet = True
        os.dup2(os.open(os.devnull, os.O_WRONLY), (sys.stderr if self.stderr else sys.stdout).fileno())
        raise BrokenPipeError

    def _render_buffer(self, buffer: Any) -> str:
        # rich pads a table's rows (a blank section row too) to the table's width: a log's lines end in spaces
        text = super()._render_buffer(buffer)
        return "\n".join(line.rstrip(" ") for line in text.split("\n"))


def make_console(stderr: bool = False) -> Console:
    """A console for stdout (or stderr): the terminal's width, or plain text at 80 columns when not a terminal."""
    console = _PipeConsole(stderr=stderr)
    if not console.is_terminal:
        # COLUMNS would widen a pipe's output; a log reads the same everywhere at a fixed width.
        console = _PipeConsole(width=PLAIN_WIDTH, no_color=True, highlight=False, emoji=False, stderr=stderr)
    return console


def print_prose(lines: Any, console: Console, style: Optional[str] = None) -> None:
    """Lines of prose (legends, findings, intervals) wrapped at the console's width with a hanging indent, never
    inside an interval, no trailing spaces (``ragmeter._text.hanging``); rich would wrap them at column 0."""
    from ragmeter._text import hanging

    for line in hanging([printable(str(line)) for line in lines], console.width):
        console.print(Text(line, style=style or ""), no_wrap=True, overflow="ignore")


def print_diagnosis(counts: Optional[Dict[str, int]], console: Console) -> None:
    """Where the cases stand, most first: the diagnoses report.md explains, counted (summary.json's
    ``diagnosis``); nothing when there are none."""
    if not counts:
        return
    shown = sorted(((n, label) for label, n in counts.items() if n), key=lambda item: -item[0])
    print_prose(["diagnosis: " + ", ".join(f"{label} {n}" for n, label in shown)
                 + " (cases; report.md says what each means)"], console)


def print_warning(text: str, console: Console, head: str = "warning: ") -> None:
    """``head`` and ``text``, wrapped at the console's width under the text's first word (a hanging indent),
    never inside an interval, no trailing spaces (``ragmeter._text.wrap``); the head in yellow."""
    from ragmeter._text import wrap

    lines = wrap(" ".join(printable(text).split()), max(20, console.width - len(head)), subsequent="")
    for i, line in enumerate(lines):
        console.print(Text(head, style="yellow") if i == 0 else Text(" " * len(head)), Text(line.rstrip()), sep="",
                      no_wrap=True, overflow="ignore")


def print_audit_pointer(golden: Any, console: Console, panel: Optional[Dict[str, Any]] = None) -> None:
    """One line when the golden set itself would raise audit warnings (its balance, blind spots, labels);
    ``panel`` is an audit already made (``summary["golden_set"]``), else the golden set is audited here."""
    from ragmeter.audit import audit_pointer, pointer_line

    if panel is not None:
        line = pointer_line([str(w.get("code")) for w in panel.get("warnings") or []], str(golden))
    else:
        line = audit_pointer(golden)
    if line:
        print_warning(line, console)


def _table(title: str, console: Console) -> Table:
    """A table without vertical rules: columns one space apart at 80 columns, two on a wider terminal.

    Numeric columns are ``no_wrap``; a long category name folds onto a second line instead of being cut.
    """
    gap = (0, 0, 0, 1) if console.width >= 100 else (0, 0)
    return Table(title=one_line_title(title), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                 pad_edge=False, padding=gap)


def one_line_title(title: str) -> Text:
    """A table's title on one line: rich wraps a title to the table's width, so a narrow table (the sweep's, 44
    columns) would break its title in two although the terminal has room for it."""
    return Text(title, no_wrap=True, overflow="ignore")


def _value(agg: Dict[str, Any], key: str) -> str:
    v = agg[key]["value"]
    if v is None:
        return "—"
    return f"{100 * v:.1f}%" if key in _PERCENT else f"{v:.3f}"


def print_score(summary: Dict[str, Any], out_dir: Optional[str] = None, console: Optional[Console] = None,
                more_in: Optional[str] = None) -> None:
    """The retrieval table: the overall row and every category, or at most :data:`MAX_ROWS` of them (the lowest
    Hit@k) with a count of the rest, which ``more_in`` (default ``out_dir/summary.json``) holds. A summary that
    holds only those categories counts the others in ``n_more_categories`` (``ScoreResult.table_summary``)."""
    more_in = more_in or (f"{out_dir}/summary.json" if out_dir else None)
    console = console or make_console()
    k = summary["k"]
    categories, n_more = worst_first(list(summary["by_category"].items()), lambda c: c[1]["hit_rate"]["value"],
                                     lambda c: c[1]["hit_rate"]["n_total"])
    n_more += summary.get("n_more_categories", 0)
    table = _table(f"Retrieval at k={k} (chunk level unless marked)", console)
    table.add_column("category", justify="left", overflow="fold")
    for col in ("n", f"Hit@{k}", f"fHit@{k}", "MRR", "MAP", "NDCG", "EvRec", f"AllF@{k}", "empty"):
        table.add_column(col, justify="right", no_wrap=True)
    rows = [("ALL", summary["overall"])] + categories
    for i, (name, agg) in enumerate(rows):
        all_files = agg["all_files_hit_rate"]
        table.add_row(
            Text(printable(name)), f"{agg['hit_rate']['n_scored']}/{agg['hit_rate']['n_total']}",
            *(_value_over(agg, key, agg["hit_rate"]["n_scored"])
              for key in ("hit_rate", "file_hit_rate", "mrr", "map", "ndcg", "evidence_recall")),
            f"{_value(agg, 'all_files_hit_rate')} {all_files['n_scored']}/{all_files['n_total']}" if all_files["n_total"] else "—",
            str(agg["empty_retrievals"]), style="bold" if name == "ALL" else None, end_section=i == 0,
        )
    console.print(table)
    print_more(n_more, "categories", more_in, f"the {len(categories)} of lowest Hit@{k}, more cases first among "
               "equals", console)
    print_prose([f"n: labelled/all cases; (m): a value over m cases. Hit: a relevant chunk (expected file and "
                 f"evidence phrase) in the top {k}. fHit: file level, some expected file in the top {k}. EvRec: "
                 f"evidence recall. AllF: every expected file in the top {k}, over the cases expecting two or more "
                 "(their count). empty: nothing retrieved."], console, style="dim")
    # a case whose run record has no mode is '(none)' (summary.json's key), as report.html and compare say
    modes = ", ".join(f"{m}: {n}" for m, n in summary["retrieval_modes"].items())
    lines = [f"retrieval modes: {modes or 'not given'}"]
    gap = _gap(summary.get("file_vs_chunk_hit"))
    if gap is not None and round(gap[0], 1) > 0:  # the explanation is of a positive gap only
        value, n, n_file_only = gap
        lines.append(f"file-level minus chunk-level Hit@{k}: {value:+.1f} points over the cases where "
                     f"both are scored (n={n:,}; in {n_file_only:,} of them the right file came "
                     "back without the answer chunk)")
    print_prose(lines, console)
    from ragmeter._warnings import messages

    for text in messages(summary["warnings"]):  # one each: a count and the first few cases
        print_warning(text, console)
    if out_dir:
        print_prose([f"wrote {out_dir}/cases.parquet, {out_dir}/chunks.parquet, {out_dir}/summary.json, "
                     f"{out_dir}/warnings.json"], console)


def _value_over(agg: Dict[str, Any], key: str, n: int) -> str:
    """A metric's value, with the number of cases it covers when that is not the row's ``n`` (a chunk without
    a file leaves its case out of the file-level hit rate, not of the chunk-level one)."""
    value = _value(agg, key)
    scored = agg[key].get("n_scored", n)
    return value if scored == n else f"{value} ({scored})"


def _gap(both: Optional[Dict[str, Any]]) -> Optional[Tuple[float, int, int]]:
    """File-level minus chunk-level Hit@k in points over the cases where both are scored, their number and the
    cases that found the file without the chunk (``summary["file_vs_chunk_hit"]``); None without such cases (or
    a summary written before it was recorded: the overall rates cover different cases and cannot be subtracted)."""
    if not both or not both.get("n") or both.get("file_hit_rate") is None or both.get("hit_rate") is None:
        return None
    return 100 * (both["file_hit_rate"] - both["hit_rate"]), int(both["n"]), int(both.get("n_file_only") or 0)


def print_sweep(table: Any, k: int, console: Optional[Console] = None, more_in: Optional[str] = None) -> None:
    """The sweep table: every category at every threshold, or at most :data:`MAX_ROWS` categories (the lowest
    Hit@k at the first threshold, the same ones at every threshold) with a count of the rest."""
    console = console or make_console()
    t = _table(f"Threshold sweep (keep score >= t, then the top {k})", console)
    t.add_column("t", justify="right", no_wrap=True)
    t.add_column("category", justify="left", overflow="fold")
    for col in (f"Hit@{k}", "MRR", "n", "empty", "kept"):
        t.add_column(col, justify="right", no_wrap=True)
    rows, n_more = _bounded_sweep(list(table.iter_rows(named=True)))
    from ragmeter._text import threshold_labels

    label = threshold_labels([row["threshold"] for row in rows])
    for i, row in enumerate(rows):
        hit = "—" if row["hit_rate"] is None else f"{100 * row['hit_rate']:.1f}%"
        mrr = "—" if row["mrr"] is None else f"{row['mrr']:.3f}"
        style = "bold" if row["category"] == "ALL" else None
        last_of_threshold = i + 1 < len(rows) and rows[i + 1]["threshold"] != row["threshold"]
        t.add_row(label[row["threshold"]], Text(printable(row["category"])), hit, mrr, f"{row['n_scored']}/{row['n_total']}",
                  str(row["empty_retrievals"]), f"{row['mean_kept']:.2f}", style=style, end_section=last_of_threshold)
    console.print(t)
    if n_more:
        print_more(n_more, "categories at each threshold", more_in, f"the {MAX_ROWS} of lowest Hit@{k} at "
                   f"t={label[rows[0]['threshold']]}, more cases first among equals, at every t", console)
    print_prose([f"t: threshold. n: labelled/all cases. empty: cases left with no chunk. kept: mean chunks kept "
                 f"(at most {k})."], console, style="dim")


def _bounded_sweep(rows: List[Dict[str, Any]]) -> Tuple[List[Dict[str, Any]], int]:
    """The sweep's rows for at most :data:`MAX_ROWS` categories (and ALL), and how many categories were left out."""
    first = [r for r in rows if r["threshold"] == rows[0]["threshold"] and r["category"] != "ALL"] if rows else []
    shown, n_more = worst_first(first, lambda r: r["hit_rate"], lambda r: r["n_total"])
    if not n_more:
        return rows, 0
    keep = {r["category"] for r in shown} | {"ALL"}
    return [r for r in rows if r["category"] in keep], n_more
