"""Judging on Ray: many worker tasks, one rate controller. ``ragmeter.ray.judge_dataset(data, config, workers=2)``.

The rows are cut into batches (slices of a Ray Dataset's blocks, or of a list of records). Each batch is judged by
one Ray task running the judge engine of :mod:`ragmeter.judge.runner` unchanged: the same prompts, retries,
repair turn, budget doubling and row statuses, so the rows equal those of ``ragmeter.judge.run`` on the same
data (but for latencies and what came from the cache). What the workers share lives in one Ray actor, the
*controller*:

* the rate controller: a :class:`~ragmeter.judge.limits.Limits` built as the runner builds it, so ``rpm``,
  ``tpm`` and ``concurrency`` are totals across every worker and the adaptive bucket learns from all their
  answers. A worker's request holds one of its slots (``acquire``), reports the answer and gives it back
  (``release``): the public slot protocol of ``Limits``, nothing of its internals;
* the judge cache, whose only writer it is (workers read through it too, so it need not be on their node);
* the budget, and the run's stop (a refused key seen by one worker stops them all).

Failures. A worker that dies (its process killed, its node lost) loses its attempt, never a row: the batch is run
again (``retries`` times), and the replies committed before the death are replayed from the cache, not paid
again. A batch still failing, or a worker stopped by the endpoint, ends the run with
:class:`~ragmeter.judge.stop.JudgeStopped` naming the batch. Before any call, every block's columns are compared
and a block whose schema differs, or an id in two batches, is an :class:`~ragmeter.errors.InputError` naming the
batch. An address where no cluster answers is one :class:`~ragmeter.errors.InputError` line.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import time
from array import array
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ragmeter.errors import InputError

log = logging.getLogger("ragmeter.ray")

__all__ = ["judge_dataset", "connect"]


# -- the cluster -------------------------------------------------------------------------------------------
def connect(address: Optional[str] = None) -> None:
    """Join the Ray cluster at ``address`` (``None``: the one already joined, else a local one; ``"auto"``: the
    one this node belongs to). An address where nothing answers is one :class:`InputError` line (Ray itself
    would retry for minutes)."""
    import ray

    if ray.is_initialized():
        return
    if address not in (None, "auto", "local"):
        _probe(address)
    ray.init(address=address, log_to_driver=False, include_dashboard=False)


def _probe(address: str) -> None:
    """A TCP connect to the cluster's head (``host:port`` or ``ray://host:port``) within 5 s."""
    import socket

    target = address.split("://", 1)[-1]
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"ray address {address!r}: expected host:port (or ray://host:port, or auto)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5.0).close()
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise InputError(f"ray address {address}: no Ray cluster answers there ({why}); start one with "
                         f"`ray start --head` or pass the address it printed") from None


