"""The Markdown summary for pull requests."""
from __future__ import annotations

from typing import Any, Dict, List

import polars as pl

from ragmeter._text import ellipsis_cut

from ragmeter.report.data import (
    BAND_CASES,
    METRICS,
    NO_ANSWERS,
    QUADRANT_CASES,
    Results,
    correct_rate_note,
    fmt_value,
    judge_failures,
    judge_row_totals,
    metric_label,
    more_categories_line,
    not_judged_metrics,
    not_measured_rows,
    pass_rate_notes,
    placed_line,
    resolution_text,
    settings_texts,
)

__all__ = ["md_code", "md_escape", "md_table", "render_markdown"]


def md_escape(value: object) -> str:
    """Escape text for a Markdown table cell: no raw HTML, no column breaks, one line, and control characters
    (ESC, BEL, NUL, ...) written as ``\\x1b`` escapes, as on the terminal: user text must not drive a terminal
    that shows the file."""
    from ragmeter._text import printable

    text = "" if value is None else str(value)
    for a, b in (("\\", "\\\\"), ("|", "\\|"), ("<", "&lt;"), (">", "&gt;"), ("`", "\\`"), ("*", "\\*"), ("_", "\\_"), ("[", "\\["), ("]", "\\]")):
        text = text.replace(a, b)
    return printable(" ".join(text.split()))


def md_code(value: object) -> str:
    """A warning code as inline code; a code that is not a plain name (a folder edited or written by another
    tool) is escaped text instead: a backtick in it would close the span and let the rest through as markup."""
    import re

    text = "" if value is None else str(value)
    return f"`{text}`" if re.fullmatch(r"[A-Za-z0-9_.:-]+", text) else md_escape(text)


