"""Tables that grow with the data print a bounded number of rows and count the rest honestly.

A golden set whose ids have no ``-`` puts every case in its own category (``dataset.default_category``), so
5,000 cases give 5,000 categories. Every third case finds its evidence phrase; the others miss, so the rows
of lowest Hit@5 are known in advance. Small results keep every category, in their order, with no count line.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
from rich.cells import cell_len

from ragmeter.cli._tables import MAX_ROWS, worst_first

PYTHON = Path(__file__).resolve().parents[2] / "python"
N_CASES = 5_000


def _write_inputs(folder: Path, n: int, prefix: str = "c") -> None:
    golden, run = [], []
    for i in range(n):
        case = f"{prefix}{i:05d}"
        phrase = f"phrase {case}"
        golden.append({"id": case, "question": f"q {case}?", "expectedFileNames": ["a.md"],
                       "expectedEvidence": [phrase]})
        text = f"the text holds {phrase} here" if i % 3 == 0 else "nothing relevant"
        run.append({"id": case, "retrieved": [{"file": "a.md", "chunk_id": f"a.md#{i}", "text": text,
                                               "score": 0.5}]})
    (folder / "golden.jsonl").write_text("".join(json.dumps(r) + "\n" for r in golden), encoding="utf-8")
    (folder / "run.jsonl").write_text("".join(json.dumps(r) + "\n" for r in run), encoding="utf-8")


def _ragmeter(args: List[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(PYTHON), "COLUMNS": "200"}  # piped: 80 columns all the same
    return subprocess.run([sys.executable, "-m", "ragmeter", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=600)


def _category_rows(text: str, prefix: str = "c") -> List[str]:
    return [line.split()[0] for line in text.splitlines() if line.startswith(prefix) and line.split()[0][1:].isdigit()]


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("big")
    _write_inputs(folder, N_CASES)
    return folder


def _assert_fits(text: str) -> None:
    wide = [line for line in text.splitlines() if cell_len(line) > 80]
    assert not wide, "lines wider than 80 columns:\n" + "\n".join(wide)


def test_score_prints_the_lowest_categories_and_counts_the_rest(big: Path) -> None:
    proc = _ragmeter(["score", "--golden", "golden.jsonl", "--run", "run.jsonl", "--out", "out"], big)
    assert proc.returncode == 0, proc.stderr
    rows = _category_rows(proc.stdout)
    misses = [f"c{i:05d}" for i in range(N_CASES) if i % 3][:MAX_ROWS]
    assert rows == misses  # 0% Hit@5, all of one case each: in the golden set's order
    assert f"... and {N_CASES - MAX_ROWS:,} more categories (all in out/summary.json)" in proc.stdout
    assert "ALL" in proc.stdout and f"{N_CASES}/{N_CASES}" in proc.stdout
    _assert_fits(proc.stdout)
    written = json.loads((big / "out" / "summary.json").read_text(encoding="utf-8"))
    assert len(written["by_category"]) == N_CASES  # the file keeps every category


def test_score_without_out_says_how_to_get_them_all(big: Path) -> None:
    proc = _ragmeter(["score", "--golden", "golden.jsonl", "--run", "run.jsonl"], big)
    assert proc.returncode == 0, proc.stderr
    assert len(_category_rows(proc.stdout)) == MAX_ROWS
    assert f"... and {N_CASES - MAX_ROWS:,} more categories (all with --out or --json)" in proc.stdout


def test_eval_without_judge_prints_a_bounded_table(big: Path) -> None:
    proc = _ragmeter(["eval", "--golden", "golden.jsonl", "--run", "run.jsonl", "--out", "ev"], big)
    assert proc.returncode == 0, proc.stderr
    assert len(_category_rows(proc.stdout)) == MAX_ROWS
    assert f"... and {N_CASES - MAX_ROWS:,} more categories (all in ev/summary.json)" in proc.stdout
    _assert_fits(proc.stdout)


def test_sweep_keeps_the_same_categories_at_every_threshold(big: Path) -> None:
    proc = _ragmeter(["sweep", "--golden", "golden.jsonl", "--run", "run.jsonl", "--thresholds", "0,0.9"], big)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split()[1] for line in proc.stdout.splitlines() if line.split()[:1] in (["0"], ["0.9"])]
    categories = [r for r in rows if r != "ALL"]
    assert len(categories) == 2 * MAX_ROWS and categories[:MAX_ROWS] == categories[MAX_ROWS:]
    assert rows.count("ALL") == 2
    assert f"... and {N_CASES - MAX_ROWS:,} more categories at each threshold" in proc.stdout
    _assert_fits(proc.stdout)


def test_compare_lists_the_largest_drops(tmp_path: Path) -> None:
    n = 60
    base, cand = tmp_path / "base", tmp_path / "cand"
    base.mkdir()
    _write_inputs(base, n)
    assert _ragmeter(["score", "--golden", "golden.jsonl", "--run", "run.jsonl", "--out", "r"], base).returncode == 0
    # the candidate finds every phrase: the cases that missed improve; then the first ten hits are lost
    run = [json.loads(line) for line in (base / "run.jsonl").read_text().splitlines()]
    for i, rec in enumerate(run):
        found = i % 3 != 0 or i >= 30
        rec["retrieved"][0]["text"] = f"the text holds phrase c{i:05d} here" if found else "nothing"
    (base / "run2.jsonl").write_text("".join(json.dumps(r) + "\n" for r in run), encoding="utf-8")
    assert _ragmeter(["score", "--golden", "golden.jsonl", "--run", "run2.jsonl", "--out", str(cand)],
                     base).returncode == 0
    proc = _ragmeter(["compare", str(base / "r"), str(cand), "--resamples", "100"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    hit_table = proc.stdout.split("Hit@k (chunk) per category")[1].split("per category")[0]
    rows = _category_rows(hit_table)
    lost = [f"c{i:05d}" for i in range(0, 30, 3)]
    assert rows[:len(lost)] == lost and len(rows) == MAX_ROWS
    assert f"... and {n - MAX_ROWS:,} more categories (all with --out or --json)" in hit_table
    _assert_fits(proc.stdout)


def test_small_results_print_every_category_in_order(tmp_path: Path) -> None:
    _write_inputs(tmp_path, MAX_ROWS)
    proc = _ragmeter(["score", "--golden", "golden.jsonl", "--run", "run.jsonl"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _category_rows(proc.stdout) == [f"c{i:05d}" for i in range(MAX_ROWS)]
    assert "more categories" not in proc.stdout


def test_worst_first_rule() -> None:
    items = [("a", 0.5, 1), ("b", None, 9), ("c", 0.0, 1), ("d", 0.0, 4), ("e", 0.5, 1)]
    shown, n_more = worst_first(items, lambda r: r[1], lambda r: r[2], limit=3)
    assert [r[0] for r in shown] == ["d", "c", "a"] and n_more == 2  # lowest, more cases first, no value last
    assert worst_first(items, lambda r: r[1], lambda r: r[2], limit=5) == (items, 0)


def test_report_shows_a_bounded_category_section(big: Path, tmp_path: Path) -> None:
    from ragmeter.report import write_reports
    from ragmeter.report.data import REPORT_CATEGORIES

    proc = _ragmeter(["score", "--golden", "golden.jsonl", "--run", "run.jsonl", "--out", str(tmp_path / "r")], big)
    assert proc.returncode == 0, proc.stderr
    paths = write_reports(tmp_path / "r", n_resamples=200)
    markdown = paths["markdown"].read_text(encoding="utf-8")
    html = paths["html"].read_text(encoding="utf-8")
    sentence = f"{REPORT_CATEGORIES} of {N_CASES:,} categories shown: the {REPORT_CATEGORIES} of lowest Hit@k (chunk)"
    assert sentence in markdown and sentence in html
    section = markdown.split("### Per category")[1].split("###")[0]
    rows = [line.split("|")[1].strip() for line in section.splitlines() if line.startswith("| c0")]
    assert rows == [f"c{i:05d}" for i in range(N_CASES) if i % 3][:REPORT_CATEGORIES]


def test_small_reports_keep_every_category(tmp_path: Path) -> None:
    import polars as pl

    from ragmeter import stats
    from ragmeter.report.data import REPORT_CATEGORIES, compute_aggregates, metric_frame

    _write_inputs(tmp_path, REPORT_CATEGORIES)
    assert _ragmeter(["score", "--golden", "golden.jsonl", "--run", "run.jsonl", "--out", "r"], tmp_path).returncode == 0
    cases = pl.read_parquet(tmp_path / "r" / "cases.parquet")
    got = compute_aggregates(cases, n_resamples=200, seed=3)
    assert len(got["by_category"]) == REPORT_CATEGORIES and got["category_rule"] is None
    # what the reports computed before the bound: every category of the same resamples
    mf = metric_frame(cases)
    values = mf.select(got["metrics"]).to_numpy().astype(float)
    cats = mf.get_column("category").to_numpy().astype(str)
    res = stats.bootstrap_means(values, n_resamples=200, seed=3, groups=cats)
    multi_file = (cases.get_column("n_expected_files") >= 2).to_numpy()
    for cat in sorted(set(cats.tolist())):
        for j, name in enumerate(got["metrics"]):
            # all files hit covers the cases expecting two or more files (its n_total), as the summary counts it
            n_total = int(multi_file[cats == cat].sum()) if name == "all_files_hit" else None
            want = stats.Aggregate.from_resamples(values[cats == cat, j], res[cat][:, j], n_total=n_total).to_dict()
            assert got["by_category"][cat][name] == want


def test_audit_tables_are_bounded_and_the_json_complete(tmp_path: Path) -> None:
    from ragmeter.audit.render import MAX_ROWS as AUDIT_ROWS

    n = 500
    golden = [{"id": f"c{i:05d}", "question": "q?", "category": f"k{i:05d}", "source": f"s{i % 3}",
               "expectedFileNames": ["a.md"], "expectedEvidence": ["p"]} for i in range(n)]
    (tmp_path / "golden.jsonl").write_text("".join(json.dumps(r) + "\n" for r in golden), encoding="utf-8")
    proc = _ragmeter(["audit", "--golden", "golden.jsonl", "--out", "a"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    shown = [line.split()[0] for line in proc.stdout.splitlines() if line.startswith("k0")]
    assert shown == [f"k{i:05d}" for i in range(AUDIT_ROWS)] * 2  # the distribution, then category x source
    assert proc.stdout.count(f"... and {n - AUDIT_ROWS:,} more categor") == 2
    _assert_fits(proc.stdout)
    written = json.loads((tmp_path / "a" / "audit.json").read_text(encoding="utf-8"))
    assert len(written["by_category"]) == n and len(written["cross"]) == n
