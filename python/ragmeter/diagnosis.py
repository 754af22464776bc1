"""Per-case diagnosis: where did a RAG answer go wrong?

Input is the joined cases frame (one row per case): the retrieval columns of the
scorer (``id``, ``category``, ``labeled``, ``hit``, ...) and the judge columns
(``correct``, ``correctness_status``, ``faithfulness_score``,
``context_precision_score``, ...), plus the run's ``answer`` and the golden
``reference_answer`` when present. Missing optional columns count as null.
Everything is computed with Polars expressions over the whole frame.

Diagnosis (first matching rule wins)
------------------------------------
0. ``SYSTEM_FAILED``: the run file records the system's failure on the case (``run_error``); then
   ``NOT_IN_RUN``: the run file has no record of the case (``missing_from_run``). Either way the system's
   retrieval and answer were never seen, so the empty retrieval they are scored as says nothing about the
   retriever. Then ``RETRIEVAL_UNKNOWN``: the run's record gives ``"retrieved": null`` (``retrieved_null``),
   no chunk list: its retrieval was never seen either, whatever the answer.
1. ``RETRIEVAL_MISS``: labelled for retrieval and the relevant chunk was not in
   the top k (``labeled & !hit``) -- fix chunking/retrieval, not the prompt.
   ``MISS_BUT_CORRECT`` instead when the answer was still judged correct: look
   at the judge (too lenient?) or at the labels.
2. ``GENERATION_FAILED``: no answer (null or blank); never when the answers are unknown
   (:func:`answers_recorded`): no ``answer`` column (retrieval scored only: the answers were
   not read), or a run that records no answer for any case it holds (a retriever's run).
3. ``JUDGE_FAILED``: the correctness judge call failed (``correctness_status == "failed"``).
4. ``NOT_LABELED``: retrieval not scored: no retrieval labels (typically no-answer questions), or a
   labelled case whose ``hit`` is null (the run's chunks lack the file names its labels need). Except a
   no-answer case answered wrong (an invented answer where a refusal was due): ``PROMPT_OR_MODEL``, since
   there was nothing to retrieve.
5. ``OK``: the answer is correct.
6. ``PROMPT_OR_MODEL``: retrieved but answered wrong -- fix prompt or model.
7. ``NOT_JUDGED``: none of the above and no correctness verdict (judge skipped
   or not run); listed so such cases are never silently counted as OK or wrong.

No-answer cases
---------------
A case is a *no-answer* case when its category is ``noanswer`` (also
``no-answer`` / ``no_answer``), or when it is unlabelled for retrieval and has no
reference answer. For them a refusal that says the material lacks the answer is
correct and any other answer (an invented one) is not. ``answer_correct`` is the
judge's ``correct`` verdict when there is one (the judge wins), otherwise this
rule for no-answer cases, otherwise null.

Refusal detector: case-insensitive regular expressions for English ("the
provided context does not mention ...", "I don't know", "no information about",
"unable to determine/answer", "not mentioned in the documents", ...) and
Chinese ("文档中没有提到", "资料未提及", "无法回答", "没有相关信息", "不知道", ...);
see :data:`REFUSAL_PATTERNS`. It looks for such a statement anywhere in the
answer, so "the documents do not say; it is probably X" still counts as a
refusal -- the judge's verdict, when present, decides those.

Readings
--------
* Quadrants of context precision x answer quality: precision is *high* when
  ``context_precision_score >= 0.5`` (:data:`CONTEXT_PRECISION_HIGH`), quality is
  *high* when ``answer_correct`` is true. ``high/high`` retriever fine;
  ``high/low`` generation problem; ``low/high`` the first chunk suffices,
  consider a smaller k; ``low/low`` retrieval failure. Null when either is
  unknown.
* Faithfulness bands (score = supported statements / all statements):
  ``>=85%``, ``80-85%``, ``70-80% investigate``, ``<70%``; null when unscored.
"""
from __future__ import annotations

from typing import Any, Dict, List

import polars as pl

__all__ = [
    "DIAGNOSES",
    "QUADRANTS",
    "FAITHFULNESS_BANDS",
    "CONTEXT_PRECISION_HIGH",
    "REFUSAL_PATTERNS",
    "NOANSWER_CATEGORIES",
    "refusal_expr",
    "answers_recorded",
    "diagnose",
    "diagnosis_counts",
    "summarize",
]

DIAGNOSES: List[str] = [
    "SYSTEM_FAILED",
    "NOT_IN_RUN",
    "RETRIEVAL_UNKNOWN",
    "RETRIEVAL_MISS",
    "MISS_BUT_CORRECT",
    "GENERATION_FAILED",
    "JUDGE_FAILED",
    "NOT_LABELED",
    "OK",
    "PROMPT_OR_MODEL",
    "NOT_JUDGED",
]

