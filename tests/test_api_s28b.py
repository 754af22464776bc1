"""API review of session 28 (second pass): each test asserts the documented behaviour (seen failing first)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from polars.testing import assert_frame_equal

import ragmeter
from ragmeter.api import EvalResult

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "python" / "ragmeter" / "_example"
GOLDEN, RUN = EX / "golden.jsonl", EX / "run.jsonl"
sys.path.insert(0, str(ROOT / "tests" / "judge"))
from fakeserver import FakeServer  # noqa: E402

KEY = "sk-test-api-s28b-0123456789"


# -- 1. write then load gives an equal summary


def _judged(monkeypatch: pytest.MonkeyPatch) -> EvalResult:
    monkeypatch.setenv("RAGMETER_API_KEY", KEY)
    with FakeServer(api_key=KEY) as server:
        cfg = ragmeter.judge.JudgeConfig(base_url=server.base_url, model="m", cache=None, metrics=["correctness"])
        return ragmeter.evaluate(GOLDEN, RUN, judge=cfg)


def test_a_judged_result_written_and_loaded_back_has_an_equal_summary(tmp_path, monkeypatch):
    result = _judged(monkeypatch)
    result.write(tmp_path / "res")
    back = EvalResult.load(tmp_path / "res")
    # settings.judge.metrics was a tuple in memory and a list once read back; the report paths were only in memory
    assert back.summary == result.summary
    assert_frame_equal(back.cases, result.cases)
    assert result.judge is not None and back.judge is not None
    assert_frame_equal(back.judge, result.judge)


def test_a_result_loaded_from_a_folder_with_reports_names_them_as_the_written_one_does(tmp_path):
    written = ragmeter.evaluate(GOLDEN, RUN)
    written.write(tmp_path / "res")
    assert EvalResult.load(tmp_path / "res").summary["reports"] == written.summary["reports"]
    written.write(tmp_path / "bare", reports=False)
    assert "reports" not in EvalResult.load(tmp_path / "bare").summary


# -- 2. the documented calls type-check under mypy --strict


def test_the_python_examples_of_docs_api_type_check_strictly(tmp_path):
    pytest.importorskip("mypy")
    import re

    from test_typing import _mypy

    doc = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    # the values the examples leave to the reader, typed as the user's own would be
    script = "from typing import Any\nevaluation_dataset: Any = None\ntest_cases: Any = None\nhf_dataset: Any = None\n"
    script += "".join(re.findall(r"```python\n(.*?)```", doc, re.S))
    proc = _mypy(tmp_path, script)
    # the examples' own functions carry no annotations (user code); every other error is ragmeter's
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line and "[no-untyped-def]" not in line]
    assert not errors, proc.stdout
    assert "[no-untyped-def]" in proc.stdout  # mypy did check the examples


# -- 3. assert_scores refuses a rule that can never fail, as compare --gate does


@pytest.mark.parametrize("rules", [{"hit": ">=0"}, {"hit": "<=100%"}, {"mrr": float("-inf")}, {"all_files_hit": 0}])
def test_assert_scores_refuses_a_rule_that_can_never_fail(rules):
    from ragmeter.errors import InputError
    from ragmeter.testing import assert_scores

    result = ragmeter.evaluate(GOLDEN, RUN)
    with pytest.raises(InputError, match="can never fail"):
        assert_scores(result, rules)  # passed: a rule every run meets asserts nothing


def test_assert_scores_says_what_a_rule_that_can_never_pass_meant():
    from ragmeter.errors import InputError
    from ragmeter.testing import assert_scores

    with pytest.raises(InputError, match=r"'>=80' can never pass: hit lies between 0 and 1 .*did you mean >=80%\?"):
        assert_scores(ragmeter.evaluate(GOLDEN, RUN), {"hit": ">=80"})


def test_assert_scores_takes_a_numpy_number_as_a_bare_limit():
    np = pytest.importorskip("numpy")
    from ragmeter.testing import assert_scores

    result = ragmeter.evaluate(GOLDEN, RUN)
    assert_scores(result, {"hit": np.float32(0.75), "mrr": np.float64(0.5)})  # np.float32 was 'write an operator'
    with pytest.raises(AssertionError, match=r"hit .* >=0.9 +FAILED"):
        assert_scores(result, {"hit": np.float32(0.9)})


# -- 4. pandas frames a platform hands over: a bad one is an InputError naming the input and column


def _records(path: Path) -> list:
    import json

    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]


def test_a_pandas_column_of_mixed_types_is_an_input_error_naming_column_and_row():
    pd = pytest.importorskip("pandas")
    from ragmeter.errors import InputError

    run = pd.DataFrame(_records(RUN)).astype(object)
    run.loc[3, "answer"] = 5  # was pyarrow.lib.ArrowTypeError: Expected bytes, got a 'int' object
    with pytest.raises(InputError, match=r"^run: column 'answer' mixes types: row 3 holds a number \(5\) where row 0 holds a string"):
        ragmeter.score(GOLDEN, run)
    golden = pd.DataFrame(_records(GOLDEN)).astype(object)
    golden.loc[7, "question"] = 1.5
    with pytest.raises(InputError, match=r"^golden: column 'question' mixes types: row 7 holds a number"):
        ragmeter.evaluate(golden, RUN)


def test_a_pandas_frame_with_a_repeated_column_name_is_an_input_error_naming_it():
    pd = pytest.importorskip("pandas")
    from ragmeter.errors import InputError

    run = pd.DataFrame(_records(RUN))
    run = pd.concat([run, run[["answer"]]], axis=1)  # was a bare ValueError from Polars
    with pytest.raises(InputError, match=r"^run: column 'answer' appears twice"):
        ragmeter.score(GOLDEN, run)


def test_a_pandas_series_is_refused_naming_the_input():
    pd = pytest.importorskip("pandas")
    from ragmeter.errors import InputError

    with pytest.raises(InputError, match=r"^run: expected .*got Series"):  # was AttributeError: ... 'to_dicts'
        ragmeter.score(GOLDEN, pd.Series(_records(RUN)))


def test_a_pandas_frame_indexed_by_id_keeps_its_ids():
    pd = pytest.importorskip("pandas")

    expected = ragmeter.score(GOLDEN, RUN).summary["overall"]
    golden = pd.DataFrame(_records(GOLDEN)).set_index("id")  # the ids were dropped: 'golden has none'
    run = pd.DataFrame(_records(RUN)).set_index("id")
    assert ragmeter.score(golden, run).summary["overall"] == expected
    assert ragmeter.evaluate(golden, RUN).summary["retrieval"]["overall"] == expected


def test_a_run_whose_retrievals_are_all_null_is_not_refused_for_its_retrieval_mode():
    # every 'retrieved' null: a run without chunk lists; with a retrieval_mode field the run
    # was refused instead: "no 'retrieved' field; row 0 has 'retrieval_mode'", a field ragmeter reads itself
    pl = pytest.importorskip("polars")
    run = [{**record, "retrieved": None} for record in _records(RUN)]
    assert all("retrieval_mode" in record for record in run)
    without_mode = [{k: v for k, v in record.items() if k != "retrieval_mode"} for record in run]
    expected = ragmeter.score(GOLDEN, without_mode).summary["overall"]
    # no chunk list in any case: retrieval not scored (session 29; it was 0.0 over 45 cases)
    assert expected["hit_rate"] == {"value": None, "n_scored": 0, "n_total": 51}
    assert ragmeter.score(GOLDEN, run).summary["overall"] == expected
    assert ragmeter.score(GOLDEN, pl.DataFrame(run, infer_schema_length=None)).summary["overall"] == expected


# -- 5. two evaluations at once, each with its own custom metric of the same name


def test_two_threads_judging_their_own_rubric_of_the_same_name_get_their_own_verdicts(monkeypatch):
    # A platform evaluating for two teams at once, each with its own "tone_check". The metric was looked up by
    # name in one process-wide registry, so team A's cases judged after team B's run began used B's rubric.
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from ragmeter.judge import JudgeConfig, RubricMetric

    monkeypatch.setenv("RAGMETER_API_KEY", KEY)
    a_waiting, b_started = threading.Event(), threading.Event()
    rubrics = {"A": ("question", "answer"), "B": ("question", "answer", "reference_answer")}  # B's prompts differ

    def team_of(info):
        return "B" if "reference_answer" in (info.get("payload") or {}) else "A"

    def hold_a_until_b_starts(info):  # a server rule: A's first calls hang until B's first call comes in
        if info.get("task") != "custom-tone-check":
            return False
        if team_of(info) == "B":
            b_started.set()
            server.release()
            return False
        a_waiting.set()
        return not b_started.is_set()

    with FakeServer(api_key=KEY) as server:
        server.rules = [(hold_a_until_b_starts, "hang")]
        server.replies["custom-tone-check"] = lambda p: {"score": 1 if "reference_answer" in p else 5, "reason": "r"}
        cfg = JudgeConfig(base_url=server.base_url, model="m", cache=None, concurrency=2)

        def evaluate(team):
            if team == "B":
                assert a_waiting.wait(120)  # a safety bound, not a timing check
            metric = RubricMetric("tone_check", criteria=f"Is the answer polite? (team {team})", scale=(1, 5),
                                  fields=rubrics[team])
            return ragmeter.evaluate(GOLDEN, RUN, judge=cfg, metrics=[metric])

        with ThreadPoolExecutor(2) as pool:
            result_a, result_b = pool.map(evaluate, ["A", "B"])
    for result, score in ((result_a, 1.0), (result_b, 0.0)):
        scores = result.judge.filter(result.judge["status"] == "ok")["score"].to_list()
        assert len(scores) > 40 and set(scores) == {score}, (score, sorted(set(scores)))
