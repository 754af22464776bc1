"""One evaluation run: retrieval scoring + judging + reports in one folder.

``evaluate(golden, run, judge=JudgeConfig(...))`` (``ragmeter.evaluate``) does it in memory and returns an
:class:`ragmeter.api.EvalResult`; its ``.write(out_dir)`` (and ``run_eval(golden, run, out_dir, ...)``,
``ragmeter eval``) writes

* ``cases.parquet``: one row per case, the retrieval columns of
  :func:`ragmeter.score` joined with the question, answer, reference, the
  case's chunks with relevance marks (``retrieved``) and, when judged, one
  ``<metric>_score`` / ``<metric>_status`` pair per judge metric plus ``correct``,
  and the per-case diagnosis of :func:`ragmeter.diagnosis.diagnose`
  (``diagnosis``, ``quadrant``, ``faithfulness_band``, ``refusal``,
  ``is_noanswer``, ``answer_correct``) and ``review_reason`` (which cases go to a human reviewer, see
  :func:`ragmeter.calibration.review_reasons`; rate and seed in ``settings.review``);
* ``chunks.parquet``, ``judge.parquet`` (when judged), ``sweep.parquet`` (when
  thresholds are given);
* ``summary.json``: tool version, input hashes, settings (never the API key),
  timestamps, the retrieval summary, the judge summary, ``cost`` (system vs
  judge cost and the judge's share), the warnings (counted, with the first
  few case ids) and ``files``, the files that belong to this run;
* ``warnings.json``: every warning with the complete list of its cases;
* ``report.html`` and ``report.md``.

The folder holds one run: outputs are written to a temporary folder inside it
and moved into place when all are written, and ragmeter outputs of an earlier
run that this one did not produce (a ``judge.parquet``, a ``sweep.parquet``)
are removed. Files ragmeter does not write are left alone. A write that fails
(a full disk) leaves the folder as it was.

Judge metrics that were not run are absent, and the diagnosis says
``NOT_JUDGED`` rather than guessing.

With ``repeat=N`` (``ragmeter eval --repeat N``) every case is judged ``N``
times: repeat 1 may use the cache, repeats 2..N bypass it (a fresh judgement
each, nothing read from or written to the cache; a ``budget`` covers all
repeats together). ``judge.parquet`` holds every repeat's rows with a
``repeat`` column (1..N; always present), ``cases.parquet`` and the
diagnosis use repeat 1, and ``summary.json`` gains a ``repeats`` section
(see :mod:`ragmeter.repeats`): per metric the mean and spread of the
per-repeat means and the share of cases whose verdict flips.

A run with *collected* repeats (``ragmeter collect --repeat N``: records with a
``repeat`` field, 1..N, each id at most once per repeat; read by
:func:`ragmeter.dataset.load_run_repeats`) is scored and judged repeat by
repeat, each repeat judged once through the cache. ``cases.parquet``,
``chunks.parquet``, the sweep, the reports and the ``retrieval`` / ``judge``
sections stay repeat 1's (every reader of a results folder works unchanged);
``judge.parquet`` holds every repeat with ``repeat``; ``repeats.parquet`` has
one row per (case, repeat) with the columns of ``cases.parquet`` (less the
question and reference) and ``absent_from_repeat``; ``summary.json`` gains
``collected_repeats`` (:func:`collected_summary`). ``repeat > 1`` on such a run
is refused: judge repeats and collected repeats are not combined.
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

import polars as pl

from ragmeter._io import written_by

if TYPE_CHECKING:
    from ragmeter.api import EvalResult

#: one row per (case, collected repeat), when the run holds collected repeats
REPEATS_FILE = "repeats.parquet"


def _sha256(path: Any) -> Optional[str]:
    if not isinstance(path, (str, Path)):
        return None
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _chunks_per_case(chunks: pl.DataFrame) -> pl.DataFrame:
    cols = [c for c in ("file", "chunk_id", "text", "score", "relevant") if c in chunks.columns]
    return chunks.sort("id", "rank").group_by("id", maintain_order=True).agg(pl.struct(cols).alias("retrieved"))


def _judge_columns(judge: pl.DataFrame) -> pl.DataFrame:
    """Pivot judge rows (case x metric) into per-case ``<metric>_score`` / ``<metric>_status`` columns."""
    wide = judge.select("id").unique(maintain_order=True)
    for metric in judge["metric"].unique(maintain_order=True).to_list():
        part = judge.filter(pl.col("metric") == metric).select(
            "id", pl.col("score").alias(f"{metric}_score"), pl.col("status").alias(f"{metric}_status"),
            *([pl.col("correct")] if metric == "correctness" and "correct" in judge.columns else []),
        )
        wide = wide.join(part, on="id", how="left")
    return wide


def evaluate(
    golden: Any,
    run: Any,
    *,
    k: int = 5,
    judge: Any = None,
    metrics: Optional[Sequence[Any]] = None,
    thresholds: Optional[Sequence[float]] = None,
    repeat: int = 1,
    review_rate: Optional[float] = None,
    review_seed: Optional[int] = None,
) -> "EvalResult":
    """Score, optionally judge (``repeat`` times) and diagnose, in memory; see :class:`ragmeter.api.EvalResult`.

    ``golden`` and ``run``: paths, Polars/pandas DataFrames, Arrow tables, lists of dicts or a Hugging Face
    ``datasets.Dataset`` (anything with ``to_arrow()`` / ``to_pandas()``). ``judge``: a
    :class:`ragmeter.judge.JudgeConfig`; ``metrics`` (names or custom metric objects) replaces its metrics.
    ``review_rate`` / ``review_seed`` draw the human-review sample (``review_reason`` in ``cases``, see
    :mod:`ragmeter.calibration`) and are recorded in ``settings.review``. Works from threads and inside a
    running event loop (Jupyter). A run with collected repeats (records with ``repeat``, from ``collect --repeat
    N``) is scored and judged per repeat: ``EvalResult.repeats`` and ``summary["collected_repeats"]`` (see the
    module docstring).
    """
    from ragmeter.api import EvalResult, case_source
    from ragmeter.calibration import review_settings
    from ragmeter.diagnosis import diagnose, diagnosis_counts
    from ragmeter.retrieval import _check_k, _check_swept_scores, _prepared_match, _sweep_prepared, check_thresholds

    # every argument is checked before anything is loaded or judged
    repeat = _check_repeat(repeat)
    k = _check_k(k)
    if thresholds is not None:
        thresholds = check_thresholds(thresholds)
        if not thresholds:  # as sweep and `eval --thresholds ""`: not a sweep of nothing, silently left out
            from ragmeter.errors import InputError

            raise InputError("thresholds: give at least one threshold, or None for no sweep")
    review_settings(review_rate, review_seed, names=("review_rate", "review_seed"))
    judge = _with_metrics(_check_judge(judge, optional=True), metrics)
    check_repeat_judged(repeat, judge)
    if getattr(judge, "dry_run", False):
        from ragmeter.errors import InputError

        raise InputError("a dry run writes no results: use ragmeter.evaluation.estimate_eval (ragmeter eval --dry-run)")
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    golden_in, run_in = case_source(golden, "golden"), case_source(run, "run")
    collected = _collected_repeats(golden_in, run_in, repeat)
    if collected is not None:
        return _evaluate_collected(golden, run, golden_in, collected, k=k, judge=judge, thresholds=thresholds,
                                   review_rate=review_rate, review_seed=review_seed, started=started)
    # Load and match once; scoring, judging and the sweep all start from it.
    prepared = _prepared_match(golden_in, run_in, run_wide=True)
    if thresholds:  # a sweep of a run without scores is refused before any judge call is paid for
        _check_swept_scores(prepared.joined, run)
    result, cases = _scored_cases(prepared, k)
    judge_frame = judge_summary = repeats = None
    if judge is not None:
        judge = _with_tally(judge)
        records = _with_extra_fields(_judge_records(prepared.joined), judge, golden_in, run_in)
        jr = _judged_repeat(records, judge, 1, repeat, bypassed=True)
        first, judge_summary = jr.frame(), jr.summary
        frames = [first]
        if repeat > 1:
            repeats = _repeat_judge(records, judge, repeat, jr.summary, frames)
        judge_frame = _with_repeat_column(frames)
        cases = cases.join(_judge_columns(first), on="id", how="left")
    # The per-case diagnosis is computed here, once; the reports and compare read these columns.
    cases = diagnose(cases)
    cases, review = _with_review(cases, review_rate, review_seed)
    sweep_table = _sweep_prepared(prepared, list(thresholds), k) if thresholds else None
    repeated = repeat if judge is not None else 1  # judging alone repeats: without a judge nothing was
    summary = _summary(golden, run, golden_in, started, k, thresholds, judge, repeated, review, result.summary,
                       judge_summary, cost_summary(cases, judge_summary, repeats), judge_frame is not None,
                       sweep_table is not None)
    summary = _insert_after(summary, "cost", "diagnosis", diagnosis_counts(cases))
    if repeats is not None:
        summary = _insert_after(summary, "judge", "repeats", repeats)
    return EvalResult(cases=cases, chunks=result.chunks, judge=judge_frame, summary=summary, sweep=sweep_table)


def _scored_cases(prepared: Any, k: int) -> Any:
    """The retrieval result of a prepared match and its per-case table with the run's inputs and chunks."""
    from ragmeter.retrieval import _score_prepared

    result = _score_prepared(prepared, k)
    inputs = prepared.joined.select("id", "question", "reference_answer", "answer", "cost", "latency_ms",
                                    "prompt_tokens", "completion_tokens")
    cases = (result.cases.drop("question", strict=False).join(inputs, on="id", how="left")
             .join(_chunks_per_case(result.chunks), on="id", how="left"))
    return result, cases


