"""Golden-set audit: balance, blind spots, gap to a target, resolution, evidence against the corpus.

``ragmeter.audit(golden, corpus=None, target=None, ...)`` reads a golden set
with :func:`ragmeter.dataset.load_golden` and returns an :class:`Audit`: Polars
frames for the tables (``by_category``, ``by_source``, ``cross``, ``evidence``),
the warnings, and ``to_dict()``, the object ``ragmeter audit --json`` prints.
See docs/audit.md for a worked example.

Warning codes (stable): ``hard_share_low``, ``source_share_low``,
``empty_cell``, ``source_missing``, ``unlabeled``, ``uncategorised``, ``spelling_variants``, ``duplicate_question``,
``evidence_not_in_corpus``, ``file_not_in_corpus``, ``evidence_in_other_file``.

``ragmeter.audit`` is this module, made callable (``ragmeter.audit(...)``
calls :func:`audit`): importing the submodule would otherwise replace a
function of that name on the package.
"""
from __future__ import annotations

import json
import math
import sys
import types
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import polars as pl

from ragmeter.audit import targets as _targets
from ragmeter._front import arg, option
from ragmeter.errors import InputError

__all__ = ["audit", "Audit", "AuditWarning", "audit_warnings_count", "audit_pointer", "golden_panel", "DEFAULT_HARD", "NO_ANSWER", "DEFAULT_RATE"]

#: Category names counted as hard when neither ``--hard`` nor a ``difficulty`` field says otherwise.
DEFAULT_HARD = ("multi", "multihop", "multi_hop", "multi-hop", "boundary", "edge", "conflict", "contradiction",
                "crossdoc", "cross_doc", "cross-doc", "noanswer", "no_answer", "no-answer", "unanswerable", "negative")
#: Categories whose cases have no answer in the corpus: they need no files or evidence.
NO_ANSWER = ("noanswer", "no_answer", "no-answer", "unanswerable", "negative")
#: The hit/correct rate assumed for the detectable difference when no results are given: the worst case.
DEFAULT_RATE = 0.5
MIN_HARD_SHARE = 0.30
#: A source below this fraction of an even share (1 / number of sources) is under-represented.
SOURCE_SHARE_FACTOR = 0.75
#: Placeholder for a case without a value of the second dimension.
MISSING = "(none)"


@dataclass
class AuditWarning:
    code: str
    message: str
    cases: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return {"code": self.code, "message": self.message, "cases": list(self.cases)}