# -- the controller actor ----------------------------------------------------------------------------------
class _Controller:
    """The actor every worker asks before sending: rate limits, cache, budget, stop. Runs on one event loop
    (an async actor), which is what :class:`~ragmeter.judge.limits.Limits` needs."""

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        self.limits: Any = None
        self.cache: Any = None
        self.budget: Any = None
        self.stop: Optional[Tuple[str, str]] = None
        self.slots: Dict[int, Tuple[str, Any]] = {}
        self.closed: set = set()
        self.tickets = itertools.count(1)
        self.max_held = 0

    async def open(self) -> Optional[str]:
        """Open the cache and build the limits; the message of the error when the cache cannot serve."""
        from ragmeter.judge.cache import Cache, CacheError
        from ragmeter.judge.engine import Budget
        from ragmeter.judge.limits import Limits

        cfg = self.cfg
        try:
            self.cache = Cache(cfg.cache)
        except CacheError as exc:
            return str(exc)
        self.limits = Limits(cfg.concurrency, cfg.rpm, cfg.tpm, period=cfg.rate_period, control=cfg.rate_control)
        self.budget = Budget(cfg.budget)
        return None

    # slots: the public protocol of Limits.slot (enter, answer, exit), held across two calls
    async def acquire(self, owner: str, tokens: int,
                      retry: bool = False) -> Tuple[Optional[int], Optional[str], Optional[str]]:
        if self.stop is not None:
            return None, self.stop[0], self.stop[1]
        slot = self.limits.slot(tokens, retry=retry)
        await slot.__aenter__()
        if self.stop is not None or owner in self.closed:  # stopped, or its worker gone while it waited
            await slot.__aexit__(None, None, None)
            stop = self.stop or ("stopped", "the worker's batch is over")
            return None, stop[0], stop[1]
        ticket = next(self.tickets)
        self.slots[ticket] = (owner, slot)
        self.max_held = max(self.max_held, len(self.slots))
        return ticket, None, None

    async def release(self, ticket: int, status: Optional[int], headers: Optional[Dict[str, str]],
                      timed_out: bool) -> None:
        held = self.slots.pop(ticket, None)
        if held is None:
            return
        slot = held[1]
        if status is not None:
            slot.answer(status, headers or {})
        elif timed_out:
            slot.timed_out()
        await slot.__aexit__(None, None, None)

    async def close_owner(self, owner: str) -> int:
        """A worker's batch is over (or its process died): give back every slot it still holds."""
        self.closed.add(owner)
        mine = [t for t, (o, _) in self.slots.items() if o == owner]
        for ticket in mine:
            await self.release(ticket, None, None, False)
        return len(mine)

    def pause(self, seconds: float) -> None:
        self.limits.pause(seconds)

    def trip(self, kind: str, reason: str) -> None:
        if self.stop is None:
            self.stop = (kind, reason)

    # cache (the one writer) and budget
    def cache_get(self, key: str) -> Optional[dict]:
        return self.cache.get(key)

    async def cache_commit(self, key: str, value: Dict[str, Any], prompt: str, model: str) -> Optional[str]:
        from ragmeter.judge.cache import CacheWriteError

        try:
            await self.cache.commit(key, value, prompt=prompt, model=model)
        except CacheWriteError as exc:
            return exc.reason
        return None

    def budget_reserve(self, estimate: float) -> bool:
        return bool(self.budget.reserve(estimate))

    def budget_settle(self, estimate: float, actual: Optional[float]) -> None:
        self.budget.settle(estimate, actual)

    def state(self) -> Dict[str, Any]:
        return {"rate": self.limits.summary(), "budget_reached": self.budget.reached,
                "cache_written": self.cache.written, "cache_undecodable": self.cache.undecodable,
                "stop": self.stop, "max_held": self.max_held, "held": len(self.slots)}

    def finish(self) -> str:
        """Close the cache; "; what became of paid replies it could not take" ("" when none)."""
        from ragmeter.judge.runner import _keep_unsaved

        self.cache.close()
        return _keep_unsaved(self.cache, self.cfg)


# -- the worker's side: the engine's collaborators, served by the controller ------------------------------
class _SharedLimits:
    """What :class:`~ragmeter.judge.client.JudgeClient` uses of its limits (``slot``, ``pause``,
    ``concurrency``), each request's slot held at the controller."""

    def __init__(self, controller: Any, owner: str, concurrency: int, stop: Any) -> None:
        self.controller = controller
        self.owner = owner
        self.concurrency = concurrency
        self.stop = stop

    def slot(self, tokens: int = 0, *, retry: bool = False) -> "_SharedSlot":
        return _SharedSlot(self, tokens, retry)

    def pause(self, seconds: float) -> None:
        self.controller.pause.remote(seconds)


class _SharedSlot:
    __slots__ = ("_limits", "_tokens", "_retry", "_ticket", "_status", "_headers", "_timed_out")

    def __init__(self, limits: _SharedLimits, tokens: int, retry: bool = False) -> None:
        self._limits = limits
        self._tokens = tokens
        self._retry = retry
        self._timed_out = False
        self._ticket: Optional[int] = None
        self._status: Optional[int] = None
        self._headers: Optional[Dict[str, str]] = None

    async def __aenter__(self) -> "_SharedSlot":
        from ragmeter.judge.stop import Halt

        lim = self._limits
        ticket, kind, reason = await lim.controller.acquire.remote(lim.owner, self._tokens, self._retry)
        if ticket is None:
            lim.stop.trip(kind or "stopped", reason or "stopped")
            raise Halt(reason or "stopped")
        self._ticket = ticket
        return self

    def timed_out(self) -> None:
        self._timed_out = True

    def answer(self, status: int, headers: Optional[Mapping[str, str]]) -> None:
        self._status = status
        self._headers = {str(k): str(v) for k, v in headers.items()} if headers else None

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        timed_out = self._status is None and (self._timed_out or (
            exc_type is not None and issubclass(exc_type, (asyncio.TimeoutError, TimeoutError))))
        await self._limits.controller.release.remote(self._ticket, self._status, self._headers, timed_out)


