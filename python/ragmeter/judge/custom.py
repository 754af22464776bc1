"""Custom judge metrics on the built-in engine: cache, retries, budget, limits, cost, repeats, dry-run estimates.

Two ways to write one:

* :class:`RubricMetric`: a rubric as data (criteria, optional evaluation steps and per-score descriptions);
  the judge replies ``{"score": <integer on the scale>, "reason": "..."}``, validated against the scale.
  The row's ``score`` is the rubric score mapped onto 0-1 (``(s - low) / (high - low)``) so that compare, gates
  and reports treat it like every other 0-1 metric; the raw score is kept in ``verdicts``, and with a
  ``pass_threshold`` (on the rubric's own scale) ``correct`` says whether the case passed.
* :func:`metric`: a decorator for a metric with its own prompt(s), output schema and scoring function.
  With ``prompt=`` and ``schema=`` the decorated function scores one validated reply: ``fn(reply, case)``;
  with ``prompts={"step": (instructions, schema), ...}`` it is a coroutine ``fn(ask, case)`` that asks the
  steps in turn (``await ask("step", payload)``), e.g. decompose-then-verdict.

Either is a :class:`Metric`: pass it in ``JudgeConfig(metrics=[...])`` (or ``ragmeter.evaluate(metrics=...)``)
or :func:`register` it. A reply that does not match the schema gets the engine's one repair turn, then
fails as ``unparsable``; a scoring function that raises fails its row as ``metric_error``.

Before any paid call (and in a dry run), :meth:`Metric.check` rejects a metric whose schema is invalid,
whose fields the data lacks, or whose scoring function raises on a sample reply, naming the metric and the
field (:class:`ragmeter.errors.InputError`, exit status 2 on the command line).

Two identities, kept apart:

* the *request* (:func:`prompt_version`): the prompt text is part of the cache key (the messages are), and its
  hash is part of the prompt version recorded in ``judge.parquet`` (``prompt_version``) and the summary
  (``prompts``): edit a prompt, a rubric or the fields sent and the cached replies are not reused (the messages
  differ); edit anything else and they are, since the judge would be asked exactly the same;
* the *definition* (:func:`definition`): the request (with the fields sent) plus everything else that decides
  the metric's value (the scoring function, the scale, the pass threshold, the schema a reply is parsed with),
  recorded in the summary (``definitions``); ``compare`` refuses two runs whose definitions of a metric differ,
  naming the part.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import json
import math
import numbers
import re
import textwrap
import types
from dataclasses import dataclass, field
from typing import (Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Set, Tuple, Union,
                    runtime_checkable)

from ragmeter._text import whole_number
from ragmeter.errors import InputError

from . import prompts as P
from .client import JudgeCallError
from .engine import BudgetExceeded, OutputError, ParseError
from .stop import Halt, JudgeStopped
from .metrics import METRICS, Case, MetricResult, Skip

__all__ = ["Metric", "RubricMetric", "FunctionMetric", "MetricError", "metric", "register", "resolve",
           "CASE_FIELDS", "SCHEMA_TYPES", "prompt_version", "definition", "function_identity"]

#: fields of a case a custom metric may put in its prompt; other fields come from the records (``Case.extra``)
CASE_FIELDS = ("question", "answer", "reference_answer", "contexts", "category")

#: schema type names -> the Python types a reply's value may have
SCHEMA_TYPES: Dict[str, Tuple[type, ...]] = {
    "int": (int,), "integer": (int,), "number": (int, float), "float": (int, float), "bool": (bool,),
    "boolean": (bool,), "string": (str,), "str": (str,), "list": (list,), "array": (list,), "object": (dict,),
}
_PY_TYPES = {int: "int", float: "number", bool: "bool", str: "string", list: "list", dict: "object"}
_SAMPLE = {"int": 1, "integer": 1, "number": 1.0, "float": 1.0, "bool": True, "boolean": True, "string": "sample",
           "str": "sample", "list": [], "array": [], "object": {}}
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class MetricError(Exception):
    """A custom metric's own code failed on a reply (not the judge): the row fails as ``metric_error``."""


_ENGINE_OUTCOMES = (Skip, ParseError, MetricError, BudgetExceeded, OutputError, JudgeCallError, Halt, JudgeStopped)


@runtime_checkable
class Metric(Protocol):
    """What the runner needs of a judge metric besides the built-in five."""

    name: str
    prompts: Sequence[P.Prompt]   #: every prompt it may send (their ids make ``prompt_version``)
    fields: Sequence[str]         #: the case fields it reads; a case without one is skipped (missing input)
    scale: str                    #: the scale of ``score`` as the summary states it, e.g. ``"0-1"``
    pass_threshold: Optional[float]

    async def __call__(self, engine: Any, case: Case, stats: Any, opts: Any) -> MetricResult: ...

    def check(self, cases: Sequence[Case]) -> None:
        """Raise :class:`InputError` naming the metric and field when it cannot run on these cases."""

    def planned_calls(self, case: Case, language: str) -> List[Tuple[P.Prompt, List[Dict[str, str]], int, bool]]:
        """(prompt, messages, expected output tokens, exact) per call it would send, for the dry-run estimate."""


