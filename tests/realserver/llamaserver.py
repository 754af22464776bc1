"""A llama.cpp server process for the tests, and running ``ragmeter`` as a user would."""
from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import List, Optional

#: seconds a server may take to answer GET /v1/models after it was started
START_TIMEOUT = 90.0


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

    def statuses(self, route: str) -> Counter:
        """HTTP status -> how many ``POST /v1/ROUTE`` requests got it so far (uvicorn's access log)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return Counter()
        return Counter(int(m) for m in re.findall(rf'"POST /v1/{re.escape(route)} HTTP/[0-9.]+" (\d{{3}})', text))

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


def ragmeter(*args: str, timeout: float = 240.0) -> subprocess.CompletedProcess:
    """``python -m ragmeter ARGS`` (the installed package, or the one PYTHONPATH names)."""
    return subprocess.run([sys.executable, "-m", "ragmeter", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def write_cases(path: Path, cases: List[dict]) -> Path:
    path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return path