class _SharedCache:
    """What the engine uses of its cache; the controller's cache behind it."""

    def __init__(self, controller: Any, path: Any) -> None:
        self.controller = controller
        self.path = path
        self.written = 0
        self.undecodable = 0
        self.unsaved: List[Any] = []

    def get(self, key: str) -> Optional[dict]:
        import ray

        if self.path is None:
            return None
        return ray.get(self.controller.cache_get.remote(key))  # the engine asks synchronously; a loopback hop

    def contains(self, key: str) -> bool:
        return self.get(key) is not None

    async def commit(self, key: str, value: Mapping[str, Any], *, prompt: str = "", model: str = "") -> None:
        from pathlib import Path

        from ragmeter.judge.cache import CacheWriteError

        if self.path is None:
            return
        error = await self.controller.cache_commit.remote(key, dict(value), prompt, model)
        if error is not None:
            raise CacheWriteError(Path(self.path), OSError(0, error))
        self.written += 1

    def close(self) -> None:
        pass


class _SharedBudget:
    """What the engine uses of its budget; one budget for every worker, at the controller."""

    def __init__(self, controller: Any, limit: Optional[float]) -> None:
        self.controller = controller
        self.limit = limit
        self.reached = False

    def reserve(self, estimate: float) -> bool:
        import ray

        if self.limit is None:
            return True
        ok = bool(ray.get(self.controller.budget_reserve.remote(estimate)))
        self.reached = self.reached or not ok
        return ok

    def settle(self, estimate: float, actual: Optional[float]) -> None:
        if self.limit is not None:
            self.controller.budget_settle.remote(estimate, actual)


def _shared_stop(controller: Any) -> Any:
    from ragmeter.judge.stop import RunStop

    class SharedStop(RunStop):
        """The worker's stop; its first cause is told to the controller, which stops the other workers."""

        def trip(self, kind: str, reason: str) -> None:
            first = self.reason is None
            super().trip(kind, reason)
            if first:
                controller.trip.remote(kind, reason)

    return SharedStop()


# -- one batch, in a worker --------------------------------------------------------------------------------
def _judge_batch(rows: Any, span: Tuple[int, int], cfg: Any, custom: Dict[str, Any], controller: Any,
                 owner: str) -> Dict[str, Any]:
    """Judge the records ``rows`` (an Arrow table sliced to ``span``, or records) as the runner would."""
    from ragmeter.judge.metrics import METRICS

    METRICS.update(custom)  # custom metrics travel with the task (they are registered in the driver only)
    if hasattr(rows, "slice"):
        rows = rows.slice(span[0], span[1] - span[0]).to_pylist()
    return asyncio.run(_judge_records(rows, cfg, controller, owner))


async def _judge_records(records: List[Mapping[str, Any]], cfg: Any, controller: Any, owner: str) -> Dict[str, Any]:
    from ragmeter.judge.client import JudgeClient
    from ragmeter.judge.engine import Engine
    from ragmeter.judge.runner import STOP_GRACE, _cancel, _cases, _judge_one, _until_done_or_stopped

    cases = _cases(records, cfg)
    stop = _shared_stop(controller)
    limits: Any = _SharedLimits(controller, owner, cfg.concurrency, stop)  # what the client uses of Limits
    client = JudgeClient(cfg.client_config(), limits, stop=stop)
    cache: Any = _SharedCache(controller, cfg.cache)  # what the engine uses of Cache and Budget
    budget: Any = _SharedBudget(controller, cfg.budget)
    engine = Engine(client, cache, cfg.price_table(), budget, max_tokens=cfg.max_tokens,
                    refresh_failed=cfg.refresh_failed)
    opts = cfg.metric_options()
    jobs = [(case, metric) for case in cases for metric in cfg.metrics]
    out: List[Optional[Dict[str, Any]]] = [None] * len(jobs)
    queue = iter(range(len(jobs)))

    async def worker() -> None:
        for j in queue:
            if stop.stopped:
                return
            out[j] = await _judge_one(engine, jobs[j][0], jobs[j][1], cfg, opts)

    tasks: List["asyncio.Task[None]"] = []
    try:
        async with client:
            try:
                tasks = [asyncio.ensure_future(worker()) for _ in range(max(1, min(len(jobs), cfg.concurrency * 2)))]
                await _until_done_or_stopped(tasks, stop, min(cfg.timeout, STOP_GRACE))
            finally:
                await _cancel(tasks)
    finally:
        await controller.close_owner.remote(owner)
    errors = [t.exception() for t in tasks if not t.cancelled()]
    if stop.stopped:  # said as data: an exception's extra fields (the kind) do not survive Ray's pickling
        return {"stopped": (stop.kind or "stopped", stop.reason or "stopped")}
    for error in errors:
        if error is not None:
            raise error
    s = client.stats
    return {"rows": out, "system_costs": [c.system_cost for c in cases],
            "engine": {"cost_usd": engine.cost_usd, "calls": engine.calls, "cached_calls": engine.cached_calls,
                       "refreshed": engine.refreshed, "call_latencies": list(engine.call_latencies)},
            "client": {"requests": s.requests, "preflight_requests": s.preflight_requests, "retries": s.retries,
                       "prompt_tokens": s.prompt_tokens, "completion_tokens": s.completion_tokens}}


