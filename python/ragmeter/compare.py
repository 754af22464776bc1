"""Compare two evaluation runs case by case: deltas with paired bootstrap intervals.

``compare(base_dir, cand_dir)`` pairs the cases of two results directories by
``id`` and reports, per metric, overall and per category: baseline and
candidate means over the cases scored in both runs, the delta (candidate -
baseline) with a paired bootstrap 95% interval (10,000 resamples by default,
seeded), ``n``, per-case wins / regressions / ties, McNemar's exact test for
boolean metrics (correct, hit, ...), and the minimum detectable difference at
this size (alpha 0.05, power 0.8; see :mod:`ragmeter.stats`). Below 4 paired
cases there is no interval (``ci_low`` / ``ci_high`` null, never starred): a
resample repeating one case is then so likely that the percentile bounds are
the smallest and largest delta whatever the level.

Direction
---------
Every metric is higher-is-better except ``refusal``, the refusal rate on
*answerable* cases (answered cases that are not no-answer cases): there a win is
a case the candidate answers where the baseline refused. Refusals on no-answer
cases are the right answer there; they count through ``correct`` (a refusal is
the correct answer to a no-answer question), never as refusal regressions.
``wins`` / ``regressions`` always mean better / worse in the metric's direction;
``delta`` is always the raw candidate - baseline.

Comparability
-------------
The two runs must be comparable: the same cases (ids, questions, reference
answers, categories and labels), the same retrieval-mode mix, the same
cut-off k and the same judge model (``settings.judge``; for answer_relevancy
also its embeddings model, variant and question count), each checked when both
summary.json files record it. Cases are
compared, not file bytes, so a comment line or reformatting in the golden set
does not matter. When both folders record a golden file (``summary.json``
``inputs.golden``) that still exists with the recorded SHA-256, the cases are
read from those files (labels included); otherwise from the golden-set columns
that ``cases.parquet`` carries (``question``, ``reference_answer``,
``category``, ``labeled``, ``n_expected_files``, and ``expected_files`` /
``expected_evidence``, which folders of older versions lack: with those, and golden files that differ, the
labels cannot be compared and the runs are refused). Otherwise :class:`CompareRefused` is
raised naming the first cases that differ, unless ``force=True``, which
records a loud warning instead. Runs that share no case are refused even with
``force``: nothing could be measured.

Values that are not finite (NaN, infinity) in a results folder are treated as
missing (unscored) with a warning.

Collected repeats
-----------------
A folder evaluated from a run with collected repeats (``collect --repeat N``;
``repeats.parquet``, one row per case and repeat) enters the comparison with
each case's **mean over its repeats** (a case-repeat the run file lacks is left
out of its case's mean; a case scored in no repeat is unscored). Cases still
pair by id, so a repeated run compares with another one (any N) or with a
single run. A rate's per-case mean is then a share (2 of 3 repeats hit), so
McNemar's test, which needs 0/1 outcomes, is not computed for it (``p_value``
null) and its MDD is the one for scores; the bootstrap interval holds as
always. ``base_repeats`` / ``cand_repeats`` say how many repeats each side had
(1 for a single run).
"""
from __future__ import annotations

import hashlib
import math
import re
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import polars as pl

from ragmeter._front import option
from ragmeter.errors import InputError
from ragmeter.stats import interval_defined

__all__ = [
    "CompareRefused",
    "MetricDelta",
    "Comparison",
    "compare",
    "compare_frames",
    "golden_hash",
    "to_markdown",
    "to_json",
    "finite_or_none",
    "better",
    "scale",
    "label",
    "OUTCOMES",
    "load_repeats",
    "repeat_values",
]

EPS = 1e-9

#: metrics where a lower value is better; every other metric is higher-is-better
LOWER_IS_BETTER = frozenset({"refusal"})
#: value range of a metric when it is not 0-1
SCALES: Dict[str, Tuple[float, float]] = {"correctness": (1.0, 5.0)}
#: the case-level binary outcomes that bare ``regressions`` / ``wins`` rules count:
#: chunk-level retrieval hit, answer correctness, refusal of an answerable question
#: (file-level hits restate ``hit`` at a coarser grain and are left out)
OUTCOMES = ("hit", "correct", "refusal")
_LABELS = {"refusal": "Refusals (answerable)"}
#: golden-set fields compared case by case (whichever both sides carry)
GOLDEN_FIELDS = ("question", "reference_answer", "category", "expected_files", "expected_evidence", "labeled",
                 "n_expected_files")
#: differing cases named in a refusal message
SHOW_CASES = 5


def better(metric: str) -> str:
    """``"lower"`` or ``"higher"``: which way the metric improves."""
    return "lower" if metric in LOWER_IS_BETTER else "higher"


def scale(metric: str) -> Tuple[float, float]:
    """The metric's range: (0, 1) unless noted in :data:`SCALES`."""
    return SCALES.get(metric, (0.0, 1.0))


def label(metric: str) -> str:
    from ragmeter.report.data import METRICS

    return _LABELS.get(metric, METRICS[metric].label)


class CompareRefused(InputError):
    """The two runs are not comparable (different golden set, retrieval-mode mix or k, or no case in common)."""


@dataclass
class MetricDelta:
    metric: str
    group: str  # "overall" or a category
    kind: str  # "rate" or "score"
    baseline: Optional[float]
    candidate: Optional[float]
    delta: Optional[float]  # candidate - baseline
    ci_low: Optional[float]
    ci_high: Optional[float]
    n_paired: int  # cases scored in both runs
    n_total: int  # cases of the group the metric applies to (all_files_hit: those expecting two or more files)
    wins: int  # cases better in the candidate (in the metric's direction)
    regressions: int  # cases worse in the candidate
    ties: int
    p_value: Optional[float]  # McNemar exact (boolean metrics)
    mdd: Optional[float]  # minimum detectable difference at this n
    better: str = "higher"  # "higher" or "lower": which way the metric improves
    #: cases of the group scored in the baseline only / the candidate only (a failed or skipped judge call, an
    #: answer missing from one run): left out of the delta; a gate rule on the row fails while any remain
    n_baseline_only: int = 0
    n_candidate_only: int = 0
    #: cases of the group scored in neither run because a judge call failed there (``<metric>_status`` "failed" in
    #: either run): left out of the delta, named by a warning
    n_judge_failed: int = 0
    #: a category row's McNemar p adjusted by Holm's method across the categories of its metric (None for the
    #: overall row and for metrics without a McNemar test): a family of many categories gives some p below 0.05
    #: by chance alone
    p_holm: Optional[float] = None

    @property
    def significant(self) -> bool:
        return self.ci_low is not None and (self.ci_low > 0 or self.ci_high < 0)  # type: ignore[operator]


