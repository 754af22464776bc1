"""judge_summary.json says which ragmeter wrote it, as eval's and score's summary.json do (h33)."""
from __future__ import annotations

import json

import ragmeter
from ragmeter.report.data import RESULTS_FORMAT

from test_cli import cli, write_cases
from test_edges import finish


def test_judge_summary_json_names_the_format_tool_and_version(tmp_path, server, api_key):
    cases = write_cases(tmp_path / "cases.jsonl", 2)
    code, out, err = finish(cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness", key=api_key))
    assert code == 0, err
    summary = json.loads((tmp_path / "out" / "judge_summary.json").read_text(encoding="utf-8"))
    assert summary["results_format"] == RESULTS_FORMAT
    assert summary["tool"] == "ragmeter"
    assert summary["version"] == ragmeter.__version__
    assert summary["metrics"]["correctness"]["n_scored"] == 2  # the summary itself is still all there


def test_the_json_output_stays_the_summary_as_before(tmp_path, server, api_key):
    """Like score's --json, the printed summary is the one eval nests under judge: the keys are the file's."""
    cases = write_cases(tmp_path / "cases.jsonl", 2)
    code, out, err = finish(cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness", "--json",
                                key=api_key))
    assert code == 0, err
    printed = json.loads(out)
    assert "results_format" not in printed and "tool" not in printed  # --json prints the summary as before