# -- batches ---------------------------------------------------------------------------------------------
@dataclass
class _Batch:
    index: int
    source: Any                 #: an ObjectRef of an Arrow block, or a list of records
    span: Tuple[int, int]       #: rows of the block (records: of the whole list)
    first_id: Any
    block: Optional[int] = None
    attempts: int = 0
    errors: List[str] = field(default_factory=list)

    def label(self, total: int) -> str:
        where = (f"rows {self.span[0]}-{self.span[1] - 1} of block {self.block}" if self.block is not None
                 else f"records {self.span[0]}-{self.span[1] - 1}")
        return f"batch {self.index} of {total} ({where}, first id {self.first_id!r})"


def _survey_block(block: Any) -> Tuple[int, List[str], List[Any]]:
    return block.num_rows, list(block.column_names), (block.column("id").to_pylist()
                                                        if "id" in block.column_names else [])


def _dataset_batches(ds: Any, batch_size: int) -> List[_Batch]:
    """Batches of at most ``batch_size`` rows cut from the blocks; a block whose columns differ from the first
    block's, a block without ids or an id in two batches is refused, naming the batch, before any call."""
    import ray

    survey = ray.remote(num_cpus=0.1)(_survey_block)
    refs = ds.to_arrow_refs()
    facts = ray.get([survey.remote(ref) for ref in refs])
    batches: List[_Batch] = []
    for b, (ref, (n, _, ids)) in enumerate(zip(refs, facts)):
        for start in range(0, n, batch_size):
            stop = min(n, start + batch_size)
            batches.append(_Batch(len(batches) + 1, ref, (start, stop), ids[start] if ids else None, block=b))
    total = len(batches)
    reference: Optional[List[str]] = None
    seen: Dict[Any, _Batch] = {}
    for batch in batches:
        n, columns, ids = facts[batch.block]  # type: ignore[index]
        if "id" not in columns:
            raise InputError(f"{batch.label(total)}: no 'id' column (columns: {', '.join(columns) or 'none'})")
        if reference is None:
            reference = columns
        elif set(columns) != set(reference):
            missing = [c for c in reference if c not in columns]
            extra = [c for c in columns if c not in reference]
            raise InputError(f"{batch.label(total)}: its columns differ from batch 1's"
                             + (f"; missing {', '.join(map(repr, missing))}" if missing else "")
                             + (f"; not in batch 1: {', '.join(map(repr, extra))}" if extra else ""))
        for i in ids[batch.span[0]:batch.span[1]]:
            if i is None:
                raise InputError(f"{batch.label(total)}: a row without an id")
            other = seen.setdefault(str(i), batch)
            if other is not batch:
                raise InputError(f"{batch.label(total)}: id {str(i)!r} is also in {other.label(total)} "
                                 f"(it would be judged and counted twice)")
    return batches


def _first_rows(batches: List[_Batch], n: int) -> List[Dict[str, Any]]:
    """The first ``n`` rows of the dataset as records (a sample for the custom metrics' checks)."""
    import ray

    if not batches:
        return []
    first = batches[0]
    return ray.get(first.source).slice(first.span[0], min(n, first.span[1] - first.span[0])).to_pylist()


def _record_batches(records: Sequence[Any], batch_size: int) -> List[_Batch]:
    def first_id(rec: Any) -> Any:
        return rec.get("id") if isinstance(rec, Mapping) else getattr(rec, "id", None)

    return [_Batch(k + 1, list(records[s:s + batch_size]), (s, min(len(records), s + batch_size)),
                   first_id(records[s])) for k, s in enumerate(range(0, len(records), batch_size))]


