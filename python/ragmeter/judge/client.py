"""An OpenAI-compatible chat-completions and embeddings client for judging.

One ``aiohttp`` session per client; every request goes through :class:`Limits`
(concurrency, requests and tokens per minute) and the one retry layer of
:mod:`ragmeter.judge.retry`. Works with OpenAI, DeepSeek, Qwen (DashScope
compatible mode), vLLM, Ollama and LiteLLM: only ``POST {base_url}/chat/completions``,
``POST {base_url}/embeddings`` and one ``GET {base_url}/models`` are used.

The API key comes from the ``api_key`` argument, else the password of a
``http://user:KEY@host/v1`` URL (taken out of the URL before anything is sent),
else ``RAGMETER_API_KEY``, else ``OPENAI_API_KEY``. It is sent in the
``Authorization`` header and nowhere else: it is kept out of ``repr``, cache
keys, logs, error messages (any echo of it in a server's error body is masked)
and results.

Before the first request to an endpoint the client sends one ``GET
{base_url}/models`` (unless ``preflight=False``): a refused key (401/403) or an
endpoint that cannot be reached or does not answer within ``timeout`` stops the
run at once (see :mod:`ragmeter.judge.stop`); 404/405 (no such route) and
anything else let the run go on, the real calls then tell. A 401/403, an
exhausted quota or a 404 on a real call stops the run the same way, and so does
the :class:`~ragmeter.judge.stop.Breaker` after repeated transport failures.
The first chat (and embeddings) request is sent alone and the others wait for
its answer, so a refusal costs one request, not one per concurrent slot.
"""
from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import aiohttp

from .._secrets import Masker, mask_decoded
from .._front import option
from . import _json
from .cost import estimate_tokens
from .limits import Limits
from .reply import reply_text, split_thoughts
from .retry import RetryPolicy, classify, is_unknown_model, next_max_tokens, reply_status
from .stop import FATAL_KINDS, TRANSPORT_KINDS, Breaker, RunStop, ServerErrors
from .urls import endpoint_url, public_endpoint, query_credentials, scrub_urls, split_credentials

__all__ = ["ClientConfig", "JudgeClient", "ChatResult", "EmbedResult", "JudgeCallError", "resolve_api_key"]

log = logging.getLogger("ragmeter.judge")


def resolve_api_key(explicit: Optional[str] = None) -> Optional[str]:
    """``explicit``, else ``RAGMETER_API_KEY``, else ``OPENAI_API_KEY``, else None (local servers)."""
    for value in (explicit, os.environ.get("RAGMETER_API_KEY"), os.environ.get("OPENAI_API_KEY")):
        if value:
            return value
    return None


@dataclass
class ClientConfig:
    base_url: str
    model: str
    api_key: Optional[str] = field(default=None, repr=False)
    timeout: float = 120.0             #: seconds per attempt
    temperature: float = 0.0
    json_mode: str = "auto"            #: auto (on, dropped if the endpoint rejects it), on, off
    max_retry_tokens: int = 8000       #: cap of the budget doubling
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    embeddings_model: Optional[str] = None
    embeddings_base_url: Optional[str] = None  #: defaults to base_url
    preflight: bool = True             #: GET {base_url}/models once before the first request
    #: the model's context window in tokens (prompt + output); None: from GET /models metadata when it says
    context_size: Optional[int] = None
    #: the embeddings endpoint's own key (None: the password of ``embeddings_base_url``, else the chat key)
    embeddings_api_key: Optional[str] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.json_mode not in ("auto", "on", "off"):
            raise ValueError("json_mode must be auto, on or off")
        self.base_url, url_key = split_credentials(self.base_url)
        if self.embeddings_base_url:
            self.embeddings_base_url, embeddings_key = split_credentials(self.embeddings_base_url)
            if self.embeddings_api_key is None and embeddings_key:
                self.embeddings_api_key = embeddings_key
        if self.api_key is None and url_key:
            self.api_key = url_key


@dataclass
class ChatResult:
    content: str
    finish_reason: Optional[str]
    prompt_tokens: int         #: summed over every billed attempt (truncated ones included)
    completion_tokens: int
    latency_ms: float          #: wall time of the call, retries and waits included
    max_tokens: int            #: the output budget of the attempt that succeeded
    attempts: List[Dict[str, Any]]
    reasoning_chars: int = 0


@dataclass
class EmbedResult:
    vectors: List[List[float]]
    prompt_tokens: int
    latency_ms: float
    attempts: List[Dict[str, Any]]


