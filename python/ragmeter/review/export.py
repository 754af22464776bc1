"""``ragmeter review export``: the review sheet of a results folder (``review.html``, ``review.csv``,
``manifest.json``).

Key points per case, first found wins:

1. the golden set's optional ``keyPoints`` (or ``key_points``) field: a list of strings, a leading ``*`` marks a
   core point (the golden set is the one recorded in ``summary.json``'s inputs, if it is still there unchanged);
2. with a judge endpoint (``judge``, a :class:`ragmeter.judge.JudgeConfig`): the reference split into 1-4
   points, core points marked, one cached call per reference (:mod:`ragmeter.review.keypoints`);
3. one core point holding the whole reference answer (for a no-answer case without a reference: the answer
   says the material does not answer the question).
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import polars as pl

from ragmeter.errors import InputError
from ragmeter.review.sheet import to_sheet_cell

__all__ = ["SHEET_COLUMNS", "KeyPoint", "export_sheet", "results_hash", "golden_key_points", "card_order"]

SHEET_COLUMNS = ["id", "point", "key_point", "core", "covered", "note"]
SHEET_FORMAT = 1
NOANSWER_POINT = "Says the material does not answer the question, and invents no answer"


@dataclass(frozen=True)
class KeyPoint:
    text: str
    core: bool


def results_hash(results_dir: Path) -> str:
    """SHA-256 over the folder's case and judge tables (what the sheet was drawn from)."""
    h = hashlib.sha256()
    for name in ("cases.parquet", "judge.parquet"):
        path = results_dir / name
        if path.is_file():
            h.update(name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def parse_key_points(value: Any, where: str) -> List[KeyPoint]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip().lstrip("*").strip() for v in value):
        raise InputError(f"{where}: keyPoints: expected a non-empty list of non-empty strings "
                         "(a leading * marks a core point)")
    points = [KeyPoint(v.strip().lstrip("*").strip(), v.strip().startswith("*")) for v in value]
    if not any(p.core for p in points):  # no point starred: every point is core
        points = [KeyPoint(p.text, True) for p in points]
    return points


