"""What ``ragmeter collect`` calls: an HTTP target described in TOML, or a Python callable.

The smallest target file is one line, ``url = "http://host/ask"``: a JSON POST of ``{"id", "question"}`` whose
response is already a run record. Everything else is optional::

    url = "http://localhost:8000/ask"
    method = "POST"                                  # or GET (the body then goes in the query string)
    headers = { Authorization = "Bearer ${RAG_TOKEN}" }   # ${VAR}: read from the environment at call time
    body = { query = "{question}", case = "{id}", top_k = 5 }   # {question}, {id}, {category}

    [response]                                       # run field = dotted path in the response ("a.0.b")
    answer = "data.output.text"
    retrieved = "data.docs"
    retrieval_mode = "meta.mode"
    [response.retrieved_item]                        # per-item field names inside `retrieved`
    file = "metadata.source"
    text = "page_content"

Header values are never stored: not in the cache key (only the header names are), not in the run file, not in
messages; a reply that echoes one has it masked before it is cached or written (``runner._scrub``).
"""
from __future__ import annotations

import importlib
import os
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union
from urllib.parse import urlsplit

from ragmeter._front import option
from ragmeter.errors import InputError
from ragmeter.judge.urls import public_endpoint, public_query

__all__ = ["HttpTarget", "CallableTarget", "load_target", "resolve_target", "RUN_FIELDS", "ITEM_FIELDS"]

#: run fields a ``[response]`` table may map
RUN_FIELDS = ("answer", "retrieved", "contexts", "retrieval_mode", "usage", "cost")
#: per-item fields of ``[response.retrieved_item]``
ITEM_FIELDS = ("file", "chunk_id", "text", "score")
_METHODS = ("GET", "POST", "PUT")
_TOP_KEYS = ("url", "method", "headers", "body", "response")
_PLACEHOLDER = re.compile(r"\{(question|id|category)\}")
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_CALLABLE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


@dataclass(frozen=True)
class HttpTarget:
    source: str                      #: the TOML file (named in every message)
    url: str
    method: str = "POST"
    headers: Mapping[str, str] = field(default_factory=dict)   #: templates, ``${VAR}`` unresolved
    body: Optional[Mapping[str, Any]] = None                   #: template; None = {"id", "question"}
    response: Mapping[str, str] = field(default_factory=dict)  #: run field -> path; empty = a run record
    item: Mapping[str, str] = field(default_factory=dict)      #: retrieved item field -> path

    @property
    def identity(self) -> Dict[str, Any]:
        """What names this target in cache keys: the endpoint without credentials or query, the method, the
        header names (never their values) and the query parameters as the file writes them, a credential's name
        without its value: ``?top_k=5`` and ``?top_k=10`` are two systems, a rotated ``?api_key=`` is not."""
        out: Dict[str, Any] = {"kind": "http", "endpoint": public_endpoint(self.url), "method": self.method,
                               "headers": sorted(self.headers)}
        if urlsplit(self.url).query:  # a url without one keeps the key it always had
            out["query"] = public_query(self.url)
        return out

    @property
    def label(self) -> str:
        return f"{self.source} ({public_endpoint(self.url)})"

    def request(self, case: Mapping[str, Any]) -> Dict[str, Any]:
        """The request body (or query parameters) for ``case``: the template with its placeholders filled."""
        if self.body is None:
            return {"id": case["id"], "question": case["question"]}
        return _fill(self.body, case)

    def resolved_headers(self) -> Dict[str, str]:
        """Header values with ``${VAR}`` read from the environment now (kept in memory only)."""
        return {name: _from_environment(value, f"{self.source}: headers.{name}", []) for name, value in
                self.headers.items()}

    def resolved_url(self) -> Tuple[str, List[str]]:
        """The url with ``${VAR}`` read from the environment now (kept in memory only; messages and cache keys
        show the url as the file writes it), checked as an address, and the values read: they are masked as
        credentials wherever the system echoes them."""
        values: List[str] = []
        url = _from_environment(self.url, f"{self.source}: url", values)
        if values:
            if not re.match(r"(?i)^https?://", url):
                raise _bad(self.source, "url: once its environment variables are read, not an http:// or https:// "
                           "address")
            _check_url(Path(self.source), url)
        return url, values


