"""``ragmeter review compare``: several judges (eval runs of the same cases) and the human labels, pairwise."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ragmeter.errors import InputError

__all__ = ["compare_raters", "MARKED_GAP"]

#: judge-judge agreement this far above every judge-human agreement is a finding
MARKED_GAP = 0.05


def _names(dirs: Sequence[Path]) -> List[str]:
    """A name per folder: its own name, else (two of the same name) its path, else its resolved path."""
    seen: Dict[Path, Path] = {}
    for d in dirs:
        try:
            key = d.resolve()
        except OSError:
            key = d
        if key in seen:
            raise InputError(f"review compare: {d} is given twice ({seen[key]} is the same folder): a judge compared "
                             "with itself agrees by construction")
        seen[key] = d
    names: List[str] = []
    for d in dirs:
        name = d.name or str(d)
        for candidate in (name, str(d), str(d.resolve())):
            if candidate not in names and candidate != "human":  # the sheet's rater is "human"
                names.append(candidate)
                break
    return names


def compare_raters(results_dirs: Sequence[Any], human_sheet: Optional[Any] = None) -> Dict[str, Any]:
    """Pairwise agreement and kappa between the judges of ``results_dirs`` and, with ``human_sheet``, the humans.

    With a sheet, every pair is compared on the human-reviewed cases only (the same cases for every pair);
    without one, on the cases both judges gave a verdict.
    """
    from ragmeter.calibration import agreement_table
    from ragmeter.report.data import load_results
    from ragmeter.review.importer import human_labels, read_sheet
    from ragmeter.review.sampling import require_judged, strata

    if len(results_dirs) + (human_sheet is not None) < 2:
        raise InputError("review compare: give two results folders, or one and --human SHEET.csv")
    dirs = [Path(d) for d in results_dirs]
    raters: Dict[str, Dict[str, Any]] = {}
    judged: Dict[str, Dict[str, int]] = {}
    all_ids = set()
    for name, d in zip(_names(dirs), dirs):
        results = load_results(d)
        require_judged(results.cases, d)
        table = strata(results.cases)
        all_ids |= set(table.get_column("id").to_list())
        raters[name] = {r["id"]: r["judge_correct"] for r in table.iter_rows(named=True) if r["judge_correct"] is not None}
        judged[name] = {"n_judged": len(raters[name]), "n_total": table.height}
    ids = None
    judges = list(raters)
    n_in_sheet = None
    if human_sheet is not None:
        labels = human_labels(read_sheet(human_sheet, all_ids, " or ".join(str(d / "cases.parquet") for d in dirs)))
        n_in_sheet = len(labels)
        raters["human"] = {i: lab["human_correct"] for i, lab in labels.items() if lab["human_correct"] is not None}
        ids = sorted(raters["human"])
        if not ids:
            raise InputError(f"{human_sheet}: no case of the sheet is reviewed (every covered cell is empty)")
    silent = next((name for name in judges if not judged[name]["n_judged"]), None)
    if silent is not None:  # its judge gave no verdict at all: the pair below would be blamed on other cases
        raise InputError(f"review compare: {silent} has no verdict on any case (0 of {judged[silent]['n_total']} "
                         "judged: every correctness call failed or was skipped); rerun its judge, then compare")
    rows = agreement_table(raters, ids)
    empty = next((r for r in rows if not r["n"]), None)
    if empty is not None:  # nothing to measure for that pair: runs of other cases, or a sheet of another run
        raise InputError(f"review compare: {empty['a']} and {empty['b']} have no case with a verdict from both "
                         "(not runs of the same cases?)")
    return {"raters": list(raters), "judges": judges, "n_judged": judged, "n_cases": len(ids) if ids is not None else None,
            "n_in_sheet": n_in_sheet, "n_unreviewed": n_in_sheet - len(ids) if ids is not None and n_in_sheet else None,
            "pairs": rows, "finding": _finding(rows, judges) if human_sheet is not None else None}


def _finding(rows: List[Dict[str, Any]], judges: List[str]) -> Optional[str]:
    between = [r for r in rows if r["a"] in judges and r["b"] in judges and r["value"] is not None]
    with_human = [r for r in rows if "human" in (r["a"], r["b"]) and r["value"] is not None]
    if not between or not with_human:
        return None
    low = min(r["value"] for r in between)
    high = max(r["value"] for r in with_human)
    if low - high < MARKED_GAP:
        return None
    return (f"the judges agree with each other (at least {100 * low:.1f}%) markedly more than any of them agrees "
            f"with the humans (at most {100 * high:.1f}%): they share the same errors, and a second model does not "
            "replace human review")
