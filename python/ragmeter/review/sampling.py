"""Which cases a human reviews: the strata of a results folder.

Every case with a correctness verdict or a failed correctness call falls in one stratum:

* ``judge_incorrect`` (A): the judge said incorrect; all of them are reviewed;
* ``miss_but_correct`` (B): the answer chunk was not retrieved but the judge said correct; all reviewed;
* ``judge_failed``: the correctness call failed; all reviewed;
* ``rest``: judged correct otherwise. A *random* part of it is reviewed (stratum C, ``random``): the cases the
  run sampled at run time (``review_reason == "sampled"``), or with ``--random N`` a seeded random ``N`` of the
  rest (default 4 when the run has no ``review_reason``). The draw is a hash of the seed and the case id.

Cases without a verdict (skipped: missing from the run, not judged) are in no stratum and are counted apart.
A, B and judge-failed are chosen by the judge's outcome; only C is a random sample, and only C corrects the
judge's rate (see :mod:`ragmeter.review.importer`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import polars as pl

from ragmeter.errors import InputError

__all__ = ["STRATA", "STRATUM_LABELS", "DEFAULT_RANDOM_N", "Sample", "strata", "select_sample", "require_judged"]

STRATA = ("judge_incorrect", "miss_but_correct", "judge_failed", "random")
STRATUM_LABELS = {
    "judge_incorrect": "A (judged incorrect)",
    "miss_but_correct": "B (evidence missed, judged correct)",
    "judge_failed": "judge failed",
    "random": "C (random sample of the rest)",
    #: only in an import: a case judged correct that the export did not draw (a reviewer added it to the sheet)
    "outside_sample": "outside the drawn sample",
}
DEFAULT_RANDOM_N = 4


@dataclass
class Sample:
    ids: List[str]  # the reviewed cases
    stratum: Dict[str, str]  # id -> one of STRATA
    population: Dict[str, int]  # cases per stratum in the folder ("rest" for the pool C is drawn from)
    seed: int
    method: str  # how C was drawn
    random_n: int
    notes: List[str] = field(default_factory=list)


def require_judged(cases: pl.DataFrame, where: Any) -> None:
    """A folder without correctness verdicts has nothing to calibrate."""
    if not ({"correct", "correctness_status"} & set(cases.columns)):
        raise InputError(f"{Path(where) / 'cases.parquet'}: no judge results (no correctness verdicts): run "
                         "`ragmeter eval` with --base-url and --model and the correctness metric first")


def strata(cases: pl.DataFrame) -> pl.DataFrame:
    """``id``, ``judge_correct`` (null unless the correctness verdict is ok), ``judge_score``, ``stratum``
    (``judge_incorrect`` / ``miss_but_correct`` / ``judge_failed`` / ``rest``, null for unjudged cases)."""
    status = pl.col("correctness_status") if "correctness_status" in cases.columns else pl.lit("ok")
    correct = pl.col("correct") if "correct" in cases.columns else pl.lit(None, dtype=pl.Boolean)
    score = pl.col("correctness_score").cast(pl.Float64) if "correctness_score" in cases.columns else pl.lit(None, dtype=pl.Float64)
    ok = status.is_null() | (status == "ok")
    judge_correct = pl.when(ok).then(correct).otherwise(None)
    missed = pl.col("diagnosis") == "MISS_BUT_CORRECT" if "diagnosis" in cases.columns else pl.lit(False)
    stratum = (pl.when(status == "failed").then(pl.lit("judge_failed"))
               .when(judge_correct == False).then(pl.lit("judge_incorrect"))  # noqa: E712
               .when((judge_correct == True) & missed).then(pl.lit("miss_but_correct"))  # noqa: E712
               .when(judge_correct == True).then(pl.lit("rest"))  # noqa: E712
               .otherwise(pl.lit(None, dtype=pl.Utf8)))
    return cases.select(pl.col("id").cast(pl.Utf8), judge_correct.alias("judge_correct"),
                        pl.when(ok).then(score).otherwise(None).alias("judge_score"), stratum.alias("stratum"))


def select_sample(cases: pl.DataFrame, summary: Dict[str, Any], *, random_n: Optional[int] = None,
                  seed: Optional[int] = None) -> Sample:
    """The stratified sample of a results folder's cases (see the module's doc)."""
    from ragmeter.calibration import DEFAULT_REVIEW_SEED, review_draw

    review = ((summary.get("settings") or {}).get("review") or {}) if isinstance(summary.get("settings"), dict) else {}
    seed_given = seed
    seed = int(seed if seed is not None else review.get("seed", DEFAULT_REVIEW_SEED))
    table = strata(cases)
    if "review_reason" in cases.columns:
        table = table.with_columns(cases.get_column("review_reason").cast(pl.Utf8).alias("review_reason"))
    counts = table.get_column("stratum").fill_null("unjudged").value_counts()
    population = {s: 0 for s in ("judge_incorrect", "miss_but_correct", "judge_failed", "rest", "unjudged")}
    population.update(dict(zip(counts.get_column("stratum").to_list(), counts.get_column("count").to_list())))
    rest = table.filter(pl.col("stratum") == "rest").get_column("id").to_list()
    if random_n is None and "review_reason" in table.columns:
        sampled = set(table.filter(pl.col("review_reason") == "sampled").get_column("id").to_list())
        chosen = [i for i in rest if i in sampled]
        method = f"sampled at run time (rate {review.get('rate')}, seed {review.get('seed')})"
    else:
        n = DEFAULT_RANDOM_N if random_n is None else int(random_n)
        if n < 0:
            raise InputError("--random: must be 0 or more")
        chosen = sorted(rest, key=lambda i: review_draw(seed, i))[:n]
        method = f"seeded random {len(chosen)} of the {len(rest)} other cases judged correct (seed {seed})"
    stratum = {row["id"]: row["stratum"] for row in table.iter_rows(named=True)
               if row["stratum"] in ("judge_incorrect", "miss_but_correct", "judge_failed")}
    stratum.update({i: "random" for i in chosen})
    notes = []
    if random_n is None and "review_reason" in table.columns and seed_given is not None:
        notes.append(f"--seed {seed_given} orders the cards; stratum C is the run's own sample (eval --review-seed): "
                     "add --random N for a draw of that seed")
    if rest and not chosen:
        notes.append(f"none of the {len(rest)} other cases judged correct is in the sample (stratum C is empty): "
                     "the prediction-powered estimate will have no random label to correct the judge's rate with; "
                     "add some with --random N")
    if population["unjudged"]:
        notes.append(f"{population['unjudged']} case(s) without a correctness verdict (skipped, not judged) are not "
                     "in the sample")
    ids = [i for i in table.get_column("id").to_list() if i in stratum]
    return Sample(ids, stratum, population, seed, method, len(chosen), notes)
