"""``ragmeter eval`` on the bundled example, as a subprocess (shared by the CLI tests)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

EXAMPLES = Path(__file__).resolve().parents[2] / "python" / "ragmeter" / "_example"  # the bundled example


def eval_cli(*args: str, server: Optional[Any] = None) -> subprocess.CompletedProcess:
    """Run ``ragmeter eval`` on the example's golden set and run; with ``server``, judged by that local fake
    endpoint (fast retries, no progress bar)."""
    cmd = [sys.executable, "-m", "ragmeter", "eval", "--golden", str(EXAMPLES / "golden.jsonl"),
           "--run", str(EXAMPLES / "run.jsonl")]
    if server is not None:
        cmd += ["--base-url", server.base_url, "--model", "gpt-4o-mini", "--no-progress",
                "--retry-base-delay", "0.01", "--retry-max-delay", "0.05"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=300)
