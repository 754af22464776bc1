"""The Python examples of docs/api.md run as written: the blocks in order in one namespace, in a folder holding
the bundled example as golden.jsonl and run.jsonl, with a loopback judge for OpenAI's URL. Where a block leaves
a value to the reader (``judge=...``, ``evaluation_dataset``) the test supplies one and says so here."""
from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List

import pytest

sys.path.insert(0, str(Path(__file__).parent / "judge"))

from fakeserver import FakeServer  # noqa: E402

import ragmeter  # noqa: E402
from ragmeter.cli.demo import example_dir  # noqa: E402

DOC = Path(__file__).resolve().parent.parent / "docs" / "api.md"
KEY = "sk-test-docs-0123456789"
OPENAI = 'base_url="https://api.openai.com/v1"'


def python_blocks() -> List[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def block(starting: str) -> str:
    found = [b for b in python_blocks() if b.lstrip().startswith(starting)]
    assert len(found) == 1, f"docs/api.md: no single python block starts with {starting!r}"
    return found[0]


@pytest.fixture()
def docs_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    ex = example_dir()
    for name in ("golden.jsonl", "run.jsonl"):
        shutil.copy(ex / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGMETER_API_KEY", KEY)
    with FakeServer(api_key=KEY) as server:
        yield tmp_path, server


def run_block(code: str, ns: Dict[str, Any], server: FakeServer, name: str) -> None:
    code = code.replace(OPENAI, f'base_url="{server.base_url}"')
    exec(compile(code, f"docs/api.md: {name}", "exec"), ns)


def test_every_python_block_is_run_here() -> None:
    """A block added to docs/api.md is added to the test below (or the count here is changed on purpose)."""
    assert [b.splitlines()[0] for b in python_blocks()] == [
        "import ragmeter", 'baseline = ragmeter.EvalResult.load("results-main")      # or another EvalResult; '
        'a `score --out` folder', "from ragmeter.judge import RubricMetric", "from ragmeter.judge import metric",
        "# test_rag_quality.py", "from ragmeter.dataset import from_deepeval, from_hf, from_ragas"]


def test_the_api_examples_run_as_written(docs_folder: Any) -> None:
    folder, server = docs_folder
    ns: Dict[str, Any] = {}
    # ragmeter.evaluate: judged by the loopback server, written, reported
    run_block(block("import ragmeter"), ns, server, "ragmeter.evaluate")
    result = ns["result"]
    assert "faithfulness" in ns["result"].judge["metric"].unique().to_list()
    assert (folder / "results" / "report.html").is_file() and ns["html"].lstrip().startswith("<!")
    assert ns["cfg"].base_url == server.base_url
    # comparing and gating: the docs compare with a stored baseline folder, written here from the same run
    result.write(folder / "results-main")
    run_block(block('baseline = ragmeter.EvalResult.load("results-main")'), ns, server, "compare")
    assert ns["comp"].passed and ns["comp"].row("hit").delta == 0
    # a rubric metric, through evaluate
    run_block(block("from ragmeter.judge import RubricMetric"), ns, server, "RubricMetric")
    tone = ns["result"].judge.filter(ns["result"].judge["metric"] == "tone_check")
    assert tone.height == 51 and tone["score"].drop_nulls().len() > 0
    # your own prompt and scoring function: the docs define them; the server answers their schemas
    run_block(block("from ragmeter.judge import metric"), ns, server, "@metric")
    server.replies["custom-cites-sources"] = lambda p: {"cited": "[1]" in p["answer"]}
    server.replies["custom-figures-supported-figures"] = lambda p: {"figures": re.findall(r"\d+", p["answer"])[:2]}
    server.replies["custom-figures-supported-check"] = lambda p: {"supported": len(p["figures"])}
    custom = ragmeter.evaluate("golden.jsonl", "run.jsonl", judge=ns["cfg"],
                               metrics=[ns["cites_sources"], ns["figures_supported"]])
    outcomes = {(m, o): n for m, o, n in custom.judge.group_by("metric", "outcome").len().iter_rows()}
    # one golden case is absent from the run, one more has no contexts (skipped: missing input); an answer
    # stating no figure has no score
    assert outcomes[("cites_sources", "scored")] == 50 and outcomes[("cites_sources", "skipped")] == 1
    assert outcomes[("figures_supported", "scored")] > 0 and outcomes[("figures_supported", "no_score")] > 0
    assert sum(n for (m, _o), n in outcomes.items() if m == "figures_supported") == 51
    # pytest: `judge=...` is the reader's JudgeConfig; the baseline fixture is the stored folder
    run_block(block("# test_rag_quality.py").replace("judge=...", "judge=cfg"), ns, server, "pytest")
    ns["test_no_regression"](ragmeter.EvalResult.load("results-main"))
    try:
        ns["test_quality_floor"]()
    except AssertionError as exc:  # the floors are the reader's; the loopback judge need not meet them
        assert str(exc).startswith("ragmeter: ") and "score rules failed" in str(exc)
    # ragas, DeepEval and Hugging Face data: the docs' inputs, stood in for by records of each naming
    ns["evaluation_dataset"] = [{"user_input": "What is 2+2?", "retrieved_contexts": ["2+2 is 4"],
                                 "response": "4", "reference": "4", "reference_contexts": ["2+2 is 4"]}]
    ns["test_cases"] = [SimpleNamespace(input="What is 2+2?", actual_output="4", expected_output="4",
                                        retrieval_context=["2+2 is 4"], context=["2+2 is 4"], name="sum")]
    ns["hf_dataset"] = ns["evaluation_dataset"]
    run_block(block("from ragmeter.dataset import").replace("judge=...", "judge=cfg"), ns, server, "ecosystem")
    assert ns["result"].cases.height == 1 and ns["result"].judge is not None


def docstring_blocks(module: object) -> List[str]:
    """The ``::`` literal blocks of a module's docstring, dedented."""
    import textwrap

    doc = getattr(module, "__doc__") or ""
    return [textwrap.dedent(b) for b in re.findall(r"::\n\n((?:    .*\n|\n)+)", doc)]


def test_the_module_docstring_examples_run(docs_folder: Any) -> None:
    """ragmeter.api's example gated on 'faithfulness>=-0.02', a rule the gate refuses ('can never fail ... did
    you mean faithfulness>=-2pp?'); the first example of ``help(ragmeter)`` runs as written too."""
    import ragmeter.api

    folder, server = docs_folder
    (example,) = docstring_blocks(ragmeter.api)
    baseline = ragmeter.evaluate("golden.jsonl", "run.jsonl",
                                 judge=ragmeter.judge.JudgeConfig(base_url=server.base_url, model="gpt-4o-mini"))
    ns: Dict[str, Any] = {"baseline": baseline}
    run_block(example, ns, server, "ragmeter.api docstring")
    assert ns["comp"].passed and (folder / "results" / "report.html").is_file()
    first = docstring_blocks(ragmeter)[0]
    assert first.startswith("import ragmeter\n")
    ns = {}
    run_block(first, ns, server, "ragmeter docstring")
    assert ns["result"].summary["overall"]["hit_rate"] == {"value": 0.8, "n_scored": 45, "n_total": 51}