# -- shared pieces -----------------------------------------------------------------------------------------
def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise InputError(f"custom metric name {name!r}: use lower-case letters, digits and _ (starting with a "
                         "letter), e.g. tone_check")
    return name


def _normalise_schema(metric_name: str, schema: Any, where: str = "schema") -> Dict[str, str]:
    """``{"key": "int" | int | ...}`` -> ``{"key": "int"}``; an invalid schema names the metric and the field."""
    if not isinstance(schema, Mapping) or not schema:
        raise InputError(f"metric {metric_name!r}: {where} must be a non-empty mapping of reply field -> type "
                         f"({', '.join(sorted(set(_PY_TYPES.values())))})")
    out: Dict[str, str] = {}
    for key, kind in schema.items():
        if isinstance(kind, type):
            kind = _PY_TYPES.get(kind, kind.__name__)
        if not isinstance(key, str) or not key or not isinstance(kind, str) or kind not in SCHEMA_TYPES:
            raise InputError(f"metric {metric_name!r}: {where} field {key!r} has type {kind!r}; choose from "
                             f"{', '.join(sorted(SCHEMA_TYPES))}")
        out[key] = kind
    return out


def _validate_reply(schema: Mapping[str, str], reply: Dict[str, Any]) -> Dict[str, Any]:
    """The reply when it has every schema field with the right type, else :class:`ParseError` (repair turn)."""
    for key, kind in schema.items():
        if key not in reply:
            raise ParseError(f'missing "{key}"')
        value = reply[key]
        number = whole_number(value) if isinstance(value, str) and kind in ("int", "integer") else None
        if number is not None:  # "4" for 4: a common, harmless slip
            value = number
        if isinstance(value, str) and kind in ("number", "float"):
            try:
                value = float(value.strip())
            except ValueError:
                pass
        if isinstance(value, bool) and kind not in ("bool", "boolean"):
            raise ParseError(f'"{key}" must be {kind}, got {value!r}')
        if kind in ("int", "integer") and isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, SCHEMA_TYPES[kind]):
            raise ParseError(f'"{key}" must be {kind}, got {value!r}')
        reply = {**reply, key: value}
    return reply


def _schema_line(schema: Mapping[str, str]) -> str:
    shown = {"int": "<integer>", "integer": "<integer>", "number": "<number>", "float": "<number>",
             "bool": "<true or false>", "boolean": "<true or false>", "string": '"<text>"', "str": '"<text>"',
             "list": "[...]", "array": "[...]", "object": "{...}"}
    return "Schema: {" + ", ".join(f'"{k}": {shown[v]}' for k, v in schema.items()) + "}"


def _prompt(metric_name: str, step: Optional[str], version: str, instructions: str) -> P.Prompt:
    """A versioned prompt whose version carries a hash of its text (``v1-1a2b3c4d``)."""
    digest = hashlib.sha256(instructions.encode("utf-8")).hexdigest()[:8]
    name = metric_name.replace("_", "-") + (f"-{step.replace('_', '-')}" if step else "")
    return P.Prompt(f"custom-{name}", f"{version}-{digest}", instructions)


def _case_value(case: Case, name: str) -> Any:
    return getattr(case, name) if name in CASE_FIELDS else case.extra.get(name)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, (str, list)) and not (value.strip() if isinstance(value, str) else value))


def _payload(metric_name: str, case: Case, fields: Sequence[str]) -> Dict[str, Any]:
    """The fields under evaluation; a case lacking one is skipped (missing input), never judged on half."""
    out = {}
    for name in fields:
        value = _case_value(case, name)
        if _missing(value):
            raise Skip(f"the case has no {name} (metric {metric_name})")
        out[name] = value
    return out


def _check_fields(metric_name: str, fields: Sequence[str], cases: Sequence[Case]) -> None:
    """Every field is a case field or present in at least one record; else an error before any call."""
    for name in fields:
        if name in CASE_FIELDS or not cases:
            continue
        if not any(name in c.extra for c in cases):
            raise InputError(f"metric {metric_name!r}: field {name!r} is in none of the {len(cases)} cases "
                             f"(case fields: {', '.join(CASE_FIELDS)}; other fields come from the input records)")


def _check_placeholders(metric_name: str, text: str, fields: Sequence[str]) -> None:
    """``{field}`` in a prompt must be one of the metric's fields (the judge sees only those)."""
    for ref in re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", text):
        if ref not in fields:
            raise InputError(f"metric {metric_name!r}: the prompt references field {ref!r}, which is not among "
                             f"its fields ({', '.join(fields)}); add it to fields or remove the reference")


def _to_result(metric_name: str, value: Any, scale: Tuple[float, float]) -> MetricResult:
    """What a scoring function returned -> a :class:`MetricResult`; a score off the scale is the metric's error."""
    if isinstance(value, MetricResult):
        result = value
    elif isinstance(value, tuple) and len(value) == 2:
        result = MetricResult(score=value[0], reason=None if value[1] is None else str(value[1]))
    else:
        result = MetricResult(score=value)
    score = result.score
    if score is None:
        return MetricResult(**{**result.__dict__, "outcome": "no_score" if result.outcome == "scored" else result.outcome})
    # numbers.Real: a numpy number (a count or mean taken with numpy) is a score as a Python one is
    if isinstance(score, bool) or not isinstance(score, numbers.Real) or not math.isfinite(score):
        raise MetricError(f"metric {metric_name!r}: the scoring function returned {score!r}, not a finite number")
    if not scale[0] <= score <= scale[1]:
        raise MetricError(f"metric {metric_name!r}: the scoring function returned {score!r}, outside its scale "
                          f"{scale[0]:g}-{scale[1]:g}")
    result.score = float(score)
    return result


