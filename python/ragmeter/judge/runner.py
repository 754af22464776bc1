"""Run judge metrics over cases: ``await run(cases, ...)`` or ``run_sync(cases, ...)``.

Cases are plain records (mappings) with ``id``, ``question``, ``reference_answer``,
``answer``, ``contexts`` and ``category`` (optionally ``no_answer`` and the
system's own ``cost``). Each case x metric gives one row; a row ends ``ok``
(possibly with a null score and an outcome such as ``no_claims``), ``failed``
(with the error, the attempts and the raw output when there was one) or
``skipped`` (with the reason: missing input or budget reached). Nothing is
dropped: every row is counted in the summary, and no failed row is averaged
as a score (see ``denominators`` in the summary).

A run that cannot succeed (a refused key, an exhausted quota, an unknown
model, an unreachable endpoint, a cache that cannot be written) is stopped at
the first sign of it and raises :class:`~ragmeter.judge.stop.JudgeStopped`
without results; the replies already received are in the cache (see
:mod:`ragmeter.judge.stop`).
"""
from __future__ import annotations

import asyncio
import json
import logging
import math
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Union

from ragmeter._front import arg, no_cache, no_limit, option

from .cache import Cache
from .client import ClientConfig, JudgeCallError, JudgeClient
from .cost import PriceTable, estimate_tokens
from .engine import (UNFINISHED, Budget, BudgetExceeded, Engine, OutputError, ParseError, RowStats, not_a_reply,
                     parse_json_object)
from .limits import Limits, check_rpm
from .metrics import (BUILTIN_METRICS, DEFAULT_METRICS, METRICS, NO_ANSWER_CATEGORIES, Case, MetricOptions,
                      MetricResult, Skip, evidence_json, faithfulness_band, metric_scale, relevancy_questions,
                      rubric_scale, statements_of)
from . import prompts as P
from .retry import RetryPolicy
from .custom import MetricError
from .stop import Halt, JudgeStopped, RunStop
from .urls import check_http_url, public_endpoint, split_credentials

log = logging.getLogger("ragmeter.judge")

__all__ = ["JudgeConfig", "JudgeResult", "Tally", "run", "run_sync", "estimate", "ROW_SCHEMA"]

#: seconds a stopped run lets the requests already in flight finish (their replies are paid for and cached)
STOP_GRACE = 10.0


@dataclass
class Tally:
    """What the runs given this tally have done so far; read after an interrupt (``ragmeter judge`` says it)."""

    sent: int = 0        #: calls sent that came back (answered or failed for good)
    failed: int = 0      #: of ``sent``, the calls that failed for good (no reply, nothing to cache)
    uncached: int = 0    #: of ``sent``, replies received by runs without a cache (--no-cache, repeats 2..N)
    cached: int = 0      #: replies committed to the cache (entries)
    shared: int = 0      #: of ``sent``, replies of identical requests, kept in another reply's entry
    replayed: int = 0    #: calls answered from the cache
    rows_done: int = 0
    rows_total: int = 0
    cache_path: Optional[str] = None
    notes: List[str] = field(default_factory=list)  #: "; ..." what became of replies the cache could not take

    def message(self) -> str:
        """One line: rows finished, and what became of every call that came back. ``sent`` is ``failed`` +
        ``uncached`` + ``cached`` + ``shared`` + the replies the notes account for (those the cache could not
        take)."""
        done = f"{self.rows_done} of {self.rows_total} judge rows finished; {self.sent} calls came back this run"
        if not self.cache_path:
            failed = f" ({self.failed} failed)" if self.failed else ""
            return f"{done}{failed}; no cache was used ({no_cache()}): a rerun sends every call again" + \
                "".join(self.notes)
        apart = [f"{self.failed} failed, nothing to cache"] if self.failed else []
        if self.uncached:
            apart.append(f"{self.uncached} answered by runs without the cache")
        if self.shared:
            apart.append(f"{self.shared} identical request(s) share a cache entry with another")
        apart_text = f" ({'; '.join(apart)})" if apart else ""
        return (f"{done}{apart_text} and {self.cached} replies are cached in {self.cache_path} ({self.replayed} "
                f"answered from the cache); a rerun with the same {option('cache')} resumes from them"
                + "".join(self.notes))

DEFAULT_CACHE = ".ragmeter/cache.sqlite"


