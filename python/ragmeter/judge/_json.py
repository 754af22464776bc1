"""JSON for the judge hot path: orjson when it is installed, else the standard library.

Only the encodings that never reach a cache key may change with the backend
(request bodies, cache values, response parsing). The messages encoding that
cache keys hash is :func:`messages_bytes`: it gives byte for byte what
``json.dumps(x, ensure_ascii=False, separators=(",", ":"))`` gives, using
orjson only for inputs whose encoding is identical in both (lists of str->str
dicts or of str: no floats, no non-str keys), so keys stay stable whether or
not orjson is installed.
"""
from __future__ import annotations

import json
from typing import Any

try:  # optional speed-up
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised when orjson is absent
    _orjson = None

__all__ = ["dumps", "loads", "messages_bytes", "HAVE_ORJSON"]

HAVE_ORJSON = _orjson is not None


def _std_dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


if _orjson is not None:
    _odumps = _orjson.dumps
    _oloads = _orjson.loads

    def dumps(obj: Any) -> bytes:
        """Compact UTF-8 JSON (not for cache keys: float spelling may differ between backends)."""
        try:
            return _odumps(obj)
        except TypeError:  # e.g. a lone surrogate, an int over 64 bits, a non-str key
            return _std_dumps(obj)

    def loads(data: Any) -> Any:
        """Parse JSON (str or bytes); raises ValueError when it is not JSON."""
        try:
            return _oloads(data)
        except ValueError:  # orjson is stricter (NaN, lone surrogates): give the standard parser its say
            return json.loads(data)

    def _plain(inputs: Any) -> bool:
        if type(inputs) is not list:
            return False
        for m in inputs:
            if type(m) is dict:
                for k, v in m.items():
                    if type(k) is not str or type(v) is not str:
                        return False
            elif type(m) is not str:
                return False
        return True

    def messages_bytes(inputs: Any) -> bytes:
        if _plain(inputs):
            try:
                return _odumps(inputs)
            except TypeError:  # lone surrogate: let the standard encoder decide
                pass
        return _std_dumps(inputs)
else:  # pragma: no cover
    dumps = _std_dumps
    loads = json.loads
    messages_bytes = _std_dumps
