"""Bad numeric and choice arguments of the public functions are an InputError naming the argument and what it
must be (never a raw ValueError / TypeError from deep inside), raised before any file is read; valid calls are
unchanged. The command line names its flags instead."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

import ragmeter
from ragmeter import calibration, metrics, trec
from ragmeter.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "python" / "ragmeter" / "_example"
GOLDEN, RUN = EX / "golden.jsonl", EX / "run.jsonl"
QRELS, TREC_RUN = EX / "trec" / "qrels.txt", EX / "trec" / "run.txt"
#: a path that does not exist: an argument error must come before the file is looked at
NOWHERE = ROOT / "no-such-folder" / "golden.jsonl"


@pytest.fixture(scope="module")
def result() -> "ragmeter.EvalResult":
    return ragmeter.evaluate(GOLDEN, RUN)


BAD_CALLS = [
    # (id, call, the message)
    ("score-k-str", lambda r: ragmeter.score(NOWHERE, RUN, k="5"), "k must be a positive integer, got '5' (a str)"),
    ("score-k-bool", lambda r: ragmeter.score(NOWHERE, RUN, k=True), "k must be a positive integer, got True (a bool)"),
    ("score-k-float", lambda r: ragmeter.score(NOWHERE, RUN, k=2.5), "k must be a positive integer, got 2.5"),
    ("score-k-none", lambda r: ragmeter.score(NOWHERE, RUN, k=None), "k must be a positive integer, got None"),
    ("score-k-zero", lambda r: ragmeter.score(NOWHERE, RUN, k=0), "k must be a positive integer, got 0"),
    ("sweep-threshold-str", lambda r: ragmeter.sweep(NOWHERE, RUN, ["x"]),
     "thresholds must be a list of numbers; item 0 is 'x' (a str)"),
    ("sweep-threshold-none", lambda r: ragmeter.sweep(NOWHERE, RUN, [0.1, None]),
     "thresholds must be a list of numbers; item 1 is None"),
    ("sweep-threshold-bool", lambda r: ragmeter.sweep(NOWHERE, RUN, [True]),
     "thresholds must be a list of numbers; item 0 is True (a bool)"),
    ("sweep-thresholds-scalar", lambda r: ragmeter.sweep(NOWHERE, RUN, 0.5),
     "thresholds must be a list of numbers, got 0.5"),
    ("sweep-thresholds-text", lambda r: ragmeter.sweep(NOWHERE, RUN, "0.1,0.2"),
     "thresholds must be a list of numbers, got '0.1,0.2' (a str)"),
    ("sweep-thresholds-empty", lambda r: ragmeter.sweep(NOWHERE, RUN, []), "thresholds: give at least one threshold"),
    ("sweep-k", lambda r: ragmeter.sweep(NOWHERE, RUN, [0.1], k="x"), "k must be a positive integer, got 'x' (a str)"),
    ("evaluate-k", lambda r: ragmeter.evaluate(NOWHERE, RUN, k=1.0), "k must be a positive integer, got 1.0"),
    ("evaluate-repeat", lambda r: ragmeter.evaluate(NOWHERE, RUN, repeat="2"),
     "repeat must be a positive integer, got '2' (a str)"),
    ("evaluate-thresholds", lambda r: ragmeter.evaluate(NOWHERE, RUN, thresholds=["x"]),
     "thresholds must be a list of numbers; item 0 is 'x' (a str)"),
    ("evaluate-review-rate-range", lambda r: ragmeter.evaluate(NOWHERE, RUN, review_rate=2),
     "review_rate must be a number between 0 and 1 or None, got 2"),
    ("evaluate-review-rate-nan", lambda r: ragmeter.evaluate(NOWHERE, RUN, review_rate=float("nan")),
     "review_rate must be a number between 0 and 1 or None, got nan"),
    ("evaluate-review-seed", lambda r: ragmeter.evaluate(NOWHERE, RUN, review_seed="a"),
     "review_seed must be an integer or None, got 'a' (a str)"),
    ("score-batch-k", lambda r: ragmeter.score_batch(pl.DataFrame({"id": ["x"]}), NOWHERE, k="5"),
     "k must be a positive integer, got '5' (a str)"),
    ("audit-target", lambda r: ragmeter.audit(NOWHERE, target="5"),
     "target must be an integer between 1 and 10,000,000 or None, got '5' (a str)"),
    ("audit-target-bool", lambda r: ragmeter.audit(NOWHERE, target=True),
     "target must be an integer between 1 and 10,000,000 or None, got True (a bool)"),
    ("audit-rate", lambda r: ragmeter.audit(NOWHERE, rate="a"),
     "rate must be a number between 0 and 1 or None, got 'a' (a str)"),
    ("audit-min-hard-share", lambda r: ragmeter.audit(NOWHERE, min_hard_share=1.5),
     "min_hard_share must be a number between 0 and 1, got 1.5"),
    ("audit-hard-text", lambda r: ragmeter.audit(NOWHERE, hard="multi"),
     "hard must be a list of strings or None, got 'multi' (a str)"),
    ("audit-by", lambda r: ragmeter.audit(NOWHERE, by=3), "by must be a string, got 3"),
    ("compare-resamples", lambda r: r.compare(NOWHERE, n_resamples=0), "n_resamples must be an integer >= 100, got 0"),
    ("compare-seed", lambda r: r.compare(NOWHERE, seed="x"), "seed must be an integer or None, got 'x' (a str)"),
    ("compare-gate", lambda r: r.compare(NOWHERE, gate=5), "gate must be a string or None, got 5"),
    ("report-resamples", lambda r: r.report_html(n_resamples="x"),
     "n_resamples must be an integer >= 100, got 'x' (a str)"),
    ("report-seed", lambda r: r.report_markdown(seed=1.5), "seed must be an integer or None, got 1.5"),
    ("metrics-k", lambda r: metrics.precision([1, 0], k="x"), "k must be a positive integer or None, got 'x' (a str)"),
    ("metrics-k-bool", lambda r: metrics.hit([1, 0], k=True), "k must be a positive integer or None, got True (a bool)"),
    ("metrics-n-relevant", lambda r: metrics.recall([1, 0], n_relevant=-1), "n_relevant must be a number >= 0, got -1"),
    ("trec-level", lambda r: trec.evaluate(QRELS, TREC_RUN, relevance_level="1"),
     "relevance_level must be an integer, got '1' (a str)"),
    ("trec-max-docs", lambda r: trec.evaluate(QRELS, TREC_RUN, max_docs=2.5), "max_docs must be an integer or None, got 2.5"),
    ("review-reasons-rate", lambda r: calibration.review_reasons(r.cases, rate="0.2"),
     "rate must be a number between 0 and 1 or None, got '0.2' (a str)"),
    ("wilson-k", lambda r: calibration.wilson_interval(5, 3), "k must be an integer between 0 and 3, got 5"),
]


@pytest.mark.parametrize("call, message", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_bad_argument_is_an_input_error_naming_it(result, call, message) -> None:
    with pytest.raises(InputError) as caught:
        call(result)
    assert str(caught.value) == message


GOOD_CALLS = [
    ("k-numpy-int", lambda: ragmeter.score(GOLDEN, RUN, k=np.int64(3)).summary["k"], 3),
    ("thresholds-numpy", lambda: ragmeter.sweep(GOLDEN, RUN, np.array([0.0, 0.5]), k=3)["threshold"].unique().len(), 2),
    ("thresholds-generator", lambda: ragmeter.sweep(GOLDEN, RUN, (t / 10 for t in range(3)))["threshold"].unique().len(), 3),
    ("thresholds-ints-and-inf", lambda: ragmeter.sweep(GOLDEN, RUN, (0, float("inf")))["threshold"].unique().to_list(),
     [0.0, float("inf")]),
    ("review-rate-bounds", lambda: [calibration.review_settings(r, -7)["rate"] for r in (0, 1, np.float64(0.5))],
     [0.0, 1.0, 0.5]),
    ("metrics-k-none", lambda: metrics.precision([1, 0, 1]), 2 / 3),
    ("wilson", lambda: calibration.wilson_interval(0, 0), (None, None)),
]


@pytest.mark.parametrize("call, want", [c[1:] for c in GOOD_CALLS], ids=[c[0] for c in GOOD_CALLS])
def test_valid_arguments_are_taken(call, want) -> None:
    assert call() == want


@pytest.mark.parametrize("argv, message", [
    (["eval", "--golden", str(GOLDEN), "--run", str(RUN), "--review-rate", "2"],
     "--review-rate must be a number between 0 and 1, got 2.0"),
    (["eval", "--golden", str(GOLDEN), "--run", str(RUN), "--repeat", "0"], "--repeat must be a positive integer, got 0"),
    (["audit", "--golden", str(GOLDEN), "--target", "0"], "--target must be an integer between 1 and 10,000,000, got 0"),
    (["compare", str(EX), str(EX), "--resamples", "50"], "--resamples must be an integer >= 100, got 50"),
    (["report", str(EX), "--resamples", "50"], "--resamples must be an integer >= 100, got 50"),
    (["eval", "--golden", str(GOLDEN), "--run", str(RUN), "--review-rate", "200%"],
     "--review-rate must be a number between 0 and 1, got 2.0"),
], ids=["eval-review-rate", "eval-repeat", "audit-target", "compare-resamples", "report-resamples",
        "eval-review-rate-percent"])
def test_the_command_line_names_its_flags(tmp_path, capsys, monkeypatch, argv, message) -> None:
    from ragmeter.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(argv + (["--out", "out"] if argv[0] == "eval" else [])) == 2
    err = capsys.readouterr().err
    assert err == f"ragmeter: error: {message}\n"
    assert not (tmp_path / "out").exists()


def test_eval_takes_a_review_rate_in_percent_as_audit_and_review_take_shares(tmp_path, monkeypatch) -> None:
    # eval --review-rate 10% was refused ("invalid float value") while audit and review import take 30%, 80%
    import json

    from ragmeter.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["eval", "--golden", str(GOLDEN), "--run", str(RUN), "--no-judge", "--review-rate", "25%",
                 "--out", "out"]) == 0
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["settings"]["review"]["rate"] == 0.25
