"""Review of ragmeter collect (session 28): honest outcomes, the target file and flags as a demanding user meets
them. Loopback HTTP targets (ragserver) and Python callables only."""
from __future__ import annotations

import json

import pytest
from collect_helpers import FAST, GOLDEN, cli, golden_ids, write_target
from ragserver import RagServer, example_records

import ragmeter
from ragmeter.errors import InputError


def test_a_null_retrieved_list_is_a_failed_case_not_a_silent_empty_retrieval(tmp_path):
    """``"retrieved": null`` in a run record (no [response] mapping, or a function's return value) was written as
    ``retrieved: []`` and counted as collected: a system that lost its chunk list scored as one that found
    nothing, exit 0. (A mapped path holding null was already refused as not a list.)"""
    ids = golden_ids()
    records = example_records()
    records[ids[1]] = dict(records[ids[1]], retrieved=None)
    with RagServer(records=records, modes=None) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        result = ragmeter.collect(GOLDEN, target=target, out=tmp_path / "run.jsonl", policy=FAST)
    failed = {r["id"]: r for r in result.records}[ids[1]]
    assert failed["error_kind"] == "bad_response" and "retrieved" in failed["error"], failed
    assert result.incomplete and result.summary["n_failed"] == 1
    with pytest.raises(InputError, match="not a run record: 'retrieved' is null, not a list"):
        ragmeter.collect(GOLDEN, target=lambda case: {"answer": "a", "retrieved": None})


def test_an_empty_retrieval_is_kept_and_counted_in_the_summary(tmp_path):
    """An empty list is the system's answer (nothing found): collected as it is, and counted, so a retriever
    that came back empty for every case is seen at collection time."""
    ids = golden_ids()
    records = example_records()
    for case_id in ids[3:6]:
        records[case_id] = dict(records[case_id], retrieved=[])
    with RagServer(records=records, modes=None) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        proc = cli("collect", "--golden", str(GOLDEN), "--target", "t.toml", "--out", "run.jsonl", "--no-cache",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    empty = [i for i in ids if not records.get(i, {"retrieved": []})["retrieved"]]  # the example has some
    assert set(ids[3:6]) <= set(empty)
    rows = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows if r["retrieved"] == []] == empty and not any("error" in r for r in rows)
    assert f"{len(empty)} empty retrievals" in " ".join(proc.stdout.split()), proc.stdout
    result = ragmeter.collect(GOLDEN, target=lambda case: {"answer": "a", "retrieved": []})
    assert result.summary["n_empty_retrievals"] == len(ids)
