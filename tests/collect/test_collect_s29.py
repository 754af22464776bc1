"""``collect``'s summary on the terminal: its lines wrap under themselves (a hanging indent) at the terminal's width,
as every other command's prose does; rich wrapped them at column 0, so a long failure example read as a new line."""
from __future__ import annotations

import io

from rich.console import Console

from ragmeter.cli.collect import print_summary


def _summary() -> dict:
    long_example = "HTTP 500 from http://127.0.0.1:9/ask: " + "upstream model server refused the request " * 3
    return {"n_collected": 49, "n_records": 51, "n_failed": 2, "n_cached": 0, "n_requests": 53, "n_empty_retried": 0,
            "latency_ms": {"p50": 120.0, "p95": 340.0, "n": 49}, "retrieval_modes": {"hybrid": 47, "bm25": 2},
            "n_empty_retrievals": 3, "failures": {"server": {"count": 2, "first_case": "fact-01", "example": long_example}},
            "warnings": []}


def test_the_summary_wraps_under_each_line_within_80_columns():
    out = io.StringIO()
    print_summary(_summary(), Console(file=out, width=80, force_terminal=False, color_system=None))
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80
    assert all(line == line.rstrip() for line in lines)
    starts = ("collected ", "latency ", "3 empty retrievals", "failed (server)")
    heads = [line for line in lines if not line.startswith(" ")]
    assert all(h.startswith(starts) for h in heads), heads
    assert len(lines) > len(heads)  # the long ones went on, indented under themselves


def _answers_three_then_raises():
    calls = []

    def ask(case):
        calls.append(case["id"])
        if len(calls) <= 3:
            return {"answer": "a", "retrieved": [{"file": "a.md", "text": "t"}]}
        raise RuntimeError("RAG_API_KEY is not set")
    return ask


def test_the_stop_after_five_same_errors_counts_only_the_answers_as_cached(tmp_path):
    # it said 'stopped after 7 of 51 cases (their replies are cached: a rerun resumes)': the five failures were
    # counted as cached replies, and a failed case is never cached
    import pytest

    import ragmeter
    from ragmeter.errors import InputError
    from collect_helpers import GOLDEN

    with pytest.raises(InputError) as caught:
        ragmeter.collect(GOLDEN, target=_answers_three_then_raises(), concurrency=1, cache=tmp_path / "c.sqlite")
    message = str(caught.value)
    assert "3 answered" in message and "cached" in message
    assert "8 of" not in message

    with pytest.raises(InputError) as caught:
        ragmeter.collect(GOLDEN, target=_answers_three_then_raises(), concurrency=1)
    message = str(caught.value)
    assert "cached" not in message and "keeps" not in message  # nothing was kept: no cache was used
    assert "3 answered" in message


def test_the_run_file_goes_into_a_folder_made_for_it_as_other_outputs_do(tmp_path):
    # collect refused '--out new/run.jsonl' ('No such file or directory') where score, sweep and compare make the
    # folder
    import ragmeter
    from collect_helpers import GOLDEN

    out = tmp_path / "new" / "deeper" / "run.jsonl"
    result = ragmeter.collect(GOLDEN, target=lambda case: {"answer": "a", "retrieved": [{"text": "t"}]}, out=out)
    assert out.is_file() and len(out.read_text(encoding="utf-8").splitlines()) == len(result.records)
