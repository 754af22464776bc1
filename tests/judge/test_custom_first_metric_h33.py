"""A first custom metric written from docs/api.md (h33): the slips a newcomer makes are caught before any call."""
from __future__ import annotations

import pytest

from ragmeter.errors import InputError
from ragmeter.judge import JudgeConfig, metric, run_sync

CASES = [{"id": "c1", "question": "What is the refund window?", "answer": "30 days [1]."}]


def config(server, m):
    return JudgeConfig(base_url=server.base_url, model="gpt-4o-mini", cache=None, metrics=[m])


@pytest.mark.parametrize("returned,shown", [('reply["cited"]', "True"), ('"yes" if reply["cited"] else "no"', "'yes'"),
                                            ('(reply["cited"], "why")', "True")])
def test_a_scoring_function_returning_no_number_is_refused_before_any_call(server, returned, shown):
    # before, it was found only on the judge's paid reply: every row failed as metric_error
    namespace: dict = {"metric": metric}
    exec(f"@metric(prompt='Does the field \"answer\" cite a source as [n]?', schema={{'cited': bool}}, "
         f"fields=('answer',))\ndef cites(reply, case):\n    return {returned}\n", namespace)
    with pytest.raises(InputError) as err:
        run_sync(CASES, config(server, namespace["cites"]))
    said = str(err.value)
    assert said.startswith(f"metric 'cites': the scoring function returned {shown} on a sample reply") and \
        "not a number" in said and "before any call" in said, said
    assert server.requests == 0


def test_a_scoring_function_returning_none_or_a_number_off_the_sample_scale_still_runs(server):
    # the sample reply is not a real one: a score it puts off the scale, or no score, is no error
    @metric(prompt='Rate the field "answer" from 2 to 10.', schema={"rating": int}, fields=("answer",), scale=(2, 10))
    def rated(reply, case):
        return None if reply["rating"] == 0 else reply["rating"]

    server.replies["custom-rated"] = lambda p: {"rating": 7}
    res = run_sync(CASES, config(server, rated))
    assert res.rows[0]["status"] == "ok" and res.rows[0]["score"] == 7.0


def test_naming_one_custom_metric_in_metrics_judges_every_metric_of_the_module_and_no_built_in_one(tmp_path):
    # docs/api.md, "From the command line": how a first custom metric is judged alone
    import argparse

    from ragmeter.cli.judge import with_custom_metrics

    module = tmp_path / "my_metrics.py"
    module.write_text("from ragmeter.judge import metric\n\n"
                      "@metric(prompt='Is the field \"answer\" short?', schema={'short': bool}, fields=('answer',))\n"
                      "def short(reply, case):\n    return 1.0 if reply['short'] else 0.0\n\n"
                      "@metric(prompt='Is the field \"answer\" kind?', schema={'kind': bool}, fields=('answer',))\n"
                      "def kind(reply, case):\n    return 1.0 if reply['kind'] else 0.0\n")
    args = argparse.Namespace(metric_file=[], metric_module=[str(module)])
    assert [m.name for m in with_custom_metrics(["short"], args)] == ["short", "kind"]
    names = [getattr(m, "name", m) for m in with_custom_metrics(["faithfulness"], args)]
    assert names == ["faithfulness", "short", "kind"]