def _with_repeat_column(frames: Sequence[pl.DataFrame]) -> pl.DataFrame:
    return pl.concat([f.with_columns(pl.lit(r, dtype=pl.Int64).alias("repeat"))
                      for r, f in enumerate(frames, start=1)], how="vertical_relaxed")


def _with_review(cases: pl.DataFrame, rate: Optional[float], seed: Optional[int]) -> Any:
    from ragmeter.calibration import review_reasons, review_settings

    review = review_settings(rate, seed)
    return cases.with_columns(review_reasons(cases, review["rate"], review["seed"])), review


def json_threshold(threshold: float) -> Any:
    """A sweep threshold as JSON holds it: the number, or ``"inf"`` / ``"-inf"`` (what ``--thresholds`` takes and
    the table shows) for an infinite one, which strict JSON would write as null (-inf and inf then read alike)."""
    if threshold in (float("inf"), float("-inf")):
        return "inf" if threshold > 0 else "-inf"
    return threshold


def _summary(golden: Any, run: Any, golden_in: Any, started: str, k: int, thresholds: Optional[Sequence[float]],
             judge: Any, repeat: int, review: Dict[str, Any], retrieval: Dict[str, Any],
             judge_summary: Optional[Dict[str, Any]], cost: Dict[str, Any], judged: bool, swept: bool,
             repeats_table: bool = False) -> Dict[str, Any]:
    settings: Dict[str, Any] = {"k": k, "thresholds": [json_threshold(t) for t in thresholds] if thresholds else None,
                                "judge": _judge_settings(judge), "repeat": repeat, "review": review}
    return {
        **written_by("eval"),  # the demo, which evaluates too, records itself over it (ragmeter.cli.demo)
        "started_at": started,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "inputs": {
            "golden": {"path": str(golden) if isinstance(golden, (str, Path)) else None, "sha256": _sha256(golden)},
            "run": {"path": str(run) if isinstance(run, (str, Path)) else None, "sha256": _sha256(run)},
        },
        "settings": settings,
        "retrieval": retrieval,
        "judge": judge_summary,
        "cost": cost,
        "golden_set": _golden_set_panel(golden_in),
        "warnings": retrieval["warnings"],
        "files": _run_files(judged, swept, True, repeats_table),
    }