@dataclass
class Audit:
    """What :func:`audit` found. Frames: ``by_category`` and ``by_source`` (value, n, share, target,
    needed), ``cross`` (category x source counts), ``evidence`` (one row per phrase checked, or None)."""

    golden: str
    n: int
    n_labeled: int
    by: str
    by_category: pl.DataFrame
    by_source: pl.DataFrame
    cross: pl.DataFrame
    hard: Dict[str, Any]
    warnings: List[AuditWarning]
    gap: Optional[Dict[str, Any]]
    target: Optional[Dict[str, Any]]
    resolution: Dict[str, Any]
    corpus: Optional[Dict[str, Any]] = None
    evidence: Optional[pl.DataFrame] = None

    def to_dict(self) -> Dict[str, Any]:
        def shares(frame: pl.DataFrame) -> Dict[str, Any]:
            return {row["value"]: {"n": row["n"], "share": row["share"]} for row in frame.iter_rows(named=True)}

        cats = [c for c in self.cross.columns if c != "category"]
        return {
            "golden": self.golden,
            "n": self.n,
            "n_labeled": self.n_labeled,
            "by": self.by,
            "by_category": shares(self.by_category),
            "by_source": shares(self.by_source),
            "cross": {row["category"]: {s: row[s] for s in cats} for row in self.cross.iter_rows(named=True)},
            "hard": self.hard,
            "warnings": [w.to_dict() for w in self.warnings],
            "gap": self.gap,
            "target": self.target,
            "resolution": self.resolution,
            "corpus": self.corpus,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    def codes(self) -> List[str]:
        return [w.code for w in self.warnings]


def audit(
    golden: Any,
    corpus: Any = None,
    target: Optional[int] = None,
    *,
    targets: Optional[str] = None,
    hard: Optional[Sequence[str]] = None,
    min_hard_share: float = MIN_HARD_SHARE,
    min_source_share: Optional[float] = None,
    by: str = "source",
    rate: Optional[float] = None,
    results: Any = None,
) -> Audit:
    """Audit a golden set (a JSONL path, a list of dicts or a DataFrame, as :func:`load_golden` takes).

    ``corpus``: a chunk export (JSONL/Parquet with file, chunk_id, text) or a folder of text/Markdown
    files, to check every evidence phrase against. ``target``/``targets``: the size to grow to, or a spec
    (see :mod:`ragmeter.audit.targets`). ``hard``: the hard categories (default: a ``difficulty`` field,
    else :data:`DEFAULT_HARD`). ``min_source_share``: default 75% of an even share. ``rate``: the hit or
    correct rate for the detectable difference; ``results``: a results folder to take the observed rates
    from (default rate: 0.5, the worst case). Raises :class:`InputError` for bad input.
    """
    from ragmeter._args import check_arg
    from ragmeter.dataset import load_golden, reusing_golden_loads

    target = check_arg("target", target, "int", low=1, high=_targets.MAX_TARGET, optional=True)
    min_hard_share = check_arg("min_hard_share", min_hard_share, "number", low=0, high=1)
    min_source_share = check_arg("min_source_share", min_source_share, "number", low=0, high=1, optional=True)
    rate = check_arg("rate", rate, "number", low=0, high=1, optional=True)
    hard = check_arg("hard", hard, "texts", optional=True)
    by = check_arg("by", by, "text")
    if by in ("category", "id", "question"):  # the first dimension itself, or one value per case: no cross table
        raise InputError(f"{_by(by)}: the second dimension must be another field than the category and one that "
                         "cases share (source, platform, ...)")
    label = str(golden) if isinstance(golden, (str, Path)) else "golden"
    with reusing_golden_loads():  # the fields the frame does not keep come from the same parse
        frame = load_golden(golden)
        _require_categories(frame, label)
        extra = _extra_fields(golden, frame, [f for f in ("difficulty", by) if f not in frame.columns])
    second = _second_dimension(frame, extra, by, label)
    hard_flags, hard_rule = _hard_flags(frame, extra, hard)
    frame = frame.with_columns(pl.Series("_by", second, dtype=pl.String), pl.Series("_hard", hard_flags, dtype=pl.Boolean))

    n = frame.height
    if target is not None and target < n:  # a size to grow to: a smaller one plans nothing and reads as a gap
        raise InputError(f"{option('target', target)}: the golden set already has {n} cases (the target is the size to grow "
                         "it to)")
    cat_counts = _counts(frame["category"])
    src_counts = _counts(frame["_by"])
    named_sources = {k: v for k, v in src_counts.items() if k != MISSING}
    spec, total, cat_target, src_target = _plan(targets, target, by, cat_counts, named_sources, frame.height)
    rates = _rates(rate, results)  # before the corpus check: a bad folder fails fast

    warnings: List[AuditWarning] = []
    hard_info = _hard_summary(frame, hard_rule, min_hard_share)
    if hard_info["share"] < min_hard_share:
        warnings.append(AuditWarning("hard_share_low", _hard_message(hard_info), []))
    source_floor = min_source_share if min_source_share is not None else (SOURCE_SHARE_FACTOR / len(named_sources) if named_sources else 0.0)
    warnings += _source_warnings(named_sources, sum(named_sources.values()), source_floor, by,
                                 min_source_share is None, n)
    warnings += _source_missing(frame, by, len(named_sources))
    cross = _cross(frame, list(cat_counts), list(named_sources))
    warnings += _empty_cells(cross, by)
    warnings += _unlabeled(frame)
    warnings += _uncategorised(frame)
    warnings += _spelling_variants(frame, "category", "category")
    warnings += _spelling_variants(frame.filter(pl.col("_by") != MISSING), "_by", by)
    warnings += _duplicates(frame)

    corpus_info = evidence = None
    if corpus is not None:
        from ragmeter.audit.corpus import check_corpus

        check = check_corpus(frame, corpus)
        warnings += check.warnings
        corpus_info, evidence = check.summary, check.phrases

    gap_dict = target_dict = None
    if cat_target is not None or src_target is not None:
        cat_gap = _targets.gap(cat_counts, cat_target)
        src_gap = _targets.gap(named_sources, src_target)
        need = max(sum(cat_gap.values()), sum(src_gap.values()), (total or 0) - n)
        gap_dict = {"category": cat_gap, "source": src_gap, "total": need}
        target_dict = _target_summary(total, cat_target, src_target, cat_counts, named_sources, frame, hard_rule, spec)

    return Audit(
        golden=label, n=n, n_labeled=int(frame["labeled"].sum()), by=by,
        by_category=_share_frame(cat_counts, n, cat_target),
        by_source=_share_frame(src_counts, n, src_target),
        cross=cross, hard=hard_info, warnings=warnings, gap=gap_dict, target=target_dict,
        resolution=_resolution(n, target_dict["n"] if target_dict else None, rates),
        corpus=corpus_info, evidence=evidence,
    )


def audit_warnings_count(golden: Any, **options: Any) -> int:
    """How many audit warnings ``golden`` raises without a corpus (for a one-line pointer in other commands)."""
    return len(audit(golden, **options).warnings)


def audit_pointer(golden: Any, shown_as: Optional[str] = None) -> Optional[str]:
    """The line ``eval`` and ``score`` can print when the golden set would raise audit warnings:
    ``3 audit warnings (hard_share_low, empty_cell): ragmeter audit --golden G``; None when there is
    none, or when the golden set cannot be audited (the command itself reports bad input)."""
    try:
        found = audit(golden).warnings
    except InputError:
        return None
    name = shown_as or (str(golden) if isinstance(golden, (str, Path)) else "G")
    return pointer_line([w.code for w in found], name)


def pointer_line(codes: List[str], golden_name: str) -> Optional[str]:
    """The pointer's text for warnings already found (``summary["golden_set"]`` of a results folder holds them,
    so ``eval`` need not audit the golden set a second time); None when there is none."""
    if not codes:
        return None
    import shlex

    kinds = ", ".join(dict.fromkeys(codes))
    return (f"{len(codes)} audit warning{'s' if len(codes) != 1 else ''} ({kinds}): "
            f"ragmeter audit --golden {shlex.quote(golden_name)}")


def golden_panel(golden: Any) -> Dict[str, Any]:
    """What a report's compact "golden set" panel shows: size, distributions, hard share, warnings."""
    d = audit(golden).to_dict()
    return {key: d[key] for key in ("n", "n_labeled", "by", "by_category", "by_source", "cross", "hard", "warnings")}


# --------------------------------------------------------------------------- inputs


def _require_categories(frame: pl.DataFrame, label: str) -> None:
    """Without a ``category`` field, load_golden falls back to the id's prefix; ids without one leave every
    case its own category, which is no classification at all."""
    from ragmeter.dataset import UNCATEGORISED

    # ids made from line numbers carry no prefix either: every case lands in 'uncategorised'
    unnamed = "id_from_line" in frame.columns and bool(frame["id_from_line"].fill_null(False).all()) and \
        bool((frame["category"] == UNCATEGORISED).all())
    if frame.height > 1 and (unnamed or (frame["category"] == frame["id"]).all()):
        raise InputError(f"{label}: no categories: give each case a 'category' (or ids with a prefix, e.g. 'term-01')")


def _extra_fields(golden: Any, frame: pl.DataFrame, names: List[str]) -> Dict[str, List[Any]]:
    """Fields load_golden does not keep (``difficulty``, a ``--by`` field), aligned with ``frame``'s rows."""
    if not names:
        return {}
    from ragmeter.dataset import golden_fields

    return golden_fields(golden, frame, names)


def _by(by: str) -> str:
    """The ``by`` option with its value: ``by='source'`` in Python, ``--by source`` on the command line."""
    return option("by", repr(by), flag=f"--by {by}")


def _second_dimension(frame: pl.DataFrame, extra: Dict[str, List[Any]], by: str, label: str) -> List[str]:
    if by in frame.columns and frame.schema[by] == pl.String:  # one expression instead of a loop over the cases
        from ragmeter.dataset import _PY_WHITESPACE

        column = pl.col(by)
        out = frame.select(pl.when(column.is_null() | (column.str.strip_chars(_PY_WHITESPACE) == "")).then(pl.lit(MISSING))
                           .otherwise(column).alias(by))[by]
        if by != "source" and (out == MISSING).all():
            raise InputError(f"{label}: {_by(by)}: no case has a {by!r} field")
        return out.to_list()
    if by in frame.columns:
        values = frame[by].to_list()
    else:
        values = extra[by]
    out = []
    for case_id, value in zip(frame["id"].to_list(), values):
        if isinstance(value, (list, tuple, dict)):
            raise InputError(f"{label}: case {case_id!r}: field {by!r} must be a string to count by, got a {type(value).__name__}")
        blank = value is None or (isinstance(value, float) and math.isnan(value)) or str(value).strip() == ""
        out.append(MISSING if blank else str(value))  # NaN: a cell a pandas export left empty
    if by != "source" and all(v == MISSING for v in out):
        raise InputError(f"{label}: {_by(by)}: no case has a {by!r} field")
    return out


def _hard_flags(frame: pl.DataFrame, extra: Dict[str, List[Any]], hard: Optional[Sequence[str]]) -> Tuple[List[bool], Dict[str, Any]]:
    cats = frame["category"].to_list()
    if hard is not None:
        names = [h.strip() for h in hard if h.strip()]
        if not names:
            raise InputError(f"{arg('hard')}: name at least one category")
        wanted = {h.casefold() for h in names}
        flags = [c.casefold() in wanted for c in cats]
        if cats and not any(flags):  # a typo, not a plan: every case would count as easy
            seen = list(dict.fromkeys(cats))
            raise InputError(f"{arg('hard')}: no category of the golden set is named {', '.join(map(repr, names))} "
                             f"(it has {', '.join(seen[:8])}{', ...' if len(seen) > 8 else ''})")
        present = {c.casefold() for c in cats}
        return flags, {"rule": "--hard", "names": names,
                       "unmatched": [h for h in names if h.casefold() not in present]}
    difficulty = extra.get("difficulty") or (frame["difficulty"].to_list() if "difficulty" in frame.columns else None)
    # a cell nobody filled in (null, NaN from a pandas export, blank) is no label: an empty column keeps the default
    given = [d is not None and not (isinstance(d, float) and math.isnan(d)) and not (isinstance(d, str) and not d.strip())
             for d in difficulty or []]
    if any(given):
        return ([isinstance(d, str) and d.strip().casefold() == "hard" for d in difficulty or []],
                {"rule": "difficulty", "names": ["hard"], "n_difficulty": sum(given)})
    wanted = set(DEFAULT_HARD)
    return [c.casefold() in wanted for c in cats], {"rule": "default", "names": list(DEFAULT_HARD)}


def _counts(series: pl.Series) -> Dict[str, int]:
    """Counts in order of first appearance."""
    counted = series.to_frame("value").group_by("value", maintain_order=True).len()
    return dict(zip(counted["value"].to_list(), counted["len"].to_list()))


def _share_frame(counts: Dict[str, int], n: int, target: Optional[Dict[str, int]]) -> pl.DataFrame:
    keys = list(counts) + [k for k in (target or {}) if k not in counts]
    return pl.DataFrame(
        {
            "value": keys,
            "n": [counts.get(k, 0) for k in keys],
            "share": [round(counts.get(k, 0) / n, 4) if n else None for k in keys],
            "target": [target.get(k) if target else None for k in keys],
            "needed": [max(0, target[k] - counts.get(k, 0)) if target and k in target else None for k in keys],
        },
        schema={"value": pl.String, "n": pl.Int64, "share": pl.Float64, "target": pl.Int64, "needed": pl.Int64},
    )


# --------------------------------------------------------------------------- warnings


def _hard_summary(frame: pl.DataFrame, rule: Dict[str, Any], min_share: float) -> Dict[str, Any]:
    flags = frame["_hard"]
    n_hard = int(flags.sum())
    counted = list(dict.fromkeys(frame.filter(pl.col("_hard"))["category"].to_list()))
    out = {"rule": rule["rule"], "names": rule["names"], "categories": counted, "n": n_hard, "n_total": frame.height,
           "share": round(n_hard / frame.height, 4), "min_share": min_share}
    if "n_difficulty" in rule:  # the cases with a difficulty label: the others count as not hard
        out["n_difficulty"] = rule["n_difficulty"]
    if rule.get("unmatched"):  # a typo among --hard names: said, not dropped
        out["unmatched"] = rule["unmatched"]
    return out


def hard_rule_text(info: Dict[str, Any]) -> str:
    """How the hard cases were found, as the terminal and the warning say it."""
    how = {"--hard": "--hard", "difficulty": "difficulty = hard", "default": "default list"}[info["rule"]]
    if info["rule"] == "difficulty" and info.get("n_difficulty", info["n_total"]) < info["n_total"]:
        how += f", given for {info['n_difficulty']}/{info['n_total']} cases"
    if info.get("unmatched"):
        how += f"; no category named {', '.join(map(repr, info['unmatched']))}"
    return how


def _hard_message(info: Dict[str, Any]) -> str:
    which = ", ".join(info["categories"]) or "none of " + ", ".join(info["names"][:6]) + (
        ", ..." if len(info["names"]) > 6 else "")
    how = hard_rule_text(info)
    return (f"hard cases only {100 * info['share']:.1f}% ({info['n']}/{info['n_total']}; {which}; {how}), "
            f"under {100 * info['min_share']:.0f}%: a ceiling effect, variants tie on the easy cases "
            "and differences drown in noise")


def _source_warnings(counts: Dict[str, int], n: int, floor: float, by: str, default_floor: bool,
                     n_all: int) -> List[AuditWarning]:
    """Sources under the floor, as shares of the ``n`` cases that have one (those without are source_missing)."""
    if len(counts) < 2:
        return []
    why = f"75% of an even share of {len(counts)}" if default_floor else "--min-source-share"
    over = f"{n} with a {by}" if n < n_all else f"{n}"
    return [
        AuditWarning("source_share_low",
                     f"{by} {key} only {100 * c / n:.1f}% ({c}/{over}), under {100 * floor:.1f}% ({why}): "
                     "scores do not represent it", [])
        for key, c in counts.items() if c / n < floor
    ]


def _source_missing(frame: pl.DataFrame, by: str, n_named: int) -> List[AuditWarning]:
    """Cases without a value of the second dimension when others have one: the shares do not cover them."""
    if not n_named:
        return []
    ids = frame.filter(pl.col("_by") == MISSING)["id"].to_list()
    if not ids:
        return []
    return [AuditWarning("source_missing", f"{len(ids)} of {frame.height} cases have no {by}: the {by} balance and "
                         f"the category x {by} table do not cover them: {_few(ids)}", ids)]


def _cross(frame: pl.DataFrame, cats: List[str], sources: List[str]) -> pl.DataFrame:
    counted = frame.group_by("category", "_by").len()
    cells = {(c, s): n for c, s, n in counted.iter_rows()}
    data: Dict[str, Any] = {"category": cats}
    for s in sources:
        data[s] = [cells.get((c, s), 0) for c in cats]
    return pl.DataFrame(data, schema={"category": pl.String, **{s: pl.Int64 for s in sources}})


def _empty_cells(cross: pl.DataFrame, by: str) -> List[AuditWarning]:
    sources = [c for c in cross.columns if c != "category"]
    if len(sources) < 2:
        return []
    out = []
    for s in sources:
        for cat, count in zip(cross["category"].to_list(), cross[s].to_list()):
            if count == 0:
                out.append(AuditWarning("empty_cell", f"{by} {s} has no {cat} case: a structural blind spot", []))
    return out


def _unlabeled(frame: pl.DataFrame) -> List[AuditWarning]:
    rows = frame.filter(~pl.col("labeled") & ~pl.col("category").str.to_lowercase().is_in(list(NO_ANSWER)))
    if rows.height == 0:
        return []
    ids = rows["id"].to_list()
    return [AuditWarning("unlabeled", f"{len(ids)} answerable case(s) with neither expected files nor evidence "
                         f"(never scored): {_few(ids)}", ids)]


def _uncategorised(frame: pl.DataFrame) -> List[AuditWarning]:
    """Cases without a category whose id has no prefix: each became a category of its own (the id); in a set
    without ids (numbered by line), they are counted under ``uncategorised``."""
    from ragmeter.dataset import UNCATEGORISED

    if "id_from_line" in frame.columns and frame["id_from_line"].any():
        alone = frame.filter(pl.col("id_from_line") & (pl.col("category") == UNCATEGORISED))
        how = f"counted under {UNCATEGORISED!r}"
    else:
        alone = frame.filter((pl.col("category") == pl.col("id")) & ~pl.col("id").str.contains("-", literal=True))
        how = "each counted as a category of its own (its id, which has no prefix)"
    if not alone.height or alone.height == frame.height:  # all of them: no category to tell them from
        return []
    ids = alone["id"].to_list()
    return [AuditWarning("uncategorised", f"{len(ids)} case(s) without a category, {how}: {_few(ids)}", ids)]


def _spelling_key(name: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", name).casefold().split())


def _spelling_variants(frame: pl.DataFrame, column: str, label: str) -> List[AuditWarning]:
    """Values that differ only by case, width or white space ('term', 'Term', 'term ', full-width 'ｔｅｒｍ'): one
    value written several ways, which every count (and scoring) splits."""
    counts = _counts(frame[column])
    groups: Dict[str, List[str]] = {}
    for name in counts:
        groups.setdefault(_spelling_key(name), []).append(name)
    out = []
    for names in groups.values():
        if len(names) < 2:
            continue
        names = sorted(names, key=lambda v: -counts[v])  # stable: ties keep their first appearance
        others = set(names[1:])
        ids = frame.filter(pl.col(column).is_in(list(others)))["id"].to_list()
        spelled = ", ".join(f"{name!r} ({counts[name]})" for name in names)
        out.append(AuditWarning(
            "spelling_variants",
            f"{label} {names[0]!r} is written {len(names)} ways, differing only by case, width or white space: "
            f"{spelled}; each is counted (and scored) as a {label} of its own: {_few(ids)}", ids))
    return out


#: ASCII's punctuation, symbols and separators (general categories P*, S*, Z*), for bytes.translate
_ASCII_PSZ = bytes(c for c in range(128) if unicodedata.category(chr(c))[0] in "PSZ")


def _question_keys(questions: List[str]) -> List[str]:
    """Each question normalised, without punctuation, symbols and separators: what two cases asking the same
    question share. One loop over the column (a call per question cost 0.5 s of a 100,000-case audit)."""
    from ragmeter._core import evidence_normalize

    keys = [evidence_normalize(q) for q in questions]  # ragmeter.evidence.normalize, without its Python frame
    # most questions: one C call (bytes.translate) instead of a category lookup per character
    return [k.encode().translate(None, _ASCII_PSZ).decode() if k.isascii()
            else "".join(ch for ch in k if unicodedata.category(ch)[0] not in "PSZ") for k in keys]


def _duplicates(frame: pl.DataFrame) -> List[AuditWarning]:
    keys = pl.Series("key", _question_keys(frame["question"].to_list()), dtype=pl.String)
    groups = (frame.select("id").with_columns(keys).filter(pl.col("key") != "")
              .group_by("key", maintain_order=True).agg("id").filter(pl.col("id").list.len() > 1))
    return [AuditWarning("duplicate_question", f"{len(ids)} cases ask the same question (after normalising case, "
                         f"width, white space and punctuation): {_few(ids)}", ids)
            for ids in groups["id"].to_list()]


def _few(ids: List[str], limit: int = 5) -> str:
    return ", ".join(ids[:limit]) + (f", ... ({len(ids) - limit} more)" if len(ids) > limit else "")


# --------------------------------------------------------------------------- target and resolution


def _target_summary(total: Optional[int], cat_target: Optional[Dict[str, int]], src_target: Optional[Dict[str, int]],
                    cat_counts: Dict[str, int], src_counts: Dict[str, int], frame: pl.DataFrame,
                    hard_rule: Dict[str, Any], spec: Dict[str, Any]) -> Dict[str, Any]:
    """The set once the gap is filled: sizes, shares and the hard share after."""
    after_cat = {k: max(cat_counts.get(k, 0), (cat_target or {}).get(k, 0)) for k in list(cat_counts) + list(cat_target or {})}
    size = max(total or 0, sum(after_cat.values()))
    hard_after: Optional[float] = None
    if hard_rule["rule"] != "difficulty":  # a difficulty label belongs to cases not yet written
        wanted = {h.casefold() for h in hard_rule["names"]}
        hard_after = round(sum(v for k, v in after_cat.items() if k.casefold() in wanted) / size, 4) if size else None
    return {"n": total or size, "n_after": size, "from": "spec" if spec else "even", "category": cat_target or {},
            "source": src_target or {}, "hard_share": hard_after}


def _plan(targets: Optional[str], target: Optional[int], by: str, cat_counts: Dict[str, int],
          src_counts: Dict[str, int], n: int) -> Tuple[Dict[str, Any], Optional[int], Optional[Dict[str, int]], Optional[Dict[str, int]]]:
    """The spec, the target size and the per-value targets of both dimensions (None: no target). Without
    ``--target``, the size is the set's once each section's gap is filled (cases are written, never removed:
    a value set below its count, or a section for a dimension few cases have, never plans a smaller set)."""
    spec: _targets.Spec = {}
    if targets is not None:
        spec = _targets.parse_targets(targets, ["category", by] + (["source"] if by != "source" else []))
        if by != "source" and "source" in spec:
            spec[by] = spec.pop("source")
        _targets.check_known(spec, {"category": cat_counts, by: src_counts})
    total = target
    cat_target = _targets.targets_for(cat_counts, spec.get("category"), total)
    src_target = _targets.targets_for(src_counts, spec.get(by), total)
    if total is None and spec:
        total = max([n] + [n + sum(_targets.gap(counts, t).values())
                           for counts, t in ((cat_counts, cat_target), (src_counts, src_target)) if t])
        cat_target = cat_target or _targets.even_targets(cat_counts, total)
        src_target = src_target or _targets.even_targets(src_counts, total)
    return spec, total, cat_target, src_target


def _rates(rate: Optional[float], results: Any) -> Tuple[Dict[str, float], str, Dict[str, Dict[str, int]]]:
    """The rates, where they come from and, for observed ones, the cases each rests on (scored / all)."""
    if results is not None:
        from ragmeter.report.data import load_results

        cases = load_results(results).cases
        observed: Dict[str, float] = {}
        counts: Dict[str, Dict[str, int]] = {}
        for metric in ("hit", "correct"):
            if metric in cases.columns:
                values = cases[metric].drop_nulls().cast(pl.Float64)
                if values.len():
                    observed[metric] = float(values.sum()) / values.len()
                    counts[metric] = {"n_scored": values.len(), "n_total": cases.height}
        if observed:
            return observed, f"observed in {results}", counts
        raise InputError(f"{results}: no scored hit or correct column to take the rates from")
    if rate is not None:
        return {"rate": rate}, "--rate", {}
    return {"rate": DEFAULT_RATE}, "assumed (worst case)", {}


def _resolution(n: int, target_n: Optional[int],
                observed: Tuple[Dict[str, float], str, Dict[str, Dict[str, int]]]) -> Dict[str, Any]:
    """One case in points, and the minimum detectable difference of a paired comparison.

    Two variants with the same rate p whose per-case outcomes are independent disagree on a share
    p_d = 2 p (1 - p) of the cases; compare's definition (ragmeter.stats.min_detectable_difference_proportion)
    then gives MDD = max(2.80 sqrt(p_d / n), 7.85 / n). Variants of one system agree more often than
    independent ones, so this is an upper bound; ``compare`` reports the MDD at the observed discordance.
    """
    rates, origin, rate_counts = observed

    def at(size: int) -> Dict[str, Any]:
        mde = {name: _mde_pp(size, p) for name, p in rates.items()}
        primary = mde.get("correct", mde.get("hit", mde.get("rate")))
        # mde_reason is null beside a number: the same keys for every golden set, for scripts reading them
        out: Dict[str, Any] = {"n": size, "points_per_case": round(100 / size, 2), "mde_pp": primary,
                               "mde_reason": None}
        if primary is None:
            out["mde_reason"] = (f"at n={size} no difference is detectable: a paired test would need one of over "
                                 "100 points")
        if len(mde) > 1 or "rate" not in mde:
            out["mde_pp_by_metric"] = mde
        return out

    out = at(n)
    if rate_counts:
        out["rates_n"] = rate_counts
    out.update({"rates": {k: round(v, 4) for k, v in rates.items()}, "rate_source": origin,
                "alpha": 0.05, "power": 0.8, "discordance": "2p(1-p): independent outcomes at the same rate (upper bound)"})
    out["target"] = at(target_n) if target_n else None
    return out


def _mde_pp(n: int, p: float) -> Optional[float]:
    from ragmeter import stats

    value = stats.min_detectable_difference_proportion(n, 2 * p * (1 - p))
    # over 100 points is no difference of two rates: none is detectable (None, the reason beside it)
    return None if value is None or math.isnan(value) or value > 1 else round(100 * value, 1)


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Audit:
        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
