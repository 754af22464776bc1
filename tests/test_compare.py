"""Tests for ragmeter.compare, ragmeter.gate and `ragmeter compare`."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from ragmeter import gate, stats
from ragmeter.compare import CompareRefused, compare, compare_frames, golden_hash, to_markdown
from ragmeter.errors import InputError

sys.path.insert(0, str(Path(__file__).resolve().parent))  # works under any --import-mode
from test_report import synth_cases, write_results  # noqa: E402


def _flip(cases: pl.DataFrame, col: str, ids: list, value: bool) -> pl.DataFrame:
    return cases.with_columns(pl.when(pl.col("id").is_in(ids)).then(pl.lit(value)).otherwise(pl.col(col)).alias(col))


@pytest.fixture()
def pair(tmp_path: Path):  # type: ignore[no-untyped-def]
    base = synth_cases(200, seed=10)
    labelled_hits = base.filter(pl.col("labeled") & pl.col("hit")).get_column("id").to_list()
    right = base.filter(pl.col("correct") == True).get_column("id").to_list()  # noqa: E712
    # candidate: 12 hits lost, 9 correct answers lost, 2 gained
    cand = _flip(base, "hit", labelled_hits[:12], False)
    wrong = base.filter(pl.col("correct") == False).get_column("id").to_list()  # noqa: E712
    cand = _flip(cand, "correct", right[:9], False)
    cand = _flip(cand, "correct", wrong[:2], True)
    b = write_results(tmp_path / "base", base)
    c = write_results(tmp_path / "cand", cand)
    return b, c, base, cand


def test_compare_deltas_flips_and_categories(pair) -> None:  # type: ignore[no-untyped-def]
    b, c, base, cand = pair
    comp = compare(b, c, n_resamples=1000)
    hit = comp.row("hit")
    assert hit.n_paired == 150 and hit.n_total == 200
    assert hit.regressions == 12 and hit.wins == 0 and hit.ties == 138
    assert hit.delta == pytest.approx(-12 / 150)
    assert hit.ci_low < hit.delta < hit.ci_high < 0
    assert hit.p_value == pytest.approx(stats.mcnemar_exact(12, 0))
    corr = comp.row("correct")
    assert (corr.regressions, corr.wins) == (9, 2)
    assert corr.p_value == pytest.approx(stats.mcnemar_exact(9, 2))
    assert corr.mdd == pytest.approx(stats.min_detectable_difference_proportion(corr.n_paired, 11 / corr.n_paired))
    # unchanged metrics: zero delta, degenerate interval
    ndcg = comp.row("ndcg")
    assert ndcg.delta == 0 and ndcg.ci_low == 0 and ndcg.ci_high == 0
    # per-category rows add up
    cats = comp.groups
    assert set(cats) == {"fact", "paraphrase", "multihop", "noanswer"}
    assert sum(comp.row("hit", g).regressions for g in cats) == 12
    assert comp.row("hit", "noanswer").n_paired == 0
    assert [r.metric for r in comp.outcomes()] == ["hit", "correct", "refusal"]
    md = to_markdown(comp)
    assert "| Hit@k (chunk) | " in md and "McNemar" in md and "### Per category" in md


def test_compare_is_reproducible(pair) -> None:  # type: ignore[no-untyped-def]
    b, c, _, _ = pair
    a1 = compare(b, c, n_resamples=500, seed=3).row("correct")
    a2 = compare(b, c, n_resamples=500, seed=3).row("correct")
    assert (a1.ci_low, a1.ci_high) == (a2.ci_low, a2.ci_high)


def test_paired_ci_against_plain_python(tmp_path: Path) -> None:
    # continuous metric: compare the engine's interval with a plain-Python paired bootstrap
    import random

    base = synth_cases(400, seed=20)
    rng = np.random.default_rng(0)
    cand = base.with_columns((pl.col("faithfulness_score") + pl.Series(rng.normal(0.02, 0.05, 400))).clip(0, 1).alias("faithfulness_score"))
    comp = compare_frames(
        *(__import__("ragmeter.diagnosis", fromlist=["diagnose"]).diagnose(x) for x in (base, cand)), n_resamples=4000, seed=1
    )
    r = comp.row("faithfulness")
    d = (cand["faithfulness_score"] - base["faithfulness_score"]).to_list()
    rnd = random.Random(5)
    means = sorted(sum(d[rnd.randrange(len(d))] for _ in d) / len(d) for _ in range(4000))
    lo, hi = means[100], means[3899]
    width = hi - lo
    assert abs(r.ci_low - lo) < 0.1 * width and abs(r.ci_high - hi) < 0.1 * width
    assert r.delta == pytest.approx(sum(d) / len(d))


def test_refuses_different_golden_sets_unless_forced(tmp_path: Path) -> None:
    base = synth_cases(40, seed=1)
    b = write_results(tmp_path / "b", base)
    c = write_results(tmp_path / "c", base.head(35))
    with pytest.raises(CompareRefused, match="golden sets differ in 5 case.*only in the baseline"):
        compare(b, c)
    comp = compare(b, c, force=True, n_resamples=200)
    assert comp.forced and comp.n_paired == 35
    md = to_markdown(comp)
    assert "FORCED COMPARISON" in md and "golden sets differ" in md


def test_refuses_different_golden_hash_and_mode_mix(tmp_path: Path) -> None:
    unlabelled = synth_cases(40, seed=1)
    b = write_results(tmp_path / "b0", unlabelled, summary={"inputs": {"golden": {"sha256": "aaa"}}})
    c = write_results(tmp_path / "c0", unlabelled, summary={"inputs": {"golden": {"sha256": "bbb"}}})
    with pytest.raises(CompareRefused, match="labels .*cannot be compared"):  # a label may have changed
        compare(b, c, n_resamples=200)
    base = unlabelled.with_columns(pl.Series("expected_files", [["a.md"]] * 40),
                                   pl.Series("expected_evidence", [["a phrase"]] * 40))
    b = write_results(tmp_path / "b", base, summary={"inputs": {"golden": {"sha256": "aaa"}}})
    c = write_results(tmp_path / "c", base, summary={"inputs": {"golden": {"sha256": "bbb"}}})
    comp = compare(b, c, n_resamples=200)  # the same cases: the file's bytes do not matter
    assert not comp.forced and any("differ byte for byte" in n for n in comp.notes)
    changed = base.with_columns(pl.when(pl.col("id") == base["id"][3]).then(pl.lit("another question?")).otherwise(pl.col("question")).alias("question"))
    e = write_results(tmp_path / "e", changed, summary={"inputs": {"golden": {"sha256": "bbb"}}})
    with pytest.raises(CompareRefused, match=f"golden sets differ in 1 case.*{base['id'][3]} \\(question differs\\)"):
        compare(b, e)
    assert golden_hash({"golden_hash": "x"}) == "x" and golden_hash({}) is None
    degraded = base.with_columns(pl.when(pl.col("id").is_in(base["id"][:4].to_list())).then(pl.lit("bm25")).otherwise(pl.col("retrieval_mode")).alias("retrieval_mode"))
    d = write_results(tmp_path / "d", degraded)
    with pytest.raises(CompareRefused, match="retrieval-mode mix differs"):
        compare(b, d)



def test_refuses_different_k_unless_forced(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from ragmeter.cli import main

    # Hit@5 against Hit@1 looks like a regression that is only the cut-off changing
    base = synth_cases(40, seed=1)
    b = write_results(tmp_path / "b", base, summary={"settings": {"k": 5}})
    c = write_results(tmp_path / "c", base, summary={"settings": {"k": 1}})
    with pytest.raises(CompareRefused, match="k differs: baseline 5, candidate 1"):
        compare(b, c)
    assert main(["compare", str(b), str(c), "--resamples", "200", "--gate", "hit>=-2pp"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "k differs: baseline 5, candidate 1" in err and "Traceback" not in err
    js = tmp_path / "forced.json"
    assert main(["compare", str(b), str(c), "--resamples", "200", "--force", "--json", str(js)]) == 0
    assert "WARNING: --force: comparing runs that are not comparable: k differs" in " ".join(capsys.readouterr().err.split())
    payload = json.loads(js.read_text(encoding="utf-8"))
    assert payload["forced"] and any("k differs" in p for p in payload["problems"])
    # `ragmeter score` records k at the top level of summary.json
    s5 = write_results(tmp_path / "s5", base, summary={"k": 5})
    s1 = write_results(tmp_path / "s1", base, summary={"k": 1})
    with pytest.raises(CompareRefused, match="k differs"):
        compare(s5, s1)
    # a folder that does not record k (an older format) is not refused for it
    old = write_results(tmp_path / "old", base, summary={"version": "0.0.1"})
    comp = compare(old, c, n_resamples=200)
    assert not comp.forced and not comp.problems
    assert compare(b, write_results(tmp_path / "b2", base, summary={"settings": {"k": 5}}), n_resamples=200).problems == []


def test_refuses_a_different_judge_model_unless_forced(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from ragmeter.cli import main

    # correct -6pp between two judges grading the same answers is the judge changing, not the system
    def judge(**changes: object) -> dict:
        return {"settings": {"k": 5, "judge": {"base_url": "http://127.0.0.1:8000/v1", "model": "judge-a",
                                               "concurrency": 8, "embeddings_model": None, **changes}}}

    base = synth_cases(40, seed=1)
    b = write_results(tmp_path / "b", base, summary=judge())
    c = write_results(tmp_path / "c", base, summary=judge(model="judge-b"))
    with pytest.raises(CompareRefused, match="judge model differs: baseline 'judge-a', candidate 'judge-b'"):
        compare(b, c)
    assert main(["compare", str(b), str(c), "--resamples", "200", "--gate", "correct>=-2pp"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "judge model differs" in err and "--force" in err
    comp = compare(b, c, force=True, n_resamples=200)
    assert comp.forced and any("judge model differs" in p for p in comp.problems)
    # another endpoint or concurrency for the same model grades alike; a folder without a judge is not checked
    same = write_results(tmp_path / "s", base, summary=judge(base_url="http://10.0.0.2/v1", concurrency=2))
    assert compare(b, same, n_resamples=200).problems == []
    assert compare(b, write_results(tmp_path / "n", base, summary={"settings": {"k": 5, "judge": None}}),
                   n_resamples=200).problems == []
    emb = write_results(tmp_path / "e", base, summary=judge(embeddings_model="emb-2"))
    with pytest.raises(CompareRefused, match="judge embeddings_model differs: baseline None, candidate 'emb-2'"):
        compare(b, emb)


def test_no_common_case_is_refused_even_when_forced(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from ragmeter.cli import main

    b = write_results(tmp_path / "b", synth_cases(20, seed=1))
    other = write_results(tmp_path / "o", synth_cases(8, seed=2, ids=[f"zz-{i}" for i in range(8)]))
    for force in (False, True):
        with pytest.raises(InputError, match="no case in common between"):
            compare(b, other, force=force, n_resamples=200)
    # nothing was measured: never exit 0, with or without --force or a gate
    for extra in ([], ["--force"], ["--force", "--gate", "hit>=-2pp"]):
        assert main(["compare", str(b), str(other), "--resamples", "200", *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"no case in common between {b} and {other}" in err


# ------------------------------------------------------------------ gate rules


def test_parse_rules() -> None:
    rules = gate.parse_rules("hit>=-2pp, correct>=-3pp,faithfulness>=0.80,regressions<=5,correct>=75%,hit[fact]>-5pp,hit_wins>=1")
    assert [(r.name, r.op, r.mode, r.category) for r in rules] == [
        ("hit", ">=", "delta", None), ("correct", ">=", "delta", None), ("faithfulness", ">=", "absolute", None),
        ("regressions", "<=", "count", None), ("correct", ">=", "absolute", None), ("hit", ">", "delta", "fact"),
        ("hit_wins", ">=", "count", None),
    ]
    assert rules[0].value == pytest.approx(-0.02) and rules[4].value == pytest.approx(0.75)


@pytest.mark.parametrize("text", ["hit>>2", "bogus>=1", "hit=>-2pp", "regressions<=5pp", "", "hit>=abc"])
def test_bad_rules_list_known_metrics(text: str) -> None:
    with pytest.raises(gate.GateError, match="known metrics: hit, mrr, map"):
        gate.parse_rules(text)


def test_gate_evaluation(pair) -> None:  # type: ignore[no-untyped-def]
    b, c, _, _ = pair
    comp = compare(b, c, n_resamples=200)
    res = gate.evaluate(gate.parse_rules("hit>=-2pp,correct>=-10pp,regressions<=5,hit_regressions<=20,faithfulness>=0.5,hit[nope]>=0pp"), comp)
    passed = {r.rule.text: r.passed for r in res}
    assert passed == {
        "hit>=-2pp": False, "correct>=-10pp": True, "regressions<=5": False, "hit_regressions<=20": True,
        "faithfulness>=0.5": True, "hit[nope]>=0pp": False,
    }
    hit = [r for r in res if r.rule.text == "hit>=-2pp"][0]
    assert "delta -8.00pp" in hit.detail and "violated by 6.00pp" in hit.detail
    reg = [r for r in res if r.rule.text == "regressions<=5"][0]
    # every outcome both runs have: 12 hits and 9 correct answers lost, no new refusal
    assert reg.actual == 21 and reg.counted == {"hit": 12, "correct": 9, "refusal": 0}
    assert "regressions 21 (hit 12 of 150, correct 9 of" in reg.detail and "violated by 16" in reg.detail
    md = to_markdown(comp, res)
    assert "### Gate: FAILED (3 of 6 rules)" in md and "`hit>=-2pp`" in md


# ------------------------------------------------------------------ CLI


def test_cli_exit_codes(pair, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:  # type: ignore[no-untyped-def]
    from ragmeter.cli import main

    b, c, base, _ = pair
    out = tmp_path / "cmp.md"
    js = tmp_path / "cmp.json"
    assert main(["compare", str(b), str(c), "--resamples", "200", "--out", str(out), "--json", str(js)]) == 0
    assert "## ragmeter compare" in out.read_text(encoding="utf-8")
    assert json.loads(js.read_text())["n_paired"] == 200
    assert "Deltas" in capsys.readouterr().out  # tables on stdout, not Markdown
    assert main(["compare", str(b), str(c), "--resamples", "200", "--gate", "hit>=-2pp", "--out", str(out)]) == 1
    text = out.read_text(encoding="utf-8")
    assert "Gate: FAILED" in text and "hit>=-2pp" in text
    assert "gate failed" in capsys.readouterr().err
    assert main(["compare", str(b), str(c), "--resamples", "200", "--gate", "hit>=-20pp,correct>=-10pp"]) == 0
    assert main(["compare", str(b), str(c), "--gate", "wat>=1"]) == 2
    assert "known metrics" in capsys.readouterr().err
    other = write_results(tmp_path / "other", base.head(150))
    assert main(["compare", str(b), str(other)]) == 2
    assert "golden sets differ" in capsys.readouterr().err
    assert main(["compare", str(b), str(other), "--force", "--resamples", "200", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "WARNING" in err and "FORCED COMPARISON" in out.read_text(encoding="utf-8")
    assert main(["compare", str(b), str(tmp_path / "missing")]) == 2


def test_missing_files_message(tmp_path: Path) -> None:
    d = tmp_path / "half"
    d.mkdir()
    synth_cases(4).write_parquet(d / "cases.parquet")
    with pytest.raises(InputError, match="missing summary.json"):
        compare(d, d)


def test_vectorised_percentiles_equal_percentile_interval() -> None:
    from ragmeter.compare import _percentiles

    rng = np.random.default_rng(1)
    for trial in range(300):
        a = rng.normal(size=(int(rng.integers(1, 300)), 3, 2))
        if trial % 3 == 0:
            a = np.round(a, 1)  # ties
        a[rng.random(a.shape) < rng.random() * 0.9] = np.nan
        out = _percentiles(a)
        for g in range(3):
            for j in range(2):
                lo, hi = stats.percentile_interval(a[:, g, j])
                if lo is None:
                    assert np.isnan(out[:, g, j]).all()
                else:
                    assert (out[0, g, j], out[1, g, j]) == (lo, hi)  # to the last bit


def test_many_categories_resampled_in_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    import ragmeter.compare as cmp
    from ragmeter.diagnosis import diagnose

    ids = [f"c{i % 40:02d}-{i:04d}" for i in range(400)]  # 40 categories of 10 cases
    base = synth_cases(400, seed=30, ids=ids).with_columns(pl.col("id").str.split("-").list.first().alias("category"))
    rng = np.random.default_rng(2)
    moved = (pl.col("faithfulness_score") + pl.Series(rng.normal(0.05, 0.05, 400))).clip(0, 1)
    # category c00 unchanged: every delta 0, an interval of [0, 0] without resampling
    cand = base.with_columns(pl.when(pl.col("category") == "c00").then(pl.col("faithfulness_score")).otherwise(moved)
                             .alias("faithfulness_score"))
    frames = [diagnose(x) for x in (base, cand)]
    whole = compare_frames(*frames, n_resamples=400, seed=1)
    monkeypatch.setattr(cmp, "RESAMPLE_BYTES", 400 * 8 * 30 * 6)  # a few categories per call
    blocked = compare_frames(*frames, n_resamples=400, seed=1)
    assert any("resamples of blocks of categories" in n for n in blocked.notes)
    assert not any("blocks" in n for n in whole.notes)
    assert len(blocked.groups) == 40 and blocked.groups == whole.groups
    for r in whole.rows:
        b = blocked.row(r.metric, r.group)
        assert b is not None
        # everything but the interval is computed from the data, the same either way
        assert (b.delta, b.n_paired, b.n_total, b.wins, b.regressions, b.mdd) == \
               (r.delta, r.n_paired, r.n_total, r.wins, r.regressions, r.mdd)
        if r.ci_low is None:
            assert b.ci_low is None
        elif r.group == "overall":
            # the overall interval: the same resamples (sums in another order: float rounding only)
            assert (b.ci_low, b.ci_high) == (pytest.approx(r.ci_low, rel=1e-6), pytest.approx(r.ci_high, rel=1e-6))
        else:
            assert b.ci_low <= b.delta + 1e-12 and b.delta - 1e-12 <= b.ci_high
            width = r.ci_high - r.ci_low
            assert abs((b.ci_high - b.ci_low) - width) <= 0.5 * width + 1e-9  # another draw, a like width
    same = blocked.row("faithfulness", "c00")
    assert same is not None and (same.delta, same.ci_low, same.ci_high) == (0, 0, 0) and same.n_paired > 0
    f = blocked.row("faithfulness", "c07")
    assert f is not None and f.n_total == 10 and f.ci_low is not None and f.ci_low < f.delta < f.ci_high  # resampled


@pytest.mark.parametrize("n", [1, 2, 3])
def test_no_interval_and_no_star_below_four_paired_cases(n: int) -> None:
    # One case lost its hit out of 1 (2, 3): the "95% interval" was [-100pp, -100pp], starred as excluding 0,
    # beside McNemar's p = 1.000 (0.5, 0.25). At n <= 3 a resample repeating one case has probability >= 1/9, so
    # the percentile bootstrap's bounds are the smallest and largest delta whatever the level.
    from ragmeter.diagnosis import diagnose

    base = synth_cases(4 * n, seed=7, hit_p=1.0).filter(pl.col("category") == "fact")
    cand = base.with_columns(pl.lit(False).alias("hit"))
    comp = compare_frames(diagnose(base), diagnose(cand), n_resamples=500)
    hit = comp.row("hit")
    assert hit.n_paired == n and hit.regressions == n and hit.delta == pytest.approx(-1.0)
    assert (hit.ci_low, hit.ci_high) == (None, None) and not hit.significant
    assert any("at least 4 paired cases" in note for note in comp.notes)
    md = to_markdown(comp)
    assert "-100.0pp *" not in md and "[-100.0pp, -100.0pp]" not in md
    # a minimum detectable difference of two rates over 100 points is none at all: said so, not '280.0pp'
    from ragmeter.compare import fmt_mdd

    assert hit.mdd is not None and (hit.mdd > 1.0) == (fmt_mdd(hit) == ">100pp")
    assert all(float(v) <= 100.0 for v in re.findall(r"(\d+\.\d)pp", md)), md


def test_four_paired_cases_get_an_interval() -> None:
    from ragmeter.diagnosis import diagnose

    base = synth_cases(16, seed=7, hit_p=1.0).filter(pl.col("category") == "fact")
    cand = base.with_columns(pl.Series("hit", [False, True, True, True]))
    hit = compare_frames(diagnose(base), diagnose(cand), n_resamples=500).row("hit")
    assert hit.n_paired == 4 and hit.ci_low is not None and hit.ci_low < hit.delta <= hit.ci_high


def test_cases_absent_from_one_run_are_named(tmp_path: Path) -> None:
    # 3 cases dropped from the candidate's run file are scored as empty retrievals: they showed up as 3 hit
    # regressions with no word that the run simply lacked them
    base = synth_cases(40, seed=5, hit_p=1.0).with_columns(pl.lit(False).alias("missing_from_run"),
                                                           pl.lit(None, dtype=pl.Utf8).alias("run_error"))
    gone = base.filter(pl.col("labeled")).get_column("id").to_list()[:3]
    failed = base.filter(pl.col("labeled")).get_column("id").to_list()[3]
    cand = _flip(_flip(base, "missing_from_run", gone, True), "hit", [*gone, failed], False).with_columns(
        pl.when(pl.col("id") == failed).then(pl.lit("HTTP 500")).otherwise(pl.col("run_error")).alias("run_error"))
    b, c = write_results(tmp_path / "b", base), write_results(tmp_path / "c", cand)
    comp = compare(b, c, n_resamples=200)
    assert comp.row("hit").regressions == 4
    said = [w for w in comp.warnings if "missing from" in w]
    assert len(said) == 1 and "candidate" in said[0] and "3 case(s) missing from" in said[0]
    assert all(i in said[0] for i in gone)
    failed_said = [w for w in comp.warnings if "failed when" in w]
    assert len(failed_said) == 1 and failed in failed_said[0] and "1 case(s)" in failed_said[0]
    back = compare(c, b, n_resamples=200)
    assert any("baseline" in w and "3 case(s) missing from" in w for w in back.warnings)
    # the same gaps on both sides change no delta: nothing to say
    assert not any("missing from" in w or "failed when" in w for w in compare(c, c, n_resamples=200).warnings)


def test_cases_absent_from_one_run_do_not_read_as_a_change_of_retrieval_modes(tmp_path: Path) -> None:
    """A case one run file lacks has no mode there; the refusal 'retrieval-mode mix differs' hid the warning
    that names the absent cases. The modes are compared over the cases both run files hold."""
    base = synth_cases(40, seed=5).with_columns(pl.lit(False).alias("missing_from_run"))
    gone = base.get_column("id").to_list()[:3]
    cand = _flip(base, "missing_from_run", gone, True).with_columns(
        pl.when(pl.col("id").is_in(gone)).then(pl.lit(None, dtype=pl.Utf8)).otherwise(pl.col("retrieval_mode"))
        .alias("retrieval_mode"))
    b, c = write_results(tmp_path / "b", base), write_results(tmp_path / "c", cand)
    comp = compare(b, c, n_resamples=200)  # not refused
    assert any("3 case(s) missing from" in w for w in comp.warnings)
    degraded = cand.with_columns(pl.when(pl.col("id") == base["id"][5]).then(pl.lit("bm25"))
                                 .otherwise(pl.col("retrieval_mode")).alias("retrieval_mode"))
    d = write_results(tmp_path / "d", degraded)
    with pytest.raises(CompareRefused, match="retrieval-mode mix differs"):  # a real change of modes still is
        compare(b, d, n_resamples=200)


def test_gate_lines_in_markdown_keep_rule_text_whole_and_data_out_of_html(tmp_path: Path) -> None:
    """A rule or category holding a backtick used to end its code span early (the rest of the rule rendered as
    prose), and category names from the data went into the Markdown raw (`<b>` became HTML in a PR comment)."""
    base = synth_cases(60, seed=3).with_columns(
        pl.when(pl.col("category") == "fact").then(pl.lit("a`b")).otherwise(pl.lit("<b>x</b>")).alias("category"))
    b = write_results(tmp_path / "base", base)
    c = write_results(tmp_path / "cand", base)
    comp = compare(b, c, n_resamples=100)
    res = gate.evaluate(gate.parse_rules("hit[a`b]>=-50pp,hit[nope]>=0pp"), comp)
    md = to_markdown(comp, res)
    gate_items = [line for line in md.splitlines() if line.startswith("- ok:") or line.startswith("- FAILED:")]
    assert len(gate_items) == 2
    # CommonMark: a code span holding a backtick needs a longer fence
    assert "``hit[a`b]>=-50pp``" in gate_items[0]
    assert "<b>" not in gate_items[1] and "&lt;b&gt;" in gate_items[1]