DIAGNOSIS_HINTS: Dict[str, str] = {
    "SYSTEM_FAILED": "the RAG system failed on this case when the run was collected (its error is in the run file): "
                     "rerun `ragmeter collect`",
    "NOT_IN_RUN": "the run file has no record of this case (scored as an empty retrieval): the system was not "
                  "asked, or its record was lost; rerun it or check the run file",
    "RETRIEVAL_UNKNOWN": "the run record gives no chunk list ('retrieved': null; scored as an empty retrieval): "
                         "what was retrieved is unknown; fix the run file or the system's logging",
    "RETRIEVAL_MISS": "the answer chunk was not retrieved: fix chunking / retrieval, not the prompt",
    "MISS_BUT_CORRECT": "judged correct although the answer chunk was missed: check the judge (lenient?) or the labels",
    "GENERATION_FAILED": "no answer was produced",
    "JUDGE_FAILED": "the correctness judge failed on this case",
    "NOT_LABELED": "retrieval not scored: no retrieval labels (e.g. a no-answer question), or none the run's "
                   "chunks can be checked against (no file names)",
    "OK": "retrieved and answered correctly",
    "PROMPT_OR_MODEL": "retrieved but answered wrong, or a no-answer question answered instead of refused: "
                       "fix the prompt or the model",
    "NOT_JUDGED": "no correctness verdict (judge skipped or not run)",
}

#: context precision at or above this is "high"
CONTEXT_PRECISION_HIGH = 0.5

QUADRANTS: Dict[str, str] = {
    "high/high": "retriever fine",
    "high/low": "generation problem",
    "low/high": "first chunk suffices: consider a smaller k",
    "low/low": "retrieval failure",
}

FAITHFULNESS_BANDS: List[str] = [">=85%", "80-85%", "70-80% investigate", "<70%"]

NOANSWER_CATEGORIES = ["noanswer", "no-answer", "no_answer"]

#: refusal phrasings (matched case-insensitively anywhere in the answer)
REFUSAL_PATTERNS: List[str] = [
    # English: the material does not contain it
    r"\b(?:context|contexts|document|documents|docs|material|materials|source|sources|passages?|text|information|knowledge base|provided data)\b[^.!?\n]{0,40}\b(?:do|does|did)(?:\s+not|n't)\s+(?:contain|mention|say|state|include|provide|specify|cover|discuss|address|describe|give)",
    r"\bnot\s+(?:explicitly\s+)?(?:mentioned|provided|specified|stated|covered|included|available|found|given|described|discussed|addressed)\s+(?:in|within|by)\s+(?:the|any|these|this)\b",
    r"\bno\s+(?:relevant\s+|specific\s+|such\s+)?(?:information|mention|data|details?|evidence|record)\s+(?:about|on|regarding|of|for|in|is|was)\b",
    r"\bthere\s+is\s+no\s+(?:mention|information|record|data)\b",
    r"\b(?:insufficient|not\s+enough)\s+(?:information|context|data|evidence)\b",
    r"\b(?:i|we)\s+(?:do\s+not|don't|cannot|can't|could\s+not|couldn't|am\s+unable\s+to|are\s+unable\s+to)\s+(?:know|find|answer|determine|tell|say|locate)\b",
    r"\b(?:unable|not\s+able)\s+to\s+(?:find|determine|answer|locate|identify)\b",
    r"\bcannot\s+be\s+(?:determined|answered|found)\b",
    # Chinese
    r"(?:没有|并没有|未|并未|没)(?:有)?(?:提到|提及|涉及|说明|记载|包含|给出|找到|明确)",
    r"(?:没有|无|缺乏|缺少|找不到)(?:相关|有关|具体|足够)?(?:的)?(?:信息|内容|资料|说明|记录|数据)",
    r"(?:无法|不能|难以)(?:回答|确定|判断|找到|得知|确认|提供)",
    r"不知道",
    r"不包含",
]

_REFUSAL_REGEX = "(?i)(?:" + "|".join(REFUSAL_PATTERNS) + ")"

_OPTIONAL = {
    "category": pl.Utf8,
    "labeled": pl.Boolean,
    "hit": pl.Boolean,
    "answer": pl.Utf8,
    "reference_answer": pl.Utf8,
    "correct": pl.Boolean,
    "correctness_status": pl.Utf8,
    "correctness_score": pl.Float64,
    "faithfulness_score": pl.Float64,
    "context_precision_score": pl.Float64,
    "run_error": pl.Utf8,
    "missing_from_run": pl.Boolean,
    "retrieved_null": pl.Boolean,
}


