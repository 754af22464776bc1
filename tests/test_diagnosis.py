"""Tests for ragmeter.diagnosis."""
from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from ragmeter import diagnosis as dg


def _frame(rows):  # type: ignore[no-untyped-def]
    schema = {
        "id": pl.Utf8,
        "category": pl.Utf8,
        "labeled": pl.Boolean,
        "hit": pl.Boolean,
        "answer": pl.Utf8,
        "reference_answer": pl.Utf8,
        "correct": pl.Boolean,
        "correctness_status": pl.Utf8,
        "faithfulness_score": pl.Float64,
        "context_precision_score": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def test_diagnosis_order() -> None:
    df = _frame(
        [
            # id, category, labeled, hit, answer, reference, correct, status, faith, cp
            ("miss", "fact", True, False, "42", "42", False, "ok", 0.9, 0.1),
            ("miss-ok", "fact", True, False, "42", "42", True, "ok", 0.9, 0.1),
            ("miss-noanswer", "fact", True, False, None, "42", None, None, None, None),  # miss wins
            ("gen", "fact", True, True, "  ", "42", None, "failed", None, None),
            ("judge", "fact", True, True, "41", "42", None, "failed", None, None),
            ("unlab", "fact", False, None, "41", "42", False, "ok", None, None),
            ("ok", "fact", True, True, "42", "42", True, "ok", 0.95, 0.8),
            ("wrong", "fact", True, True, "41", "42", False, "ok", 0.5, 0.8),
            ("skipped", "fact", True, True, "41", "42", None, "skipped", None, None),
        ]
    )
    out = dg.diagnose(df)
    got = dict(zip(out["id"], out["diagnosis"]))
    assert got == {
        "miss": "RETRIEVAL_MISS",
        "miss-ok": "MISS_BUT_CORRECT",
        "miss-noanswer": "RETRIEVAL_MISS",
        "gen": "GENERATION_FAILED",
        "judge": "JUDGE_FAILED",
        "unlab": "NOT_LABELED",
        "ok": "OK",
        "wrong": "PROMPT_OR_MODEL",
        "skipped": "NOT_JUDGED",
    }
    # columns added, originals kept in order
    assert out.columns[: len(df.columns)] == df.columns
    assert set(out.columns) - set(df.columns) == {
        "is_noanswer", "refusal", "answer_correct", "diagnosis", "quadrant", "faithfulness_band"
    }


@pytest.mark.parametrize(
    "answer",
    [
        "The provided context does not mention the CEO's salary.",
        "The documents don't say anything about that.",
        "This is not mentioned in the documents.",
        "There is no information about a 2025 roadmap in the material.",
        "I don't know based on the given passages.",
        "I cannot answer this from the sources provided.",
        "Unable to determine the release date from the context.",
        "Insufficient information to answer.",
        "文档中没有提到这个问题。",
        "资料未提及该项目的预算。",
        "根据提供的材料，无法回答这个问题。",
        "没有相关信息。",
        "抱歉，我不知道。",
        "上下文中并未涉及公司的股价。",
    ],
)
def test_refusals_detected(answer: str) -> None:
    out = pl.DataFrame({"answer": [answer]}).select(dg.refusal_expr("answer"))
    assert out.item() is True


@pytest.mark.parametrize(
    "answer",
    [
        "The CEO's salary is $2M according to the annual report.",
        "The release date is March 3, 2024.",
        "公司的股价在2023年上涨了15%。",
        "The frontend uses React and TypeScript.",
        "Yes, the information is in section 2: the limit is 5 GB.",
        "",
    ],
)
def test_non_refusals(answer: str) -> None:
    out = pl.DataFrame({"answer": [answer]}).select(dg.refusal_expr("answer"))
    assert out.item() is False


def test_noanswer_cases_refusal_is_correct_invention_is_not_and_judge_wins() -> None:
    df = _frame(
        [
            ("noanswer-1", "noanswer", False, None, "The documents do not mention it.", None, None, None, None, None),
            ("noanswer-2", "noanswer", False, None, "It was founded in 1987.", None, None, None, None, None),
            # judge present: its verdict wins over the refusal rule
            ("noanswer-3", "noanswer", False, None, "It was founded in 1987.", None, True, "ok", None, None),
            ("noanswer-4", "noanswer", False, None, "资料中没有提到成立时间。", None, False, "ok", None, None),
            # unlabelled, no reference answer, other category: also a no-answer case
            ("misc-1", "misc", False, None, "没有相关信息", None, None, None, None, None),
            # unlabelled but with a reference: not a no-answer case, no verdict
            ("misc-2", "misc", False, None, "没有相关信息", "42", None, None, None, None),
            ("noanswer-5", "noanswer", False, None, None, None, None, None, None, None),
        ]
    )
    out = dg.diagnose(df)
    got = {r["id"]: (r["is_noanswer"], r["refusal"], r["answer_correct"]) for r in out.iter_rows(named=True)}
    assert got["noanswer-1"] == (True, True, True)
    assert got["noanswer-2"] == (True, False, False)
    assert got["noanswer-3"] == (True, False, True)
    assert got["noanswer-4"] == (True, True, False)
    assert got["misc-1"] == (True, True, True)
    assert got["misc-2"] == (False, True, None)
    assert got["noanswer-5"] == (True, None, None)  # no answer: nothing refused, and nothing answered either

    summary = dg.summarize(out)
    ref = summary["refusal"]
    assert ref["overall"] == {"refusals": 4, "answered": 6, "rate": pytest.approx(4 / 6)}
    assert ref["noanswer"] == {"refusals": 3, "answered": 5, "rate": pytest.approx(3 / 5)}
    assert ref["answerable"] == {"refusals": 1, "answered": 1, "rate": 1.0}
    # the two no-answer cases answered wrong (an invented answer, a refusal the judge rejects) are the
    # generator's failures, not cases with nothing to say
    assert summary["diagnosis"]["NOT_LABELED"] == 4
    assert summary["diagnosis"]["PROMPT_OR_MODEL"] == 2
    assert summary["diagnosis"]["GENERATION_FAILED"] == 1


def test_quadrants_and_bands() -> None:
    df = _frame(
        [
            ("a", "f", True, True, "x", "x", True, "ok", 0.85, 0.5),
            ("b", "f", True, True, "x", "x", False, "ok", 0.84999, 0.9),
            ("c", "f", True, True, "x", "x", True, "ok", 0.80, 0.2),
            ("d", "f", True, False, "x", "x", False, "ok", 0.70, 0.0),
            ("e", "f", True, True, "x", "x", None, "failed", 0.6999, 0.7),
            ("f", "f", True, True, "x", "x", True, "ok", None, None),
        ]
    )
    out = dg.diagnose(df)
    assert out["quadrant"].to_list() == ["high/high", "high/low", "low/high", "low/low", None, None]
    assert out["faithfulness_band"].to_list() == [">=85%", "80-85%", "80-85%", "70-80% investigate", "<70%", None]
    s = dg.summarize(out)
    assert s["quadrants"] == {"high/high": 1, "high/low": 1, "low/high": 1, "low/low": 1}
    assert s["faithfulness_bands"] == {">=85%": 1, "80-85%": 2, "70-80% investigate": 1, "<70%": 1}
    assert sum(s["diagnosis"].values()) == s["n_total"] == 6


def test_missing_judge_columns_are_treated_as_null() -> None:
    df = pl.DataFrame(
        {"id": ["a", "b"], "category": ["f", "f"], "labeled": [True, True], "hit": [True, False], "answer": ["x", "y"]}
    )
    out = dg.diagnose(df)
    assert out["diagnosis"].to_list() == ["NOT_JUDGED", "RETRIEVAL_MISS"]
    assert out.columns[:5] == df.columns


def test_large_frame_is_vectorised() -> None:
    n = 200_000
    df = pl.DataFrame(
        {
            "id": [str(i) for i in range(n)],
            "category": ["fact"] * n,
            "labeled": [True] * n,
            "hit": [i % 3 != 0 for i in range(n)],
            "answer": ["The documents do not mention it." if i % 5 == 0 else "x" for i in range(n)],
            "correct": [i % 2 == 0 for i in range(n)],
        }
    )
    out = dg.diagnose(df)
    assert out.height == n
    assert out.filter(pl.col("diagnosis") == "MISS_BUT_CORRECT").height == len(
        [i for i in range(n) if i % 3 == 0 and i % 2 == 0]
    )


def test_the_report_refusal_rate_is_over_answerable_answered_cases(tmp_path) -> None:
    """A case missing from the run (no answer) is neither a refusal nor a non-refusal, and refusing a no-answer
    question is its right answer: the report's refusal rate is over the answerable, answered cases, as
    ``summarize`` counts them (``answerable``) and as ``compare --gate`` reads ``refusal``."""
    import ragmeter
    from ragmeter.report.data import metric_frame

    ex = Path(ragmeter.__file__).parent / "_example"
    cases = ragmeter.evaluate(ex / "golden.jsonl", ex / "run.jsonl").cases
    unanswered = cases.filter(pl.col("answer").is_null() | (pl.col("answer").str.strip_chars() == ""))
    assert unanswered.height >= 1 and unanswered["refusal"].null_count() == unanswered.height
    refusal = metric_frame(cases, ["refusal"])["refusal"]
    answerable = dg.summarize(cases)["refusal"]["answerable"]
    noanswer = cases.get_column("is_noanswer").fill_null(False)
    assert refusal.count() == answerable["answered"] == cases.height - unanswered.height - int(noanswer.sum())
    assert refusal.sum() == answerable["refusals"]


def test_without_an_answer_column_no_case_is_a_generation_failure() -> None:
    """A folder from `ragmeter score` has no answers: they were not read, not missing; a blank answer is."""
    df = pl.DataFrame({"id": ["a", "b", "c", "d"], "category": ["f", "f", "noanswer", "f"],
                       "labeled": [True, True, False, True], "hit": [True, False, None, True],
                       "run_error": [None, None, None, "HTTP 500"]})
    out = dg.diagnose(df)
    assert out["diagnosis"].to_list() == ["NOT_JUDGED", "RETRIEVAL_MISS", "NOT_LABELED", "SYSTEM_FAILED"]
    assert out["refusal"].null_count() == out["answer_correct"].null_count() == 4
    blank = dg.diagnose(df.with_columns(pl.Series("answer", [" ", "x", "x", "x"])))
    assert blank["diagnosis"][0] == "GENERATION_FAILED"


def test_a_case_the_run_file_lacks_is_not_in_run_never_a_retrieval_miss() -> None:
    """Scored as an empty retrieval, a case the run file lacks read as RETRIEVAL_MISS ('fix chunking /
    retrieval'), though the system was never seen on it; a recorded failure (run_error) still comes first."""
    df = _frame([
        ("absent", "fact", True, False, None, "42", None, "skipped", None, None),
        ("absent-unlabelled", "noanswer", False, None, None, None, None, "skipped", None, None),
        ("failed", "fact", True, False, None, "42", None, "skipped", None, None),
        ("miss", "fact", True, False, "41", "42", False, "ok", None, None),
    ]).with_columns(pl.Series("missing_from_run", [True, True, True, False]),
                    pl.Series("run_error", [None, None, "timeout", None], dtype=pl.Utf8))
    got = dict(zip(*dg.diagnose(df).select("id", "diagnosis").to_dict(as_series=False).values()))
    assert got == {"absent": "NOT_IN_RUN", "absent-unlabelled": "NOT_IN_RUN", "failed": "SYSTEM_FAILED",
                   "miss": "RETRIEVAL_MISS"}
    assert dg.DIAGNOSES.index("NOT_IN_RUN") == dg.DIAGNOSES.index("SYSTEM_FAILED") + 1
    assert "rerun" in dg.DIAGNOSIS_HINTS["NOT_IN_RUN"]
