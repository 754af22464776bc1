"""Review session 21 of the judge: defects found scripting against ``ragmeter judge`` / ``eval``, each with the
test that failed before its fix."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ragmeter.judge import JudgeCallError, JudgeConfig, run_sync

from test_client import chat  # noqa: E402 (tests/judge is on sys.path: conftest.py)

ROOT = Path(__file__).resolve().parents[2]


# -- a model's refusal is a failed row at once, never a budget doubling ---------------------------------------
@pytest.mark.parametrize("reply", [
    {"content": None, "refusal": "I'm sorry, I can't help with that."},  # OpenAI's structured refusal
    {"content": "", "finish_reason": "content_filter"},                   # cut by the endpoint's filter
])
def test_a_refusal_fails_the_call_once_without_doubling_the_budget(server, fast_retry, reply):
    server.rules = [(lambda info: True, reply)]
    with pytest.raises(JudgeCallError) as ei:
        chat(server, policy=fast_retry, max_tokens=2000, cap=8000)
    # a larger output budget cannot change a refusal: before, 2000, 4000 and 8000 were each sent (and paid)
    assert [r["max_tokens"] for r in server.log] == [2000]
    err = ei.value
    assert err.kind == "refused" and ("refused" in str(err) or "content filter" in str(err))
    if reply.get("refusal"):
        assert "I'm sorry" in str(err) and err.raw == reply["refusal"]
    assert [a["outcome"] for a in err.attempts] == ["refused"]


def test_a_refused_row_is_counted_as_failed_with_its_kind(server, fast_retry, tmp_path):
    server.rules = [(lambda info: True, {"content": None, "refusal": "I can't judge this."})]
    res = run_sync([{"id": "c1", "question": "q?", "reference_answer": "a", "answer": "a"}],
                   JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", metrics=["correctness"],
                               cache=tmp_path / "c.sqlite", retry=fast_retry))
    m = res.summary["metrics"]["correctness"]
    assert (m["n_scored"], m["n_total"], m["n_failed"]) == (0, 1, 1)
    assert list(m["failures"]) == ["refused"] and "I can't judge this." in m["failures"]["refused"]["example"]
    assert res.summary["incomplete"]["failed"] == 1 and server.requests == 1


# -- a bad custom metric definition: one line naming the file and the field, exit 2, no traceback ------------
def _judge_cli(server, tmp_path, *args):
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "c1", "question": "q?", "reference_answer": "a", "answer": "a"}) + "\n")
    return subprocess.run([sys.executable, "-m", "ragmeter", "judge", "--cases", str(cases), "--base-url",
                           server.base_url, "--model", "gpt-4o-mini", "--metrics", "correctness", "--no-progress",
                           "--cache", str(tmp_path / "c.sqlite"), "--out", str(tmp_path / "out"), *args],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "python")})


@pytest.mark.parametrize("body, expected", [
    ('pass_threshold = "high"\n', r"metric 't': pass_threshold must be a number.*got 'high'"),
    ("pass_threshold = true\n", r"metric 't': pass_threshold must be a number.*got True"),
    ("steps = [1, 2]\n", r"metric 't': steps must be texts, got 1"),
    ("fields = [1]\n", r"metric 't': fields must be a list of strings; item 0 is 1"),
    ("version = [1]\n", r"metric 't': version must be a non-empty text"),
    ("[metrics.t.score_descriptions]\n5 = 3\n", r"metric 't': score_descriptions field '5' must be a text"),
])
def test_a_rubric_file_with_a_value_of_the_wrong_type_names_file_and_field(server, tmp_path, api_key, body,
                                                                          expected):
    path = tmp_path / "metrics.toml"
    path.write_text('[metrics.t]\ncriteria = "Is it polite?"\n' + body)
    proc = _judge_cli(server, tmp_path, "--metric-file", str(path))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"ragmeter: error: {path}: ") and re.search(expected, proc.stderr)
    assert server.total_requests == 0 and not (tmp_path / "out").exists()


def test_a_rubric_file_that_is_not_utf8_names_its_line(server, tmp_path, api_key):
    path = tmp_path / "metrics.toml"
    path.write_bytes(b'[metrics.t]\ncriteria = "caf\xe9"\n')
    proc = _judge_cli(server, tmp_path, "--metric-file", str(path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"ragmeter: error: {path}:2: not UTF-8 text" in proc.stderr


def test_a_field_the_data_lacks_and_a_builtin_name_name_the_metric_file(server, tmp_path, api_key):
    path = tmp_path / "metrics.toml"
    path.write_text('[metrics.t]\ncriteria = "Is it polite?"\nfields = ["answer", "policy"]\n')
    proc = _judge_cli(server, tmp_path, "--metric-file", str(path))
    assert proc.returncode == 2 and f"{path}: metric 't': field 'policy' is in none of the 1 cases" in proc.stderr
    path.write_text('[metrics.faithfulness]\ncriteria = "Is it polite?"\n')
    proc = _judge_cli(server, tmp_path, "--metric-file", str(path))
    assert proc.returncode == 2 and f"{path}: metric 'faithfulness': a built-in metric has that name" in proc.stderr
    assert server.total_requests == 0


# -- a metric named twice is judged once per case, never twice into one mean -----------------------------------
def test_a_metric_listed_twice_is_an_input_error(server, tmp_path, api_key, fast_retry):
    from ragmeter.errors import InputError

    with pytest.raises(InputError, match="'correctness' is listed twice"):
        JudgeConfig(base_url=server.base_url, model="m", metrics=["correctness", "faithfulness", "correctness"])
    # before: 2 rows for the one case (scored 2/2), each paid for
    proc = _judge_cli(server, tmp_path, "--metrics", "correctness,correctness")
    assert proc.returncode == 2 and "'correctness' is listed twice" in proc.stderr, proc.stderr
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text('[metrics.t]\ncriteria = "Is it polite?"\n')
    b.write_text('[metrics.t]\ncriteria = "Is it short?"\n')
    proc = _judge_cli(server, tmp_path, "--metric-file", str(a), "--metric-file", str(b))
    assert proc.returncode == 2 and f"{b}: metric 't' is also defined in {a}" in proc.stderr, proc.stderr
    assert server.total_requests == 0 and not (tmp_path / "out").exists()


def test_a_metric_module_reusing_a_builtin_name_is_named(server, tmp_path, api_key):
    path = tmp_path / "my_metrics.py"
    path.write_text("from ragmeter.judge import RubricMetric\n"
                    "faith = RubricMetric('faithfulness', criteria='Is it faithful?')\n")
    proc = _judge_cli(server, tmp_path, "--metric-module", str(path))
    assert proc.returncode == 2 and f"{path}: metric 'faithfulness': a built-in metric has that name" in proc.stderr
    assert "Traceback" not in proc.stderr and server.total_requests == 0


# -- limits and prices that cannot mean anything are refused, not run as "no limit" or a traceback -------------
@pytest.mark.parametrize("args, expected", [
    (("--timeout", "0"), "--timeout: must be a number of seconds > 0"),        # before: no time-out at all
    (("--timeout", "nan"), "--timeout: must be a number of seconds > 0"),
    (("--rpm", "0"), "--rpm: must be a number > 0"),                           # before: no limit
    (("--rpm", "nan"), "--rpm: must be a number > 0"),                         # before: the run hung
    (("--tpm", "-5"), "--tpm: must be a number > 0"),                          # before: a ValueError traceback
    (("--budget", "nan", "--price", "1,1"), "--budget: must be >= 0"),          # before: never reached
    (("--price=-1,2",), "--price: expected IN,OUT"),                           # before: a negative cost
    (("--price", "nan,1"), "--price: expected IN,OUT"),                        # before: cost $nan
])
def test_meaningless_limits_and_prices_are_input_errors(server, tmp_path, api_key, args, expected):
    proc = _judge_cli(server, tmp_path, *args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"ragmeter: error: {expected}" in proc.stderr
    assert server.total_requests == 0 and not (tmp_path / "out").exists()


def test_a_price_file_with_a_negative_or_nan_price_names_file_and_model(tmp_path):
    from ragmeter.errors import InputError
    from ragmeter.judge import PriceTable

    for bad in ('{"m": {"input": -1, "output": 2}}', '{"m": [NaN, 1]}'):
        path = tmp_path / "prices.json"
        path.write_text(bad)
        with pytest.raises(InputError, match=f"{re.escape(str(path))}: price of 'm': .*a number >= 0"):
            PriceTable.from_file(path)


def test_no_metric_at_all_is_an_input_error_not_an_empty_success(server, tmp_path, api_key):
    proc = _judge_cli(server, tmp_path, "--metrics", "")  # before: exit 0, an empty judge.parquet
    assert proc.returncode == 2 and "ragmeter: error: --metrics: no metric given" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()
    path = tmp_path / "metrics.toml"
    path.write_text('[metrics.t]\ncriteria = "Is it polite?"\n')
    proc = _judge_cli(server, tmp_path, "--metrics", "", "--metric-file", str(path))  # only the custom one
    assert proc.returncode == 0, proc.stderr