class JudgeCallError(Exception):
    """A call that failed for good. ``kind`` says why; ``attempts`` lists every try."""

    def __init__(self, message: str, *, kind: str, attempts: List[Dict[str, Any]], raw: Optional[str] = None,
                 prompt_tokens: int = 0, completion_tokens: int = 0, latency_ms: float = 0.0) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.attempts = attempts
        self.raw = raw
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.latency_ms = latency_ms


@dataclass
class ClientStats:
    requests: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0
    preflight_requests: int = 0
    usage_estimated: int = 0  #: replies without a (readable) usage block: their tokens and cost are estimates


def _url(text: str) -> Any:
    """``yarl.URL(text)`` (what aiohttp builds from a str on each request); the str when it does not parse."""
    try:
        from yarl import URL

        return URL(text)
    except (ImportError, ValueError, TypeError):
        return text


#: statuses with which an endpoint may reject ``response_format`` (llama.cpp's server answers validation errors
#: with 500, FastAPI-based ones with 422)
JSON_MODE_REJECTED = frozenset({400, 422, 500})
#: where /models metadata gives a model's context window: vLLM, OpenRouter and others, LM Studio
_CONTEXT_FIELDS = ("max_model_len", "context_length", "context_window", "max_context_length")


def models_context_size(body: str, model: str) -> Optional[int]:
    """The context window of ``model`` from a ``GET /models`` body, when the server says (None otherwise).

    Looks at the entry whose id is ``model`` (or the only entry) for ``max_model_len``, ``context_length``,
    ``context_window``, ``max_context_length`` or ``meta.n_ctx``; ``n_ctx_train`` is the training length, not
    what the server was started with, and is ignored.
    """
    try:
        data = _json.loads(body)
    except ValueError:
        return None
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return None
    entries = [e for e in entries if isinstance(e, dict)]
    mine = [e for e in entries if e.get("id") == model] or (entries if len(entries) == 1 else [])
    for entry in mine[:1]:
        meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
        for value in [entry.get(k) for k in _CONTEXT_FIELDS] + [meta.get("n_ctx")]:
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def _usage(data: Dict[str, Any]) -> Dict[str, Any]:
    """A reply's ``usage`` block ({} when absent or not an object)."""
    usage = data.get("usage")
    return usage if isinstance(usage, dict) else {}


def _reasoning_tokens(usage: Dict[str, Any]) -> int:
    """The reasoning tokens ``usage.completion_tokens_details`` reports (0 when absent or unreadable)."""
    details = usage.get("completion_tokens_details")
    return (_tokens(details, "reasoning_tokens") or 0) if isinstance(details, dict) else 0


def _tokens(usage: Dict[str, Any], name: str) -> Optional[int]:
    """A token count of ``usage`` (a number, or a numeric text as some proxies send); None when absent or
    unreadable: the caller estimates it, and an unreadable count never throws a paid reply away."""
    value = usage.get(name)
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return int(value)


def _body_text(raw: bytes, charset: Optional[str]) -> str:
    """A reply body as text: in the charset its Content-Type declares, else UTF-8 (what OpenAI-compatible APIs
    speak); a byte-order mark is dropped, bytes that do not decode become U+FFFD."""
    import codecs

    try:
        name = codecs.lookup(charset or "utf-8").name
    except LookupError:
        name = "utf-8"
    return raw.decode("utf-8-sig" if name == "utf-8" else name, "replace").lstrip("\ufeff")


def _one_vector(embedding: Any) -> List[float]:
    """One embedding as floats; a list of vectors (one per token: a model served without pooling) is refused."""
    if isinstance(embedding, list) and embedding and isinstance(embedding[0], list):
        raise JudgeCallError(f"the embeddings endpoint must return one vector per input, it returned "
                             f"{len(embedding)} vectors (one per token?) for one input: serve the embeddings model "
                             f"with pooling (llama.cpp: --pooling mean)", kind="bad_embeddings", attempts=[])
    return list(map(float, embedding))


def check_vectors(vectors: List[List[float]]) -> None:
    """Vectors a cosine can be taken of: one dimension for all, finite numbers, none all zeros; else a
    :class:`JudgeCallError` (``bad_embeddings``), since the server would send the same again."""
    why = None
    if len({len(v) for v in vectors}) > 1:
        why = f"vectors of different dimensions ({', '.join(str(len(v)) for v in vectors)})"
    elif vectors and not vectors[0]:
        why = "empty vectors"
    else:
        for i, v in enumerate(vectors):
            if not all(math.isfinite(x) for x in v):
                why = f"vector {i} holds a value that is not a finite number (NaN or infinity)"
                break
            if not any(v):
                why = f"vector {i} is all zeros (no direction to compare)"
                break
    if why is not None:
        raise JudgeCallError(f"the embeddings endpoint returned unusable vectors: {why}", kind="bad_embeddings",
                             attempts=[])


