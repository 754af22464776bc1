"""Gate rules on real results folders of the bundled example (``ragmeter eval --no-judge``)."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import polars as pl
import pytest

from ragmeter import gate
from ragmeter.compare import compare, to_json

sys.path.insert(0, str(Path(__file__).resolve().parent))  # works under any --import-mode
from compare_runs import INVENTED, REFUSAL, diagnosed, eval_folder, variant_run  # noqa: E402

RESAMPLES = 200


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The example run, and variants with 7 retrieval misses, 3 new refusals on answerable questions,
    invented answers on the no-answer cases that refused."""
    tmp = tmp_path_factory.mktemp("gate")
    base = eval_folder(tmp / "base")
    cases = diagnosed(base)
    hits = cases.filter(pl.col("hit") == True).get_column("id").to_list()  # noqa: E712
    answerable = cases.filter(~pl.col("is_noanswer") & ~pl.col("refusal")).get_column("id").to_list()
    refused_noanswer = cases.filter(pl.col("is_noanswer") & pl.col("refusal")).get_column("id").to_list()
    assert len(hits) >= 7 and len(answerable) >= 3 and len(refused_noanswer) >= 3
    folders = {
        "base": base,
        "miss7": eval_folder(tmp / "miss7", variant_run(tmp / "miss7.jsonl", miss=hits[:7])),
        "refuse3": eval_folder(tmp / "refuse3", variant_run(tmp / "refuse3.jsonl", answers={i: REFUSAL for i in answerable[:3]})),
        "invent": eval_folder(tmp / "invent", variant_run(tmp / "invent.jsonl", answers={i: INVENTED for i in refused_noanswer})),
    }
    return folders, len(refused_noanswer)


def _gate(rules: str, base: Path, cand: Path) -> dict:
    results = gate.evaluate(gate.parse_rules(rules), compare(base, cand, n_resamples=RESAMPLES))
    return {r.rule.text: r for r in results}


def test_unjudged_hit_flips_fail_bare_regressions_and_name_hit(runs) -> None:  # type: ignore[no-untyped-def]
    # The reported bug: on unjudged runs `regressions` fell back to `correct` (the 6 no-answer cases
    # only) and passed with 7 right-to-wrong retrieval flips.
    f, _ = runs
    res = _gate("regressions<=0,hit_regressions<=7", f["base"], f["miss7"])
    reg = res["regressions<=0"]
    assert not reg.passed and reg.actual == 7
    assert reg.counted == {"hit": 7, "correct": 0, "refusal": 0}
    assert "regressions 7 (hit 7 of 45, correct 0 of 6, refusal 0 of 44)" in reg.detail
    assert res["hit_regressions<=7"].passed
    assert any("correct: not judged" in n for n in compare(f["base"], f["miss7"], n_resamples=RESAMPLES).notes)


def test_cli_bare_regressions_exit_1(runs, capsys: pytest.CaptureFixture) -> None:  # type: ignore[no-untyped-def]
    from ragmeter.cli import main

    f, _ = runs
    assert main(["compare", str(f["base"]), str(f["miss7"]), "--resamples", "200", "--gate", "regressions<=0"]) == 1
    err = capsys.readouterr().err
    assert "gate failed: regressions<=0: regressions 7 (hit 7 of 45" in " ".join(err.split())
    assert main(["compare", str(f["base"]), str(f["base"]), "--resamples", "200", "--gate", "regressions<=0"]) == 0


@pytest.mark.parametrize(
    "rule, suggestion",
    [("hit>=-2", "did you mean hit>=-2pp?"), ("hit>=-2%", "did you mean hit>=-2pp?"),
     ("hit>=80", "did you mean hit>=80%?"), ("correct>=0", "did you mean correct>=0pp?"),
     ("regressions>=0", "did you mean regressions<=0?"), ("regressions<=-1", "did you mean regressions<=0?"),
     ("wins>=0", "did you mean wins>=1?"), ("hit>=-100pp", "between -100pp and +100pp"),
     ("faithfulness<=1.5", "lies between 0 and 1"), ("correctness>=6", "lies between 1 and 5")],
)
def test_rules_that_cannot_fail_or_pass_are_rejected(rule: str, suggestion: str) -> None:
    with pytest.raises(gate.GateError) as info:
        gate.parse_rules(rule)
    assert suggestion in str(info.value) and repr(rule) in str(info.value)


