"""Review session 21 of the judge: defects found scripting against ``ragmeter judge`` / ``eval``, each with the
test that failed before its fix."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ragmeter.judge import JudgeCallError, JudgeConfig, run_sync

from test_client import chat  # noqa: E402 (tests/judge is on sys.path: conftest.py)


# -- a model's refusal is a failed row at once, never a budget doubling ---------------------------------------
@pytest.mark.parametrize("reply", [
    {"content": None, "refusal": "I'm sorry, I can't help with that."},  # OpenAI's structured refusal
    {"content": "", "finish_reason": "content_filter"},                   # cut by the endpoint's filter
])
def test_a_refusal_fails_the_call_once_without_doubling_the_budget(server, fast_retry, reply):
    server.rules = [(lambda info: True, reply)]
    with pytest.raises(JudgeCallError) as ei:
        chat(server, policy=fast_retry, max_tokens=2000, cap=8000)
    # a larger output budget cannot change a refusal: before, 2000, 4000 and 8000 were each sent (and paid)
    assert [r["max_tokens"] for r in server.log] == [2000]
    err = ei.value
    assert err.kind == "refused" and ("refused" in str(err) or "content filter" in str(err))
    if reply.get("refusal"):
        assert "I'm sorry" in str(err) and err.raw == reply["refusal"]
    assert [a["outcome"] for a in err.attempts] == ["refused"]


def test_a_refused_row_is_counted_as_failed_with_its_kind(server, fast_retry, tmp_path):
    server.rules = [(lambda info: True, {"content": None, "refusal": "I can't judge this."})]
    res = run_sync([{"id": "c1", "question": "q?", "reference_answer": "a", "answer": "a"}],
                   JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                               cache=tmp_path / "c.sqlite", retry=fast_retry))
    m = res.summary["metrics"]["correctness"]
    assert (m["n_scored"], m["n_total"], m["n_failed"]) == (0, 1, 1)
    assert list(m["failures"]) == ["refused"] and "I can't judge this." in m["failures"]["refused"]["example"]
    assert res.summary["incomplete"]["failed"] == 1 and server.requests == 1
