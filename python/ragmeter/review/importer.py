"""``ragmeter review import``: read a filled review sheet, compare the human verdicts with the judge's.

Writes ``review.parquet`` (per reviewed case: stratum, judge verdict and score, human verdict and score, the
points covered) and the ``calibration`` section of ``summary.json``, and rebuilds both reports (which gain a
Calibration section); all or nothing. The human verdict follows :data:`ragmeter.calibration.VERDICT_RULES`.

A case is reviewed when every one of its points has a ``covered`` value (or its ``correct`` column overrides
the verdict); a case with no value, or only some, is incomplete: listed, never guessed.

Prediction-powered accuracy: the judge's correct rate over the cases with a verdict or a failed call, corrected
by the human labels. Strata A (judged incorrect), B (evidence missed, judged correct) and judge-failed are chosen
by the judge's outcome; they are reviewed in full, so each case counts with its own human verdict. The rest
(judged correct) is corrected only by its random sample C: its human-minus-judge mean, weighted by the size of
the rest (:func:`ragmeter.calibration.ppi_mean` within that stratum; the interval is the Wilson interval of C's
human-correct share, because the judge's value is constant there, scaled by the rest's share of the cases).
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import polars as pl

from ragmeter._magic import binary_kind
from ragmeter._sniff import utf16_encoding
from ragmeter.errors import InputError
from ragmeter.review.sheet import from_sheet_cell

__all__ = ["ALLOWED_COLUMNS", "REQUIRED_COLUMNS", "read_sheet", "human_labels", "calibrate", "import_sheet"]

REQUIRED_COLUMNS = ("id", "point", "core", "covered")
ALLOWED_COLUMNS = ("id", "point", "key_point", "core", "covered", "note", "correct")
#: what a reviewer may write; "true"/"false" are how Excel saves a cell it took for a boolean (TRUE, FALSE)
_FLAGS = {"1": True, "yes": True, "true": True, "0": False, "no": False, "false": False, "": None}
DEFAULT_MIN_AGREEMENT = 0.8


def _flag(value: Optional[str], where: str, field: str) -> Optional[bool]:
    text = (value or "").strip().lower()
    if text not in _FLAGS:
        raise InputError(f"{where}: {field}: {value!r} is not 1, 0, yes, no, true, false or empty")
    return _FLAGS[text]


_SHEET_IS = f"a CSV with the columns {', '.join(ALLOWED_COLUMNS[:6])}, as review export writes it"
_SAVE_AS_UTF8 = 'save it from the spreadsheet as "CSV UTF-8" (Excel: File > Save As > CSV UTF-8) and import again'


def _not_a_sheet(path: Path, looks_like: str) -> InputError:
    return InputError(f"{path}: not a review sheet ({_SHEET_IS}); it looks like {looks_like}")


def _json_shape(text: str) -> Optional[str]:
    """What a file that opens like JSON is, or None when it does not (a header line never starts with { or [)."""
    head = text.lstrip()
    while head.startswith(("#", "//")):  # the comment lines golden sets and runs may open with
        head = head.partition("\n")[2].lstrip()
    if head[:1] not in ("{", "["):
        return None
    try:
        whole = json.loads(head)
    except (ValueError, RecursionError):
        whole = None
    if isinstance(whole, list):
        return "a JSON array"
    if isinstance(whole, dict) and "\n" in head.strip():
        return "JSON (one object)"
    return "JSON Lines" if head[:1] == "{" else "JSON"


def _delimiter(text: str) -> str:
    """The sheet's field separator, from its header line: a comma, or the semicolon (or tab) Excel writes where the
    decimal mark is a comma (no column name holds any of them)."""
    header = text.partition("\n")[0]
    return next((d for d in (",", ";", "\t") if d in header), ",")


def _field_at(text_before: str) -> Optional[str]:
    """The column (header name) of the field that ``text_before`` (the sheet up to a character) ends in; None on
    the header line."""
    # a sentinel stands for the character: quoted fields may span lines, so the csv module says which field it is in
    try:
        rows = list(csv.reader(io.StringIO(text_before + "\ufffd", newline=""), delimiter=_delimiter(text_before)))
    except csv.Error:  # a field over the csv module's size limit: the line alone must do
        return None
    if len(rows) < 2:
        return None
    header = [h.strip() for h in rows[0]]
    last = rows[-1]
    index = next((i for i, field in enumerate(last) if field.endswith("\ufffd")), len(last) - 1)
    return header[index] if 0 <= index < len(header) else None


def _sheet_text(path: Path, raw: bytes) -> str:
    """The sheet's text; an :class:`InputError` with one diagnosis when the whole file is not a CSV sheet (JSON, a
    workbook, UTF-16, binary) or is not UTF-8 (naming the line and column of the first undecodable byte)."""
    if raw.startswith(b"PK\x03\x04"):
        raise _not_a_sheet(path, f"an Excel workbook (.xlsx) or another ZIP archive; {_SAVE_AS_UTF8}")
    kind = binary_kind(raw)
    if kind:
        raise _not_a_sheet(path, f"a binary file ({kind}), not text")
    codec = utf16_encoding(raw)
    if codec:
        # Excel's "Unicode Text" is UTF-16 and tab-separated
        raise _not_a_sheet(path, f"UTF-16 text ({codec}, Excel's \"Unicode Text\"?); {_SAVE_AS_UTF8}")
    if raw.startswith(b"\xef\xbb\xbf"):  # Excel's "CSV UTF-8" opens with a byte-order mark
        raw = raw[3:]
    if b"\x00" in raw[: 1 << 16]:
        raise _not_a_sheet(path, "a binary file, not text")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start].decode("utf-8")
        shape = _json_shape(before)
        if shape:
            raise _not_a_sheet(path, shape) from None
        line = before.count("\n") + 1
        column = _field_at(before)
        where = f" in the {column} column" if column else f" at character {len(before) - before.rfind(chr(10))}"
        from ragmeter._sniff import legacy_encoding

        probably = "GB18030 (GBK)" if legacy_encoding(raw) == "gb18030" else "Windows-1252"
        raise InputError(
            f"{path}:{line}: not UTF-8 text: byte 0x{raw[exc.start]:02x}{where} (the sheet was saved in another "
            f"encoding, probably {probably} by Excel's plain \"CSV\"); {_SAVE_AS_UTF8}") from None
    shape = _json_shape(text)
    if shape:
        raise _not_a_sheet(path, shape)
    return text


def _csv_rows(reader: Any, path: Path) -> Iterator[List[str]]:
    """The rows of ``reader``; what the csv module cannot read is an :class:`InputError` naming the line. Its
    usual cause is a quote opened in a cell and never closed, which makes one cell of the rest of the sheet
    until the csv module's limit of a cell's size (a traceback before)."""
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            said = (f"a cell longer than {csv.field_size_limit():,} characters, or a quote (\") opened in a cell and "
                    f"never closed, which makes one cell of the rows after it" if "field limit" in str(exc)
                    else f"cannot read the sheet as CSV ({exc})")
            raise InputError(f"{path}:{reader.line_num}: {said}") from None
        yield fields


def read_sheet(path: Any, known_ids: Optional[set] = None, results_where: str = "") -> Dict[str, Dict[str, Any]]:
    """The sheet's rows per case: ``{id: {"points": {n: (core, covered)}, "correct": bool|None, "note": str}}``.

    Every problem raises :class:`InputError` naming the file, the row (its line) and the field."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path}: is a folder, not a sheet (give the filled CSV file, e.g. {path / 'review.csv'})")
    if not path.is_file():
        raise InputError(f"{path}: review sheet not found")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the sheet ({exc.strerror or exc})") from None
    text = _sheet_text(path, raw)
    # newline="": quoted fields may hold line breaks
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(text))
    rows = _csv_rows(reader, path)
    header = [h.strip() for h in next(rows, [])]
    # Excel keeps a column that was typed in and cleared as one without a name: ignored while it stays empty
    named = [h for h in header if h]
    if not named:
        raise InputError(f"{path}:1: empty sheet (expected the header {','.join(ALLOWED_COLUMNS[:6])})")
    unknown = [h for h in named if h not in ALLOWED_COLUMNS]
    missing = [h for h in REQUIRED_COLUMNS if h not in named]
    if unknown or missing:
        said = [f"unknown column(s) {', '.join(unknown)}"] if unknown else []
        said += [f"missing column(s) {', '.join(missing)}"] if missing else []
        raise InputError(f"{path}:1: {'; '.join(said)} (a review sheet has the columns "
                         f"{', '.join(ALLOWED_COLUMNS[:6])}, optionally correct)")
    twice = next((h for h in named if named.count(h) > 1), None)
    if twice:
        raise InputError(f"{path}:1: column {twice} appears twice")
    position = {h: i for i, h in enumerate(header) if h}
    cases: Dict[str, Dict[str, Any]] = {}
    for fields in rows:
        where = f"{path}:{reader.line_num}"
        if not any(f.strip() for f in fields):  # an empty row (Excel leaves ';;;;;' rows below the sheet)
            continue
        stray = next((i for i, f in enumerate(fields) if f.strip() and (i >= len(header) or not header[i])), None)
        if stray is not None:
            if stray >= len(header):
                raise InputError(f"{where}: more fields than the header's {len(header)}")
            raise InputError(f"{where}: column {stray + 1} has no name in the header but holds "
                             f"{fields[stray].strip()[:40]!r}")
        row = {h: (fields[i] if i < len(fields) else "") for h, i in position.items()}
        case_id = from_sheet_cell((row.get("id") or "").strip())  # the export escaped formula starts
        if not case_id:
            raise InputError(f"{where}: id: empty")
        if known_ids is not None and case_id not in known_ids:
            raise InputError(f"{where}: id: {case_id!r} is not a case of {results_where}")
        try:
            point = int((row.get("point") or "").strip())
            if point < 1:
                raise ValueError
        except ValueError:
            raise InputError(f"{where}: point: {row.get('point')!r} is not a point number (1, 2, ...)") from None
        core = _flag(row.get("core"), where, "core")
        covered = _flag(row.get("covered"), where, "covered")
        case = cases.setdefault(case_id, {"points": {}, "texts": {}, "correct": None, "note": "",
                                          "line": reader.line_num})
        if point in case["points"]:
            raise InputError(f"{where}: point: case {case_id!r} has point {point} twice")
        case["points"][point] = (bool(core), covered)
        if "key_point" in position:
            case["texts"][point] = from_sheet_cell((row.get("key_point") or "").strip())
        correct = _flag(row.get("correct"), where, "correct") if "correct" in position else None
        if correct is not None:
            if case["correct"] is not None and case["correct"] != correct:
                raise InputError(f"{where}: correct: contradicts an earlier row of case {case_id!r}")
            case["correct"] = correct
        note = from_sheet_cell((row.get("note") or "").strip())
        if note:
            case["note"] = (case["note"] + " " + note).strip()
    if not cases:
        raise InputError(f"{path}:2: the sheet has a header but no rows")
    return cases


