"""After a complete run, a dry run on the same cache must say that nothing is left to send: it counted every
second step (faithfulness verdicts, relevancy grades) as a call, 99 calls on the example for a rerun that sent 0."""
from __future__ import annotations

from ragmeter.judge import JudgeConfig, run_sync


def _cases():
    return [{"id": f"c{i}", "question": f"What colour is product {i}?", "reference_answer": f"Product {i} is blue",
             "answer": f"Product {i} is blue. It ships in a box.", "contexts": [f"product {i} is blue", "noise"]}
            for i in range(6)]


def test_a_dry_run_after_a_complete_run_counts_no_call(server, api_key, tmp_path, fast_retry):
    cfg = dict(base_url=server.base_url, model="gpt-4o-mini", metrics=["faithfulness", "answer_relevancy"],
               cache=tmp_path / "c.sqlite", retry=fast_retry)
    first = run_sync(_cases(), JudgeConfig(**cfg))
    assert {r["status"] for r in first.rows} == {"ok"}
    sent = server.requests
    estimate = run_sync(_cases(), JudgeConfig(**cfg, dry_run=True)).estimate
    assert server.requests == sent  # a dry run sends nothing
    assert estimate["calls"] == 0, estimate
    assert estimate["cached_calls"] == sent
    again = run_sync(_cases(), JudgeConfig(**cfg))  # and a real rerun indeed sends nothing
    assert server.requests == sent and {r["status"] for r in again.rows} == {"ok"}


def test_a_dry_run_before_any_run_still_counts_every_step(server, api_key, tmp_path, fast_retry):
    cfg = dict(base_url=server.base_url, model="gpt-4o-mini", metrics=["faithfulness", "answer_relevancy"],
               cache=tmp_path / "c.sqlite", retry=fast_retry)
    estimate = run_sync(_cases(), JudgeConfig(**cfg, dry_run=True)).estimate
    run_sync(_cases(), JudgeConfig(**cfg))
    assert estimate["calls"] == server.requests == 24 and estimate["cached_calls"] == 0
