"""Output contracts scripts depend on: every results file reads back with the same columns and the same types
whatever the run was like (one case, every case failed, nothing retrieved, a run file written as JSON Lines or
as Parquet by pyarrow), so that two runs' files concatenate (``pl.concat``, ``pa.concat_tables``), and the JSON
outputs are strict JSON with "not measured" written as null."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ragmeter

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "judge"))
from fakeserver import FakeServer  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from compare_runs import GOLDEN, golden_cases, write_jsonl  # noqa: E402

EX = GOLDEN.parent
RUN = golden_cases(EX / "run.jsonl")


def ragmeter_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmeter", *args], capture_output=True, text=True, cwd=cwd)


def assert_same_arrow_schema_and_concatenable(paths: Dict[str, Path]) -> None:
    """pyarrow reads every file with the same schema, and ``pa.concat_tables`` (which refuses ``string`` beside
    ``large_string``) and ``pl.concat`` take them all."""
    tables = {name: pq.read_table(path) for name, path in paths.items()}
    first_name, first = next(iter(tables.items()))
    for name, table in tables.items():
        assert table.schema.remove_metadata() == first.schema.remove_metadata(), (first_name, name)
    pa.concat_tables(list(tables.values()))
    pl.concat([pl.read_parquet(path) for path in paths.values()], how="vertical")


FAILED_RECORD = {"error": "HTTP 502", "error_kind": "server", "attempts": 3, "answer": None, "retrieved": [],
                 "retrieval_mode": None, "latency_ms": 12.5, "usage": None, "cost": None}

#: runs unlike the bundled one in every way a results file could notice
RUN_SHAPES = {
    "whole": RUN,
    "one case": RUN[:1],
    "nothing retrieved": [dict(r, retrieved=[]) for r in RUN],
    "every case failed in the run": [dict(FAILED_RECORD, id=r["id"]) for r in RUN],
}


def run_files(folder: Path, rows: List[Dict[str, Any]]) -> Dict[str, Path]:
    """``rows`` as JSON Lines and as Parquet from pyarrow (texts in dictionary pages, its default), from pyarrow
    without dictionaries, and from Polars."""
    folder.mkdir(parents=True, exist_ok=True)
    runs = {"jsonl": write_jsonl(folder / "run.jsonl", rows)}
    table = pa.Table.from_pylist(rows)
    runs["pyarrow"] = folder / "run_pyarrow.parquet"
    pq.write_table(table, runs["pyarrow"])
    runs["pyarrow_plain"] = folder / "run_pyarrow_plain.parquet"
    pq.write_table(table, runs["pyarrow_plain"], use_dictionary=False)
    runs["polars"] = folder / "run_polars.parquet"
    pl.DataFrame(rows).write_parquet(runs["polars"])
    return runs


def test_chunks_parquet_has_one_arrow_schema_whatever_the_run_and_its_files_format(tmp_path):
    # chunks.parquet of a run read from a pyarrow-written Parquet file (texts in dictionary pages) stored no
    # Arrow schema and read in pyarrow as `string`; from JSON Lines it read as `large_string`: pa.concat_tables of
    # the two runs' chunk tables failed ("Schema at index 1 was different")
    written: Dict[str, Path] = {}
    for shape, rows in RUN_SHAPES.items():
        folder = tmp_path / shape.replace(" ", "_")
        for name, run in run_files(folder, rows).items():
            out = folder / f"score_{name}"
            done = ragmeter_cli("score", "--golden", str(GOLDEN), "--run", str(run), "--out", str(out), cwd=tmp_path)
            assert done.returncode in (0, 3), done.stderr
            written[f"score {shape} {name}"] = out / "chunks.parquet"
            ragmeter.score(GOLDEN, run).write(folder / f"api_{name}")
            written[f"ragmeter.score {shape} {name}"] = folder / f"api_{name}" / "chunks.parquet"
        out = folder / "eval"
        done = ragmeter_cli("eval", "--golden", str(GOLDEN), "--run", str(folder / "run_pyarrow.parquet"),
                            "--out", str(out), cwd=tmp_path)
        assert done.returncode in (0, 3), done.stderr
        written[f"eval {shape} pyarrow"] = out / "chunks.parquet"
    assert_same_arrow_schema_and_concatenable(written)


@pytest.mark.parametrize("shape", ["nothing retrieved", "every case failed in the run"])
def test_a_pyarrow_parquet_run_of_empty_or_failed_cases_is_scored_as_its_json_lines(tmp_path, shape):
    # pyarrow types a column of [] in every row as list<null> and one of null in every row as null: such a run
    # (every retrieval empty; every case failed when collected, `usage` null) was refused, "column 'retrieved'
    # has type List(Null), expected list of struct{...}" and "column 'usage' has type Null, expected a struct",
    # where the same run as JSON Lines is scored (exit 3 with failed cases)
    runs = run_files(tmp_path, RUN_SHAPES[shape])
    reference = ragmeter.score(GOLDEN, runs["jsonl"])
    for name in ("pyarrow", "pyarrow_plain", "polars"):
        got = ragmeter.score(GOLDEN, runs[name])
        assert got.cases.equals(reference.cases, null_equal=True), name
        assert got.summary == reference.summary, name
        done = ragmeter_cli("score", "--golden", str(GOLDEN), "--run", str(runs[name]), cwd=tmp_path)
        assert done.returncode == (3 if shape.startswith("every case failed") else 0), done.stderr


def key_paths(value: Any, path: str = "") -> set:
    """Every key path of a JSON object (list items under ``[]``)."""
    if isinstance(value, dict):
        return {path} | {p for k, v in value.items() for p in key_paths(v, f"{path}.{k}")}
    if isinstance(value, list):
        return {path} | {p for v in value for p in key_paths(v, f"{path}[]")}
    return {path}


def test_audit_json_resolution_has_the_same_keys_when_no_difference_is_detectable(tmp_path):
    # docs/audit.md: "mde_pp is null, mde_reason says why". mde_reason was written only when mde_pp was null,
    # so a script reading audit["resolution"]["mde_reason"] failed with KeyError on every usable golden set
    golden = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines() if line.startswith("{")]
    resolutions = {}
    for name, rows in (("whole", golden), ("one case", golden[:1])):
        path = write_jsonl(tmp_path / f"{name}.jsonl", rows)
        done = ragmeter_cli("audit", "--golden", str(path), "--json", "--target", "120", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        resolutions[name] = json.loads(done.stdout, parse_constant=_refuse_constant)["resolution"]
        assert resolutions[name] == ragmeter.audit(path, target=120).to_dict()["resolution"]
    whole, one = resolutions["whole"], resolutions["one case"]
    assert one["mde_pp"] is None and "no difference is detectable" in one["mde_reason"]
    assert whole["mde_pp"] is not None and whole["mde_reason"] is None
    assert whole["target"]["mde_reason"] is None and one["target"]["mde_reason"] is None
    assert key_paths(whole) == key_paths(one)


def _refuse_constant(name: str) -> None:
    raise ValueError(f"not strict JSON: {name}")


def judge_args(server: FakeServer) -> List[str]:
    return ["--base-url", server.base_url, "--model", "m", "--no-progress", "--no-cache", "--max-failed", "100%",
            "--retry-base-delay", "0.01", "--retry-max-delay", "0.02"]


@pytest.mark.parametrize("every_call_fails", [False, True])
def test_judge_parquet_of_judge_and_of_eval_have_one_schema(tmp_path, every_call_fails):
    # `ragmeter eval` writes judge.parquet with a `repeat` column (1 without --repeat), `ragmeter judge` wrote
    # the same file without it: pl.concat(how="vertical") of the two ("unable to vstack") and pa.concat_tables
    # failed
    written: Dict[str, Path] = {}
    with FakeServer() as server:
        if every_call_fails:
            server.rules = [(lambda info: True, 400)]
        for shape in ("whole", "one case"):
            run = write_jsonl(tmp_path / f"{shape}.jsonl", RUN_SHAPES[shape])
            golden = GOLDEN if shape == "whole" else write_jsonl(
                tmp_path / "golden_one.jsonl",
                [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines()
                 if line.startswith("{") and json.loads(line)["id"] == RUN[0]["id"]])
            for command in ("judge", "eval"):
                out = tmp_path / f"{command}_{shape.replace(' ', '_')}"
                done = ragmeter_cli(command, "--golden", str(golden), "--run", str(run), "--out", str(out),
                                    *judge_args(server), cwd=tmp_path)
                assert done.returncode == 0, done.stderr
                written[f"{command} {shape}"] = out / "judge.parquet"
    assert pl.read_parquet(written["judge whole"])["repeat"].to_list() == [1] * 255
    assert_same_arrow_schema_and_concatenable(written)


def test_mean_retrieved_of_a_run_without_chunk_lists_is_null_not_zero(tmp_path):
    # A run whose `retrieved` is null in every case gives no chunk list: its retrieval is not scored (every rate
    # null, n_scored 0) and no case came back empty (empty_retrievals 0), yet summary.json said mean_retrieved 0.0,
    # a measurement of what was never seen. Overall and per category, in ragmeter.score, eval (with a judge),
    # and the batch reductions (reduce_batches, combine over partial_sums: ragmeter.ray's)
    from ragmeter.batch import combine, partial_sums, reduce_batches, score_batch

    rows = [dict(r, retrieved=None) for r in RUN]
    run = write_jsonl(tmp_path / "run.jsonl", rows)
    scored = ragmeter.score(GOLDEN, run)
    reduced = reduce_batches([score_batch(pa.Table.from_pylist(rows[:20]), GOLDEN),
                              score_batch(pa.Table.from_pylist(rows[20:]), GOLDEN)], GOLDEN)
    summed = combine([partial_sums(score_batch(pa.Table.from_pylist(rows), GOLDEN))])
    with FakeServer() as server:
        done = ragmeter_cli("eval", "--golden", str(GOLDEN), "--run", str(run), "--out", str(tmp_path / "eval"),
                            *judge_args(server), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / "eval" / "summary.json").read_text(encoding="utf-8"))["retrieval"]
    for summary in (scored.summary, reduced, written):
        assert summary["overall"]["hit_rate"]["n_scored"] == 0 and summary["overall"]["empty_retrievals"] == 0
        assert summary["overall"]["mean_retrieved"] is None
        assert {c["mean_retrieved"] for c in summary["by_category"].values()} == {None}
    assert {group["mean_retrieved"] for group in summed.values()} == {None}
    # a run that gives chunk lists reads a null one as an empty retrieval (README "Formats"): 0 chunks, counted
    mixed = [dict(r, retrieved=None) if i % 2 else r for i, r in enumerate(RUN)]
    got = ragmeter.score(GOLDEN, mixed).summary["overall"]["mean_retrieved"]
    assert got == sum(len(r["retrieved"] or []) for r in mixed) / 51


def test_review_compare_with_a_run_whose_every_judge_call_failed_names_that_run(tmp_path):
    # Every judge call of the second run failed: review compare refused the pair saying "have no case with a
    # verdict from both (not runs of the same cases?)", a wrong guess about runs of the very same cases
    folders = {}
    for name, failing in (("good", False), ("failed", True)):
        with FakeServer() as server:
            if failing:
                server.rules = [(lambda info: True, 400)]
            folders[name] = tmp_path / name
            done = ragmeter_cli("eval", "--golden", str(GOLDEN), "--run", str(EX / "run.jsonl"),
                                "--out", str(folders[name]), *judge_args(server), cwd=tmp_path)
            assert done.returncode == 0, done.stderr
    done = ragmeter_cli("review", "compare", str(folders["good"]), str(folders["failed"]), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "failed" in lines[0] and "no verdict" in lines[0] and "0 of 51" in lines[0], lines[0]
    assert "not runs of the same cases" not in lines[0]
