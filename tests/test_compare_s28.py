"""Session 28: many per-category intervals and the stars chance alone gives them (Holm's correction)."""
from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pytest

from ragmeter import stats
from ragmeter.compare import compare_frames, to_markdown

sys.path.insert(0, str(Path(__file__).resolve().parent))  # works under any --import-mode
from test_report import synth_cases  # noqa: E402


def test_holm_adjusts_by_rank_keeps_the_order_and_leaves_missing_values_out() -> None:
    # by hand: sorted 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1, raised to 0.06 by the
    # step-down's running maximum); None is no test and does not count in m
    assert stats.holm_adjust([0.01, 0.04, None, 0.03, 0.005]) == pytest.approx([0.03, 0.06, None, 0.06, 0.02])
    assert stats.holm_adjust([0.5, 0.6]) == [1.0, 1.0]  # capped at 1
    assert stats.holm_adjust([]) == []
    assert stats.holm_adjust([0.2]) == [0.2]


def _lost_hits(cases: pl.DataFrame, category: str, count: int) -> pl.DataFrame:
    ids = cases.filter((pl.col("category") == category) & pl.col("hit")).get_column("id").head(count).to_list()
    return cases.with_columns(pl.when(pl.col("id").is_in(ids)).then(pl.lit(False)).otherwise(pl.col("hit")).alias("hit"))


def test_per_category_mcnemar_p_values_are_holm_adjusted_across_a_metrics_categories() -> None:
    from ragmeter.diagnosis import diagnose

    base = synth_cases(400, seed=3, hit_p=0.9)
    cand = _lost_hits(_lost_hits(base, "fact", 12), "paraphrase", 3)
    comp = compare_frames(diagnose(base), diagnose(cand), n_resamples=500, seed=1)
    assert comp.row("hit").p_holm is None  # the overall row is one test of its own
    cats = [comp.row("hit", g) for g in comp.groups]
    tested = [r for r in cats if r is not None and r.p_value is not None]
    assert len(tested) >= 3
    expected = stats.holm_adjust([r.p_value for r in tested])
    assert [r.p_holm for r in tested] == pytest.approx(expected)
    fact, para = comp.row("hit", "fact"), comp.row("hit", "paraphrase")
    assert fact.p_holm < 0.05 and para.p_holm >= para.p_value
    assert comp.row("faithfulness", "fact").p_holm is None  # a score: no McNemar test
    assert comp.to_dict()["rows"][0]["p_holm"] is None


def test_per_category_stars_come_with_how_many_chance_alone_would_give(capsys: pytest.CaptureFixture) -> None:
    from ragmeter.cli.compare import render
    from ragmeter.diagnosis import diagnose

    base = synth_cases(400, seed=3, hit_p=0.9)
    cand = _lost_hits(base, "fact", 12)
    comp = compare_frames(diagnose(base), diagnose(cand), n_resamples=500, seed=1)
    starred = [r for r in comp.rows if r.group != "overall" and r.metric in ("hit", "correct", "faithfulness")
               and r.significant]
    assert starred
    md = to_markdown(comp)
    assert "by chance" in md and "Holm" in md and "Hit@k (chunk) in fact" in md
    render(comp)
    text = " ".join(capsys.readouterr().out.split())
    assert "by chance" in text and "Holm" in text


def test_no_caution_when_no_per_category_interval_excludes_zero() -> None:
    from ragmeter.diagnosis import diagnose

    base = synth_cases(200, seed=4)
    comp = compare_frames(diagnose(base), diagnose(base), n_resamples=300, seed=1)
    assert "by chance" not in to_markdown(comp)


def test_a_per_category_table_leaves_out_the_categories_its_metric_applies_to_no_case_of(tmp_path, capsys) -> None:
    from compare_runs import eval_folder

    from ragmeter.cli.compare import render
    from ragmeter.compare import compare

    base = eval_folder(tmp_path / "base")  # no judge: correct is refusal detection on the no-answer cases only
    render(compare(base, base, n_resamples=200))
    out = capsys.readouterr().out
    table = out.split("Correct per category")[1].split("\n\n")[0]
    # before: six rows of 'n/a n/a n/a n/a 0/0', one per category without a no-answer case
    assert "0/0" not in table and "noanswer" in table
    assert "6 categories with no case Correct applies to, not shown" in " ".join(out.split())
