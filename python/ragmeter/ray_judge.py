"""Judging on Ray: many worker tasks, one rate controller. ``ragmeter.ray.judge_dataset(data, config, workers=2)``.

The rows are cut into batches (slices of a Ray Dataset's blocks, or of a list of records). ``workers`` long-lived
Ray actors pull the batches from one queue, two in hand each (the next one fills the slots the tail of the last
one leaves), on one HTTP session each: the endpoint is checked (``GET /models``) and probed (its first request
alone) once per worker, not once per batch. Each batch runs the judge engine of :mod:`ragmeter.judge.runner`
unchanged: the same prompts, retries,
repair turn, budget doubling and row statuses, so the rows equal those of ``ragmeter.judge.run`` on the same
data (but for latencies and what came from the cache). What the workers share lives in one Ray actor, the
*controller*:

* the rate controller: a :class:`~ragmeter.judge.limits.Limits` built as the runner builds it, so ``rpm``,
  ``tpm`` and ``concurrency`` are totals across every worker and the adaptive bucket learns from all their
  answers. A worker's request holds one of its slots (``acquire``), reports the answer and gives it back
  (``release``): the public slot protocol of ``Limits``, nothing of its internals;
* the judge cache, whose only writer it is (workers read through it too, so it need not be on their node);
* the budget, and the run's stop (a refused key seen by one worker stops them all).

Failures. A worker that dies (its process killed, its node lost) loses its attempts, never a row: the batches it
held are run again by a new worker (``retries`` times), and the replies committed before the death are replayed
from the cache, not paid again. A controller that dies stops the run (:class:`~ragmeter.judge.stop.JudgeStopped`,
kind ``controller_died``, exit status 2): without it there is no shared limit, budget or cache writer, and a new one
would not know what the old one had spent. Each worker stops at its next ask; a reply it received whose commit the
controller did not acknowledge goes back to the driver, which writes it to the cache (the controller runs on the
driver's node, so the cache path is the driver's file); the error names the unfinished batches, and a rerun with
the same cache pays for nothing twice. A batch still failing, or a worker stopped by the endpoint, ends the run with
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
from typing import Any, Dict, List, Mapping, NoReturn, Optional, Sequence, Tuple, Type

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

    def cache_reject(self, key: str, why: str) -> None:
        self.cache.reject(key, why)

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
        ticket, kind, reason = await _ask(lim.stop, lim.controller.acquire.remote(lim.owner, self._tokens, self._retry))
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
        try:
            await self._limits.controller.release.remote(self._ticket, self._status, self._headers, timed_out)
        except _actor_died():  # the controller is gone, and its slots with it; the caller stops on its next ask
            pass


class _SharedCache:
    """What the engine uses of its cache; the controller's cache behind it. A reply whose commit the controller
    did not acknowledge (it died) is kept in :attr:`unacknowledged` for the driver to write."""

    def __init__(self, controller: Any, path: Any, stop: Any) -> None:
        self.controller = controller
        self.path = path
        self.stop = stop
        self.written = 0
        self.undecodable = 0
        self.unsaved: List[Any] = []
        self.unacknowledged: List[Tuple[str, Dict[str, Any], str, str]] = []  #: (key, value, prompt, model)

    def get(self, key: str) -> Optional[dict]:
        if self.path is None:
            return None
        return _ask_now(self.stop, self.controller.cache_get.remote(key))  # the engine asks synchronously

    def contains(self, key: str) -> bool:
        return self.get(key) is not None

    def reject(self, key: str, why: str) -> None:
        if self.path is not None:  # counted and warned of by the controller's cache, as its undecodable entries
            _ask_now(self.stop, self.controller.cache_reject.remote(key, why))

    async def commit(self, key: str, value: Mapping[str, Any], *, prompt: str = "", model: str = "") -> None:
        from pathlib import Path

        from ragmeter.judge.cache import CacheWriteError

        if self.path is None:
            return
        try:
            error = await self.controller.cache_commit.remote(key, dict(value), prompt, model)
        except _actor_died() as exc:  # paid for and maybe not written: the driver writes it (a rewrite is harmless)
            self.unacknowledged.append((key, dict(value), prompt, model))
            _controller_died(self.stop, exc)
        if error is not None:
            raise CacheWriteError(Path(self.path), OSError(0, error))
        self.written += 1

    def close(self) -> None:
        pass


class _SharedBudget:
    """What the engine uses of its budget; one budget for every worker, at the controller."""

    def __init__(self, controller: Any, limit: Optional[float], stop: Any) -> None:
        self.controller = controller
        self.limit = limit
        self.stop = stop
        self.reached = False

    def reserve(self, estimate: float) -> bool:
        if self.limit is None:
            return True
        ok = bool(_ask_now(self.stop, self.controller.budget_reserve.remote(estimate)))
        self.reached = self.reached or not ok
        return ok

    def settle(self, estimate: float, actual: Optional[float]) -> None:
        if self.limit is not None:
            self.controller.budget_settle.remote(estimate, actual)


def _actor_died() -> Type[BaseException]:
    from ray.exceptions import RayActorError

    return RayActorError


#: the stop kind of a run whose controller actor died (its message names the unfinished batches)
CONTROLLER_DIED = "controller_died"


def _controller_died(stop: Any, exc: BaseException) -> NoReturn:
    """The controller is gone (no limits, no cache writer, no budget): stop this worker."""
    from ragmeter.judge.stop import Halt

    reason = f"the rate controller actor died ({_one_line(exc)})"
    stop.trip(CONTROLLER_DIED, reason)
    raise Halt(reason) from None


async def _ask(stop: Any, ref: Any) -> Any:
    """The answer of an awaited controller call; a dead controller stops the worker."""
    try:
        return await ref
    except _actor_died() as exc:
        _controller_died(stop, exc)


def _ask_now(stop: Any, ref: Any) -> Any:
    """The answer of a blocking controller call (the engine asks its cache and budget synchronously)."""
    import ray

    try:
        return ray.get(ref)
    except _actor_died() as exc:
        _controller_died(stop, exc)


def _shared_stop(controller: Any) -> Any:
    from ragmeter.judge.stop import RunStop

    class SharedStop(RunStop):
        """The worker's stop; its first cause is told to the controller, which stops the other workers."""

        def trip(self, kind: str, reason: str) -> None:
            first = self.reason is None
            super().trip(kind, reason)
            if first and kind != CONTROLLER_DIED:
                controller.trip.remote(kind, reason)

    return SharedStop()