def refusal_expr(column: str = "answer") -> pl.Expr:
    """True when the answer says the material lacks the answer (null answer -> False)."""
    return pl.col(column).fill_null("").str.contains(_REFUSAL_REGEX)


def answers_recorded(cases: pl.DataFrame) -> bool:
    """Whether ``cases`` holds the run's answers: an ``answer`` column with an answer (a blank one counts) for at
    least one case the run holds. A run that records none (a retriever's run, without ``answer``) leaves the
    answers unknown, not missing, as a ``ragmeter score`` folder without the column does. The cases that failed
    when collected or that the run lacks have no answer either way (``SYSTEM_FAILED`` / ``NOT_IN_RUN``), so
    they do not count; a run holding no other case counts as recording its answers."""
    if "answer" not in cases.columns:
        return False
    held = pl.lit(True)
    if "run_error" in cases.columns:
        held = held & pl.col("run_error").is_null()
    if "missing_from_run" in cases.columns:
        held = held & ~pl.col("missing_from_run").fill_null(False)
    answers = cases.filter(held).get_column("answer")
    return answers.len() == 0 or answers.null_count() < answers.len()


def _with_defaults(cases: pl.DataFrame) -> pl.DataFrame:
    if "reference_answer" not in cases.columns and "referenceAnswer" in cases.columns:
        cases = cases.with_columns(pl.col("referenceAnswer").alias("reference_answer"))
    missing = [pl.lit(None, dtype=t).alias(c) for c, t in _OPTIONAL.items() if c not in cases.columns]
    # a column holding only nulls may come typed as Arrow's null type: missing values, read as its type
    missing += [pl.col(c).cast(t) for c, t in _OPTIONAL.items() if cases.schema.get(c) == pl.Null]
    return cases.with_columns(missing) if missing else cases


def diagnose(cases: pl.DataFrame) -> pl.DataFrame:
    """Add ``is_noanswer``, ``refusal``, ``answer_correct``, ``diagnosis``,
    ``quadrant`` and ``faithfulness_band`` to ``cases`` (other columns kept).
    ``refusal`` is null for a case without an answer (missing from the run, or empty). Without answers (no
    ``answer`` column, as in a folder from ``ragmeter score``, or a run recording none: :func:`answers_recorded`)
    they are unknown, not missing: no case is ``GENERATION_FAILED`` and ``refusal`` / ``answer_correct`` are
    null."""
    original = list(cases.columns)
    df = _with_defaults(cases)
    answered = (pl.col("answer").is_not_null() & (pl.col("answer").str.strip_chars().str.len_chars() > 0)
                if answers_recorded(cases) else pl.lit(None, dtype=pl.Boolean))
    labeled = pl.col("labeled").fill_null(False)
    no_reference = pl.col("reference_answer").is_null() | (pl.col("reference_answer").str.strip_chars() == "")
    is_noanswer = pl.col("category").fill_null("").str.to_lowercase().is_in(NOANSWER_CATEGORIES) | (
        ~labeled & no_reference
    )
    df = df.with_columns(
        is_noanswer.alias("is_noanswer"),
        # null without an answer: nothing was refused, and nothing was answered either (a report's refusal
        # rate is over the answered cases)
        pl.when(answered).then(refusal_expr("answer")).otherwise(pl.lit(None, dtype=pl.Boolean)).alias("refusal"),
        answered.alias("_answered"),
    )
    df = df.with_columns(
        pl.when(pl.col("correct").is_not_null())
        .then(pl.col("correct"))
        .when(pl.col("is_noanswer") & pl.col("_answered"))
        .then(pl.col("refusal"))
        .otherwise(pl.lit(None, dtype=pl.Boolean))
        .alias("answer_correct")
    )
    correct = pl.col("answer_correct")
    df = df.with_columns(
        # before the miss: the system never answered, so its empty retrieval says nothing about the retriever
        pl.when(pl.col("run_error").is_not_null())
        .then(pl.lit("SYSTEM_FAILED"))
        .when(pl.col("missing_from_run").fill_null(False))
        .then(pl.lit("NOT_IN_RUN"))
        .when(pl.col("retrieved_null").fill_null(False))
        .then(pl.lit("RETRIEVAL_UNKNOWN"))
        .when(labeled & (pl.col("hit") == False))  # noqa: E712 (null-aware Polars comparison)
        .then(pl.when(correct.fill_null(False)).then(pl.lit("MISS_BUT_CORRECT")).otherwise(pl.lit("RETRIEVAL_MISS")))
        .when(~pl.col("_answered"))
        .then(pl.lit("GENERATION_FAILED"))
        .when(pl.col("correctness_status") == "failed")
        .then(pl.lit("JUDGE_FAILED"))
        .when(~labeled | pl.col("hit").is_null())
        # retrieval not scored; a no-answer question has nothing to retrieve, so an invented answer to it is
        # the generator's failure, never hidden among the unlabelled cases
        .then(pl.when(pl.col("is_noanswer") & (correct == False))  # noqa: E712
              .then(pl.lit("PROMPT_OR_MODEL")).otherwise(pl.lit("NOT_LABELED")))
        .when(correct == True)  # noqa: E712
        .then(pl.lit("OK"))
        .when(correct == False)  # noqa: E712
        .then(pl.lit("PROMPT_OR_MODEL"))
        .otherwise(pl.lit("NOT_JUDGED"))
        .alias("diagnosis"),
        _quadrant_expr().alias("quadrant"),
        _band_expr().alias("faithfulness_band"),
    )
    added = ["is_noanswer", "refusal", "answer_correct", "diagnosis", "quadrant", "faithfulness_band"]
    return df.select([c for c in original if c not in added] + added)