@pytest.mark.parametrize("rule, change", [("mrr>=-0.02", -0.02), ("hit>=-0.05", -0.05), ("faithfulness>=-0.015", -0.015),
                                          ("hit<=-0.1", -0.1), ("correctness>=-0.5", -0.5)])
def test_suggestion_for_a_plain_negative_number_keeps_its_size(rule: str, change: float) -> None:
    # `mrr>=-0.02` (a drop of 0.02 on the metric's scale) was answered "did you mean mrr>=-0.02pp?": a rule a
    # hundred times stricter (a drop of 0.0002), which a user pasting the suggestion would not notice
    with pytest.raises(gate.GateError) as info:
        gate.parse_rules(rule)
    suggested = re.search(r"did you mean (\S+)\?", str(info.value)).group(1)
    (parsed,) = gate.parse_rules(suggested)
    assert parsed.mode == "delta" and parsed.value == pytest.approx(change), suggested


@pytest.mark.parametrize("rule", ["hit>=0.5", "hit>0", "hit>=1", "hit>=-99pp", "correct<=99pp", "regressions<=0",
                                  "wins>0", "correctness>=3", "refusal<=+2pp", "hit[fact]<=90%"])
def test_rules_on_the_scale_are_accepted(rule: str) -> None:
    assert len(gate.parse_rules(rule)) == 1