# -- the workers: long-lived actors, one HTTP session each ---------------------------------------------------
#: batches a worker holds at once: the next one fills its slots while the tail of the one before finishes
DEPTH = 2


class _Worker:
    """A Ray actor judging batch after batch on one event loop and one HTTP session: the endpoint is checked
    (``GET /models``) and probed (its first request alone) once per worker, not once per batch. It holds up to
    :data:`DEPTH` batches at once; each batch has its own engine, statistics and controller slots (its owner)."""

    def __init__(self, cfg: Any, custom: Dict[str, Any], controller: Any) -> None:
        from ragmeter.judge.metrics import METRICS

        METRICS.update(custom)  # custom metrics travel with the actor (they are registered in the driver only)
        self.cfg = cfg
        self.controller = controller
        self.stop = _shared_stop(controller)
        self.client: Any = None
        self.opening: Optional["asyncio.Future[None]"] = None
        self.preflight_reported = 0

    def ready(self) -> int:
        import os

        return os.getpid()

    async def _open(self) -> None:
        from ragmeter.judge.client import JudgeClient

        if self.opening is None:  # the first batch opens the session; a second one held at once waits for it
            limits: Any = _SharedLimits(self.controller, "session", self.cfg.concurrency, self.stop)
            self.client = JudgeClient(self.cfg.client_config(), limits, stop=self.stop)
            self.opening = asyncio.ensure_future(self.client.check_endpoint())
        await asyncio.shield(self.opening)

    async def judge(self, rows: Any, span: Tuple[int, int], owner: str) -> Dict[str, Any]:
        """Judge the records ``rows`` (an Arrow table sliced to ``span``, or records) as the runner would."""
        from ragmeter.judge.stop import Halt

        if hasattr(rows, "slice"):
            rows = rows.slice(span[0], span[1] - span[0]).to_pylist()
        try:
            await self._open()
        except Halt:
            pass  # the endpoint refused (the stop says why): the batch reports it below, nothing sent
        try:
            if self.stop.stopped:
                return {"stopped": (self.stop.kind or "stopped", self.stop.reason or "stopped"), "unacknowledged": []}
            return await self._judge_records(rows, owner)
        finally:
            try:
                await self.controller.close_owner.remote(owner)
            except _actor_died():
                pass

    async def _judge_records(self, records: List[Mapping[str, Any]], owner: str) -> Dict[str, Any]:
        from ragmeter.judge.engine import Engine
        from ragmeter.judge.runner import STOP_GRACE, _cancel, _cases, _judge_one, _until_done_or_stopped

        cfg, controller, stop = self.cfg, self.controller, self.stop
        cases = _cases(records, cfg)
        client = self.client.sibling(_SharedLimits(controller, owner, cfg.concurrency, stop))
        cache = _SharedCache(controller, cfg.cache, stop)  # what the engine uses of Cache and Budget
        budget: Any = _SharedBudget(controller, cfg.budget, stop)
        engine = Engine(client, cache, cfg.price_table(), budget, max_tokens=cfg.max_tokens,  # type: ignore[arg-type]
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

        tasks = [asyncio.ensure_future(worker()) for _ in range(max(1, min(len(jobs), cfg.concurrency * 2)))]
        try:
            await _until_done_or_stopped(tasks, stop, min(cfg.timeout, STOP_GRACE))
        finally:
            await _cancel(tasks)
        errors = [t.exception() for t in tasks if not t.cancelled()]
        if stop.stopped:  # said as data: an exception's extra fields (the kind) do not survive Ray's pickling
            return {"stopped": (stop.kind or "stopped", stop.reason or "stopped"),
                    "unacknowledged": cache.unacknowledged}
        for error in errors:
            if error is not None:
                raise error
        s = client.stats
        preflight = self.client.stats.preflight_requests - self.preflight_reported  # counted once, by one batch
        self.preflight_reported += preflight
        return {"rows": out, "system_costs": [c.system_cost for c in cases],
                "engine": {"cost_usd": engine.cost_usd, "calls": engine.calls, "cached_calls": engine.cached_calls,
                           "refreshed": engine.refreshed, "call_latencies": list(engine.call_latencies)},
                "client": {"requests": s.requests, "preflight_requests": s.preflight_requests + preflight,
                           "retries": s.retries, "prompt_tokens": s.prompt_tokens,
                           "completion_tokens": s.completion_tokens, "usage_estimated": s.usage_estimated}}


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
    """Judge the rows of ``data`` (a Ray Dataset, or a list of records) with ``workers`` Ray actors under one
    shared rate controller; returns a :class:`~ragmeter.judge.runner.JudgeResult` whose rows and summary are
    those of :func:`ragmeter.judge.run_sync` on the same rows (in the same order), with a ``ray`` section.

    ``config`` is a :class:`~ragmeter.judge.JudgeConfig` (or pass its options as keywords); ``rpm``, ``tpm``,
    ``concurrency`` and ``budget`` are totals across every worker. ``batch_size``: rows per batch (a worker
    holds two at once). ``retries``: how many times a batch whose worker died is run again. A controller that
    dies raises :class:`~ragmeter.judge.stop.JudgeStopped` of kind ``controller_died`` (see the module's doc).
    ``address``: the cluster to join when not joined yet.
    """
    import ray

    from ragmeter.judge.metrics import BUILTIN_METRICS
    from ragmeter.judge.runner import JudgeResult, _cases, _make_config, check_metrics, summarize
    from ragmeter.judge.stop import JudgeStopped

    cfg = replace(_make_config(config, options), tally=None, progress=False)
    if cfg.dry_run:
        raise InputError("judge_dataset: a dry run sends nothing; use ragmeter.judge.run(..., dry_run=True)")
    from ragmeter._args import check_arg

    workers = check_arg("workers", workers, "int", low=1)
    batch_size = check_arg("batch_size", batch_size, "int", low=1)
    retries = check_arg("retries", retries, "int", low=0)
    if not hasattr(data, "to_arrow_refs") and (isinstance(data, (str, bytes, Mapping)) or hasattr(data, "columns")
                                               or not hasattr(data, "__iter__")):
        raise InputError(f"judge_dataset: expected a Ray Dataset or a list of records, got {type(data).__name__}"
                         + (" (ray.data.from_pandas or df.to_dicts() / df.to_dict('records') make one)"
                            if hasattr(data, "columns") else ""))
    if cfg.budget is not None and cfg.price_table().lookup(cfg.model) is None:
        from ragmeter.judge.runner import budget_without_price

        raise budget_without_price(cfg.model)
    connect(address)
    started = time.monotonic()
    custom = {m: cfg.implementation(m) for m in cfg.metrics if m not in BUILTIN_METRICS}
    records = None if hasattr(data, "to_arrow_refs") else list(data)
    if records is None:  # before the workers take their CPUs: reading the dataset needs some
        batches = _dataset_batches(data, batch_size)
        sample = _first_rows(batches, 100)
    else:
        batches = _record_batches(records, batch_size)
        sample = records
    check_metrics(_cases(sample, cfg), cfg)  # ids unique; a custom metric that cannot run: before any call
    controller = _start_controller(cfg)
    crew = _Run(cfg, custom, controller, workers, retries)  # the workers start while the cache opens
    try:
        opened = ray.get(controller.open.remote())
        if opened is not None:
            from ragmeter.judge.cache import CacheError

            raise CacheError(opened)
        results = crew.run(batches)
        try:
            state = ray.get(controller.state.remote())
        except ray.exceptions.RayActorError as err:
            raise JudgeStopped(f"the rate controller actor died ({_one_line(err)}) after every batch had finished "
                               f"(their replies are in the cache)", CONTROLLER_DIED) from None
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
    finally:
        crew.close()
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


#: the name of a run's controller actor starts so (``ray list actors`` shows it; a test kills it by that name)
CONTROLLER_NAME = "ragmeter-judge-controller"


def _start_controller(cfg: Any) -> Any:
    """The controller actor, on the driver's node: the cache path is a path of the driver's machine, and the
    driver writes there itself what the controller did not acknowledge should it die."""
    import os

    import ray

    options: Dict[str, Any] = {"name": f"{CONTROLLER_NAME}-{os.getpid()}-{time.time_ns()}"}
    try:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(),
                                                                        soft=False)
    except Exception:  # a Ray client connection has no node of its own: anywhere
        pass
    return ray.remote(num_cpus=0, max_restarts=0)(_Controller).options(**options).remote(cfg)


