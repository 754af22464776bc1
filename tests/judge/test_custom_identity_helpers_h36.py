"""A custom metric's scoring function is identified with the helpers it calls and the constants it reads (h36).

Before, only the function's own source counted: editing a helper it calls, or a module constant it reads (a
threshold), left its identity, and with it the metric's definition, unchanged, so ``compare`` compared a run of
the old scoring with one of the new as if nothing but the system under test had changed."""
from __future__ import annotations

import hashlib
import importlib
import sys
from pathlib import Path
from typing import Any, Callable, Dict

import pytest

from ragmeter.judge.custom import function_identity

MODULE = '''
import math
from math import floor

CUT = {cut}
WORDS = frozenset({{"calm", "kind", "warm"}})


def squash(x):
    return min(1.0, max(0.0, x {squash_op} 0.1))


def outer(x):
    return squash(x)


def score(reply, case):
    value = outer(reply["score"] / 5)
    return 1.0 if value >= CUT and reply["tone"] in WORDS else floor(value * 0) + math.fabs(0.0)


def plain(reply, case):
    return reply["score"] / 5
'''


def load(tmp_path: Path, name: str, **parts: Any) -> Any:
    """The module ``name`` written with ``parts`` and imported afresh (same name, so the same qualified names)."""
    text = MODULE.format(**{"cut": 0.5, "squash_op": "+", **parts})
    folder = tmp_path / f"{name}-{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    (folder / f"{name}.py").write_text(text)
    sys.modules.pop(name, None)
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop(name, None)


def test_editing_a_helper_two_calls_down_changes_the_identity(tmp_path: Path) -> None:
    before = load(tmp_path, "m_helper")
    after = load(tmp_path, "m_helper", squash_op="-")
    assert function_identity(before.score) != function_identity(after.score)
    assert function_identity(before.score) == function_identity(load(tmp_path, "m_helper").score)


def test_editing_a_module_constant_it_reads_changes_the_identity(tmp_path: Path) -> None:
    before = load(tmp_path, "m_const")
    assert function_identity(before.score) != function_identity(load(tmp_path, "m_const", cut=0.6).score)


def test_a_function_that_calls_no_helper_keeps_the_identity_of_its_own_source(tmp_path: Path) -> None:
    """Identities recorded by earlier versions stay valid for functions that read nothing of their module's
    (stdlib calls such as ``floor`` or ``math.fabs`` are not the user's to edit)."""
    module = load(tmp_path, "m_plain")
    own = 'def plain(reply, case):\n    return reply["score"] / 5'
    assert function_identity(module.plain) == "src-" + hashlib.sha256(("source:" + own).encode()).hexdigest()[:12]


def test_helpers_without_source_are_identified_by_their_code_and_cycles_end() -> None:
    def built(body: str) -> Callable:
        namespace: Dict[str, Any] = {}
        exec(compile("def ping(x):\n    return pong(x - 1) if x > 0 else " + body + "\n"
                     "def pong(x):\n    return ping(x)\n"
                     "def score(reply, case):\n    return ping(reply['n'])\n", "<typed>", "exec"), namespace)
        return namespace["score"]
    assert function_identity(built("0.0")) == function_identity(built("0.0"))
    assert function_identity(built("0.0")) != function_identity(built("1.0"))


@pytest.mark.parametrize("value", [object(), sys, print])
def test_other_globals_are_left_out_not_refused(value: Any) -> None:
    namespace: Dict[str, Any] = {"thing": value}
    exec(compile("def score(reply, case):\n    return 1.0 if thing else 0.0\n", "<typed>", "exec"), namespace)
    alone: Dict[str, Any] = {"thing": None}
    exec(compile("def score(reply, case):\n    return 1.0 if thing else 0.0\n", "<typed>", "exec"), alone)
    assert function_identity(namespace["score"]).startswith("code-")
    del alone["thing"]
    assert function_identity(namespace["score"]) == function_identity(alone["score"])


def test_a_decorated_helper_is_followed_to_the_function_it_wraps() -> None:
    def built(body: str) -> Callable:
        namespace: Dict[str, Any] = {}
        exec(compile("import functools\n@functools.lru_cache(maxsize=None)\ndef weight(n):\n    return " + body +
                     "\ndef score(reply, case):\n    return weight(reply['n'])\n", "<typed>", "exec"), namespace)
        return namespace["score"]
    assert function_identity(built("n / 2")) != function_identity(built("n / 3"))


def test_compare_refuses_runs_whose_metric_reads_another_threshold(server, tmp_path: Path) -> None:
    """End to end: ``ragmeter eval --metric-module`` twice, the module's constant edited in between; the paid
    replies are reused and compare names the scoring function as changed."""
    from test_custom_definition_h33 import evaluated, ragmeter

    base = evaluated(server, tmp_path, "base", body='reply["score"] >= CUT and 5 or 0\nCUT = 2')
    sent = server.requests
    cand = evaluated(server, tmp_path, "cand", body='reply["score"] >= CUT and 5 or 0\nCUT = 3')
    assert server.requests == sent
    proc = ragmeter("compare", base, cand)
    said = " ".join(proc.stderr.split())
    assert proc.returncode == 2 and "judge metric 'blueness': its definition differs (its scoring function)" in said, said