def _from_environment(template: str, where: str, values: List[str]) -> str:
    """``template`` with each ``${VAR}`` replaced by the variable's value (appended to ``values``); an unset
    variable is an :class:`InputError` at ``where``."""
    def env(m: "re.Match[str]") -> str:
        got = os.environ.get(m.group(1))
        if got is None:
            raise InputError(f"{where}: environment variable {m.group(1)} is not set")
        control = _control_character(got)
        if control:  # the value itself is never shown: it is a credential
            raise InputError(f"{where}: environment variable {m.group(1)} holds {control}; no request can carry "
                             f"it (a token read from a file with its line break?)")
        values.append(got)
        return got

    return _ENV.sub(env, template)


def _control_character(value: str) -> Optional[str]:
    """What makes ``value`` unsendable in a request line or header ("a line break", "a control character"), or
    None. aiohttp refused it at every call: each case failed ('Forbidden control character detected in headers',
    exit 3) with no word of the header or the variable."""
    if "\n" in value or "\r" in value:
        return "a line break"
    if any(ord(c) < 32 and c != "\t" or ord(c) == 127 for c in value):
        return "a control character"
    return None


#: ``${NAME`` without its brace, or the shell's ``$NAME``: sent as written, never read from the environment
_ENV_MISWRITTEN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?![A-Za-z0-9_]*\})|(?<![\w$])\$([A-Za-z_][A-Za-z0-9_]*)")


#: an HTTP header name (RFC 9110 token)
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def _check_header(path: Path, name: str, value: str) -> None:
    where = f"headers.{name}"
    if not _HEADER_NAME.match(name):  # sent as written: a strict server answered 400, a lenient one misread it
        raise _bad(path, f"{where}: not a header name (letters, digits and - only, no space or colon)")
    miswritten = _ENV_MISWRITTEN.search(value)
    if miswritten:
        var = miswritten.group(1) or miswritten.group(2)
        raise _bad(path, f"{where}: write ${{{var}}} to read {var} from the environment ({miswritten.group(0)!r} "
                   f"would be sent as it is written)")
    control = _control_character(_ENV.sub("", value))
    if control:
        raise _bad(path, f"{where}: holds {control}; no request can carry it")


@dataclass(frozen=True)
class CallableTarget:
    fn: Callable[..., Any]
    name: str   #: module:qualname, what the cache key holds

    @property
    def identity(self) -> Dict[str, Any]:
        return {"kind": "python", "name": self.name}

    @property
    def label(self) -> str:
        return self.name


def _fill(template: Any, case: Mapping[str, Any]) -> Any:
    """Replace ``{question}``/``{id}``/``{category}`` in every string of ``template``; a string that is only a
    placeholder takes the value as it is. Other braces are left alone (JSON-looking text stays intact)."""
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template)
        if whole:
            return case.get(whole.group(1))
        return _PLACEHOLDER.sub(lambda m: "" if case.get(m.group(1)) is None else str(case.get(m.group(1))), template)
    if isinstance(template, Mapping):
        return {k: _fill(v, case) for k, v in template.items()}
    if isinstance(template, list):
        return [_fill(v, case) for v in template]
    return template


def _bad(path: Union[str, Path], message: str) -> InputError:
    return InputError(f"{path}: {message}")


