"""A custom metric's definition (h33): what decides its value, not only its prompt, is what compare checks.

Two identities: the request (prompt text, model settings) keys the judge cache, so a paid reply is reused
whenever the request is unchanged; the definition (the request plus the scoring function, scale, pass
threshold and reply schema) is what ``compare`` checks, so an edit of any of them is never read as a change
of the system under test."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragmeter.judge import JudgeConfig, metric, run_sync
from ragmeter.judge.custom import function_identity

ROOT = Path(__file__).resolve().parents[2]
PROMPT = 'How blue is the field "answer"? Schema: {"score": <integer 0-5>, "reason": "<text>"}'
SCHEMA = {"score": int, "reason": str}
CASES = [{"id": f"c{i}", "question": f"What colour is item {i}?",
          "answer": f"Item {i} is {'blue' if i % 2 else 'red'}."} for i in range(4)]


def scored_as_is(**kw):
    @metric(prompt=PROMPT, schema=kw.pop("schema", SCHEMA), fields=kw.pop("fields", ("answer",)),
            scale=kw.pop("scale", (0, 5)), **kw)
    def blueness(reply, case):
        return reply["score"]
    return blueness


def scored_plus_one():
    @metric(prompt=PROMPT, schema=SCHEMA, fields=("answer",), scale=(0, 5))
    def blueness(reply, case):
        return min(5, reply["score"] + 1)
    return blueness


def judged(server, tmp_path, fast_retry, m):
    cfg = JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", cache=tmp_path / "cache.sqlite",
                      retry=fast_retry, timeout=2, metrics=[m])
    return run_sync(CASES, cfg).summary


def test_editing_the_scoring_function_changes_the_definition_and_reuses_the_paid_replies(server, tmp_path, fast_retry):
    before = judged(server, tmp_path, fast_retry, scored_as_is())
    sent = server.requests
    assert sent == len(CASES)
    after = judged(server, tmp_path, fast_retry, scored_plus_one())
    assert server.requests == sent  # the requests are the same: every reply comes from the cache
    assert after["prompts"] == before["prompts"]  # the request identity (prompt_version) is unchanged
    b, a = before["definitions"]["blueness"], after["definitions"]["blueness"]
    assert a["prompt"] == b["prompt"] == before["prompts"]["blueness"]
    assert a["scoring"] != b["scoring"] and a["version"] != b["version"]
    # the same definition judged again is the same version
    assert judged(server, tmp_path, fast_retry, scored_as_is())["definitions"]["blueness"] == b


@pytest.mark.parametrize("edit,part", [
    ({"schema": {"score": "number", "reason": str}}, "schema"),  # the prompt has its own Schema line: same request
    ({"pass_threshold": 3}, "pass_threshold"),
    ({"scale": (0, 10)}, "scale"),
])
def test_editing_the_schema_or_the_threshold_changes_the_definition_not_the_request(server, tmp_path, fast_retry,
                                                                                      edit, part):
    before = judged(server, tmp_path, fast_retry, scored_as_is())
    sent = server.requests
    after = judged(server, tmp_path, fast_retry, scored_as_is(**edit))
    assert server.requests == sent and after["prompts"] == before["prompts"]
    b, a = before["definitions"]["blueness"], after["definitions"]["blueness"]
    assert a[part] != b[part] and a["version"] != b["version"]
    assert {k for k in a if a[k] != b[k]} == {part, "version"}


def test_editing_the_fields_the_judge_sees_is_another_request_and_another_definition(server, tmp_path, fast_retry):
    # the prompt text is the same, so its version is: only the definition tells the two apart
    before = judged(server, tmp_path, fast_retry, scored_as_is())
    sent = server.requests
    after = judged(server, tmp_path, fast_retry, scored_as_is(fields=("question", "answer")))
    assert server.requests == sent + len(CASES)  # another payload: asked again
    b, a = before["definitions"]["blueness"], after["definitions"]["blueness"]
    assert {k for k in a if a[k] != b[k]} == {"fields", "version"}


def test_a_rubric_whose_pass_threshold_changed_is_another_definition_on_the_same_request(server, tmp_path,
                                                                                      fast_retry):
    from ragmeter.judge import RubricMetric

    def tone(threshold):
        return RubricMetric("tone_check", criteria="Is the answer polite?", scale=(1, 5), pass_threshold=threshold,
                            fields=("answer",))

    before = judged(server, tmp_path, fast_retry, tone(4))
    sent = server.requests
    after = judged(server, tmp_path, fast_retry, tone(3))
    assert server.requests == sent and after["prompts"] == before["prompts"]
    b, a = before["definitions"]["tone_check"], after["definitions"]["tone_check"]
    assert {k for k in a if a[k] != b[k]} == {"pass_threshold", "version"}
    assert b["scale"] == "1-5" and b["scoring"] == "rubric"


def test_a_built_in_metric_has_no_definition_entry(server, tmp_path, fast_retry):
    cfg = JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", cache=tmp_path / "cache.sqlite",
                      retry=fast_retry, timeout=2, metrics=[scored_as_is(), "correctness"])
    summary = run_sync([{**c, "reference_answer": "Item is blue"} for c in CASES], cfg).summary
    assert set(summary["definitions"]) == {"blueness"} and set(summary["prompts"]) == {"blueness", "correctness"}


# -- the identity of a function -----------------------------------------------------------------------------
def test_a_decorated_function_is_identified_by_its_own_source_not_its_decorator():
    # the decorator holds the prompt: a prompt edit is the prompt's change, not the scoring function's
    one = scored_as_is(pass_threshold=3).fn
    other = metric(prompt="Another prompt entirely, about the field \"answer\".", schema=SCHEMA,
                   fields=("answer",))(one).fn
    assert function_identity(one) == function_identity(other)
    assert function_identity(one) != function_identity(scored_plus_one().fn)


IDENTITY_OF = """
import sys
from ragmeter.judge.custom import function_identity
namespace = {}
exec(compile(sys.argv[1], "<typed in a REPL>", "exec"), namespace)  # no source file: inspect cannot read it
print(function_identity(namespace["score"]))
"""


def identity_in_a_new_process(code, seed):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python"), "PYTHONHASHSEED": str(seed)}
    proc = subprocess.run([sys.executable, "-c", IDENTITY_OF, code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_function_without_source_is_identified_by_its_code_the_same_in_every_process():
    # a set of texts is a frozenset constant whose order follows the process's string hashing
    code = "score = lambda reply, case: 1.0 if reply['tone'] in {'calm', 'kind', 'warm', 'clear'} else 0.0\n"
    seen = {identity_in_a_new_process(code, seed) for seed in (1, 2, 3)}
    assert len(seen) == 1
    edited = code.replace("1.0 if", "0.5 if")
    assert identity_in_a_new_process(edited, 1) not in seen
    nested = "def score(reply, case):\n    def inner(x):\n        return x + 1\n    return inner(reply['n'])\n"
    assert identity_in_a_new_process(nested, 1) != identity_in_a_new_process(nested.replace("x + 1", "x + 2"), 1)


# -- compare -----------------------------------------------------------------------------------------------
MODULE = '''from ragmeter.judge import metric


@metric(prompt={prompt!r}, schema={{"score": int, "reason": str}}, fields=("answer",), scale=(0, 5))
def blueness(reply, case):
    return {body}
'''
GOLDEN = [{"id": c["id"], "question": c["question"], "reference_answer": "Item is blue", "expected_files": ["kb.md"]}
          for c in CASES]
RUN = [{"id": c["id"], "answer": c["answer"], "retrieved": [{"file": "kb.md", "text": "item is blue"}]} for c in CASES]


def ragmeter(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    return subprocess.run([sys.executable, "-m", "ragmeter", *map(str, args)], capture_output=True, text=True, env=env)


def evaluated(server, tmp_path, name, prompt=PROMPT, body='reply["score"]'):
    module = tmp_path / f"{name}.py"
    module.write_text(MODULE.format(prompt=prompt, body=body))
    golden, run = tmp_path / "golden.jsonl", tmp_path / "run.jsonl"
    golden.write_text("".join(json.dumps(r) + "\n" for r in GOLDEN))
    run.write_text("".join(json.dumps(r) + "\n" for r in RUN))
    out = tmp_path / name
    proc = ragmeter("eval", "--golden", golden, "--run", run, "--base-url", server.base_url, "--model", "gpt-4o-mini",
                    "--metrics", "blueness", "--metric-module", module, "--cache", tmp_path / "cache.sqlite",
                    "--out", out)
    assert proc.returncode == 0, proc.stderr
    return out


def test_compare_refuses_a_metric_whose_scoring_function_changed_and_says_so(server, tmp_path):
    # before, the edit kept the prompt version: compare reported the +1 of every score as the system's change
    base = evaluated(server, tmp_path, "base")
    sent = server.requests
    cand = evaluated(server, tmp_path, "cand", body='min(5, reply["score"] + 1)')
    assert server.requests == sent  # the paid replies were reused
    proc = ragmeter("compare", base, cand)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    said = " ".join(proc.stderr.split())
    assert "judge metric 'blueness': its definition differs (its scoring function)" in said, said
    assert "Traceback" not in proc.stderr
    same = evaluated(server, tmp_path, "same")
    assert ragmeter("compare", base, same).returncode == 0


def test_compare_says_the_prompt_changed_when_it_did(server, tmp_path):
    base = evaluated(server, tmp_path, "base")
    cand = evaluated(server, tmp_path, "cand", prompt=PROMPT.replace("How blue", "How very blue"))
    proc = ragmeter("compare", base, cand)
    assert proc.returncode == 2
    said = " ".join(proc.stderr.split())
    assert "judge metric 'blueness': its definition differs (its prompt)" in said, said


def test_compare_with_a_run_that_records_no_definitions_checks_the_prompts_as_before():
    from ragmeter.compare import _custom_metric_differences

    def summary(prompt, definitions=None):
        judge = {"prompts": {"blueness": prompt}}
        if definitions is not None:
            judge["definitions"] = {"blueness": definitions}
        return {"judge": judge}

    old_a, old_b = summary("custom-blueness@v1-aaaa"), summary("custom-blueness@v1-bbbb")
    assert len(_custom_metric_differences(old_a, old_b)) == 1
    assert _custom_metric_differences(old_a, summary("custom-blueness@v1-aaaa")) == []
    new = summary("custom-blueness@v1-aaaa", {"version": "def-1", "prompt": "custom-blueness@v1-aaaa",
                                              "scoring": "src-1"})
    assert _custom_metric_differences(old_a, new) == []  # an older folder: its scoring function is not known


def test_one_threshold_written_as_an_integer_or_a_float_is_one_definition():
    from ragmeter.judge.custom import definition

    assert definition(scored_as_is(pass_threshold=4)) == definition(scored_as_is(pass_threshold=4.0))
    assert definition(scored_as_is(pass_threshold=4)) != definition(scored_as_is(pass_threshold=4.5))
