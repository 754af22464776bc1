"""The calibration section as text: console lines, table rows (shared by the console and both reports)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

__all__ = ["pct", "interval", "text_lines", "stratum_rows", "cell_rows", "headline_rows", "ppi_line"]


def pct(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def interval(lo: Optional[float], hi: Optional[float], percent: bool = True) -> str:
    if lo is None or hi is None:
        return "n/a"
    return f"[{pct(lo)}, {pct(hi)}]" if percent else f"[{lo:.2f}, {hi:.2f}]"


def kappa_text(kappa: Dict[str, Any]) -> str:
    if kappa.get("value") is None:
        return f"n/a ({kappa.get('reason') or 'undefined'})"
    shown = (f"(interval n/a: {kappa['ci_reason']})" if kappa.get("ci_low") is None and kappa.get("ci_reason")
             else interval(kappa.get("ci_low"), kappa.get("ci_high"), percent=False))
    return f"{kappa['value']:.4f} {shown}, {kappa.get('band')}"


def headline_rows(c: Dict[str, Any]) -> List[List[str]]:
    a = c["agreement"]
    rows = [["cases compared (judge verdict and human verdict)", str(c["n"])],
            ["agreement (95% Wilson)", f"{a['agreed']}/{a['n']} = {pct(a['value'])} {interval(a['ci_low'], a['ci_high'])}"],
            ["Cohen's kappa (95%), Landis-Koch band", kappa_text(c["kappa"])],
            ["disagreements: lenient (judge correct, human wrong) / strict (judge wrong, human correct)",
             f"{c['disagreements']['lenient']} / {c['disagreements']['strict']}"],
            ["sheet: cases / reviewed / incomplete", f"{c['n_in_sheet']} / {c['n_reviewed']} / {c['n_incomplete']}"]]
    if c.get("n_overrides"):
        rows.append(["verdicts set by the reviewer's correct column", str(c["n_overrides"])])
    return rows


def cell_rows(c: Dict[str, Any]) -> List[List[str]]:
    cells = c["cells"]
    return [["judge correct", str(cells["both_correct"]), str(cells["judge_correct_human_wrong"])],
            ["judge incorrect", str(cells["judge_wrong_human_correct"]), str(cells["both_wrong"])]]


def stratum_rows(c: Dict[str, Any]) -> List[List[str]]:
    from ragmeter.review.sampling import STRATUM_LABELS

    rows = []
    for stratum, row in c["strata"].items():
        if not row["n_in_sheet"]:
            continue
        agree = (f"{row['agreed']}/{row['n_compared']} = {pct(row['agreement'])}" if row["n_compared"]
                 else "n/a (no judge verdict)" if stratum == "judge_failed" else "n/a")
        rows.append([STRATUM_LABELS[stratum], str(row["n_in_sheet"]), str(row["n_reviewed"]), agree,
                     str(row["human_correct"])])
    return rows


def ppi_line(c: Dict[str, Any]) -> str:
    p = c["ppi"]
    unjudged = p.get("n_unjudged") or 0
    over = (f"{p.get('n_cases')} of {p.get('n_cases') + unjudged} cases ({unjudged} not judged: skipped or missing "
            "from the run; a failed call counts as not correct)" if unjudged and p.get("n_cases") is not None
            else f"{p.get('n_cases')} cases (a failed call counts as not correct)")
    raw = f"judge's correct rate {pct(p.get('judge_rate'))} over {over}"
    if p.get("value") is None:
        return f"{raw}; prediction-powered estimate: n/a ({p.get('reason')})"
    drawn = p.get("n_random_in_sheet")
    labels = f"{p['n_random_labels']} random label(s)"
    if drawn and drawn > p["n_random_labels"]:
        labels += f" (of the {drawn} cases drawn for C)"
    outside = p.get("n_outside_sample") or 0
    left_out = (f"; {outside} case(s) outside the drawn sample are compared with the judge but not in the estimate"
                if outside else "")
    if p.get("random_draw") == "assumed":
        left_out += ("; no manifest of the export was found, so every reviewed case judged correct outside A and B "
                     "is taken as drawn at random")
    return (f"{raw}; prediction-powered estimate {pct(p['value'])} {interval(p['ci_low'], p['ci_high'])}, resting on "
            f"{labels} for the {p['n_rest']} other cases judged correct and "
            f"{p['n_census_labelled']} fully reviewed cases of strata A, B and judge-failed{left_out}")


def text_lines(c: Dict[str, Any]) -> List[str]:
    a = c["agreement"]
    cells = c["cells"]
    lines = [f"calibration: {a['agreed']}/{a['n']} agree = {pct(a['value'])} {interval(a['ci_low'], a['ci_high'])}; "
             f"Cohen's kappa {kappa_text(c['kappa'])}",
             f"  cells: both correct {cells['both_correct']}, judge correct / human wrong "
             f"{cells['judge_correct_human_wrong']}, judge wrong / human correct {cells['judge_wrong_human_correct']}, "
             f"both wrong {cells['both_wrong']}"]
    for row in stratum_rows(c):
        lines.append(f"  {row[0]}: {row[1]} in sheet, {row[2]} reviewed, agreement {row[3]}")
    lines += [f"  finding: {f}" for f in c.get("findings") or []]
    lines.append("  " + ppi_line(c))
    if c.get("n_incomplete"):
        shown = ", ".join(c["incomplete"][:5]) + (" ..." if c["n_incomplete"] > 5 else "")
        absent = len(c.get("missing_from_sheet") or [])
        cut = len(c.get("points_missing_from_sheet") or {})
        extra = len(c.get("points_added_to_sheet") or {})
        why = ([f"{absent} of them with no row in the sheet"] if absent else []) + (
            [f"{cut} with key-point rows deleted from it"] if cut else []) + (
            [f"{extra} with key-point rows the export did not write"] if extra else [])
        rows = f" ({'; '.join(why)})" if why else ""
        lines.append(f"  incomplete: {c['n_incomplete']} case(s) not (fully) reviewed{rows}, left out: {shown}")
    if c.get("warning"):
        lines.append(f"  warning: {c['warning']}")
    if c.get("manifest_warning"):
        lines.append(f"  warning: {c['manifest_warning']}")
    return lines