def load_target(path: Union[str, os.PathLike]) -> HttpTarget:
    """Read and check a target TOML file; :class:`InputError` naming the file and the field otherwise."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))  # a byte-order mark (Notepad's) is no TOML
    except FileNotFoundError:
        meant = "" if path.suffix.lower() == ".toml" else ", and not module:function (e.g. myrag:ask)"
        raise _bad(path, f"no such target file{meant}") from None
    except UnicodeDecodeError:
        raise _bad(path, "not a UTF-8 text file") from None
    except tomllib.TOMLDecodeError as exc:
        raise _bad(path, f"not valid TOML: {exc}") from None
    unknown = sorted(set(data) - set(_TOP_KEYS))
    if unknown:
        raise _bad(path, f"unknown key {unknown[0]!r} (a target has {', '.join(_TOP_KEYS)})")
    url = data.get("url")
    if not isinstance(url, str) or not (re.match(r"(?i)^https?://", url) or url.startswith("${")):
        raise _bad(path, "url: required, an http:// or https:// address")
    if not _ENV.search(url):  # else checked once its variables are read (HttpTarget.resolved_url)
        _check_url(path, url)
    method = data.get("method", "POST")
    if not isinstance(method, str) or method.upper() not in _METHODS:
        raise _bad(path, f"method: must be one of {', '.join(_METHODS)}, got {method!r}")
    headers = data.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise _bad(path, "headers: must be a table of strings, e.g. { Authorization = \"Bearer ${RAG_TOKEN}\" }")
    for name, value in headers.items():
        _check_header(path, name, value)
    body = data.get("body")
    if body is not None and not isinstance(body, dict):
        raise _bad(path, "body: must be a table, e.g. { query = \"{question}\" }")
    if body is not None:
        _check_asks_the_question(path, body)
    if not isinstance(data.get("response", {}), dict):  # before dict(): a string or number raised a traceback
        raise _bad(path, "response: must be a table of run field = \"path.in.response\", e.g. [response] "
                   "then answer = \"data.output.text\"")
    response = dict(data.get("response", {}))
    item = response.pop("retrieved_item", {})
    _check_paths(path, "response", response, RUN_FIELDS)
    if not isinstance(item, dict):
        raise _bad(path, "response.retrieved_item: must be a table of item field = \"path\"")
    _check_paths(path, "response.retrieved_item", item, ITEM_FIELDS)
    if item and "retrieved" not in response:
        raise _bad(path, "response.retrieved_item needs response.retrieved (the path of the list of items)")
    return HttpTarget(str(path), url, method.upper(), headers, body, response, item)


def _strings(template: Any) -> List[str]:
    if isinstance(template, str):
        return [template]
    values = template.values() if isinstance(template, Mapping) else template if isinstance(template, list) else []
    return [text for value in values for text in _strings(value)]


def _check_asks_the_question(path: Path, body: Mapping[str, Any]) -> None:
    """A body that never holds ``{question}`` sends one request for every case (a misspelt placeholder is sent
    as written): the run would measure one question asked N times."""
    texts = _strings(body)
    if any("{question}" in text for text in texts):
        return
    near = sorted({m for text in texts for m in re.findall(r"\{\s*\w+\s*\}", text)} - {"{id}", "{category}"})
    found = f" (it has {', '.join(map(repr, near))}, sent as written)" if near else ""
    raise _bad(path, f"body: no {{question}} in it{found}: every case would send the same request; put "
               f"{{question}} where the system reads the question, e.g. {{ query = \"{{question}}\" }}")


def _check_url(path: Path, url: str) -> None:
    """A url that no request could be sent to (no host, a port out of range, a broken IPv6 bracket) is the target
    file's error, said once: it used to make every case a failed record ('InvalidUrlClientError'), exit 3. The
    url itself is not repeated: it may hold a credential."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError when out of range or not a number)
        host = parts.hostname
    except ValueError as exc:
        raise _bad(path, f"url: not a valid address ({exc})") from None
    if not host:
        raise _bad(path, "url: has no host name (e.g. http://localhost:8000/ask)")


def _check_paths(path: Path, table: str, mapping: Mapping[str, Any], allowed: tuple) -> None:
    for key, value in mapping.items():
        if key not in allowed:
            raise _bad(path, f"{table}.{key}: not a field ({', '.join(allowed)})")
        if not isinstance(value, str) or not value.strip():
            raise _bad(path, f"{table}.{key}: must be a path such as \"data.output.text\", got {value!r}")