def _quadrant_expr() -> pl.Expr:
    cp = pl.col("context_precision_score")
    q = pl.col("answer_correct")
    hi_cp = pl.when(cp >= CONTEXT_PRECISION_HIGH).then(pl.lit("high")).otherwise(pl.lit("low"))
    hi_q = pl.when(q).then(pl.lit("high")).otherwise(pl.lit("low"))
    return (
        pl.when(cp.is_null() | cp.is_nan() | q.is_null())
        .then(pl.lit(None, dtype=pl.Utf8))
        .otherwise(pl.concat_str([hi_cp, hi_q], separator="/"))
    )


def _band_expr() -> pl.Expr:
    f = pl.col("faithfulness_score")
    return (
        pl.when(f.is_null() | f.is_nan())
        .then(pl.lit(None, dtype=pl.Utf8))
        .when(f >= 0.85)
        .then(pl.lit(FAITHFULNESS_BANDS[0]))
        .when(f >= 0.80)
        .then(pl.lit(FAITHFULNESS_BANDS[1]))
        .when(f >= 0.70)
        .then(pl.lit(FAITHFULNESS_BANDS[2]))
        .otherwise(pl.lit(FAITHFULNESS_BANDS[3]))
    )


def _counts(df: pl.DataFrame, column: str, order: List[str]) -> Dict[str, int]:
    vc = df.get_column(column).drop_nulls().value_counts()
    got = dict(zip(vc.get_column(column).to_list(), vc.get_column("count").to_list()))
    return {k: int(got.get(k, 0)) for k in order}


def diagnosis_counts(diagnosed: pl.DataFrame) -> Dict[str, int]:
    """Cases per diagnosis, every label of :data:`DIAGNOSES` in its order (0 included): summary.json's
    ``diagnosis``."""
    return _counts(diagnosed, "diagnosis", DIAGNOSES)


def summarize(diagnosed: pl.DataFrame) -> Dict[str, Any]:
    """Counts over a frame returned by :func:`diagnose`.

    ``refusal`` reports the refusal rate among answered cases, split into
    no-answer cases (where refusing is right) and answerable cases (where a
    refusal is a false refusal).
    """
    df = _with_defaults(diagnosed if "diagnosis" in diagnosed.columns else diagnose(diagnosed))
    n = df.height
    # without the answers, eval's stored refusal (null for a case not answered) says which cases were answered
    answered = df.filter(pl.col("answer").is_not_null() & (pl.col("answer").str.strip_chars().str.len_chars() > 0)
                         if "answer" in diagnosed.columns else pl.col("refusal").is_not_null())

    def rate(sub: pl.DataFrame) -> Dict[str, Any]:
        k = int(sub.get_column("refusal").sum()) if sub.height else 0
        return {"refusals": k, "answered": sub.height, "rate": (k / sub.height) if sub.height else None}

    noans = answered.filter(pl.col("is_noanswer"))
    return {
        "n_total": n,
        "diagnosis": _counts(df, "diagnosis", DIAGNOSES),
        "quadrants": _counts(df, "quadrant", list(QUADRANTS)),
        "faithfulness_bands": _counts(df, "faithfulness_band", FAITHFULNESS_BANDS),
        "refusal": {
            "overall": rate(answered),
            "noanswer": rate(noans),
            "answerable": rate(answered.filter(~pl.col("is_noanswer"))),
            "noanswer_correct": int(noans.get_column("answer_correct").fill_null(False).sum()) if noans.height else 0,
        },
    }
