"""The judge engine: one structured call = cache, budget, client, strict parsing, one repair.

:meth:`Engine.ask` builds the messages of a versioned prompt, serves them from
the cache when the same request already succeeded, else checks the budget,
calls the endpoint and commits the raw reply to the cache before using it (a
group commit shared with the calls finishing at the same time, see
:mod:`ragmeter.judge.cache`). The reply is parsed strictly (code fences, a
leading ``<think>`` block, thoughts ending in ``</think>`` and text around exactly one JSON object
tolerated)
and validated; on failure one repair turn is sent; on a second
failure the call fails with the raw output kept.

Replies are cached as received, so a reply that could not be parsed is
replayed by a rerun (same failure, no cost). With ``refresh_failed`` a
structured call whose cached replies end in a failed parse is asked again:
each turn is re-requested instead of replayed and the new replies replace the
cached ones.

Once the run is stopped (:mod:`ragmeter.judge.stop`) no call is sent any more,
and a commit that fails (a full disk) stops it: the reply is left in
``cache.unsaved`` for the runner to write elsewhere.
"""
from __future__ import annotations

import json
import re
from array import array
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Generator, List, Optional, TypeVar, Union

from .cache import Cache, CacheWriteError, cache_key, key_hasher, messages_bytes
from .client import JudgeCallError, JudgeClient, check_vectors
from .cost import PriceTable, estimate_tokens
from .prompts import Prompt, repair_message
from .reply import split_thoughts
from .stop import Halt

__all__ = ["Engine", "RowStats", "Budget", "BudgetExceeded", "ParseError", "parse_json_object", "not_a_reply"]

T = TypeVar("T")


class ParseError(ValueError):
    """The reply is not the JSON object the prompt asks for."""


class BudgetExceeded(Exception):
    """Launching this call would pass ``--budget``; nothing was sent."""


class OutputError(Exception):
    """A reply still unusable after the repair turn; ``raw`` keeps it for review."""

    def __init__(self, message: str, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


#: finish reasons of an output the client never takes for a reply (cut short, or stopped by the endpoint's
#: content filter); the first versions cached one stopped by the filter as a reply
UNFINISHED = frozenset({"length", "content_filter"})


def not_a_reply(entry: Dict[str, Any]) -> Optional[str]:
    """Why a cached chat entry is not a reply this engine stored (a value edited or damaged in the file), or None.

    Such an entry is a miss: ``str()`` of a missing or non-text content ("None", "5", a dict's repr) would
    otherwise be parsed as the judge's words, and sent back in a repair turn."""
    if not isinstance(entry.get("content"), str):
        return "no reply text in it"
    reason = entry.get("finish_reason")
    if reason is not None and not isinstance(reason, str):
        return "its finish reason is not a text"
    return None


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.S)
_DECODER = json.JSONDecoder()
#: positions tried when looking for the one JSON object in a reply with other text (bounds the work on a long one)
_MAX_STARTS = 200


def _top_level_starts(text: str) -> Generator[int, Optional[int], None]:
    """Offsets of the ``{`` that open at brace depth 0 once the objects before them are read; ``skip_to`` (sent)
    jumps past an object that decoded. A ``{`` inside an object cut short or not JSON is nested in it, not a start:
    the complete object inside a truncated verdict is one of its fields, never the verdict."""
    depth, in_string, escaped, i = 0, False, False, 0
    while i < len(text):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == "{":
            if depth == 0:
                skip_to = yield i
                if skip_to is not None:
                    i = skip_to
                    continue
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
        elif ch == '"' and depth:
            in_string = True  # quotes only delimit strings inside braces: prose may hold a lone quote
        i += 1


def _lone_object(text: str) -> Optional[Dict[str, Any]]:
    """The JSON object in ``text`` when there is exactly one at the top level (read from a ``{`` to its matching
    end), else None."""
    found: List[Dict[str, Any]] = []
    starts = _top_level_starts(text)
    try:
        i = next(starts)
        for _ in range(_MAX_STARTS):
            try:
                obj, end = _DECODER.raw_decode(text, i)
            except json.JSONDecodeError:
                i = next(starts)  # the scan goes on inside it: what it holds is nested
                continue
            found.append(obj)
            if len(found) > 1:
                return None  # which one the model meant would be a guess
            i = starts.send(end)
        return None  # too many braces to read
    except StopIteration:
        return found[0] if len(found) == 1 else None


def _fenced_objects(text: str) -> List[Dict[str, Any]]:
    """The JSON objects that whole code fences of ``text`` hold."""
    found = []
    for m in _FENCE.finditer(text):
        try:
            obj = json.loads(m.group(1))
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            found.append(obj)
    return found