def _import_callable(spec: str) -> CallableTarget:
    module_name, _, attr = spec.partition(":")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # `--target mymodule:ask` from the project folder
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(f"{option('target', spec)}: cannot import {module_name} ({exc})") from None
    except (Exception, SystemExit) as exc:  # the module's own error while it ran: was a traceback, exit 1
        raise InputError(f"{option('target', spec)}: cannot import {module_name} ({_raised_at(exc)})") from None
    for part in attr.split("."):
        owner, obj = obj, getattr(obj, part, None)
        if obj is None:
            import difflib

            close = difflib.get_close_matches(part, [n for n in dir(owner) if not n.startswith("__")], n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise InputError(f"{option('target', spec)}: {module_name} has no {attr}{hint}")
    if not callable(obj):
        raise InputError(f"{option('target', spec)}: {attr} is not callable")
    return _callable_target(obj, spec)


def _callable_target(fn: Any, name: str) -> CallableTarget:
    """The target, once ``fn`` is seen to take the case as its one argument: a function of none (or of two) failed
    every case with the same TypeError, a run file of failures for one mistake in the target."""
    import inspect

    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: its call will say
        return CallableTarget(fn, name)
    try:
        signature.bind({})
    except TypeError:
        raise InputError(f"{option('target', name)}: takes {signature}, but collect calls it with one argument, the case "
                         f"(a dict of id, question, category and repeat)") from None
    return CallableTarget(fn, name)


def _raised_at(exc: BaseException) -> str:
    """``Kind: message`` on one line, and the file and line of the module code that raised it."""
    import traceback

    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    if isinstance(exc, SyntaxError):  # its message names the file and line already
        return text
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "importlib" not in f.filename]
    return text + (f", {Path(frames[-1].filename).name} line {frames[-1].lineno}" if frames else "")


def callable_name(fn: Any) -> str:
    """What names a Python target in cache keys and messages: ``module:qualname`` for a function of its own name
    in its module. A callable that name does not single out (a lambda, a function made inside another, a
    ``functools.partial``, an object with ``__call__``) gets ``#`` and a digest of what tells it apart: its code,
    the values it captured, its bound arguments, the object's repr. Two lambdas of one module shared their cache
    entries, so one replayed the other's answers. The digest is stable across processes (a rerun resumes) as long
    as those values have a repr without a memory address; one with an address is left out of it."""
    import functools

    base, parts = fn, []
    while isinstance(base, functools.partial):
        parts.append(_plain_repr((base.args, sorted(base.keywords.items()))))
        base = base.func
    module = getattr(base, "__module__", None) or type(base).__module__
    qualname = getattr(base, "__qualname__", None)
    code = getattr(base, "__code__", None)
    if qualname is None:  # an object with __call__: its class, and its state as its repr shows it
        qualname = type(base).__qualname__
        parts.append(_plain_repr(base))
        code = getattr(getattr(type(base), "__call__", None), "__code__", None)
    if "<" in qualname or parts:
        if code is not None:
            parts.append(f"{code.co_filename}:{code.co_firstlineno}:{code.co_code.hex()}:{_plain_repr(code.co_consts)}")
        cells = getattr(base, "__closure__", None) or ()
        parts.append(_plain_repr([_cell_value(c) for c in cells]))
    name = f"{module}:{qualname}"
    if not parts:
        return name
    import hashlib

    return f"{name}#{hashlib.sha256(chr(0).join(parts).encode('utf-8', 'replace')).hexdigest()[:12]}"


def _cell_value(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def _plain_repr(value: Any) -> str:
    """``repr(value)``, or "" when it holds a memory address (it would differ in every process)."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ leaves the value out of the digest
        return ""
    return "" if re.search(r" at 0x[0-9a-fA-F]+", text) else text


def resolve_target(target: Any) -> Union[HttpTarget, CallableTarget]:
    """A TOML path, ``module:function``, a callable, or an already built target."""
    if isinstance(target, (HttpTarget, CallableTarget)):
        return target
    if callable(target):
        return _callable_target(target, callable_name(target))
    if not isinstance(target, (str, os.PathLike)):  # os.fspath's TypeError would not say what a target is
        raise InputError(f"target: expected a TOML file, 'module:function' or a callable, got "
                         f"{type(target).__name__}")
    text = os.fspath(target)
    if not Path(text).exists() and _CALLABLE.match(text):
        return _import_callable(text)
    return load_target(text)
