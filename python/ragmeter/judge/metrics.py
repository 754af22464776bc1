"""Judge metrics. Each takes one case and returns the fields of its result row.

A metric returns a :class:`MetricResult`; the runner adds status, cost and
latency. Scores are never invented: a metric with nothing to score says so
(``outcome="no_claims"`` with a null score, or a ``skipped`` status with the
reason), and a failed call raises so the row is recorded as ``failed``.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ragmeter._text import whole_number

from . import prompts as P
from .engine import Engine, ParseError, RowStats

__all__ = ["Case", "MetricResult", "Skip", "METRICS", "BUILTIN_METRICS", "metric_scale", "DEFAULT_METRICS", "NO_ANSWER_CATEGORIES",
           "relevancy_variants", "faithfulness_band"]

DEFAULT_METRICS = ("correctness", "faithfulness", "answer_relevancy", "context_precision", "context_recall")
#: categories whose cases have no answer in the corpus: an honest "the material does not say" is right there
NO_ANSWER_CATEGORIES = frozenset({"no_answer", "no-answer", "noanswer", "unanswerable", "out_of_scope",
                                  "out-of-scope", "negative"})


class Skip(Exception):
    """The case lacks what this metric needs (no answer, no reference, no contexts)."""


@dataclass
class Case:
    id: str
    question: str
    reference_answer: Optional[str] = None
    answer: Optional[str] = None
    contexts: List[str] = field(default_factory=list)
    category: Optional[str] = None
    no_answer: bool = False     #: the corpus holds no answer (from ``no_answer`` or the category)
    system_cost: Optional[float] = None
    missing_run: bool = False   #: the id is in the golden set but not in the run
    #: the record gives its contexts (a list, maybe empty: nothing retrieved); False when it has neither
    #: ``contexts`` nor a ``retrieved`` list, so what the generator saw is unknown
    contexts_given: bool = True
    extra: Dict[str, Any] = field(default_factory=dict)  #: the record's other fields (custom metrics read them)

    @classmethod
    def from_record(cls, rec: Mapping[str, Any], no_answer_categories: frozenset = NO_ANSWER_CATEGORIES) -> "Case":
        """A case from a record under any spelling the golden set and the run accept (README "Formats":
        ``user_input``/``response``/``reference``/``retrieved_contexts``, DeepEval's, ...): a ragas-named file
        was read as questions without answers, every row skipped and nothing measured."""
        from ragmeter import dataset as D

        case_id = _first(rec, D.ID_NAMES)
        if case_id is None:
            raise ValueError("record without an id")
        contexts = rec.get("contexts")
        retrieved = _first(rec, D.RETRIEVED_NAMES)
        contexts_given = contexts is not None or retrieved is not None
        if contexts is None and retrieved is not None:
            contexts = [r if isinstance(r, str) else (_first(r, D.CHUNK_ALIASES["text"]) or "")
                        for r in retrieved if isinstance(r, (str, Mapping))]
        category = rec.get("category")
        flag = rec.get("no_answer")
        no_answer = bool(flag) if flag is not None else (
            category is not None and str(category).strip().lower() in no_answer_categories)
        cost = rec.get("cost", rec.get("system_cost"))
        return cls(
            id=str(case_id), question=str(_first(rec, D.QUESTION_NAMES) or ""),
            reference_answer=_text_or_none(_first(rec, D.GOLDEN_ALIASES["reference_answer"])),
            answer=_text_or_none(_first(rec, D.ANSWER_NAMES)),
            contexts=[str(c) for c in (contexts or []) if c is not None], category=category,
            no_answer=no_answer,
            system_cost=float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None,
            missing_run=bool(rec.get("missing_run", False)), contexts_given=contexts_given,
            extra={k: v for k, v in rec.items() if k not in _RECORD_FIELDS},
        )


_RECORD_FIELDS = frozenset({"id", "question", "reference_answer", "answer", "contexts", "retrieved", "category",
                            "no_answer", "cost", "system_cost", "missing_run"})


def _first(rec: Mapping[str, Any], names: Sequence[str]) -> Any:
    """The value of the first of ``names`` that ``rec`` gives (not None)."""
    return next((rec[n] for n in names if rec.get(n) is not None), None)


def _text_or_none(v: Any) -> Optional[str]:
    if v is None:
        return None
    s = str(v)
    return s if s.strip() else None


@dataclass
class MetricResult:
    score: Optional[float]
    outcome: str = "scored"            #: scored, no_claims, honest_no_answer, no_contexts
    reason: Optional[str] = None
    correct: Optional[bool] = None
    claims: Optional[List[Any]] = None
    verdicts: Optional[List[Any]] = None
    questions: Optional[List[Any]] = None
    extra: Dict[str, Any] = field(default_factory=dict)


# -- validation helpers ------------------------------------------------------------------------------
def _binary(v: Any, where: str) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)) and v in (0, 1):
        return int(v)
    if isinstance(v, str) and v.strip().lower() in ("1", "0", "yes", "no", "true", "false"):
        return 1 if v.strip().lower() in ("1", "yes", "true") else 0
    raise ParseError(f"{where} must be 0 or 1, got {v!r}")


def _list(data: Mapping[str, Any], key: str) -> List[Any]:
    v = data.get(key)
    if not isinstance(v, list):
        raise ParseError(f'missing list "{key}"')
    return v


def _indexed(items: List[Any], n: int, value_key: str, conv: Callable[[Any, str], Any]) -> List[Any]:
    """Items carrying ``index`` and ``value_key``; exactly one per position 0..n-1."""
    if len(items) != n:
        raise ParseError(f"expected {n} items, got {len(items)}")
    out: List[Any] = [None] * n
    for pos, item in enumerate(items):
        if not isinstance(item, dict) or value_key not in item:
            raise ParseError(f'item {pos} has no "{value_key}"')
        idx = item.get("index", pos)
        if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < n or out[idx] is not None:
            raise ParseError(f"item {pos}: bad or repeated index {idx!r}")
        out[idx] = {**item, value_key: conv(item[value_key], f"item {pos} {value_key}")}
    return out


def _language(case: Case, forced: str) -> str:
    return forced if forced in P.LANGUAGES else P.detect_language(case.question)


# -- metrics --------------------------------------------------------------------------------------------
async def correctness(engine: Engine, case: Case, stats: RowStats, opts: "MetricOptions") -> MetricResult:
    if case.answer is None:
        raise Skip("the run has no answer for this case")
    if case.reference_answer is None:
        raise Skip("no reference_answer in the golden set")

    def validate(d: Dict[str, Any]) -> MetricResult:
        score = d.get("score")
        number = whole_number(score) if isinstance(score, str) else None
        if number is not None:  # "4" for 4; a text that is no whole number stays a text, refused below
            score = number
        if isinstance(score, bool) or not isinstance(score, (int, float)) or score not in (1, 2, 3, 4, 5):
            raise ParseError(f'"score" must be an integer 1-5, got {score!r}')
        correct = d.get("correct")
        if not isinstance(correct, bool):
            raise ParseError(f'"correct" must be true or false, got {correct!r}')
        reason = d.get("reason")
        return MetricResult(score=float(score), correct=correct, reason=str(reason) if reason is not None else None)

    payload = {"question": case.question, "reference_answer": case.reference_answer, "answer": case.answer,
               "contexts": case.contexts}
    return await engine.ask(P.CORRECTNESS, payload, _language(case, opts.language), validate, stats)


def statements_of(d: Dict[str, Any]) -> List[str]:
    """The statements of a faithfulness reply (blank ones dropped)."""
    items = _list(d, "statements")
    out = []
    for i, s in enumerate(items):
        if not isinstance(s, str):
            raise ParseError(f"statement {i} is not a string")
        if s.strip():
            out.append(s.strip())
    return out


async def faithfulness(engine: Engine, case: Case, stats: RowStats, opts: "MetricOptions") -> MetricResult:
    if case.answer is None:
        raise Skip("the run has no answer for this case")
    if not case.contexts_given:  # against no context every claim would read as invented
        raise Skip("the run gives no contexts for this case (no 'contexts', 'retrieved' null or absent)")
    lang = _language(case, opts.language)
    statements = await engine.ask(P.FAITHFULNESS_STATEMENTS, {"question": case.question, "answer": case.answer},
                                  lang, statements_of, stats)
    if not statements:
        return MetricResult(score=None, outcome="no_claims", reason="the answer makes no claim", claims=[])
    if not case.contexts:
        verdicts: List[Dict[str, Any]] = [{"index": i, "verdict": 0, "reason": "no retrieved context"}
                                          for i in range(len(statements))]
    else:
        verdicts = await engine.ask(
            P.FAITHFULNESS_VERDICTS, {"contexts": case.contexts, "statements": statements}, lang,
            lambda d: _indexed(_list(d, "verdicts"), len(statements), "verdict", _binary), stats)
    supported = sum(int(v["verdict"]) for v in verdicts)
    score = supported / len(statements)
    return MetricResult(score=score, reason=f"{supported} of {len(statements)} statements supported",
                        claims=statements, verdicts=verdicts, extra={"band": faithfulness_band(score)})


def faithfulness_band(score: Optional[float]) -> Optional[str]:
    """Report bands: >= 85%, >= 80%, 70-80% (investigate), < 70%."""
    if score is None or (isinstance(score, float) and math.isnan(score)):
        return None
    if score >= 0.85:
        return ">=85%"
    if score >= 0.80:
        return ">=80%"
    if score >= 0.70:
        return "70-80% investigate"
    return "<70%"


def relevancy_variants(similarities: Sequence[float], noncommittal: Sequence[bool]) -> Dict[str, float]:
    """``hard``: 0 if any question is noncommittal; ``ragas``: 0 only if all are; ``soft``: mean x (1 - share)."""
    n = len(similarities)
    if n == 0 or n != len(noncommittal):
        raise ValueError("need one noncommittal flag per similarity, at least one")
    mean = float(sum(similarities)) / n
    share = sum(bool(x) for x in noncommittal) / n
    return {
        "hard": 0.0 if share > 0 else mean,
        "ragas": 0.0 if share == 1.0 else mean,
        "soft": mean * (1.0 - share),
    }


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of two embeddings; vectors it is not defined for (a zero vector, NaN, other dimensions: a
    cached reply from before the client checked them) fail the row as ``bad_embeddings``, never score 0."""
    import numpy as np

    from .client import JudgeCallError

    va = np.asarray([math.nan if x is None else x for x in a], dtype=float)
    vb = np.asarray([math.nan if x is None else x for x in b], dtype=float)
    na, nb = float(np.linalg.norm(va)), float(np.linalg.norm(vb)) if va.shape == vb.shape else 0.0
    if va.shape != vb.shape or not (math.isfinite(na) and math.isfinite(nb)) or na == 0.0 or nb == 0.0:
        raise JudgeCallError(f"the embeddings endpoint returned unusable vectors: no cosine between vectors of "
                             f"dimensions {va.size} and {vb.size} and norms {na:g} and {nb:g}", kind="bad_embeddings",
                             attempts=[])
    return float(np.dot(va, vb) / (na * nb))


_GRADES = {"same": 1.0, "partial": 0.5, "different": 0.0}


def _grade(v: Any, where: str) -> float:
    if isinstance(v, str) and v.strip().lower() in _GRADES:
        return _GRADES[v.strip().lower()]
    raise ParseError(f"{where} must be same, partial or different, got {v!r}")


def relevancy_questions(d: Dict[str, Any], n: int) -> List[Dict[str, Any]]:
    """The first ``n`` generated questions of an answer_relevancy reply, each with its noncommittal flag."""
    items = _list(d, "questions")
    out = []
    for i, q in enumerate(items[:n]):
        if not isinstance(q, dict) or not isinstance(q.get("question"), str) or not q["question"].strip():
            raise ParseError(f'question {i} needs a non-empty "question" string')
        nc = q.get("noncommittal")
        if not isinstance(nc, bool):
            nc = bool(_binary(nc, f"question {i} noncommittal"))
        out.append({"question": q["question"].strip(), "noncommittal": nc})
    if not out:
        raise ParseError("no question generated")
    return out


async def answer_relevancy(engine: Engine, case: Case, stats: RowStats, opts: "MetricOptions") -> MetricResult:
    if case.answer is None:
        raise Skip("the run has no answer for this case")
    lang = _language(case, opts.language)
    n = opts.n_questions
    questions = await engine.ask(P.RELEVANCY_QUESTIONS, {"answer": case.answer, "n": n}, lang,
                                 lambda d: relevancy_questions(d, n), stats)
    flags = [q["noncommittal"] for q in questions]
    texts = [q["question"] for q in questions]
    if engine.client.config.embeddings_model:
        vectors = await engine.embed([case.question] + texts, stats)
        sims = [_cosine(vectors[0], v) for v in vectors[1:]]
        method = "cosine"
    else:
        grades = await engine.ask(
            P.RELEVANCY_GRADED, {"question": case.question, "generated_questions": texts}, lang,
            lambda d: _indexed(_list(d, "grades"), len(texts), "grade", _grade), stats)
        sims = [g["grade"] for g in grades]
        method = "graded"
    for q, s in zip(questions, sims):
        q["similarity"] = s
    share = sum(flags) / len(flags)
    if case.no_answer and opts.honest_no_answer and any(flags):
        variants = {"hard": 1.0, "ragas": 1.0, "soft": 1.0}
        outcome, reason = "honest_no_answer", "no-answer case answered non-committally, as it should be"
    else:
        variants = relevancy_variants(sims, flags)
        outcome, reason = "scored", f"mean {method} similarity {sum(sims) / len(sims):.3f}, noncommittal {share:.0%}"
    return MetricResult(score=variants[opts.relevancy_variant], outcome=outcome, reason=reason, questions=questions,
                        extra={"ar_hard": variants["hard"], "ar_ragas": variants["ragas"], "ar_soft": variants["soft"],
                               "ar_similarity": method, "ar_noncommittal": share,
                               "ar_variant": opts.relevancy_variant})


def _ap_fns():  # type: ignore[no-untyped-def]
    try:
        from ragmeter.metrics import average_precision, precision
        from ragmeter._core import rank_metrics  # noqa: F401  (the kernel behind them; absent in older builds)
    except ImportError:  # ragmeter.metrics or its kernel not available: same definitions, local
        return _ap, _precision
    return average_precision, precision


def _ap(verdicts: Sequence[int]) -> float:
    """Fallback only: sum over relevant ranks of precision@k, divided by the relevant items retrieved."""
    hits = 0
    total = 0.0
    for k, v in enumerate(verdicts, start=1):
        if v:
            hits += 1
            total += hits / k
    return total / hits if hits else 0.0


def _precision(verdicts: Sequence[int]) -> float:
    return sum(1 for v in verdicts if v) / len(verdicts) if verdicts else 0.0


async def context_precision(engine: Engine, case: Case, stats: RowStats, opts: "MetricOptions") -> MetricResult:
    if not case.contexts:
        raise Skip("no retrieved contexts")
    if opts.precision_against == "reference" or (opts.precision_against == "auto" and case.reference_answer):
        if case.reference_answer is None:
            raise Skip("no reference_answer in the golden set")
        target, kind = case.reference_answer, "reference"
    else:
        if case.answer is None:
            raise Skip("no reference_answer and no answer to judge usefulness against")
        target, kind = case.answer, "answer"
    chunks = [{"index": i, "text": t} for i, t in enumerate(case.contexts)]
    verdicts = await engine.ask(
        P.CONTEXT_PRECISION, {"question": case.question, "target_kind": kind, "target": target, "chunks": chunks},
        _language(case, opts.language),
        lambda d: _indexed(_list(d, "verdicts"), len(chunks), "verdict", _binary), stats)
    flags = [v["verdict"] for v in verdicts]
    ap_fn, prec_fn = _ap_fns()
    ap = float(ap_fn(flags))
    prec = float(prec_fn(flags))
    return MetricResult(score=ap, reason=f"{sum(flags)} of {len(flags)} chunks useful (against the {kind})",
                        verdicts=verdicts, extra={"cp_ap": ap, "cp_precision": prec, "cp_against": kind})


async def context_recall(engine: Engine, case: Case, stats: RowStats, opts: "MetricOptions") -> MetricResult:
    if case.reference_answer is None:
        raise Skip("no reference_answer in the golden set")
    if not case.contexts:
        return MetricResult(score=0.0, outcome="no_contexts", reason="nothing was retrieved")

    def validate(d: Dict[str, Any]) -> List[Dict[str, Any]]:
        out = []
        for i, item in enumerate(_list(d, "statements")):
            if not isinstance(item, dict) or not isinstance(item.get("statement"), str):
                raise ParseError(f'statement {i} needs a "statement" string')
            if "attributed" not in item:
                raise ParseError(f'statement {i} has no "attributed"')
            out.append({**item, "attributed": _binary(item["attributed"], f"statement {i} attributed")})
        return out

    items = await engine.ask(
        P.CONTEXT_RECALL, {"question": case.question, "reference_answer": case.reference_answer,
                           "contexts": case.contexts}, _language(case, opts.language), validate, stats)
    if not items:
        return MetricResult(score=None, outcome="no_claims", reason="the reference answer makes no claim", claims=[])
    hits = sum(i["attributed"] for i in items)
    return MetricResult(score=hits / len(items), reason=f"{hits} of {len(items)} reference statements attributed",
                        claims=[i["statement"] for i in items], verdicts=items)


@dataclass(frozen=True)
class MetricOptions:
    n_questions: int = 3
    relevancy_variant: str = "ragas"      #: which variant fills ``score``: hard, ragas or soft
    honest_no_answer: bool = True         #: a non-committal answer on a no-answer case scores 1
    precision_against: str = "auto"       #: auto (reference when present), reference, answer
    language: str = "auto"                #: auto (from the question), en, zh


#: every metric the runner knows, by name: the built-in five and the registered custom ones
#: (:func:`ragmeter.judge.custom.register`; a bare coroutine ``fn(engine, case, stats, opts)`` works too). One
#: registration serves the runner, the dry-run estimate and the summary.
METRICS: Dict[str, Callable[..., Any]] = {
    "correctness": correctness,
    "faithfulness": faithfulness,
    "answer_relevancy": answer_relevancy,
    "context_precision": context_precision,
    "context_recall": context_recall,
}
BUILTIN_METRICS = frozenset(METRICS)


def metric_scale(name: str, implementation: Any = None) -> str:
    """The scale of the metric's ``score`` as the summary states it (``implementation``: the run's own object)."""
    if name == "correctness":
        return "1-5"
    m = implementation if implementation is not None else METRICS.get(name)
    label = getattr(m, "scale_label", None) or getattr(m, "scale", None)
    return label if isinstance(label, str) else "0-1"


def rubric_scale(implementation: Any) -> Optional[Dict[str, int]]:
    """``{"min", "max"}``: the integer scale a custom rubric (:class:`ragmeter.judge.RubricMetric`) is judged on
    before its score is mapped onto 0-1, as summary.json states it (``rubric_scale``) so that no reader parses the
    display text of ``scale``; None for any other metric."""
    from ragmeter.judge.custom import RubricMetric

    if not isinstance(implementation, RubricMetric):
        return None
    low, high = implementation._range()
    return {"min": low, "max": high}


def evidence_json(value: Any) -> Optional[str]:
    return None if value is None else json.dumps(value, ensure_ascii=False)