def _check_score_type(metric_name: str, value: Any, case_id: str) -> None:
    """What a scoring function returned on a sample reply is a score: a number, (number, reason), a
    :class:`MetricResult` or None. A bool or a text would fail every row on the judge's paid replies; its range
    is not checked here, since a sample reply (1, "sample") is no real one."""
    if isinstance(value, MetricResult):
        score = value.score
    else:
        score = value[0] if isinstance(value, tuple) and len(value) == 2 else value
    if score is None or (isinstance(score, numbers.Real) and not isinstance(score, bool)):
        return
    raise InputError(f"metric {metric_name!r}: the scoring function returned {score!r} on a sample reply for case "
                     f"{case_id!r}, not a number: return a score on its scale (e.g. 1.0 if reply[...] else 0.0), "
                     "(score, reason) or None (checked before any call)")


def _drive(coro: Any) -> Any:
    """Run a coroutine that awaits nothing real (sample replies only) to its end, without an event loop."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise MetricError("awaits something other than ask(): cannot be checked or estimated without calls")


# -- rubric ----------------------------------------------------------------------------------------------
@dataclass
class RubricMetric:
    """A G-Eval-style rubric judged on the engine. ``fields`` are the case fields the judge sees."""

    name: str
    criteria: str
    scale: Tuple[int, int] = (1, 5)  # type: ignore[assignment]
    pass_threshold: Optional[float] = None
    fields: Sequence[str] = ("question", "answer")
    steps: Sequence[str] = ()
    score_descriptions: Mapping[Any, str] = field(default_factory=dict)
    version: str = "v1"
    #: the --metric-file / --metric-module it came from, named in the errors found when it is checked on the data
    source: Optional[str] = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_name(self.name)
        if not isinstance(self.criteria, str) or not self.criteria.strip():
            raise InputError(f"metric {self.name!r}: criteria must be a non-empty text")
        lo, hi = self._range()
        # the types are checked here, not left to float() or str.strip(): a rubric file's ``pass_threshold =
        # "high"`` or ``steps = [1, 2]`` is an input error naming the field, not a traceback
        _check_threshold(self.name, self.pass_threshold, lo, hi)
        self.fields = _field_names(self.name, self.fields)
        self.steps = (self.steps,) if isinstance(self.steps, str) else tuple(self.steps)
        for step in self.steps:
            if not isinstance(step, str):
                raise InputError(f"metric {self.name!r}: steps must be texts, got {step!r}")
        _check_version(self.name, self.version)
        for key, text in self.score_descriptions.items():
            score = key if isinstance(key, int) and not isinstance(key, bool) else whole_number(str(key))
            if score is None:
                raise InputError(f"metric {self.name!r}: score_descriptions field {key!r} is not an integer score")
            if not lo <= score <= hi:
                raise InputError(f"metric {self.name!r}: score_descriptions field {key!r} is outside the scale {lo}-{hi}")
            if not isinstance(text, str):
                raise InputError(f"metric {self.name!r}: score_descriptions field {str(key)!r} must be a text, "
                                 f"got {text!r}")
        self.prompts = (_prompt(self.name, None, self.version, self._instructions()),)
        prompt_texts = [self.criteria, *self.steps, *self.score_descriptions.values()]
        _check_placeholders(self.name, "\n".join(prompt_texts), self.fields)

    def _range(self) -> Tuple[int, int]:
        scale = tuple(self.scale) if isinstance(self.scale, (list, tuple)) else ()  # type: ignore[arg-type]
        if (len(scale) != 2 or any(isinstance(v, bool) or not isinstance(v, int) for v in scale)
                or not scale[0] < scale[1]):
            raise InputError(f"metric {self.name!r}: scale must be two integers (low, high) with low < high, "
                             f"got {self.scale!r}")
        return int(scale[0]), int(scale[1])

    @property
    def scale_label(self) -> str:
        lo, hi = self._range()
        return f"0-1 (rubric {lo}-{hi})"

    def _instructions(self) -> str:
        lo, hi = self._range()
        shown = ", ".join(f'"{f}"' for f in self.fields)
        parts = [f"Judge the fields {shown} on this criterion:", self.criteria.strip()]
        if self.steps:
            parts.append("Evaluation steps:")
            parts += [f"{i}. {s.strip()}" for i, s in enumerate(self.steps, start=1)]
        if self.score_descriptions:
            parts.append("Scores:")
            described = sorted((whole_number(str(k)), v) for k, v in self.score_descriptions.items())
            parts += [f"{score} = {v.strip()}" for score, v in reversed(described)]
        parts.append(f'"score" is an integer from {lo} (worst) to {hi} (best); "reason" says why in one or two '
                     "short sentences.")
        parts.append(f'Schema: {{"reason": "<one or two short sentences>", "score": <integer {lo}-{hi}>}}')
        return "\n".join(parts)

    def _verdict(self, reply: Dict[str, Any]) -> Tuple[int, Optional[str]]:
        lo, hi = self._range()
        off_scale = f'"score" must be an integer {lo}-{hi}, got {reply.get("score")!r}'
        try:
            score = _validate_reply({"score": "int"}, reply)["score"]
        except ParseError:
            if "score" not in reply:
                raise
            raise ParseError(off_scale) from None  # the wrong type: named with the scale, as correctness does
        if not lo <= score <= hi:
            raise ParseError(off_scale)
        reason = reply.get("reason")
        return score, None if reason is None else str(reason)

    async def __call__(self, engine: Any, case: Case, stats: Any, opts: Any) -> MetricResult:
        from .metrics import _language

        payload = _payload(self.name, case, self.fields)
        score, reason = await engine.ask(self.prompts[0], payload, _language(case, opts.language), self._verdict,
                                         stats)
        lo, hi = self._range()
        passed = None if self.pass_threshold is None else score >= float(self.pass_threshold)
        return MetricResult(score=(score - lo) / (hi - lo), reason=reason, correct=passed,
                            verdicts=[{"score": score, "scale": [lo, hi], "pass_threshold": self.pass_threshold}])

    def check(self, cases: Sequence[Case]) -> None:
        _check_fields(self.name, self.fields, cases)

    def planned_calls(self, case: Case, language: str) -> List[Tuple[P.Prompt, List[Dict[str, str]], int, bool]]:
        try:
            payload = _payload(self.name, case, self.fields)
        except Skip:
            return []
        return [(self.prompts[0], self.prompts[0].messages(payload, language), 80, True)]


# -- decorator -------------------------------------------------------------------------------------------
Scorer = Callable[..., Any]


@dataclass
class FunctionMetric:
    """A metric from :func:`metric`: its prompt(s), their schemas and the user's scoring function."""

    name: str
    fn: Scorer
    steps: Dict[str, Tuple[P.Prompt, Dict[str, str]]]
    fields: Sequence[str] = ("question", "answer")
    range: Tuple[float, float] = (0.0, 1.0)
    pass_threshold: Optional[float] = None
    #: the --metric-module it came from, named in the errors found when it is checked on the data
    source: Optional[str] = field(default=None, repr=False, compare=False)

    @property
    def prompts(self) -> Tuple[P.Prompt, ...]:
        return tuple(p for p, _ in self.steps.values())

    @property
    def scale(self) -> str:  # type: ignore[override]
        return f"{self.range[0]:g}-{self.range[1]:g}"

    @property
    def multi_step(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    async def __call__(self, engine: Any, case: Case, stats: Any, opts: Any) -> MetricResult:
        from .metrics import _language

        lang = _language(case, opts.language)
        payload = _payload(self.name, case, self.fields)

        async def ask(step: str, step_payload: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
            prompt, schema = self._step(step)
            return await engine.ask(prompt, dict(payload if step_payload is None else step_payload), lang,
                                    lambda d: _validate_reply(schema, d), stats)

        try:
            if self.multi_step:
                value = await self.fn(ask, case)
            else:
                prompt, schema = next(iter(self.steps.values()))
                # scored inside validate: a ParseError from the scoring function gets the repair turn too
                value = await engine.ask(prompt, payload, lang, lambda d: self.fn(_validate_reply(schema, d), case),
                                         stats)
        except _ENGINE_OUTCOMES:
            raise  # the engine's own outcomes: skipped, budget, failed call, unusable reply, a stopping run
        except (Exception, SystemExit) as exc:
            raise MetricError(f"metric {self.name!r}: the scoring function raised {type(exc).__name__}: {exc}") from None
        result = _to_result(self.name, value, self.range)
        if self.pass_threshold is not None and result.correct is None and result.score is not None:
            # the summary's pass_rate counts `correct`: without this every case "failed" whatever its score
            result.correct = result.score >= self.pass_threshold
        return result

    def _step(self, step: str) -> Tuple[P.Prompt, Dict[str, str]]:
        if step not in self.steps:
            raise MetricError(f"metric {self.name!r}: ask({step!r}) names no prompt; its prompts are "
                              f"{', '.join(self.steps)}")
        return self.steps[step]

    def _sample_run(self, case: Case, language: str,
                    calls: Optional[List[Tuple[P.Prompt, List[Dict[str, str]]]]] = None) -> Any:
        """Run the scoring function on sample replies (one per schema), recording the calls it would send."""
        payload = _payload(self.name, case, self.fields)

        async def ask(step: str, step_payload: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
            prompt, schema = self._step(step)
            if calls is not None:
                calls.append((prompt, prompt.messages(dict(payload if step_payload is None else step_payload),
                                                      language)))
            return {k: _SAMPLE[v] for k, v in schema.items()}

        if self.multi_step:
            return _drive(self.fn(ask, case))
        prompt, schema = next(iter(self.steps.values()))
        if calls is not None:
            calls.append((prompt, prompt.messages(payload, language)))
        return self.fn({k: _SAMPLE[v] for k, v in schema.items()}, case)

    def check(self, cases: Sequence[Case]) -> None:
        _check_fields(self.name, self.fields, cases)
        case = next((c for c in cases if not c.missing_run and _has_fields(c, self.fields)), None)
        if case is None:
            return
        try:
            value = self._sample_run(case, "en")
        except (ParseError, Skip):
            return  # the sample reply was rejected or the case skipped: what a real reply may do too
        except (Exception, SystemExit) as exc:
            raise InputError(f"metric {self.name!r}: the scoring function raised {type(exc).__name__}: {exc} "
                             f"on a sample reply for case {case.id!r} (checked before any call)") from None
        _check_score_type(self.name, value, case.id)

    def planned_calls(self, case: Case, language: str) -> List[Tuple[P.Prompt, List[Dict[str, str]], int, bool]]:
        calls: List[Tuple[P.Prompt, List[Dict[str, str]]]] = []
        try:
            self._sample_run(case, language, calls)
        except Exception:
            pass  # the calls recorded so far are what the estimate can know
        # the first call is built from the case alone (exact); later ones depend on replies (estimated)
        return [(p, m, 120, i == 0) for i, (p, m) in enumerate(calls)]


def _finite_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _function_scale(metric_name: str, scale: Any) -> Tuple[float, float]:
    """A decorated metric's ``scale`` as (low, high): two finite numbers, low below high; else an error naming it."""
    pair = tuple(scale) if isinstance(scale, (list, tuple)) else ()
    if len(pair) != 2 or not all(_finite_number(v) for v in pair) or not pair[0] < pair[1]:
        raise InputError(f"metric {metric_name!r}: scale must be two finite numbers (low, high) with low < high, "
                         f"got {scale!r}")
    return float(pair[0]), float(pair[1])


def _check_version(metric_name: str, version: Any) -> None:
    """``version`` (part of the prompt version ``judge.parquet`` records): a non-empty text; else an error."""
    if not isinstance(version, str) or not version.strip():
        raise InputError(f"metric {metric_name!r}: version must be a non-empty text such as \"v1\", got {version!r}")


def _check_threshold(metric_name: str, threshold: Any, lo: float, hi: float) -> None:
    """``pass_threshold``: None, or a number on the metric's scale; else an error naming it."""
    if threshold is None:
        return
    if not _finite_number(threshold):
        raise InputError(f"metric {metric_name!r}: pass_threshold must be a number on the scale {lo:g}-{hi:g}, "
                         f"got {threshold!r}")
    if not lo <= threshold <= hi:
        raise InputError(f"metric {metric_name!r}: pass_threshold {threshold!r} is outside the scale {lo:g}-{hi:g}")
    if threshold == lo:  # every scored case would pass: a pass rate that can never fall, measuring nothing
        raise InputError(f"metric {metric_name!r}: pass_threshold {threshold!r} is the bottom of the scale "
                         f"{lo:g}-{hi:g}: every case would pass; choose a higher one")


def _has_fields(case: Case, fields: Sequence[str]) -> bool:
    return all(not _missing(_case_value(case, f)) for f in fields)


def _field_names(metric_name: str, fields: Any) -> Tuple[str, ...]:
    """``fields`` as a tuple of case field names; one name alone is one field (not its letters)."""
    from ragmeter._args import check_arg

    names = tuple(check_arg(f"metric {metric_name!r}: fields", [fields] if isinstance(fields, str) else fields,
                            "texts"))
    if not names:
        raise InputError(f"metric {metric_name!r}: fields must name at least one case field")
    if not all(names):
        raise InputError(f"metric {metric_name!r}: fields must be names of case fields, got ''")
    return names


def metric(name: Optional[str] = None, *, prompt: Optional[str] = None, schema: Any = None,
           prompts: Optional[Mapping[str, Tuple[str, Any]]] = None, fields: Sequence[str] = ("question", "answer"),
           scale: Tuple[float, float] = (0.0, 1.0), pass_threshold: Optional[float] = None,
           version: str = "v1") -> Callable[[Scorer], FunctionMetric]:
    """Decorate a scoring function into a :class:`Metric` (see the module docstring)::

        @metric(prompt='Does "answer" cite a source as [n]? Schema: {"cited": <true or false>}',
                schema={"cited": bool}, fields=("answer",))
        def cites_sources(reply, case):
            return 1.0 if reply["cited"] else 0.0
    """
    def wrap(fn: Scorer) -> FunctionMetric:
        metric_name = _check_name(name or getattr(fn, "__name__", None))
        fields_t = _field_names(metric_name, fields)
        if (prompt is None) == (prompts is None):
            raise InputError(f"metric {metric_name!r}: give either prompt= and schema= or prompts={{step: "
                             "(instructions, schema)}")
        lo, hi = _function_scale(metric_name, scale)
        _check_threshold(metric_name, pass_threshold, lo, hi)
        _check_version(metric_name, version)
        steps_in: Mapping[str, Tuple[str, Any]] = prompts if prompts is not None else {"": (prompt, schema)}  # type: ignore[dict-item]
        steps: Dict[str, Tuple[P.Prompt, Dict[str, str]]] = {}
        for step, spec in steps_in.items():
            where = "schema" if not step else f"prompts[{step!r}] schema"
            if not (isinstance(spec, (tuple, list)) and len(spec) == 2 and isinstance(spec[0], str) and spec[0].strip()):
                raise InputError(f"metric {metric_name!r}: prompts[{step!r}] must be (instructions, schema)")
            text, step_schema = spec
            norm = _normalise_schema(metric_name, step_schema, where)
            if "schema:" not in text.lower():
                text = text.rstrip() + "\n" + _schema_line(norm)
            if prompts is None or len(prompts) == 1 or not step:
                _check_placeholders(metric_name, text.split("Schema:")[0], fields_t)
            steps[step] = (_prompt(metric_name, step or None, version, text), norm)
        if prompts is not None and not inspect.iscoroutinefunction(fn):
            raise InputError(f"metric {metric_name!r}: with prompts= the function must be async def fn(ask, case)")
        return FunctionMetric(metric_name, fn, steps, fields_t, (lo, hi), pass_threshold)

    return wrap


# -- identities ------------------------------------------------------------------------------------------
def prompt_version(m: Any) -> str:
    """What the judge is asked (the request identity): the ids of the metric's prompts, each carrying a hash of its
    text. Part of the cache key; ``judge.parquet``'s ``prompt_version`` and the summary's ``prompts``."""
    return ",".join(p.id for p in getattr(m, "prompts", ())) or "custom"


def definition(m: Any) -> Dict[str, Any]:
    """What decides the metric's value: the request (``prompt``, and the case ``fields`` the judge is sent), the
    ``scoring`` function's identity, the ``scale``, the ``pass_threshold`` and the ``schema`` replies are parsed
    with, and ``version``, a hash of them all. Two runs whose versions differ measured two metrics under one name
    (the summary's ``definitions``)."""
    threshold = getattr(m, "pass_threshold", None)
    fields = getattr(m, "fields", None)
    parts: Dict[str, Any] = {
        "prompt": prompt_version(m), "fields": list(fields) if isinstance(fields, (list, tuple)) else None,
        "scoring": _scoring_identity(m), "scale": _scale_of(m),
        # 4 and 4.0 are one threshold (a TOML file writes 4, a script may write 4.0)
        "pass_threshold": float(threshold) if isinstance(threshold, (int, float)) and _finite_number(threshold)
        else threshold,
        "schema": _schemas_of(m)}
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=repr)
    return {"version": "def-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12], **parts}


def _scoring_identity(m: Any) -> str:
    if isinstance(m, RubricMetric):
        return "rubric"  # ragmeter maps the rubric's score itself; the rubric's text is in its prompt
    if isinstance(m, FunctionMetric):
        return function_identity(m.fn)
    if inspect.isfunction(m) or inspect.ismethod(m):
        return function_identity(m)  # a bare coroutine registered in METRICS
    return function_identity(type(m).__call__)  # an object of the Metric protocol: its class's __call__


def _scale_of(m: Any) -> Any:
    scale = getattr(m, "range", None) if isinstance(m, FunctionMetric) else getattr(m, "scale", None)
    if isinstance(scale, (tuple, list)) and len(scale) == 2 and all(_finite_number(v) for v in scale):
        return f"{scale[0]:g}-{scale[1]:g}"
    return scale if isinstance(scale, str) else None


def _schemas_of(m: Any) -> Any:
    if isinstance(m, FunctionMetric):
        if list(m.steps) == [""]:  # one prompt=: its schema; prompts=: one per step
            return dict(m.steps[""][1])
        return {step: dict(schema) for step, (_, schema) in m.steps.items()}
    return None


def function_identity(fn: Any) -> str:
    """A short hash of what ``fn`` computes, the same in every process: its own source (``def`` or ``lambda``
    to its end, decorators left out: they hold the prompt, which is the request's part) when Python can read
    it, else its code object (a function typed in a REPL or built with exec): bytecode, constants and names.
    With it, what ``fn`` reads by global name from the user's code (:func:`_reads`): the functions it calls,
    in turn, and the constants it reads, so that editing a helper or a threshold is an edit of the function.
    A function that reads neither keeps the identity of its own text alone."""
    own = _own_text(fn)
    reads = _reads(fn)
    text = own + ("\nreads:" + json.dumps(sorted(reads.items()), ensure_ascii=False) if reads else "")
    return ("src-" if own.startswith("source:") else "code-") + hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _own_text(fn: Any) -> str:
    source = _own_source(fn)
    return "source:" + source if source is not None else "code:" + _code_text(fn)


def _reads(fn: Any) -> Dict[str, str]:
    """``{qualified name: text}`` of what ``fn`` reads by global name, followed through the functions it calls:
    each function of the user's code (not the standard library's or an installed package's) as its own text,
    each constant (numbers, text, bytes, None, and tuples or frozensets of them) as its ``repr``. Other globals
    (modules, classes, objects) are left out: attributes (``mod.helper``) are not followed."""
    found: Dict[str, str] = {}
    seen = {id(fn)}
    todo = [fn]
    while todo:
        current = todo.pop()
        namespace = getattr(current, "__globals__", None)
        code = getattr(current, "__code__", None)
        if not isinstance(namespace, dict) or code is None:
            continue
        for name in sorted(_global_names(code)):
            if name not in namespace:
                continue  # a builtin, or not defined (yet)
            value = _unwrapped(namespace[name])
            key = f"{namespace.get('__name__', '')}.{name}"
            if isinstance(value, types.FunctionType) and _is_user_code(value):
                if id(value) not in seen:
                    seen.add(id(value))
                    found[key] = _own_text(value)
                    todo.append(value)
            elif _is_constant(value):
                found[key] = _constant_repr(value)
    return found


def _global_names(code: types.CodeType) -> Set[str]:
    """The names ``code`` (and the functions and comprehensions nested in it) may read as globals."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _unwrapped(value: Any) -> Any:
    """A decorated helper (``functools.lru_cache``, ``functools.wraps``) as the function it wraps."""
    if not hasattr(value, "__wrapped__"):
        return value
    try:
        return inspect.unwrap(value)
    except ValueError:  # a cycle of __wrapped__
        return value


def _is_user_code(fn: types.FunctionType) -> bool:
    """Written by the user: not ragmeter's, the standard library's or an installed package's (a function typed
    in a REPL or built with exec is)."""
    import os

    filename = fn.__code__.co_filename
    if filename.startswith("<frozen"):
        return False
    if filename.startswith("<"):
        return True
    path = os.path.realpath(filename)
    return not any(path == root or path.startswith(root + os.sep) for root in _installed_roots())


@functools.lru_cache(maxsize=1)
def _installed_roots() -> Tuple[str, ...]:
    """The folders of code the user did not write: the standard library, installed packages, ragmeter."""
    import os
    import site
    import sysconfig

    paths = sysconfig.get_paths()
    found = [paths.get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")]
    # a distribution's own package folders too (Debian's /usr/lib/python3/dist-packages), and the user's
    found += getattr(site, "getsitepackages", lambda: [])() + [getattr(site, "getusersitepackages", lambda: None)()]
    found.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # ragmeter
    return tuple(sorted({os.path.realpath(p) for p in found if p}))


def _is_constant(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return True
    return isinstance(value, (tuple, frozenset)) and len(value) <= 10_000 and all(map(_is_constant, value))


def _own_source(fn: Any) -> Optional[str]:
    """The text of ``fn``'s definition alone, dedented, or None when it cannot be told apart."""
    try:
        text = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(text)
    except (OSError, TypeError, SyntaxError, IndentationError, IndexError):
        return None  # no source file (or a stale one), or a lambda's lines that are not a whole statement
    name = getattr(fn, "__name__", None)
    if name == "<lambda>":
        nodes: List[Any] = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)]
        return ast.get_source_segment(text, nodes[0]) if len(nodes) == 1 else None
    nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
    if not nodes:
        return None
    node = nodes[0]  # the outermost of that name: getsource starts at fn's own lines
    lines = text.splitlines()[node.lineno - 1:node.end_lineno]
    return textwrap.dedent("\n".join(lines))