def _finish(controller: Any) -> str:
    import ray

    try:
        return ray.get(controller.finish.remote())
    except Exception:  # closed already, or the actor is gone: nothing more to say than the error on its way
        return ""
    finally:
        ray.kill(controller)


@dataclass(eq=False)
class _Hand:
    """One worker actor as the driver sees it."""

    actor: Any
    number: int
    ready: bool = False
    dead: bool = False
    held: int = 0


class _ControllerDied(Exception):
    """Internal: the controller actor is gone; the run winds down and says which batches are unfinished."""


class _Run:
    """The driver's side of the batches: ``workers`` long-lived actors, each pulling batches from one queue (up to
    :data:`DEPTH` in hand); a worker that dies gives its batches back (each run again up to ``retries`` times) and
    a new actor takes its place."""

    def __init__(self, cfg: Any, custom: Dict[str, Any], controller: Any, workers: int, retries: int) -> None:
        import ray

        self.actor_class = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0,  # type: ignore[call-overload]
                                      max_concurrency=DEPTH)(_Worker)
        self.cfg, self.custom, self.controller, self.retries = cfg, custom, controller, retries
        self.batches: List[_Batch] = []
        self.total = 0
        self.todo: List[_Batch] = []
        self.running: Dict[Any, Tuple[_Batch, str, _Hand]] = {}
        self.starting: Dict[Any, _Hand] = {}
        self.crew: List[_Hand] = []
        self.results: Dict[int, Dict[str, Any]] = {}
        self.unacknowledged: List[Tuple[str, Dict[str, Any], str, str]] = []
        for _ in range(workers):
            self.hire()

    def run(self, batches: List[_Batch]) -> List[Dict[str, Any]]:
        import ray

        from ragmeter.judge.stop import JudgeStopped

        self.batches, self.total = batches, len(batches)
        self.todo = sorted(batches, key=lambda b: -b.index)  # a stack: the first batch on top
        try:
            while self.todo or self.running:
                self.dispatch()
                ready, _ = ray.wait(list(self.running) + list(self.starting), num_returns=1)
                if ready[0] in self.starting:
                    self.started(ready[0])
                else:
                    self.finished(ready[0])
        except _ControllerDied as died:
            self.wind_down()
            raise JudgeStopped(f"{died}; {self.unfinished()}{_write_unacknowledged(self.unacknowledged, self.cfg)}",
                               CONTROLLER_DIED) from None
        except BaseException:
            self.controller.trip.remote("stopped", "another batch failed")
            self.wind_down()
            raise
        return [self.results[b.index] for b in self.batches]

    def close(self) -> None:
        import ray

        for hand in self.crew:
            ray.kill(hand.actor)
        self.crew = []

    # -- workers and batches
    def hire(self) -> None:
        hand = _Hand(self.actor_class.remote(self.cfg, self.custom, self.controller), len(self.crew) + 1)
        self.crew.append(hand)
        self.starting[hand.actor.ready.remote()] = hand

    def dispatch(self) -> None:
        """An idle worker always gets a batch; a busy one a second to hold only when none is left waiting for a
        worker still starting (two batches to one worker while the other is still importing would idle it)."""
        for depth in range(1, DEPTH + 1):
            for hand in self.crew:
                if not self.todo:
                    return
                if (hand.ready and not hand.dead and hand.held < depth
                        and (depth == 1 or len(self.todo) > len(self.starting))):
                    self.send(hand, self.todo.pop())

    def send(self, hand: _Hand, batch: _Batch) -> None:
        batch.attempts += 1
        owner = f"b{batch.index}a{batch.attempts}"
        self.running[hand.actor.judge.remote(batch.source, batch.span, owner)] = (batch, owner, hand)
        hand.held += 1

    def started(self, ref: Any) -> None:
        import ray
        from ray.exceptions import RayError

        from ragmeter.judge.stop import JudgeStopped

        hand = self.starting.pop(ref)
        try:
            ray.get(ref)
        except RayError as err:
            raise JudgeStopped(f"judge worker {hand.number} could not start ({_one_line(err)})",
                               "worker_died") from None
        hand.ready = True

    def finished(self, ref: Any) -> None:
        import ray
        from ray.exceptions import RayActorError, RayError, RayTaskError

        from ragmeter.judge.stop import JudgeStopped

        batch, owner, hand = self.running.pop(ref)
        hand.held -= 1
        label = batch.label(self.total)
        try:
            result = ray.get(ref)
        except RayTaskError as err:  # the batch's own code raised: a bug, or an input error found late
            self.release(owner)
            cause = _cause(err)
            if isinstance(cause, InputError):
                raise JudgeStopped(f"{label}: {cause}", getattr(cause, "kind", "stopped")) from None
            if isinstance(cause, RayActorError):
                raise _ControllerDied(f"the rate controller actor died ({_one_line(cause)})") from None
            raise RuntimeError(f"{label}: {_one_line(err)}") from None
        except RayError as err:  # the worker died (killed, out of memory, node lost)
            self.lost(hand, (batch, owner, hand), err)
            return
        self.unacknowledged.extend(result.get("unacknowledged", ()))
        if "stopped" in result:  # the endpoint (or another batch) stopped the run
            kind, reason = result["stopped"]
            if kind == CONTROLLER_DIED:
                raise _ControllerDied(reason)
            raise JudgeStopped(f"{label}: {reason}", kind)
        self.results[batch.index] = result

    def lost(self, hand: _Hand, first: Tuple[_Batch, str, _Hand], err: BaseException) -> None:
        """A worker died: every batch it held goes back to the queue (in batch order, so the first one is the one
        named if it has died too often), and a new worker takes its place."""
        import ray

        from ragmeter.judge.stop import JudgeStopped

        ray.kill(hand.actor)  # dead already, or unreachable for good: either way it sends nothing more
        hand.dead = True
        held = [first] + [self.running.pop(r) for r in [r for r, v in self.running.items() if v[2] is hand]]
        hand.held = 0
        self.hire()
        why = _one_line(err)
        for batch, owner, _ in sorted(held, key=lambda h: h[0].index):
            self.release(owner)
            batch.errors.append(why)
            if batch.attempts > self.retries:
                raise JudgeStopped(f"{batch.label(self.total)}: its worker died {batch.attempts} times (last: "
                                   f"{why})", "worker_died") from None
            log.warning("%s: its worker died (%s); running it again (attempt %d of %d)", batch.label(self.total),
                        why, batch.attempts + 1, self.retries + 1)
            self.todo.append(batch)
        self.todo.sort(key=lambda b: -b.index)

    def release(self, owner: str) -> None:
        """Give back the controller slots of a batch attempt that is over."""
        import ray
        from ray.exceptions import RayActorError

        try:
            ray.get(self.controller.close_owner.remote(owner))
        except RayActorError as err:
            raise _ControllerDied(f"the rate controller actor died ({_one_line(err)})") from None

    # -- the end of a stopped run
    def wind_down(self) -> None:
        """Give the batches still running the stop's grace to come back (their workers stop at their next ask of
        the controller), keeping the paid replies the controller did not acknowledge."""
        import ray

        from ragmeter.judge.runner import STOP_GRACE

        refs = list(self.running)
        if not refs:
            return
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=min(self.cfg.timeout, STOP_GRACE) + 5.0)
        for ref in done:
            try:
                result = ray.get(ref)
            except Exception:  # its worker died or failed: nothing of it to keep
                continue
            self.unacknowledged.extend(result.get("unacknowledged", ()))
            if "rows" in result:
                self.results[self.running[ref][0].index] = result

    def unfinished(self) -> str:
        left = [b.index for b in self.batches if b.index not in self.results]
        if not left:
            return "every batch had finished (its replies are in the cache)"
        return (f"unfinished: batch{'es' * (len(left) > 1)} {_ranges(left)} of {self.total} "
                f"(none of their rows is returned)")