def _insert_after(summary: Dict[str, Any], key: str, new_key: str, value: Any) -> Dict[str, Any]:
    """``summary`` with ``new_key`` right after ``key`` (summary.json reads in the order the sections matter)."""
    out: Dict[str, Any] = {}
    for name, item in summary.items():
        out[name] = item
        if name == key:
            out[new_key] = value
    return out


# --------------------------------------------------------------------------- collected repeats


def _collected_repeats(golden_in: Any, run_in: Any, repeat: int) -> Optional[List[Any]]:
    """The run's collected repeats (``collect --repeat N``), checked against the golden set; None for a plain
    run. ``eval --repeat M`` on such a run is refused: each collected repeat is judged once."""
    from ragmeter.dataset import check_run_against_golden, load_golden, load_run_repeats
    from ragmeter.errors import InputError

    collected = load_run_repeats(run_in)
    if collected is None:
        return None
    label = str(run_in) if isinstance(run_in, (str, Path)) else "run"
    if repeat > 1:
        from ragmeter._front import option

        raise InputError(f"{label}: holds {len(collected)} collected repeats (a 'repeat' field), and "
                         f"{option('repeat', repeat)} would judge each of them {repeat} times: each collected repeat "
                         f"is judged once; drop {option('repeat')} (or evaluate one repeat's records alone to repeat "
                         f"the judge)")
    golden = load_golden(golden_in)
    golden_label = str(golden_in) if isinstance(golden_in, (str, Path)) else "golden"
    for rr in collected:  # ids not in the golden set: named with the file and line, before anything is judged
        check_run_against_golden(golden, rr.frame, run_source=label, golden_source=golden_label)
    return collected


def _evaluate_collected(golden: Any, run: Any, golden_in: Any, collected: List[Any], *, k: int, judge: Any,
                        thresholds: Optional[Sequence[float]], review_rate: Optional[float],
                        review_seed: Optional[int], started: str) -> "EvalResult":
    """:func:`evaluate` of a run with collected repeats: every repeat scored and judged; cases.parquet, chunks,
    the sweep and the headline sections are repeat 1's, ``repeats`` holds every (case, repeat) and
    ``summary["collected_repeats"]`` the spread (see :func:`collected_summary`)."""
    from ragmeter.api import EvalResult
    from ragmeter.diagnosis import diagnose, diagnosis_counts
    from ragmeter.retrieval import _check_swept_scores, _prepared_match, _sweep_prepared

    prepared = [_prepared_match(golden_in, rr.frame, run_wide=True) for rr in collected]
    if thresholds:  # as evaluate: before any judge call
        _check_swept_scores(prepared[0].joined, run)
    scored = [_scored_cases(p, k) for p in prepared]
    tables = [cases for _result, cases in scored]
    judge_frame = judge_summary = None
    runs: List[Dict[str, Any]] = []
    summaries: List[Dict[str, Any]] = []
    if judge is not None:
        judge = _with_tally(judge)
        records = [_with_extra_fields(_judge_records(p.joined), judge, golden_in, rr.records)
                   for p, rr in zip(prepared, collected)]
        frames, summaries = _judge_each_repeat(records, judge)
        runs = [{"repeat": r, **_run_info(s)} for r, s in enumerate(summaries, start=1)]
        judge_frame, judge_summary = _with_repeat_column(frames), summaries[0]
        tables = [t.join(_judge_columns(f), on="id", how="left") for t, f in zip(tables, frames)]
    tables = [diagnose(t) for t in tables]
    cases, review = _with_review(tables[0], review_rate, review_seed)
    per_repeat = pl.concat([t.drop("question", "reference_answer").with_columns(
        pl.lit(r, dtype=pl.Int64).alias("repeat")) for r, t in enumerate(tables, start=1)], how="diagonal_relaxed")
    absent = _absent_case_repeats(collected, per_repeat)
    flagged = pl.struct("id", "repeat").is_in(absent.select(pl.struct("id", "repeat")).to_series().implode())
    per_repeat = per_repeat.with_columns(flagged.alias("absent_from_repeat")).select(
        "id", "repeat", pl.exclude("id", "repeat"))
    section = collected_summary(per_repeat, [res.summary for res, _c in scored], runs, summaries)
    first = scored[0][0]
    retrieval = {**first.summary, "warnings": first.summary["warnings"] + _repeat_warnings(scored, absent)}
    sweep_table = _sweep_prepared(prepared[0], list(thresholds), k) if thresholds else None
    cost = cost_summary(per_repeat, judge_summary, section)
    cost["n_repeats"] = len(collected)
    summary = _summary(golden, run, golden_in, started, k, thresholds, judge, 1, review, retrieval, judge_summary,
                       cost, judge_frame is not None, sweep_table is not None, repeats_table=True)
    summary = _insert_after(summary, "cost", "diagnosis", diagnosis_counts(cases))  # repeat 1's, as cases.parquet
    summary = _insert_after(summary, "judge", "collected_repeats", section)
    return EvalResult(cases=cases, chunks=first.chunks, judge=judge_frame, summary=summary, sweep=sweep_table,
                      repeats=per_repeat)