@dataclass
class Comparison:
    base: str
    candidate: str
    rows: List[MetricDelta]
    n_base: int
    n_candidate: int
    n_paired: int
    n_resamples: int
    seed: int
    problems: List[str] = field(default_factory=list)  # comparability problems
    forced: bool = False
    notes: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)  # data problems (non-finite values, ...)
    #: the gate's verdicts when the comparison was made with a gate (``EvalResult.compare(gate=...)``)
    gate_results: Optional[List[Any]] = field(default=None, repr=False)
    base_repeats: int = 1  #: collected repeats of the baseline (1: a single run); cases enter as their mean
    cand_repeats: int = 1  #: collected repeats of the candidate
    #: side ("baseline" / "candidate") -> metrics whose values there stand in for a judge that never ran
    #: (``correct`` without verdicts is refusal detection on the no-answer cases); gate value rules on them fail
    not_judged: Dict[str, List[str]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """Whether every gate rule held (True without a gate: nothing was asked)."""
        return all(r.passed for r in self.gate_results or [])

    @property
    def failures(self) -> List[str]:
        """The failed gate rules, one sentence each (rule, actual value, limit)."""
        return [r.detail for r in self.gate_results or [] if not r.passed]

    def to_markdown(self) -> str:
        """The Markdown summary ``ragmeter compare --out`` writes, with the gate when there is one."""
        return to_markdown(self, self.gate_results)

    def row(self, metric: str, group: str = "overall") -> Optional[MetricDelta]:
        # an index, rebuilt when rows changed: a scan per lookup made 20,000-category reports quadratic
        key = (id(self.rows), len(self.rows))
        cached = self.__dict__.get("_row_index")
        if cached is None or cached[0] != key:
            index: Dict[Tuple[str, str], MetricDelta] = {}
            for r in self.rows:
                index.setdefault((r.metric, r.group), r)
            cached = (key, index)
            self.__dict__["_row_index"] = cached
        return cached[1].get((metric, group))

    @property
    def metrics(self) -> List[str]:
        seen: List[str] = []
        for r in self.rows:
            if r.metric not in seen:
                seen.append(r.metric)
        return seen

    @property
    def groups(self) -> List[str]:
        return sorted({r.group for r in self.rows if r.group != "overall"})

    def outcomes(self, group: str = "overall") -> List[MetricDelta]:
        """The rows of :data:`OUTCOMES` that both runs scored (at least one paired case) in ``group``."""
        rows = [self.row(m, group) for m in OUTCOMES]
        return [r for r in rows if r is not None and r.n_paired]

    def to_dict(self) -> Dict[str, Any]:
        """Everything as plain data; values that are not finite are ``None`` (strict JSON)."""
        d = asdict(self)
        d.pop("gate_results", None)  # the gate is reported beside the comparison (see to_json)
        d["outcomes"] = [r.metric for r in self.outcomes()]  # what bare regressions / wins count
        return finite_or_none(d)  # type: ignore[no-any-return]


def finite_or_none(value: Any) -> Any:
    """``value`` with every NaN or infinity (at any depth) replaced by ``None`` (numpy scalars as Python)."""
    from ragmeter._io import sanitise_json

    return sanitise_json(value)


def to_json(comp: Comparison, gate_results: Optional[List[Any]] = None) -> str:
    """The comparison (and gate verdicts) as strict JSON: no NaN or Infinity tokens."""
    from ragmeter import gate

    payload = comp.to_dict()
    if gate_results is not None:
        payload["gate"] = finite_or_none(gate.summary(gate_results))
    from ragmeter._io import strict_json

    return strict_json(payload)  # the C encoder: the pure-Python indenting one takes seconds at 20,000 categories


def golden_hash(summary: Dict[str, Any]) -> Optional[str]:
    """The golden set's hash recorded in a summary.json, if any."""
    for key in ("golden_hash", "golden_sha256", "golden_sha"):
        if isinstance(summary.get(key), str):
            return summary[key]
    for container in ("inputs", "hashes", "input_hashes"):
        sub = summary.get(container)
        if isinstance(sub, dict):
            g = sub.get("golden")
            if isinstance(g, str):
                return g
            if isinstance(g, dict):
                for key in ("sha256", "hash", "blake3", "xxh3"):
                    if isinstance(g.get(key), str):
                        return g[key]
    return None


# --------------------------------------------------------------------------- comparability


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _recorded_golden(summary: Dict[str, Any]) -> Optional[pl.DataFrame]:
    """The golden set the run was made from, when summary.json names a file that is still unchanged."""
    from ragmeter.dataset import load_golden

    inputs = summary.get("inputs")
    golden = inputs.get("golden") if isinstance(inputs, dict) else None
    if not isinstance(golden, dict) or not isinstance(golden.get("path"), str) or not isinstance(golden.get("sha256"), str):
        return None
    path = Path(golden["path"])
    try:
        if not path.is_file() or _file_sha256(path) != golden["sha256"]:
            return None
        frame = load_golden(path)
    except (OSError, InputError):
        return None
    return frame.select([pl.col("id").cast(pl.Utf8), *[c for c in GOLDEN_FIELDS if c in frame.columns]])


def _golden_views(base: Any, cand: Any) -> Tuple[pl.DataFrame, pl.DataFrame, str]:
    """Per-case golden fields of both runs, from the same kind of source on both sides."""
    gb, gc = _recorded_golden(base.summary), _recorded_golden(cand.summary)
    if gb is not None and gc is not None:
        return gb, gc, "the recorded golden files"

    def from_cases(cases: pl.DataFrame) -> pl.DataFrame:
        return cases.select([pl.col("id").cast(pl.Utf8), *[c for c in GOLDEN_FIELDS if c in cases.columns]])

    return from_cases(base.cases), from_cases(cand.cases), "cases.parquet"


def case_differences(gb: pl.DataFrame, gc: pl.DataFrame) -> List[Tuple[str, str]]:
    """(id, what differs) for every case whose golden fields differ, in the baseline's order, then the
    candidate's cases that the baseline lacks. Fields only one side carries are not compared."""
    common = [c for c in gb.columns if c != "id" and c in gc.columns]
    left = gb.with_row_index("__pos_b").with_columns(pl.lit(True).alias("__in_b"))
    right = gc.with_row_index("__pos_c").with_columns(pl.lit(True).alias("__in_c"))
    right = right.rename({c: f"{c}__c" for c in common})
    joined = left.join(right, on="id", how="full", coalesce=True).sort(["__pos_b", "__pos_c"], nulls_last=True)
    differs = [pl.col(c).ne_missing(pl.col(f"{c}__c")).alias(c) for c in common]
    flags = joined.select(["id", "__in_b", "__in_c", *differs])
    out: List[Tuple[str, str]] = []
    for row in flags.iter_rows(named=True):
        if not row["__in_b"]:
            out.append((row["id"], "only in the candidate"))
        elif not row["__in_c"]:
            out.append((row["id"], "only in the baseline"))
        else:
            fields = [c for c in common if row[c]]
            if fields:
                out.append((row["id"], ", ".join(fields) + " differ" + ("s" if len(fields) == 1 else "")))
    return out


def _describe_differences(diffs: List[Tuple[str, str]], source: str) -> str:
    shown = "; ".join(f"{case_id} ({what})" for case_id, what in diffs[:SHOW_CASES])
    more = f"; and {len(diffs) - SHOW_CASES} more" if len(diffs) > SHOW_CASES else ""
    return f"golden sets differ in {len(diffs)} case(s), compared from {source}: {shown}{more}"


def _mode_mix(cases: pl.DataFrame, ids: pl.DataFrame) -> Dict[str, int]:
    """The retrieval modes of the cases ``ids`` (those both run files hold): a case one run file lacks has no
    mode there, and is named by its own warning rather than read as a change of modes."""
    from ragmeter.report.data import retrieval_modes

    return retrieval_modes(cases.with_columns(pl.col("id").cast(pl.Utf8)).join(ids, on="id", how="semi"))


def _in_both_runs(base: pl.DataFrame, cand: pl.DataFrame) -> pl.DataFrame:
    """``id`` of the cases present in both run files and answered in both (not ``missing_from_run`` nor failed
    when collected, ``run_error``, on either side): such a case has no mode, and its own warning names it."""
    def present(cases: pl.DataFrame) -> pl.DataFrame:
        kept = cases.filter(~pl.col("missing_from_run").fill_null(False)) if "missing_from_run" in cases.columns \
            else cases
        if "run_error" in kept.columns:
            kept = kept.filter(pl.col("run_error").is_null())
        return kept.select(pl.col("id").cast(pl.Utf8))

    return present(base).join(present(cand), on="id", how="semi")


def _cutoff(summary: Dict[str, Any]) -> Optional[int]:
    """The cut-off k a results folder was scored at: ``settings.k`` (``eval``), ``retrieval.k``, or the top-level
    ``k`` (``score``); None when summary.json records none (an older folder)."""
    sections = [summary.get(name) for name in ("settings", "retrieval")]
    for holder in [*(s for s in sections if isinstance(s, dict)), summary]:
        k = holder.get("k")
        # bool is an int to Python; a `true` there is a damaged file, not k=1
        if isinstance(k, int) and not isinstance(k, bool):
            return k
    return None


#: judge settings that change the grades (not the endpoint, concurrency or limits), and the metric each needs
#: judged in both runs to matter (None: every judge metric)
JUDGE_SETTINGS = (("model", None), ("embeddings_model", "answer_relevancy"), ("relevancy_variant", "answer_relevancy"),
                  ("n_questions", "answer_relevancy"))


def _judge_differences(sb: Dict[str, Any], sc: Dict[str, Any]) -> List[str]:
    """The grading judge settings that differ between two summary.json files that both record a judge."""
    jb, jc = (s["settings"].get("judge") if isinstance(s.get("settings"), dict) else None for s in (sb, sc))
    if not isinstance(jb, dict) or not isinstance(jc, dict):
        return []
    out = []
    for name, needs in JUDGE_SETTINGS:
        metrics = [j.get("metrics") for j in (jb, jc)]
        if needs is not None and not all(not isinstance(m, list) or needs in m for m in metrics):
            continue
        if name in jb and name in jc and jb[name] != jc[name]:
            out.append(f"judge {name} differs: baseline {jb[name]!r}, candidate {jc[name]!r}; the judge metrics' "
                       "deltas would be the judge changing")
    return out


def _custom_metric_differences(sb: Dict[str, Any], sc: Dict[str, Any]) -> List[str]:
    """Custom judge metrics both runs judged under another definition. Their definitions (summary.json
    ``judge.definitions``: the prompt and the fields it sends, the scoring function, the scale, the pass threshold
    and the reply schema) differ, or, when either run records none (an older ragmeter), their prompt versions
    (``judge.prompts``, a hash of the prompt text, scale included) do. The built-in metrics' prompts change only
    with ragmeter's version and are left alone; a custom metric's change is its author's edit."""
    from ragmeter.judge.metrics import BUILTIN_METRICS

    pb, pc = (_judge_section(s, "prompts") for s in (sb, sc))
    db, dc = (_judge_section(s, "definitions") for s in (sb, sc))
    out = []
    for name in pb:
        if name not in pc or name in BUILTIN_METRICS:
            continue
        before, after = db.get(name), dc.get(name)
        if isinstance(before, dict) and isinstance(after, dict) and "version" in before and "version" in after:
            if before["version"] != after["version"]:
                out.append(_redefined(name, before["version"], after["version"], _changed_parts(before, after)))
        elif pb[name] != pc[name]:
            out.append(_redefined(name, pb[name], pc[name], "another prompt or scale"))
    return out


#: the parts of a custom metric's definition (summary.json ``judge.definitions``) as compare names them
_DEFINITION_PARTS = (("prompt", "its prompt"), ("fields", "the fields it judges"), ("scoring", "its scoring function"),
                     ("scale", "its scale"), ("pass_threshold", "its pass_threshold"), ("schema", "its reply schema"))


def _changed_parts(before: Dict[str, Any], after: Dict[str, Any]) -> str:
    parts = [said for key, said in _DEFINITION_PARTS if before.get(key) != after.get(key)]
    return " and ".join(parts) if parts else "another definition"


def _redefined(name: str, before: Any, after: Any, what: str) -> str:
    return (f"judge metric {name!r}: its definition differs ({what}): baseline {before!r}, candidate {after!r}; "
            "its deltas would be the metric's edit")


def _judge_section(summary: Dict[str, Any], key: str) -> Dict[str, Any]:
    judge = summary.get("judge")
    section = judge.get(key) if isinstance(judge, dict) else None
    return section if isinstance(section, dict) else {}


def _check(base: Any, cand: Any) -> Tuple[List[str], List[str]]:
    """(problems that make the runs incomparable, notes).

    Raises :class:`CompareRefused` when the runs share no case: ``force`` cannot help there, since no metric
    could be measured and a comparison of nothing would pass every check."""
    problems: List[str] = []
    notes: List[str] = []
    shared = base.cases.select(pl.col("id").cast(pl.Utf8)).join(
        cand.cases.select(pl.col("id").cast(pl.Utf8)), on="id", how="semi")
    if shared.height == 0:
        raise CompareRefused(f"no case in common between {base.path} and {cand.path} (nothing to compare: "
                             "were they evaluated on the same golden set?)")
    kb, kc = _cutoff(base.summary), _cutoff(cand.summary)
    if kb is not None and kc is not None and kb != kc:
        # Hit@5 against Hit@1 differs by construction; a gate would read the cut-off change as a regression
        problems.append(f"k differs: baseline {kb}, candidate {kc}; score both at the same k")
    elif (kb is None) != (kc is None):
        notes.append(f"k recorded in one folder only ({'baseline' if kb is not None else 'candidate'} "
                     f"k={kb if kb is not None else kc}); the cut-offs were not checked")
    hb, hc = golden_hash(base.summary), golden_hash(cand.summary)
    gb, gc, source = _golden_views(base, cand)
    diffs = case_differences(gb, gc)
    if diffs:
        problems.append(_describe_differences(diffs, source))
    elif hb is not None and hc is not None and hb != hc:
        unchecked = [c for c in ("expected_files", "expected_evidence") if c not in gb.columns or c not in gc.columns]
        if unchecked:
            # a label fixed in the golden file moves Hit@k as a retriever change would: a gate cannot tell them apart
            problems.append(
                f"the golden files differ byte for byte (baseline {hb[:12]}, candidate {hc[:12]}) and the labels "
                f"({' and '.join(unchecked)}) cannot be compared: {source} does not record them (a folder written "
                "by an older ragmeter) and the recorded golden files are changed or gone; evaluate both runs "
                "again with the same golden set")
        else:
            notes.append(
                f"the golden files differ byte for byte (baseline {hb[:12]}, candidate {hc[:12]}) but every case's "
                f"{', '.join(['id', *[c for c in gb.columns if c != 'id' and c in gc.columns]])} is the same "
                f"(compared from {source})")
    problems += _judge_differences(base.summary, cand.summary)
    problems += _custom_metric_differences(base.summary, cand.summary)
    both = _in_both_runs(base.cases, cand.cases)
    mb, mc = _mode_mix(base.cases, both), _mode_mix(cand.cases, both)
    if mb != mc:
        problems.append(f"retrieval-mode mix differs: baseline {mb or 'none recorded'}, candidate {mc or 'none recorded'}")
    return problems, notes


def compare(
    base_dir: Any,
    cand_dir: Any,
    *,
    force: bool = False,
    n_resamples: int = 10_000,
    seed: Optional[int] = None,
    threads: Optional[int] = None,
) -> Comparison:
    """Compare two results directories (see the module docstring)."""
    from ragmeter._args import check_arg
    from ragmeter.report.data import load_results
    from ragmeter.stats import check_resampling

    n_resamples, seed = check_resampling(n_resamples, seed)  # before the folders are read
    threads = check_arg("threads", threads, "int", low=1, optional=True)

    base = load_results(base_dir)
    cand = load_results(cand_dir)
    problems, notes = _check(base, cand)
    if problems and not force:
        raise CompareRefused(
            f"refusing to compare {base.path} with {cand.path}: " + "; ".join(problems)
            + f" (use {option('force', 'True', flag='--force')} to compare the common cases anyway)"
        )
    from ragmeter._warnings import messages

    warnings = ([f"{base.path}: {w}" for w in messages(base.warnings)]
                + [f"{cand.path}: {w}" for w in messages(cand.warnings)])
    if _same_folder(base.path, cand.path):
        warnings.insert(0, self_comparison_warning(f"the same folder ({Path(cand.path).resolve()})"))
    comp = compare_frames(
        base.cases, cand.cases, base_name=str(base.path), cand_name=str(cand.path), problems=problems,
        forced=bool(problems), n_resamples=n_resamples, seed=seed, threads=threads,
        base_repeats=load_repeats(base), cand_repeats=load_repeats(cand),
    )
    comp.notes[:0] = notes
    comp.warnings[:0] = warnings
    return comp


def self_comparison_warning(what: str) -> str:
    """The warning of a run compared with itself (``what``: "the same folder (D)", ...): a CI job whose two
    paths point at one folder would pass every gate rule without measuring anything."""
    return f"the baseline and the candidate are {what}: every delta is 0 by construction and a gate rule measures nothing"


def _same_folder(a: Any, b: Any) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve() or Path(a).samefile(b)
    except OSError:
        return False


# --------------------------------------------------------------------------- collected repeats

#: the per-(case, repeat) table of a results folder evaluated from a run with collected repeats
REPEATS_FILE = "repeats.parquet"


def load_repeats(results: Any) -> Optional[pl.DataFrame]:
    """A results folder's ``repeats.parquet`` when its summary.json lists it (a stale file of an earlier run
    is not read), else None."""
    from ragmeter.report.data import (_read_parquet, check_column_types, listed_but_missing, register_custom_metrics,
                                      rewrite_advice)

    files = results.summary.get("files")
    path = Path(results.path) / REPEATS_FILE
    if not (isinstance(files, list) and REPEATS_FILE in files):
        return None
    if not path.is_file():
        raise listed_but_missing(Path(results.path), REPEATS_FILE, results.summary)
    frame = _read_parquet(path, results.summary)
    absent = [c for c in ("id", "repeat", "category") if c not in frame.columns]
    if absent:
        raise InputError(f"{path}: missing column(s) {', '.join(absent)}; {rewrite_advice(results.summary)}")
    register_custom_metrics(frame)
    check_column_types(frame, path, summary=results.summary)
    if frame.select(pl.struct("id", "repeat").is_duplicated().any()).item():
        raise InputError(f"{path}: a (id, repeat) pair occurs twice")
    return frame.with_columns(pl.col("category").cast(pl.Utf8).fill_null("(none)"))


def repeat_values(per_repeat: pl.DataFrame) -> pl.DataFrame:
    """``id``, ``category``, ``repeat`` and one Float64 column per metric (as
    :func:`ragmeter.report.data.metric_frame`), null where the case is unscored in that repeat, including the
    case-repeats the run file lacked (``absent_from_repeat``)."""
    from ragmeter.report.data import metric_frame, register_custom_metrics

    register_custom_metrics(per_repeat)
    values = metric_frame(per_repeat).with_columns(per_repeat.get_column("repeat").cast(pl.Int64))
    if "absent_from_repeat" not in per_repeat.columns:
        return values
    absent = per_repeat.get_column("absent_from_repeat").fill_null(False)
    names = [c for c in values.columns if c not in ("id", "category", "repeat")]
    return values.with_columns(pl.when(absent).then(None).otherwise(pl.col(c)).alias(c) for c in names)


def _case_means(per_repeat: pl.DataFrame) -> pl.DataFrame:
    """One row per case: each metric's mean over the repeats that scored it (null when none did)."""
    values = repeat_values(per_repeat)
    names = [c for c in values.columns if c not in ("id", "category", "repeat")]
    return values.sort("repeat").group_by("id", maintain_order=True).agg(
        pl.col("category").first(), *[pl.col(c).mean() for c in names])


def _n_repeats(per_repeat: Optional[pl.DataFrame]) -> int:
    return 1 if per_repeat is None else int(per_repeat.get_column("repeat").n_unique())


def _binary(values: np.ndarray) -> bool:
    seen = values[~np.isnan(values)]
    return bool(np.isin(seen, (0.0, 1.0)).all())


# --------------------------------------------------------------------------- the comparison




def non_finite_counts(cases: pl.DataFrame) -> Dict[str, int]:
    """Metric -> number of NaN or infinite values in its column (float columns only)."""
    from ragmeter.report.data import METRICS

    out: Dict[str, int] = {}
    for name, m in METRICS.items():
        if m.column in cases.columns and cases.schema[m.column].is_float():
            k = int(cases.select((pl.col(m.column).is_nan() | pl.col(m.column).is_infinite()).sum()).item() or 0)
            if k:
                out[name] = k
    return out


#: cases.parquet flags of a case the run file lacked or that failed when collected: (column, code, what)
RUN_GAPS = (
    (pl.col("missing_from_run").fill_null(False), "missing_from_run", "missing from the {side}'s run file only, "
     "scored there as empty retrievals (their deltas are the run file's gap, not the system's)"),
    (pl.col("run_error").is_not_null(), "failed_in_run", "failed when the {side}'s run was collected, in that run "
     "only (scored from what the run holds: an empty retrieval, no answer)"),
)


def run_gaps(base_cases: pl.DataFrame, cand_cases: pl.DataFrame) -> List[str]:
    """One warning per side and kind for the paired cases that one run's file lacked or failed on and the other's
    did not: they enter the deltas as misses."""
    from ragmeter._warnings import warning

    common = base_cases.select(pl.col("id").cast(pl.Utf8)).join(
        cand_cases.select(pl.col("id").cast(pl.Utf8)), on="id", how="semi").get_column("id").to_list()
    out: List[str] = []
    for flag, code, what in RUN_GAPS:
        column = flag.meta.root_names()[0]
        b, c = ({str(i) for i in cases.filter(flag).get_column("id").to_list()} if column in cases.columns else set()
                for cases in (base_cases, cand_cases))
        for side, mine, other in (("baseline", b, c), ("candidate", c, b)):
            only = [i for i in common if i in mine and i not in other]
            if only:
                out.append(warning(code, "case(s) " + what.format(side=side), only)["message"])
    return out


def _failed_in(cases: pl.DataFrame, ids: pl.Series, names: List[str], status_value: str = "failed"
               ) -> Dict[str, np.ndarray]:
    """Metric -> per paired case (in ``ids`` order), whether its judge call failed in this run (``<metric>_status``
    "failed"; ``status_value="skipped"``: whether the judge skipped it)."""
    from ragmeter.report.data import METRICS

    out: Dict[str, np.ndarray] = {}
    frame = pl.DataFrame({"id": ids})
    for name in names:
        status = METRICS[name].status
        if not status or status not in cases.columns:
            continue
        ids_failed = cases.filter(pl.col(status).cast(pl.Utf8) == status_value).select(pl.col("id").cast(pl.Utf8))
        failed = frame.select(pl.col("id").is_in(ids_failed.get_column("id").implode())).to_series().to_numpy()
        if failed.any():
            out[name] = failed
    return out


def _failed_calls(failed_in: Dict[str, Dict[str, np.ndarray]], n: int) -> Dict[str, np.ndarray]:
    """Metric -> per paired case, whether its judge call failed in either run (``failed_in``: per run)."""
    out: Dict[str, np.ndarray] = {}
    for per_metric in failed_in.values():
        for name, failed in per_metric.items():
            out[name] = out.get(name, np.zeros(n, dtype=bool)) | failed
    return out


#: what a judge row's "skipped" status means (missing input or the budget: the folder's report says which)
SKIPPED_WHY = "an input it needs was missing, or --budget"


def _why_one_sided(name: str, other: str, only: np.ndarray, failed_in: Dict[str, Dict[str, np.ndarray]],
                   not_judged: Dict[str, List[str]],
                   skipped_in: Optional[Dict[str, Dict[str, np.ndarray]]] = None) -> str:
    """Why the cases ``only`` one run scored are unscored in the ``other``, as far as the folders tell: a judge
    that did not run there, judge calls that failed or that the judge skipped there (their status), else a
    guess."""
    if name in not_judged.get(other, ()):
        return f"not judged in the {other}"
    nothing = np.zeros(len(only), dtype=bool)
    n_only = int(only.sum())
    n_failed = int((only & failed_in[other].get(name, nothing)).sum())
    n_skipped = int((only & (skipped_in or {}).get(other, {}).get(name, nothing)).sum())
    them = "it" if n_only == 1 else "them"
    if n_failed == n_only:
        return f"{'its' if n_only == 1 else 'their'} judge call failed in the {other}"
    if n_skipped == n_only:
        return f"the judge skipped {them} in the {other}: {SKIPPED_WHY}"
    known = ([f"{n_failed} of them: a judge call failed in the {other}"] if n_failed else []) + \
        ([f"{n_skipped} of them: the judge skipped them in the {other} ({SKIPPED_WHY})"] if n_skipped else [])
    if known:
        return "; ".join(known) + "; the others: a missing answer?"
    return "a failed or skipped judge call, a missing answer?"


def _applies(cases: pl.DataFrame, ids: pl.DataFrame, names: List[str]) -> np.ndarray:
    """Per case of ``ids`` (in that order) and metric, whether the metric applies to it (``all_files_hit``: the
    cases expecting two or more files), as the reports count ``n_total``."""
    from ragmeter.report.data import _covered

    aligned = ids.join(cases.with_columns(pl.col("id").cast(pl.Utf8)), on="id", how="left", maintain_order="left")
    return _covered(aligned, names)


def _named(ids: np.ndarray, which: np.ndarray) -> str:
    """`` (a, b, c, d, e and 3 more)``: the first cases of ``ids`` where ``which`` holds, as warnings name them."""
    from ragmeter._warnings import SHOWN

    chosen = [str(i) for i in ids[which]]
    more = f" and {len(chosen) - SHOWN} more" if len(chosen) > SHOWN else ""
    return f" ({', '.join(chosen[:SHOWN])}{more})" if chosen else ""


def correctness_judged(cases: pl.DataFrame) -> bool:
    """Whether the judge gave any correctness verdict (else ``answer_correct`` is refusal detection alone)."""
    return "correct" in cases.columns and cases.get_column("correct").null_count() < cases.height


def _values(frame: pl.DataFrame, columns: List[str], n: int) -> np.ndarray:
    if not columns:
        return np.zeros((n, 0))
    v = frame.select(columns).to_numpy().astype(np.float64)
    v[~np.isfinite(v)] = np.nan  # NaN = unscored; infinities were counted and warned about
    return v


#: the fewest paired cases with a 95% interval
MIN_INTERVAL_CASES = next(n for n in range(1, 100) if interval_defined(n))

RESAMPLE_BYTES = 256 * 2**20
"""The most memory one bootstrap call may return (resamples x groups x metrics, float64)."""


def _group_rows(cats: np.ndarray) -> List[Tuple[str, np.ndarray]]:
    """``[("overall", all rows), (category, its rows), ...]``, categories sorted; rows as index arrays."""
    order = np.argsort(cats, kind="stable")
    labels, starts = np.unique(cats[order], return_index=True)
    ends = list(starts[1:]) + [len(cats)]
    return [("overall", np.arange(len(cats)))] + [
        (str(g), order[a:b]) for g, a, b in zip(labels.tolist(), starts.tolist(), ends)
    ]


def _percentiles(resampled: np.ndarray) -> np.ndarray:
    """95% percentile intervals along the first axis, NaN resamples ignored, NaN where none is left: numpy's
    linear method (what ``np.percentile`` of the scored resamples gives), vectorised over the other axes
    (``np.nanpercentile`` loops over them in Python)."""
    ordered = np.sort(resampled, axis=0)  # NaN sorts last
    count = (~np.isnan(resampled)).sum(axis=0)
    out = np.full((2,) + resampled.shape[1:], np.nan)
    has = count > 0
    alpha = (1.0 - 0.95) / 2.0  # as stats.percentile_interval computes it, to the last bit
    for i, q in enumerate(np.true_divide([100 * alpha, 100 * (1 - alpha)], 100)):
        pos = q * (np.maximum(count, 1) - 1)
        below = np.floor(pos).astype(np.int64)
        above = np.minimum(below + 1, np.maximum(count - 1, 0))
        lo = np.take_along_axis(ordered, below[None], axis=0)[0]
        hi = np.take_along_axis(ordered, above[None], axis=0)[0]
        frac = pos - below
        step = hi - lo
        # numpy's own interpolation, so the bounds equal np.percentile's to the last bit
        value = np.where(frac >= 0.5, hi - step * (1 - frac), lo + step * frac)
        out[i] = np.where(has, value, np.nan)
    return out


def _delta_intervals(
    diff: np.ndarray, cats: np.ndarray, groups: List[Tuple[str, np.ndarray]], n_resamples: int, seed: int,
    threads: Optional[int],
) -> Tuple[List[np.ndarray], bool]:
    """The paired-bootstrap 95% interval of each metric's mean delta, one ``(2, metrics)`` array per entry of
    ``groups`` (overall first); True when the categories were resampled in blocks.

    One call returns ``n_resamples x (1 + categories) x metrics`` values: with
    thousands of categories that is gigabytes (20,000 categories, 10 metrics:
    16 GB). Past RESAMPLE_BYTES the categories are resampled in blocks of whole
    categories (each block its own seeded resamples of its cases), the overall
    interval from the whole set, and a category whose deltas are all equal gets
    that value as its interval without resampling; below it, one call exactly as
    before.
    """
    from ragmeter import stats

    k = diff.shape[1]
    per_group = n_resamples * k * 8
    if per_group * len(groups) <= RESAMPLE_BYTES:
        res = stats.bootstrap_means(diff, n_resamples=n_resamples, seed=seed, groups=cats, threads=threads)
        return [_percentiles(res[None if i == 0 else g]) for i, (g, _) in enumerate(groups)], False
    out = [_percentiles(stats.bootstrap_means(diff, n_resamples=n_resamples, seed=seed, threads=threads)[None])]
    fixed = {i: _constant_interval(diff[rows]) for i, (_, rows) in enumerate(groups) if i}
    varying = [i for i, interval in fixed.items() if interval is None]
    per_block = max(1, RESAMPLE_BYTES // per_group - 1)
    for b in range(0, len(varying), per_block):
        block = varying[b:b + per_block]
        rows = np.concatenate([groups[i][1] for i in block])
        part = stats.bootstrap_means(diff[rows], n_resamples=n_resamples, seed=seed + 1 + b // per_block,
                                     groups=cats[rows], threads=threads)
        stacked = _percentiles(np.stack([part[groups[i][0]] for i in block], axis=1))
        fixed.update((i, stacked[:, j, :]) for j, i in enumerate(block))
    out.extend(fixed[i] for i in range(1, len(groups)))
    return out, True


def _holm_across_categories(rows: List[MetricDelta]) -> None:
    """Set each category row's ``p_holm``: its metric's category p-values adjusted as one family."""
    from ragmeter import stats

    by_metric: Dict[str, List[MetricDelta]] = {}
    for r in rows:
        if r.group != "overall" and r.p_value is not None:
            by_metric.setdefault(r.metric, []).append(r)
    for family in by_metric.values():
        for r, adjusted in zip(family, stats.holm_adjust([r.p_value for r in family])):
            r.p_holm = adjusted


def _constant_interval(deltas: np.ndarray) -> Optional[np.ndarray]:
    """``[[c], [c]]`` per metric when every scored delta of a category is the same ``c`` (NaN: none scored),
    None when some metric varies. Every resample's mean is then ``c``: no resampling needed (thousands of
    one-case categories would otherwise cost minutes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column: NaN, i.e. no interval
        low, high = np.nanmin(deltas, axis=0), np.nanmax(deltas, axis=0)
    if not np.array_equal(low, high, equal_nan=True):
        return None
    return np.stack([low, low])


def _judged_on_one_side(base_columns: List[str], cand_columns: List[str]) -> List[str]:
    """A note per run whose judge metrics the other run lacks (a rerun without a judge): they have no delta, and
    would otherwise leave the tables without a word."""
    from ragmeter.report.data import JUDGE_METRICS

    notes = []
    for side, other, own, others in (("baseline", "candidate", base_columns, cand_columns),
                                     ("candidate", "baseline", cand_columns, base_columns)):
        only = [m for m in JUDGE_METRICS if m in own and m not in others]
        if only:
            notes.append(f"{', '.join(only)}: judged in the {side} only, not in the {other}: not compared")
    return notes


def compare_frames(
    base_cases: pl.DataFrame,
    cand_cases: pl.DataFrame,
    *,
    base_name: str = "baseline",
    cand_name: str = "candidate",
    problems: Optional[List[str]] = None,
    forced: bool = False,
    n_resamples: int = 10_000,
    seed: Optional[int] = None,
    threads: Optional[int] = None,
    base_repeats: Optional[pl.DataFrame] = None,
    cand_repeats: Optional[pl.DataFrame] = None,
) -> Comparison:
    """Compare two diagnosed cases frames (as loaded by :func:`ragmeter.report.data.load_results`); a side with
    collected repeats (its ``repeats.parquet`` frame) enters with each case's mean over its repeats."""
    from ragmeter import stats
    from ragmeter.report.data import METRICS, metric_frame

    seed = stats.DEFAULT_SEED if seed is None else seed
    warnings: List[str] = []
    for side, cases in ((base_name, base_cases), (cand_name, cand_cases)):
        bad = non_finite_counts(cases)
        if bad:
            warnings.append(
                f"{side}: cases.parquet has values that are not finite (NaN or infinity), treated as missing: "
                + ", ".join(f"{k} in {name}" for name, k in bad.items())
            )
    warnings += run_gaps(base_cases, cand_cases)
    mb = metric_frame(base_cases) if base_repeats is None else _case_means(base_repeats)
    mc = metric_frame(cand_cases) if cand_repeats is None else _case_means(cand_repeats)
    names = [c for c in mb.columns if c not in ("id", "category") and c in mc.columns]
    # the baseline's category decides the group; pair on id
    joined = mb.select(["id", "category", *names]).join(
        mc.select(["id", *names]).rename({n: f"{n}__c" for n in names}), on="id", how="inner"
    ).sort("id")
    n = joined.height
    cats = joined.get_column("category").cast(pl.Utf8).fill_null("(none)").to_numpy().astype(str)
    base_v = _values(joined, names, n)
    cand_v = _values(joined, [f"{x}__c" for x in names], n)
    diff = cand_v - base_v  # NaN where either side is unscored
    paired = joined.get_column("id").cast(pl.Utf8)
    failed_in = {side: _failed_in(cases, paired, names) for side, cases in (("baseline", base_cases),
                                                                            ("candidate", cand_cases))}
    skipped_in = {side: _failed_in(cases, paired, names, "skipped") for side, cases in (("baseline", base_cases),
                                                                                      ("candidate", cand_cases))}
    failed_calls = _failed_calls(failed_in, n)
    paired_ids = joined.get_column("id").cast(pl.Utf8).to_numpy()
    covered = _applies(base_cases, joined.select(pl.col("id").cast(pl.Utf8)), names)
    notes: List[str] = []
    for side, per_repeat in ((base_name, base_repeats), (cand_name, cand_repeats)):
        if per_repeat is not None:
            notes.append(f"{side}: {_n_repeats(per_repeat)} collected repeats; each case enters with its mean "
                         "over the repeats that scored it")
    not_judged: Dict[str, List[str]] = {}
    unjudged_sides = [side for side, cases in (("baseline", base_cases), ("candidate", cand_cases))
                      if not correctness_judged(cases)]
    if "correct" in names and unjudged_sides:
        which = "either run" if len(unjudged_sides) == 2 else f"the {unjudged_sides[0]}"
        notes.append(f"correct: not judged in {which}; there its cases are the no-answer cases, scored by refusal "
                     "detection")
        for side in unjudged_sides:
            not_judged[side] = ["correct"]
    notes += _judged_on_one_side(mb.columns, mc.columns)
    groups = _group_rows(cats)
    intervals, blocked = _delta_intervals(diff, cats, groups, n_resamples, seed, threads) if n and names else ([], False)
    if blocked:
        notes.append(f"{len(groups) - 1} categories: their intervals come from resamples of blocks of categories "
                     f"(at most {RESAMPLE_BYTES // 2**20} MB of resamples at a time); the overall interval from the whole set")

    rows: List[MetricDelta] = []
    too_few = False
    for j, name in enumerate(names):
        kind = METRICS[name].kind
        # a mean over repeats is a share, not a 0/1 outcome: no McNemar test for it
        paired_outcomes = kind == "rate" and _binary(base_v[:, j]) and _binary(cand_v[:, j])
        sign = -1.0 if better(name) == "lower" else 1.0
        scored_b = ~np.isnan(base_v[:, j])
        scored_c = ~np.isnan(cand_v[:, j])
        if (scored_b != scored_c).any():
            sides = ", ".join(f"{int(only.sum())} case(s) scored in the {side} only{_named(paired_ids, only)} "
                              f"({_why_one_sided(name, other, only, failed_in, not_judged, skipped_in)})"
                              for side, other, only in (("baseline", "candidate", scored_b & ~scored_c),
                                                        ("candidate", "baseline", scored_c & ~scored_b))
                              if only.any())
            warnings.append(f"{name}: {sides}, left out of its delta; a gate rule on it fails")
        # a judge call that failed in both runs (or in one, the other not scoring the case) leaves a case unscored
        # on both sides: not one-sided, but not measured either
        lost = failed_calls.get(name, np.zeros(n, dtype=bool)) & ~scored_b & ~scored_c
        if lost.any():
            warnings.append(f"{name}: {int(lost.sum())} case(s) scored in neither run because a judge call failed"
                            f"{_named(paired_ids, lost)}, left out of its delta and of every gate rule on it (n counts "
                            "the cases scored in both)")
        for i, (g, sel) in enumerate(groups):
            d = diff[sel, j]
            ok = ~np.isnan(d)
            improvement = sign * d[ok]
            npair = int(ok.sum())
            lo, hi = (finite_or_none(float(x)) for x in intervals[i][:, j]) if interval_defined(npair) else (None, None)
            too_few = too_few or 0 < npair < MIN_INTERVAL_CASES
            b_mean = float(base_v[sel, j][ok].mean()) if npair else None
            c_mean = float(cand_v[sel, j][ok].mean()) if npair else None
            wins = int((improvement > EPS).sum())
            regressions = int((improvement < -EPS).sum())
            p_value = None
            if paired_outcomes and npair:
                p_value = stats.mcnemar_exact(regressions, wins)
                mdd = stats.min_detectable_difference_proportion(npair, (wins + regressions) / npair)
            else:
                mdd = stats.min_detectable_difference(npair, float(d[ok].std(ddof=1)) if npair > 1 else 0.0) if npair else None
            rows.append(MetricDelta(
                metric=name, group=g, kind=kind, baseline=b_mean, candidate=c_mean,
                delta=(c_mean - b_mean) if npair else None, ci_low=lo, ci_high=hi, n_paired=npair,  # type: ignore[operator]
                n_total=int(covered[sel, j].sum()), wins=wins, regressions=regressions, ties=npair - wins - regressions,
                p_value=p_value, mdd=mdd, better=better(name),
                n_baseline_only=int((scored_b[sel] & ~scored_c[sel]).sum()),
                n_candidate_only=int((scored_c[sel] & ~scored_b[sel]).sum()),
                n_judge_failed=int(lost[sel].sum()),
            ))
    _holm_across_categories(rows)
    if too_few:
        notes.append(f"a 95% interval needs at least {MIN_INTERVAL_CASES} paired cases: with fewer, a resample "
                     "repeating one case is so likely that the bounds are just the smallest and largest delta; shown n/a")
    return Comparison(
        base=base_name, candidate=cand_name, rows=rows, n_base=base_cases.height, n_candidate=cand_cases.height,
        n_paired=n, n_resamples=n_resamples, seed=seed, problems=list(problems or []),
        forced=forced, notes=notes, warnings=warnings, base_repeats=_n_repeats(base_repeats),
        cand_repeats=_n_repeats(cand_repeats), not_judged=not_judged,
    )


# --------------------------------------------------------------------------- formatting


def _finite(value: Optional[float]) -> bool:
    return value is not None and math.isfinite(value)


def fmt_value(value: Optional[float], kind: str) -> str:
    if not _finite(value):
        return "n/a"
    return f"{100 * value:.1f}%" if kind == "rate" else f"{value:.3f}"  # type: ignore[operator]


def fmt_delta(value: Optional[float], kind: str) -> str:
    if not _finite(value):
        return "n/a"
    return f"{100 * value:+.1f}pp" if kind == "rate" else f"{value:+.3f}"  # type: ignore[operator]


def fmt_ci(r: MetricDelta) -> str:
    if not (_finite(r.ci_low) and _finite(r.ci_high)):
        return "n/a"
    return f"[{fmt_delta(r.ci_low, r.kind)}, {fmt_delta(r.ci_high, r.kind)}]"


def fmt_mdd(r: MetricDelta) -> str:
    if r.kind == "rate" and _finite(r.mdd) and r.mdd > 1.0:  # type: ignore[operator]
        return ">100pp"  # a difference of two rates spans at most 100 points: none is detectable at this n
    return fmt_delta(r.mdd, r.kind).lstrip("+") if _finite(r.mdd) else "n/a"


def fmt_p(p: Optional[float]) -> str:
    if not _finite(p):
        return ""
    return "<0.001" if p < 0.001 else f"{p:.3f}"  # type: ignore[operator]


def _resolution(n: int) -> str:
    return f"{100 / max(n, 1):.3g}"


def _resolution_sentence(n_paired: int) -> str:
    """What one case is worth in a rate: over all paired cases, and more over the fewer a metric scores (hit
    covers 45 of the example's 51 paired cases: one case is 2.22 points there, not 1.96)."""
    return (f"One case = {_resolution(n_paired)} points of a rate over all {n_paired} paired cases; more for a metric "
            f"scored on fewer (100/n, with each metric's n below).")


def _cases_text(n: int, repeats: int) -> str:
    return f"{n} cases" if repeats <= 1 else f"{n} cases x {repeats} collected repeats, per-case mean"


def header_sentence(comp: Comparison) -> str:
    return (
        f"Baseline {comp.base} ({_cases_text(comp.n_base, comp.base_repeats)}) vs candidate {comp.candidate} "
        f"({_cases_text(comp.n_candidate, comp.cand_repeats)}), "
        f"{comp.n_paired} paired. Delta = candidate - baseline over cases scored in both; 95% CI: paired bootstrap, "
        f"{comp.n_resamples} resamples, seed {comp.seed}. {_resolution_sentence(comp.n_paired)}"
    )


LEGEND = (
    "* = the 95% interval excludes 0. better/worse = cases that moved in the metric's direction (higher is "
    "better, except refusal: refusals on answerable questions, lower is better). MDD = minimum detectable "
    "difference at this n (alpha 0.05, power 0.8): smaller deltas are within noise."
)


#: the metrics with a per-category table (terminal) or column (Markdown)
CATEGORY_METRICS = ("hit", "correct", "faithfulness")
#: at most this many category rows named as holding after Holm's correction, then a count
_MAX_HELD_NAMED = 5


def category_caution(comp: Comparison) -> Optional[str]:
    """A sentence under the per-category tables when some of their intervals exclude 0: how many would by
    chance alone (each interval is at 95% on its own), and which McNemar tests hold after Holm's correction
    across each metric's categories. None when no per-category star is shown."""
    from ragmeter._text import printable

    rows = [r for r in comp.rows if r.group != "overall" and r.metric in CATEGORY_METRICS and r.ci_low is not None]
    starred = sum(r.significant for r in rows)
    if not starred:
        return None
    text = (f"per category: {starred} of {len(rows)} intervals exclude 0; each is a 95% interval on its own, so "
            f"with no real change about {0.05 * len(rows):.1f} would by chance.")
    tested = [r for r in rows if r.p_holm is not None]
    if tested:
        held = sorted((r for r in tested if r.p_holm < 0.05), key=lambda r: r.p_holm)  # type: ignore[arg-type,return-value]
        names = [f"{label(r.metric)} in {printable(r.group)} (p = {fmt_p(r.p_holm)})" for r in held[:_MAX_HELD_NAMED]]
        if len(held) > _MAX_HELD_NAMED:
            names.append(f"{len(held) - _MAX_HELD_NAMED} more")
        text += (" McNemar tests Holm-adjusted across each metric's categories, below 0.05: "
                 + (", ".join(names) if names else "none") + ".")
    return text


def flip_lines(comp: Comparison) -> List[str]:
    out = []
    for r in comp.outcomes():
        if r.p_value is None:  # per-case means over collected repeats: shares, not 0/1 flips
            out.append(f"{label(r.metric)}: {r.wins} case(s) better, {r.regressions} worse (per-case means over "
                       f"repeats, so no McNemar test; n = {r.n_paired}).")
            continue
        if r.better == "lower":
            text = f"{label(r.metric)}: {r.regressions} new, {r.wins} gone"
        else:
            text = f"{label(r.metric)} flips: {r.wins} wrong→right, {r.regressions} right→wrong"
        p = fmt_p(r.p_value)
        out.append(f"{text} (McNemar exact p {p if p.startswith('<') else '= ' + p}, n = {r.n_paired}).")
    return out


def gate_lines(gate_results: List[Any]) -> List[str]:
    failed = [r for r in gate_results if not r.passed]
    head = f"Gate: FAILED ({len(failed)} of {len(gate_results)} rules)" if failed else f"Gate: passed ({len(gate_results)} rules)"
    return [head] + [f"{'FAILED' if not r.passed else 'ok'}: {r.detail}" for r in gate_results]


def _code(text: str) -> str:
    return "`" + str(text).replace("`", "'") + "`"


_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)")


def md_prose(text: str) -> str:
    """One line of prose that may hold code spans: HTML characters outside the spans are escaped (names from the
    data must not become markup in a pull-request comment); the spans are kept as they are."""
    import html

    out, at = [], 0
    for span in _CODE_SPAN.finditer(text):
        out += [html.escape(text[at:span.start()], quote=False), span.group(0)]
        at = span.end()
    out.append(html.escape(text[at:], quote=False))
    return " ".join("".join(out).split())


def to_markdown(comp: Comparison, gate_results: Optional[List[Any]] = None) -> str:
    from ragmeter.report.markdown import md_escape, md_table

    lines: List[str] = []
    if comp.forced:
        lines += [
            "> [!WARNING]",
            "> **FORCED COMPARISON: these runs are not comparable.** The numbers below compare only the "
            f"{comp.n_paired} common cases and may be meaningless:",
        ]
        lines += [f"> - {md_escape(p)}" for p in comp.problems]
        lines.append("")
    lines.append("## ragmeter compare")
    lines.append("")
    lines.append(
        f"Baseline {_code(comp.base)} ({_cases_text(comp.n_base, comp.base_repeats)}) vs candidate "
        f"{_code(comp.candidate)} ({_cases_text(comp.n_candidate, comp.cand_repeats)}), {comp.n_paired} paired. Delta = candidate - baseline over cases scored in both; "
        f"95% CI: paired bootstrap, {comp.n_resamples} resamples, seed {comp.seed}. "
        f"{_resolution_sentence(comp.n_paired)}"
    )
    lines.append("")
    if gate_results is not None:
        head, *items = gate_lines(gate_results)
        lines += [f"### {head}", ""]
        lines += [f"- {md_prose(item)}" for item in items]
        lines.append("")
    rows = []
    for r in comp.rows:
        if r.group != "overall":
            continue
        rows.append([
            label(r.metric), fmt_value(r.baseline, r.kind), fmt_value(r.candidate, r.kind),
            fmt_delta(r.delta, r.kind) + (" *" if r.significant else ""), fmt_ci(r), f"{r.n_paired}/{r.n_total}",
            f"{r.wins}/{r.regressions}/{r.ties}", fmt_p(r.p_value), fmt_mdd(r),
        ])
    lines.append(md_table(["metric", "baseline", "candidate", "delta", "95% CI", "n", "better/worse/same", "McNemar p", "MDD"], rows))
    lines.append("")
    lines.append(LEGEND.replace("* =", "`*` =", 1))
    lines.append("")
    key = [m for m in CATEGORY_METRICS if m in comp.metrics]
    if comp.groups and key:
        cat_rows = []
        for g in comp.groups:
            row = [g]
            for m in key:
                cell = comp.row(m, g)
                if cell is None or not cell.n_paired:
                    row.append("n/a")
                else:
                    row.append(f"{fmt_value(cell.baseline, cell.kind)} → {fmt_value(cell.candidate, cell.kind)} "
                               f"({fmt_delta(cell.delta, cell.kind)} {fmt_ci(cell)}, n={cell.n_paired})")
            cat_rows.append(row)
        lines += ["### Per category", "", md_table(["category"] + [label(m) for m in key], cat_rows), ""]
        caution = category_caution(comp)
        if caution:
            lines += [md_escape(caution[0].upper() + caution[1:]), ""]
    lines += flip_lines(comp)
    if comp.notes or comp.warnings:
        lines.append("")
        lines += [f"- warning: {md_escape(w)}" for w in comp.warnings]
        lines += [f"- note: {md_escape(n)}" for n in comp.notes]
    lines.append("")
    return "\n".join(lines)
