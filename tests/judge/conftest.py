from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fakeserver import FakeServer  # noqa: E402

from ragmeter.judge import RetryPolicy  # noqa: E402

API_KEY = "sk-test-RAGMETER-SECRET-0123456789abcdef"

#: back-off in milliseconds so the suite stays fast
FAST_RETRY = RetryPolicy(max_attempts=5, base_delay=0.01, max_delay=0.05, max_retry_after=2.0)


@pytest.fixture()
def api_key(monkeypatch):
    monkeypatch.setenv("RAGMETER_API_KEY", API_KEY)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return API_KEY


@pytest.fixture()
def server(api_key):
    s = FakeServer(api_key=api_key, timeout_sleep=1.0)
    s.start()
    yield s
    s.stop()


@pytest.fixture()
def fast_retry():
    return FAST_RETRY