class RawJSON(bytes):
    """UTF-8 bytes that are already JSON, spliced into a request body as is."""


class _Again(Exception):
    """Internal: the response was received but calls for another attempt (budget doubling)."""


class _BadReply(ValueError):
    """Internal: a 200 whose JSON is not a usable reply (no choices); retried as ``bad_response``, the message
    says what was wrong."""


class JudgeClient:
    def __init__(self, config: ClientConfig, limits: Optional[Limits] = None, *,
                 on_retry: Optional[Callable[[Dict[str, Any]], None]] = None, stop: Optional[RunStop] = None) -> None:
        self.config = config
        self.limits = limits or Limits()
        self.stop = stop if stop is not None else RunStop()
        self.breaker = Breaker()
        self.server_errors = ServerErrors()
        self._calls = 0
        self._preflights: Dict[str, "asyncio.Future[None]"] = {}
        self._first: Dict[str, "asyncio.Event"] = {}  # chat, embeddings: set once the first request came back
        self._key = resolve_api_key(config.api_key)
        #: the embeddings endpoint's own key, sent instead of the chat key (never the chat key to its host)
        self._embed_key = config.embeddings_api_key
        self._embed_auth = {"Authorization": f"Bearer {self._embed_key}"} if self._embed_key else None
        # a key may also come in the endpoint's query (?api_key=), sent as it is: masked in replies as well
        self._masker = Masker((self._key, self._embed_key, *query_credentials(config.base_url),
                               *query_credentials(config.embeddings_base_url or "")))
        self._json = config.json_mode != "off"
        self.context_size = config.context_size
        self._session: Optional[aiohttp.ClientSession] = None
        self._borrowed = False  # the session is another client's (see sibling): closing leaves it open
        self._on_retry = on_retry
        #: called when a call starts waiting out a Retry-After (the runner lends the wait's worker a stand-in)
        self.on_throttle_wait: Optional[Callable[[], None]] = None
        self.throttle_waits = 0  #: calls waiting out a Retry-After now
        self.stats = ClientStats()
        self._chat_base = config.base_url.rstrip("/")
        self._embed_base = (config.embeddings_base_url or config.base_url).rstrip("/")
        # parsed once: aiohttp would otherwise parse the str on every request (about 0.1 ms CPU a call)
        self._chat_url = _url(endpoint_url(self._chat_base, "/chat/completions"))
        self._embed_url = _url(endpoint_url(self._embed_base, "/embeddings"))

    def __repr__(self) -> str:
        return f"JudgeClient(endpoint={public_endpoint(self.config.base_url)!r}, model={self.config.model!r})"

    # -- session -------------------------------------------------------------------------------------
    async def __aenter__(self) -> "JudgeClient":
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def open(self) -> None:
        if self._session is None:
            headers = {"Content-Type": "application/json", "User-Agent": "ragmeter-judge"}
            if self._key:
                headers["Authorization"] = f"Bearer {self._key}"
            connector = aiohttp.TCPConnector(limit=self.limits.concurrency + 4)
            self._session = aiohttp.ClientSession(
                headers=headers, connector=connector,
                timeout=aiohttp.ClientTimeout(total=self.config.timeout),
            )

    async def close(self) -> None:
        if self._session is not None:
            if not self._borrowed:
                await self._session.close()
            self._session = None

    async def check_endpoint(self) -> None:
        """GET {base_url}/models now (once per client, as before the first call); a fatal answer trips the stop
        and raises :class:`~ragmeter.judge.stop.Halt`."""
        await self.open()
        await self._preflight(self._chat_base)

    def sibling(self, limits: Any, *, stop: Optional[RunStop] = None) -> "JudgeClient":
        """A client for another batch of the same run on this client's open session: its own limits, stats and
        breaker; this client's endpoint checks (GET /models once, the first request alone) and what they learnt
        (the context size). Closing it leaves the session open. Call :meth:`check_endpoint` first."""
        if self._session is None:
            raise RuntimeError("JudgeClient.sibling: open the client first")
        other = JudgeClient(self.config, limits, stop=self.stop if stop is None else stop)
        other._session, other._borrowed = self._session, True
        other._preflights, other._first = self._preflights, self._first
        other.context_size = self.context_size
        return other

    def redact(self, text: Optional[str]) -> Optional[str]:
        """Mask the API keys wherever they appear (a server may echo them in an error body; see
        :mod:`ragmeter._secrets` for short keys), and drop the ``user:password@`` of any URL."""
        if not text:
            return text
        return scrub_urls(self._masker.text(text))

    def mask(self, text: str) -> str:
        """``text`` with the API keys masked (as in a reply: see :mod:`ragmeter._secrets` for short keys)."""
        return self._masker.text(text) if self._masker else text

    def _masked_reply(self, data: Dict[str, Any], body: str) -> Dict[str, Any]:
        """A decoded reply with the keys masked in its strings: an echo (a proxy, a debug field) is never
        cached or written. Decoded first, so that a short key cannot garble the reply's structure and a JSON
        escape cannot hide a key; a body with neither a key nor an escape in it is left as it is."""
        if not self._masker or ("\\" not in body and self._masker.text(body) == body):
            return data
        masked, _ = mask_decoded(data, self._masker.text)
        return masked

    # -- preflight -----------------------------------------------------------------------------------
    async def _preflight(self, base: str) -> None:
        """Once per endpoint (shared by every caller): GET {base}/models; fatal answers trip the run's stop."""
        if not self.config.preflight:
            return
        fut = self._preflights.get(base)
        if fut is None:
            fut = asyncio.ensure_future(self._check_models(base))
            self._preflights[base] = fut
        await asyncio.shield(fut)
        self.stop.check()

    async def _check_models(self, base: str) -> None:
        if self._session is None:
            await self.open()
        assert self._session is not None
        where = public_endpoint(base)
        self.stats.preflight_requests += 1
        try:
            own = self._embed_auth if base == self._embed_base and base != self._chat_base else None
            async with self._session.get(_url(endpoint_url(base, "/models")), headers=own) as resp:
                status = resp.status
                body = _body_text(await resp.read(), resp.charset)
        except (asyncio.TimeoutError, TimeoutError):
            self.stop.trip("unreachable", f"{where}: no answer to GET /models within "
                                          f"{option('timeout', f'{self.config.timeout:g}')}s: check "
                                          f"{option('base_url')} and that the server is up (raise "
                                          f"{option('timeout')} if it is only slow)")
            return
        except (aiohttp.ClientError, OSError) as exc:
            detail = self.redact(str(exc) or type(exc).__name__) or ""
            self.stop.trip("unreachable", f"{where}: cannot connect ({detail}); check {option('base_url')} and "
                                          f"that the server is running")
            return
        if status in (401, 403):
            decision = classify(attempt=1, policy=self.config.policy, status=status, body=self.redact(body))
            self.stop.trip(decision.kind, self.redact(f"{where}: GET /models: {decision.message}") or "")
        elif 200 <= status < 300 and self.context_size is None and base == self._chat_base:
            self.context_size = models_context_size(body, self.config.model)
        # 404/405: the endpoint has no such route; anything else: the real calls will tell

    # -- transport -----------------------------------------------------------------------------------
    async def _post(self, url: Any, payload: Dict[str, Any], tokens: int,  # type: ignore[no-untyped-def]
                    retry: bool = False, headers: Optional[Dict[str, str]] = None):
        if self._session is None:
            await self.open()
        assert self._session is not None
        raw = payload.get("messages")
        if isinstance(raw, RawJSON):  # messages already encoded once (for the cache key): splice them in
            rest = {k: v for k, v in payload.items() if k != "messages"}
            data = _json.dumps(rest)[:-1] + b',"messages":' + raw + b"}"
        else:
            data = _json.dumps(payload)
        async with self.limits.slot(tokens, retry=retry) as slot:
            self.stop.check()  # the run may have stopped while this request waited for its slot
            self.stats.requests += 1
            async with self._session.post(url, data=data, headers=headers) as resp:
                body = _body_text(await resp.read(), resp.charset)
                # the rate controller learns from it (time-outs too); a throttle a gateway sends in a 200's error
                # object is a throttle to it as a 429 is
                slot.answer(reply_status(resp.status, body), resp.headers)
                return resp.status, resp.headers, body  # keys masked by the reader: _masked_reply, redact

    async def _call(self, url: Any, build: Callable[[], Dict[str, Any]], tokens: Callable[[], int],
                    on_ok: Callable[[Dict[str, Any], Dict[str, Any]], Any], what: str,
                    attempts: List[Dict[str, Any]]) -> Any:
        """Send, retrying transient failures; ``on_ok`` parses a 200 body or raises :class:`_Again`.

        Every attempt is appended to ``attempts`` (status, outcome, max_tokens, tokens, latency, wait).
        """
        started = time.monotonic()
        transient = 0
        self._calls += 1
        call = self._calls
        base = self._embed_base if what == "embeddings" else self._chat_base
        await self._preflight(base)
        first = self._first.get(what)
        probing = first is None
        if first is None:  # the first request goes alone: a refusal stops the run before the others are sent
            first = self._first[what] = asyncio.Event()
        else:
            await first.wait()
        try:
            while True:
                self.stop.check()  # nothing more is sent once the run is stopped
                transient += 1
                payload = build()
                record: Dict[str, Any] = {"n": len(attempts) + 1}
                if "max_tokens" in payload:
                    record["max_tokens"] = payload["max_tokens"]
                attempts.append(record)
                t0 = time.monotonic()
                status = None
                headers = None
                body = None
                exc: Optional[BaseException] = None
                bad: Optional[str] = None  # what made a 200 unusable, when on_ok says
                try:
                    # after a Retry-After waited out, ahead of the first attempts (not after a time-out: a
                    # queueing server would see the same requests again first)
                    waited = len(attempts) > 1 and "retry_after_s" in attempts[-2]
                    status, headers, body = await self._post(
                        url, payload, tokens(), retry=waited, headers=self._embed_auth if what == "embeddings" else None)
                except (asyncio.TimeoutError, aiohttp.ClientError, OSError) as e:
                    exc = e
                finally:
                    if probing:
                        probing = False
                        first.set()
                record["latency_ms"] = round((time.monotonic() - t0) * 1000.0, 3)
                record["status"] = status
                if status is not None:
                    self.breaker.answered()
                if exc is None and status is not None and 200 <= status < 300:  # a proxy's 201/203 is an answer too
                    try:
                        data = _json.loads(body or "")
                        if not isinstance(data, dict):
                            raise ValueError("not an object")
                    except ValueError:
                        data = None
                    if data is not None and not data.get("error"):  # "error": null beside the choices is fine
                        data = self._masked_reply(data, body or "")
                        try:
                            result = on_ok(data, record)
                        except _Again:
                            self.server_errors.answered()  # a cut-short output is an answer all the same
                            transient -= 1  # budget doubling has its own limit (the cap)
                            continue
                        except JudgeCallError:
                            self.server_errors.answered()  # refused or empty: the model answered
                            raise
                        except _BadReply as why:
                            bad = str(why)  # unusable 200: retried as bad_response below
                        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
                            result = None  # unreadable 200: retried as bad_response below
                        else:
                            self.server_errors.answered()
                            record.setdefault("outcome", "ok")
                            return result
                if (exc is None and status in JSON_MODE_REJECTED and self._json and self.config.json_mode == "auto"
                        and "response_format" in (body or "").lower()):
                    # the endpoint does not support JSON mode (some servers say so with a 422 or a 500): drop it
                    # and resend at once
                    self._json = False
                    record["outcome"] = "json_mode_unsupported"
                    transient -= 1
                    continue
                decision = classify(attempt=transient, policy=self.config.policy, status=status,
                                    headers=headers, body=self.redact(bad or body), exc=exc)
                if exc is None and decision.kind == "client" and is_unknown_model(status, body):
                    # a server that says "no such model" with a 400 (DeepSeek, LiteLLM): no request can succeed
                    decision = type(decision)(False, 0.0, "not_found", decision.message.replace(
                        "request rejected", f"unknown model: check {option('model')}" if what == "chat" else
                        f"unknown model: check {option('embeddings_model')}"))
                record["outcome"] = decision.kind
                if decision.kind in FATAL_KINDS and not decision.retry:
                    self.stop.trip(decision.kind, self.redact(
                        f"{public_endpoint(base)} ({what}, model {self._model(what)}): {decision.message}") or "")
                elif decision.kind in TRANSPORT_KINDS and self.breaker.failed(call):
                    self.stop.trip("unreachable", self.redact(
                        f"{public_endpoint(base)}: {self.breaker.failures} transport failures in a row across "
                        f"different calls, no answer in between (last: {decision.message}); check "
                        f"{option('base_url')} and that the server is up (raise {option('timeout')} if it is only "
                        f"slow)") or "")
                    decision = type(decision)(False, 0.0, decision.kind, decision.message, decision.retry_after)
                if not decision.retry and self.server_errors.gave_up(decision.kind):
                    self.stop.trip("server_errors", self.redact(
                        f"{public_endpoint(base)} ({what}, model {self._model(what)}): {self.server_errors.count} "
                        f"calls in a row failed on server errors or unusable replies after {transient} attempts "
                        f"each, with no usable reply in between (last: {decision.message}); the endpoint is failing: "
                        "check its status") or "")
                if not decision.retry:
                    self.stats.failures += 1
                    message = self.redact(f"{what} failed: {decision.message}") or ""
                    elapsed = (time.monotonic() - started) * 1000.0
                    raise JudgeCallError(message, kind=decision.kind, attempts=attempts, latency_ms=elapsed,
                                         prompt_tokens=sum(a.get("prompt_tokens", 0) for a in attempts),
                                         completion_tokens=sum(a.get("completion_tokens", 0) for a in attempts))
                record["retry_in_s"] = round(decision.delay, 4)
                if decision.retry_after is not None:
                    record["retry_after_s"] = decision.retry_after
                    self.limits.pause(decision.delay)  # the fixed policy's global pause (adaptive: no-op)
                self.stats.retries += 1
                log.info("%s: %s; retrying in %.3fs", what, self.redact(decision.message), decision.delay)
                if self._on_retry is not None:
                    self._on_retry(record)
                if decision.delay > 0 and decision.retry_after is not None:
                    self.throttle_waits += 1
                    try:
                        if self.on_throttle_wait is not None:
                            self.on_throttle_wait()
                        await asyncio.sleep(decision.delay)
                    finally:
                        self.throttle_waits -= 1
                elif decision.delay > 0:
                    await asyncio.sleep(decision.delay)
        finally:
            if probing:  # it never got to send: let the others go
                first.set()

    def _model(self, what: str) -> str:
        return (self.config.embeddings_model or "") if what == "embeddings" else self.config.model

    # -- chat ----------------------------------------------------------------------------------------
    async def chat(self, messages: Sequence[Dict[str, str]], *, max_tokens: int = 2000,
                   messages_json: Union[str, bytes, None] = None,
                   prompt_estimate: Optional[int] = None,
                   afford: Optional[Callable[[int, int, int], bool]] = None) -> ChatResult:
        """One chat completion; retried, and re-sent with ``max_tokens`` doubled on truncated or empty output.

        Doubling (up to the ``max_retry_tokens`` cap) follows ``finish_reason == "length"`` (output cut, or
        reasoning that used the whole budget: outcome ``truncated``, see :mod:`ragmeter.judge.reply`), an output
        without a ``finish_reason`` whose ``usage.completion_tokens`` shows the whole budget was used, and an empty output when the server gives no
        ``finish_reason`` or ``usage.completion_tokens`` shows the whole budget was used. An empty output with any other
        ``finish_reason`` (``stop``, ``eos``...) and no sign of an exhausted budget was ended by the model
        itself: the call fails at once with kind ``empty`` (its billed tokens are still counted).

        ``messages_json`` (the messages already encoded as JSON, str or UTF-8 bytes) and ``prompt_estimate``
        (estimated prompt tokens) only save work when the caller has them. ``afford(billed_prompt_tokens,
        billed_completion_tokens, next_max_tokens)`` is asked before a doubled attempt is sent; False fails the
        call with kind ``budget`` and nothing more is sent (the tokens billed so far are counted).
        """
        cfg = self.config
        cap = max(cfg.max_retry_tokens, max_tokens)
        state = {"max_tokens": int(max_tokens)}
        prompt_est = prompt_estimate if prompt_estimate is not None else \
            sum(estimate_tokens(m.get("content", "")) + 4 for m in messages)
        if isinstance(messages_json, str):
            messages_json = messages_json.encode("utf-8")
        wire_messages: Any = RawJSON(messages_json) if messages_json is not None else list(messages)
        started = time.monotonic()
        attempts: List[Dict[str, Any]] = []

        def build() -> Dict[str, Any]:
            payload: Dict[str, Any] = {
                "model": cfg.model, "messages": wire_messages,
                "temperature": cfg.temperature, "max_tokens": state["max_tokens"],
            }
            if self._json:
                payload["response_format"] = {"type": "json_object"}
            return payload

        billed = {"prompt": 0, "completion": 0}

        def on_ok(data: Dict[str, Any], record: Dict[str, Any]) -> ChatResult:
            choices = data.get("choices")
            usage = _usage(data)
            reported_pt, reported_ct = _tokens(usage, "prompt_tokens"), _tokens(usage, "completion_tokens")
            if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
                # a malformed reply from the endpoint: retried with back-off like any unreadable 200 (kind
                # bad_response); the tokens it reports as billed are counted
                pt, ct = reported_pt or 0, reported_ct or 0
                billed["prompt"] += pt
                billed["completion"] += ct
                self.stats.prompt_tokens += pt
                self.stats.completion_tokens += ct
                record.update(prompt_tokens=pt, completion_tokens=ct)
                raise _BadReply("response has no choices" if not choices else "response's first choice is not an "
                                                                              "object")
            choice = choices[0]
            message = choice.get("message") or {}
            content, reasoning = reply_text(message)
            thoughts, answer = split_thoughts(content)  # thoughts in the content are reasoning too
            finish = choice.get("finish_reason")
            pt = reported_pt or prompt_est
            ct = reported_ct or (estimate_tokens(content) + estimate_tokens(reasoning))
            if (pt, ct) != (reported_pt, reported_ct):  # no (readable) usage from the endpoint: the cost is estimated
                record["usage_estimated"] = True
                self.stats.usage_estimated += 1
            billed["prompt"] += pt
            billed["completion"] += ct
            self.stats.prompt_tokens += pt
            self.stats.completion_tokens += ct
            record.update(prompt_tokens=pt, completion_tokens=ct, finish_reason=finish)
            if reasoning:
                record["reasoning_chars"] = len(reasoning)
            refusal = message.get("refusal")
            if (isinstance(refusal, str) and refusal.strip()) or finish == "content_filter":
                # the model (or the endpoint's filter) declined: its content is empty, but a larger budget would
                # only pay for the same refusal again, so the call fails at once with the model's words
                record["outcome"] = "refused"
                said = refusal.strip() if isinstance(refusal, str) and refusal.strip() else None
                msg = (f"the judge model refused: {said}" if said
                       else "output stopped by the endpoint's content filter (finish_reason content_filter)")
                raise JudgeCallError(msg, kind="refused", attempts=[], raw=said or content or None,
                                     prompt_tokens=billed["prompt"], completion_tokens=billed["completion"])
            spent_all = reported_ct is not None and reported_ct >= state["max_tokens"]
            # no finish_reason, and the whole budget used: cut as surely as an empty output so signed is
            cut = finish == "length" or (finish is None and spent_all)
            answered = bool(answer)
            if answered and not cut:
                return ChatResult(content=content, finish_reason=finish, prompt_tokens=billed["prompt"],
                                  completion_tokens=billed["completion"],
                                  latency_ms=(time.monotonic() - started) * 1000.0,
                                  max_tokens=state["max_tokens"], attempts=attempts,
                                  reasoning_chars=len(reasoning))
            # reasoning and no answer: when the budget ran out it went on thinking, a reply cut short like any other
            # (an endpoint that hides the reasoning, OpenAI's o-series, reports only how many tokens it took)
            hidden = _reasoning_tokens(usage)
            thought_only = not answered and bool(reasoning.strip() or thoughts or hidden)
            ran_out = finish == "length" or spent_all
            record["outcome"] = "truncated" if answered or (thought_only and ran_out) else "empty"
            # what to do about a reply that is all reasoning (never read as the verdict)
            shown = len(reasoning) + len(thoughts)
            thinking = "" if not thought_only else (
                f"the reply had only reasoning text ({shown} characters) and no answer" if shown
                else f"the model spent {hidden} reasoning tokens and gave no answer")
            if record["outcome"] == "empty" and finish and finish != "length" and not spent_all:
                # the model ended the reply itself (stop, eos...) below the budget: a larger budget would only pay
                # for the same empty reply again
                if thinking:
                    msg = (f"output empty: {thinking} (finish_reason {finish} at max_tokens={state['max_tokens']}); "
                           f"turn the model's thinking off for judging, or raise {option('max_tokens')} if it stopped "
                           f"thinking short of an answer (the tokens billed are still counted)")
                else:
                    msg = (f"output empty: the model returned no output with finish_reason {finish} at "
                           f"max_tokens={state['max_tokens']}; a larger budget would not change it (the tokens "
                           f"billed are still counted)")
                raise JudgeCallError(msg, kind="empty", attempts=[], prompt_tokens=billed["prompt"],
                                     completion_tokens=billed["completion"])
            nxt = next_max_tokens(state["max_tokens"], cap)
            room = None if self.context_size is None else self.context_size - pt
            # a server that cut the output below the budget asked for (llama.cpp's, at a full context) would
            # cut a larger budget at the same place
            server_cut = finish == "length" and reported_ct is not None and ct < state["max_tokens"]
            if server_cut:
                nxt = None
            elif nxt is not None and room is not None:
                # past the context window a larger budget only makes the server fail after generating
                nxt = min(nxt, room) if room > state["max_tokens"] else None
            if nxt is None:
                why, by_cap = record["outcome"], False
                if server_cut:
                    limit = f"the server stopped at {ct} tokens, below the budget: the {pt}-token prompt and the " \
                            f"output fill its context window"
                elif room is None or room > state["max_tokens"]:
                    limit, by_cap = f"the {option('max_retry_tokens')} cap", True
                else:
                    limit = f"with the {pt}-token prompt it fills the {self.context_size}-token context window"
                if thinking:  # a larger cap helps only when the cap is what stopped it
                    raise_cap = f"raise {option('max_retry_tokens')}, or " if by_cap else ""
                    limit += f": {thinking}; {raise_cap}turn the model's thinking off for judging"
                msg = f"output {why} at max_tokens={state['max_tokens']} ({limit})"
                raise JudgeCallError(msg, kind=why, attempts=[], raw=content or None,
                                     prompt_tokens=billed["prompt"], completion_tokens=billed["completion"])
            if afford is not None and not afford(billed["prompt"], billed["completion"], nxt):
                raise JudgeCallError(f"output {record['outcome']} at max_tokens={state['max_tokens']}, and the "
                                     f"attempt with max_tokens={nxt} would pass {option('budget')} (not sent)"
                                     + (f": {thinking}" if thinking else ""), kind="budget",
                                     attempts=[], raw=content or None, prompt_tokens=billed["prompt"],
                                     completion_tokens=billed["completion"])
            log.info("chat: output %s at max_tokens=%d; retrying with %d", record["outcome"], state["max_tokens"], nxt)
            state["max_tokens"] = nxt
            self.stats.retries += 1
            if self._on_retry is not None:
                self._on_retry(record)
            raise _Again()

        try:
            return await self._call(self._chat_url, build, lambda: prompt_est + state["max_tokens"], on_ok, "chat",
                                    attempts)
        except JudgeCallError as err:
            err.attempts = attempts
            err.prompt_tokens = max(err.prompt_tokens, billed["prompt"])
            err.completion_tokens = max(err.completion_tokens, billed["completion"])
            err.latency_ms = (time.monotonic() - started) * 1000.0
            raise

    # -- embeddings ----------------------------------------------------------------------------------
    #: set once a server answered 500 to an embeddings request with several inputs and then took the same
    #: inputs one per request (llama-cpp-python 0.3.16 puts them in one batch its one-sequence context cannot
    #: take): from then on each input goes alone. A 500 that single inputs get as well is the server failing,
    #: and the next case tries several inputs again.
    _embed_singly = False

    async def embed(self, texts: Sequence[str]) -> EmbedResult:
        model = self.config.embeddings_model
        if not model:
            raise ValueError("no embeddings model configured")
        started = time.monotonic()
        attempts: List[Dict[str, Any]] = []
        try:
            if len(texts) > 1 and not self._embed_singly:
                try:
                    vectors, tokens = await self._embed_request(model, texts, attempts)
                    return EmbedResult(vectors, tokens, (time.monotonic() - started) * 1000.0, attempts)
                except JudgeCallError as err:
                    # batch_rejected: a 500 about to be retried; a 500 that was the last attempt counts too
                    if err.kind != "batch_rejected" and not (attempts and attempts[-1].get("status") == 500):
                        raise
                    attempts[-1]["outcome"] = "batch_rejected"
                    log.info("embeddings: a request with %d inputs was answered 500; sending them one per request",
                             len(texts))
            vectors, tokens = [], 0
            for text in texts:
                one, n = await self._embed_request(model, [text], attempts)
                vectors += one
                tokens += n
            if len(texts) > 1 and not self._embed_singly:
                self._embed_singly = True  # the batch was refused and single inputs were not: the batch was why
            return EmbedResult(vectors, tokens, (time.monotonic() - started) * 1000.0, attempts)
        except JudgeCallError as err:
            err.attempts = attempts
            err.latency_ms = (time.monotonic() - started) * 1000.0
            raise

    async def _embed_request(self, model: str, texts: Sequence[str],
                             attempts: List[Dict[str, Any]]) -> tuple[List[List[float]], int]:
        """One ``POST /embeddings``; with several inputs, a 500 ends it at once as ``batch_rejected``."""
        est = sum(estimate_tokens(t) for t in texts)
        first = len(attempts)

        def build() -> Dict[str, Any]:
            if len(texts) > 1 and len(attempts) > first and attempts[-1].get("status") == 500:
                raise JudgeCallError("embeddings: the server answered 500 to several inputs in one request",
                                     kind="batch_rejected", attempts=[])
            return {"model": model, "input": list(texts)}

        def on_ok(data: Dict[str, Any], record: Dict[str, Any]) -> tuple[List[List[float]], int]:
            items = data.get("data")
            if not isinstance(items, list) or len(items) != len(texts):
                # a malformed reply, retried with back-off as any unreadable 200 is
                got = f"{len(items)}" if isinstance(items, list) else "no 'data' list"
                raise _BadReply(f"embeddings: expected {len(texts)} vectors, got {got}")
            items = sorted(items, key=lambda d: d.get("index", 0))
            vectors = [_one_vector(d["embedding"]) for d in items]
            check_vectors(vectors)
            reported = _tokens(_usage(data), "prompt_tokens")
            pt = reported or est
            if pt != reported:  # no (readable) usage from the endpoint: the cost is estimated, as for chat
                record["usage_estimated"] = True
                self.stats.usage_estimated += 1
            self.stats.prompt_tokens += pt
            record.update(prompt_tokens=pt)
            return vectors, pt

        return await self._call(self._embed_url, build, lambda: est, on_ok, "embeddings", attempts)