def _code_text(fn: Any) -> str:
    code = getattr(fn, "__code__", None)
    if code is None:  # a callable object: its __call__; else only its name is known
        call = getattr(type(fn), "__call__", None)
        code = getattr(call, "__code__", None)
        if code is None:
            return f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"
    return _code_repr(code)


def _code_repr(code: types.CodeType) -> str:
    """Bytecode, constants (nested functions' code in turn) and names; no address, no line number, and sets
    in sorted order (their iteration order follows the process's string hashing)."""
    return repr((code.co_code.hex(), [_constant_repr(c) for c in code.co_consts], code.co_names,
                 code.co_varnames, code.co_freevars, code.co_cellvars))


def _constant_repr(value: Any) -> str:
    if isinstance(value, types.CodeType):
        return _code_repr(value)
    if isinstance(value, frozenset):
        return "frozenset(" + repr(sorted(_constant_repr(v) for v in value)) + ")"
    if isinstance(value, tuple):
        return "(" + ",".join(_constant_repr(v) for v in value) + ")"
    return repr(value)


# -- registry --------------------------------------------------------------------------------------------
def name_taken(name: Any) -> Optional[str]:
    """Why ``name`` cannot be a custom metric's, or None. Besides the built-in judge metrics, compare and gate
    rules read the built-in measures (``hit``, ``correct``, ``refusal``...) and the count rules (``regressions``,
    ``<metric>_wins``) by name: a custom metric so named would be judged, then shadowed there."""
    from ragmeter.gate import _COUNTS
    from ragmeter.report.data import BUILTIN_MEASURES

    from .metrics import BUILTIN_METRICS

    if name in BUILTIN_METRICS:
        return "a built-in metric has that name; choose another"
    if name in BUILTIN_MEASURES:
        return "a built-in measure of compare and gate rules has that name; choose another"
    if isinstance(name, str) and (name in _COUNTS or name.endswith(tuple(f"_{c}" for c in _COUNTS))):
        return "gate rules read that name as a count of cases (regressions, wins, <metric>_regressions, " \
               "<metric>_wins); choose another"
    return None