def md_table(headers: List[str], rows: List[List[str]]) -> str:
    out = ["| " + " | ".join(md_escape(h) for h in headers) + " |", "|" + "|".join(["---"] * len(headers)) + "|"]
    out += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def render_markdown(results: Results, aggregates: Dict[str, Any], readings: Dict[str, Any]) -> str:
    from ragmeter.diagnosis import DIAGNOSES

    n = results.cases.height
    lines = [f"## ragmeter report: {md_escape(results.title)}", ""]
    lines.append(f"{n} cases; one case = {resolution_text(n)} points. 95% percentile-bootstrap intervals "
                 f"({readings.get('n_resamples')} resamples, seed {readings.get('seed')}); n = scored / total.")
    settings = settings_texts(results.summary)
    if settings:
        lines.append("Settings: " + md_escape(" · ".join(settings)) + ".")
    lines.append("")
    lines += _judge_failed_lines(results)
    lines += _judge_failed_lines(results, "skipped")
    lines += _warning_lines(results)
    rows = []
    for name in aggregates.get("metrics", []):
        agg = aggregates["overall"][name]
        kind = METRICS[name].kind
        ci = f"[{fmt_value(agg['ci_low'], kind)}, {fmt_value(agg['ci_high'], kind)}]" if agg["ci_low"] is not None else "n/a"
        rows.append([metric_label(name, results), fmt_value(agg["value"], kind), ci, f"{agg['n_scored']}/{agg['n_total']}"])
    rows += [[label, why, "n/a", f"0/{n_total}"] for label, why, n_total in not_measured_rows(results)]
    lines += [md_table(["metric", "value", "95% CI", "n"], rows), ""]
    note = correct_rate_note(results.cases)
    lines += [md_escape(note), ""] if note else []
    lines += [md_escape(" ".join(pass_rate_notes(results))), ""] if pass_rate_notes(results) else []
    shown = [x for x in ("hit", "file_hit", "mrr", "correct", "faithfulness") if x in aggregates.get("metrics", [])]
    if shown:
        cat_rows = []
        for cat in sorted(aggregates["by_category"]):
            row = [cat]
            for name in shown:
                agg = aggregates["by_category"][cat][name]
                row.append(f"{fmt_value(agg['value'], METRICS[name].kind)} ({agg['n_scored']}/{agg['n_total']})")
            cat_rows.append(row)
        more = more_categories_line(aggregates)
        lines += ["### Per category", ""] + ([more, ""] if more else [])
        lines += [md_table(["category"] + [metric_label(x, results) for x in shown], cat_rows), ""]
    lines += _sweep_lines(results)
    diag = readings["diagnosis"]["diagnosis"]
    lines += ["### Diagnosis", "", md_table(["diagnosis", "cases", "share"], [
        [d, str(diag[d]), f"{100 * diag[d] / max(n, 1):.1f}%"] for d in DIAGNOSES if diag.get(d)
    ]), ""]
    ref = readings["diagnosis"]["refusal"]
    lines.append(
        f"Refusals: {ref['overall']['refusals']} of {ref['overall']['answered']} answered cases are refusals: "
        f"{ref['noanswer']['refusals']} of {ref['noanswer']['answered']} no-answer cases (where refusing is right) "
        f"and {ref['answerable']['refusals']} of {ref['answerable']['answered']} answerable cases."
        if results.refusals_measured else f"Refusals: {NO_ANSWERS}."
    )
    unjudged = set(not_judged_metrics(results))
    quad = readings["diagnosis"]["quadrants"]
    if "context_precision" in unjudged:
        lines.append("Context precision x quality: not judged.")
    elif any(quad.values()):
        lines.append(f"Context precision x quality, {placed_line(quad, n, QUADRANT_CASES)}: "
                     + ", ".join(f"{k} {v}" for k, v in quad.items()) + ".")
    bands = readings["diagnosis"]["faithfulness_bands"]
    if "faithfulness" in unjudged:
        lines.append("Faithfulness bands: not judged.")
    elif any(bands.values()):
        lines.append(f"Faithfulness bands, {placed_line(bands, n, BAND_CASES)}: "
                     + ", ".join(f"{k} {v}" for k, v in bands.items()) + ".")
    elif "faithfulness" in aggregates.get("metrics", []):  # judged, but no row scored: said, not left out
        lines.append(f"Faithfulness bands: no answer scored (0/{n}).")
    lines.append("")
    from ragmeter.repeats import repeat_sections, repeat_table

    for key, title, note in repeat_sections(results.summary):
        headers, rows = repeat_table(results.summary[key])
        lines += [f"### {title}", "", md_table(headers, rows), "", note, ""]
    lines += _calibration_lines(results)
    lines += _golden_set_lines(results.summary)
    return "\n".join(lines).rstrip("\n") + "\n"  # a text file's last line ends with a line break


def _sweep_lines(results: Results) -> List[str]:
    """The threshold sweep over all cases (``eval --thresholds``); per category in sweep.parquet."""
    from ragmeter._text import threshold_labels

    if results.sweep is None or results.sweep.height == 0:
        return []
    rows = results.sweep.filter(pl.col("category") == "ALL").sort("threshold").to_dicts()
    label = threshold_labels(row["threshold"] for row in rows)
    table = [[label[r["threshold"]], fmt_value(r["hit_rate"], "rate"), fmt_value(r["mrr"], "score"),
              f"{r['n_scored']}/{r['n_total']}", str(r["empty_retrievals"]), f"{r['mean_kept']:.2f}"] for r in rows]
    return ["### Threshold sweep", "", "Keep the chunks scored at least t, then the top k; all cases (per category "
            "in sweep.parquet). empty: cases left with no chunk; kept: mean chunks kept.", "",
            md_table(["t", "Hit@k", "MRR", "n", "empty", "kept"], table), ""]