def parse_json_object(text: str) -> Dict[str, Any]:
    """Parse one JSON object. A surrounding ```json fence, a leading ``<think>...</think>`` block (or thoughts
    ending in ``</think>`` whose opening tag was in the prompt) and other text around exactly one JSON object are
    tolerated; a reply with none, or with several objects (in code fences or
    not), is not guessed at."""
    thoughts, s = split_thoughts(text)  # the thoughts are never the verdict, whatever they hold
    if not s:
        raise ParseError(f"the reply holds only reasoning ({len(thoughts)} characters of thoughts) and no answer"
                         if thoughts else "empty reply")
    m = _FENCE.search(s)
    if m and not s.startswith("{"):
        if len({json.dumps(o, sort_keys=True) for o in _fenced_objects(s)}) > 1:
            # two different fenced objects ("... Corrected: ```json {...}```"): which one is meant would be a guess
            raise ParseError("several JSON objects in code fences; reply with exactly one")
        s = m.group(1).strip()
    elif s.startswith("```"):
        s = s.strip("`").strip()
        if s[:4].lower() == "json":
            s = s[4:].strip()
    try:
        data = json.loads(s)
    except json.JSONDecodeError as exc:
        lone = _lone_object(s)  # one object with prose around it ("Here is my verdict: {...}")
        if lone is not None:
            return lone
        raise ParseError(f"invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(data, dict):
        raise ParseError(f"expected a JSON object, got {type(data).__name__}")
    return data


def _usable_vectors(vectors: Any, n: int) -> bool:
    """Whether cached ``vectors`` are what the client accepts today for ``n`` texts (see ``check_vectors``)."""
    if not (isinstance(vectors, list) and len(vectors) == n and all(isinstance(v, list) for v in vectors)):
        return False
    try:
        check_vectors([[float(x) for x in v] for v in vectors])
    except (JudgeCallError, TypeError, ValueError):
        return False
    return True


class Budget:
    """Stops launching calls once spent + reserved would pass ``limit`` (USD)."""

    def __init__(self, limit: Optional[float]) -> None:
        self.limit = limit
        self.spent = 0.0
        self.reserved = 0.0
        self.reached = False

    def reserve(self, estimate: float) -> bool:
        if self.limit is None:
            return True
        if self.reached or self.spent + self.reserved + estimate > self.limit:
            self.reached = True
            return False
        self.reserved += estimate
        return True

    def settle(self, estimate: float, actual: Optional[float]) -> None:
        if self.limit is None:
            self.spent += actual or 0.0
            return
        self.reserved = max(0.0, self.reserved - estimate)
        self.spent += actual if actual is not None else estimate


@dataclass
class RowStats:
    """What one case x metric row spent: calls, attempts, tokens, cost, latency."""

    calls: int = 0
    cached_calls: int = 0
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: Optional[float] = 0.0
    latency_ms: float = 0.0
    attempt_log: List[Dict[str, Any]] = field(default_factory=list)
    raw_output: Optional[str] = None
    refreshed: int = 0  #: structured calls asked again (``refresh_failed``) after their cached replies failed

    def add(self, *, prompt: str, attempts: List[Dict[str, Any]], pt: int, ct: int, cost: Optional[float],
            latency_ms: float) -> None:
        self.calls += 1
        self.attempts += len(attempts)
        self.prompt_tokens += pt
        self.completion_tokens += ct
        self.cost_usd = None if (cost is None or self.cost_usd is None) else self.cost_usd + cost
        self.latency_ms += latency_ms
        for a in attempts:
            self.attempt_log.append({"prompt": prompt, **a})

    @property
    def cached(self) -> bool:
        return self.calls > 0 and self.cached_calls == self.calls


class Engine:
    def __init__(self, client: JudgeClient, cache: Cache, prices: PriceTable, budget: Budget, *,
                 max_tokens: int = 2000, on_call: Optional[Callable[[RowStats], None]] = None,
                 refresh_failed: bool = False) -> None:
        self.client = client
        self.cache = cache
        self.prices = prices
        self.budget = budget
        self.max_tokens = max_tokens
        self.model = client.config.model
        self.endpoint = client.config.base_url
        self.on_call = on_call
        self.refresh_failed = refresh_failed
        self.refreshed = 0  #: structured calls asked again because their cached replies failed to parse
        self._heads: Dict[str, Any] = {}  # prompt id -> (params, SHA-256 state after the key header)
        self.call_latencies = array("d")  # 8 bytes a call, for p50/p95
        self.cost_usd: Optional[float] = 0.0
        self.calls = 0
        self.cached_calls = 0
        self.answered_calls = 0  #: calls sent whose reply came back (counted before the reply is committed)
        self.failed_calls = 0    #: calls sent that failed for good (JudgeCallError): no reply to cache

    # -- keys ------------------------------------------------------------------------------------------
    def params(self) -> Dict[str, Any]:
        cfg = self.client.config
        return {"temperature": cfg.temperature, "max_tokens": self.max_tokens, "json_mode": cfg.json_mode}

    def chat_key(self, prompt_id: str, messages: List[Dict[str, str]],
                 encoded: Union[str, bytes, None] = None) -> str:
        """:func:`cache_key` of a chat call (the header's hash state is kept per prompt id)."""
        params = self.params()
        memo = self._heads.get(prompt_id)
        if memo is None or memo[0] != params:
            memo = (params, key_hasher(endpoint=self.endpoint, model=self.model, params=params, prompt=prompt_id))
            self._heads[prompt_id] = memo
        if encoded is None:
            encoded = messages_bytes(messages)
        elif isinstance(encoded, str):
            encoded = encoded.encode("utf-8")
        h = memo[1].copy()
        h.update(encoded)
        return h.hexdigest()

    def embed_key(self, texts: List[str]) -> str:
        cfg = self.client.config
        return cache_key(endpoint=cfg.embeddings_base_url or self.endpoint, model=cfg.embeddings_model or "",
                         params={"kind": "embeddings"}, prompt="embeddings", inputs=texts)

    def _cost(self, model: str, pt: int, ct: int) -> Optional[float]:
        return self.prices.cost(model, pt, ct)

    def _estimate_cost(self, model: str, pt: int, ct: int) -> float:
        c = self._cost(model, pt, ct)
        return 0.0 if c is None else c

    def _account(self, cost: Optional[float]) -> None:
        self.cost_usd = None if (cost is None or self.cost_usd is None) else self.cost_usd + cost

    async def _commit(self, key: str, value: Dict[str, Any], *, prompt: str, model: str) -> None:
        """Commit a paid reply; a cache that cannot be written any more (a full disk) stops the run: the reply
        stays in ``cache.unsaved`` for the runner to write elsewhere."""
        try:
            await self.cache.commit(key, value, prompt=prompt, model=model)
        except CacheWriteError as exc:
            self.client.stop.trip("cache_write", str(exc))
            raise Halt(str(exc)) from None

    async def _replayed(self, key: str, hit: Dict[str, Any], prompt_id: str) -> str:
        """A cached reply's content, the API key masked: a version before replies were masked cached a proxy's
        echo of the key as it came. Such an entry is rewritten masked, so the key leaves the cache file too."""
        content = str(hit["content"])
        masked = self.client.mask(content)
        if masked != content:
            await self._commit(key, {**hit, "content": masked}, prompt=prompt_id, model=self.model)
        return masked

    # -- one raw chat call ------------------------------------------------------------------------------
    async def complete(self, prompt_id: str, messages: List[Dict[str, str]], stats: RowStats, *,
                       fresh: bool = False) -> str:
        """The reply to ``messages``: from the cache, else from the endpoint (committed before it is returned).

        ``fresh``: do not replay a cached reply; send the request and replace the cached entry.
        """
        encoded = messages_bytes(messages)
        key = self.chat_key(prompt_id, messages, encoded)
        if not fresh:
            hit = self.cache.get(key)
            problem = None if hit is None else not_a_reply(hit)
            if problem is not None:
                self.cache.reject(key, problem)  # counted and warned of like a value that is not JSON
                hit = None
            if hit is not None and hit.get("finish_reason") in UNFINISHED:
                hit = None  # cached by a version that took it for a reply: asked again, and replaced
            if hit is not None:
                stats.calls += 1
                stats.cached_calls += 1
                self.cached_calls += 1
                return await self._replayed(key, hit, prompt_id)
        self.client.stop.check()
        est_pt = sum(estimate_tokens(m["content"]) + 4 for m in messages)
        est = self._estimate_cost(self.model, est_pt, self.max_tokens)
        if not self.budget.reserve(est):
            raise BudgetExceeded("budget reached before this call")
        held = est  # what this call holds of the budget until it settles

        def afford(billed_pt: int, billed_ct: int, next_max_tokens: int) -> bool:
            """Whether a doubled attempt fits: paid so far plus the attempt's worst case, beyond what is held."""
            nonlocal held
            exposure = (self._estimate_cost(self.model, billed_pt, billed_ct)
                        + self._estimate_cost(self.model, est_pt, next_max_tokens))
            if exposure <= held:
                return True
            if not self.budget.reserve(exposure - held):
                return False
            held = exposure
            return True

        try:
            res = await self.client.chat(messages, max_tokens=self.max_tokens, messages_json=encoded,
                                         prompt_estimate=est_pt, afford=afford)
        except JudgeCallError as err:
            self.failed_calls += 1
            cost = self._cost(self.model, err.prompt_tokens, err.completion_tokens)
            self.budget.settle(held, cost)
            self._account(cost)
            stats.add(prompt=prompt_id, attempts=err.attempts, pt=err.prompt_tokens, ct=err.completion_tokens,
                      cost=cost, latency_ms=err.latency_ms)
            if err.raw:
                stats.raw_output = err.raw
            self.calls += 1
            if err.kind == "budget":  # the doubled attempt was not sent: a row the budget stopped, not a failure
                raise BudgetExceeded(err.message) from None
            raise
        self.answered_calls += 1
        cost = self._cost(self.model, res.prompt_tokens, res.completion_tokens)
        self.budget.settle(held, cost)
        self._account(cost)
        # committed before the reply is used: a kill from here on loses nothing the run had used
        await self._commit(key, {"content": res.content, "finish_reason": res.finish_reason,
                                 "prompt_tokens": res.prompt_tokens, "completion_tokens": res.completion_tokens},
                           prompt=prompt_id, model=self.model)
        stats.add(prompt=prompt_id, attempts=res.attempts, pt=res.prompt_tokens, ct=res.completion_tokens,
                  cost=cost, latency_ms=res.latency_ms)
        self.calls += 1
        self.call_latencies.append(res.latency_ms)
        if self.on_call is not None:
            self.on_call(stats)
        return res.content

    # -- one structured call ----------------------------------------------------------------------------
    async def ask(self, prompt: Prompt, payload: Dict[str, Any], language: str,
                  validate: Callable[[Dict[str, Any]], T], stats: RowStats) -> T:
        """Call ``prompt`` with ``payload``; return ``validate(parsed)``; one repair turn on a bad reply.

        With ``refresh_failed``, when replayed (cached) replies end in an unusable reply, the call is asked
        again with every turn re-requested.
        """
        messages = prompt.messages(payload, language)
        replayed = stats.cached_calls
        try:
            return await self._ask(prompt, messages, validate, stats, fresh=False)
        except OutputError:
            if not self.refresh_failed or stats.cached_calls == replayed:
                raise
        self.refreshed += 1
        stats.refreshed += 1
        stats.raw_output = None
        return await self._ask(prompt, messages, validate, stats, fresh=True)

    async def _ask(self, prompt: Prompt, messages: List[Dict[str, str]], validate: Callable[[Dict[str, Any]], T],
                   stats: RowStats, fresh: bool) -> T:
        raw = await self.complete(prompt.id, messages, stats, fresh=fresh)
        try:
            return validate(parse_json_object(raw))
        except ParseError as first:
            error = str(first)
        repaired = messages + [{"role": "assistant", "content": raw}, repair_message(error)]
        raw2 = await self.complete(prompt.id + "+repair", repaired, stats, fresh=fresh)
        try:
            return validate(parse_json_object(raw2))
        except ParseError as second:
            stats.raw_output = raw2
            raise OutputError(f"{prompt.id}: unusable reply after one repair: {second}", raw2) from None

    # -- embeddings --------------------------------------------------------------------------------------
    async def embed(self, texts: List[str], stats: RowStats) -> List[List[float]]:
        key = self.embed_key(texts)
        hit = self.cache.get(key)
        if hit is not None and not _usable_vectors(hit.get("vectors"), len(texts)):
            hit = None  # cached by a version that did not check them: asked again, and replaced
        if hit is not None:
            stats.calls += 1
            stats.cached_calls += 1
            self.cached_calls += 1
            return hit["vectors"]
        self.client.stop.check()
        model = self.client.config.embeddings_model or ""
        est = self._estimate_cost(model, sum(estimate_tokens(t) for t in texts), 0)
        if not self.budget.reserve(est):
            raise BudgetExceeded("budget reached before this call")
        try:
            res = await self.client.embed(texts)
        except JudgeCallError as err:
            self.failed_calls += 1
            self.budget.settle(est, 0.0)
            stats.add(prompt="embeddings", attempts=err.attempts, pt=0, ct=0, cost=0.0, latency_ms=err.latency_ms)
            self.calls += 1
            raise
        self.answered_calls += 1
        cost = self._cost(model, res.prompt_tokens, 0)
        self.budget.settle(est, cost)
        self._account(cost)
        await self._commit(key, {"vectors": res.vectors}, prompt="embeddings", model=model)
        stats.add(prompt="embeddings", attempts=res.attempts, pt=res.prompt_tokens, ct=0, cost=cost,
                  latency_ms=res.latency_ms)
        self.calls += 1
        self.call_latencies.append(res.latency_ms)
        if self.on_call is not None:
            self.on_call(stats)
        return res.vectors
