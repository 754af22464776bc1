from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def conformance_dir() -> Path:
    env = os.environ.get("RAGMETER_CONFORMANCE_DIR")
    return Path(env) if env else REPO.parent / "shared" / "conformance" / "trec_eval"


@pytest.fixture(scope="session")
def conformance() -> Path:
    d = conformance_dir()
    if not (d / "qrels.test").exists():
        # In CI the suite must run: a missing copy is a failure, not a skip.
        if os.environ.get("CI"):
            pytest.fail(f"trec_eval conformance data not found at {d}")
        pytest.skip(f"trec_eval conformance data not found at {d}")
    return d
