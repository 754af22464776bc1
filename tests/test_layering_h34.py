"""The library (``ragmeter.evaluate``, ``run_eval``, the readers) does not depend on the command line (h34): a
module outside ``ragmeter/cli`` that imports ``ragmeter.cli`` drags the CLI into every Python caller, and its
messages named flags (``--no-judge``) to a user who had passed keyword arguments."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Sequence

import pytest

from ragmeter.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "python" / "ragmeter"
EX = PACKAGE / "_example"
#: a loopback port nothing listens on: a judge pointed there can make no call
CLOSED = "http://127.0.0.1:9/v1"
#: the command line's own entry point (``python -m ragmeter``): part of the CLI, not a library module
ENTRY_POINTS = {"__main__.py"}


def imported_modules(source: str, package: Sequence[str]) -> List[str]:
    """Every module a source file of ``package`` (``["ragmeter", "report"]``) imports, relative imports
    resolved, at any depth (the package imports lazily, inside functions); ``from m import x`` gives ``m`` and
    ``m.x`` (``x`` may be a module)."""
    names: List[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1]) if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            names += [module] + [f"{module}.{alias.name}" for alias in node.names]
    return names


def is_cli(module: str) -> bool:
    return module == "ragmeter.cli" or module.startswith("ragmeter.cli.")


def library_modules() -> List[Path]:
    """The package's modules outside ``ragmeter/cli`` (sub-packages included), less the entry point."""
    return sorted(p for p in PACKAGE.rglob("*.py")
                  if p.relative_to(PACKAGE).parts[0] != "cli" and p.relative_to(PACKAGE).as_posix() not in ENTRY_POINTS)


@pytest.mark.parametrize("source", [
    "from ragmeter.cli._inputs import check_out",
    "import ragmeter.cli.judge",
    "from ..cli import _inputs",
    "from .. import cli",
    "def f():\n    from ragmeter import cli\n",
])
def test_the_scan_sees_every_spelling_of_an_import_of_the_cli(source: str) -> None:
    """The check below passes by seeing nothing unless each spelling is found (as from ragmeter/report/x.py)."""
    assert any(is_cli(m) for m in imported_modules(source, ["ragmeter", "report"])), source


@pytest.mark.parametrize("source", ["from ragmeter.client import x", "from .cli_like import y", "import ragmeter.clip"])
def test_the_scan_does_not_take_a_similar_name_for_the_cli(source: str) -> None:
    assert not any(is_cli(m) for m in imported_modules(source, ["ragmeter", "report"])), source


def test_no_library_module_imports_the_command_line() -> None:
    """Before: ragmeter/evaluation.py imported ragmeter.cli._inputs for the nothing-to-judge refusal."""
    modules = library_modules()
    assert len(modules) > 40 and PACKAGE / "evaluation.py" in modules  # the scan reads the package
    offenders = [f"{p.relative_to(PACKAGE)}: {m}" for p in modules
                 for m in imported_modules(p.read_text(encoding="utf-8"),
                                           ["ragmeter", *p.parent.relative_to(PACKAGE).parts])
                 if is_cli(m)]
    assert not offenders, offenders


# -- the nothing-to-judge refusal speaks the caller's front ---------------------------------------------------------
def _run_without_answers(tmp_path: Path) -> Path:
    path = tmp_path / "run.jsonl"
    rows = [json.loads(line) for line in (EX / "run.jsonl").read_text(encoding="utf-8").splitlines()
            if line.startswith("{")]
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "answer"}) + "\n" for r in rows),
                    encoding="utf-8")
    return path


def test_run_eval_refusing_nothing_to_judge_names_the_python_argument(tmp_path: Path) -> None:
    """``run_eval(..., judge=..., refuse_unmeasured=...)`` of a run without answers, judged for correctness, is
    refused as ``ragmeter eval`` refuses it; before, the Python caller was told to "pass --no-judge"."""
    from ragmeter.evaluation import run_eval
    from ragmeter.judge import JudgeConfig

    judge = JudgeConfig(base_url=CLOSED, model="m", metrics=["correctness"], cache=None, progress=False,
                        api_key="sk-test-h34")
    with pytest.raises(InputError) as err:
        run_eval(EX / "golden.jsonl", _run_without_answers(tmp_path), tmp_path / "out", judge=judge,
                 refuse_unmeasured="pass the answers")
    said = str(err.value)
    assert said.startswith("nothing to judge: all 51 judge rows (51 cases x 1 metrics) lack their input "
                           "(correctness: the run has no answer for this case); nothing written"), said
    assert said.endswith("; pass judge=None to score retrieval alone"), said
    assert "--" not in said and not (tmp_path / "out").exists()


def test_eval_refusing_nothing_to_judge_still_names_the_flag(tmp_path: Path) -> None:
    """The command line keeps its wording and exit status 2."""
    env = dict(os.environ, RAGMETER_API_KEY="sk-test-h34", PYTHONPATH=str(ROOT / "python"))
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "eval", "--golden", str(EX / "golden.jsonl"),
                           "--run", str(_run_without_answers(tmp_path)), "--base-url", CLOSED, "--model", "m",
                           "--metrics", "correctness", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2, proc.stderr
    err = " ".join(proc.stderr.split())
    assert err.endswith("nothing written; pass --no-judge to score retrieval alone"), err
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()
