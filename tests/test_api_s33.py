"""The Python API speaks Python (session 33): its messages name the Python argument (``timeout=``), never a flag
the caller does not have (``--timeout``), while the command line keeps naming its flags; and it says what it could
not do (``repeat`` without a judge, an interrupted repeat, a ScoreResult given to ``assert_scores``)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ragmeter
from ragmeter.errors import InputError, RagmeterError

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "judge"))

from fakeserver import FakeServer  # noqa: E402

PYTHON_DIR = HERE.parent / "python"
EX = PYTHON_DIR / "ragmeter" / "_example"
GOLDEN = [{"id": f"c{i}", "question": f"question {i}?", "expectedFileNames": ["a.md"], "referenceAnswer": "a"}
          for i in range(4)]
RUN = [{"id": f"c{i}", "answer": f"answer {i}", "retrieved": [{"file": "a.md" if i % 2 else "b.md", "text": "t"}]}
       for i in range(4)]
CLOSED = "http://127.0.0.1:9/v1"  # nothing listens on port 9: the connection is refused at once
API_KEY = "sk-test-RAGMETER-SECRET-s33-0123456789"


def _message(call) -> str:
    with pytest.raises(RagmeterError) as info:
        call()
    return str(info.value)


def _speaks_python(message: str, argument: str) -> None:
    assert argument in message, message
    assert " --" not in f" {message}" and "(--" not in message, message  # no flag a Python caller does not have


# -- 1. messages name the Python argument --------------------------------------------------------------------------
@pytest.mark.parametrize("option, argument", [
    ({"timeout": 0}, "timeout"),
    ({"timeout": True}, "timeout"),
    ({"rpm": 0.001}, "rpm"),
    ({"rpm": -1}, "rpm"),
    ({"tpm": 0}, "tpm"),
    ({"metrics": ["nope"]}, "metrics"),
    ({"metrics": []}, "metrics"),
    ({"metrics": ["faithfulness", "faithfulness"]}, "metrics"),
    ({"max_tokens": 2.5}, "max_tokens"),
    ({"max_retry_tokens": 0}, "max_retry_tokens"),
    ({"n_questions": 0}, "n_questions"),
    ({"concurrency": "8"}, "concurrency"),
    ({"cache": 5}, "cache"),
    ({"budget": -1}, "budget"),
    ({"relevancy_variant": "x"}, "relevancy_variant"),
    ({"precision_against": "x"}, "precision_against"),
    ({"context_size": 0}, "context_size"),
])
def test_judge_config_names_its_own_argument(option, argument):
    from ragmeter.judge import JudgeConfig

    _speaks_python(_message(lambda: JudgeConfig(base_url=CLOSED, model="m", **option)), argument)


@pytest.mark.parametrize("option, argument", [
    ({"timeout": 0}, "timeout"),
    ({"rpm": 0.001}, "rpm"),
    ({"rpm": 0}, "rpm"),
    ({"concurrency": 0}, "concurrency"),
    ({"repeat": 0}, "repeat"),
    ({"refresh": "no"}, "refresh"),
    ({"expect_mode": 5}, "expect_mode"),
    ({"cache": 5}, "cache"),
    ({"rate_control": "x"}, "rate_control"),
])
def test_collect_names_its_own_argument(option, argument):
    _speaks_python(_message(lambda: ragmeter.collect(GOLDEN, target=lambda case: {}, **option)), argument)


def test_a_gate_in_python_is_named_gate():
    result = ragmeter.evaluate(GOLDEN, RUN)
    _speaks_python(_message(lambda: result.compare(result, gate="hit>=")), "gate")
    _speaks_python(_message(lambda: result.compare(result, gate=" ")), "gate")
    from ragmeter.testing import assert_no_regression

    _speaks_python(_message(lambda: assert_no_regression(result, result, "nonsense>=1")), "gate")


def test_an_unreachable_judge_is_named_by_base_url_and_no_cache_by_cache_none(monkeypatch):
    from ragmeter.judge import JudgeConfig

    monkeypatch.setenv("RAGMETER_API_KEY", API_KEY)

    config = JudgeConfig(base_url=CLOSED, model="m", cache=None, metrics=["correctness"])
    message = _message(lambda: ragmeter.evaluate(GOLDEN, RUN, judge=config))
    _speaks_python(message, "base_url=")
    assert "cache=None" in message, message


def test_a_budget_without_a_price_is_named_by_prices():
    from ragmeter.judge import JudgeConfig

    config = JudgeConfig(base_url=CLOSED, model="no-such-model-priced", cache=None, budget=1.0)
    _speaks_python(_message(lambda: ragmeter.evaluate(GOLDEN, RUN, judge=config)), "prices=")


def test_the_command_line_still_names_its_flags_and_leaves_python_speaking_python(tmp_path, capsys):
    from ragmeter.cli import main
    from ragmeter.judge import JudgeConfig

    common = ["eval", "--golden", str(EX / "golden.jsonl"), "--run", str(EX / "run.jsonl"), "--out",
              str(tmp_path / "out"), "--base-url", CLOSED, "--model", "m", "--no-cache", "--no-progress"]
    for extra, flag in ((["--timeout", "0"], "--timeout"), (["--metrics", "nope"], "--metrics"),
                        (["--max-tokens", "0"], "--max-tokens"), (["--rpm", "0.001"], "--rpm")):
        assert main(common + extra) == 2
        err = capsys.readouterr().err
        assert f"error: {flag}" in err, err
    assert main(common + ["--metrics", "correctness"]) == 2  # the endpoint refuses the connection
    err = capsys.readouterr().err
    assert "check --base-url" in err and "(--no-cache)" in err, err
    # the command line's front ends with the command: the Python functions speak Python again
    _speaks_python(_message(lambda: JudgeConfig(base_url=CLOSED, model="m", timeout=0)), "timeout")


# -- 2. repeat without a judge ---------------------------------------------------------------------------------------
def test_evaluate_refuses_repeat_without_a_judge():
    message = _message(lambda: ragmeter.evaluate(GOLDEN, RUN, repeat=3))
    _speaks_python(message, "repeat=3")
    assert "judge=" in message, message
    assert ragmeter.evaluate(GOLDEN, RUN, repeat=1).summary["settings"]["repeat"] == 1  # the default still runs


def test_eval_refuses_repeat_without_a_judge_before_writing_anything(tmp_path, capsys):
    from ragmeter.cli import main

    out = tmp_path / "out"
    code = main(["eval", "--golden", str(EX / "golden.jsonl"), "--run", str(EX / "run.jsonl"), "--out", str(out),
                 "--repeat", "3"])
    err = capsys.readouterr().err
    assert code == 2 and "--repeat 3" in err and "--base-url" in err, err
    assert not out.exists()


# -- 3. an interrupted repeat says what was done over every repeat --------------------------------------------------
REPEAT_SCRIPT = """
import json, sys
import ragmeter
from ragmeter.judge import JudgeConfig

