"""A run file that records cases which failed when it was collected (``collect`` keeps them with ``error`` and
``error_kind``, ``retrieved: []``, ``answer: null``): score and eval say so (``run_error`` per case, a warning, the
``SYSTEM_FAILED`` diagnosis) and exit 3, as ``collect`` and ``eval --target`` do for the same cases."""
from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import ragmeter
from ragmeter.cli import main
from ragmeter.dataset import load_run
from ragmeter.errors import InputError

EX = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"
GOLDEN = EX / "golden.jsonl"


def _example_run() -> list:
    return [json.loads(line) for line in (EX / "run.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith(("#", "//"))]


def _failed_run(tmp_path: Path, fmt: str) -> tuple:
    """The bundled run with its first three cases failed as ``collect`` writes them; (path, failed ids)."""
    records = _example_run()
    failed = {}
    for rec, kind in zip(records[:3], ["server", "timeout", None]):
        rec.update(retrieved=[], answer=None, error=f"the system failed ({kind})", error_kind=kind)
        rec.pop("retrieval_mode", None)
        failed[rec["id"]] = kind or "error"  # a record with a message and no kind
    path = tmp_path / f"run.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    else:
        pl.DataFrame(records).write_parquet(path)
    return path, failed


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_failed_cases_are_named_counted_and_diagnosed(tmp_path, fmt):
    run, failed = _failed_run(tmp_path, fmt)
    result = ragmeter.score(GOLDEN, run)
    got = dict(result.cases.filter(pl.col("run_error").is_not_null()).select("id", "run_error").iter_rows())
    assert got == failed
    assert result.summary["run_errors"] == {"server": 1, "timeout": 1, "error": 1}
    warning = next(w for w in result.summary["warnings"] if w["code"] == "failed_in_run")
    assert warning["count"] == 3 and set(warning["cases"]) == set(failed)
    # still counted, as the empty retrievals they are: never dropped from n, never a hit
    hits = result.cases.filter(pl.col("id").is_in(list(failed)))
    assert hits["empty_retrieval"].all() and not hits["hit"].fill_null(False).any()
    assert result.summary["overall"]["hit_rate"]["n_total"] == result.cases.height


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_score_and_eval_exit_3_and_write_everything(tmp_path, fmt, capsys):
    run, failed = _failed_run(tmp_path, fmt)
    assert main(["score", "--golden", str(GOLDEN), "--run", str(run), "--out", str(tmp_path / "s")]) == 3
    assert "3 case(s) failed when the run was collected" in " ".join(capsys.readouterr().out.split())
    assert (tmp_path / "s" / "cases.parquet").exists()
    assert main(["eval", "--golden", str(GOLDEN), "--run", str(run), "--out", str(tmp_path / "e")]) == 3
    cases = pl.read_parquet(tmp_path / "e" / "cases.parquet")
    diagnosed = dict(cases.filter(pl.col("id").is_in(list(failed))).select("id", "diagnosis").iter_rows())
    assert set(diagnosed.values()) == {"SYSTEM_FAILED"}
    summary = json.loads((tmp_path / "e" / "summary.json").read_text())
    assert summary["retrieval"]["run_errors"] == {"server": 1, "timeout": 1, "error": 1}
    assert "SYSTEM_FAILED" in (tmp_path / "e" / "report.html").read_text()


def test_a_run_without_failures_still_exits_0(tmp_path):
    run = tmp_path / "run.jsonl"
    run.write_text("".join(json.dumps(r) + "\n" for r in _example_run()), encoding="utf-8")
    assert main(["score", "--golden", str(GOLDEN), "--run", str(run)]) == 0
    assert ragmeter.score(GOLDEN, run).summary["run_errors"] == {}


def test_blank_errors_are_no_failure_and_a_non_text_kind_names_its_line(tmp_path):
    records = _example_run()[:2]
    records[0].update(error="  ", error_kind="")
    run = tmp_path / "run.jsonl"
    run.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert load_run(run)["run_error"].to_list() == [None, None]
    records[1]["error_kind"] = 500
    run.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    with pytest.raises(InputError, match=r"run\.jsonl:2: .*error_kind"):
        load_run(run)
    frame = pl.DataFrame({"id": ["a"], "retrieved": [[{"text": "t"}]], "error_kind": [1]})
    frame.write_parquet(tmp_path / "run.parquet")
    with pytest.raises(InputError, match="column 'error_kind' has type"):
        load_run(tmp_path / "run.parquet")


def test_an_error_flag_of_true_or_false_is_read_as_failed_or_not(tmp_path):
    """Home-made runs flag failures with a boolean ``error``: accepted, not refused as a non-string."""
    records = _example_run()[:3]
    for rec, flag in zip(records, [True, False, None]):
        rec["error"] = flag
    run = tmp_path / "run.jsonl"
    run.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert load_run(run)["run_error"].to_list() == ["error", None, None]
    pl.DataFrame(records).write_parquet(tmp_path / "run.parquet")
    assert load_run(tmp_path / "run.parquet")["run_error"].to_list() == ["error", None, None]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_sweep_exits_3_and_names_the_failed_cases_also_with_json(tmp_path, fmt, capsys):
    """A failed case is an empty retrieval at every threshold: the sweep measured the run, not the system on
    every question, as score says with the same 3. ``--json`` keeps stdout for the rows alone and says it on
    stderr."""
    run, failed = _failed_run(tmp_path, fmt)
    args = ["sweep", "--golden", str(GOLDEN), "--run", str(run), "--thresholds", "0,0.5"]
    assert main(args) == 3
    assert "3 case(s) failed when the run was collected" in " ".join(capsys.readouterr().out.split())
    assert main([*args, "--json"]) == 3
    captured = capsys.readouterr()
    rows = json.loads(captured.out)  # stdout is the rows alone
    assert sorted({r["threshold"] for r in rows}) == [0.0, 0.5]
    assert "3 case(s) failed when the run was collected" in " ".join(captured.err.split())
    assert any(i in captured.err for i in failed)


def test_sweep_of_a_run_without_failures_exits_0_and_json_stderr_is_quiet(tmp_path, capsys):
    run = tmp_path / "run.jsonl"
    run.write_text("".join(json.dumps(r) + "\n" for r in _example_run()), encoding="utf-8")
    assert main(["sweep", "--golden", str(GOLDEN), "--run", str(run), "--json"]) == 0
    assert "failed when the run was collected" not in capsys.readouterr().err