def _judge_each_repeat(records: List[List[Dict[str, Any]]], judge: Any) -> Any:
    """Judge every collected repeat once, through the cache (the same answer is the same question to the
    judge); one ``budget`` covers all repeats together."""
    from dataclasses import replace

    frames, summaries = [], []
    spent = 0.0
    for r, recs in enumerate(records, start=1):
        cfg = judge
        if getattr(judge, "budget", None) is not None:
            cfg = replace(judge, budget=max(0.0, judge.budget - spent))
        jr = _judged_repeat(recs, cfg, r, len(records), bypassed=False)
        frames.append(jr.frame())
        summaries.append(jr.summary)
        spent += jr.summary.get("judge_cost_usd") or 0.0
    return frames, summaries


def _absent_case_repeats(collected: List[Any], per_repeat: pl.DataFrame) -> pl.DataFrame:
    """(id, repeat) of the cases a repeat lacks while another repeat has them: a ragged run file, not an answer
    of the system. A case absent from every repeat is missing from the run (an empty retrieval, as always)."""
    present = pl.concat([rr.frame.select("id").with_columns(pl.lit(r, dtype=pl.Int64).alias("repeat"))
                         for r, rr in enumerate(collected, start=1)])
    in_some = present.select("id").unique()
    return (per_repeat.select("id", "repeat").join(in_some, on="id", how="semi")
            .join(present, on=["id", "repeat"], how="anti").sort("repeat", "id"))


def _repeat_warnings(scored: List[Any], absent: pl.DataFrame) -> List[Dict[str, Any]]:
    """The warnings the headline (repeat 1) does not carry: cases absent from some repeats, and a retrieval
    mode that changed in a later repeat."""
    from ragmeter._warnings import warning

    out = []
    if absent.height:
        ids, reps = absent["id"].to_list(), absent["repeat"].to_list()
        out.append(warning("repeat_missing_case", "case-repeat(s) absent from the run file while other repeats "
                           "have the case: unscored in those repeats (collected_repeats n_scored)", ids,
                           [f"{i} (repeat {r})" for i, r in zip(ids, reps)]))

    def off_mode(result: Any) -> List[Dict[str, Any]]:
        return [w for w in result.summary["warnings"] if w.get("code") == "mode_fallback"]

    first = off_mode(scored[0][0])
    for r, (result, _cases) in enumerate(scored[1:], start=2):
        for w in off_mode(result):
            if not any(w.get("details") == f.get("details") for f in first):  # the same cases as repeat 1: said
                out.append({**w, "code": "repeat_mode_fallback", "message": f"repeat {r}: {w['message']}",
                            "repeat": r})
    return out


#: what each collected-repeats statistic is over
COLLECTED_DEFINITIONS = (
    "per_repeat: the metric's mean over the cases scored in that repeat (n_scored of n_total, the cases the "
    "metric applies to: all_files_hit those expecting two or more files, refusal the answerable ones; unlabelled cases, "
    "failed or skipped judge rows and cases absent from a repeat are unscored, never 0 or 1); mean/std(ddof=1)/"
    "min/max: of the per-repeat means; flip: a case scored in >= 2 repeats whose value differs between them "
    "(n_flipped of n_compared). summary.retrieval, summary.judge, cases.parquet and the reports are repeat 1; "
    "repeats.parquet has one row per (case, repeat)"
)


