"""The judge against a real OpenAI-compatible server: llama.cpp's, from llama-cpp-python[server].

``scripts/test.sh`` installs it (built from source, the wheel kept in pip's cache) when CI=true or
RAGMETER_REAL_SERVER=1. Without it these tests are skipped with one line, except under CI=true, where a
missing server is a failure: the suite is never skipped in CI.

Each server is a ``python -m llama_cpp.server`` process on 127.0.0.1 serving a model that
:mod:`ggufmodels` wrote into the test's temporary folder; it is stopped when the session ends.
"""
from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional

import pytest

sys.path.insert(0, str(Path(__file__).parent))

NEEDED = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "gguf")
#: seconds a server may take to answer GET /v1/models after it was started
START_TIMEOUT = 90.0


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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """One ``llama_cpp.server`` process; its output goes to ``log``."""

    def __init__(self, model: Path, *, alias: str, n_ctx: int, log: Path, embedding: bool = False) -> None:
        self.model, self.alias, self.n_ctx, self.log_path, self.embedding = model, alias, n_ctx, log, embedding
        self.port = 0
        self.proc: Optional[subprocess.Popen] = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "LlamaServer":
        self.port = _free_port()
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model), "--model_alias", self.alias,
               "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx), "--n_threads", "1",
               "--n_threads_batch", "1", "--embedding", str(self.embedding).lower()]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                with urllib.request.urlopen(self.base_url + "/models", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer within {START_TIMEOUT:g}s: {self.log_tail()}")

    def log_tail(self, n: int = 15) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def posts(self) -> int:
        """Requests answered so far (uvicorn's access log)."""
        try:
            return self.log_path.read_text(errors="replace").count('"POST /v1/')
        except OSError:
            return 0

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture(scope="session")
def models(tmp_path_factory) -> Dict[str, Path]:
    _require_server()
    import ggufmodels

    d = tmp_path_factory.mktemp("gguf")
    return {"scripted": ggufmodels.write_scripted(d / "scripted.gguf"),
            "random": ggufmodels.write_random(d / "random.gguf")}


@pytest.fixture(scope="session")
def servers(models, tmp_path_factory):
    """Start servers on demand (``servers("scripted")``), each once per session; all stopped at the end."""
    logs = tmp_path_factory.mktemp("server-logs")
    started: Dict[str, LlamaServer] = {}
    specs = {"scripted": ("scripted", "judge", False), "random": ("random", "judge", False),
             "embed_tokens": ("scripted", "embed", True)}

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


def ragmeter(*args: str, timeout: float = 240.0) -> subprocess.CompletedProcess:
    """``python -m ragmeter ARGS`` (the installed package, or the one PYTHONPATH names)."""
    return subprocess.run([sys.executable, "-m", "ragmeter", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def write_cases(path: Path, cases: List[dict]) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return path