def golden_key_points(summary: Dict[str, Any], notes: List[str]) -> Dict[str, List[KeyPoint]]:
    """``keyPoints`` of the golden set recorded in ``summary.json`` (empty when it is gone or changed)."""
    golden = ((summary.get("inputs") or {}).get("golden") or {}) if isinstance(summary.get("inputs"), dict) else {}
    path = golden.get("path")
    if not path:
        return {}
    source = Path(path)
    if not source.is_file():
        notes.append(f"golden set {path} not found: key points are the whole reference answers")
        return {}
    data = source.read_bytes()
    if golden.get("sha256") and hashlib.sha256(data).hexdigest() != golden["sha256"]:
        notes.append(f"golden set {path} changed since the run: its keyPoints are not used")
        return {}
    out: Dict[str, List[KeyPoint]] = {}
    for number, line in enumerate(data.decode("utf-8-sig").splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith(("#", "//")):
            continue
        try:
            record = json.loads(text)
        except ValueError:
            continue  # the run read this golden set already; a line it skipped has no key points
        if not isinstance(record, dict):
            continue
        value = record.get("keyPoints", record.get("key_points"))
        if value is not None and record.get("id") is not None:
            out[str(record["id"])] = parse_key_points(value, f"{path}:{number}")
    return out


def case_key_points(row: Dict[str, Any], from_golden: Dict[str, List[KeyPoint]],
                    from_endpoint: Dict[str, List[KeyPoint]]) -> Tuple[List[KeyPoint], str]:
    if row["id"] in from_golden:
        return from_golden[row["id"]], "golden"
    if row["id"] in from_endpoint:
        return from_endpoint[row["id"]], "endpoint"
    reference = (row.get("reference_answer") or "").strip()
    if reference:
        return [KeyPoint(reference, True)], "reference"
    return [KeyPoint(NOANSWER_POINT, True)], "no-answer"


def _endpoint_key_points(rows: Dict[str, Dict[str, Any]], have: Dict[str, List[KeyPoint]], judge: Any,
                         notes: List[str]) -> Dict[str, List[KeyPoint]]:
    """Key points split by the judge endpoint for the cases whose golden set gives none."""
    from ragmeter.review.keypoints import split_references

    todo = {i: (r.get("question") or "", r["reference_answer"].strip()) for i, r in rows.items()
            if i not in have and (r.get("reference_answer") or "").strip()}
    if not todo:
        return {}
    split, failed = split_references(todo, judge)
    if failed:
        notes.append(f"{failed} of {len(todo)} reference(s) could not be split by the endpoint: one core point "
                     "holding the whole reference")
    return {i: [KeyPoint(text, core) for text, core in points] for i, points in split.items()}


def card_order(ids: List[str], seed: int) -> List[str]:
    """The sheet's order: shuffled by the seed, so the position says nothing about the stratum."""
    from ragmeter.calibration import review_draw

    return sorted(ids, key=lambda i: review_draw(seed, "order:" + i))


def sheet_csv(cards: List[Dict[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(SHEET_COLUMNS)
    for card in cards:
        for number, point in enumerate(card["points"], start=1):
            writer.writerow([to_sheet_cell(card["id"]), number, to_sheet_cell(point.text), 1 if point.core else 0,
                             "", ""])
    return buf.getvalue()


def _passages(row: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The retrieved passages, in rank order; no relevance mark or score (they would hint at the stratum)."""
    return [{"file": c.get("file"), "text": c.get("text")} for c in row.get("retrieved") or [] if c.get("text")]


#: the columns only a reviewer fills in: a row with any of them set is a reviewer's work
_REVIEWER_COLUMNS = ("covered", "correct", "note")


def _filled_rows(sheet: Path) -> Tuple[int, int, bool]:
    """(rows a reviewer filled in, rows, whether the file reads as a sheet) of the review sheet at ``sheet``;
    (0, 0, True) when there is none or it is empty.

    Read leniently (undecodable bytes replaced; ',', or ';' and tabs as Excel writes them; empty rows skipped): this
    only decides whether replacing the file would lose a reviewer's work, and
    :func:`ragmeter.review.importer.read_sheet` is where a sheet is judged. A file without a ``covered`` column is
    not a sheet this export wrote: it is someone's work of another shape."""
    from ragmeter.review.importer import _delimiter

    try:
        text = sheet.read_text(encoding="utf-8-sig", errors="replace")
    except (FileNotFoundError, NotADirectoryError):  # no sheet; an --out that cannot be a folder is refused later
        return 0, 0, True
    except OSError as exc:
        raise InputError(f"{sheet}: cannot read the existing review sheet ({exc.strerror or exc}); nothing "
                         f"written (--out another folder)") from None
    if not text.strip():
        return 0, 0, True
    rows = 0
    filled = 0
    try:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(text))
        header = [h.strip() for h in next(reader, [])]
        if "covered" not in header:
            return 0, 0, False
        columns = [i for i, h in enumerate(header) if h in _REVIEWER_COLUMNS]
        for fields in reader:
            if not any(f.strip() for f in fields):
                continue
            rows += 1
            if any(i < len(fields) and fields[i].strip() for i in columns):
                filled += 1
    except csv.Error:
        # not a sheet export could have written, so it was edited by hand: assume it is a reviewer's
        return 0, 0, False
    return filled, rows, True


def refuse_filled_sheet(out_dir: Path, remedy: str) -> None:
    """Raise :class:`InputError` when ``out_dir/review.csv`` holds a reviewer's verdicts, which an export would
    replace, or is a file of another shape (it may be a reviewer's too); ``remedy`` tells the caller's own way out
    (its flags differ)."""
    filled, sheet_rows, is_sheet = _filled_rows(out_dir / "review.csv")
    if not is_sheet:
        raise InputError(f"{out_dir / 'review.csv'}: not a sheet review export writes (no covered column); it may "
                         f"hold a reviewer's work and would be lost; nothing written ({remedy})")
    if filled:
        raise InputError(f"{out_dir / 'review.csv'}: {filled} of {sheet_rows} rows are already filled in by a "
                         f"reviewer and would be lost; nothing written ({remedy})")


def export_sheet(results_dir: Any, out_dir: Optional[Any] = None, *, random_n: Optional[int] = None,
                 seed: Optional[int] = None, judge: Any = None, force: bool = False) -> Dict[str, Any]:
    """Write the sheet (``review.html``, ``review.csv``, ``manifest.json``) into ``out_dir`` (default
    ``RESULTS_DIR/review``), all or nothing; return the manifest.

    A ``review.csv`` already there that a reviewer has begun to fill in is not replaced (an :class:`InputError`,
    before any key-point call is sent) unless ``force``: a fresh export holds no verdict, so it is replaced."""
    from ragmeter._io import atomic_outputs, strict_json, write_text
    from ragmeter.report.data import load_results
    from ragmeter.review.sampling import require_judged, select_sample
    from ragmeter.review.sheet import render_sheet

    results = load_results(results_dir)
    out = Path(out_dir) if out_dir is not None else results.path / "review"
    if not force:
        refuse_filled_sheet(out, "pass --force to replace it anyway, or --out another folder")
    require_judged(results.cases, results.path)
    if not results.has_answers:  # every card would read "(no answer)", and the reviewer would judge that
        raise InputError(f"{results.path / 'cases.parquet'}: no answers (no answer column, or a run that recorded "
                         "none): a reviewer has no answer to read; nothing written (export from the folder "
                         "`ragmeter eval` wrote from a run with answers)")
    sample = select_sample(results.cases, results.summary, random_n=random_n, seed=seed)
    if not sample.ids:
        raise InputError(f"{results.path}: no case to review (no case with a correctness verdict)")
    notes = list(sample.notes)
    from_golden = golden_key_points(results.summary, notes)
    rows = {str(r["id"]): r for r in results.cases.filter(pl.col("id").cast(pl.Utf8).is_in(sample.ids))
            .with_columns(pl.col("id").cast(pl.Utf8)).iter_rows(named=True)}
    from_endpoint = _endpoint_key_points(rows, from_golden, judge, notes) if judge is not None else {}
    cards: List[Dict[str, Any]] = []
    sources: Dict[str, str] = {}
    for case_id in card_order(sample.ids, sample.seed):
        row = rows[case_id]
        points, sources[case_id] = case_key_points(row, from_golden, from_endpoint)
        cards.append({"id": case_id, "question": row.get("question"), "answer": row.get("answer"),
                      "points": points, "passages": _passages(row)})
    manifest = {
        "sheet_format": SHEET_FORMAT,
        "results": str(results.path),
        "results_sha256": results_hash(results.path),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "seed": sample.seed,
        "random": {"n": sample.random_n, "method": sample.method},
        "population": sample.population,
        "ids": [c["id"] for c in cards],
        "strata": {c["id"]: sample.stratum[c["id"]] for c in cards},
        "key_points": {c["id"]: [{"text": p.text, "core": p.core} for p in c["points"]] for c in cards},  # type: ignore[union-attr]
        "key_point_source": sources,
        "notes": notes,
    }
    with atomic_outputs(out) as tmp:
        write_text(tmp / "review.csv", sheet_csv(cards))
        write_text(tmp / "review.html", render_sheet(cards, title=results.title))
        write_text(tmp / "manifest.json", strict_json(manifest) + "\n")
    manifest["out"] = str(out)
    return manifest
