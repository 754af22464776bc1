"""LLM judge engine and judge metrics.

``await ragmeter.judge.run(cases, base_url=..., model=...)`` or
``ragmeter.judge.run_sync(...)`` judges plain per-case records with the metrics
correctness, faithfulness, answer_relevancy, context_precision and
context_recall (and custom metrics: :class:`RubricMetric`, :func:`metric`, see
:mod:`ragmeter.judge.custom`) against any OpenAI-compatible endpoint, with retries, rate
limits, a persistent cache, cost accounting and a budget. See
:mod:`ragmeter.judge.runner`.
"""
from __future__ import annotations

from .cache import Cache, CacheError, cache_key, repair
from .custom import FunctionMetric, Metric, MetricError, RubricMetric, metric, register
from .client import ClientConfig, JudgeCallError, JudgeClient, resolve_api_key
from .cost import Price, PriceTable, estimate_tokens
from .engine import ParseError
from .limits import Limits
from .metrics import DEFAULT_METRICS, METRICS, Case, relevancy_variants
from .prompts import PROMPTS, detect_language
from .retry import Decision, RetryPolicy, classify, next_max_tokens
from .runner import JudgeConfig, JudgeResult, Tally, estimate, run, run_sync
from .stop import JudgeStopped
from .urls import public_endpoint

__all__ = [
    "run", "run_sync", "estimate", "JudgeConfig", "JudgeResult", "Case", "DEFAULT_METRICS", "METRICS",
    "ClientConfig", "JudgeClient", "JudgeCallError", "resolve_api_key", "Limits", "Cache", "cache_key",
    "Price", "PriceTable", "estimate_tokens", "RetryPolicy", "Decision", "classify", "next_max_tokens",
    "PROMPTS", "detect_language", "relevancy_variants", "Tally", "JudgeStopped", "CacheError", "repair",
    "public_endpoint", "RubricMetric", "metric", "Metric", "FunctionMetric", "MetricError", "register", "ParseError",
]