def human_labels(sheet: Dict[str, Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Per case: ``complete``, ``correct`` (None when incomplete), ``score``, the point counts, ``override``."""
    from ragmeter.calibration import verdict_from_points

    out = {}
    for case_id, case in sheet.items():
        points = [case["points"][k] for k in sorted(case["points"])]
        core = [c for c, _ in points]
        covered = [v for _, v in points]
        filled = all(v is not None for v in covered)
        correct, score = verdict_from_points(core, [bool(v) for v in covered]) if filled else (None, None)
        if not any(core):
            core = [True] * len(core)
        if case["correct"] is not None:
            correct = case["correct"]
        out[case_id] = {
            "complete": correct is not None, "human_correct": correct, "human_score": score,
            "override": case["correct"] is not None, "points": len(points),
            "points_covered": sum(1 for v in covered if v) if filled else None,
            "core_points": sum(core), "core_covered": sum(1 for c, v in zip(core, covered) if c and v) if filled else None,
            "partly_filled": any(v is not None for v in covered) and not filled, "note": case["note"] or None,
        }
    return out


def _stratum_rows(review: pl.DataFrame) -> Dict[str, Dict[str, Any]]:
    from ragmeter.review.sampling import STRATA

    rows = {}
    present = set(review.get_column("stratum").to_list())
    for stratum in STRATA + (("outside_sample",) if "outside_sample" in present else ()):
        part = review.filter(pl.col("stratum") == stratum)
        done = part.filter(pl.col("human_correct").is_not_null())
        judged = done.filter(pl.col("judge_correct").is_not_null())
        agreed = int((judged.get_column("judge_correct") == judged.get_column("human_correct")).sum()) if judged.height else 0
        rows[stratum] = {"n_in_sheet": part.height, "n_reviewed": done.height, "n_compared": judged.height,
                         "agreed": agreed, "agreement": agreed / judged.height if judged.height else None,
                         "human_correct": int(done.get_column("human_correct").sum()) if done.height else 0}
    return rows


def _ppi(review: pl.DataFrame, population: Dict[str, int]) -> Dict[str, Any]:
    """Prediction-powered correct rate (see the module's doc)."""
    from ragmeter.calibration import ppi_mean, wilson_interval

    census = review.filter(pl.col("stratum").is_in(["judge_incorrect", "miss_but_correct", "judge_failed"]))
    n_census = population["judge_incorrect"] + population["miss_but_correct"] + population["judge_failed"]
    n_rest = population["rest"]
    big_n = n_census + n_rest
    judge_rate = (population["miss_but_correct"] + n_rest) / big_n if big_n else None
    random = review.filter((pl.col("stratum") == "random") & pl.col("human_correct").is_not_null())
    out: Dict[str, Any] = {"value": None, "ci_low": None, "ci_high": None, "judge_rate": judge_rate, "n_cases": big_n,
                           "n_unjudged": population.get("unjudged", 0),
                           "n_random_labels": random.height,
                           "n_random_in_sheet": review.filter(pl.col("stratum") == "random").height,
                           #: reviewed cases judged correct that the export did not draw (added to the sheet by
                           #: hand): compared with the judge, left out of the estimate, which needs a random draw
                           "n_outside_sample": review.filter(pl.col("stratum") == "outside_sample").height,
                           "n_rest": n_rest, "n_census": n_census,
                           "n_census_labelled": int(census.get_column("human_correct").is_not_null().sum()),
                           "reason": None}
    if out["n_census_labelled"] < n_census:
        out["reason"] = (f"{n_census - out['n_census_labelled']} of the {n_census} cases of strata A, B and judge-failed "
                         "have no human verdict (they are reviewed in full, or the estimate is biased)")
        return out
    if n_rest and not random.height:
        out["reason"] = "no random label among the cases judged correct (stratum C)"
        return out
    census_correct = int(census.get_column("human_correct").sum()) if census.height else 0
    if not n_rest:
        out.update(value=census_correct / big_n, ci_low=census_correct / big_n, ci_high=census_correct / big_n)
        return out
    human = random.get_column("human_correct").cast(pl.Float64).to_list()
    rest = ppi_mean([1.0] * n_rest, [1.0] * len(human), human)
    lo, hi = wilson_interval(int(sum(human)), len(human))
    assert lo is not None and hi is not None  # C has at least one label here
    share = n_rest / big_n
    out.update(value=census_correct / big_n + share * rest["value"],
               ci_low=census_correct / big_n + share * lo, ci_high=census_correct / big_n + share * hi,
               rest_correction=rest["correction"])
    return out


def _findings(cells: Dict[str, int], strata: Dict[str, Dict[str, Any]]) -> List[str]:
    from ragmeter.review.sampling import STRATUM_LABELS

    lenient, strict = cells["judge_correct_human_wrong"], cells["judge_wrong_human_correct"]
    total = lenient + strict
    if not total:
        return []
    out = []
    direction = ("the judge said correct where the reviewer did not (lenient)" if not strict else
                 "the judge said incorrect where the reviewer said correct (strict)" if not lenient else None)
    where = [s for s, row in strata.items() if row["n_compared"] - row["agreed"] > 0]
    line = f"{total} disagreement(s): {lenient} lenient, {strict} strict"
    if direction:
        line = f"all {total} disagreement(s) in one direction: {direction}"
    if len(where) == 1:
        line += f"; all in {'' if where[0] == 'judge_failed' else 'stratum '}{STRATUM_LABELS[where[0]]}"
        if where[0] == "miss_but_correct" and direction and not strict:
            line += ": the judge is lenient when the evidence was not retrieved; send every such case to a human"
    out.append(line)
    return out


def calibrate(review: pl.DataFrame, population: Dict[str, int], *, min_agreement: float = DEFAULT_MIN_AGREEMENT,
              n_incomplete: int = 0, draw_known: bool = True) -> Dict[str, Any]:
    """The ``calibration`` section from ``review`` (one row per case of the sheet: ``stratum``, ``judge_correct``,
    ``human_correct``, ``complete``) and the folder's stratum sizes."""
    from ragmeter.calibration import agreement

    compared = review.filter(pl.col("judge_correct").is_not_null() & pl.col("human_correct").is_not_null())
    judge = compared.get_column("judge_correct").to_list()
    human = compared.get_column("human_correct").to_list()
    result = agreement(judge, human, names=("judge", "human"))
    cells = result.cells or {"both_true": 0, "a_true_b_false": 0, "a_false_b_true": 0, "both_false": 0}
    cells = {"both_correct": cells["both_true"], "judge_correct_human_wrong": cells["a_true_b_false"],
             "judge_wrong_human_correct": cells["a_false_b_true"], "both_wrong": cells["both_false"]}
    strata = _stratum_rows(review)
    value = result.value
    below = value is not None and value < min_agreement
    incomplete = review.filter(~pl.col("complete")).get_column("id").to_list()
    return {
        "n": result.n,
        "n_in_sheet": review.height,
        "n_reviewed": int(review.get_column("complete").sum()),
        "n_incomplete": len(incomplete),
        "incomplete": incomplete,
        "n_overrides": int(review.get_column("override").sum()),
        "agreement": {"value": result.value, "ci_low": result.ci_low, "ci_high": result.ci_high,
                      "agreed": result.agreed, "n": result.n, "interval": "Wilson 95%"},
        "kappa": {**result.kappa.to_dict(), "interval": "95%, Fleiss-Cohen-Everitt standard error"},
        "cells": cells,
        "strata": strata,
        "disagreements": {"lenient": cells["judge_correct_human_wrong"], "strict": cells["judge_wrong_human_correct"]},
        "findings": _findings(cells, strata),
        "min_agreement": min_agreement,
        "below_min_agreement": below,
        "warning": (f"agreement {100 * (value or 0.0):.1f}% is below --min-agreement {100 * min_agreement:.0f}%: "
                    "recalibrate the judge before trusting its correct rate") if below else None,
        "population": population,
        "ppi": {**_ppi(review, population), "random_draw": "manifest" if draw_known else "assumed"},
    }


def import_sheet(results_dir: Any, sheet: Any, *, min_agreement: float = DEFAULT_MIN_AGREEMENT) -> Dict[str, Any]:
    """Read the sheet, write ``review.parquet``, ``summary.json``'s ``calibration`` and the reports; return the
    section."""
    from ragmeter._io import atomic_outputs, strict_json, write_frame, write_text
    from ragmeter.report import write_reports
    from ragmeter.report.data import load_results
    from ragmeter.review.sampling import require_judged, select_sample, strata

    if not 0.0 <= min_agreement <= 1.0:
        raise InputError(f"--min-agreement: {min_agreement} is not between 0 and 1")
    results = load_results(results_dir)
    require_judged(results.cases, results.path)
    table = strata(results.cases)
    known = set(table.get_column("id").to_list())
    sheet_cases = read_sheet(sheet, known, f"{results.path / 'cases.parquet'}")
    manifest = _sample_manifest(Path(sheet), results.path, set(sheet_cases))
    points_missing, points_added = _point_rows_changed(sheet_cases, manifest)
    labels = human_labels(sheet_cases)
    # a verdict on the points left, or on points the export did not write, would be made up: not reviewed, unless
    # overridden
    for case_id in {**points_missing, **points_added}:
        if sheet_cases[case_id]["correct"] is None:
            labels[case_id].update(complete=False, human_correct=None, human_score=None, points_covered=None,
                                   core_covered=None)
    population = select_sample(results.cases, results.summary, random_n=0).population
    if not any(label["complete"] for label in labels.values()):  # nothing to measure: keep what the folder has
        raise InputError(f"{sheet}: no case of the sheet is reviewed (every covered cell is empty): nothing to "
                         "compare with the judge; nothing written (fill in review.html, or the covered column)")
    by_id = {r["id"]: r for r in table.iter_rows(named=True)}
    drawn = _drawn_at_random(manifest)
    rows = []
    for case_id, label in labels.items():
        case = by_id[case_id]
        stratum = case["stratum"]
        if stratum == "rest":  # a case judged correct is a random label only if the export drew it at random
            stratum = "random" if drawn is None or case_id in drawn else "outside_sample"
        rows.append({"id": case_id, "stratum": stratum, "judge_correct": case["judge_correct"],
                     "judge_score": case["judge_score"], **label})
    if any(r["stratum"] is None for r in rows):
        bad = next(r["id"] for r in rows if r["stratum"] is None)
        raise InputError(f"{Path(sheet)}:{sheet_cases[bad]['line']}: id: case {bad!r} has no correctness verdict in "
                         f"{results.path} (not judged): "
                         "it cannot be compared with the judge")
    review = pl.DataFrame(rows, schema_overrides={"judge_correct": pl.Boolean, "human_correct": pl.Boolean,
                                                  "judge_score": pl.Float64, "human_score": pl.Int64,
                                                  "note": pl.Utf8})
    section = calibrate(review, population, min_agreement=min_agreement, draw_known=drawn is not None)
    section["sheet"] = str(sheet)
    section.update(_manifest_check(Path(sheet), results.path))
    if points_missing:
        section["points_missing_from_sheet"] = points_missing
    if points_added:
        section["points_added_to_sheet"] = points_added
    in_sheet = set(labels)
    missing = [i for i in (manifest or {}).get("ids", []) if i in known and i not in in_sheet]
    if missing:  # rows a reviewer deleted or filtered out: not reviewed, as a row left blank is
        section["missing_from_sheet"] = missing
        section["incomplete"] = section["incomplete"] + missing
        section["n_incomplete"] = len(section["incomplete"])
    summary = dict(results.summary)
    summary["calibration"] = section
    files = summary.get("files")
    if isinstance(files, list) and "review.parquet" not in files:
        summary["files"] = files + ["review.parquet"]
    with atomic_outputs(results.path) as tmp:
        write_frame(review.drop("partly_filled"), tmp / "review.parquet")
        write_text(tmp / "summary.json", strict_json(summary) + "\n")
        write_reports(results.path, out_dir=tmp, summary=summary)
    return section


def _sample_manifest(sheet: Path, results_dir: Path, in_sheet: set) -> Optional[Dict[str, Any]]:
    """The manifest of the export the sheet came from: the one next to the sheet, else the folder's own
    ``review/manifest.json``. A manifest that neither lists every case of the sheet nor has every case it lists in
    the sheet belongs to another export and is not used (None)."""
    for manifest in (sheet.parent / "manifest.json", results_dir / "review" / "manifest.json"):
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        ids = data.get("ids") if isinstance(data, dict) else None
        # the export's sheet, or the export's sheet with cases a reviewer added (every exported case is in it)
        if isinstance(ids, list) and ids and (in_sheet <= set(ids) or set(ids) <= in_sheet):
            return data
    return None


def _drawn_at_random(manifest: Optional[Dict[str, Any]]) -> Optional[set]:
    """The ids the export drew at random from the cases judged correct (stratum C); None without a manifest."""
    strata = (manifest or {}).get("strata")
    if not isinstance(strata, dict):
        return None
    return {case_id for case_id, stratum in strata.items() if stratum == "random"}


def _point_rows_changed(sheet: Dict[str, Dict[str, Any]],
                        manifest: Optional[Dict[str, Any]]) -> Tuple[Dict[str, List[int]], Dict[str, List[int]]]:
    """Per case, (missing, added): the key points exported (the manifest's, else 1 to the highest number in the
    sheet) that have no row in the sheet, rows a reviewer deleted; and the rows numbered beyond the manifest's
    points, rows a reviewer added. Either way the case cannot be judged on the points its rows hold."""
    exported = (manifest or {}).get("key_points") if isinstance((manifest or {}).get("key_points"), dict) else {}
    missing: Dict[str, List[int]] = {}
    added: Dict[str, List[int]] = {}
    for case_id, case in sheet.items():
        have = set(case["points"])
        listed = exported.get(case_id) if isinstance(exported, dict) else None
        beyond: List[int] = []
        if isinstance(listed, list):
            beyond = sorted(k for k in have if k > len(listed))
            exported_texts = {k: t for k, t in (case.get("texts") or {}).items() if k <= len(listed)}
            if not _same_points(exported_texts, listed):
                listed, beyond = None, []  # the sheet's points are not the manifest's: another export's sheet
        n = len(listed) if isinstance(listed, list) else max(have)
        lost = [k for k in range(1, n + 1) if k not in have]
        if lost:
            missing[case_id] = lost
        if beyond:
            added[case_id] = beyond
    return missing, added


def _same_points(texts: Dict[int, str], listed: List[Any]) -> bool:
    """Whether the key-point texts of a case's rows are the manifest's at the same numbers (white space aside)."""
    def norm(text: Any) -> str:
        return " ".join(str(text or "").split())

    for number, text in texts.items():
        if number > len(listed):
            return False
        point = listed[number - 1]
        if text and isinstance(point, dict) and norm(point.get("text")) != norm(text):
            return False
    return True


def _manifest_check(sheet: Path, results_dir: Path) -> Dict[str, Any]:
    """Whether the sheet's manifest (next to it) was drawn from this very folder."""
    from ragmeter.review.export import results_hash

    manifest = sheet.parent / "manifest.json"
    if not manifest.is_file():
        return {"manifest": None}
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except ValueError:
        return {"manifest": str(manifest), "manifest_warning": "manifest.json is not valid JSON"}
    if not isinstance(data, dict):  # an export writes an object; anything else tells nothing about the folder
        return {"manifest": str(manifest), "manifest_warning": "manifest.json is not a JSON object"}
    same = data.get("results_sha256") == results_hash(results_dir)
    return {"manifest": str(manifest), "manifest_warning": None if same else
            "the results folder changed since the sheet was exported (its cases or judge tables differ)"}