def register(m: Any) -> str:
    """Make ``m`` available by name to the runner, the estimate and the summary; return its name.

    A built-in name cannot be replaced; registering another metric under a name already taken by a custom one
    replaces it (a re-run in a notebook)."""
    name = getattr(m, "name", None)
    taken = name_taken(name)
    if taken:
        raise InputError(f"metric {name!r}: {taken}")
    if not isinstance(name, str) or not callable(m):
        raise InputError(f"metric {m!r}: a custom metric needs a name and must be callable "
                         "(RubricMetric, @ragmeter.judge.metric or the Metric protocol)")
    METRICS[name] = m
    return name


def resolve(metrics: Sequence[Union[str, Any]]) -> Tuple[str, ...]:
    """Metric names and metric objects -> names (objects registered)."""
    return tuple(m if isinstance(m, str) else register(m) for m in metrics)


def rubric_from_mapping(name: str, spec: Mapping[str, Any], where: str) -> RubricMetric:
    """One rubric of a ``--metric-file`` table; unknown keys are an error naming the field."""
    known = {"criteria", "scale", "pass_threshold", "fields", "steps", "score_descriptions", "version"}
    unknown = sorted(set(spec) - known)
    if unknown:
        raise InputError(f"{where}: metric {name!r}: unknown field {unknown[0]!r} (known: {', '.join(sorted(known))})")
    if "criteria" not in spec:
        raise InputError(f"{where}: metric {name!r}: field 'criteria' is required")
    kwargs = dict(spec)
    for key in ("scale", "fields", "steps"):
        if key in kwargs:
            if not isinstance(kwargs[key], list):
                raise InputError(f"{where}: metric {name!r}: field {key!r} must be a list")
            kwargs[key] = tuple(kwargs[key])
    if "score_descriptions" in kwargs and not isinstance(kwargs["score_descriptions"], Mapping):
        raise InputError(f"{where}: metric {name!r}: field 'score_descriptions' must be a table of score = text")
    taken = name_taken(name)
    if taken:  # said here, with the file; register() would say it without
        raise InputError(f"{where}: metric {name!r}: {taken}")
    try:
        return RubricMetric(name=name, source=where, **kwargs)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    except TypeError as exc:
        raise InputError(f"{where}: metric {name!r}: {exc}") from None


