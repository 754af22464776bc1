"""The Markdown summary for pull requests."""
from __future__ import annotations

from typing import Any, Dict, List

from ragmeter.report.data import METRICS, Results, fmt_value

__all__ = ["md_escape", "md_table", "render_markdown"]


def md_escape(value: object) -> str:
    """Escape text for a Markdown table cell: no raw HTML, no column breaks, one line."""
    text = "" if value is None else str(value)
    for a, b in (("\\", "\\\\"), ("|", "\\|"), ("<", "&lt;"), (">", "&gt;"), ("`", "\\`"), ("*", "\\*"), ("_", "\\_"), ("[", "\\["), ("]", "\\]")):
        text = text.replace(a, b)
    return " ".join(text.split())


def md_table(headers: List[str], rows: List[List[str]]) -> str:
    out = ["| " + " | ".join(md_escape(h) for h in headers) + " |", "|" + "|".join(["---"] * len(headers)) + "|"]
    out += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def render_markdown(results: Results, aggregates: Dict[str, Any], readings: Dict[str, Any]) -> str:
    from ragmeter.diagnosis import DIAGNOSES

    n = results.cases.height
    lines = [f"## ragmeter report: {md_escape(results.summary.get('name') or results.path.name)}", ""]
    lines.append(f"{n} cases; one case = {100 / max(n, 1):.2f} points. 95% percentile-bootstrap intervals "
                 f"({readings.get('n_resamples')} resamples, seed {readings.get('seed')}); n = scored / total.")
    lines.append("")
    warnings = results.summary.get("warnings") if isinstance(results.summary.get("warnings"), list) else []
    if warnings:
        lines.append("**Warnings**")
        lines.append("")
        lines += [f"- {md_escape(w)}" for w in warnings[:50]]
        lines.append("")
    rows = []
    for name in aggregates.get("metrics", []):
        agg = aggregates["overall"][name]
        kind = METRICS[name].kind
        ci = f"[{fmt_value(agg['ci_low'], kind)}, {fmt_value(agg['ci_high'], kind)}]" if agg["ci_low"] is not None else "n/a"
        rows.append([METRICS[name].label, fmt_value(agg["value"], kind), ci, f"{agg['n_scored']}/{agg['n_total']}"])
    lines += [md_table(["metric", "value", "95% CI", "n"], rows), ""]
    shown = [x for x in ("hit", "file_hit", "mrr", "correct", "faithfulness") if x in aggregates.get("metrics", [])]
    if shown:
        cat_rows = []
        for cat in sorted(aggregates["by_category"]):
            row = [cat]
            for name in shown:
                agg = aggregates["by_category"][cat][name]
                row.append(f"{fmt_value(agg['value'], METRICS[name].kind)} ({agg['n_scored']}/{agg['n_total']})")
            cat_rows.append(row)
        lines += ["### Per category", "", md_table(["category"] + [METRICS[x].label for x in shown], cat_rows), ""]
    diag = readings["diagnosis"]["diagnosis"]
    lines += ["### Diagnosis", "", md_table(["diagnosis", "cases", "share"], [
        [d, str(diag[d]), f"{100 * diag[d] / max(n, 1):.1f}%"] for d in DIAGNOSES if diag.get(d)
    ]), ""]
    ref = readings["diagnosis"]["refusal"]
    lines.append(
        f"Refusals: {ref['overall']['refusals']}/{ref['overall']['answered']} answered cases; "
        f"no-answer cases refused {ref['noanswer']['refusals']}/{ref['noanswer']['answered']}, "
        f"answerable cases refused {ref['answerable']['refusals']}/{ref['answerable']['answered']}."
    )
    quad = readings["diagnosis"]["quadrants"]
    if any(quad.values()):
        lines.append("Context precision x quality: " + ", ".join(f"{k} {v}" for k, v in quad.items()) + ".")
    bands = readings["diagnosis"]["faithfulness_bands"]
    if any(bands.values()):
        lines.append("Faithfulness bands: " + ", ".join(f"{k} {v}" for k, v in bands.items()) + ".")
    lines.append("")
    repeats = results.summary.get("repeats")
    if isinstance(repeats, dict) and repeats.get("metrics"):
        from ragmeter.repeats import repeat_table

        headers, rows = repeat_table(repeats)
        lines += [f"### Repeat runs ({repeats.get('n')} judgements per case)", "",
                  md_table(headers, rows), "",
                  "Repeats 2..N bypass the judge cache; cases, diagnosis and intervals above use repeat 1.", ""]
    return "\n".join(lines)