# -- the run -------------------------------------------------------------------------------------------------
def judge_dataset(data: Any, config: Any = None, *, workers: int = 2, batch_size: int = 64, retries: int = 1,
                  address: Optional[str] = None, **options: Any) -> Any:
    """Judge the rows of ``data`` (a Ray Dataset, or a list of records) with ``workers`` Ray tasks under one
    shared rate controller; returns a :class:`~ragmeter.judge.runner.JudgeResult` whose rows and summary are
    those of :func:`ragmeter.judge.run_sync` on the same rows (in the same order), with a ``ray`` section.

    ``config`` is a :class:`~ragmeter.judge.JudgeConfig` (or pass its options as keywords); ``rpm``, ``tpm``,
    ``concurrency`` and ``budget`` are totals across every worker. ``batch_size``: rows per task. ``retries``:
    how many times a batch whose worker died is run again. ``address``: the cluster to join when not joined yet.
    """
    import ray

    from ragmeter.judge.metrics import BUILTIN_METRICS, METRICS
    from ragmeter.judge.runner import JudgeResult, _cases, _make_config, check_metrics, summarize
    from ragmeter.judge.stop import JudgeStopped

    cfg = replace(_make_config(config, options), tally=None, progress=False)
    if cfg.dry_run:
        raise InputError("judge_dataset: a dry run sends nothing; use ragmeter.judge.run(..., dry_run=True)")
    if workers < 1 or batch_size < 1 or retries < 0:
        raise InputError("judge_dataset: workers and batch_size must be at least 1, retries at least 0")
    if cfg.budget is not None and cfg.price_table().lookup(cfg.model) is None:
        raise InputError(f"--budget needs a price for model {cfg.model!r}: pass --price IN,OUT or --prices FILE")
    connect(address)
    started = time.monotonic()
    records = None if hasattr(data, "to_arrow_refs") else list(data)
    if records is None:
        batches = _dataset_batches(data, batch_size)
        sample = _first_rows(batches, 100)
    else:
        batches = _record_batches(records, batch_size)
        sample = records
    check_metrics(_cases(sample, cfg), cfg)  # ids unique; a custom metric that cannot run: before any call
    custom = {m: METRICS[m] for m in cfg.metrics if m not in BUILTIN_METRICS}
    controller = ray.remote(num_cpus=0)(_Controller).remote(cfg)
    try:
        opened = ray.get(controller.open.remote())
        if opened is not None:
            from ragmeter.judge.cache import CacheError

            raise CacheError(opened)
        results = _run_batches(batches, cfg, custom, controller, workers, retries)
        state = ray.get(controller.state.remote())
    except JudgeStopped as stopped:
        try:
            written = f"{ray.get(controller.state.remote())['cache_written']} replies of this run are"
        except ray.exceptions.RayError:  # the controller died: what it committed is there, uncounted
            written = "the replies committed before it died are"
        kept = ("; no cache: nothing of this run is kept" if cfg.cache is None else
                f"; {written} in the cache, a rerun with the same cache resumes")
        raise JudgeStopped(f"{stopped}{kept}{_finish(controller)}", stopped.kind) from None
    except BaseException:
        _finish(controller)
        raise
    note = _finish(controller)
    if note:
        log.warning("%s", note.lstrip("; "))
    rows = [row for r in results for row in r["rows"]]
    expected = sum((b.span[1] - b.span[0]) for b in batches) * len(cfg.metrics)
    if any(row is None for row in rows) or len(rows) != expected:
        raise RuntimeError("judge_dataset: a batch came back without all its rows")  # a bug, never silent
    cases = [_CaseCost(c) for r in results for c in r["system_costs"]]
    engine: Any = _merged_engine(results, state)  # the fields summarize reads, summed over the batches
    client: Any = _merged_client(results, state)
    facts: Any = _CacheFacts(state["cache_undecodable"])
    summary = summarize(rows, cases, cfg, engine, client, time.monotonic() - started, facts)  # type: ignore[arg-type]
    summary["ray"] = {
        "workers": workers, "batches": len(batches), "batch_size": batch_size,
        "retried": [{"batch": b.index, "attempts": b.attempts, "errors": b.errors} for b in batches if b.errors],
        "max_requests_in_flight": state["max_held"],
        "note": "calls, requests and tokens count the attempts that finished; an attempt whose worker died is "
                "not counted (the replies it had committed are replayed from the cache by the retry)",
    }
    return JudgeResult(rows=rows, summary=summary)


def _finish(controller: Any) -> str:
    import ray

    try:
        return ray.get(controller.finish.remote())
    except Exception:  # closed already, or the actor is gone: nothing more to say than the error on its way
        return ""
    finally:
        ray.kill(controller)