def test_cli_rejects_vacuous_rule_with_exit_2(runs, capsys: pytest.CaptureFixture) -> None:  # type: ignore[no-untyped-def]
    from ragmeter.cli import main

    f, _ = runs
    assert main(["compare", str(f["base"]), str(f["miss7"]), "--gate", "hit>=-2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean hit>=-2pp?" in err and "Traceback" not in err


def test_refusals_on_answerable_cases_are_lower_is_better(runs) -> None:  # type: ignore[no-untyped-def]
    f, _ = runs
    comp = compare(f["base"], f["refuse3"], n_resamples=RESAMPLES)
    row = comp.row("refusal")
    assert row.better == "lower" and row.regressions == 3 and row.wins == 0
    assert row.delta == pytest.approx(3 / row.n_paired)
    res = _gate("refusal_regressions<=0,regressions<=0,refusal<=+2pp", f["base"], f["refuse3"])
    assert not res["refusal_regressions<=0"].passed
    assert res["regressions<=0"].counted["refusal"] == 3 and not res["regressions<=0"].passed
    assert not res["refusal<=+2pp"].passed  # 3 of 44 more refusals: +6.8pp
    # the other way round, fewer refusals on answerable questions are wins
    back = _gate("refusal_wins>=3,wins>=3,refusal_regressions<=0", f["refuse3"], f["base"])
    assert all(r.passed for r in back.values())
    assert back["wins>=3"].counted["refusal"] == 3


def test_refusals_on_noanswer_cases_are_not_regressions(runs) -> None:  # type: ignore[no-untyped-def]
    f, k = runs
    # baseline invents answers to the no-answer questions; the candidate refuses them (rightly)
    comp = compare(f["invent"], f["base"], n_resamples=RESAMPLES)
    assert comp.row("refusal", "noanswer").n_paired == 0  # no-answer cases are not in the refusal rate
    res = _gate("refusal_regressions<=0,regressions<=0,correct_wins>=1", f["invent"], f["base"])
    assert all(r.passed for r in res.values()), [r.detail for r in res.values()]
    assert res["correct_wins>=1"].actual == k


def test_correct_regressions_counts_one_metric(runs) -> None:  # type: ignore[no-untyped-def]
    f, k = runs
    res = _gate("correct_regressions<=0,hit_regressions<=0,regressions<=0", f["base"], f["invent"])
    corr = res["correct_regressions<=0"]
    assert not corr.passed and corr.actual == k and corr.counted == {"correct": k}
    assert f"regressions {k} of 6 paired cases" in corr.detail
    assert res["hit_regressions<=0"].passed
    assert res["regressions<=0"].counted == {"hit": 0, "correct": k, "refusal": 0}


def test_category_count_rule(runs) -> None:  # type: ignore[no-untyped-def]
    f, _ = runs
    res = _gate("regressions[noanswer]<=0,regressions[fact]<=0", f["base"], f["miss7"])
    assert res["regressions[noanswer]<=0"].passed and res["regressions[noanswer]<=0"].counted == {"correct": 0}
    assert not res["regressions[fact]<=0"].passed


def test_category_names_are_trimmed_and_an_unknown_one_is_named(runs) -> None:  # type: ignore[no-untyped-def]
    # `hit[ fact ]` looked for a category " fact " and failed as unmeasured; `hit[facts]` failed saying only "no case
    # scored in both runs", as if the runs lacked data, not the rule a typo
    f, _ = runs
    comp = compare(f["base"], f["miss7"], n_resamples=RESAMPLES)
    res = {r.rule.text: r for r in gate.evaluate(gate.parse_rules("hit[ fact ]>=-50pp,hit[facts]>=-5pp,hit[Fact]>=-5pp"), comp)}
    spaced = res["hit[ fact ]>=-50pp"]
    assert spaced.rule.category == "fact" and spaced.actual == comp.row("hit", "fact").delta
    assert f"over {comp.row('hit', 'fact').n_paired}/{comp.row('hit', 'fact').n_total}" in spaced.detail
    for rule in ("hit[facts]>=-5pp", "hit[Fact]>=-5pp"):
        r = res[rule]
        assert not r.passed and r.actual is None
        assert "did you mean 'fact'?" in r.detail and all(repr(g) in r.detail for g in comp.groups), r.detail
    with pytest.raises(gate.GateError, match="empty category"):
        gate.parse_rules("hit[ ]>=0pp")


def test_correct_rules_fail_when_the_answers_were_not_judged(runs, capsys: pytest.CaptureFixture) -> None:  # type: ignore[no-untyped-def]
    # Unjudged, `correct` is refusal detection on the 6 no-answer cases (5 of them refuse: 0.8333): a CI job
    # whose judge step was skipped must not pass `correct>=75%` on that.
    from ragmeter.cli import main

    f, _ = runs
    res = _gate("correct>=75%,correct>=-2pp,hit>=-2pp", f["base"], f["base"])
    for rule in ("correct>=75%", "correct>=-2pp"):
        assert not res[rule].passed and res[rule].actual is None
        assert "answers not judged" in res[rule].detail and "6/6" in res[rule].detail
    assert res["hit>=-2pp"].passed
    assert main(["compare", str(f["base"]), str(f["base"]), "--resamples", "200", "--gate", "correct>=75%"]) == 1
    out = capsys.readouterr()
    assert "FAILED: correct>=75%" in out.out and "gate failed: correct>=75%" in " ".join(out.err.split())


def test_every_gate_line_shows_its_n(runs) -> None:  # type: ignore[no-untyped-def]
    f, _ = runs
    res = _gate("hit>=-2pp,hit>=50%,hit[fact]>=-50pp", f["base"], f["miss7"])
    assert "delta -15.56pp over 45/51," in res["hit>=-2pp"].detail
    assert "over 45/51," in res["hit>=50%"].detail and res["hit>=50%"].passed
    assert "over 10/10," in res["hit[fact]>=-50pp"].detail


def test_rules_fail_when_judge_calls_failed_in_one_run_only(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # The candidate's judge failed on 30 cases the baseline judged correct: over the cases judged in both runs
    # nothing changed, so every `correct` rule passed and the CI job went green on the cases that were left.
    from ragmeter.cli import main

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_report import synth_cases, write_results

    base = synth_cases(120, seed=4)
    lost = base.filter(pl.col("correct") == True).get_column("id").to_list()[:30]  # noqa: E712
    failed = pl.col("id").is_in(lost)
    cand = base.with_columns(
        pl.when(failed).then(pl.lit("failed")).otherwise(pl.col("correctness_status")).alias("correctness_status"),
        *[pl.when(failed).then(None).otherwise(pl.col(c)).alias(c) for c in ("correct", "correctness_score")])
    b, c = write_results(tmp_path / "b", base), write_results(tmp_path / "c", cand)
    comp = compare(b, c, n_resamples=RESAMPLES)
    row = comp.row("correct")
    assert (row.n_baseline_only, row.n_candidate_only) == (30, 0)
    assert sum(comp.row("correct", g).n_baseline_only for g in comp.groups) == 30
    assert any("correct: 30 case(s) scored in the baseline only" in w for w in comp.warnings)
    rules = "correct>=-2pp,correct>=50%,regressions<=0,correct_regressions<=0,hit>=-2pp"
    res = {r.rule.text: r for r in gate.evaluate(gate.parse_rules(rules), comp)}
    for rule in ("correct>=-2pp", "correct>=50%", "regressions<=0", "correct_regressions<=0"):
        assert not res[rule].passed, res[rule].detail
        assert "correct: 30 case(s) scored in the baseline only" in res[rule].detail
    assert res["hit>=-2pp"].passed
    back = {r.rule.text: r for r in gate.evaluate(gate.parse_rules("correct>=-2pp"), compare(c, b, n_resamples=RESAMPLES))}
    assert "30 case(s) scored in the candidate only" in back["correct>=-2pp"].detail
    assert main(["compare", str(b), str(c), "--resamples", "200", "--gate", "correct>=-2pp"]) == 1
    assert "gate failed: correct>=-2pp: not measured on every case" in " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize("rule, candidate", [("faithfulness>=-1pp", 0.80 - 0.01004), ("faithfulness>=0.79", 0.78996),
                                             ("hit>=-2pp", 0.75 - 0.020003), ("refusal<=+2pp", 0.10 + 0.02004)])
def test_a_narrow_violation_shows_the_digits_that_fail_it(rule: str, candidate: float) -> None:
    # a delta of -1.004pp against faithfulness>=-1pp read "delta -1.00pp, limit >= -1.00pp, violated by 0.00pp":
    # a failing gate whose line says the value meets the limit
    from ragmeter.compare import Comparison, MetricDelta, better

    (parsed,) = gate.parse_rules(rule)
    base = 0.10 if parsed.name == "refusal" else 0.75 if parsed.name == "hit" else 0.80
    kind = "score" if parsed.name == "faithfulness" else "rate"
    row = MetricDelta(parsed.name, "overall", kind, base, candidate, candidate - base, None, None, 500, 500, 10, 10, 480,
                      None, 0.01, better(parsed.name))
    (res,) = gate.evaluate([parsed], Comparison("a", "b", [row], 500, 500, 500, 100, 1))
    assert not res.passed
    unit = "pp" if parsed.mode == "delta" else ""
    m = re.search(rf"(?:delta|candidate) ([-+\d.e]+){unit} over .*, limit [<>]=? ([-+\d.e]+){unit}, violated by "
                  rf"([-+\d.e]+){unit}$", res.detail)
    assert m, res.detail
    shown, limit, by = (float(x) for x in m.groups())
    assert shown != limit and by > 0, res.detail
    assert not gate._holds(shown / (100 if unit else 1), parsed.op, parsed.value), res.detail  # the shown value fails
    assert abs(abs(shown - limit) - by) <= 1e-9 * max(1.0, by), res.detail


def test_judge_calls_failed_in_both_runs_are_named_not_dropped(tmp_path: Path) -> None:
    # faithfulness calls that failed in both runs (and correctness calls failed in the baseline, not scored in the
    # candidate) left those cases out of every delta without a word: n was smaller, nothing said why
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_report import synth_cases, write_results

    base = synth_cases(120, seed=4)
    ids = base.filter((pl.col("correctness_status") == "ok") & (pl.col("category") != "noanswer")).get_column("id").to_list()
    lost, half = pl.col("id").is_in(ids[:9]), pl.col("id").is_in(ids[9:13])

    def fail(frame: pl.DataFrame, which: pl.Expr, metric: str, columns: tuple) -> pl.DataFrame:
        return frame.with_columns(
            pl.when(which).then(pl.lit("failed")).otherwise(pl.col(f"{metric}_status")).alias(f"{metric}_status"),
            *[pl.when(which).then(None).otherwise(pl.col(c)).alias(c) for c in columns])

    b = fail(fail(base, lost, "faithfulness", ("faithfulness_score",)), half, "correctness", ("correct", "correctness_score"))
    c = fail(base, lost, "faithfulness", ("faithfulness_score",))
    c = c.with_columns(*[pl.when(half).then(None).otherwise(pl.col(x)).alias(x) for x in ("correct", "correctness_score")])
    comp = compare(write_results(tmp_path / "b", b), write_results(tmp_path / "c", c), n_resamples=RESAMPLES)
    already = int((base.get_column("correctness_status") == "failed").sum())  # synth_cases fails a few in both
    for metric, k in (("faithfulness", 9), ("correct", 4 + already)):
        assert any(w.startswith(f"{metric}: {k} case(s) scored in neither run because a judge call failed")
                   for w in comp.warnings), comp.warnings
        row = comp.row(metric)
        assert row.n_judge_failed == k and row.n_baseline_only == row.n_candidate_only == 0
        assert sum(comp.row(metric, g).n_judge_failed for g in comp.groups) == k
    assert comp.row("hit").n_judge_failed == 0
    assert json.loads(to_json(comp))["rows"][0]["n_judge_failed"] == 0


@pytest.mark.parametrize("text, hint", [
    ("hit>=-2pp;regressions<=0", "separated by commas"), ("hit>=-2pp regressions<=0", "separated by commas"),
    ("hit>=\u22122pp", "ASCII '-'"), ("hit=>-2pp", "operators are >=, <=, > and <"), ("hit==0pp", "operators are"),
    ("hit>=-2PP", "got 'PP'"), ("hit>=-2pts", "got 'pts'"), ("Hit>=-2pp", "did you mean 'hit'?"),
    ("faithfullness>=0.8", "did you mean 'faithfulness'?"), ("hit_regression<=0", "did you mean 'hit_regressions'?"),
    ("hit[fact>=-2pp", "cannot parse 'hit[fact>=-2pp'."),
])
def test_a_rule_with_a_typo_says_what_is_wrong(text: str, hint: str) -> None:
    # a typo was answered with "cannot parse" (or "unknown metric") and the whole list of metrics, nothing on which
    # part of the rule was wrong
    with pytest.raises(gate.GateError) as info:
        gate.parse_rules(text)
    message = str(info.value)
    assert hint in message and repr(text) in message and "known metrics" in message
    fixed = re.search(r"did you mean '(\w+)'", message)
    if fixed:  # the suggested name parses in the same rule
        assert gate.parse_rules(text.replace(text.split(">")[0].split("<")[0], fixed.group(1), 1))


def test_a_category_with_a_comma_is_one_rule(tmp_path: Path) -> None:
    # rules were split at every comma, so `hit[billing, refunds]>=-5pp` became two halves that did not parse
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_report import synth_cases, write_results

    cases = synth_cases(60, seed=2).with_columns(
        pl.when(pl.col("category") == "fact").then(pl.lit("fact, short")).otherwise(pl.col("category")).alias("category"))
    folder = write_results(tmp_path / "b", cases)
    comp = compare(folder, folder, n_resamples=RESAMPLES)
    rules = gate.parse_rules("hit[fact, short]>=-5pp, regressions<=0")
    assert [(r.name, r.category) for r in rules] == [("hit", "fact, short"), ("regressions", None)]
    res = gate.evaluate(rules, comp)
    row = comp.row("hit", "fact, short")
    assert row is not None and row.n_paired > 0
    assert res[0].passed and f"over {row.n_paired}/{row.n_total}" in res[0].detail


def test_a_candidate_that_lost_every_answer_fails_bare_regressions(runs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # every answer of the candidate empty: no `correct` or `refusal` case is scored in both runs, so `regressions`
    # counted hit alone and passed (exit 0) under warnings saying "a gate rule on it fails"
    from ragmeter.cli import main

    from compare_runs import run_cases

    f, _ = runs
    cand = eval_folder(tmp_path / "mute", variant_run(tmp_path / "mute.jsonl", answers={r["id"]: "" for r in run_cases()}))
    comp = compare(f["base"], cand, n_resamples=RESAMPLES)
    lost = {m: comp.row(m).n_baseline_only for m in ("correct", "refusal")}
    assert all(lost.values()) and all(comp.row(m).n_paired == 0 for m in lost)
    res = {r.rule.text: r for r in gate.evaluate(gate.parse_rules("regressions<=0,refusal<=+2pp,hit_regressions<=0"), comp)}
    reg = res["regressions<=0"]
    assert not reg.passed and reg.actual is None, reg.detail
    for m, k in lost.items():
        assert f"{m}: {k} case(s) scored in the baseline only" in reg.detail
    assert f"refusal: {lost['refusal']} case(s) scored in the baseline only" in res["refusal<=+2pp"].detail
    assert res["hit_regressions<=0"].passed  # retrieval is unchanged and fully measured
    assert main(["compare", str(f["base"]), str(cand), "--resamples", "200", "--gate", "regressions<=0"]) == 1
