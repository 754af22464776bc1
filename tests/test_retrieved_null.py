"""A run record whose ``retrieved`` is null gives no chunk list for its case. ``score`` read it as ``[]`` without a
word: the case was a scored miss flagged only as an empty retrieval, and a run with no chunk list at all (an
answer-only run) scored 0% on every metric, exit 0, with a warning blaming the golden set's phrases. Now each such
case is flagged (``retrieved_null`` in cases.parquet) and named in a warning, still scored as the empty retrieval
it is read as (as a case missing from the run is); ``score`` and ``sweep`` refuse a run without a single chunk
list (nothing to measure, exit 2, nothing written)."""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import ragmeter
from ragmeter.cli import main

EX = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"
GOLDEN = EX / "golden.jsonl"


def _example_run() -> list:
    return [json.loads(line) for line in (EX / "run.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith(("#", "//"))]


def _write(records: list, path: Path) -> Path:
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    else:
        pl.DataFrame(records, infer_schema_length=None).write_parquet(path)
    return path


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_cases_whose_retrieved_is_null_are_flagged_and_named(tmp_path, fmt):
    records = _example_run()
    nulled = [records[0]["id"], records[4]["id"]]
    for rec in records:
        if rec["id"] in nulled:
            rec["retrieved"] = None
    result = ragmeter.score(GOLDEN, _write(records, tmp_path / f"run.{fmt}"))
    flagged = result.cases.filter(pl.col("retrieved_null"))["id"].to_list()
    assert sorted(flagged) == sorted(nulled)
    # a case missing from the run is not one: the run has no record for it at all
    assert result.cases.filter(pl.col("missing_from_run"))["retrieved_null"].to_list() == [False]
    warning = next(w for w in result.summary["warnings"] if w["code"] == "retrieved_null")
    assert warning["count"] == 2 and sorted(warning["cases"]) == sorted(nulled)
    # read as empty retrievals, as before: counted in n_total, never a hit
    cases = result.cases.filter(pl.col("id").is_in(nulled))
    assert cases["empty_retrieval"].all() and not cases["hit"].fill_null(False).any()
    assert result.summary["overall"]["hit_rate"]["n_total"] == result.cases.height


def test_a_run_with_lists_everywhere_has_no_such_warning():
    result = ragmeter.score(GOLDEN, EX / "run.jsonl")
    assert not result.cases["retrieved_null"].any()
    assert "retrieved_null" not in {w["code"] for w in result.summary["warnings"]}


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_the_api_says_when_no_case_gives_a_chunk_list(tmp_path, fmt):
    records = [{**rec, "retrieved": None} for rec in _example_run()]
    result = ragmeter.score(GOLDEN, _write(records, tmp_path / f"run.{fmt}"))
    codes = [w["code"] for w in result.summary["warnings"]]
    assert "retrieved_null" in codes
    warning = next(w for w in result.summary["warnings"] if w["code"] == "retrieved_null")
    assert "every case" in warning["message"]
    # the phrases are not 'never found' for want of labels: nothing was searched
    assert "evidence_never_found" not in codes


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
@pytest.mark.parametrize("command", ["score", "sweep"])
def test_score_and_sweep_refuse_a_run_without_a_single_chunk_list(tmp_path, fmt, command, capsys):
    records = [{**rec, "retrieved": None} for rec in _example_run()]
    run = _write(records, tmp_path / f"run.{fmt}")
    out = tmp_path / "out"
    args = [command, "--golden", str(GOLDEN), "--run", str(run)]
    args += ["--out", str(out)] if command == "score" else ["--out", str(out / "sweep.parquet")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "'retrieved' is null" in err and str(run) in err
    assert "Traceback" not in err
    assert not out.exists()


def test_batches_reduced_name_the_same_cases_as_the_whole_run():
    from ragmeter.batch import reduce_batches

    records = _example_run()
    nulled = [records[2]["id"], records[30]["id"]]
    for rec in records:
        if rec["id"] in nulled:
            rec["retrieved"] = None
    whole = ragmeter.score(GOLDEN, records)
    batches = [pl.DataFrame(records[:25], infer_schema_length=None), pl.DataFrame(records[25:], infer_schema_length=None)]
    reduced = reduce_batches([ragmeter.score_batch(b, GOLDEN) for b in batches], GOLDEN)
    expected = next(w for w in whole.summary["warnings"] if w["code"] == "retrieved_null")
    assert next(w for w in reduced["warnings"] if w["code"] == "retrieved_null") == expected
    assert sorted(reduced["cases"].filter(pl.col("retrieved_null"))["id"].to_list()) == sorted(nulled)


def test_cases_without_a_retrieval_mode_are_counted_under_none_in_parentheses():
    # summary.json wrote them under "None" (Python's name for null; a mode may be called that); the terminal,
    # report.html and compare call them '(none)'
    records = [{k: v for k, v in rec.items() if k != "retrieval_mode"} for rec in _example_run()]
    result = ragmeter.score(GOLDEN, records)
    assert result.summary["retrieval_modes"] == {"(none)": result.cases.height}  # the missing case has none too



def test_a_case_whose_retrieved_is_null_is_not_diagnosed_as_a_retrieval_miss():
    # it was RETRIEVAL_MISS ('fix chunking / retrieval, not the prompt') for a retrieval nobody saw
    from ragmeter.diagnosis import DIAGNOSES, DIAGNOSIS_HINTS, diagnose
    from ragmeter.report.html import DIAGNOSIS_COLORS

    records = _example_run()
    nulled = records[0]["id"]
    records[0]["retrieved"] = None
    cases = diagnose(ragmeter.score(GOLDEN, records).cases)
    assert cases.filter(pl.col("id") == nulled)["diagnosis"].to_list() == ["RETRIEVAL_UNKNOWN"]
    assert "RETRIEVAL_UNKNOWN" in DIAGNOSES and "RETRIEVAL_UNKNOWN" in DIAGNOSIS_HINTS
    assert "RETRIEVAL_UNKNOWN" in DIAGNOSIS_COLORS
    # every other case is diagnosed as before
    before = diagnose(ragmeter.score(GOLDEN, EX / "run.jsonl").cases)
    assert cases.filter(pl.col("id") != nulled)["diagnosis"].to_list() == \
        before.filter(pl.col("id") != nulled)["diagnosis"].to_list()


def _unlabelled_golden(tmp_path: Path) -> Path:
    rows = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith(("#", "//"))]
    for row in rows:
        for key in ("expectedFileNames", "expected_files", "expectedEvidence", "expected_evidence"):
            row.pop(key, None)
    path = tmp_path / "golden.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("what", ["unlabelled golden set", "run null in every case"])
def test_eval_without_a_judge_refuses_what_it_cannot_measure(tmp_path, what, capsys):
    # eval wrote a folder of 'not measured' and '-' everywhere and exited 0, as if the run had been measured
    golden, run = GOLDEN, EX / "run.jsonl"
    if what == "unlabelled golden set":
        golden = _unlabelled_golden(tmp_path)
    else:
        run = _write([{**rec, "retrieved": None} for rec in _example_run()], tmp_path / "run.jsonl")
    out = tmp_path / "out"
    assert main(["eval", "--golden", str(golden), "--run", str(run), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--base-url" in err and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_run_without_any_chunk_list_scores_no_retrieval_metric(tmp_path, fmt):
    # an answer-only run (eval with a judge takes it) showed Hit 0.0% over 45 cases: a rate of what was never seen
    records = [{**rec, "retrieved": None} for rec in _example_run()]
    result = ragmeter.score(GOLDEN, _write(records, tmp_path / f"run.{fmt}"))
    overall = result.summary["overall"]
    for name in ("hit_rate", "mrr", "ndcg", "evidence_recall", "file_hit_rate"):
        assert overall[name]["value"] is None and overall[name]["n_scored"] == 0, name
        assert overall[name]["n_total"] > 0, name
    assert result.cases["hit"].null_count() == result.cases.height
    assert not result.cases["empty_retrieval"].any()  # nothing was retrieved empty: nothing was seen


def test_batches_reduced_score_no_retrieval_metric_when_no_batch_gives_a_chunk_list():
    from ragmeter.batch import reduce_batches

    records = [{**rec, "retrieved": None} for rec in _example_run()]
    batches = [pl.DataFrame(records[:25], infer_schema_length=None), pl.DataFrame(records[25:], infer_schema_length=None)]
    reduced = reduce_batches([ragmeter.score_batch(b, GOLDEN) for b in batches], GOLDEN)
    assert reduced["overall"] == ragmeter.score(GOLDEN, records).summary["overall"]
    # one batch without lists in a run that has them elsewhere: its cases are empty retrievals, as a whole run scores
    mixed = _example_run()
    for rec in mixed[:25]:
        rec["retrieved"] = None
    parts = [pl.DataFrame(mixed[:25], infer_schema_length=None), pl.DataFrame(mixed[25:], infer_schema_length=None)]
    again = reduce_batches([ragmeter.score_batch(b, GOLDEN) for b in parts], GOLDEN)
    assert again["overall"] == ragmeter.score(GOLDEN, mixed).summary["overall"]