@dataclass
class JudgeConfig:
    base_url: str
    model: str
    metrics: Sequence[Any] = DEFAULT_METRICS  #: names, or custom metric objects (registered by name)
    api_key: Optional[str] = field(default=None, repr=False)  #: None: RAGMETER_API_KEY, then OPENAI_API_KEY
    concurrency: int = 8
    rpm: Optional[float] = None
    tpm: Optional[float] = None
    max_tokens: int = 2000
    max_retry_tokens: int = 8000
    cache: Union[str, Path, None] = DEFAULT_CACHE  #: None disables the cache
    refresh_failed: bool = False                   #: re-request cached replies that failed to parse
    budget: Optional[float] = None                 #: USD; stop launching calls when reached
    dry_run: bool = False
    prices: Union[PriceTable, Mapping[str, Any], None] = None
    embeddings_model: Optional[str] = None
    embeddings_base_url: Optional[str] = None
    n_questions: int = 3
    relevancy_variant: str = "ragas"
    honest_no_answer: bool = True
    precision_against: str = "auto"
    language: str = "auto"
    no_answer_categories: frozenset = NO_ANSWER_CATEGORIES
    timeout: float = 120.0
    temperature: float = 0.0
    json_mode: str = "auto"
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    rate_period: float = 1.0
    rate_control: str = "adaptive"         #: adaptive (learn the limit, see judge.rate) or fixed (global pause)
    progress: bool = False
    preflight: bool = True                 #: GET {base_url}/models before the first call (see JudgeClient)
    context_size: Optional[int] = None     #: the judge model's context window; None: from GET /models if it says
    spill_dir: Union[str, Path, None] = None  #: where paid replies go when the cache cannot be written
    tally: Optional[Tally] = field(default=None, repr=False, compare=False)
    #: the embeddings endpoint's own key (None: the password of ``embeddings_base_url``, else ``api_key``'s)
    embeddings_api_key: Optional[str] = field(default=None, repr=False)
    #: the custom metric objects given in ``metrics``, by name: this run's own, whatever another run (a thread) has
    #: since registered under the same name in the process-wide ``METRICS`` (kept by ``dataclasses.replace``)
    _objects: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def implementation(self, name: str) -> Any:
        """The metric ``name`` of this run: the object given in ``metrics``, else the registered one."""
        return self._objects.get(name) or METRICS[name]

    def __post_init__(self) -> None:
        from ragmeter.errors import InputError

        self._check_kinds()
        # credentials in the URL are the key: out of the URL (and of every summary, setting and message)
        self.base_url, url_key = split_credentials(self.base_url)
        if self.embeddings_base_url:
            self.embeddings_base_url, embeddings_key = split_credentials(self.embeddings_base_url)
            if self.embeddings_api_key is None and embeddings_key:
                self.embeddings_api_key = embeddings_key
        if self.api_key is None and url_key:
            self.api_key = url_key

        from .custom import resolve

        self.metrics = metric_list(self.metrics)
        given = {m.name: m for m in self.metrics if not isinstance(m, str) and isinstance(getattr(m, "name", None), str)}
        self.metrics = resolve(self.metrics)
        self._objects = {**self._objects, **given}
        unknown = [m for m in self.metrics if m not in METRICS]
        if unknown:
            raise InputError(f"{arg('metrics')}: unknown metric {unknown[0]!r}; choose from {', '.join(METRICS)}")
        if not self.metrics:  # e.g. --metrics "" from an unset variable: a run measuring nothing is no success
            raise InputError(f"{arg('metrics')}: no metric given; choose from {', '.join(METRICS)}")
        # a metric named twice would be judged twice per case (paid twice) and counted twice in its mean
        twice = [m for i, m in enumerate(self.metrics) if m in self.metrics[:i]]
        if twice:
            raise InputError(f"{arg('metrics')}: {twice[0]!r} is listed twice; each metric is judged once per case")
        if self.relevancy_variant not in ("hard", "ragas", "soft"):
            raise InputError(f"{arg('relevancy_variant')}: choose hard, ragas or soft")
        if self.precision_against not in ("auto", "reference", "answer"):
            raise InputError(f"{arg('precision_against')}: choose auto, reference or answer")
        from ragmeter._args import check_arg, check_cache_path, positive_number

        # check_arg, not int(): concurrency=True was 1, "8" was 8 and max_tokens=2.5 was 2
        for name in ("concurrency", "max_tokens", "max_retry_tokens", "n_questions"):
            setattr(self, name, check_arg(arg(name), getattr(self, name), "int", low=1))
        check_cache_path(self.cache)
        if self.budget is not None and not self.budget >= 0:  # NaN too: a budget it never reaches
            raise InputError(f"{arg('budget')}: must be >= 0")
        # 0 or NaN would not mean "no time-out" or "no limit" to the user, but did (NaN rpm: a run that never
        # sends); leaving the option out is how to say no limit (positive_number: a bool is none either)
        if not positive_number(self.timeout):
            raise InputError(f"{arg('timeout')}: must be a number of seconds > 0, got {self.timeout!r}")
        for name in ("rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and not positive_number(value):
                raise InputError(f"{arg(name)}: must be a number > 0 ({no_limit(name)} for no limit), got {value!r}")
        if self.rpm is not None:
            check_rpm(self.rpm)
        if self.context_size is not None and int(self.context_size) < 1:
            raise InputError(f"{arg('context_size')}: must be at least 1")
        if self.rate_control not in ("adaptive", "fixed"):
            raise InputError("rate_control: choose adaptive or fixed")

    def _check_kinds(self) -> None:
        """Options of the wrong kind, named before they fail deep inside: base_url=None was a TypeError from urllib,
        model=None and base_url="" were taken (every call failed), budget="5" was a TypeError from '>=',
        context_size="8k" a ValueError from int(), json_mode="nah" a ValueError and retry={...} an
        AttributeError once the run began."""
        from numbers import Real

        from ragmeter._args import _shown, check_arg
        from ragmeter.errors import InputError

        what = {"base_url": "the endpoint, e.g. 'https://api.openai.com/v1'", "model": "the judge model's name"}
        for name, meaning in what.items():
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise InputError(f"{arg(name)} must be a non-empty string ({meaning}), got {_shown(value)}")
        for name in ("embeddings_model", "embeddings_base_url"):
            check_arg(arg(name), getattr(self, name), "text", optional=True)
        for name in ("base_url", "embeddings_base_url"):  # "api.openai.com/v1" was taken: every call failed later
            check_http_url(arg(name), getattr(self, name))
        if self.budget is not None and (isinstance(self.budget, bool) or not isinstance(self.budget, Real)):
            check_arg(arg("budget"), self.budget, "number", optional=True)  # a number's range: said below
        check_arg(arg("context_size"), self.context_size, "int", optional=True)
        check_arg(arg("temperature"), self.temperature, "number")
        if self.json_mode not in ("auto", "on", "off"):
            raise InputError(f"{arg('json_mode')}: choose auto, on or off, not {self.json_mode!r}")
        if not isinstance(self.retry, RetryPolicy):
            raise InputError(f"{arg('retry')} must be a ragmeter.judge.RetryPolicy, got {_shown(self.retry)}")
        # "no" is a non-empty string: read as true, dry_run="no" sent nothing and preflight="no" probed
        for name in ("refresh_failed", "dry_run", "honest_no_answer", "progress", "preflight"):
            setattr(self, name, check_arg(arg(name), getattr(self, name), "bool"))
        self._check_tables()
        from ragmeter._args import positive_number

        if not positive_number(self.rate_period):
            raise InputError(f"{arg('rate_period')}: must be a number of seconds > 0, got {self.rate_period!r}")

    def _check_tables(self) -> None:
        """``no_answer_categories`` as a set of names (a string was matched as a substring: "noanswer" held
        "answer" too) and ``prices`` a table (a path was taken, and failed once a price was looked up)."""
        import os

        from ragmeter._args import _shown
        from ragmeter.errors import InputError

        cats = self.no_answer_categories
        if isinstance(cats, (str, bytes, Mapping)) or not hasattr(cats, "__iter__") or \
                not all(isinstance(c, str) for c in cats):
            raise InputError(f"{arg('no_answer_categories')} must be a set of category names, got {_shown(cats)}")
        self.no_answer_categories = frozenset(cats)
        if self.prices is not None and not isinstance(self.prices, (PriceTable, Mapping)):
            hint = " (a price file: PriceTable.from_file(path))" if isinstance(self.prices, (str, os.PathLike)) else ""
            raise InputError(f"{arg('prices')} must be a ragmeter.judge.PriceTable, a mapping of model to [input, "
                             f"output] USD per million tokens, or None, got {_shown(self.prices)}{hint}")

    def price_table(self) -> PriceTable:
        if isinstance(self.prices, PriceTable):
            return self.prices
        return PriceTable(self.prices)

    def client_config(self) -> ClientConfig:
        return ClientConfig(base_url=self.base_url, model=self.model, api_key=self.api_key, timeout=self.timeout,
                            temperature=self.temperature, json_mode=self.json_mode,
                            max_retry_tokens=self.max_retry_tokens, policy=self.retry,
                            embeddings_model=self.embeddings_model, embeddings_base_url=self.embeddings_base_url,
                            preflight=self.preflight, context_size=self.context_size,
                            embeddings_api_key=self.embeddings_api_key)

    def metric_options(self) -> MetricOptions:
        return MetricOptions(n_questions=self.n_questions, relevancy_variant=self.relevancy_variant,
                             honest_no_answer=self.honest_no_answer, precision_against=self.precision_against,
                             language=self.language)


# Column order and types of judge.parquet.
ROW_SCHEMA: Dict[str, str] = {
    "id": "str", "metric": "str", "status": "str", "outcome": "str", "score": "f64", "correct": "bool",
    "reason": "str", "error": "str", "error_kind": "str", "attempts": "i64", "calls": "i64", "cached_calls": "i64",
    "prompt_tokens": "i64", "completion_tokens": "i64", "cost_usd": "f64", "latency_ms": "f64", "cached": "bool",
    "category": "str", "prompt_version": "str", "language": "str",
    "claims": "str", "verdicts": "str", "questions": "str",
    "ar_hard": "f64", "ar_ragas": "f64", "ar_soft": "f64", "ar_similarity": "str", "ar_noncommittal": "f64",
    "ar_variant": "str", "cp_ap": "f64", "cp_precision": "f64", "cp_against": "str", "band": "str",
    "raw_output": "str", "attempt_log": "str",
}

_PROMPTS_OF = {
    "correctness": [P.CORRECTNESS],
    "faithfulness": [P.FAITHFULNESS_STATEMENTS, P.FAITHFULNESS_VERDICTS],
    "answer_relevancy": [P.RELEVANCY_QUESTIONS, P.RELEVANCY_GRADED],
    "context_precision": [P.CONTEXT_PRECISION],
    "context_recall": [P.CONTEXT_RECALL],
}


def _prompt_version(metric: str, cfg: "JudgeConfig") -> str:
    ps = _PROMPTS_OF.get(metric)
    embeddings = bool(cfg.embeddings_model)
    if ps is None:  # a custom metric: its own prompts (their versions carry a hash of the text)
        from .custom import prompt_version

        return prompt_version(cfg.implementation(metric))
    if metric == "answer_relevancy" and embeddings:
        ps = ps[:1]
    return ",".join(p.id for p in ps)


def _definitions(cfg: "JudgeConfig") -> Dict[str, Dict[str, Any]]:
    """Each custom metric's definition (request, fields, scoring function, scale, threshold, schema), which compare
    checks; the built-in metrics' change only with ragmeter's version and their prompts say it."""
    from .custom import definition

    return {m: definition(cfg.implementation(m)) for m in cfg.metrics if m not in BUILTIN_METRICS}


@dataclass
class JudgeResult:
    rows: List[Dict[str, Any]]
    summary: Dict[str, Any]
    estimate: Optional[Dict[str, Any]] = None

    def frame(self):  # type: ignore[no-untyped-def]
        """The rows as a polars DataFrame with the columns of :data:`ROW_SCHEMA`."""
        import polars as pl

        types = {"str": pl.Utf8, "f64": pl.Float64, "i64": pl.Int64, "bool": pl.Boolean}
        schema = {k: types[v] for k, v in ROW_SCHEMA.items()}
        return pl.DataFrame([{k: r.get(k) for k in ROW_SCHEMA} for r in self.rows], schema=schema, orient="row")

    def file_summary(self) -> Dict[str, Any]:
        """What ``judge_summary.json`` holds (and ``ragmeter judge --json`` prints): the summary after the keys that
        say which ragmeter wrote it, first as in eval's summary.json. The summary itself lacks them: eval nests
        it under ``judge``, below its own."""
        from ragmeter._io import written_by

        return {**written_by("judge"), **self.summary}

    def write(self, out_dir: Union[str, Path]) -> Path:
        """``judge.parquet`` and ``judge_summary.json`` in ``out_dir``, both or neither (nothing half-written).
        ``judge.parquet`` has the columns of the one ``ragmeter eval`` writes, ``repeat`` 1 among them, so that
        scripts read (and concatenate) both alike."""
        import polars as pl

        from ragmeter._io import atomic_outputs, strict_json

        out = Path(out_dir)
        frame = self.frame().with_columns(pl.lit(1, dtype=pl.Int64).alias("repeat"))
        with atomic_outputs(out) as tmp:
            try:
                frame.write_parquet(tmp / "judge.parquet")
            except OSError:
                raise
            except Exception as exc:  # polars reports a failed write (a full disk) as its own error type
                raise OSError(f"cannot write {out / 'judge.parquet'}: {exc}") from None
            # strict: a NaN or an infinity (a custom metric's score, a ratio of nothing) is null, which every
            # JSON parser reads; json.dumps would write NaN
            (tmp / "judge_summary.json").write_text(strict_json(self.file_summary()) + "\n", encoding="utf-8")
        return out


def _cases(records: Iterable[Union[Mapping[str, Any], Case]], cfg: JudgeConfig) -> List[Case]:
    if isinstance(records, (str, bytes, Mapping)) or not hasattr(records, "__iter__"):  # None was a TypeError
        from ragmeter._args import _shown
        from ragmeter.errors import InputError

        raise InputError(f"cases must be a list of records (dicts with id, question, answer, ...) or Case objects, "
                         f"got {_shown(records)}")
    out = []
    seen: Dict[str, int] = {}
    for i, rec in enumerate(records, start=1):
        if not isinstance(rec, Case):
            _refuse_lone_surrogates(rec, f"record {i}")
        case = rec if isinstance(rec, Case) else Case.from_record(rec, cfg.no_answer_categories)
        if case.id in seen:
            from ragmeter.errors import InputError

            raise InputError(f"records {seen[case.id]} and {i}: duplicate id {case.id!r}")
        seen[case.id] = i
        out.append(case)
    return out


def _refuse_lone_surrogates(record: Mapping[str, Any], where: str) -> None:
    """An :class:`InputError` naming the field of ``record`` that holds a lone UTF-16 surrogate: no request
    could carry it (the UTF-8 encoding of the prompt failed with a traceback)."""
    from ragmeter.dataset import _lone_surrogate, _surrogate_message
    from ragmeter.errors import InputError

    found = _lone_surrogate(dict(record))
    if found is not None:
        raise InputError(f"{where}: {_surrogate_message(found)}")


def _row(case: Case, metric: str, cfg: JudgeConfig, stats: RowStats, lang: str) -> Dict[str, Any]:
    return {
        "id": case.id, "metric": metric, "category": None if case.category is None else str(case.category),
        "prompt_version": _prompt_version(metric, cfg), "language": lang,
        "attempts": stats.attempts, "calls": stats.calls, "cached_calls": stats.cached_calls,
        "prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.completion_tokens,
        "cost_usd": stats.cost_usd, "latency_ms": round(stats.latency_ms, 3), "cached": stats.cached,
        "raw_output": stats.raw_output,
        "attempt_log": json.dumps(stats.attempt_log, ensure_ascii=False) if stats.attempt_log else None,
    }


class _Progress:
    """One progress line on a terminal (nothing otherwise), within the terminal's width (80 columns when unknown).

    Drawn by hand with a carriage return rather than by rich's live display: rich re-renders its whole table from a
    thread 4 times a second (about 2 ms of CPU each, 0.8 ms per call at 600 requests/min, measured in
    benches/judge_policies.py); this line costs microseconds. It is redrawn on progress at most every
    ``min_interval`` seconds, and every ``tick`` seconds from the event loop so the elapsed time moves while
    nothing finishes; the last state is always drawn at the end."""

    min_interval = 0.5
    tick = 1.0
    bar_width = 10

    def __init__(self, enabled: bool, total: int) -> None:
        import sys

        self.done = self.failed = self.skipped = 0
        self.total = total
        self._out = sys.stderr if enabled and sys.stderr.isatty() else None
        self._last = 0.0
        self._started = time.monotonic()
        self._fields: Optional[tuple] = None
        self._timer: Optional[asyncio.TimerHandle] = None
        encoding = (getattr(self._out, "encoding", None) or "").lower().replace("-", "")
        self._glyphs = ("\u2501", "\u2574") if encoding.startswith("utf") else ("#", "-")

    def __enter__(self) -> "_Progress":
        if self._out is not None:
            self._started = time.monotonic()
            self._schedule()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._out is None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._draw()
        self._write("\n")

    def update(self, client: JudgeClient, engine: Engine) -> None:
        if self._out is None:
            return
        self._fields = (client, engine)
        if time.monotonic() - self._last >= self.min_interval or self.done >= self.total:
            self._draw()

    def _schedule(self) -> None:
        try:
            self._timer = asyncio.get_running_loop().call_later(self.tick, self._on_tick)
        except RuntimeError:  # no running loop: redrawn on progress only
            self._timer = None

    def _on_tick(self) -> None:
        if time.monotonic() - self._last >= self.tick * 0.9:
            self._draw()
        self._schedule()

    def _draw(self) -> None:
        self._last = time.monotonic()
        self._write("\r" + self.line() + "\x1b[K")

    def _write(self, text: str) -> None:
        try:
            self._out.write(text)  # type: ignore[union-attr]
            self._out.flush()  # type: ignore[union-attr]
        except (OSError, ValueError):  # a closed or broken terminal: no more progress, the run goes on
            self._out = None

    def line(self) -> str:
        """``judge ━━━━╺───── 12/300 fail 1 retry 3 12.5/s 429 x7 4.5k tok $0.0123 0:00:12`` cut to the width."""
        import shutil

        full = self.bar_width * self.done // self.total if self.total else self.bar_width
        bar = self._glyphs[0] * full + self._glyphs[1] * (self.bar_width - full)
        counts = [f"{label} {n}" for label, n in (("fail", self.failed), ("skip", self.skipped)) if n]
        rest: List[str] = []
        if self._fields is not None:
            client, engine = self._fields
            s = client.stats
            if s.retries:
                counts.append(f"retry {s.retries}")
            cost = "$n/a" if engine.cost_usd is None else f"${engine.cost_usd:.4f}"
            rest = _rate_fields(client.limits) + [f"{_short(s.prompt_tokens + s.completion_tokens)} tok", cost]
        elapsed = int(time.monotonic() - self._started)
        clock = f"{elapsed // 3600}:{elapsed // 60 % 60:02d}:{elapsed % 60:02d}"
        text = " ".join(["judge", bar, f"{self.done}/{self.total}"] + counts + rest + [clock])
        width = shutil.get_terminal_size((80, 24)).columns
        return fit_cells(text, max(20, width - 1))


def fit_cells(text: str, width: int) -> str:
    """``text`` cut to ``width`` terminal cells: a wide (CJK) character takes two, and one that would be cut in
    half is left out (a line longer than the terminal wraps, and the carriage return then redraws only its end)."""
    from rich.cells import cell_len, get_character_cell_size

    if cell_len(text) <= width:
        return text
    used = 0
    for i, char in enumerate(text):
        used += get_character_cell_size(char)
        if used > width:
            return text[:i]
    return text


def _rate_fields(limits: Limits) -> List[str]:
    """The bucket's rate while it limits (``12.5/s``) and the throttled answers (``429 x7``)."""
    rate = limits.rate()
    return ([f"{rate:.1f}/s"] if rate is not None else []) + ([f"429 x{limits.throttled}"] if limits.throttled else [])


def _short(n: int) -> str:
    """1234 -> 1.2k, 5600000 -> 5.6M: the progress line stays short."""
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= limit:
            return f"{n / limit:.1f}{suffix}"
    return str(n)


async def _judge_one(engine: Engine, case: Case, metric: str, cfg: JudgeConfig, opts: MetricOptions) -> Dict[str, Any]:
    stats = RowStats()
    lang = cfg.language if cfg.language in P.LANGUAGES else P.detect_language(case.question)
    status, error, kind = "ok", None, None
    result: Optional[MetricResult] = None
    if case.missing_run:
        status, error, kind = "skipped", "id is in the golden set but not in the run", "missing_run"
    else:
        try:
            result = await cfg.implementation(metric)(engine, case, stats, opts)
        except Skip as exc:
            status, error, kind = "skipped", str(exc), "missing_input"
        except BudgetExceeded as exc:
            status, error, kind = "skipped", f"{option('budget', f'${cfg.budget:g}')} reached; {exc}", "budget"
        except JudgeCallError as exc:
            if engine.client.stop.stopped:
                raise Halt(exc.message) from None  # the run is stopping: this row is not a row failure
            status, error, kind = "failed", exc.message, exc.kind
        except OutputError as exc:
            status, error, kind = "failed", str(exc), "unparsable"
        except MetricError as exc:  # a custom metric's own code failed on this reply
            status, error, kind = "failed", str(exc), "metric_error"
    row = _row(case, metric, cfg, stats, lang)
    row.update(status=status, error=engine.client.redact(error), error_kind=kind)
    if result is not None:
        row.update(score=result.score, outcome=result.outcome, reason=result.reason, correct=result.correct,
                   claims=evidence_json(result.claims), verdicts=evidence_json(result.verdicts),
                   questions=evidence_json(result.questions), **result.extra)
    else:
        row.update(score=None, outcome=status)
    return row


def _percentile(values: List[float], q: float) -> Optional[float]:
    if not values:
        return None
    xs = sorted(values)
    k = (len(xs) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return round(xs[lo] + (xs[hi] - xs[lo]) * (k - lo), 3)


DENOMINATORS = (
    "mean (and mean_hard/mean_ragas/mean_soft, mean_precision) is the average over the scored rows only: n_scored "
    "of n_total rows. Failed rows (n_failed), skipped rows (n_skipped) and rows with a null score (outcome "
    "no_claims) are left out of it and counted, never averaged as 0; mean is null when no row is scored. "
    "correctness: mean is on the 1-5 scale over its n_scored rows; correct_rate = n_correct / "
    "correct_rate_denominator, where the denominator is the scored plus the failed rows (a failed row counts as "
    "not correct; correct_rate is null when no row is scored) and skipped rows are left out. The other metrics' means are on the 0-1 scale. failures groups "
    "the failed rows by error kind (count and one example message); skips groups the skipped rows by reason."
)


def _grouped(rows: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Rows by ``error_kind``: {kind: {"count": n, "example": the first row's message}}, most frequent first."""
    groups: Dict[str, Dict[str, Any]] = {}
    for r in rows:
        g = groups.setdefault(r.get("error_kind") or "unknown", {"count": 0, "example": r.get("error") or ""})
        g["count"] += 1
    return dict(sorted(groups.items(), key=lambda kv: (-kv[1]["count"], kv[0])))


def _mean(values: List[float]) -> Optional[float]:
    return round(sum(values) / len(values), 6) if values else None


def _metric_summary(metric: str, rs: List[Dict[str, Any]], cfg: "JudgeConfig") -> Dict[str, Any]:
    from ragmeter.stats import rate_counting_failed

    ok = [r for r in rs if r["status"] == "ok"]
    scored = [r["score"] for r in ok if r["score"] is not None]
    failed = [r for r in rs if r["status"] == "failed"]
    skipped = [r for r in rs if r["status"] == "skipped"]
    lat = [r["latency_ms"] for r in rs if r["calls"] > r["cached_calls"]]
    costs = [r["cost_usd"] for r in rs]
    entry: Dict[str, Any] = {
        "n_total": len(rs), "n_scored": len(scored), "n_failed": len(failed), "n_skipped": len(skipped),
        "n_skipped_budget": sum(r.get("error_kind") == "budget" for r in skipped),
        "outcomes": {o: sum(r["outcome"] == o for r in rs) for o in sorted({r["outcome"] for r in rs})},
        "scale": metric_scale(metric, cfg.implementation(metric)),
        # a custom rubric's own scale as numbers: "scale" is display text, not to be parsed back
        **({"rubric_scale": rubric} if (rubric := rubric_scale(cfg.implementation(metric))) is not None else {}),
        "mean": _mean(scored),
        "failures": _grouped(failed), "skips": _grouped(skipped),
        "cost_usd": None if any(c is None for c in costs) else round(sum(costs), 6),
        "latency_ms_p50": _percentile(lat, 0.5), "latency_ms_p95": _percentile(lat, 0.95),
    }
    n_yes = sum(1 for r in ok if r.get("correct"))
    denom, rate = rate_counting_failed(n_yes, len(ok), len(failed))
    rate = None if rate is None else round(rate, 6)
    if metric == "correctness":
        entry.update(n_correct=n_yes, correct_rate_denominator=denom, correct_rate=rate)
    threshold = getattr(cfg.implementation(metric), "pass_threshold", None) if metric not in BUILTIN_METRICS else None
    if threshold is not None:  # a custom metric's pass rate, counted like correct_rate (a failed row did not pass)
        entry.update(pass_threshold=threshold, n_pass=n_yes, pass_rate_denominator=denom, pass_rate=rate)
    if metric == "faithfulness":
        entry["band"] = faithfulness_band(entry["mean"])
    if metric == "answer_relevancy":
        for v in ("hard", "ragas", "soft"):
            entry[f"mean_{v}"] = _mean([r[f"ar_{v}"] for r in ok if r.get(f"ar_{v}") is not None])
    if metric == "context_precision":
        entry["mean_precision"] = _mean([r["cp_precision"] for r in ok if r.get("cp_precision") is not None])
    return entry


def summarize(rows: List[Dict[str, Any]], cases: List[Case], cfg: JudgeConfig, engine: Optional[Engine],
              client: Optional[JudgeClient], elapsed: float, cache: Optional[Cache] = None) -> Dict[str, Any]:
    """Per metric: counts (n_total, n_scored, n_failed, n_skipped), the mean over scored rows, failures and skips
    grouped by kind, cost and latency; see :data:`DENOMINATORS`. ``incomplete`` counts the rows a rerun could
    still judge: failed rows and rows skipped at ``--budget`` (not rows skipped for missing input)."""
    per = {metric: _metric_summary(metric, [r for r in rows if r["metric"] == metric], cfg) for metric in cfg.metrics}
    n_failed = sum(m["n_failed"] for m in per.values())
    n_budget = sum(m["n_skipped_budget"] for m in per.values())
    n_structural = sum(m["n_skipped"] - m["n_skipped_budget"] for m in per.values())
    sys_costs = [c.system_cost for c in cases if c.system_cost is not None]
    judge_cost = None if engine is None else engine.cost_usd
    system_cost = round(sum(sys_costs), 6) if sys_costs else None
    # the judge's share of the total: unknown when either side is (a run reporting no cost is not a free one),
    # 0 for a judge that cost nothing (the rule of eval's summary["cost"], evaluation.cost_summary)
    total = None if judge_cost is None or system_cost is None else judge_cost + system_cost
    lat_calls = list(engine.call_latencies) if engine is not None else []
    return {
        "endpoint": public_endpoint(cfg.base_url), "model": cfg.model,
        "embeddings_model": cfg.embeddings_model, "metrics": per,
        "n_cases": len(cases), "n_rows": len(rows),
        "incomplete": {"rows": n_failed + n_budget, "failed": n_failed, "skipped_budget": n_budget,
                       "of": len(rows) - n_structural},
        "calls": 0 if engine is None else engine.calls, "cached_calls": 0 if engine is None else engine.cached_calls,
        "refreshed_calls": 0 if engine is None else engine.refreshed,
        "requests": 0 if client is None else client.stats.requests,
        "preflight_requests": 0 if client is None else client.stats.preflight_requests,
        "retries": 0 if client is None else client.stats.retries,
        "rate": None if client is None else client.limits.summary(),
        "prompt_tokens": 0 if client is None else client.stats.prompt_tokens,
        "completion_tokens": 0 if client is None else client.stats.completion_tokens,
        #: replies that came without a (readable) usage block: their tokens, and so their cost, are estimates
        "usage_estimated_requests": 0 if client is None else client.stats.usage_estimated,
        "judge_cost_usd": None if judge_cost is None else round(judge_cost, 6),
        "system_cost_usd": system_cost,
        "judge_cost_share": round(judge_cost / total, 4) if judge_cost is not None and total else None,
        "call_latency_ms_p50": _percentile(lat_calls, 0.5), "call_latency_ms_p95": _percentile(lat_calls, 0.95),
        "budget_usd": cfg.budget, "budget_reached": bool(engine and engine.budget.reached),
        "cache_undecodable": 0 if cache is None else cache.undecodable,
        "elapsed_s": round(elapsed, 3),
        "prompts": {m: _prompt_version(m, cfg) for m in cfg.metrics},
        "definitions": _definitions(cfg),
        "denominators": DENOMINATORS,
    }


def refuse_nothing_judged(summary: Dict[str, Any], n_cases: int, n_metrics: int,
                          every_run_case_failed: bool, remedy: str = "") -> None:
    """An :class:`InputError` (exit 2 on the command line, nothing written) when every judge row of ``summary``
    (:func:`summarize`'s) was skipped for missing input: nothing was measured, and no call was sent. Says why per
    metric. A run file whose every case failed when it was collected keeps its documented outcome instead
    (results written, the failed_in_run warning, exit 3); a few failed cases do not: the others' rows lacking
    their input (no reference) is still nothing to judge. ``remedy`` (``eval``: how to get the rest measured)
    ends the message. Here rather than in ``ragmeter.cli``: :func:`ragmeter.evaluation.run_eval` refuses alike."""
    from ragmeter.errors import InputError

    inc = summary.get("incomplete") or {}
    if not summary.get("n_rows") or inc.get("of") != 0 or every_run_case_failed:
        return
    why = []
    for metric, m in summary["metrics"].items():
        examples = [g.get("example") for g in (m.get("skips") or {}).values() if g.get("example")]
        if examples:
            why.append(f"{metric}: {examples[0]}")
    raise InputError(f"nothing to judge: all {summary['n_rows']} judge rows ({n_cases} cases x {n_metrics} metrics) "
                     f"lack their input ({'; '.join(why)}); nothing written" + (f"; {remedy}" if remedy else ""))


def metric_list(metrics: Any) -> Sequence[Any]:
    """``metrics`` as a sequence of names and metric objects: a string is one name, or names separated by commas
    as ``--metrics`` takes them (read letter by letter it was "unknown metric 'f'"); anything not a collection
    is an InputError naming ``metrics``."""
    if isinstance(metrics, str):
        return tuple(name.strip() for name in metrics.split(",") if name.strip())
    if isinstance(metrics, (bytes, Mapping)) or not hasattr(metrics, "__iter__"):
        from ragmeter._args import _shown
        from ragmeter.errors import InputError

        raise InputError(f"{arg('metrics')} must be a list of metric names or custom metric objects, got "
                         f"{_shown(metrics)}")
    return tuple(metrics)


def _make_config(config: Optional[JudgeConfig], options: Dict[str, Any]) -> JudgeConfig:
    if config is not None and not isinstance(config, JudgeConfig):  # a dict was an AttributeError (tally)
        from ragmeter._args import _shown
        from ragmeter.errors import InputError

        raise InputError(f"config must be a ragmeter.judge.JudgeConfig or None, got {_shown(config)}: e.g. "
                         f"JudgeConfig(base_url='https://api.openai.com/v1', model='gpt-4o-mini')")
    if config is None:
        return JudgeConfig(**options)
    return replace(config, **options) if options else config


async def run(cases: Iterable[Union[Mapping[str, Any], Case]], config: Optional[JudgeConfig] = None,
              **options: Any) -> JudgeResult:
    """Judge ``cases`` with the metrics of ``config`` (or keyword options of :class:`JudgeConfig`).

    Raises :class:`~ragmeter.judge.cache.CacheError` before any call when the cache cannot be used and
    :class:`~ragmeter.judge.stop.JudgeStopped` when the run had to stop (both are user errors, exit status 2).
    """
    cfg = _make_config(config, options)
    case_list = _cases(cases, cfg)
    check_metrics(case_list, cfg)
    prices = cfg.price_table()
    if cfg.budget is not None and prices.lookup(cfg.model) is None:
        raise budget_without_price(cfg.model)
    cache = Cache(cfg.cache, writable=not cfg.dry_run)
    if not cfg.dry_run:
        _read_back_unsaved(cache, cfg)
    tally = cfg.tally
    if tally is not None:
        tally.rows_total += len(case_list) * len(cfg.metrics)
        if cfg.cache is not None:  # repeats bypass the cache; the first run's cache is the one to resume from
            tally.cache_path = str(cfg.cache)
    try:
        if cfg.dry_run:
            est = estimate(case_list, cfg, cache, prices)
            return JudgeResult(rows=[], summary={"dry_run": True, **est}, estimate=est)
        try:
            return await _run(case_list, cfg, cache, prices)
        except JudgeStopped as stopped:
            cache.close()
            kept = (f"; no cache ({no_cache()}): nothing of this run is kept" if cfg.cache is None else
                    f"; {cache.written} replies of this run are in the cache, a rerun with the same "
                    f"{option('cache')} resumes")
            raise JudgeStopped(f"{stopped}{kept}{_keep_unsaved(cache, cfg)}", stopped.kind) from None
    finally:
        cache.close()
        if tally is not None:
            tally.cached += cache.written
            tally.shared += cache.shared
        if cache.unsaved:  # an interrupt, or a last commit that failed: said with the interrupt, else logged
            note = _keep_unsaved(cache, cfg)
            if tally is not None:
                tally.notes.append(note)
            else:
                log.warning("%s", note.lstrip("; "))


def budget_without_price(model: str) -> Exception:
    """The error for a budget with no price for the judge model (its cost, and so the budget, unknowable)."""
    from ragmeter.errors import InputError

    how = option("prices", "{%r: [IN, OUT]} (USD per million tokens)" % model, flag="--price IN,OUT or --prices FILE")
    return InputError(f"{arg('budget')} needs a price for model {model!r}: pass {how}")


def check_metrics(case_list: List[Case], cfg: JudgeConfig) -> None:
    """Raise :class:`~ragmeter.errors.InputError` before any call when a custom metric cannot run on these cases
    (a field the data lacks, a scoring function that raises on a sample reply)."""
    from ragmeter.errors import InputError

    for name in cfg.metrics:
        check = getattr(cfg.implementation(name), "check", None) if name not in BUILTIN_METRICS else None
        if check is None:
            continue
        try:
            check(case_list)
        except InputError as exc:
            source = getattr(cfg.implementation(name), "source", None)  # the --metric-file / --metric-module defining it
            if not source or str(exc).startswith(f"{source}:"):
                raise
            raise InputError(f"{source}: {exc}") from None


class SpillPlaces(NamedTuple):
    """Where the paid replies a full disk kept out of a cache go: beside the ``cache`` file, else in ``spill_dir``.
    The spill helpers below take this or a :class:`JudgeConfig` (which has both attributes): collect spills its
    replies as the judge does."""

    cache: Union[str, Path, None]
    spill_dir: Union[str, Path, None] = None


def _spill_places(cfg: Union[JudgeConfig, SpillPlaces]) -> List[Path]:
    """Where :func:`_spill` writes the replies the cache could not take: beside the cache, else ``spill_dir``."""
    places = [Path(cfg.cache).parent] if cfg.cache is not None else []
    if cfg.spill_dir is not None:
        places.append(Path(cfg.spill_dir))
    return places


def _read_back_unsaved(cache: Cache, cfg: Union[JudgeConfig, SpillPlaces]) -> None:
    """Commit to the cache the paid replies an earlier run spilled (``CACHE.unsaved-*.jsonl`` where
    :func:`_spill` writes them), so this run replays them instead of paying again; each file read back is
    deleted. A cache that still cannot take them stops the run before any call (:class:`CacheError`)."""
    from .cache import CacheError, CacheWriteError

    if not cache.enabled or cfg.cache is None:
        return
    pattern = f"{Path(cfg.cache).name}.unsaved-*.jsonl"
    seen: set = set()
    for place in _spill_places(cfg):
        for path in sorted(place.glob(pattern)) if place.is_dir() else []:
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            try:
                n = cache.read_back(path)
            except CacheWriteError as exc:
                raise CacheError(f"{exc}: the paid replies kept in {path} cannot be read back into it; free some "
                                 f"space, or pass another {option('cache', 'PATH')}") from None
            if n:
                log.warning("%d paid replies of an earlier run read back from %s into the cache", n, path)


def _keep_unsaved(cache: Cache, cfg: Union[JudgeConfig, SpillPlaces]) -> str:
    """Write the paid replies the cache could not take elsewhere; "; what became of them" ("" when none)."""
    if not cache.unsaved:
        return ""
    spilled = _spill(cache, cfg)
    if spilled is not None:
        return (f"; {spilled[1]} paid replies could not be cached and were written to {spilled[0]} (a rerun with "
                f"the same {option('cache')} reads them back)")
    return f"; {len(cache.unsaved)} paid replies could not be kept (no place to write them)"


def _spill(cache: Cache, cfg: Union[JudgeConfig, SpillPlaces]) -> Optional[tuple]:
    """Write the replies the cache could not take to a JSON Lines file beside the cache, else in ``spill_dir``
    (``--out``'s folder on the command line); (path, count) or None when neither could be written."""
    rows, cache.unsaved = list(cache.unsaved), []
    if not rows:
        return None
    stem = f"{Path(cfg.cache or 'cache.sqlite').name}.unsaved-{time.strftime('%Y%m%d-%H%M%S')}"
    places = _spill_places(cfg)
    text = "".join(json.dumps({"key": k, "value": json.loads(v), "prompt": p, "model": m, "created": c},
                              ensure_ascii=False) + "\n" for k, v, p, m, c in rows)
    for place in places:
        target = place / f"{stem}.jsonl"
        try:
            place.mkdir(parents=True, exist_ok=True)
            n = 1
            while True:  # a new file: another run sharing the cache may have spilled in the same second
                try:
                    fh = open(target, "x", encoding="utf-8")
                    break
                except FileExistsError:
                    n += 1
                    target = place / f"{stem}-{n}.jsonl"
            with fh:
                fh.write(text)
        except OSError:
            try:
                target.unlink()
            except OSError:
                pass
            continue
        return str(target), len(rows)
    cache.unsaved = rows
    return None


async def _run(case_list: List[Case], cfg: JudgeConfig, cache: Cache, prices: PriceTable) -> JudgeResult:
    started = time.monotonic()
    limits = Limits(cfg.concurrency, cfg.rpm, cfg.tpm, period=cfg.rate_period, control=cfg.rate_control)
    progress = _Progress(cfg.progress, len(case_list) * len(cfg.metrics))
    stop = RunStop()
    client = JudgeClient(cfg.client_config(), limits, stop=stop)
    engine = Engine(client, cache, prices, Budget(cfg.budget), max_tokens=cfg.max_tokens,
                    refresh_failed=cfg.refresh_failed)
    client._on_retry = lambda _rec: progress.update(client, engine)
    opts = cfg.metric_options()
    jobs = [(i, case, metric) for i, case in enumerate(case_list) for metric in cfg.metrics]
    rows: List[Optional[Dict[str, Any]]] = [None] * len(jobs)
    queue = iter(range(len(jobs)))

    n_workers = max(1, min(len(jobs), cfg.concurrency * 2))
    tasks: List["asyncio.Task[None]"] = []
    alive = [0]

    async def worker() -> None:
        alive[0] += 1
        try:
            for j in queue:
                if stop.stopped:
                    return
                _, case, metric = jobs[j]
                row = await _judge_one(engine, case, metric, cfg, opts)
                rows[j] = row
                progress.done += 1
                progress.failed += row["status"] == "failed"
                progress.skipped += row["status"] == "skipped"
                progress.update(client, engine)
                if alive[0] - client.throttle_waits > n_workers:
                    return  # a stand-in whose Retry-After wait is over
        finally:
            alive[0] -= 1

    def stand_in() -> None:
        # A case waiting out a Retry-After holds its worker for the whole wait, and under load-independent 429s
        # a share of the workers is always waiting: the slots would go idle while cases are left. Lend the
        # wait a worker (at most ``n_workers`` more in all, so the cases in flight stay bounded).
        busy = alive[0] - client.throttle_waits
        if busy < n_workers and alive[0] < 2 * n_workers and not stop.stopped:
            tasks.append(asyncio.ensure_future(worker()))

    client.on_throttle_wait = stand_in
    async with client:
        with progress:
            try:
                tasks.extend(asyncio.ensure_future(worker()) for _ in range(n_workers))
                try:
                    await _until_done_or_stopped(tasks, stop, min(cfg.timeout, STOP_GRACE))
                except asyncio.CancelledError:  # Ctrl-C or SIGTERM; without a cache no reply could be kept
                    grace = min(cfg.timeout, STOP_GRACE) if cfg.cache is not None else 0.0
                    await _grace_after_interrupt(tasks, stop, grace)
                    raise
            finally:
                await _cancel(tasks)  # an interrupt: every worker stops before the session and the cache close
                if cfg.tally is not None:
                    cfg.tally.rows_done += progress.done
                    cfg.tally.sent += engine.answered_calls + engine.failed_calls
                    cfg.tally.failed += engine.failed_calls
                    if cfg.cache is None:  # --no-cache, or repeats 2..N: nothing of this run goes to the cache
                        cfg.tally.uncached += engine.answered_calls
                    cfg.tally.replayed += engine.cached_calls
    errors = [t.exception() for t in tasks if not t.cancelled()]  # retrieved, so asyncio does not log them
    if stop.stopped:
        raise JudgeStopped(stop.reason or "stopped", stop.kind or "stopped")
    for error in errors:
        if error is not None:
            raise error
    final = [r for r in rows if r is not None]
    summary = summarize(final, case_list, cfg, engine, client, time.monotonic() - started, cache)
    return JudgeResult(rows=final, summary=summary)


async def _until_done_or_stopped(tasks: List["asyncio.Task[None]"], stop: RunStop, grace: float) -> None:
    """Wait for the workers; once the run is stopped, give the calls in flight ``grace`` seconds to come back
    (their replies are paid for and get cached; none when the endpoint is unreachable), then cancel the rest. A
    worker failing for any other reason (a bug) cancels the others at once."""
    while True:  # (the list grows while it is waited on: stand-ins for cases waiting out a Retry-After)
        live = [t for t in tasks if not t.done()]
        if not live:
            return
        done, pending = await asyncio.wait(live, return_when=asyncio.FIRST_EXCEPTION)
        if pending or any(not t.cancelled() and t.exception() is not None for t in done):
            break
    pending = {t for t in tasks if not t.done()}
    if not pending:
        return
    if stop.stopped and stop.kind != "unreachable":
        await asyncio.wait(pending, timeout=grace)
    await _cancel(list(pending))


async def _grace_after_interrupt(tasks: List["asyncio.Task[None]"], stop: RunStop, grace: float) -> None:
    """An interrupted run sends nothing more, and gives the calls in flight ``grace`` seconds to come back: they
    are paid for, and their replies get cached for the rerun (0 without a cache: nothing would keep them). A second
    Ctrl-C drops them (asyncio's runner then raises KeyboardInterrupt at once)."""
    stop.trip("interrupted", "interrupted")
    pending = [t for t in tasks if not t.done()]
    if pending and grace > 0:
        # no "interrupted" here: SIGTERM (a CI runner's time-out) comes this way too, and the CLI's last line names it
        print(f"ragmeter: stopping: waiting up to {grace:g} s for the calls in flight (their replies are cached "
              "for the rerun); a second Ctrl-C (or SIGTERM) drops them", file=sys.stderr, flush=True)
        await asyncio.wait(pending, timeout=grace)
    for t in tasks:  # retrieved, so asyncio does not log the Halt of a worker that stopped
        if t.done() and not t.cancelled():
            t.exception()


async def _cancel(tasks: List["asyncio.Task[None]"]) -> None:
    live = [t for t in tasks if not t.done()]
    for t in live:
        t.cancel()
    if live:
        await asyncio.gather(*live, return_exceptions=True)


def run_sync(cases: Iterable[Union[Mapping[str, Any], Case]], config: Optional[JudgeConfig] = None,
             **options: Any) -> JudgeResult:
    """:func:`run` for synchronous code; also works inside a running event loop (Jupyter),
    where it runs on a private loop in a helper thread and blocks until done. Interrupted (Ctrl-C, or a
    notebook's stop), it raises a KeyboardInterrupt saying what was finished and kept (:meth:`Tally.message`)."""
    from ragmeter._aio import run_blocking

    cfg = _make_config(config, options)
    tally = cfg.tally or Tally()  # counted all the same: the interrupt says what the cache kept
    cfg = replace(cfg, tally=tally)
    try:
        return run_blocking(lambda: run(cases, cfg), "ragmeter-judge")
    except KeyboardInterrupt as exc:
        if str(exc) or not tally.rows_total:
            raise
        raise KeyboardInterrupt(tally.message()) from None


# -- dry run -------------------------------------------------------------------------------------------
def _tok(messages: List[Dict[str, str]]) -> int:
    return sum(estimate_tokens(m["content"]) + 4 for m in messages)


def estimate(case_list: List[Case], cfg: JudgeConfig, cache: Optional[Cache] = None,
             prices: Optional[PriceTable] = None) -> Dict[str, Any]:
    """Calls, tokens and cost a run would spend, without sending anything.

    First-step prompts are built exactly and looked up in the cache (hits cost
    nothing); later steps depend on replies and are estimated from input sizes.
    ``cost_usd`` uses the expected output sizes, ``cost_usd_max`` every call
    using ``max_tokens`` (doubling retries not included). With ``refresh_failed``,
    a first step whose cached replies end in a failed parse (checked as JSON, not
    against the metric's schema) counts as a call to send.
    """
    prices = prices or cfg.price_table()
    cache = cache or Cache(None)
    from .engine import Engine as _E  # noqa: F401  (keys are computed like the engine does)
    from .cache import cache_key

    params = {"temperature": cfg.temperature, "max_tokens": cfg.max_tokens, "json_mode": cfg.json_mode}

    def key(prompt_id: str, messages: List[Dict[str, str]]) -> str:
        return cache_key(endpoint=cfg.base_url, model=cfg.model, params=params, prompt=prompt_id, inputs=messages)

    def served(cache_key_: str) -> Optional[Dict[str, Any]]:
        """The cached reply a run would serve for this key (not one it asks again: see engine.UNFINISHED)."""
        hit = cache.get(cache_key_)
        unusable = hit is None or not_a_reply(hit) is not None or hit.get("finish_reason") in UNFINISHED
        return None if unusable else hit

    def replayed(prompt: P.Prompt, messages: List[Dict[str, str]]) -> bool:
        """Whether a run would answer this first step from the cache (without sending it)."""
        hit = served(key(prompt.id, messages))
        if hit is None or not cfg.refresh_failed:
            return hit is not None
        raw = str(hit.get("content"))
        try:
            parse_json_object(raw)
            return True
        except ParseError as err:
            # replayed unless the cached repair turn failed too (then --refresh-failed asks again)
            repaired = messages + [{"role": "assistant", "content": raw}, P.repair_message(str(err))]
            hit2 = served(key(prompt.id + "+repair", repaired))
            if hit2 is None:
                return True
            try:
                parse_json_object(str(hit2.get("content")))
                return True
            except ParseError:
                return False

    def cached_reply(prompt: P.Prompt, messages: List[Dict[str, str]],
                     validate: Callable[[Dict[str, Any]], Any]) -> Any:
        """The validated reply a run would read from the cache for this step (after the cached repair turn when
        the first reply was unusable), or None when the run would send it: a later step is then exact."""
        hit = served(key(prompt.id, messages))
        if hit is None:
            return None
        raw = str(hit.get("content"))
        try:
            return validate(parse_json_object(raw))
        except ParseError as err:
            repaired = messages + [{"role": "assistant", "content": raw}, P.repair_message(str(err))]
            hit2 = served(key(prompt.id + "+repair", repaired))
            try:
                return None if hit2 is None else validate(parse_json_object(str(hit2.get("content"))))
            except ParseError:
                return None

    per: Dict[str, Dict[str, int]] = {}
    unestimated: set = set()  # custom metrics that cannot say what they would send
    calls = cached = pt = ct = ct_max = emb_tokens = 0

    def add(metric: str, prompt: P.Prompt, messages: List[Dict[str, str]], out_tokens: int, exact: bool) -> None:
        nonlocal calls, cached, pt, ct, ct_max
        m = per.setdefault(metric, {"calls": 0, "cached_calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
        if exact and replayed(prompt, messages):
            m["cached_calls"] += 1
            cached += 1
            return
        p = _tok(messages)
        c = min(out_tokens, cfg.max_tokens)
        m["calls"] += 1
        m["prompt_tokens"] += p
        m["completion_tokens"] += c
        calls += 1
        pt += p
        ct += c
        ct_max += cfg.max_tokens

    for case in case_list:
        if case.missing_run:
            continue
        lang = cfg.language if cfg.language in P.LANGUAGES else P.detect_language(case.question)
        ans_t = estimate_tokens(case.answer or "")
        ref_t = estimate_tokens(case.reference_answer or "")
        for metric in cfg.metrics:
            if metric == "correctness" and case.answer and case.reference_answer:
                msgs = P.CORRECTNESS.messages({"question": case.question, "reference_answer": case.reference_answer,
                                               "answer": case.answer, "contexts": case.contexts}, lang)
                add(metric, P.CORRECTNESS, msgs, 80, True)
            elif metric == "faithfulness" and case.answer:
                msgs = P.FAITHFULNESS_STATEMENTS.messages({"question": case.question, "answer": case.answer}, lang)
                add(metric, P.FAITHFULNESS_STATEMENTS, msgs, int(ans_t * 1.3) + 20, True)
                # a cached first step gives the statements the run would send on: the second step is exact
                statements = cached_reply(P.FAITHFULNESS_STATEMENTS, msgs, statements_of)
                n_st = max(1, ans_t // 15) if statements is None else len(statements)
                if case.contexts and n_st:
                    msgs2 = P.FAITHFULNESS_VERDICTS.messages(
                        {"contexts": case.contexts, "statements": statements or ["x" * 60] * n_st}, lang)
                    add(metric, P.FAITHFULNESS_VERDICTS, msgs2, 35 * n_st, statements is not None)
            elif metric == "answer_relevancy" and case.answer:
                msgs = P.RELEVANCY_QUESTIONS.messages({"answer": case.answer, "n": cfg.n_questions}, lang)
                add(metric, P.RELEVANCY_QUESTIONS, msgs, 30 * cfg.n_questions, True)
                if cfg.embeddings_model:
                    emb_tokens += estimate_tokens(case.question) * (1 + cfg.n_questions)
                else:
                    n_q = cfg.n_questions
                    questions = cached_reply(P.RELEVANCY_QUESTIONS, msgs, lambda d: relevancy_questions(d, n_q))
                    texts = [case.question] * n_q if questions is None else [q["question"] for q in questions]
                    msgs2 = P.RELEVANCY_GRADED.messages(
                        {"question": case.question, "generated_questions": texts}, lang)
                    add(metric, P.RELEVANCY_GRADED, msgs2, 15 * len(texts), questions is not None)
            elif metric == "context_precision" and case.contexts:
                use_ref = cfg.precision_against == "reference" or (
                    cfg.precision_against == "auto" and case.reference_answer)
                target = case.reference_answer if use_ref else case.answer
                if target:
                    chunks = [{"index": i, "text": t} for i, t in enumerate(case.contexts)]
                    msgs = P.CONTEXT_PRECISION.messages(
                        {"question": case.question, "target_kind": "reference" if use_ref else "answer",
                         "target": target, "chunks": chunks}, lang)
                    add(metric, P.CONTEXT_PRECISION, msgs, 35 * len(chunks), True)
            elif metric == "context_recall" and case.reference_answer and case.contexts:
                msgs = P.CONTEXT_RECALL.messages({"question": case.question, "reference_answer": case.reference_answer,
                                                  "contexts": case.contexts}, lang)
                add(metric, P.CONTEXT_RECALL, msgs, int(ref_t * 1.3) + 40 * max(1, ref_t // 15), True)
            elif metric not in BUILTIN_METRICS:
                planned = getattr(cfg.implementation(metric), "planned_calls", None)
                if planned is None:
                    unestimated.add(metric)
                    continue
                for prompt, msgs, out_tokens, exact in planned(case, lang):
                    add(metric, prompt, msgs, out_tokens, exact)
    cost = prices.cost(cfg.model, pt, ct)
    cost_max = prices.cost(cfg.model, pt, ct_max)
    emb_cost = prices.cost(cfg.embeddings_model, emb_tokens, 0) if cfg.embeddings_model else 0.0
    if cost is not None and emb_cost is not None:
        cost += emb_cost
        cost_max = (cost_max or 0.0) + emb_cost
    return {
        "n_cases": len(case_list), "metrics": list(cfg.metrics), "model": cfg.model,
        "calls": calls, "cached_calls": cached, "prompt_tokens": pt, "completion_tokens": ct,
        "embedding_tokens": emb_tokens,
        "cost_usd": None if cost is None else round(cost, 6),
        "cost_usd_max": None if cost_max is None else round(cost_max, 6),
        "per_metric": per,
        "note": "first-step prompts are exact and checked against the cache; later steps are estimated"
                + (f"; not estimated (no planned_calls): {', '.join(sorted(unestimated))}" if unestimated else ""),
    }