def _run_batches(batches: List[_Batch], cfg: Any, custom: Dict[str, Any], controller: Any, workers: int,
                 retries: int) -> List[Dict[str, Any]]:
    """Run every batch, at most ``workers`` at a time; a batch whose worker died runs again (``retries``)."""
    import ray
    from ray.exceptions import RayActorError, RayError, RayTaskError

    from ragmeter.judge.stop import JudgeStopped

    task = ray.remote(num_cpus=1, max_retries=0)(_judge_batch)
    total = len(batches)
    todo = list(reversed(batches))
    running: Dict[Any, Tuple[_Batch, str]] = {}
    results: Dict[int, Dict[str, Any]] = {}
    try:
        while todo or running:
            while todo and len(running) < workers:
                batch = todo.pop()
                batch.attempts += 1
                owner = f"b{batch.index}a{batch.attempts}"
                ref = task.remote(batch.source, batch.span, cfg, custom, controller, owner)
                running[ref] = (batch, owner)
            ready, _ = ray.wait(list(running), num_returns=1)
            for ref in ready:
                batch, owner = running.pop(ref)
                try:
                    result = ray.get(ref)
                except RayTaskError as err:  # the batch's own code raised: the judge stopped, or a bug
                    ray.get(controller.close_owner.remote(owner))
                    cause = _cause(err)
                    if isinstance(cause, InputError):
                        kind = getattr(cause, "kind", "stopped")
                        raise JudgeStopped(f"{batch.label(total)}: {cause}", kind) from None
                    if isinstance(cause, RayActorError):  # the controller is gone: no limit, no cache writer
                        raise JudgeStopped(f"{batch.label(total)}: the rate controller actor died "
                                           f"({_one_line(cause)})", "controller_died") from None
                    raise RuntimeError(f"{batch.label(total)}: {_one_line(err)}") from None
                except RayError as err:  # the worker died (killed, out of memory, node lost): the batch again
                    ray.get(controller.close_owner.remote(owner))
                    batch.errors.append(_one_line(err))
                    if batch.attempts <= retries:
                        log.warning("%s: its worker died (%s); running it again (attempt %d of %d)",
                                    batch.label(total), batch.errors[-1], batch.attempts + 1, retries + 1)
                        todo.append(batch)
                        continue
                    raise JudgeStopped(f"{batch.label(total)}: its worker died {batch.attempts} times (last: "
                                       f"{batch.errors[-1]})", "worker_died") from None
                if "stopped" in result:  # the endpoint (or another batch) stopped the run
                    kind, reason = result["stopped"]
                    raise JudgeStopped(f"{batch.label(total)}: {reason}", kind)
                results[batch.index] = result
    except BaseException:
        controller.trip.remote("stopped", "another batch failed")
        for ref in running:
            ray.cancel(ref)
        ray.wait(list(running), num_returns=len(running), timeout=min(cfg.timeout, 10.0))
        raise
    return [results[b.index] for b in batches]


def _cause(err: BaseException) -> Optional[BaseException]:
    cause = getattr(err, "cause", None)
    return cause if isinstance(cause, BaseException) else None


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".strip()


# -- the summary from every batch ----------------------------------------------------------------------------
@dataclass
class _CaseCost:
    system_cost: Optional[float]


@dataclass
class _CacheFacts:
    undecodable: int


class _Facts:
    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)


def _merged_engine(results: List[Dict[str, Any]], state: Dict[str, Any]) -> Any:
    costs = [r["engine"]["cost_usd"] for r in results]
    lat = array("d")
    for r in results:
        lat.extend(r["engine"]["call_latencies"])
    return _Facts(cost_usd=None if any(c is None for c in costs) else sum(costs),
                  calls=sum(r["engine"]["calls"] for r in results),
                  cached_calls=sum(r["engine"]["cached_calls"] for r in results),
                  refreshed=sum(r["engine"]["refreshed"] for r in results), call_latencies=lat,
                  budget=_Facts(reached=state["budget_reached"]))


def _merged_client(results: List[Dict[str, Any]], state: Dict[str, Any]) -> Any:
    keys = ("requests", "preflight_requests", "retries", "prompt_tokens", "completion_tokens")
    stats = _Facts(**{k: sum(r["client"][k] for r in results) for k in keys})
    rate = state["rate"]
    return _Facts(stats=stats, limits=_Facts(summary=lambda: rate))
