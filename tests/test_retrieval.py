"""ragmeter.score / sweep and the score, sweep and demo commands."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import ragmeter
from ragmeter.retrieval import CASE_COLUMNS

EX = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"  # the bundled example
GOLDEN = [
    {"id": "fact-1", "question": "q1", "expectedFileNames": ["a.md"], "expectedEvidence": ["大模型"], "referenceAnswer": "x"},
    {"id": "fact-2", "question": "q2", "expectedFileNames": ["b.md"], "expectedEvidence": [], "referenceAnswer": "y"},
    {"id": "noanswer-1", "question": "q3", "expectedFileNames": [], "expectedEvidence": [], "referenceAnswer": "none"},
    {"id": "multi-1", "question": "q4", "expected_files": ["a.md", "b.md"], "expected_evidence": ["ＡＢＣ"], "reference_answer": "z"},
]
RUN = [
    {"id": "fact-1", "retrieved": [
        {"file": "b.md", "chunk_id": "b#0", "text": "大模型 in the wrong file", "score": 0.9},
        {"file": "A.md", "chunk_id": "a#3", "text": "我们的⼤模\n型很好", "score": 0.5},
    ], "answer": "x", "retrieval_mode": "hybrid"},
    {"id": "noanswer-1", "retrieved": [{"file": "a.md", "chunk_id": "a#0", "text": "t", "score": 0.1}], "answer": "n/a",
     "retrieval_mode": "hybrid"},
    {"id": "multi-1", "retrieved": [{"file": "a.md", "chunk_id": "a#1", "text": "abc here", "score": 0.3},
                                    {"file": "c.md", "chunk_id": "c#1", "text": "abc", "score": 0.2}],
     "answer": "z", "retrieval_mode": "bm25"},
]


def test_case_columns_and_definitions() -> None:
    r = ragmeter.score(GOLDEN, RUN, k=5)
    assert r.cases.columns[: len(CASE_COLUMNS)] == CASE_COLUMNS
    c = {row["id"]: row for row in r.cases.to_dicts()}
    # Kangxi radical + line break inside the word still match; the wrong file does not count.
    assert c["fact-1"]["hit"] is True and c["fact-1"]["first_relevant_rank"] == 2
    assert c["fact-1"]["reciprocal_rank"] == 0.5 and c["fact-1"]["precision"] == 0.5
    # Missing from the run: an empty retrieval, a miss, never skipped.
    assert c["fact-2"]["empty_retrieval"] is True and c["fact-2"]["hit"] is False and c["fact-2"]["n_retrieved"] == 0
    # Unlabelled: nulls, not zeros.
    assert c["noanswer-1"]["labeled"] is False
    assert all(c["noanswer-1"][m] is None for m in ("hit", "reciprocal_rank", "average_precision", "ndcg", "file_hit"))
    # Two expected files, one retrieved: file hit but not all files hit.
    assert c["multi-1"]["file_hit"] is True and c["multi-1"]["all_files_hit"] is False
    # The full hit is defined for multi-file cases only.
    assert c["fact-1"]["file_hit"] is True and c["fact-1"]["all_files_hit"] is None
    overall = r.summary["overall"]
    assert overall["hit_rate"] == {"value": 2 / 3, "n_scored": 3, "n_total": 4}
    assert overall["all_files_hit_rate"]["n_total"] == 1
    assert any("missing from the run" in w and "fact-2" in w for w in r.warnings)
    assert any("main mode 'hybrid'" in w and "multi-1 (bm25)" in w for w in r.warnings)
    assert any("one case = 25.00 points" in w for w in r.warnings)


def test_bundled_example_findings() -> None:
    r = ragmeter.score(EX / "golden.jsonl", EX / "run.jsonl", k=5)
    o = r.summary["overall"]
    assert o["hit_rate"]["n_total"] == r.cases.height
    # The file-level view is kinder than the chunk-level one: the gap is a finding.
    assert o["file_hit_rate"]["value"] > o["hit_rate"]["value"]
    assert r.summary["unfound_evidence"] and any("1.5-2" in u["phrase"] for u in r.summary["unfound_evidence"])
    assert r.summary["missing_from_run"]
    assert r.by_category.filter(pl.col("category") == "noanswer")["hit_rate_n_scored"][0] == 0


def test_sweep_equals_python_reference_on_chunks() -> None:
    thresholds = [0.0, 0.1, 0.2, 0.5]
    r = ragmeter.score(EX / "golden.jsonl", EX / "run.jsonl", k=5)
    table = ragmeter.sweep(EX / "golden.jsonl", EX / "run.jsonl", thresholds, k=5)
    labeled = dict(r.cases.select("id", "labeled").iter_rows())
    chunks = r.chunks.sort("id", "rank")
    for t in thresholds:
        hits, rrs = [], []
        for case_id, is_labeled in labeled.items():
            if not is_labeled:
                continue
            kept = [c for c in chunks.filter(pl.col("id") == case_id).iter_rows(named=True)
                    if c["score"] is None or c["score"] >= t][:5]
            first = next((i for i, c in enumerate(kept, 1) if c["relevant"]), 0)
            hits.append(1.0 if first else 0.0)
            rrs.append(1.0 / first if first else 0.0)
        row = table.filter((pl.col("threshold") == t) & (pl.col("category") == "ALL")).row(0, named=True)
        assert row["hit_rate"] == pytest.approx(sum(hits) / len(hits))
        assert row["mrr"] == pytest.approx(sum(rrs) / len(rrs))
        assert row["n_scored"] == len(hits) and row["n_total"] == len(labeled)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmeter", *args], capture_output=True, text=True, cwd=cwd)


def test_score_cli_writes_outputs(tmp_path: Path) -> None:
    proc = cli("score", "--golden", str(EX / "golden.jsonl"), "--run", str(EX / "run.jsonl"), "--out", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Hit@5" in proc.stdout and "warning" in proc.stdout
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["k"] == 5 and summary["overall"]["hit_rate"]["n_total"] == 51
    assert pl.read_parquet(tmp_path / "out" / "cases.parquet").height == 51
    proc = cli("sweep", "--golden", str(EX / "golden.jsonl"), "--run", str(EX / "run.jsonl"), "--thresholds", "0,0.2", "--json",
               cwd=tmp_path)
    rows = json.loads(proc.stdout)
    assert {r["threshold"] for r in rows} == {0.0, 0.2}


def test_bad_input_reports_every_line_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "g.jsonl").write_text(
        '{"id": "a-1", "question": "q", "expectedFileNames": "x.md"}\n'
        "{not json\n"
        '{"question": "no id"}\n'
        '{"id": "a-1", "question": "dup"}\n', encoding="utf-8")
    (tmp_path / "r.jsonl").write_text('{"id": "a-1", "retrieved": []}\n', encoding="utf-8")
    proc = cli("score", "--golden", "g.jsonl", "--run", "r.jsonl", "--out", "out", cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    for line in ("g.jsonl:1", "g.jsonl:2", "g.jsonl:3", "g.jsonl:4"):
        assert line in proc.stderr
    assert not (tmp_path / "out").exists()
    proc = cli("sweep", "--golden", "g.jsonl", "--run", "r.jsonl", "--thresholds", "a,b", cwd=tmp_path)
    assert proc.returncode == 2 and "--thresholds" in proc.stderr


def test_run_ids_absent_from_golden_are_errors(tmp_path: Path) -> None:
    # labelled: a golden set without a single label is refused before the run is read (test_score_e2e)
    (tmp_path / "g.jsonl").write_text('{"id": "a-1", "question": "q", "expectedEvidence": ["x"]}\n', encoding="utf-8")
    (tmp_path / "r.jsonl").write_text('{"id": "a-1", "retrieved": []}\n{"id": "zz", "retrieved": []}\n', encoding="utf-8")
    proc = cli("score", "--golden", "g.jsonl", "--run", "r.jsonl", cwd=tmp_path)
    assert proc.returncode == 2 and "r.jsonl:2" in proc.stderr and "zz" in proc.stderr


def test_demo_runs_offline(tmp_path: Path) -> None:
    proc = cli("demo", "--out", "demo", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "demo" / "summary.json").exists() and (tmp_path / "demo" / "sweep.parquet").exists()


def test_an_output_folder_that_cannot_be_made_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    proc = cli("demo", "--out", "file/demo", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr == "ragmeter: error: --out file/demo: file is a file, not a folder\n"


def test_sweep_aggregates_equal_grouped_per_case_rows() -> None:
    """The vectorised sweep table equals grouping the per-case rows (the reference path)."""
    import numpy as np
    from polars.testing import assert_frame_equal

    from ragmeter import _core
    from ragmeter.retrieval import _flat_chunk_field, _prepared_match, _sweep_frames, _sweep_prepared, _sweep_table

    prepared = _prepared_match(EX / "golden.jsonl", EX / "run.jsonl")
    scores = _flat_chunk_field(prepared.joined, "score").cast(pl.Float64).fill_null(float("nan")).to_numpy()
    labeled = prepared.match.labeled.astype(bool)
    for thresholds in ([0.0, 0.1, 0.2], [float(t) for t in np.linspace(0, 1, 23)], [0.5], [0.3, 0.1]):
        res = _core.threshold_sweep(prepared.match.chunk_offsets, prepared.match.relevant.astype(np.float64), scores, thresholds, 5)
        fast = _sweep_table(thresholds, prepared.joined["category"], labeled, res)
        assert_frame_equal(fast, _sweep_frames(thresholds, prepared.joined["category"], labeled, res))
        assert_frame_equal(fast, ragmeter.sweep(EX / "golden.jsonl", EX / "run.jsonl", thresholds, k=5))
        # every case a category of its own (ids without a "-" and no category field): as many groups as cases
        own = prepared.joined["id"]
        assert_frame_equal(_sweep_table(thresholds, own, labeled, res), _sweep_frames(thresholds, own, labeled, res))
    # A threshold given twice would count every case twice in its row: refused, as NaN is.
    from ragmeter.errors import InputError

    with pytest.raises(InputError, match="0.2 given more than once"):
        _sweep_prepared(prepared, [0.2, 0.1, 0.2], 5)
    with pytest.raises(InputError, match="NaN is not a threshold"):
        ragmeter.sweep(EX / "golden.jsonl", EX / "run.jsonl", [0.1, float("nan")], k=5)
    # infinite thresholds are thresholds: -inf keeps every scored chunk, inf none
    table = _sweep_prepared(prepared, [float("-inf"), 0.0, float("inf")], 5).filter(pl.col("category") == "ALL")
    assert table["n_total"].to_list() == [prepared.joined.height] * 3
    assert table["hit_rate"][0] >= table["hit_rate"][1] >= table["hit_rate"][2]


@pytest.mark.parametrize("options, message", [
    (["--thresholds", "nan"], "--thresholds: NaN is not a threshold"),
    (["--thresholds", "0.5,0.1,0.5"], "--thresholds: 0.5 given more than once"),
    (["--k", "0"], "k must be a positive integer, got 0"),
    (["--k", "-1"], "k must be a positive integer, got -1"),
], ids=["nan", "repeated", "k0", "k-1"])
@pytest.mark.parametrize("command", ["sweep", "eval"])
def test_bad_sweep_options_exit_2_before_any_work(tmp_path: Path, command: str, options: list, message: str) -> None:
    args = ["--golden", str(EX / "golden.jsonl"), "--run", str(EX / "run.jsonl")]
    if command == "eval":
        args += ["--out", "out"] + (options if options[0] == "--k" else ["--thresholds"] + options[1:])
    else:
        args += ["--out", "sweep.csv"] + options
    proc = cli(command, *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and message in proc.stderr
    assert proc.stderr.count("\n") == 1  # one line
    assert not (tmp_path / "out").exists() and not (tmp_path / "sweep.csv").exists()


def test_unfound_evidence_from_the_run_wide_match_equals_a_second_search() -> None:
    from ragmeter.retrieval import _prepared_match, _unfound_evidence

    for golden, run in ((EX / "golden.jsonl", EX / "run.jsonl"), (GOLDEN, RUN)):
        prepared = _prepared_match(golden, run, run_wide=True)
        assert prepared.match.phrase_in_run is not None
        one_pass = _unfound_evidence(prepared.joined, prepared.match)
        assert one_pass == _unfound_evidence(prepared.joined)
    r = ragmeter.score(GOLDEN, RUN)
    # 大模型 (fact-1) is in a chunk, ＡＢＣ (multi-1) too ("abc here"): nothing unfound.
    assert r.summary["unfound_evidence"] == []