def _ranges(numbers: List[int]) -> str:
    """[1, 2, 3, 5] -> "1-3, 5"."""
    out: List[str] = []
    for _, run in itertools.groupby(enumerate(numbers), key=lambda p: p[1] - p[0]):
        values = [v for _, v in run]
        out.append(str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}")
    return ", ".join(out)


def _write_unacknowledged(entries: List[Tuple[str, Dict[str, Any], str, str]], cfg: Any) -> str:
    """Write the paid replies whose commit the dead controller did not acknowledge (the driver is the only writer
    left; a reply it had written is written again, the same); "; what became of them"."""
    from ragmeter.judge import _json
    from ragmeter.judge.cache import Cache, CacheError, CacheWriteError
    from ragmeter.judge.runner import _keep_unsaved

    unique = {key: (key, value, prompt, model) for key, value, prompt, model in entries}
    if not unique or cfg.cache is None:
        return ""
    try:
        cache: Any = Cache(cfg.cache)
    except CacheError:
        rows = [(k, _json.dumps(v).decode("utf-8"), p, m, time.time()) for k, v, p, m in unique.values()]
        cache = _Facts(unsaved=rows, written=0)
    else:
        with cache:
            for key, value, prompt, model in unique.values():
                try:
                    cache.put(key, value, prompt=prompt, model=model)
                except CacheWriteError:  # kept in cache.unsaved, spilled below
                    pass
    written = (f"; {cache.written} paid replies it had not acknowledged were written to the cache by the driver"
               if cache.written else "")
    return written + _keep_unsaved(cache, cfg)


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
    keys = ("requests", "preflight_requests", "retries", "prompt_tokens", "completion_tokens", "usage_estimated")
    stats = _Facts(**{k: sum(r["client"][k] for r in results) for k in keys})
    rate = state["rate"]
    return _Facts(stats=stats, limits=_Facts(summary=lambda: rate))
