"""Collecting a run from the live RAG system: ``ragmeter collect`` and ``ragmeter.collect(golden, target=...)``.

``target`` is a TOML file describing an HTTP endpoint (:mod:`ragmeter.collect.target`), ``"module:function"``,
or a callable ``fn(case)`` (sync or async) returning a run record. See :mod:`ragmeter.collect.runner` for the
guarantees (first response checked before the rest is sent, the judge's retry and stop rules, rate limits, a
cache that makes a crashed run resume) and ``docs/collect.md`` for the whole story.

``ragmeter.collect`` is this module, made callable (``ragmeter.collect(golden, target=fn)`` calls
:func:`collect`): importing the submodules would otherwise replace a function of that name on the package.
"""
from __future__ import annotations

import sys
import types
from typing import Any

from .runner import DEFAULT_PATH, CollectResult, CollectStopped, collect, mode_change, write_run
from .target import CallableTarget, HttpTarget, load_target, resolve_target

__all__ = ["collect", "CollectResult", "CollectStopped", "write_run", "mode_change", "load_target",
           "resolve_target", "HttpTarget", "CallableTarget", "DEFAULT_PATH"]


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> CollectResult:
        return collect(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
