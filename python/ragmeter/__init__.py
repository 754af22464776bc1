"""ragmeter: fast, trustworthy evaluation of retrieval-augmented generation (RAG).

Score a run against a golden set, chunk level by evidence phrase, file level
alongside (every aggregate says how many cases it covers)::

    import ragmeter

    result = ragmeter.score("golden.jsonl", "run.jsonl", k=5)
    result.by_category                       # Polars DataFrame, one row per category
    result.summary["overall"]["hit_rate"]    # {'value': 0.8, 'n_scored': 45, 'n_total': 51}
    result.write("results")                  # cases.parquet, chunks.parquet, summary.json

    ragmeter.sweep("golden.jsonl", "run.jsonl", [0, 0.1, 0.2])   # what a reranker threshold does

trec_eval's measures, same numbers::

    from ragmeter.trec import evaluate
    evaluate("qrels.txt", "run.txt", ["map", "ndcg_cut.10", "P.5"], complete=True)

Retrieval, judge and diagnosis in memory (``ragmeter eval`` without the folder)::

    result = ragmeter.evaluate("golden.jsonl", "run.jsonl", judge=ragmeter.judge.JudgeConfig(...))
    result.cases, result.summary, result.write("results"), result.compare(baseline, gate="hit>=-2pp")

Also: ``ragmeter.testing`` (pytest assertions), ``ragmeter.metrics`` (rank metrics of one ranking), ``ragmeter.judge``
(LLM judges on any OpenAI-compatible endpoint), ``ragmeter.errors``. On the
command line, ``ragmeter demo`` runs the main job on a bundled example and
``ragmeter --help`` lists the commands.
"""
# Heavy modules (polars, aiohttp) are imported lazily so that the command line
# starts quickly; ``import ragmeter`` itself only loads this file.
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # neither typing nor importlib is imported at start-up: each slows every command
    from typing import Any, List

    # What the lazy names below resolve to, for type checkers (mypy, pyright, IDEs).
    from ragmeter import calibration as calibration
    from ragmeter import errors as errors
    from ragmeter import judge as judge
    from ragmeter import metrics as metrics
    from ragmeter import trec as trec
    from ragmeter import testing as testing
    from ragmeter.api import EvalResult as EvalResult
    from ragmeter.batch import score_batch as score_batch
    from ragmeter.evaluation import evaluate as evaluate
    from ragmeter.retrieval import score as score
    from ragmeter.retrieval import sweep as sweep

__version__ = "0.1.0"

_LAZY = {
    "evaluate": ("ragmeter.evaluation", "evaluate"),
    "EvalResult": ("ragmeter.api", "EvalResult"),
    "testing": ("ragmeter.testing", None),
    "score": ("ragmeter.retrieval", "score"),
    "score_batch": ("ragmeter.batch", "score_batch"),  # one Arrow batch (Ray Data's map_batches, Spark)
    "sweep": ("ragmeter.retrieval", "sweep"),
    "metrics": ("ragmeter.metrics", None),
    "trec": ("ragmeter.trec", None),
    "judge": ("ragmeter.judge", None),
    "errors": ("ragmeter.errors", None),
    "audit": ("ragmeter.audit", None),  # the module, callable: ragmeter.audit(golden, ...)
    "collect": ("ragmeter.collect", None),  # the module, callable: ragmeter.collect(golden, target=...)
    "calibration": ("ragmeter.calibration", None),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'ragmeter' has no attribute {name!r}")
    from importlib import import_module

    module = import_module(target[0])
    return module if target[1] is None else getattr(module, target[1])


def __dir__() -> List[str]:
    # The lazy names too, so that help(ragmeter) and tab completion show score and sweep.
    return sorted({*globals(), *_LAZY})
