"""The audit as text: plain lines for pipes and files, rich tables for a terminal, Markdown for audit.md.

Everything fits 80 columns: names are shortened, the category x source table
is split into blocks of columns, warnings are wrapped.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ragmeter._text import WIDTH, columns, hanging, wrap
NAME = 20  # widest value name shown in a table
#: rows of a table on the terminal (the first ones, in the audit's order); audit.md and --json hold them all.
#: The same bound as the other commands' tables (ragmeter.cli._tables.MAX_ROWS).
MAX_ROWS = 20


def _name(value: str) -> str:
    """``value`` cut to :data:`NAME` terminal columns (a Chinese name takes two a character)."""
    if columns(value) <= NAME:
        return value
    while columns(value) > NAME - 1:
        value = value[:-1]
    return value + "…"


def _pct(share: Optional[float]) -> str:
    return "—" if share is None else f"{100 * share:.1f}%"


def _num(value: Optional[int]) -> str:
    return "—" if value is None else str(value)


def share_rows(d: Dict[str, Any], key: str) -> List[List[str]]:
    """Rows of a distribution table: value, n, share, target, needed."""
    target = (d.get("target") or {}).get("category" if key == "by_category" else "source", {})
    gap = (d.get("gap") or {}).get("category" if key == "by_category" else "source", {})
    names = list(d[key]) + [k for k in target if k not in d[key]]
    return [[_name(k), str(d[key].get(k, {}).get("n", 0)), _pct(d[key][k]["share"]) if k in d[key] else "0.0%",
             _num(target.get(k)) if target else "", _num(gap.get(k)) if target else ""] for k in names]


def cross_blocks(d: Dict[str, Any]) -> List[List[str]]:
    """Source columns of the category x source table, grouped so each block fits the width."""
    sources = list(next(iter(d["cross"].values()), {}))
    blocks: List[List[str]] = []
    block: List[str] = []
    used = NAME + 2
    for s in sources:
        w = max(len(_name(s)), 3) + 2
        if block and used + w > WIDTH:
            blocks.append(block)
            block, used = [], NAME + 2
        block.append(s)
        used += w
    if block:
        blocks.append(block)
    return blocks


def summary_lines(d: Dict[str, Any]) -> List[str]:
    """Everything after the tables: hard share, gap, resolution, corpus."""
    out = []
    h = d["hard"]
    from ragmeter.audit import hard_rule_text

    how = hard_rule_text(h)
    cats = ", ".join(h["categories"]) or "none found"
    out.append(f"hard cases: {h['n']}/{h['n_total']} = {_pct(h['share'])} ({cats}; {how}); "
               f"minimum {100 * h['min_share']:.0f}%")
    if d["gap"] is not None:
        g, t = d["gap"], d["target"]
        out.append(f"gap to {t['n']} cases ({'--targets' if t['from'] == 'spec' else 'even shares'}): "
                   f"{g['total']} more in all")
        for dim, label in (("category", "category"), ("source", d["by"])):
            if g[dim]:
                out.append(f"  by {label}: " + ", ".join(f"{k} {v}" for k, v in g[dim].items()))
        if t.get("hard_share") is not None:
            out.append(f"  hard share once filled: {_pct(h['share'])} -> {_pct(t['hard_share'])}")
    r = d["resolution"]
    tgt = r.get("target")
    out.append(f"resolution: one case = {r['points_per_case']:.2f} points at n={r['n']}"
               + (f", {tgt['points_per_case']:.2f} at n={tgt['n']}" if tgt else ""))
    counted = r.get("rates_n") or {}
    rates = ", ".join(f"{k} {_pct(v)}" + (f" over {counted[k]['n_scored']}/{counted[k]['n_total']}" if k in counted else "")
                      for k, v in r["rates"].items())
    out.append(f"  minimum detectable difference, paired (alpha {r['alpha']}, power {r['power']}, {rates}, "
               f"{r['rate_source']}): {_pp(r['mde_pp'])} at n={r['n']}"
               + (f", {_pp(tgt['mde_pp'])} at n={tgt['n']}" if tgt else ""))
    c = d.get("corpus")
    if c is not None:
        out.append(f"corpus {c['path']}: {_n(c['chunks'], 'chunk')} in {_n(c['files'], 'file')}; "
                   f"{_n(c['phrases'], 'evidence phrase')}: "
                   f"{c['found']} found, {c['in_other_file']} only in another file, {c['not_in_corpus']} not in the corpus; "
                   f"{c['cases_affected']}/{c['cases_with_evidence']} cases with evidence affected; "
                   f"{c['files_not_in_corpus']} expected file(s) not in the corpus")
    return out


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _pp(value: Optional[float]) -> str:
    return "none detectable (it would take over 100 points)" if value is None else f"{value:.1f} points"


def warning_lines(d: Dict[str, Any], limit: Optional[int] = 30) -> List[str]:
    ws = d["warnings"]
    if not ws:
        return ["no warning"]
    out = [f"{len(ws)} warning{'s' if len(ws) != 1 else ''}:"]
    for w in ws[:limit] if limit else ws:
        out += wrap(f"{w['code']}: {w['message']}", indent="  ", subsequent="    ")
    if limit and len(ws) > limit:
        out.append(f"  ... and {len(ws) - limit} more (all of them with --json or in --out DIR/audit.json)")
    return out


def _wrapped(lines: List[str]) -> List[str]:
    return hanging(lines, WIDTH)


def _bounded(rows: List[Any]) -> List[Any]:
    return rows[:MAX_ROWS]


def more_line(n_rows: int, noun: str) -> Optional[str]:
    """What a table left out of ``n_rows``, counted (ASCII dots: an ellipsis character marks a cut name)."""
    if n_rows <= MAX_ROWS:
        return None
    return (f"... and {n_rows - MAX_ROWS:,} more {noun} (all with --json or in --out DIR/audit.json); shown: the first "
            f"{MAX_ROWS}")


def _plain_table(header: List[str], rows: List[List[str]]) -> List[str]:
    # padded by terminal columns, not characters, so that Chinese names keep the columns aligned
    widths = [max(columns(r[i]) for r in [header] + rows) for i in range(len(header))]
    pad = lambda c, w, left: c + " " * (w - columns(c)) if left else " " * (w - columns(c)) + c
    fmt = lambda r: "  ".join(pad(c, w, i == 0) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
    return [fmt(header)] + [fmt(r) for r in rows]


def _header(d: Dict[str, Any]) -> str:
    return f"golden set {d['golden']}: {d['n']} cases ({d['n_labeled']} labelled)"


def plain(d: Dict[str, Any]) -> str:
    lines = wrap(_header(d)) + [""]
    for key, label in (("by_category", "category"), ("by_source", d["by"])):
        head = [label, "n", "share"] + (["target", "needed"] if d["gap"] else [])
        rows = [r if d["gap"] else r[:3] for r in share_rows(d, key)]
        more = more_line(len(rows), f"{label} values")
        lines += _plain_table(head, _bounded(rows)) + (wrap(more) if more else []) + [""]
    for block in cross_blocks(d):
        rows = [[_name(c)] + [str(d["cross"][c][s]) if d["cross"][c][s] else "·" for s in block] for c in _bounded(list(d["cross"]))]
        more = more_line(len(d["cross"]), "categories")
        lines += [f"category x {d['by']} (· = no case)"] + _plain_table(["category"] + [_name(s) for s in block], rows)
        lines += (wrap(more) if more else []) + [""]
    lines += _wrapped(summary_lines(d)) + [""] + warning_lines(d)
    return "\n".join(lines)


def rich(d: Dict[str, Any], console: Any) -> None:
    from rich.table import Table
    from rich.text import Text

    # names are the golden set's own text: shown as written, never read as rich markup ('[/]' would crash it)
    for line in wrap(_header(d)):
        console.print(line, markup=False, highlight=False)
    for key, label in (("by_category", "category"), ("by_source", d["by"])):
        table = Table(title_justify="left")
        for i, col in enumerate([label, "n", "share"] + (["target", "needed"] if d["gap"] else [])):
            table.add_column(Text(col), justify="left" if i == 0 else "right")
        rows = share_rows(d, key)
        for r in _bounded(rows):
            table.add_row(*(Text(cell) for cell in (r if d["gap"] else r[:3])))
        console.print(table)
        _print_more(more_line(len(rows), f"{label} values"), console)
    for block in cross_blocks(d):
        table = Table(title=Text(f"category x {d['by']} (· = no case)"), title_justify="left")
        table.add_column("category")
        for s in block:
            table.add_column(Text(_name(s)), justify="right")
        for c in _bounded(list(d["cross"])):
            table.add_row(Text(_name(c)), *(Text(str(d["cross"][c][s])) if d["cross"][c][s] else Text("·", style="red")
                                            for s in block))
        console.print(table)
        _print_more(more_line(len(d["cross"]), "categories"), console)
    for line in _wrapped(summary_lines(d)):
        console.print(line, markup=False, highlight=False)
    for line in warning_lines(d):
        console.print(line, markup=False, highlight=False, style="yellow" if d["warnings"] else "green")


def _print_more(line: Optional[str], console: Any) -> None:
    if line:
        console.print(line, markup=False, highlight=False)


def markdown(d: Dict[str, Any]) -> str:
    def table(header: List[str], rows: List[List[str]]) -> List[str]:
        cells = lambda r: "| " + " | ".join(c.replace("|", "\\|") for c in r) + " |"
        return [cells(header), "|" + "|".join("---" for _ in header) + "|"] + [cells(r) for r in rows] + [""]

    lines = ["# Golden-set audit", "", _header(d), ""]
    for key, label in (("by_category", "category"), ("by_source", d["by"])):
        head = [label, "n", "share"] + (["target", "needed"] if d["gap"] else [])
        lines += [f"## By {label}", ""] + table(head, [r if d["gap"] else r[:3] for r in share_rows(d, key)])
    sources = list(next(iter(d["cross"].values()), {}))
    lines += [f"## Category x {d['by']}", "", "An empty cell (·) is a blind spot.", ""]
    lines += table(["category"] + sources, [[c] + [str(d["cross"][c][s]) if d["cross"][c][s] else "·" for s in sources] for c in d["cross"]])
    lines += ["## Summary", ""] + [f"- {line.strip()}" for line in summary_lines(d)] + [""]
    lines += ["## Warnings", ""]
    lines += [f"- `{w['code']}`: {w['message']}" for w in d["warnings"]] or ["No warning."]
    return "\n".join(lines) + "\n"
