"""ragmeter: fast, trustworthy evaluation of retrieval-augmented generation.

Heavy modules (polars, aiohttp) are imported lazily so that the command line
starts quickly; ``import ragmeter`` itself only loads this file.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # neither typing nor importlib is imported at start-up: each slows every command
    from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "score": ("ragmeter.retrieval", "score"),
    "sweep": ("ragmeter.retrieval", "sweep"),
    "metrics": ("ragmeter.metrics", None),
    "trec": ("ragmeter.trec", None),
    "judge": ("ragmeter.judge", None),
    "errors": ("ragmeter.errors", None),
    "audit": ("ragmeter.audit", None),  # the module, callable: ragmeter.audit(golden, ...)
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'ragmeter' has no attribute {name!r}")
    from importlib import import_module

    module = import_module(target[0])
    return module if target[1] is None else getattr(module, target[1])
