"""Rich tables for the command line (imported only by commands that print them)."""
from __future__ import annotations

from typing import Any, Dict, Optional

from rich.console import Console
from rich.table import Table

_PERCENT = ("hit_rate", "file_hit_rate", "evidence_recall", "all_files_hit_rate")


def _value(agg: Dict[str, Any], key: str) -> str:
    v = agg[key]["value"]
    if v is None:
        return "—"
    return f"{100 * v:.1f}%" if key in _PERCENT else f"{v:.3f}"


def print_score(summary: Dict[str, Any], out_dir: Optional[str] = None, console: Optional[Console] = None) -> None:
    console = console or Console()
    k = summary["k"]
    table = Table(title=f"Retrieval at k={k} (chunk level unless marked; scored/total = labelled cases / all cases)",
                  title_justify="left")
    for col in ("category", "scored/total", f"Hit@{k}", f"file Hit@{k}", "MRR", "MAP", "NDCG", "evid. recall",
                "all files (n)", "empty"):
        table.add_column(col, justify="left" if col == "category" else "right")
    rows = [("ALL", summary["overall"])] + list(summary["by_category"].items())
    for name, agg in rows:
        all_files = agg["all_files_hit_rate"]
        table.add_row(
            name, f"{agg['hit_rate']['n_scored']}/{agg['hit_rate']['n_total']}",
            *(_value(agg, key) for key in ("hit_rate", "file_hit_rate", "mrr", "map", "ndcg", "evidence_recall")),
            f"{_value(agg, 'all_files_hit_rate')} ({all_files['n_scored']}/{all_files['n_total']})" if all_files["n_total"] else "—",
            str(agg["empty_retrievals"]), style="bold" if name == "ALL" else None,
        )
    console.print(table)
    modes = ", ".join(f"{'(missing)' if m == 'None' else m}: {n}" for m, n in summary["retrieval_modes"].items())
    console.print(f"retrieval modes: {modes or 'not given'}")
    gap = _gap(summary["overall"])
    if gap is not None:
        console.print(f"file-level minus chunk-level Hit@{k}: {gap:+.1f} points "
                      "(the right file came back, the answer chunk did not)")
    from rich.markup import escape

    from ragmeter._warnings import messages

    for text in messages(summary["warnings"]):  # one line each: a count and the first few cases
        console.print(f"[yellow]warning:[/] {escape(text)}", soft_wrap=True)
    if out_dir:
        console.print(f"wrote {out_dir}/cases.parquet, {out_dir}/chunks.parquet, {out_dir}/summary.json")


def _gap(overall: Dict[str, Any]) -> Optional[float]:
    f, c = overall["file_hit_rate"]["value"], overall["hit_rate"]["value"]
    return None if f is None or c is None else 100 * (f - c)


def print_sweep(table: Any, k: int, console: Optional[Console] = None) -> None:
    console = console or Console()
    t = Table(title=f"Threshold sweep (keep score >= t, then top {k})", title_justify="left")
    for col in ("threshold", "category", "Hit@k", "MRR", "n_scored/n_total", "empty", "mean kept"):
        t.add_column(col, justify="right" if col not in ("category",) else "left")
    for row in table.iter_rows(named=True):
        hit = "—" if row["hit_rate"] is None else f"{100 * row['hit_rate']:.1f}%"
        mrr = "—" if row["mrr"] is None else f"{row['mrr']:.3f}"
        style = "bold" if row["category"] == "ALL" else None
        t.add_row(f"{row['threshold']:g}", row["category"], hit, mrr, f"{row['n_scored']}/{row['n_total']}",
                  str(row["empty_retrievals"]), f"{row['mean_kept']:.2f}", style=style)
    console.print(t)