def collected_summary(per_repeat: pl.DataFrame, retrieval: List[Dict[str, Any]], runs: List[Dict[str, Any]],
                      judge_summaries: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The ``collected_repeats`` section of summary.json: per metric (the names of ``compare`` and gate rules:
    hit, mrr, ..., correct, every judge metric) the per-repeat means with n_scored / n_total, their spread, and
    the cases whose outcome differs between repeats (:func:`ragmeter.repeats.spread`)."""
    from ragmeter.compare import repeat_values
    from ragmeter.report.data import METRICS
    from ragmeter.repeats import spread

    n = len(retrieval)
    values = repeat_values(per_repeat)
    names = [c for c in values.columns if c not in ("id", "category", "repeat")]
    n_total = _cases_covered_by_repeat(per_repeat, names, n)
    metrics: Dict[str, Any] = {}
    for j, name in enumerate(names):
        entry = spread(values.select("id", "repeat", name), name, n)
        if not any(entry["n_scored"]):
            continue  # e.g. refusal without answerable answered cases, a judge metric nobody scored
        metrics[name] = {"kind": METRICS[name].kind, "per_repeat": entry.pop("per_repeat"),
                         "n_scored": entry.pop("n_scored"), "n_total": [int(t[j]) for t in n_total], **entry}
    section: Dict[str, Any] = {
        "n": n,
        "n_cases": int(per_repeat.filter(pl.col("repeat") == 1).height),
        "source": "the run file's repeat column (ragmeter collect --repeat N); each repeat scored and judged once",
        "headline": f"summary.retrieval, summary.judge, cases.parquet and the reports are repeat 1 of {n}; the mean "
                    f"over the {n} repeats is metrics.<name>.mean (per-repeat n in n_scored / n_total)",
        "metrics": metrics,
        "retrieval_modes": [r["retrieval_modes"] for r in retrieval],
        "run_errors": [r.get("run_errors") or {} for r in retrieval],
        "n_absent": int(per_repeat.get_column("absent_from_repeat").sum()),
        "definitions": COLLECTED_DEFINITIONS,
    }
    if runs:
        section["runs"] = runs
        section["judge_incomplete"] = _sum_incomplete(judge_summaries)
    return section


def _cases_covered_by_repeat(per_repeat: pl.DataFrame, names: List[str], n: int) -> List[Any]:
    """Per repeat (1..n), per metric of ``names``: the cases of that repeat the metric applies to, its ``n_total``
    as the reports count it (``all_files_hit``: the cases expecting two or more files; the refusal rate: the
    answerable questions; ``correct`` without a judge: the no-answer questions; every case otherwise)."""
    from ragmeter.report.data import _covered

    return [_covered(per_repeat.filter(pl.col("repeat") == r), names).sum(axis=0) for r in range(1, n + 1)]


def _sum_incomplete(summaries: List[Dict[str, Any]]) -> Dict[str, int]:
    """The judge's incomplete rows over every repeat (what ``--max-failed`` is checked against)."""
    keys = ("rows", "failed", "skipped_budget", "of")
    return {key: sum(int((s.get("incomplete") or {}).get(key) or 0) for s in summaries) for key in keys}


def _golden_set_panel(golden: Any) -> Optional[Dict[str, Any]]:
    """The golden set's balance and audit warnings for the report's panel (``ragmeter audit`` in brief); None
    when it cannot be audited (no categories, say): ``ragmeter audit`` reports why."""
    from ragmeter.audit import golden_panel
    from ragmeter.errors import InputError

    try:
        return golden_panel(golden)
    except InputError:
        return None


def _with_metrics(judge: Any, metrics: Optional[Sequence[Any]]) -> Any:
    if metrics is None:
        return judge
    if judge is None:
        from ragmeter.errors import InputError

        raise InputError("metrics= are judge metrics: pass judge=ragmeter.judge.JudgeConfig(base_url=..., model=...)")
    from dataclasses import replace

    from ragmeter.judge.runner import metric_list

    return replace(judge, metrics=metric_list(metrics))  # a string: names separated by commas


def run_eval(
    golden: Any,
    run: Any,
    out_dir: Any,
    *,
    k: int = 5,
    judge: Any = None,
    thresholds: Optional[Sequence[float]] = None,
    reports: bool = True,
    repeat: int = 1,
    refuse_unmeasured: Optional[str] = None,
    **options: Any,
) -> Dict[str, Any]:
    """:func:`evaluate`, then write the results folder and the reports; return the summary.

    Everything is written into a temporary folder inside ``out_dir`` and moved into place when all of it was
    written; ragmeter outputs of an earlier run that this run did not produce are removed (other files stay).
    ``options`` are :func:`evaluate`'s other keyword arguments. ``refuse_unmeasured`` (``ragmeter eval``'s
    remedy): without a judge, a run of which no case gives a chunk list measured nothing, an
    :class:`InputError` before anything is written.
    """
    result = evaluate(golden, run, k=k, judge=judge, thresholds=thresholds, repeat=repeat, **options)
    if refuse_unmeasured is not None and judge is None:
        from ragmeter.retrieval import no_chunk_list_error, no_chunk_list_in_run, source_name

        if no_chunk_list_in_run(result.cases):
            raise no_chunk_list_error(source_name(run, "run"), refuse_unmeasured, cases=result.cases)
    if refuse_unmeasured is not None and judge is not None:
        _refuse_nothing_judged(result)
    result.write(out_dir, reports=reports)
    return result.summary


def _refuse_nothing_judged(result: Any) -> None:
    """``ragmeter judge``'s refusal (exit 2, nothing written) for ``eval`` with a judge of which every row lacks
    its input (a run without answers judged for correctness): the judge measured nothing it was asked for, and
    an exit status of 0 would tell a CI job that it had. The remedy names ``judge=None`` to a Python caller,
    ``--no-judge`` on the command line."""
    from ragmeter._front import option
    from ragmeter.judge.runner import refuse_nothing_judged
    from ragmeter.retrieval import failed_in_every_run_case

    judged = result.summary.get("judge")
    if not isinstance(judged, dict) or not isinstance(judged.get("metrics"), dict):
        return
    refuse_nothing_judged(judged, int(judged.get("n_cases") or result.cases.height), len(judged["metrics"]),
                          bool(failed_in_every_run_case(result.cases)),
                          remedy=f"pass {option('judge', 'None', flag='--no-judge')} to score retrieval alone")


def _run_files(judged: bool, swept: bool, reports: bool, repeats: bool = False) -> List[str]:
    """The files of one results folder, as ``summary.json`` lists them."""
    files = ["cases.parquet", "chunks.parquet"]
    files += ["judge.parquet"] if judged else []
    files += ["sweep.parquet"] if swept else []
    files += [REPEATS_FILE] if repeats else []
    files += ["warnings.json", "summary.json"]
    files += ["report.html", "report.md"] if reports else []
    return files


def cost_summary(cases: pl.DataFrame, judge_summary: Optional[Dict[str, Any]],
                 repeats: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """System cost (the run's per-case ``cost``) vs judge cost (every repeat) and the judge's share of the total.

    A cost nobody reported is null, not 0: the system cost is null when no case carries one, the judge cost
    when there was no judge or no price for its model, and the share when either side is unknown. Without a
    judge the total is the system cost.
    """
    system = None
    n_costed = 0
    if "cost" in cases.columns and cases.schema["cost"].is_numeric():
        values = cases.get_column("cost").cast(pl.Float64)
        values = values.filter(values.is_finite())
        n_costed = values.len()
        system = round(float(values.sum()), 6) if n_costed else None
    judge_cost = None
    if judge_summary is not None:
        runs = (repeats or {}).get("runs") or [{"judge_cost_usd": judge_summary.get("judge_cost_usd")}]
        costs = [r.get("judge_cost_usd") for r in runs]
        judge_cost = None if any(c is None for c in costs) else round(sum(costs), 6)
    if judge_summary is None:  # nothing was judged: the total is the system's
        total = system
    else:
        total = None if system is None or judge_cost is None else round(system + judge_cost, 6)
    return {
        "system_cost_usd": system,
        "n_cases_with_cost": n_costed,
        "n_cases": cases.height,
        "judge_cost_usd": judge_cost,
        "total_cost_usd": total,
        "judge_cost_share": round(judge_cost / total, 4) if judge_cost is not None and total else None,
    }


def _check_repeat(repeat: Any) -> int:
    from ragmeter._args import check_arg

    return int(check_arg("repeat", repeat, "int", low=1))


def check_repeat_judged(repeat: int, judge: Any) -> None:
    """Refuse ``repeat`` > 1 without a judge: repeats re-run the judge alone, so nothing would be repeated, and a
    run asking for a spread would get none without a word (``ragmeter eval`` printed a warning and went on,
    ``evaluate`` said nothing)."""
    if repeat > 1 and judge is None:
        from ragmeter._front import option
        from ragmeter.errors import InputError

        judge_it = option("judge", "JudgeConfig(...)", flag="--base-url and --model")
        raise InputError(f"{option('repeat', repeat)} judges every case {repeat} times, and nothing is judged: "
                         f"nothing would be repeated; pass {judge_it}, or leave {option('repeat')} out")


def _check_judge(judge: Any, *, optional: bool) -> Any:
    """``judge`` when it is a :class:`ragmeter.judge.JudgeConfig` (or None when ``optional``); else an
    :class:`~ragmeter.errors.InputError` naming it (a model name or a dict failed deep inside as an AttributeError)."""
    if judge is None and optional:
        return None
    from ragmeter._args import _shown
    from ragmeter.errors import InputError
    from ragmeter.judge import JudgeConfig

    if not isinstance(judge, JudgeConfig):
        raise InputError(f"judge must be a ragmeter.judge.JudgeConfig{' or None' if optional else ''}, got "
                         f"{_shown(judge)}: e.g. JudgeConfig(base_url='https://api.openai.com/v1', model='gpt-4o-mini')")
    return judge


def _judge_records(joined: pl.DataFrame) -> List[Dict[str, Any]]:
    """One record per case (golden set joined with the run) for the judge. It sees what the generator saw: the
    run's contexts (the retrieved texts when the run gives none).

    ``cost`` (the run's own cost per case) feeds the judge's cost accounting, and a case missing from the run
    is marked as such, as ``ragmeter judge`` does."""
    unknown = pl.col("retrieved_null").fill_null(False) if "retrieved_null" in joined.columns else pl.lit(False)
    columns = joined.select("id", "question", "reference_answer", "answer", "category", "contexts", "cost",
                            pl.col("missing_from_run").alias("missing_run"), unknown.alias("_unknown"))
    records = []
    for row in columns.iter_rows(named=True):
        # a case whose run record gives 'retrieved': null and no contexts: what its generator saw is unknown
        unknown_contexts = row.pop("_unknown") and not row["contexts"]
        records.append({**row, "contexts": None if unknown_contexts else row["contexts"] or []})
    return records


def _with_extra_fields(records: List[Dict[str, Any]], judge: Any, golden: Any, run: Any) -> List[Dict[str, Any]]:
    """The records with the input fields custom metrics read beyond the case fields (a golden set's ``policy``,
    a run's ``citations``), taken by id from the golden set, then the run, as given."""
    from ragmeter.judge.custom import CASE_FIELDS
    from ragmeter.judge.metrics import BUILTIN_METRICS

    wanted = {f for name in judge.metrics if name not in BUILTIN_METRICS
              for f in getattr(judge.implementation(name), "fields", ()) if f not in CASE_FIELDS}
    if not wanted:
        return records
    found: Dict[str, Dict[str, Any]] = {}
    for source, name in ((golden, "golden"), (run, "run")):
        for rec in _raw_records(source, name):
            if isinstance(rec, dict) and rec.get("id") is not None:
                values = {f: rec[f] for f in wanted if rec.get(f) is not None}
                found.setdefault(str(rec["id"]), {}).update(values)
    return [{**found.get(str(r["id"]), {}), **r} for r in records]


def _raw_records(source: Any, name: str) -> List[Any]:
    """The records of an input as given (the loaders keep only the fields they know), read as the loaders read
    the file (any encoding, a JSON array, Parquet by its content): read here as UTF-8 lines, a UTF-16 golden set
    was a traceback and a JSON array's fields were found in none of the cases."""
    if isinstance(source, (str, Path)):
        from ragmeter.dataset import raw_records

        return raw_records(source, name=name, what="golden sets" if name == "golden" else "run files")
    if isinstance(source, pl.DataFrame):
        return source.to_dicts()
    if type(source).__module__.split(".")[0] == "pandas":
        return pl.from_pandas(source).to_dicts()
    return list(source) if isinstance(source, (list, tuple)) else []


_ESTIMATE_COUNTS = ("calls", "cached_calls", "prompt_tokens", "completion_tokens", "embedding_tokens")


def estimate_eval(golden: Any, run: Any, judge: Any, *, repeat: int = 1,
                  metrics: Optional[Sequence[Any]] = None) -> Dict[str, Any]:
    """What :func:`run_eval` would spend on the judge (``ragmeter eval --dry-run``); nothing is sent or written.

    Repeat 1 may be answered from the cache; repeats 2..N bypass it, so each of them is estimated without the
    cache. The counts and costs are the totals over all repeats; ``per_repeat`` keeps the two estimates apart.
    """
    from dataclasses import replace

    from ragmeter.judge import run_sync
    from ragmeter.retrieval import _prepared_match

    from ragmeter.api import case_source

    repeat = _check_repeat(repeat)
    judge = _with_metrics(_check_judge(judge, optional=False), metrics)
    golden_in, run_in = case_source(golden, "golden"), case_source(run, "run")
    collected = _collected_repeats(golden_in, run_in, repeat)
    if collected is not None:
        estimates = [run_sync(_with_extra_fields(_judge_records(_prepared_match(golden_in, rr.frame).joined), judge,
                                                 golden_in, rr.records), replace(judge, dry_run=True)).estimate or {}
                     for rr in collected]
        return _sum_estimates(estimates)
    records = _with_extra_fields(_judge_records(_prepared_match(golden_in, run_in).joined), judge, golden_in, run_in)
    first = run_sync(records, replace(judge, dry_run=True)).estimate or {}
    if repeat == 1:
        return {**first, "repeat": 1}
    further = run_sync(records, replace(judge, dry_run=True, cache=None)).estimate or {}
    return _combine_estimates(first, further, repeat)


def _sum_estimates(estimates: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The estimate of judging every collected repeat once (each through the cache): counts and costs summed
    (a cost unknown in one repeat is unknown in the total); ``per_repeat`` keeps each repeat's."""
    def total(name: str) -> Optional[float]:
        costs = [e.get(name) for e in estimates]
        return None if any(c is None for c in costs) else round(sum(costs), 6)  # type: ignore[arg-type]

    combined = {**estimates[0], **{name: sum(e.get(name, 0) for e in estimates) for name in _ESTIMATE_COUNTS}}
    combined["cost_usd"], combined["cost_usd_max"] = total("cost_usd"), total("cost_usd_max")
    per_metric: Dict[str, Dict[str, Any]] = {}
    for e in estimates:
        for metric, m in (e.get("per_metric") or {}).items():
            into = per_metric.setdefault(metric, {})
            for name, value in m.items():
                into[name] = into.get(name, 0) + value
    combined["per_metric"] = per_metric
    keep = ("calls", "cached_calls", "prompt_tokens", "completion_tokens", "cost_usd")
    combined["repeat"] = 1
    combined["collected_repeats"] = len(estimates)
    combined["per_repeat"] = [{"repeat": r, **{n: e.get(n) for n in keep}} for r, e in enumerate(estimates, start=1)]
    return combined


def _combine_estimates(first: Dict[str, Any], further: Dict[str, Any], repeat: int) -> Dict[str, Any]:
    """``first`` plus ``repeat - 1`` times ``further``; a cost unknown in either is unknown in the total."""
    def total(a: Optional[float], b: Optional[float]) -> Optional[float]:
        return None if a is None or b is None else round(a + (repeat - 1) * b, 6)

    combined = {**first, **{name: first.get(name, 0) + (repeat - 1) * further.get(name, 0) for name in _ESTIMATE_COUNTS}}
    combined["cost_usd"] = total(first.get("cost_usd"), further.get("cost_usd"))
    combined["cost_usd_max"] = total(first.get("cost_usd_max"), further.get("cost_usd_max"))
    combined["per_metric"] = {
        metric: {name: m.get(name, 0) + (repeat - 1) * further.get("per_metric", {}).get(metric, {}).get(name, 0)
                 for name in m}
        for metric, m in (first.get("per_metric") or {}).items()
    }
    keep = ("calls", "cached_calls", "prompt_tokens", "completion_tokens", "cost_usd")
    combined["repeat"] = repeat
    combined["per_repeat"] = {"first": {n: first.get(n) for n in keep}, "each_further": {n: further.get(n) for n in keep}}
    combined["note"] = f"{first.get('note', '')}; repeats 2..{repeat} bypass the cache".lstrip("; ")
    return combined


def _run_info(summary: Dict[str, Any]) -> Dict[str, Any]:
    keep = ("calls", "cached_calls", "requests", "retries", "judge_cost_usd", "elapsed_s", "budget_reached")
    return {k: summary.get(k) for k in keep}


def _repeat_judge(records: List[Dict[str, Any]], judge: Any, repeat: int, first_summary: Dict[str, Any],
                  frames: List[pl.DataFrame]) -> Dict[str, Any]:
    """Judge repeats 2..``repeat`` without the cache; append their frames; return the ``repeats`` section."""
    from dataclasses import replace

    from ragmeter.repeats import repeat_summary

    runs = [{"repeat": 1, **_run_info(first_summary)}]
    summaries = [first_summary]
    spent = first_summary.get("judge_cost_usd") or 0.0
    for r in range(2, repeat + 1):
        options: Dict[str, Any] = {"cache": None}  # bypass: neither read nor written
        if getattr(judge, "budget", None) is not None:
            options["budget"] = max(0.0, judge.budget - spent)  # one budget for all repeats
        jr = _judged_repeat(records, replace(judge, **options), r, repeat, bypassed=True)
        frames.append(jr.frame())
        summaries.append(jr.summary)
        spent += jr.summary.get("judge_cost_usd") or 0.0
        runs.append({"repeat": r, **_run_info(jr.summary)})
    section = repeat_summary(frames)
    for metric, entry in section["metrics"].items():  # every per-repeat mean says how many rows it is over
        name = "correctness" if metric == "correct" else metric
        entry["n_total"] = [int(f.filter(pl.col("metric") == name).height) for f in frames]
    section["runs"] = runs
    # what --max-failed is checked against: the rows of every repeat, not repeat 1's alone (a repeat whose
    # calls all failed left its means n/a and the run exited 0)
    section["judge_incomplete"] = _sum_incomplete(summaries)
    for run_entry, s in zip(runs, summaries):
        run_entry["incomplete"] = s.get("incomplete")
    return section


def _with_tally(judge: Any) -> Any:
    """``judge`` counting into one :class:`ragmeter.judge.Tally` over all its repeats (the command line's own, else
    a new one), so that an interrupt can say what every repeat did."""
    from dataclasses import replace

    from ragmeter.judge import Tally

    return judge if judge.tally is not None else replace(judge, tally=Tally())


def _judged_repeat(records: List[Dict[str, Any]], cfg: Any, r: int, n: int, *, bypassed: bool) -> Any:
    """Judge repeat ``r`` of ``n``. Interrupted (Ctrl-C), the
    KeyboardInterrupt says what every repeat did and what the cache kept: the judge's own message counted the
    interrupted repeat alone, and in repeat 2 said 'no cache was used (--no-cache): a rerun sends every call
    again', while repeat 1's replies were in the cache. ``bypassed``: repeats 2..n skip the cache (``repeat=N``),
    else every repeat goes through it (collected repeats)."""
    from ragmeter.judge import run_sync

    tally = cfg.tally
    rows_done, rows_total = tally.rows_done, tally.rows_total
    try:
        jr = run_sync(records, cfg)
    except KeyboardInterrupt:
        if n == 1:
            raise  # one run: the judge's message says it all
        done, of = tally.rows_done - rows_done, tally.rows_total - rows_total
        raise KeyboardInterrupt(_interrupted_repeats(r, n, done, of, tally, bypassed)) from None
    return jr


def _repeats(first: int, last: int) -> str:
    return f"repeat {first}" if first == last else f"repeats {first} to {last}"


def _interrupted_repeats(r: int, n: int, done: int, of: int, tally: Any, bypassed: bool) -> str:
    """One line for an evaluation stopped in repeat ``r`` of ``n``: the repeats finished, how far repeat ``r``
    got, and what a rerun pays again."""
    from ragmeter._front import no_cache, option

    before = f"{_repeats(1, r - 1)} finished, " if r > 1 else ""
    after = f"; {_repeats(r + 1, n)} did not start" if r < n else ""
    said = f"interrupted in repeat {r} of {n}: {before}repeat {r} stopped after {done} of {of} judge rows{after}"
    if not tally.cache_path:
        return f"{said}; no cache was used ({no_cache()}): a rerun judges every repeat again" + "".join(tally.notes)
    kept = (f"{tally.cached} replies are cached in {tally.cache_path} ({tally.replayed} answered from it): a rerun "
            f"with the same {option('cache')} answers them without paying")
    if bypassed and n > 1:  # repeats 2..n neither read nor write the cache
        kept += f"; {_repeats(2, n)} bypass the cache, so a rerun judges them again"
    return f"{said}; {kept}" + "".join(tally.notes)


def _as_json_list(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _judge_settings(judge: Any) -> Optional[Dict[str, Any]]:
    """What was asked of the judge; the API key is not part of the configuration and never written."""
    if judge is None:
        return None
    from ragmeter.judge.urls import public_endpoint

    keep = ("base_url", "model", "metrics", "max_tokens", "max_retry_tokens", "concurrency", "rpm", "tpm",
            "budget", "embeddings_model", "relevancy_variant", "n_questions")
    # a tuple (JudgeConfig.metrics) as the list summary.json reads back, so a loaded result's summary is equal
    settings = {name: _as_json_list(getattr(judge, name, None)) for name in keep}
    settings["base_url"] = public_endpoint(settings["base_url"]) if settings["base_url"] else None  # no user:key@
    return settings
