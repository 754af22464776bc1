"""Key points from the judge endpoint: one call per reference answer, through the judge engine (cached, prompt
versioned; ``ragmeter review export --base-url URL --model M``).

A reference the endpoint could not split (a reply still unusable after the repair turn, a call that failed
after its retries) keeps the default, one core point holding the whole reference, and the export says how
many. A refused key, an unknown model or an unreachable endpoint stops the export (exit 2, nothing written).
"""
from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Tuple

from ragmeter.judge.prompts import Prompt, detect_language

__all__ = ["KEY_POINTS", "split_references"]

KEY_POINTS = Prompt("key-points", "v1", """
Split the field "reference_answer" (the reference answer to the field "question") into 1 to 4 key points: the
facts an answer must state to be correct. Each key point is one short standalone sentence, in the words of the
reference where possible; do not add facts. Mark as core the points without which an answer is wrong; other
points (details, context) are not core. At least one point is core.
Schema: {"points": [{"text": "<key point>", "core": true}, ...]}
""")


def _validate(reply: Dict[str, Any]) -> List[Tuple[str, bool]]:
    from ragmeter.judge.engine import ParseError

    points = reply.get("points")
    if not isinstance(points, list) or not 1 <= len(points) <= 4:
        raise ParseError('"points" must be a list of 1 to 4 objects')
    out = []
    for p in points:
        if not isinstance(p, dict) or not isinstance(p.get("text"), str) or not p["text"].strip() \
                or not isinstance(p.get("core"), bool):
            raise ParseError('each point must be {"text": "<non-empty string>", "core": true or false}')
        out.append((p["text"].strip(), p["core"]))
    if not any(core for _, core in out):
        raise ParseError("at least one point must be core")
    return out


async def _split(references: Dict[str, Tuple[str, str]], cfg: Any) -> Tuple[Dict[str, List[Tuple[str, bool]]], int]:
    from ragmeter.judge.cache import Cache
    from ragmeter.judge.client import JudgeCallError, JudgeClient
    from ragmeter.judge.engine import Budget, Engine, OutputError, RowStats
    from ragmeter.judge.limits import Limits
    from ragmeter.judge.stop import Halt, JudgeStopped, RunStop

    cache = Cache(cfg.cache)
    stop = RunStop()
    client = JudgeClient(cfg.client_config(), Limits(cfg.concurrency, cfg.rpm, cfg.tpm, period=cfg.rate_period),
                         stop=stop)
    engine = Engine(client, cache, cfg.price_table(), Budget(cfg.budget), max_tokens=cfg.max_tokens)
    slots = asyncio.Semaphore(max(1, cfg.concurrency))
    failed = 0

    async def one(case_id: str, question: str, reference: str) -> Tuple[str, Any]:
        nonlocal failed
        async with slots:
            try:
                payload = {"question": question, "reference_answer": reference}
                return case_id, await engine.ask(KEY_POINTS, payload, detect_language(question or reference),
                                                 _validate, RowStats())
            except (OutputError, JudgeCallError, Halt):
                failed += 1
                return case_id, None

    try:
        async with client:
            got = await asyncio.gather(*(one(i, q, r) for i, (q, r) in references.items()))
    finally:
        cache.close()
    if stop.stopped:
        raise JudgeStopped(stop.reason or "stopped", stop.kind or "stopped")
    return {i: points for i, points in got if points is not None}, failed


def split_references(references: Dict[str, Tuple[str, str]], cfg: Any) -> Tuple[Dict[str, List[Tuple[str, bool]]], int]:
    """``{case id: [(text, core), ...]}`` for ``{case id: (question, reference)}``, and how many failed."""
    from ragmeter._aio import run_blocking

    return run_blocking(lambda: _split(references, cfg), "ragmeter-keypoints")
