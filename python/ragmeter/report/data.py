"""Reading a results directory and computing the aggregates the reports show.

A results directory (written by ``ragmeter eval`` / ``ragmeter score --out``) holds

* ``cases.parquet`` (required): one row per case, the retrieval columns of the
  scorer (``id``, ``category``, ``labeled``, ``hit``, ``reciprocal_rank``, ...)
  joined with the judge columns (``correct``, ``correctness_score``,
  ``faithfulness_score``, ... and ``<metric>_status``), the run's ``answer``, and
  the chunks as ``retrieved``: list of struct{file, chunk_id, text, score, relevant};
* ``summary.json`` (required): tool version, input hashes, settings, timestamps;
* ``judge.parquet`` (optional): one row per case x metric with ``reason`` etc.;
* ``sweep.parquet`` (optional): a threshold sweep table.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import polars as pl

from ragmeter._magic import HEAD_BYTES, binary_kind
from ragmeter.errors import InputError

__all__ = [
    "METRICS",
    "NO_ANSWERS",
    "RESULTS_FORMAT",
    "Results",
    "load_results",
    "metric_frame",
    "metric_label",
    "not_judged_metrics",
    "judge_failures",
    "compute_aggregates",
    "more_categories_line",
    "settings_items",
    "settings_texts",
]

#: results-folder format understood by this version; summary.json may carry
#: ``results_format``; a different value means another version wrote the folder
RESULTS_FORMAT = 1

REQUIRED_CASE_COLUMNS = ["id", "category", "labeled", "hit"]

JUDGE_METRICS = ["correctness", "faithfulness", "answer_relevancy", "context_precision", "context_recall"]


@dataclass(frozen=True)
class Metric:
    name: str
    column: str
    kind: str  # "rate" (boolean, shown in %) or "score" (0-1 unless noted)
    label: str
    status: Optional[str] = None  # judge status column gating the value
    scope: Optional[str] = None  # the cases it applies to (n_total), see ragmeter.retrieval.scope_filter
    rubric: Optional[Tuple[int, int]] = None  # a custom rubric's own scale (its score is mapped onto 0-1)


#: metric name (as used in compare / gate rules) -> definition
METRICS: Dict[str, Metric] = {
    m.name: m
    for m in [
        Metric("hit", "hit", "rate", "Hit@k (chunk)"),
        Metric("mrr", "reciprocal_rank", "score", "MRR"),
        Metric("map", "average_precision", "score", "MAP"),
        Metric("ndcg", "ndcg", "score", "NDCG"),
        Metric("precision", "precision", "score", "Precision@k"),
        Metric("file_hit", "file_hit", "rate", "Hit@k (file)"),
        Metric("all_files_hit", "all_files_hit", "rate", "All files hit", scope="multi_file"),
        Metric("evidence_recall", "evidence_recall", "score", "Evidence recall"),
        Metric("correct", "answer_correct", "rate", "Correct", "correctness_status"),
        Metric("correctness", "correctness_score", "score", "Correctness score", "correctness_status"),
        Metric("faithfulness", "faithfulness_score", "score", "Faithfulness", "faithfulness_status"),
        Metric("answer_relevancy", "answer_relevancy_score", "score", "Answer relevancy", "answer_relevancy_status"),
        Metric("context_precision", "context_precision_score", "score", "Context precision", "context_precision_status"),
        Metric("context_recall", "context_recall_score", "score", "Context recall", "context_recall_status"),
        Metric("refusal", "refusal", "rate", "Refusal rate (answerable questions)", scope="answerable"),
    ]
}

#: the measures compare and gate rules know without any custom metric (METRICS grows with the custom ones)
BUILTIN_MEASURES = frozenset(METRICS)


def register_custom_metrics(columns: Any, summary: Optional[Dict[str, Any]] = None) -> List[str]:
    """Add the custom judge metrics of a cases table (a ``<name>_score`` column with its ``<name>_status``) to
    :data:`METRICS`, so that reports, compare and gate rules treat them like the built-in ones; return their
    names. ``columns``: a frame, a schema or column names; ``summary`` (summary.json's), when given, tells each
    rubric's own scale (:func:`rubric_reading`)."""
    names = list(getattr(columns, "columns", None) or columns)
    added = []
    for col in names:
        if not col.endswith("_status"):
            continue
        name = col[: -len("_status")]
        if name in METRICS or f"{name}_score" not in names:
            continue
        METRICS[name] = Metric(name, f"{name}_score", "score", name.replace("_", " ").capitalize(), col)
        added.append(name)
    _register_rubric_scales(summary)
    return added


def _register_rubric_scales(summary: Optional[Dict[str, Any]]) -> None:
    """Record on each custom metric of :data:`METRICS` the rubric scale summary.json states for it: its
    ``rubric_scale`` (``{"min": 1, "max": 5}``), or in a folder written before that key, the display text of its
    ``scale`` (``"0-1 (rubric 1-5)"``)."""
    import dataclasses

    judge = summary.get("judge") if isinstance(summary, dict) else None
    metrics = judge.get("metrics") if isinstance(judge, dict) else None
    for name, entry in (metrics.items() if isinstance(metrics, dict) else ()):
        scale = _stated_rubric_scale(entry)
        if scale is not None and name in METRICS and name not in BUILTIN_MEASURES:
            METRICS[name] = dataclasses.replace(METRICS[name], rubric=scale)


def _stated_rubric_scale(entry: Any) -> Optional[Tuple[int, int]]:
    """(low, high) of a summary.json judge metric entry's rubric: ``rubric_scale`` when it holds two integers
    low < high, else parsed from ``scale`` (folders written before ``rubric_scale``); None for no rubric."""
    import re

    if not isinstance(entry, dict):
        return None
    stated = entry.get("rubric_scale")
    low, high = (stated.get("min"), stated.get("max")) if isinstance(stated, dict) else (None, None)
    if isinstance(low, int) and isinstance(high, int) and not isinstance(low, bool) and not isinstance(high, bool) \
            and low < high:
        return low, high
    found = re.fullmatch(r"0-1 \(rubric (-?\d+)-(-?\d+)\)", str(entry.get("scale") or ""))
    return (int(found.group(1)), int(found.group(2))) if found else None


def rubric_reading(name: str, number: float) -> Optional[Tuple[float, str]]:
    """A plain number a rule gives a custom rubric metric, read on the rubric's own scale: (the 0-1 value it
    means, why), e.g. ``tone_check>=4`` on a 1-5 rubric -> (0.75, "4 on the rubric's 1-5 scale ..."); None when
    the metric is no rubric or the number is off its scale."""
    metric = METRICS.get(name)
    if metric is None or metric.rubric is None or not metric.rubric[0] <= number <= metric.rubric[1]:
        return None
    lo, hi = metric.rubric
    return round((number - lo) / (hi - lo), 6), (f"{number:g} on the rubric's {lo}-{hi} scale; its score is mapped "
                                                  "onto 0-1 as (s - low) / (high - low)")


def register_folder_metrics(*folders: Any) -> None:
    """:func:`register_custom_metrics` from the cases.parquet schema and summary.json of results folders (nothing
    else is read; a folder that cannot be read is left for :func:`load_results` to report). summary.json is read
    as :func:`load_results` reads it (a byte-order mark or UTF-16 included)."""
    from ragmeter._sniff import json_document

    for folder in folders:
        try:
            summary_path = Path(folder) / "summary.json"
            summary = json_document(summary_path, summary_path.read_bytes(), rewrite_advice(restore=True))
            register_custom_metrics(list(pl.read_parquet_schema(Path(folder) / "cases.parquet")), summary)
        except Exception:  # noqa: BLE001 - load_results says what is wrong with the folder
            continue


@dataclass
class Results:
    path: Path
    cases: pl.DataFrame  # diagnosed
    summary: Dict[str, Any]
    judge: Optional[pl.DataFrame] = None
    sweep: Optional[pl.DataFrame] = None
    #: warnings found while reading the folder (structured, see :mod:`ragmeter._warnings`)
    warnings: List[Dict[str, Any]] = field(default_factory=list)
    name: Optional[str] = None

    @property
    def title(self) -> str:
        return str(self.summary.get("name") or self.name or self.path.name)

    @property
    def has_answers(self) -> bool:
        """Whether the folder holds the run's answers (``ragmeter score`` scores retrieval only and reads none):
        without them the answer-based readings are shown only from what eval stored per case
        (:meth:`unmeasured_for_answers`), never empty. An ``answer`` column of a run that recorded no answer
        (:func:`ragmeter.diagnosis.answers_recorded`) holds none either."""
        from ragmeter.diagnosis import answers_recorded

        return answers_recorded(self.cases)

    @property
    def refusals_measured(self) -> bool:
        """Whether the refusal readings can be shown: the answers, or eval's per-case refusal read from them."""
        return "refusal" not in self.unmeasured_for_answers()

    def aggregated_cases(self) -> pl.DataFrame:
        """The cases whose metrics the reports aggregate: without answers, not the answer-based ones, which would
        only be null (:meth:`unmeasured_for_answers`). The judge's verdicts (``correct``) still make ``Correct``."""
        return self.cases.drop(self.unmeasured_for_answers(), strict=False)

    def unmeasured_for_answers(self) -> List[str]:
        """Columns of answer-based metrics this folder cannot measure because it holds no answers: ``refusal`` and
        ``answer_correct`` when no case has a value (``ragmeter eval`` stores both, read from the answers), the
        second unless a judge's verdicts say what was correct (a failed call is not a missing answer)."""
        if self.has_answers:
            return []
        empty = [c for c in ("refusal", "answer_correct")
                 if c not in self.cases.columns or self.cases.get_column(c).null_count() == self.cases.height]
        return [c for c in empty if not (c == "answer_correct" and correctness_judged(self.cases))]

    @property
    def judged(self) -> bool:
        """Whether any judge metric was run (an unjudged run says "not judged", never 0)."""
        return self.judge is not None or any(f"{m}_score" in self.cases.columns for m in JUDGE_METRICS)


#: what the reports say instead of the answer-based readings of a folder without answers
NO_ANSWERS_SHORT = "no answers in this folder"
NO_ANSWERS = f"{NO_ANSWERS_SHORT} (retrieval scored only, e.g. by `ragmeter score`)"

#: diagnosis columns written into cases.parquet by ``ragmeter eval`` (read as they are when all present)
DIAGNOSIS_COLUMNS = ["is_noanswer", "refusal", "answer_correct", "diagnosis", "quadrant", "faithfulness_band"]

#: columns read as true/false (filters, ``~``, rates) besides the rate metrics
FLAG_COLUMNS = ["labeled", "correct", "is_noanswer", "empty_retrieval", "missing_from_run"]
#: columns read as text (string functions, ``== "ok"``) besides the judge status columns
TEXT_COLUMNS = ["question", "answer", "reference_answer", "diagnosis", "quadrant", "faithfulness_band"]


#: columns read as numbers (percentiles, comparisons) besides the score metrics
NUMBER_COLUMNS = ["latency_ms", "n_expected_files", "n_retrieved", "first_relevant_rank"]
#: columns read as labels (grouped, shown): text, or numbers read as text
LABEL_COLUMNS = ["category", "retrieval_mode"]


#: the columns of judge.parquet and sweep.parquet the reports read, and the type each is read as
JUDGE_COLUMN_TYPES: Dict[str, str] = {
    "id": "a text or number", "metric": "String", "status": "String", "error_kind": "String", "reason": "String",
    "error": "String", "score": "a number", "correct": "Boolean", "cost_usd": "a number", "latency_ms": "a number",
    "repeat": "a number",
}
SWEEP_COLUMN_TYPES: Dict[str, str] = {
    "threshold": "a number", "category": "a text or number",
    **{c: "a number" for c in ("hit_rate", "hit", "mrr", "MRR", "empty_retrievals", "empty", "mean_kept",
                               "mean_chunks_kept", "n_scored", "n_total")},
}


def _case_column_types() -> Dict[str, str]:
    """The columns of cases.parquet the reports, compare and the diagnosis read, and the type each is read as."""
    expected: Dict[str, str] = {c: "Boolean" for c in FLAG_COLUMNS}
    expected.update((c, "String") for c in TEXT_COLUMNS)
    for m in METRICS.values():
        expected[m.column] = "Boolean" if m.kind == "rate" else "a number"
        if m.status:
            expected[m.status] = "String"
    expected.update((c, "a number") for c in NUMBER_COLUMNS)
    expected.update((c, "a text or number") for c in LABEL_COLUMNS)
    return expected


def _type_problems(frame: pl.DataFrame, expected: Optional[Dict[str, str]] = None) -> List[str]:
    """``"<column> is <type>, expected <type>"`` for every known column whose type the reports, compare and
    the diagnosis cannot use (a string ``hit`` fails deep inside a cast); unknown columns are not checked.
    ``expected``: column -> type (default: the cases table's)."""
    expected = _case_column_types() if expected is None else expected
    ok: Dict[str, Callable[[Any], bool]] = {
        "Boolean": lambda t: t == pl.Boolean,
        "a number": lambda t: t.is_numeric() or t == pl.Boolean,
        "String": lambda t: t in (pl.Utf8, pl.Categorical) or isinstance(t, (pl.Categorical, pl.Enum)),
        "a text or number": lambda t: ok["String"](t) or ok["a number"](t),
    }
    return [f"{c} is {t}, expected {expected[c]}" for c, t in frame.schema.items()
            if c in expected and t != pl.Null and not ok[expected[c]](t)]


def _typed_nulls(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with its known columns that hold only nulls stored as Arrow's null type (as some writers store
    an all-null column) cast to the type they are read as: missing values, not an unreadable column."""
    expected: Dict[str, Any] = {c: pl.Boolean for c in FLAG_COLUMNS}
    expected.update((c, pl.Utf8) for c in TEXT_COLUMNS)
    for m in METRICS.values():
        expected[m.column] = pl.Boolean if m.kind == "rate" else pl.Float64
        if m.status:
            expected[m.status] = pl.Utf8
    expected.update(run_error=pl.Utf8, category=pl.Utf8, retrieval_mode=pl.Utf8)
    casts = [pl.col(c).cast(expected[c]) for c, t in frame.schema.items() if t == pl.Null and c in expected]
    return frame.with_columns(casts) if casts else frame


def check_column_types(frame: pl.DataFrame, path: Path, expected: Optional[Dict[str, str]] = None,
                       summary: Optional[Dict[str, Any]] = None) -> None:
    """Raise :class:`InputError` naming the file and each column of the wrong type (register custom judge metrics
    first: their columns are checked too). ``expected``: column -> type (default: the cases table's); ``summary``:
    the folder's summary.json, for the command the message advises (:func:`rewrite_advice`)."""
    problems = _type_problems(frame, expected)
    if problems:
        raise InputError(f"{path}: column{'s' if len(problems) > 1 else ''} {'; '.join(problems)} (written by "
                         f"another tool or edited?); {rewrite_advice(summary)}")


def written_by_score(summary: Dict[str, Any]) -> bool:
    """Whether a results folder's summary.json is one ``ragmeter score`` wrote: the retrieval summary at the top
    level (``overall``), where ``ragmeter eval`` nests it under ``retrieval``."""
    return "retrieval" not in summary and "overall" in summary


#: the judge model ``ragmeter demo`` records: its verdicts are example data replayed offline (ragmeter.cli.demo).
#: Only folders written before summary.json's ``command`` are told to be the demo's by it (:func:`_guessed_writer`)
DEMO_JUDGE_MODEL = "example-replay"

#: the commands that write a results folder, as summary.json's ``command`` names them (ragmeter._io.written_by)
FOLDER_COMMANDS = ("score", "eval", "demo")


def _folder_writer(summary: Optional[Dict[str, Any]]) -> Optional[str]:
    """The command that wrote a results folder, as its ``summary`` (summary.json) tells; None when it does not."""
    if not isinstance(summary, dict):
        return None
    command = summary.get("command")
    if isinstance(command, str) and command in FOLDER_COMMANDS:
        return f"`ragmeter {command} --out DIR`"
    return _guessed_writer(summary)


def _guessed_writer(summary: Dict[str, Any]) -> Optional[str]:
    """The command that wrote a folder whose summary.json does not name one (written before ``command`` was
    recorded, or by a later version naming one this version does not know), from its shape: a score folder by
    its layout, the demo by its judge model's name (an eval judged by a model of that name is taken for the
    demo's, which is why the command is recorded now), else eval."""
    judge = summary.get("judge")
    if written_by_score(summary):
        return "`ragmeter score --out DIR`"
    if "retrieval" in summary and isinstance(judge, dict) and judge.get("model") == DEMO_JUDGE_MODEL:
        return "`ragmeter demo --out DIR`"
    return "`ragmeter eval --out DIR`" if "retrieval" in summary else None


def writing_command(summary: Optional[Dict[str, Any]] = None) -> str:
    """The command that wrote a results folder, as its ``summary`` tells (a score folder told to re-run eval would
    be sent to a command that needs the run's answers, and a judge, it never used); else the two that write one."""
    return _folder_writer(summary) or "`ragmeter eval --out DIR` or `ragmeter score --out DIR`"


def rewrite_advice(summary: Optional[Dict[str, Any]] = None, *, restore: bool = False) -> str:
    """What to do about a results folder that is damaged, incomplete or of another version: the one wording every
    such message ends with. Write it again with the command that wrote it (:func:`writing_command`), named when
    its ``summary`` tells. ``restore``: a file of the folder cannot be read or is gone, and a copy would do too."""
    command = _folder_writer(summary)
    again = f"write the folder again with {command}" if command else \
        f"write the folder again with the command that wrote it ({writing_command()})"
    return ("restore it, or " if restore else "") + again


def _read_parquet(path: Path, summary: Optional[Dict[str, Any]] = None) -> pl.DataFrame:
    """A results folder's table; ``summary``: the folder's summary.json, for what its messages advise."""
    not_parquet = not_parquet_diagnosis(path, summary)
    if not_parquet:
        raise InputError(not_parquet)
    try:
        return pl.read_parquet(path)
    except Exception as exc:  # polars raises several error types for corrupt files
        raise InputError(f"{path}: cannot read Parquet file ({exc}); {rewrite_advice(summary, restore=True)}") \
            from None


def not_parquet_diagnosis(path: Path, summary: Optional[Dict[str, Any]] = None) -> Optional[str]:
    """One line saying what a results folder's table is when it is not a whole Parquet file (empty, JSON text,
    compressed, cut short), with what to do (:func:`rewrite_advice` of the folder's ``summary``); None when it
    opens and closes as Parquet does. Polars said 'File out of specification: The file must end with PAR1 or
    PARE' for all of them."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            opening = fh.read(HEAD_BYTES)
            head = opening[:4]
            fh.seek(max(size - 4, 0))
            tail = fh.read(4)
    except OSError:
        return None  # the reader's own error names it
    if head == b"PAR1" and tail == b"PAR1" and size >= 12:
        return None
    if not head.strip():
        what = "is empty"
    elif head == b"PAR1":
        what = "is cut short (no Parquet footer)"
    elif binary_kind(opening) and binary_kind(opening) != "a Parquet file":
        what = f"is {binary_kind(opening)}, not Parquet"
    elif head.lstrip()[:1] in (b"{", b"["):
        what = "is JSON text, not Parquet"
    else:
        return None
    return f"{path}: {what}; {rewrite_advice(summary, restore=True)}"


def _finite(frame: pl.DataFrame, path: Path, warnings: List[Dict[str, Any]]) -> pl.DataFrame:
    """``frame`` with NaN and +-inf in its float columns as null (missing), and one warning saying how many."""
    from ragmeter._warnings import warning

    floats = [c for c, t in frame.schema.items() if t in (pl.Float32, pl.Float64)]
    if not floats:
        return frame
    bad = frame.select([(~pl.col(c).is_finite() & pl.col(c).is_not_null()).alias(c) for c in floats])
    counts = {c: int(bad.get_column(c).sum()) for c in floats}
    counts = {c: n for c, n in counts.items() if n}
    if not counts:
        return frame
    rows = bad.select(pl.any_horizontal(list(counts)).alias("_bad")).get_column("_bad")
    ids = frame.filter(rows).get_column("id").cast(pl.Utf8).to_list() if "id" in frame.columns else []
    where = ", ".join(f"{c} ({n})" for c, n in counts.items())
    warnings.append(warning("non_finite", f"non-finite value(s) (NaN or infinity) in {path.name} treated as missing "
                            f"({where}), in {len(ids)} row(s)", ids, count=sum(counts.values())))
    return frame.with_columns([pl.when(pl.col(c).is_finite()).then(pl.col(c)).alias(c) for c in counts])


def _read_summary(path: Path, warnings: List[Dict[str, Any]]) -> Dict[str, Any]:
    """summary.json; a non-finite number (``NaN``, ``Infinity``: not JSON, but Python writes them) is missing."""
    from ragmeter._warnings import warning

    found: List[str] = []

    def constant(token: str) -> None:
        found.append(token)
        return None

    from ragmeter._sniff import json_document

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    summary = json_document(path, raw, rewrite_advice(restore=True), parse_constant=constant)
    if not isinstance(summary, dict):
        raise InputError(f"{path}: expected a JSON object")
    if found:
        warnings.append(warning("non_finite", f"non-finite number(s) ({', '.join(sorted(set(found)))}) in "
                                f"{path.name} treated as missing", [], count=len(found)))
    return summary


def _counts_shape(*at: str) -> Dict[Tuple[str, ...], str]:
    """The shape of a judge metric's ``failures`` / ``skips``: ``{kind: {"count": N, "example": text}}``."""
    return {at: "an object", (*at, "*"): "an object", (*at, "*", "count"): "an integer"}


def _repeats_shape(key: str) -> Dict[Tuple[str, ...], str]:
    """The shape of a ``repeats`` / ``collected_repeats`` section as the repeat tables read it."""
    shape: Dict[Tuple[str, ...], str] = {(key, "metrics"): "an object", (key, "metrics", "*"): "an object",
                                         (key, "runs"): "a list", (key, "runs", "[]"): "an object",
                                         (key, "runs", "[]", "incomplete"): "an object"}
    shape.update(((key, "metrics", "*", k), "a number") for k in ("mean", "std", "min", "max", "flip_rate"))
    shape.update(((key, "metrics", "*", k), "an integer") for k in ("n_flipped", "n_compared"))
    shape.update(((key, "metrics", "*", k), "a list") for k in ("per_repeat", "n_scored", "n_total"))
    shape[(key, "metrics", "*", "per_repeat", "[]")] = "a number or null"  # null: a repeat with no row scored
    shape.update(((key, "metrics", "*", k, "[]"), "an integer") for k in ("n_scored", "n_total"))
    shape.update(((key, "runs", "[]", "incomplete", k), "an integer")
                 for k in ("rows", "of", "failed", "skipped_budget"))
    return shape


#: the parts of summary.json the reports read, and the JSON type each must have: a missing key or a null is fine
#: (the reports leave out what the summary does not record), another type is an input error naming the key.
#: ``*``: every member of an object, ``[]``: every item of a list (a null member or item is of another type).
SUMMARY_SHAPE: Dict[Tuple[str, ...], str] = {
    ("inputs", "*", "sha256"): "a string",
    ("cost", "judge_cost_share"): "a number",
    ("judge", "metrics"): "an object",
    ("judge", "metrics", "*"): "an object",
    ("judge", "metrics", "*", "n_total"): "an integer",
    **_counts_shape("judge", "metrics", "*", "failures"),
    **_counts_shape("judge", "metrics", "*", "skips"),
    ("golden_set", "by_category"): "an object",
    ("golden_set", "by_source"): "an object",
    ("golden_set", "hard"): "an object",
    ("golden_set", "hard", "categories"): "a list",
    ("golden_set", "hard", "categories", "[]"): "a string",
    ("golden_set", "warnings"): "a list",
    ("golden_set", "warnings", "[]"): "an object",
    **_repeats_shape("repeats"),
    **_repeats_shape("collected_repeats"),
}

_JSON_TYPES: Dict[str, Callable[[Any], bool]] = {
    "an object": lambda v: isinstance(v, dict),
    "a list": lambda v: isinstance(v, list),
    "a string": lambda v: isinstance(v, str),
    "a number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "a number or null": lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)),
    "an integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    for name in ("an object", "a list", "a string"):
        if _JSON_TYPES[name](value):
            return name
    return "true/false" if isinstance(value, bool) else "a number"


def _members(node: Any, path: Tuple[str, ...], at: str) -> List[Tuple[str, Any]]:
    """``(dotted key, value)`` of every member of ``node`` that ``path`` names (``*``, ``[]`` as in
    :data:`SUMMARY_SHAPE`); a step into a member of another type (checked by its own entry) names nothing."""
    if not path:
        return [(at, node)]
    step, rest = path[0], path[1:]
    if step == "[]":
        items = list(enumerate(node)) if isinstance(node, list) else []
    elif isinstance(node, dict):
        items = list(node.items()) if step == "*" else ([(step, node[step])] if step in node else [])
    else:
        items = []
    return [m for key, value in items for m in _members(value, rest, f"{at}[{key}]" if step == "[]" else
                                                         (f"{at}.{key}" if at else str(key)))]


def check_summary_shape(summary: Dict[str, Any], path: Path) -> None:
    """Raise :class:`InputError` naming ``path`` and each key of :data:`SUMMARY_SHAPE` whose value has another
    type (another tool wrote the file, or a hand edited it): the reports would fail deep inside."""
    problems = [f"{key} is {_json_type(value)}, expected {kind}"
                for shape, kind in SUMMARY_SHAPE.items() for key, value in _members(summary, shape, "")
                if (value is not None or shape[-1] in ("*", "[]")) and not _JSON_TYPES[kind](value)]
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise InputError(f"{path}: {'; '.join(problems[:3])}{more} (written by another tool or edited?); "
                         f"{rewrite_advice(summary)}")


def _listed(root: Path, name: str, summary: Dict[str, Any]) -> bool:
    """Whether ``name`` is part of the run: present, and listed in summary.json's ``files`` when it has one."""
    files = summary.get("files")
    return (root / name).is_file() and (not isinstance(files, list) or name in files)


def _check_listed_files(root: Path, summary: Dict[str, Any]) -> None:
    """Raise :class:`InputError` when summary.json lists a file the reports read (``judge.parquet``,
    ``sweep.parquet``) that the folder no longer has: a report rebuilt without it would drop the judge's
    reasons or the sweep without a word."""
    files = summary.get("files")
    if not isinstance(files, list):
        return
    for name in ("judge.parquet", "sweep.parquet"):
        if name in files and not (root / name).is_file():
            raise listed_but_missing(root, name, summary)


def listed_but_missing(root: Path, name: str, summary: Dict[str, Any]) -> InputError:
    """The error for a file that summary.json lists among the run's files but the folder ``root`` lacks."""
    return InputError(f"{root / name}: missing, though {root / 'summary.json'} lists it among the run's files "
                      f"(deleted or not copied?); {rewrite_advice(summary, restore=True)}")


def _summary_if_readable(root: Path) -> Optional[Dict[str, Any]]:
    """The summary.json of a folder that is incomplete otherwise, for the command that wrote it; None when it
    cannot be read (the folder's other problem is the one said)."""
    from ragmeter._sniff import json_document

    try:
        summary = json_document(root / "summary.json", (root / "summary.json").read_bytes(), "")
    except (OSError, InputError):
        return None
    return summary if isinstance(summary, dict) else None


def load_results(directory: Any) -> Results:
    """Load and validate a results directory; raise :class:`InputError` naming what is missing."""
    from ragmeter.diagnosis import diagnose

    root = Path(directory)
    if root.exists() and not root.is_dir():
        parent = root.parent if (root.parent / "summary.json").is_file() else None
        hint = f": pass its folder, {parent}" if parent is not None else \
            f" (pass the folder written by {writing_command()})"
        raise InputError(f"{root}: a file, not a results folder{hint}")
    if not root.is_dir():
        raise InputError(f"{root}: results directory not found")
    folder = next((name for name in ("cases.parquet", "summary.json") if (root / name).is_dir()), None)
    if folder is not None:  # a folder in a file's place (a Spark or partitioned write) is there, not missing
        raise InputError(f"{root / folder}: is a folder, not a file; a results folder holds {folder} as one file; "
                         f"{rewrite_advice(_summary_if_readable(root))}")
    missing = [name for name in ("cases.parquet", "summary.json") if not (root / name).is_file()]
    if missing:
        raise InputError(f"{root}: not a complete ragmeter results folder: missing {', '.join(missing)}; "
                         f"{rewrite_advice(_summary_if_readable(root))}")
    warnings: List[Dict[str, Any]] = []
    summary = _read_summary(root / "summary.json", warnings)
    fmt = summary.get("results_format")
    if fmt is not None and fmt != RESULTS_FORMAT:
        raise InputError(
            f"{root / 'summary.json'}: results_format {fmt!r} was written by another version of ragmeter "
            f"(version {summary.get('version', summary.get('ragmeter_version', '?'))}); this version reads "
            f"results_format {RESULTS_FORMAT}; {rewrite_advice(summary)}, or use the matching version"
        )
    cases = _read_parquet(root / "cases.parquet", summary)
    if cases.height == 0:
        raise InputError(f"{root / 'cases.parquet'}: no cases (the file has 0 rows): nothing to report")
    absent = [c for c in REQUIRED_CASE_COLUMNS if c not in cases.columns]
    if absent:
        raise InputError(
            f"{root / 'cases.parquet'}: missing column(s) {', '.join(absent)} "
            f"(written by another version of ragmeter, or not a cases table); {rewrite_advice(summary)}"
        )
    if cases.get_column("id").null_count():
        raise InputError(f"{root / 'cases.parquet'}: column id has nulls")
    if cases.get_column("id").n_unique() != cases.height:
        raise InputError(f"{root / 'cases.parquet'}: duplicate ids")
    register_custom_metrics(cases)
    check_column_types(cases, root / "cases.parquet", summary=summary)
    cases = _typed_nulls(_finite(cases, root / "cases.parquet", warnings))
    _check_listed_files(root, summary)
    judge = _read_parquet(root / "judge.parquet", summary) if _listed(root, "judge.parquet", summary) else None
    if judge is not None:
        absent = [c for c in ("id", "metric", "status") if c not in judge.columns]
        if absent:
            raise InputError(f"{root / 'judge.parquet'}: missing column(s) {', '.join(absent)}; "
                             f"{rewrite_advice(summary)}")
        check_column_types(judge, root / "judge.parquet", JUDGE_COLUMN_TYPES, summary)
        judge = _finite(judge, root / "judge.parquet", warnings)
    sweep = _read_parquet(root / "sweep.parquet", summary) if _listed(root, "sweep.parquet", summary) else None
    if sweep is not None and "threshold" not in sweep.columns:
        raise InputError(f"{root / 'sweep.parquet'}: missing column threshold; {rewrite_advice(summary)}")
    if sweep is not None:
        check_column_types(sweep, root / "sweep.parquet", SWEEP_COLUMN_TYPES, summary)
    if sweep is not None:  # an infinite threshold (-inf keeps every scored chunk) is a threshold, not missing
        sweep = _finite(sweep.drop("threshold"), root / "sweep.parquet", warnings).with_columns(
            sweep["threshold"]).select(sweep.columns)
    # ids as text, as ragmeter writes them: a table another tool rewrote (integers, a categorical) pairs with the
    # other folder's cases and judge rows by the same ids (compare's joins refused the mixed types, a traceback)
    cases = cases.with_columns(pl.col("id").cast(pl.Utf8), pl.col("category").cast(pl.Utf8).fill_null("(none)"))
    if judge is not None:
        judge = judge.with_columns(pl.col("id").cast(pl.Utf8))
    # `ragmeter eval` stores the diagnosis; folders without it (other writers, earlier versions) get it here.
    if not all(c in cases.columns for c in DIAGNOSIS_COLUMNS):
        cases = diagnose(cases)
    return Results(root, cases, summary, judge, sweep, warnings=warnings)


def metric_label(name: str, results: Results) -> str:
    """The label a report shows for metric ``name``. Without a correctness judge, ``correct`` is only the
    refusal rule on no-answer cases, and says so (it is not a judged correctness rate)."""
    if name == "correct" and not correctness_judged(results.cases):
        return "No-answer cases refused (refusal detection; answers not judged)"
    return METRICS[name].label


def correctness_judged(cases: pl.DataFrame) -> bool:
    """Whether a judge graded the answers; without, ``correct`` is the refusal rule on the no-answer cases."""
    return any(c in cases.columns for c in ("correct", "correctness_score"))


def not_judged_metrics(results: Results) -> List[str]:
    """Judge metrics of :data:`METRICS` without a column in the cases: the reports say "not judged"."""
    return [m for m in JUDGE_METRICS if METRICS[m].column not in results.cases.columns]


def not_measured_rows(results: Results) -> List[Tuple[str, str, int]]:
    """The Overall rows of metrics the folder could not measure, so that none vanishes: (label, why, n_total);
    nothing is scored (n_scored 0). Judge metrics without a column say "not judged"; answer-based ones of a
    folder without answers say so (their n_total: the cases they would cover)."""
    n = results.cases.height
    rows = [(METRICS[name].label, "not judged", n) for name in not_judged_metrics(results)]
    for column in results.unmeasured_for_answers():
        name = next(m.name for m in METRICS.values() if m.column == column)
        n_total = n if name == "correct" else int(_covered(results.cases, [name])[:, 0].sum())
        rows.append((METRICS[name].label, f"not measured: {NO_ANSWERS_SHORT}", n_total))
    return rows


def metric_frame(cases: pl.DataFrame, names: Optional[List[str]] = None) -> pl.DataFrame:
    """``id``, ``category`` and one Float64 column per metric (null = unscored).

    Judge scores count only when their ``<metric>_status`` is ``ok`` (or absent). ``correct`` (the column
    ``answer_correct``) also counts a no-answer case whose correctness call was skipped (no reference answer to
    grade against, the budget): its value is the refusal rule's (see :mod:`ragmeter.diagnosis`); a failed call
    stays unscored. ``refusal`` counts answerable, answered cases only (on a no-answer case refusing is the right
    answer, not a refusal to measure). Metrics whose column is absent are left out.
    """
    exprs = [pl.col("id"), pl.col("category")]
    for name in names or list(METRICS):
        m = METRICS[name]
        if m.column not in cases.columns:
            continue
        value = pl.col(m.column).cast(pl.Float64)
        if m.status and m.status in cases.columns:
            counted = pl.col(m.status).is_null() | (pl.col(m.status) == "ok")
            if name == "correct" and "is_noanswer" in cases.columns:
                counted = counted | _noanswer_by_rule()
            value = pl.when(counted).then(value).otherwise(None)
        if name == "refusal":
            value = pl.when(_answerable_and_answered(cases)).then(value).otherwise(None)
        exprs.append(value.fill_nan(None).alias(name))
    return cases.select(exprs)


def _answerable_and_answered(cases: pl.DataFrame) -> pl.Expr:
    """The cases the refusal rate is over: answerable (not ``is_noanswer``) with a non-blank answer."""
    answerable = ~pl.col("is_noanswer").fill_null(False) if "is_noanswer" in cases.columns else pl.lit(True)
    answered = (pl.col("answer").is_not_null() & (pl.col("answer").cast(pl.Utf8).str.strip_chars().str.len_chars() > 0)
                if "answer" in cases.columns else pl.lit(True))
    return answerable & answered


def _noanswer_by_rule() -> pl.Expr:
    """No-answer cases whose correctness call was skipped: ``answer_correct`` is the refusal rule's verdict."""
    return (pl.col("correctness_status") == "skipped") & pl.col("is_noanswer").fill_null(False)


def counted_by_refusal_rule(cases: pl.DataFrame) -> Optional[Tuple[int, int]]:
    """(cases, refused) of the no-answer cases the reports' Correct counts by the refusal rule because the judge
    did not grade them (:func:`_noanswer_by_rule`); None when there are none."""
    needed = ("correctness_status", "is_noanswer", "answer_correct")
    if any(c not in cases.columns for c in needed):
        return None
    by_rule = cases.filter(_noanswer_by_rule() & pl.col("answer_correct").is_not_null())
    if not by_rule.height:
        return None
    return by_rule.height, int(by_rule.get_column("answer_correct").sum())


def correct_rate_note(cases: pl.DataFrame) -> Optional[str]:
    """What the reports' Correct rests on besides the judge's verdicts, when it differs from the judge's own
    ``correct_rate`` (summary.json, the terminal); None when it does not.

    * no-answer cases the judge skipped (typically: no reference answer) count by the refusal rule, and the
      sentence says how many and how many refused;
    * Correct leaves failed calls out (n scored / total), while ``correct_rate`` counts them as not correct:
      the sentence names the second beside the first."""
    if "correctness_status" not in cases.columns or "correct" not in cases.columns:
        return None
    notes = []
    by_rule = counted_by_refusal_rule(cases)
    if by_rule is not None:
        n, refused = by_rule
        notes.append(f"Correct counts {n} no-answer case(s) the judge did not grade (skipped: no reference answer, "
                     "or the budget) by the refusal rule: a refusal is correct, any other answer is not "
                     f"({refused} of {n} refused).")
    status = cases.get_column("correctness_status")
    failed = int((status == "failed").sum())
    if failed:
        from ragmeter.stats import rate_counting_failed

        ok = cases.filter(pl.col("correctness_status") == "ok")
        n_correct = int(ok.get_column("correct").fill_null(False).sum())
        denominator, rate = rate_counting_failed(n_correct, ok.height, failed)
        if rate is None:
            notes.append(f"Every correctness call failed ({failed}): no answer was graded.")
        else:
            notes.append(f"Correct leaves out the answers whose correctness call failed. Counting the {failed} "
                         f"failed correctness call(s) as not correct, as summary.json's correct_rate does: "
                         f"{100 * rate:.1f}% ({n_correct}/{denominator}).")
    return " ".join(notes) or None


#: the reports show at most this many categories (the lowest headline metric, more cases first among equals)
REPORT_CATEGORIES = 30
#: the metric that picks the categories a bounded report shows: the first of these the cases have
HEADLINE_METRICS = ("hit", "correct", "faithfulness")


def compute_aggregates(
    cases: pl.DataFrame, *, n_resamples: int = 10_000, seed: Optional[int] = None,
    max_categories: Optional[int] = REPORT_CATEGORIES,
) -> Dict[str, Any]:
    """Per metric, overall and per category: value, n_scored, n_total, 95% interval.

    With more than ``max_categories`` categories, ``by_category`` holds only that many (the lowest mean of the
    headline metric, see :func:`shown_categories`): ``n_categories`` counts them all and ``category_rule`` says
    which were kept. Resampling every one of 20,000 categories would hold 20,000 resample tables.
    """
    from ragmeter import stats

    seed = stats.DEFAULT_SEED if seed is None else seed
    mf = metric_frame(cases)
    names = [c for c in mf.columns if c not in ("id", "category")]
    values = mf.select(names).to_numpy().astype(np.float64) if names else np.zeros((mf.height, 0))
    cats = mf.get_column("category").to_numpy().astype(str)
    out: Dict[str, Any] = {"metrics": names, "overall": {}, "by_category": {}, "n_categories": 0,
                           "category_rule": None}
    if not names or mf.height == 0:
        return out
    labels, codes = np.unique(cats, return_inverse=True)
    out["n_categories"] = len(labels)
    kept = shown_categories(values, names, codes, len(labels), max_categories)
    if len(kept) < len(labels):
        out["category_rule"] = f"the {len(kept)} of lowest {METRICS[_headline(names)].label}, more cases first among equals"
        groups = np.where(np.isin(codes, kept), cats, _other_label(labels))
    else:
        groups = cats
    res = stats.bootstrap_means(values, n_resamples=n_resamples, seed=seed, groups=groups)
    covered = _covered(cases, names)
    for j, name in enumerate(names):
        out["overall"][name] = stats.Aggregate.from_resamples(values[:, j], res[None][:, j],
                                                              n_total=int(covered[:, j].sum())).to_dict()
    for g in sorted(kept, key=lambda g: labels[g]):
        sel = codes == g
        cat = str(labels[g])
        out["by_category"][cat] = {
            name: stats.Aggregate.from_resamples(values[sel, j], res[cat][:, j],
                                                 n_total=int(covered[sel, j].sum())).to_dict()
            for j, name in enumerate(names)
        }
    return out


def _covered(cases: pl.DataFrame, names: List[str]) -> np.ndarray:
    """Per case and metric, whether the metric applies to the case (its :attr:`Metric.scope`; every case when it
    has none, or when the cases lack the columns the scope reads)."""
    from ragmeter.retrieval import scope_filter

    covered = np.ones((cases.height, len(names)), dtype=bool)
    for j, name in enumerate(names):
        scope = METRICS[name].scope
        if name == "correct" and not correctness_judged(cases):
            scope = "noanswer"
        if scope is None:
            continue
        try:
            mask = cases.select(scope_filter(scope).fill_null(False)).to_series()
        except pl.exceptions.ColumnNotFoundError:  # an older results folder
            continue
        covered[:, j] = mask.to_numpy()
    return covered


def placed_line(counts: Dict[str, int], n: int, what: str) -> str:
    """``"6 of 10 cases (those with ...)"``: how many cases a reading's counts (quadrants, bands) cover."""
    placed = sum(int(v) for v in counts.values())
    return f"{placed} of {n} cases ({what})" if placed < n else f"{placed} of {n} cases"


#: the cases each reading places
QUADRANT_CASES = "those with a context precision score and a verdict on the answer; the others are not placed"
BAND_CASES = "those with a faithfulness score; the others are not placed"


def more_categories_line(aggregates: Dict[str, Any]) -> Optional[str]:
    """The sentence a report puts over a per-category table that does not show every category."""
    shown, total = len(aggregates.get("by_category") or {}), aggregates.get("n_categories") or 0
    if total <= shown:
        return None
    return (f"{shown} of {total:,} categories shown: {aggregates['category_rule']}. The {total - shown:,} others "
            "are in cases.parquet (column category) and, for retrieval, in summary.json.")


def _headline(names: List[str]) -> str:
    return next((m for m in HEADLINE_METRICS if m in names), names[0])


def shown_categories(values: np.ndarray, names: List[str], codes: np.ndarray, n_labels: int,
                     limit: Optional[int]) -> List[int]:
    """The category codes a report shows: all of them, or the ``limit`` of lowest mean headline metric (the
    cases it scores; more cases first among equals, then by name; categories it scores in no case last)."""
    if limit is None or n_labels <= limit:
        return list(range(n_labels))
    column = values[:, names.index(_headline(names))]
    scored = ~np.isnan(column)
    n_scored = np.bincount(codes[scored], minlength=n_labels)
    sums = np.bincount(codes[scored], weights=column[scored], minlength=n_labels)
    sizes = np.bincount(codes, minlength=n_labels)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(n_scored > 0, sums / np.maximum(n_scored, 1), np.inf)
    order = np.lexsort((np.arange(n_labels), -sizes, means))  # last key first: mean, then size, then name
    return [int(g) for g in order[:limit]]


def _other_label(labels: np.ndarray) -> str:
    """A group name for the categories not shown, unlike any category's."""
    other = "\x00other"
    taken = set(labels.tolist())
    while other in taken:
        other += "\x00"
    return other


def percentile(values: np.ndarray, q: float) -> Optional[float]:
    v = values[~np.isnan(values)]
    return float(np.percentile(v, q)) if v.size else None


def cost_latency(results: Results) -> Dict[str, Any]:
    """System vs judge cost, latency p50/p95 (whatever columns are present). ``system_cost_cases`` and
    ``judge_cost_rows``: (rows with a cost, all rows); ``judge_cost_usd`` is None when no judge row has one."""
    out: Dict[str, Any] = {}
    cases = results.cases
    for col, key in (("latency_ms", "system_latency_ms"),):
        if col in cases.columns:
            v = cases.get_column(col).cast(pl.Float64).to_numpy()
            out[key] = {"p50": percentile(v, 50), "p95": percentile(v, 95), "n": int((~np.isnan(v)).sum()),
                        "n_total": int(v.size)}
    for col in ("cost", "cost_usd"):
        if col in cases.columns and cases.schema[col].is_numeric() and cases.get_column(col).drop_nulls().len():
            # a run that reports no cost has an unknown cost, not a zero one
            known = cases.get_column(col).cast(pl.Float64).drop_nulls()
            out["system_cost_usd"] = float(known.sum())
            out["system_cost_cases"] = (known.len(), cases.height)
            break
    cost = results.summary.get("cost")
    if isinstance(cost, dict) and cost.get("judge_cost_share") is not None:
        out["judge_cost_share"] = float(cost["judge_cost_share"])
    if results.judge is not None:
        j = results.judge
        judge_summary = results.summary.get("judge")
        if isinstance(cost, dict) and "judge_cost_usd" in cost:
            # the judge's total over every repeat (null: calls without a price, no --price), as summary.json's
            # cost section and the terminal say, and as the judge's share of the total cost is computed
            total = cost["judge_cost_usd"]
            out["judge_cost_usd"] = float(total) if isinstance(total, (int, float)) else None
            out["judge_cost_rows"] = (j.height, j.height)
        elif isinstance(judge_summary, dict) and "judge_cost_usd" in judge_summary:
            # the judge's own total (null: calls without a price, no --price), as summary.json and the terminal say
            total = judge_summary["judge_cost_usd"]
            out["judge_cost_usd"] = float(total) if isinstance(total, (int, float)) else None
            out["judge_cost_rows"] = (j.height, j.height)
        elif "cost_usd" in j.columns:
            # rows without a price have an unknown cost: none at all is unknown, not 0
            known = j.get_column("cost_usd").cast(pl.Float64).drop_nulls()
            out["judge_cost_usd"] = float(known.sum()) if known.len() else None
            out["judge_cost_rows"] = (known.len(), j.height)
        if "latency_ms" in j.columns:
            v = j.get_column("latency_ms").cast(pl.Float64).to_numpy()
            out["judge_latency_ms"] = {"p50": percentile(v, 50), "p95": percentile(v, 95),
                                       "n": int((~np.isnan(v)).sum()), "n_total": int(v.size)}
        counts = j.group_by("status").len()
        out["judge_calls"] = dict(zip(counts.get_column("status").to_list(), counts.get_column("len").to_list()))
    return out


def judge_failures(results: Results, status: str = "failed") -> Dict[str, Dict[str, Dict[str, Any]]]:
    """Failed judge rows per metric, grouped by error kind: ``{metric: {kind: {"count", "example"}}}``;
    with ``status="skipped"``, the skipped rows grouped by reason (``budget``, ``missing_run``, ...).

    Taken from the judge summary's per-metric ``failures`` (``skips``) when it has them, else counted from
    ``judge.parquet`` (``status``, ``error_kind``, ``error``; repeat 1 when the run was repeated, as the
    cases are). Metrics without such a row are left out.
    """
    key = {"failed": "failures", "skipped": "skips"}[status]
    metrics = ((results.summary.get("judge") or {}).get("metrics") or {}) if isinstance(
        results.summary.get("judge"), dict) else {}
    if metrics and all(isinstance(m, dict) and isinstance(m.get(key), dict) for m in metrics.values()):
        return {name: dict(m[key]) for name, m in metrics.items() if m[key]}
    j = results.judge
    if j is None or "status" not in j.columns:
        return {}
    if "repeat" in j.columns:
        j = j.filter(pl.col("repeat") == 1)
    failed = j.filter(pl.col("status") == status)
    if failed.height == 0:
        return {}
    kind = pl.col("error_kind").cast(pl.Utf8) if "error_kind" in failed.columns else pl.lit(None, dtype=pl.Utf8)
    error = pl.col("error").cast(pl.Utf8) if "error" in failed.columns else pl.lit(None, dtype=pl.Utf8)
    groups = (failed.select(pl.col("metric").cast(pl.Utf8), kind.fill_null("unknown").alias("kind"), error.alias("error"))
              .group_by("metric", "kind", maintain_order=True)
              .agg(pl.len().alias("count"), pl.col("error").drop_nulls().first().alias("example"))
              .sort(["metric", "count"], descending=[False, True]))
    out: Dict[str, Dict[str, Dict[str, Any]]] = {}
    for row in groups.iter_rows(named=True):
        out.setdefault(row["metric"], {})[row["kind"]] = {"count": int(row["count"]), "example": row["example"]}
    return out


def pass_rate_text(entry: Dict[str, Any]) -> Optional[str]:
    """``pass 50.0% (2 of 4 at >= 4; a failed row did not pass)`` for a custom metric's summary entry with a
    ``pass_threshold`` (None without one): the one wording of the terminal and the reports."""
    if not isinstance(entry, dict) or entry.get("pass_threshold") is None:
        return None
    if entry.get("pass_rate") is None:
        return f"pass n/a (no row scored, {entry.get('n_failed') or 0} failed)" if entry.get("n_failed") else None
    return (f"pass {entry['pass_rate']:.1%} ({entry['n_pass']} of {entry['pass_rate_denominator']} at >= "
            f"{entry['pass_threshold']:g}; a failed row did not pass)")


def pass_rate_notes(results: Results) -> List[str]:
    """One sentence per custom metric with a pass threshold, for the reports under the overall table: its row
    there is the mean score, and the pass rate (summary.json, the terminal) would otherwise be nowhere."""
    judge = results.summary.get("judge")
    metrics = judge.get("metrics") if isinstance(judge, dict) else None
    notes = []
    for name, entry in (metrics or {}).items() if isinstance(metrics, dict) else ():
        text = pass_rate_text(entry)
        if text:
            notes.append(f"{METRICS[name].label if name in METRICS else name}: {text}.")
    return notes


def judge_row_totals(results: Results) -> Dict[str, int]:
    """Judge rows per metric (repeat 1), the denominators of the failure counts."""
    metrics = (results.summary.get("judge") or {}).get("metrics") if isinstance(results.summary.get("judge"), dict) else None
    if isinstance(metrics, dict) and metrics:
        return {name: int(m.get("n_total") or 0) for name, m in metrics.items() if isinstance(m, dict)}
    j = results.judge
    if j is None:
        return {}
    if "repeat" in j.columns:
        j = j.filter(pl.col("repeat") == 1)
    counts = j.group_by("metric").len()
    return dict(zip(counts.get_column("metric").cast(pl.Utf8).to_list(), counts.get_column("len").to_list()))


def retrieval_modes(cases: pl.DataFrame) -> Dict[str, int]:
    if "retrieval_mode" not in cases.columns:
        return {}
    vc = cases.get_column("retrieval_mode").cast(pl.Utf8).fill_null("(none)").value_counts(sort=True)
    return dict(zip(vc.get_column("retrieval_mode").to_list(), vc.get_column("count").to_list()))


def settings_items(summary: Dict[str, Any]) -> List[Tuple[str, str]]:
    """What tells two reports apart, as (label, value): golden set and run (file, short hash), k, the judge
    model and metrics. From summary.json as ``ragmeter eval`` writes it (``inputs``, ``settings``), else the
    flat keys of other writers; what the summary does not record is left out."""
    from ragmeter.compare import _cutoff, golden_hash

    def sub(*keys: str) -> Any:
        node: Any = summary
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        return node

    items: List[Tuple[str, str]] = []
    for name in ("golden", "run"):
        path = sub("inputs", name, "path") or (summary.get(name) if isinstance(summary.get(name), str) else None)
        digest = golden_hash(summary) if name == "golden" else sub("inputs", "run", "sha256")
        if path or digest:
            items.append((name, " ".join(x for x in (str(path or ""), f"(sha256 {digest[:12]})" if digest else "") if x)))
    k = _cutoff(summary)  # where compare reads it (settings, retrieval, the top level)
    if k is not None:
        items.append(("k", str(k)))
    judge = sub("settings", "judge")
    model = sub("settings", "judge", "model") or sub("judge", "model")
    if model:
        metrics = sub("settings", "judge", "metrics")
        items.append(("judge", str(model) + (f" ({', '.join(map(str, metrics))})" if isinstance(metrics, list) else "")))
    elif isinstance(summary.get("settings"), dict) and judge is None:
        items.append(("judge", "none (answers not judged)"))
    return items


def settings_texts(summary: Dict[str, Any]) -> List[str]:
    """:func:`settings_items` as texts: ``golden: PATH (sha256 ...)``, ``k = 5``, ``judge: MODEL (metrics)``."""
    return [f"{label} = {value}" if label == "k" else f"{label}: {value}" for label, value in settings_items(summary)]


def resolution_text(n: int) -> str:
    """Points of a rate one case is worth (100 / n) to two decimals, or to two significant digits when smaller
    (``0.001`` at 100,000 cases, never ``0.00``)."""
    x = 100 / max(int(n), 1)
    return f"{x:.2f}" if x >= 0.01 else f"{x:.2g}"


def fmt_value(value: Optional[float], kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{100 * value:.1f}%" if kind == "rate" else f"{value:.3f}"


def fmt_ci(lo: Optional[float], hi: Optional[float], kind: str) -> Tuple[str, str]:
    return fmt_value(lo, kind), fmt_value(hi, kind)


def check_calibration_section(summary: Dict[str, Any], path: Any) -> None:
    """Raise :class:`InputError` naming ``path`` when summary.json's ``calibration`` section (``ragmeter review
    import``) cannot be read as the reports read it: a missing member or one of another type (a hand edit,
    another tool, another version)."""
    section = summary.get("calibration")
    if not (isinstance(section, dict) and isinstance(section.get("agreement"), dict)):
        return
    from ragmeter.review import render

    try:
        for part in (render.headline_rows, render.cell_rows, render.stratum_rows, render.ppi_line, render.text_lines):
            part(section)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        what = f"no {exc.args[0]!r}" if isinstance(exc, KeyError) and exc.args else f"{type(exc).__name__}: {exc}"
        raise InputError(f"{path}: calibration is not as `ragmeter review import` writes it ({what}); re-run "
                         "`ragmeter review import`") from None


def calibration_section(results: Results) -> Optional[Dict[str, Any]]:
    """The ``calibration`` section of ``summary.json`` (``ragmeter review import``), when there is one."""
    section = results.summary.get("calibration")
    return section if isinstance(section, dict) and isinstance(section.get("agreement"), dict) else None