def load_metric_file(path: Any) -> List[RubricMetric]:
    """Rubrics from a TOML file: one ``[metrics.<name>]`` table each (criteria, scale, pass_threshold, ...)."""
    import sys
    from pathlib import Path

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.9/3.10
        import tomli as tomllib

    p = Path(path)
    try:
        raw = p.read_bytes()
        data = tomllib.loads(raw.decode("utf-8-sig"))  # a byte-order mark (Notepad's) is no TOML
    except OSError as exc:
        raise InputError(f"{p}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise InputError(f"{p}:{line}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        said = (" (--metric-file reads TOML: one [metrics.<name>] table per metric)"
                if p.suffix.lower() in (".json", ".yaml", ".yml") else "")
        raise InputError(f"{p}: invalid TOML ({exc}){said}") from None
    tables = data.get("metrics")
    if not isinstance(tables, dict) or not tables:
        raise InputError(f"{p}: no [metrics.<name>] table (each holds criteria = \"...\", scale = [1, 5], ...)")
    other = sorted(set(data) - {"metrics"})
    if other:  # a typo'd [metric.x] beside good tables would leave that metric silently unjudged
        raise InputError(f"{p}: unknown table or key {other[0]!r} (each metric is a [metrics.<name>] table)")
    out = []
    for name, spec in tables.items():
        if not isinstance(spec, dict):
            raise InputError(f"{p}: metrics.{name} must be a table")
        out.append(rubric_from_mapping(name, spec, str(p)))
    return out


def load_metric_module(path: Any) -> List[Any]:
    """The metrics a Python file defines: every module-level :class:`Metric` object (``RubricMetric``,
    ``@metric`` functions), in the order defined."""
    import importlib.util
    from pathlib import Path

    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: metric module not found")
    spec = importlib.util.spec_from_file_location(f"ragmeter_user_metrics_{p.stem}", p)
    if spec is None or spec.loader is None:
        raise InputError(f"{p}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    # its folder first on sys.path while it runs, as `python my_metrics.py` has it: a module beside it (shared
    # prompts, helpers) is importable; sys.path is restored after
    import sys

    folder = str(p.resolve().parent)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except InputError as exc:
        raise InputError(f"{p}: {exc}") from None
    except (Exception, SystemExit) as exc:  # a module that calls sys.exit() must not end the command as if done
        raise InputError(f"{p}: importing the metric module raised {type(exc).__name__}: {exc}") from None
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    found: List[Any] = []
    for value in vars(module).values():  # one object bound to two names (an alias) is one metric
        if isinstance(value, (RubricMetric, FunctionMetric)) and not any(value is m for m in found):
            found.append(value)
    if not found:
        raise InputError(f"{p}: defines no metric (a RubricMetric(...) or an @ragmeter.judge.metric function)")
    for m in found:
        taken = name_taken(m.name)
        if taken:  # said here, with the file; register() would say it without
            raise InputError(f"{p}: metric {m.name!r}: {taken}")
        m.source = str(p)
    return found
