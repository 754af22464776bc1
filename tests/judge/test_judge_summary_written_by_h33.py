"""judge_summary.json says which ragmeter wrote it, as eval's and score's summary.json do (h33)."""
from __future__ import annotations

import json

import ragmeter
from ragmeter.report.data import RESULTS_FORMAT

from evalcli import eval_cli
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


def test_the_json_output_is_the_file_with_the_keys(tmp_path, server, api_key):
    """--json prints what judge_summary.json holds, as eval's --json prints its summary.json."""
    cases = write_cases(tmp_path / "cases.jsonl", 2)
    code, out, err = finish(cli(tmp_path, server, "--cases", str(cases), "--metrics", "correctness", "--json",
                                key=api_key))
    assert code == 0, err
    printed = json.loads(out)
    assert printed == json.loads((tmp_path / "out" / "judge_summary.json").read_text(encoding="utf-8"))
    assert (printed["results_format"], printed["tool"]) == (RESULTS_FORMAT, "ragmeter")


def test_eval_summary_judge_section_does_not_repeat_them(tmp_path, server, api_key):
    """eval's summary.json has the keys at its top: its judge section stays without them."""
    out = tmp_path / "ev"
    proc = eval_cli("--metrics", "correctness", "--no-cache", "--out", str(out), server=server)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["results_format"] == RESULTS_FORMAT and summary["judge"]["n_cases"] == 51
    assert not {"results_format", "tool", "version"} & set(summary["judge"])
