"""ragmeter.evaluate: the in-memory evaluation gives the numbers `ragmeter eval` writes."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import ragmeter
from ragmeter.api import EvalResult
from ragmeter.compare import CompareRefused
from ragmeter.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "python" / "ragmeter" / "_example"
GOLDEN, RUN = EX / "golden.jsonl", EX / "run.jsonl"
sys.path.insert(0, str(ROOT / "tests" / "judge"))
from fakeserver import FakeServer  # noqa: E402

KEY = "sk-test-api-0123456789"


def cli_eval(out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ragmeter", "eval", "--golden", str(GOLDEN), "--run", str(RUN), "--out", str(out)]
    return subprocess.run(cmd + list(extra), capture_output=True, text=True, timeout=300)


def test_exported_with_types():
    assert ragmeter.evaluate is ragmeter.evaluation.evaluate and ragmeter.EvalResult is EvalResult
    assert {"evaluate", "EvalResult", "testing"} <= set(dir(ragmeter)) and "evaluate" in ragmeter.__all__
    init = (ROOT / "python" / "ragmeter" / "__init__.py").read_text()
    assert "from ragmeter.evaluation import evaluate as evaluate" in init  # what type checkers see


@pytest.fixture(scope="module")
def example():
    return ragmeter.evaluate(GOLDEN, RUN, k=5)


def test_same_numbers_as_ragmeter_eval_without_a_judge(tmp_path, example):
    proc = cli_eval(tmp_path / "cli", "--no-judge")
    assert proc.returncode == 0, proc.stderr
    written = pl.read_parquet(tmp_path / "cli" / "cases.parquet")
    assert written.columns == example.cases.columns
    assert_frame_equal(written, example.cases)
    assert_frame_equal(pl.read_parquet(tmp_path / "cli" / "chunks.parquet"), example.chunks)
    summary = json.loads((tmp_path / "cli" / "summary.json").read_text())
    assert summary["retrieval"] == json.loads(json.dumps(example.summary["retrieval"]))
    assert summary["cost"] == example.summary["cost"]
    assert example.judge is None and example.summary["judge"] is None


def test_same_numbers_as_ragmeter_eval_with_a_judge(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMETER_API_KEY", KEY)
    with FakeServer(api_key=KEY) as server:
        cache = tmp_path / "cache.sqlite"
        proc = cli_eval(tmp_path / "cli", "--base-url", server.base_url, "--model", "gpt-4o-mini", "--no-progress",
                        "--metrics", "correctness,faithfulness", "--cache", str(cache))
        assert proc.returncode == 0, proc.stderr
        judge = ragmeter.judge.JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", cache=cache,
                                           metrics=["correctness", "faithfulness"])
        result = ragmeter.evaluate(str(GOLDEN), str(RUN), judge=judge)
    written = pl.read_parquet(tmp_path / "cli" / "cases.parquet")
    assert "faithfulness_score" in written.columns
    assert_frame_equal(written, result.cases)
    summary = json.loads((tmp_path / "cli" / "summary.json").read_text())
    assert summary["retrieval"] == json.loads(json.dumps(result.summary["retrieval"]))
    for metric in ("correctness", "faithfulness"):
        mine, theirs = result.summary["judge"]["metrics"][metric], summary["judge"]["metrics"][metric]
        assert {k: mine[k] for k in ("n_scored", "n_total", "n_failed", "mean")} == \
               {k: theirs[k] for k in ("n_scored", "n_total", "n_failed", "mean")}
    jw = pl.read_parquet(tmp_path / "cli" / "judge.parquet")
    assert jw.select("id", "metric", "score", "status").equals(result.judge.select("id", "metric", "score", "status"))


def _records(path: Path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]


class FakeHFDataset:
    """Duck-typed like datasets.Dataset: an Arrow table behind to_arrow / to_pandas."""

    def __init__(self, rows):
        import pyarrow as pa

        self._table = pa.Table.from_pylist(rows)

    def to_arrow(self):
        return self._table


@pytest.mark.parametrize("kind", ["records", "polars", "pandas", "arrow", "hf"])
def test_in_memory_inputs_give_the_same_cases(kind, example):
    golden, run = _records(GOLDEN), _records(RUN)
    if kind == "polars":
        golden, run = pl.DataFrame(golden), pl.DataFrame(run)
    elif kind == "pandas":
        pd = pytest.importorskip("pandas")
        golden, run = pd.DataFrame(golden), pd.DataFrame(run)
    elif kind == "arrow":
        import pyarrow as pa

        golden, run = pa.Table.from_pylist(golden), pa.Table.from_pylist(run)
    elif kind == "hf":
        golden, run = FakeHFDataset(golden), FakeHFDataset(run)
    result = ragmeter.evaluate(golden, run)
    cols = ["id", "hit", "reciprocal_rank", "ndcg", "evidence_recall", "diagnosis"]
    assert_frame_equal(result.cases.select(cols), example.cases.select(cols))
    assert result.summary["retrieval"]["overall"] == example.summary["retrieval"]["overall"]
    assert result.summary["inputs"]["golden"]["path"] is None


def test_works_inside_a_running_event_loop_and_from_threads():
    async def in_loop():
        return ragmeter.evaluate(GOLDEN, RUN)

    assert asyncio.run(in_loop()).cases.height == 51
    heights = []
    threads = [threading.Thread(target=lambda: heights.append(ragmeter.evaluate(GOLDEN, RUN).cases.height))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert heights == [51, 51]


def test_judge_inside_a_running_event_loop(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGMETER_API_KEY", KEY)
    with FakeServer(api_key=KEY) as server:
        judge = ragmeter.judge.JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", cache=None,
                                           metrics=["correctness"])

        async def in_loop():
            return ragmeter.evaluate(GOLDEN, RUN, judge=judge)

        result = asyncio.run(in_loop())
    assert result.judge is not None and result.judge.height == 51
    assert result.summary["judge"]["metrics"]["correctness"]["n_total"] == 51


def test_write_is_the_eval_folder_and_loads_back(tmp_path, example):
    out = example.write(tmp_path / "res")
    assert sorted(p.name for p in out.iterdir()) == sorted(example.summary["files"])
    assert example.summary["reports"]["html"].endswith("report.html")
    back = EvalResult.load(out)
    assert_frame_equal(back.cases.select("id", "hit", "ndcg"), example.cases.select("id", "hit", "ndcg"))
    (tmp_path / "res" / "mine.txt").write_text("kept")
    example.write(tmp_path / "res", reports=False)
    names = {p.name for p in (tmp_path / "res").iterdir()}
    assert "report.html" not in names and "mine.txt" in names and "cases.parquet" in names


def test_run_eval_still_writes_the_folder_and_accepts_options(tmp_path):
    from ragmeter.evaluation import run_eval

    summary = run_eval(GOLDEN, RUN, tmp_path / "r", k=3, reports=False, review_rate=0.1, review_seed=7)
    assert summary["settings"]["k"] == 3 and summary["settings"]["review"] == {"rate": 0.1, "seed": 7}
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["settings"]["review"]["seed"] == 7


def test_report_html_from_frames(example, tmp_path):
    html = example.report_html(n_resamples=200)
    assert html.startswith("<!DOCTYPE html>") or "<html" in html[:200]
    assert "Hit@k (chunk)" in html and "45/51" in html
    assert not list(tmp_path.iterdir())  # nothing written
    assert "Hit@k (chunk)" in example.report_markdown(n_resamples=200)


def test_compare_with_a_gate(example, tmp_path):
    run = _records(RUN)
    for rec in run[:10]:  # the candidate loses the first ten cases' retrieval
        rec["retrieved"] = []
    worse = ragmeter.evaluate(GOLDEN, run)
    comp = worse.compare(example, gate="hit>=-2pp,mrr>=0.1")
    assert not comp.passed and len(comp.failures) == 1 and "`hit>=-2pp`" in comp.failures[0]
    assert comp.row("hit").delta < 0
    md = comp.to_markdown()
    assert "Gate: FAILED (1 of 2 rules)" in md and "| metric |" in md
    assert example.compare(example, gate="hit>=0pp").passed
    from_folder = example.compare(example.write(tmp_path / "b"))  # a results folder as the baseline, no gate
    assert from_folder.passed and from_folder.failures == [] and from_folder.row("hit").delta == 0


def test_compare_refuses_another_golden_set(example):
    golden = _records(GOLDEN)
    golden[0]["question"] = "a different question"
    other = ragmeter.evaluate(golden, RUN)
    with pytest.raises(CompareRefused, match="refusing to compare"):
        other.compare(example)
    assert other.compare(example, force=True).forced


def test_bad_inputs_are_named():
    with pytest.raises(InputError, match="metrics= are judge metrics"):
        ragmeter.evaluate(GOLDEN, RUN, metrics=["faithfulness"])
    with pytest.raises(InputError, match="run: expected"):
        ragmeter.evaluate(GOLDEN, 42)
    with pytest.raises(InputError, match="a dry run writes no results"):
        ragmeter.evaluate(GOLDEN, RUN, judge=ragmeter.judge.JudgeConfig(base_url="http://127.0.0.1:9/v1", model="m",
                                                                        dry_run=True))
    # a judge that is not a JudgeConfig (a model name, a dict of its fields): named, before anything is loaded
    for judge in ("gpt-4o-mini", {"base_url": "http://127.0.0.1:9/v1", "model": "m"}):
        with pytest.raises(InputError, match=r"judge must be a ragmeter\.judge\.JudgeConfig or None, got"):
            ragmeter.evaluate(GOLDEN, RUN, judge=judge)
        with pytest.raises(InputError, match=r"judge must be a ragmeter\.judge\.JudgeConfig or None, got"):
            ragmeter.evaluate(GOLDEN, RUN, judge=judge, metrics=["faithfulness"])


def test_a_result_that_is_neither_an_eval_result_nor_a_folder_is_named(example):
    from ragmeter.testing import assert_no_regression, assert_scores

    with pytest.raises(InputError, match=r"baseline: expected an EvalResult, a ScoreResult or a results folder "
                                         r"\(a path\), got int"):
        example.compare(42)
    with pytest.raises(InputError, match="EvalResult.load: expected a results folder"):
        EvalResult.load(None)
    with pytest.raises(InputError, match="result: expected an EvalResult, a ScoreResult or a results folder.*got dict"):
        assert_scores({"hit": 0.9}, {"hit": ">=0.5"})
    # ragmeter.score's result is taken for its retrieval since session 33 (tests/test_api_s33.py)
    scored = ragmeter.score(GOLDEN, RUN)
    assert_scores(scored, {"hit": ">=0.5"})
    assert assert_no_regression(example, scored, gate="hit>=-2pp").passed


def test_custom_rubric_metric_through_evaluate_report_compare_and_assertions(monkeypatch):
    from ragmeter.judge import RubricMetric
    from ragmeter.testing import assert_scores

    monkeypatch.setenv("RAGMETER_API_KEY", KEY)
    rubric = RubricMetric("cites_docs", "Does the answer name the document it relies on?", scale=(1, 5),
                          pass_threshold=4, fields=("question", "answer"))
    with FakeServer(api_key=KEY) as server:
        judge = ragmeter.judge.JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", cache=None,
                                           metrics=["faithfulness"])
        result = ragmeter.evaluate(GOLDEN, RUN, judge=judge, metrics=["faithfulness", rubric])
        sent = server.requests
    assert {"cites_docs_score", "cites_docs_status", "faithfulness_score"} <= set(result.cases.columns)
    m = result.summary["judge"]["metrics"]["cites_docs"]
    assert m["n_total"] == 51 and m["n_scored"] + m["n_skipped"] + m["n_failed"] == 51 and sent > 0
    assert "Cites docs" in result.report_html(n_resamples=200)
    comp = result.compare(result, gate="cites_docs>=-1pp,cites_docs>=0.99")
    assert comp.row("cites_docs").n_paired == m["n_scored"]
    assert comp.failures == [f for f in comp.failures if "cites_docs>=0.99" in f] and len(comp.failures) == 1
    assert_scores(result, {"cites_docs": ">=0.2"})
    with pytest.raises(AssertionError, match="cites_docs"):
        assert_scores(result, {"cites_docs": ">=0.99"})


def test_custom_metric_reads_input_fields_beyond_the_case_fields(monkeypatch, tmp_path):
    from ragmeter.judge import RubricMetric

    monkeypatch.setenv("RAGMETER_API_KEY", KEY)
    golden = _records(GOLDEN)
    for rec in golden[:5]:
        rec["policy"] = f"policy for {rec['id']}"
    path = tmp_path / "golden.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in golden), encoding="utf-8")
    rubric = RubricMetric("follows_policy", "Does the answer follow {policy}?", fields=("answer", "policy"))
    with FakeServer(api_key=KEY) as server:
        judge = ragmeter.judge.JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", cache=None, metrics=[rubric])
        for source in (path, golden):
            result = ragmeter.evaluate(source, RUN, judge=judge)
            rows = result.judge.filter(pl.col("id").is_in([r["id"] for r in golden[:5]]))
            assert set(rows["status"].to_list()) <= {"ok", "skipped"}
            assert sorted(p["payload"]["policy"] for p in server.log[-rows.filter(pl.col("status") == "ok").height:]) \
                == sorted(f"policy for {i}" for i in rows.filter(pl.col("status") == "ok")["id"].to_list())
            others = result.judge.filter(~pl.col("id").is_in([r["id"] for r in golden[:5]]))
            assert set(others["error_kind"].to_list()) <= {"missing_input", "missing_run"}  # no policy: skipped
        with pytest.raises(InputError, match="field 'polcy' is in none of the 51 cases"):
            ragmeter.evaluate(path, RUN, judge=judge,
                              metrics=[RubricMetric("typo", "x", fields=("answer", "polcy"))])


def test_repr_is_one_line_that_says_what_it_covers(example):
    assert repr(example) == "EvalResult(51 cases, hit_rate 0.8 (45/51 scored), judged: no)"


def test_repr_of_a_ragmeter_score_folder_gives_its_hit_rate(tmp_path):
    # `ragmeter score --out` writes the retrieval summary at the top level of summary.json, not under "retrieval"
    ragmeter.score(GOLDEN, RUN, k=5).write(tmp_path / "scored")
    assert repr(EvalResult.load(tmp_path / "scored")) == "EvalResult(51 cases, hit_rate 0.8 (45/51 scored), judged: no)"


def test_a_score_folder_loads_in_evaluate_s_layout(tmp_path):
    """`ragmeter score --out` writes its retrieval summary at the top level; loaded as an EvalResult it is under
    "retrieval", as the docs' `result.summary["retrieval"]["overall"]` reads it (that was a KeyError), with the
    warnings and the files where evaluate puts them. Written back, it is an eval folder that loads the same."""
    scored = ragmeter.score(GOLDEN, RUN, k=5)
    scored.write(tmp_path / "scored")
    loaded = EvalResult.load(tmp_path / "scored")
    assert loaded.summary["retrieval"]["overall"]["hit_rate"] == scored.summary["overall"]["hit_rate"]
    assert loaded.summary["retrieval"]["k"] == 5 and "overall" not in loaded.summary
    assert [w["code"] for w in loaded.summary["warnings"]] == [w["code"] for w in scored.summary["warnings"]]
    assert loaded.summary["files"] == ["cases.parquet", "chunks.parquet", "warnings.json", "summary.json"]
    again = EvalResult.load(loaded.write(tmp_path / "again"))
    assert again.summary["retrieval"]["overall"] == loaded.summary["retrieval"]["overall"]
    assert (tmp_path / "again" / "report.html").is_file()
