"""Endpoint URLs without their secrets: the one place that decides what of a URL may be shown or stored.

A key may arrive inside the URL (``http://user:KEY@host/v1``). :func:`split_credentials`
takes it out before anything is sent (the password then serves as the API key),
:func:`public_endpoint` is what summaries, settings, cache keys and messages
carry (cache keys add :func:`public_query`: the query, a credential's value left
out), :func:`query_credentials` are the query's secrets to mask, and
:func:`scrub_urls` removes any ``user:password@`` left inside a text (an
exception's message, a log line).
"""
from __future__ import annotations

import re
from typing import List, Optional, Tuple
from urllib.parse import unquote_plus, urlsplit, urlunsplit

__all__ = ["public_endpoint", "public_query", "query_credentials", "split_credentials", "scrub_urls", "endpoint_url",
           "CREDENTIAL_PARAM"]

_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]*@")
#: query parameters whose value is a credential (``?api_key=``, ``?access_token=``, Azure's ``?code=``, a SAS ``sig``)
CREDENTIAL_PARAM = re.compile(r"(?i)key|token|secret|passw|pwd|auth|sig|credential|session|code")


def public_endpoint(url: str) -> str:
    """``url`` without credentials, query or fragment (safe to store and report)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
    except ValueError:
        return "<invalid url>"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


def public_query(url: str) -> List[str]:
    """The query parameters of ``url`` as written (``name=value``, sorted), a credential's name without its value:
    what cache keys hold of a query, so that ``?deployment=a`` and ``?deployment=b`` never share replies and a
    rotated ``?api_key=`` does. Empty when there is no query."""
    try:
        query = urlsplit(url).query
    except ValueError:
        return []
    return sorted(pair if not CREDENTIAL_PARAM.search(unquote_plus(pair.partition("=")[0]))
                  else pair.partition("=")[0] for pair in query.split("&") if pair)


def query_credentials(url: str) -> List[str]:
    """The values (as written and decoded) of the query parameters of ``url`` named like a credential
    (``?api_key=``): secrets to mask wherever a server echoes them."""
    try:
        query = urlsplit(url).query
    except ValueError:
        return []
    out: List[str] = []
    for pair in query.split("&"):
        name, _, value = pair.partition("=")
        if value and CREDENTIAL_PARAM.search(unquote_plus(name)):
            out += [value, unquote_plus(value)]
    return out


def split_credentials(url: str) -> Tuple[str, Optional[str]]:
    """``(url without user:password@, the password or None)``; the query string is kept (some APIs need it)."""
    try:
        parts = urlsplit(url)
        password = parts.password
        if "@" not in parts.netloc:
            return url, None
        host = parts.hostname or ""
        if ":" in host:  # IPv6 literal
            host = f"[{host}]"
        if parts.port:
            host = f"{host}:{parts.port}"
    except ValueError:
        return scrub_urls(url), None
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment)), password or None


def check_http_url(name: str, url: Optional[str]) -> None:
    """An :class:`InputError` naming ``name`` unless ``url`` is an http(s) URL with a host; the value is shown
    without its query string or ``user:password@`` (either may hold a key)."""
    from ragmeter.errors import InputError

    if url is None:
        return
    try:
        parts = urlsplit(url)
        ok = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
    except ValueError:
        ok = False
    if not ok:
        shown = scrub_urls(url.split("?", 1)[0].split("#", 1)[0])
        if "@" in shown:
            shown = shown.rsplit("@", 1)[1]
        raise InputError(f"{name}: expected an http:// or https:// URL such as https://api.openai.com/v1 or "
                         f"http://localhost:8000/v1, got {shown!r}")


def scrub_urls(text: str) -> str:
    """``text`` with the ``user:password@`` part of every URL in it removed."""
    return _USERINFO.sub(r"\1", text)


def endpoint_url(base: str, route: str) -> str:
    """``base`` with ``route`` (``/chat/completions``) appended to its path, ahead of any query string
    (``https://h/deployments/d?api-version=1`` -> ``https://h/deployments/d/chat/completions?api-version=1``)."""
    try:
        parts = urlsplit(base)
    except ValueError:
        return base.rstrip("/") + route
    if not parts.query and not parts.fragment:
        return base.rstrip("/") + route
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/") + route, parts.query, ""))
