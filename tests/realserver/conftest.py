"""The judge against a real OpenAI-compatible server: llama.cpp's, from llama-cpp-python[server].

``scripts/test.sh`` installs it (built from source, the wheel kept in pip's cache) when CI=true or
RAGMETER_REAL_SERVER=1. Without it these tests are skipped with one line, except under CI=true, where a
missing server is a failure: the suite is never skipped in CI.

Each server is a ``python -m llama_cpp.server`` process on 127.0.0.1 serving a model that
:mod:`ggufmodels` wrote into the test's temporary folder; it is stopped when the session ends.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Dict, List

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from llamaserver import LlamaServer  # noqa: E402

NEEDED = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "gguf")


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def _require_server() -> None:
    missing = [m for m in NEEDED if importlib.util.find_spec(m) is None]
    if not missing:
        return
    why = (f"llama-cpp-python[server] and gguf are needed ({', '.join(missing)} missing): "
           f"RAGMETER_REAL_SERVER=1 bash scripts/test.sh installs them")
    if _in_ci():
        pytest.fail(f"CI=true and {why}", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="session")
def models(tmp_path_factory) -> Dict[str, Path]:
    _require_server()
    import ggufmodels

    d = tmp_path_factory.mktemp("gguf")
    return {"scripted": ggufmodels.write_scripted(d / "scripted.gguf"),
            "random": ggufmodels.write_random(d / "random.gguf"),
            "embedder": ggufmodels.write_embedder(d / "embedder.gguf")}


@pytest.fixture(scope="session")
def servers(models, tmp_path_factory):
    """Start servers on demand (``servers("scripted")``), each once per session; all stopped at the end."""
    logs = tmp_path_factory.mktemp("server-logs")
    started: Dict[str, LlamaServer] = {}
    specs = {"scripted": ("scripted", "judge", False), "random": ("random", "judge", False),
             "embed_tokens": ("scripted", "embed", True), "embed": ("embedder", "embed", True)}

    def get(name: str) -> LlamaServer:
        if name not in started:
            model, alias, embedding = specs[name]
            started[name] = LlamaServer(models[model], alias=alias, n_ctx=8192, log=logs / f"{name}.log",
                                        embedding=embedding).start()
        return started[name]

    yield get
    for s in started.values():
        s.stop()


@pytest.fixture()
def own_server(models, tmp_path):
    """A server of the test's own (to be killed, or with a small context); stopped after the test."""
    made: List[LlamaServer] = []

    def make(model: str, n_ctx: int = 8192) -> LlamaServer:
        s = LlamaServer(models[model], alias="judge", n_ctx=n_ctx, log=tmp_path / f"server-{len(made)}.log")
        made.append(s)
        return s.start()

    yield make
    for s in made:
        s.stop()