golden = [json.loads(line) for line in open(sys.argv[3], encoding="utf-8") if line.startswith("{")][:6]
run = [json.loads(line) for line in open(sys.argv[4], encoding="utf-8") if line.startswith("{")]
config = JudgeConfig(base_url=sys.argv[1], model="gpt-4o-mini", metrics=["faithfulness"], cache=sys.argv[2],
                     timeout=5)
try:
    result = ragmeter.evaluate(golden, [r for r in run if r["id"] in {g["id"] for g in golden}], judge=config,
                               repeat=3)
except KeyboardInterrupt as exc:
    print("KeyboardInterrupt: " + str(exc))
    sys.exit(130)
print("calls", result.summary["repeats"]["runs"][0]["calls"])
"""


@pytest.fixture()
def judge_server():
    server = FakeServer(api_key=API_KEY).start()
    yield server
    server.stop()


def test_evaluate_interrupted_in_repeat_two_says_what_every_repeat_did_and_kept(tmp_path, judge_server):
    (tmp_path / "repeat_script.py").write_text(REPEAT_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR), "RAGMETER_API_KEY": API_KEY}
    args = [sys.executable, "repeat_script.py", judge_server.base_url]
    inputs = [str(EX / "golden.jsonl"), str(EX / "run.jsonl")]
    probe = subprocess.run(args + ["probe.sqlite", *inputs], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120)
    assert probe.returncode == 0, probe.stderr
    per_repeat = judge_server.requests // 3  # repeat 1 through the cache, 2 and 3 without: the same calls each
    judge_server.requests = 0
    answered = per_repeat + 1  # repeat 1 done, one call of repeat 2 answered, the rest held
    judge_server.rules = [(lambda info: judge_server.requests > answered, "hang")]
    out, err = _interrupted_after(args + ["c.sqlite", *inputs], tmp_path, env, judge_server, answered)
    said = out.strip().splitlines()[-1]
    # before: "... judge rows finished; ... no cache was used (--no-cache): a rerun sends every call again", about
    # repeat 2 alone, though repeat 1's replies were in c.sqlite
    assert "repeat 2 of 3" in said and "repeat 1 finished" in said, said
    assert "c.sqlite" in said and "cache=" in said and "--" not in said, said
    assert "repeats 2 to 3" in said and "again" in said, said


def test_eval_interrupted_in_repeat_two_says_it_with_the_flags(tmp_path, judge_server):
    env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR), "RAGMETER_API_KEY": API_KEY}
    args = [sys.executable, "-m", "ragmeter", "eval", "--golden", str(EX / "golden.jsonl"), "--run",
            str(EX / "run.jsonl"), "--out", "out", "--cache", "c.sqlite", "--base-url", judge_server.base_url,
            "--model", "gpt-4o-mini", "--metrics", "correctness", "--no-progress", "--timeout", "5", "--repeat", "2"]
    probe = subprocess.run(args[:-1] + ["1"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    per_repeat, answered = judge_server.requests, judge_server.requests + 1
    judge_server.requests = 0
    (tmp_path / "c.sqlite").unlink()
    judge_server.rules = [(lambda info: judge_server.requests > answered, "hang")]
    out, err = _interrupted_after(args, tmp_path, env, judge_server, answered)
    said = err.strip().splitlines()[-1]
    assert "interrupted in repeat 2 of 2: repeat 1 finished" in said, said
    assert f"{per_repeat} replies are cached in c.sqlite" in said and "the same --cache" in said, said
    assert "repeat 2 bypass the cache" in said and "cache=" not in said, said


# -- 4. assert_scores takes a ScoreResult ----------------------------------------------------------------------------
def test_assert_scores_takes_a_score_result_for_retrieval_rules():
    from ragmeter.testing import assert_scores

    scored = ragmeter.score(EX / "golden.jsonl", EX / "run.jsonl")
    hit = scored.summary["overall"]["hit_rate"]["value"]
    assert_scores(scored, {"hit": f">={hit - 0.01}", "mrr": ">0.1"})
    with pytest.raises(AssertionError, match="hit"):
        assert_scores(scored, {"hit": f">={hit + 0.01}"})


def test_assert_no_regression_compares_the_retrieval_of_two_score_results():
    from ragmeter.testing import assert_no_regression

    base = ragmeter.score(EX / "golden.jsonl", EX / "run.jsonl", k=5)
    assert assert_no_regression(base, base, "hit>=-2pp").passed
    with pytest.raises(AssertionError, match="hit>=-2pp"):  # k=3 finds fewer: hit drops 4.4 points
        assert_no_regression(ragmeter.score(EX / "golden.jsonl", EX / "run.jsonl", k=3), base, "hit>=-2pp",
                             force=True)


def test_assert_scores_on_a_score_result_refuses_a_judged_metric_clearly():
    from ragmeter.testing import assert_scores

    scored = ragmeter.score(EX / "golden.jsonl", EX / "run.jsonl")
    message = _message(lambda: assert_scores(scored, {"hit": ">=0.5", "faithfulness": ">=0.8"}))
    assert "faithfulness" in message and "ragmeter.score" in message and "evaluate" in message, message


# -- 5. ids of in-memory inputs that do not match --------------------------------------------------------------------
@pytest.mark.parametrize("call", [ragmeter.score, ragmeter.evaluate])
def test_run_ids_not_in_an_in_memory_golden_set_are_worded_once(call):
    run = [{"id": f"x{i}", "answer": "a", "retrieved": [{"file": "a.md", "text": "t"}]} for i in range(3)]
    message = _message(lambda: call(GOLDEN, run))
    assert "golden set golden" not in message and "'x0'" in message and "4 cases" in message, message


# -- 6. a platform's wrong inputs: one message naming the argument, never a traceback from deep inside ----------------
@pytest.mark.parametrize("option, argument", [
    ({"base_url": None}, "base_url"),          # was a TypeError from urllib ('a bytes-like object is required')
    ({"base_url": ""}, "base_url"),            # was taken: every call failed later
    ({"model": None}, "model"),                # was taken: requests for model None
    ({"metrics": None}, "metrics"),            # was a TypeError ('NoneType' object is not iterable)
    ({"budget": "5"}, "budget"),               # was a TypeError from '>='
    ({"context_size": "8k"}, "context_size"),  # was a ValueError from int()
    ({"json_mode": "nah"}, "json_mode"),       # was a ValueError once the run began
    ({"retry": {"max_attempts": 3}}, "retry"),  # was an AttributeError once the run began
])
def test_judge_config_refuses_a_wrong_value_naming_it(option, argument):
    from ragmeter.judge import JudgeConfig

    config = {"base_url": CLOSED, "model": "m", **option}
    message = _message(lambda: JudgeConfig(**config))
    assert message.startswith(argument), message


def test_judge_config_takes_metric_names_separated_by_commas_as_evaluate_does():
    from ragmeter.judge import JudgeConfig

    # was "metrics: unknown metric 'f'": the string was read letter by letter
    assert JudgeConfig(base_url=CLOSED, model="m", metrics="faithfulness").metrics == ("faithfulness",)
    assert JudgeConfig(base_url=CLOSED, model="m", metrics="faithfulness, correctness").metrics == (
        "faithfulness", "correctness")


@pytest.mark.parametrize("cases, config, argument", [
    (None, "ok", "cases"),                                        # was a TypeError
    ([{"id": "a", "question": "q", "answer": "a"}], {"model": "m"}, "config"),  # was an AttributeError (tally)
])
def test_run_sync_names_a_wrong_argument(cases, config, argument):
    from ragmeter.judge import JudgeConfig, run_sync

    config = JudgeConfig(base_url=CLOSED, model="m", cache=None) if config == "ok" else config
    assert _message(lambda: run_sync(cases, config)).startswith(argument)


def test_collect_of_an_empty_golden_set_is_refused_before_any_call():
    calls = []
    message = _message(lambda: ragmeter.collect([], target=lambda case: calls.append(case) or {}))
    assert message.startswith("golden") and calls == [], message  # was an IndexError from inside the runner


def test_collect_names_a_target_of_the_wrong_shape_as_the_argument():
    message = _message(lambda: ragmeter.collect(GOLDEN, target=lambda case, extra: {}))
    _speaks_python(message, "target=")
    _speaks_python(_message(lambda: ragmeter.collect(GOLDEN, target="no_such_module_s33:ask")), "target=")


def test_score_table_takes_one_metric_name_as_a_string():
    from ragmeter.testing import score_table

    scored = ragmeter.score(EX / "golden.jsonl", EX / "run.jsonl")
    # was "unknown metric 'h'": the string was read letter by letter
    assert [row[0] for row in score_table(scored, "hit")] == ["hit"]
    assert [row[0] for row in score_table(scored, "hit,mrr")] == ["hit", "mrr"]


@pytest.mark.parametrize("url", ["api.openai.com/v1", "localhost:8000/v1", "ftp://example.com/v1"])
def test_judge_config_refuses_a_base_url_that_is_not_http_as_eval_does(url):
    from ragmeter.judge import JudgeConfig

    # was taken: every call failed later ('cannot connect'), while `--base-url api.openai.com/v1` was refused
    for name in ("base_url", "embeddings_base_url"):
        options = {"base_url": CLOSED, "model": "m", name: url}
        message = _message(lambda: JudgeConfig(**options))
        assert message.startswith(f"{name}: expected an http:// or https:// URL"), message


@pytest.mark.parametrize("options, argument", [
    ({"by": "category"}, "by='category'"),
    ({"by": "nope"}, "by='nope'"),
    ({"target": 2}, "target=2"),
    ({"hard": ["nope"]}, "hard"),
    ({"hard": [" "]}, "hard"),
    ({"targets": "category=term"}, "targets"),
])
def test_audit_names_its_own_arguments(options, argument):
    golden = [{**case, "category": "term" if i % 2 else "multi"} for i, case in enumerate(GOLDEN)]
    _speaks_python(_message(lambda: ragmeter.audit(golden, **options)), argument)


@pytest.mark.parametrize("option, argument", [
    ({"dry_run": "no"}, "dry_run"),                # each was read as true: "no" is a non-empty string
    ({"refresh_failed": "no"}, "refresh_failed"),
    ({"honest_no_answer": "no"}, "honest_no_answer"),
    ({"preflight": "no"}, "preflight"),
    ({"progress": "no"}, "progress"),
    ({"no_answer_categories": "noanswer"}, "no_answer_categories"),  # was matched as a substring: 'answer' too
    ({"prices": "prices.json"}, "prices"),         # was taken, and failed once a price was looked up
    ({"rate_period": 0}, "rate_period"),
])
def test_judge_config_refuses_a_flag_or_a_table_of_the_wrong_kind(option, argument):
    from ragmeter.judge import JudgeConfig

    message = _message(lambda: JudgeConfig(base_url=CLOSED, model="m", **option))
    assert message.startswith(argument), message


def test_compare_and_write_refuse_a_flag_that_is_not_true_or_false(tmp_path):
    result = ragmeter.evaluate(GOLDEN, RUN)
    # force="no" forced the comparison, reports="no" wrote the reports: a non-empty string is true
    assert _message(lambda: result.compare(result, force="no")).startswith("force")
    assert _message(lambda: result.write(tmp_path / "out", reports="no")).startswith("reports")
    assert not (tmp_path / "out").exists()


def test_collect_refuses_a_policy_that_is_not_a_retry_policy():
    calls = []
    message = _message(lambda: ragmeter.collect(GOLDEN, target=lambda case: calls.append(case) or {},
                                                policy={"max_attempts": 2}))
    assert message.startswith("policy") and calls == [], message  # was taken; its first retry failed deep inside


def _interrupted_after(args, cwd, env, judge_server, answered):
    """Run ``args``, send SIGINT once the server has answered ``answered`` calls; (stdout, stderr) of a clean
    exit 130."""
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while judge_server.requests <= answered:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err, err
    return out, err


def test_a_refused_key_says_how_to_give_it_in_each_front() -> None:
    """A 401 told a Python caller to set environment variables only, though JudgeConfig takes api_key=."""
    from ragmeter._front import command_line
    from ragmeter.judge.retry import RetryPolicy, classify

    def said() -> str:
        return classify(attempt=1, policy=RetryPolicy(), status=401, body='{"error": "bad key"}').message

    in_python = said()
    assert "pass api_key= or set RAGMETER_API_KEY or OPENAI_API_KEY" in in_python, in_python
    with command_line():
        on_the_command_line = said()
    assert "(set RAGMETER_API_KEY or OPENAI_API_KEY)" in on_the_command_line, on_the_command_line
    assert "api_key=" not in on_the_command_line, on_the_command_line