def _golden_set_lines(summary: Dict[str, Any]) -> List[str]:
    """The golden set in brief: size, categories, hard share, audit warnings (``ragmeter audit`` has the rest)."""
    panel = summary.get("golden_set")
    if not isinstance(panel, dict) or not panel.get("n"):
        return []
    from ragmeter.report.html import _percent

    cats = ", ".join(f"{md_escape(name)} {md_escape(g.get('n') if isinstance(g, dict) else '')}"
                     for name, g in (panel.get("by_category") or {}).items())
    out = ["", "## Golden set", "", f"- {md_escape(panel['n'])} cases, {md_escape(panel.get('n_labeled', 0))} "
           f"labelled; by category: {cats}"]
    hard = panel.get("hard") or {}
    if hard.get("n_total"):
        out.append(f"- hard cases: {md_escape(hard.get('n'))}/{md_escape(hard['n_total'])} = "
                   f"{md_escape(_percent(hard.get('share')))}")
    out += [f"- audit warning {md_code(w.get('code'))}: {md_escape(str(w.get('message')))}" for w in panel.get("warnings") or []]
    return out


def _calibration_lines(results: Results) -> List[str]:
    """Judge vs human reviewers (``ragmeter review import``)."""
    from ragmeter.report.data import calibration_section
    from ragmeter.review import render

    c = calibration_section(results)
    if c is None:
        return []
    out = ["### Calibration: judge vs human reviewers", ""]
    # a blank line after each warning: a table right below a paragraph line is read as more of its text
    out += [line for w in (c.get("warning"), c.get("manifest_warning")) if w
            for line in (f"**Warning:** {md_escape(w)}", "")]
    out += [md_table(["", "value"], render.headline_rows(c)), "",
            md_table(["", "human correct", "human wrong"], render.cell_rows(c)), "",
            md_table(["stratum", "in sheet", "reviewed", "agreement", "human correct"], render.stratum_rows(c)), ""]
    out += [f"- {md_escape(f)}" for f in c.get("findings") or []]
    out += ["", md_escape(render.ppi_line(c)), ""]
    if c.get("n_incomplete"):
        out += [f"Incomplete: {md_escape(c['n_incomplete'])} case(s) not (fully) reviewed, left out: "
                + md_escape(", ".join(c["incomplete"][:20])), ""]
    return out


def _warning_lines(results: Results) -> List[str]:
    """One line per warning kind; each names its first few cases (warnings.json has them all)."""
    from ragmeter._warnings import normalise

    items = [normalise(w) for w in results.summary.get("warnings") or [] if w is not None] \
        if isinstance(results.summary.get("warnings"), list) else []
    items += [normalise(w) for w in results.warnings]
    if not items:
        return []
    kinds: Dict[str, List[str]] = {}
    for w in items:
        kinds.setdefault(str(w.get("code") or "note"), []).append(str(w["message"]))
    kinds_said = f"{len(kinds)} kind" + ("" if len(kinds) == 1 else "s")
    out = ["<details><summary>Warnings (" + kinds_said + "; full lists in warnings.json)</summary>", ""]
    from ragmeter.report.html import MAX_WARNING_CHARS

    out += [f"- {md_code(code)} " + md_escape(ellipsis_cut("; ".join(msgs), MAX_WARNING_CHARS)) for code, msgs in kinds.items()]
    return out + ["", "</details>", ""]




def _judge_failed_lines(results: Results, status: str = "failed") -> List[str]:
    failures = judge_failures(results, status)
    if not failures:
        return []
    totals = judge_row_totals(results)
    out = [f"**Judge {status}**", ""]
    for metric, kinds in failures.items():
        n_failed = sum(int(k.get("count") or 0) for k in kinds.values())
        of = f" of {totals[metric]}" if totals.get(metric) else ""
        parts = [f"{kind} x {int(info.get('count') or 0)}" + (f" (e.g. {ellipsis_cut(str(info['example']), 200)})" if info.get("example") else "")
                 for kind, info in kinds.items()]
        out.append(f"- {md_escape(metric)}: {n_failed}{of} rows {status}: " + md_escape("; ".join(parts)))
    return out + [""]
