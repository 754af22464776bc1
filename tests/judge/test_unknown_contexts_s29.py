"""Faithfulness of an answer whose contexts the run does not give. A case with no ``contexts`` and no ``retrieved``
list (``"retrieved": null``, or a ``judge --cases`` record without either) was judged against no context at all:
every statement 'unsupported', faithfulness 0.0, as if the answer had been checked and found invented. It is now
skipped (missing input, counted in n_total, never averaged); an explicit empty list (``"retrieved": []``, a
retriever that found nothing) still scores the answer's claims as unsupported."""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl

import ragmeter
from ragmeter.judge import JudgeConfig, run_sync
from ragmeter.judge.metrics import Case

EX = Path(__file__).resolve().parents[2] / "python" / "ragmeter" / "_example"


def _config(server, tmp_path, fast_retry, metrics=("faithfulness",)):
    return JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=list(metrics),
                       cache=tmp_path / "c.sqlite", retry=fast_retry, progress=False)


def test_a_record_without_contexts_is_not_judged_unfaithful(tmp_path, server, fast_retry):
    unknown = {"id": "u", "question": "Which database?", "answer": "PostgreSQL 15 runs on three nodes."}
    empty = {**unknown, "id": "e", "contexts": []}
    res = run_sync([unknown, empty], _config(server, tmp_path, fast_retry))
    rows = {r["id"]: r for r in res.rows}
    assert rows["u"]["status"] == "skipped" and rows["u"]["score"] is None
    assert "no contexts" in rows["u"]["error"]
    assert rows["e"]["status"] == "ok" and rows["e"]["score"] == 0.0  # nothing retrieved: nothing supports it


def test_case_from_record_keeps_contexts_unknown_apart_from_empty():
    assert Case.from_record({"id": "a", "question": "q"}).contexts_given is False
    assert Case.from_record({"id": "a", "question": "q", "retrieved": None}).contexts_given is False
    assert Case.from_record({"id": "a", "question": "q", "retrieved": []}).contexts_given is True
    assert Case.from_record({"id": "a", "question": "q", "contexts": ["x"]}).contexts_given is True


def test_eval_skips_faithfulness_of_a_case_whose_retrieved_is_null(tmp_path, server, fast_retry):
    records = [json.loads(line) for line in (EX / "run.jsonl").read_text(encoding="utf-8").splitlines()
               if line.strip() and not line.startswith(("#", "//"))]
    nulled = records[0]["id"]
    records[0]["retrieved"] = None
    run = tmp_path / "run.jsonl"
    run.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    result = ragmeter.evaluate(EX / "golden.jsonl", run, judge=_config(server, tmp_path, fast_retry))
    judged = result.judge.filter((pl.col("id") == nulled) & (pl.col("metric") == "faithfulness"))
    assert judged["status"].to_list() == ["skipped"]
    assert judged["score"].to_list() == [None]
