"""The one check of the public functions' numeric and text arguments.

``check_arg("k", k, "int", low=1)`` returns the value (a plain ``int`` / ``float`` / ``str`` / ``list``) or
raises :class:`~ragmeter.errors.InputError` naming the argument, what it must be and what it got::

    k must be a positive integer, got '5' (a str)
    thresholds must be a list of numbers, got 0.5
    thresholds must be a list of numbers; item 1 is 'x' (a str)

A bool is neither an integer nor a number here (``k=True`` is a slip, not 1), NaN is not a number, and a string
is not a list. NumPy's integer and float scalars are integers and numbers. The command line passes its flag as
the name (``--resamples``; "or None" is then left out of the message), the Python functions their keyword
(``n_resamples``).
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any, Optional

__all__ = ["check_arg", "check_k", "positive_number", "check_cache_path", "MAX_K"]

#: kind -> what one value of it is
_WHAT = {"int": "an integer", "number": "a number", "text": "a string", "bool": "True or False"}
#: list kind -> the kind of its items
_ITEMS = {"numbers": "number", "texts": "text"}


def check_arg(name: str, value: Any, kind: str, *, low: Optional[float] = None, high: Optional[float] = None,
              optional: bool = False) -> Any:
    """``value`` as a ``kind`` ("int", "number", "text", "bool", or a list: "numbers", "texts") between ``low``
    and ``high`` (inclusive; numbers only); ``None`` passes when ``optional``. Raises :class:`InputError`."""
    if value is None and optional:
        return None
    or_none = " or None" if optional and not name.startswith("-") else ""  # a flag is given or not: no None
    item_kind = _ITEMS.get(kind)
    if item_kind is None:
        ok, checked = _one(value, kind, low, high)
        if not ok:
            _refuse(name, _expected(kind, low, high) + or_none, value)
        return checked
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__") or hasattr(value, "keys"):
        _refuse(name, f"a list of {_plural(item_kind, low, high)}{or_none}", value)
    items = []
    for i, item in enumerate(value):
        ok, checked = _one(item, item_kind, low, high)
        if not ok:
            from ragmeter.errors import InputError

            raise InputError(f"{name} must be a list of {_plural(item_kind, low, high)}; item {i} is {_shown(item)}")
        items.append(checked)
    return items


#: the largest cut-off taken: far more chunks than any retriever returns for a question (a k beyond a case's
#: chunks changes nothing), and within every integer type the engine counts ranks in
MAX_K = 1_000_000


def check_k(k: Any, name: str = "k") -> int:
    """``k`` as an int; an :class:`InputError` (naming ``name``: ``--k`` on the command line) for anything but an
    integer from 1 to :data:`MAX_K` (a bool, a float, a string; 2**64 was an OverflowError in the sweep's engine).

    It lives here, not in :mod:`ragmeter.retrieval`, so that a command checks its flag without importing Polars:
    ``score`` checks ``--k`` before it starts decoding the run on a helper thread, and that import (0.15-0.45 s)
    used to delay the start (2026-12-07)."""
    from ragmeter.errors import InputError

    value = int(check_arg(name, k, "int", low=1))
    if value > MAX_K:
        raise InputError(f"{name} must be at most {MAX_K:,}, got {value}; a cut-off beyond the chunks a case "
                         "retrieved changes nothing")
    return value


def _one(value: Any, kind: str, low: Optional[float], high: Optional[float]) -> Any:
    """(ok, value as a plain Python value)."""
    if kind == "text":
        return isinstance(value, str), value
    if kind == "bool":  # a flag given as "no" would be read as true
        return isinstance(value, bool) or type(value).__name__ == "bool_", bool(value)
    number: float
    if isinstance(value, bool):
        return False, value
    if kind == "int" and isinstance(value, Integral):
        number = int(value)
    elif kind == "number" and isinstance(value, Real):
        number = float(value)
    else:
        return False, value
    if math.isnan(number):
        return False, value
    return (low is None or number >= low) and (high is None or number <= high), number


def _bounds(low: Optional[float], high: Optional[float]) -> str:
    if low is not None and high is not None:
        return f" between {_bound(low)} and {_bound(high)}"
    if low is not None:
        return f" >= {_bound(low)}"
    return f" <= {_bound(high)}" if high is not None else ""


def _bound(value: float) -> str:
    """A bound as a reader writes it: 10,000,000 rather than 1e+07."""
    return f"{int(value):,}" if float(value).is_integer() and abs(value) >= 10_000 else f"{value:g}"


def _expected(kind: str, low: Optional[float], high: Optional[float]) -> str:
    if kind == "int" and high is None and low in (0, 1):
        return "a positive integer" if low == 1 else "a non-negative integer"
    return _WHAT[kind] + (_bounds(low, high) if kind != "text" else "")


def _plural(kind: str, low: Optional[float], high: Optional[float]) -> str:
    plural = {"number": "numbers", "text": "strings", "int": "integers"}[kind]
    return plural + (_bounds(low, high) if kind != "text" else "")


def _shown(value: Any) -> str:
    """The value as the message shows it: its repr (shortened), with its type unless it is a number or None."""
    numeric = isinstance(value, Real) and not isinstance(value, bool)
    if numeric:  # NumPy's scalars as the plain numbers they are (not np.float64(0.5))
        return repr(int(value) if isinstance(value, Integral) else float(value))
    import reprlib

    shorter = reprlib.Repr()
    shorter.maxstring = shorter.maxother = 60
    text = shorter.repr(value)
    kind = type(value).__name__
    return text if value is None else f"{text} ({'an' if kind[:1] in 'aeiou' else 'a'} {kind})"


def _refuse(name: str, expected: str, value: Any) -> None:
    from ragmeter.errors import InputError

    raise InputError(f"{name} must be {expected}, got {_shown(value)}")


def positive_number(value: Any) -> bool:
    """Whether ``value`` is a finite number above 0: a time-out in seconds, a rate. A bool is none (``timeout=True``
    was 1 s, ``rpm=True`` one request a minute), and 0, NaN or infinity would not mean "no limit" to the user."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def check_cache_path(cache: Any) -> None:
    """Refuse a ``cache`` that is neither a path nor None (``cache=5`` created a file named 5 in the current
    folder, or failed later with a bare TypeError)."""
    import os

    from ragmeter._front import arg, no_cache
    from ragmeter.errors import InputError

    if cache is not None and not isinstance(cache, (str, os.PathLike)):
        raise InputError(f"{arg('cache')} must be a path (or {no_cache()} for no cache), got {cache!r} "
                         f"({type(cache).__name__})")
