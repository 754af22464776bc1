"""summary.json names the command that wrote the folder (h35): ``"command"``, ``"score"`` / ``"eval"`` /
``"demo"``, the Python API recording the command it is the library form of. The advice on a damaged folder
(:func:`ragmeter.report.data.rewrite_advice`) names that command; before, it guessed from the folder's shape
and told an eval judged by a model named ``example-replay`` (the demo's) to run ``ragmeter demo``
(tests/judge/test_results_command_judge_h35.py). A folder written before the key gets the guess."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict

import pytest

import ragmeter
from ragmeter.errors import InputError
from ragmeter.report.data import RESULTS_FORMAT, load_results

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "python" / "ragmeter" / "_example"
GOLDEN, RUN = EX / "golden.jsonl", EX / "run.jsonl"


def cli(cwd: Path, *args: Any) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    proc = subprocess.run([sys.executable, "-m", "ragmeter", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr


def _run_eval(out: Path) -> None:
    from ragmeter.evaluation import run_eval

    run_eval(GOLDEN, RUN, out)


def _score_into(out: Path) -> None:
    from ragmeter.retrieval import score_into

    score_into(GOLDEN, RUN, out)


#: how each folder is written -> the command its summary.json names
WRITERS: Dict[str, tuple] = {
    "ragmeter score": (lambda base, out: cli(base, "score", "--golden", GOLDEN, "--run", RUN, "--out", out), "score"),
    "ragmeter eval": (lambda base, out: cli(base, "eval", "--golden", GOLDEN, "--run", RUN, "--out", out), "eval"),
    "ragmeter demo": (lambda base, out: cli(base, "demo", "--out", out), "demo"),
    "ragmeter.score().write": (lambda base, out: ragmeter.score(GOLDEN, RUN).write(out), "score"),
    "score_into": (lambda base, out: _score_into(out), "score"),
    "ragmeter.evaluate().write": (lambda base, out: ragmeter.evaluate(GOLDEN, RUN).write(out), "eval"),
    "run_eval": (lambda base, out: _run_eval(out), "eval"),
}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    base = tmp_path_factory.mktemp("h35")
    folders = {}
    for i, (name, (write, _command)) in enumerate(WRITERS.items()):
        folders[name] = base / f"out{i}"
        write(base, folders[name])
    return folders


def _summary(folder: Path) -> Dict[str, Any]:
    return json.loads((folder / "summary.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("writer", list(WRITERS))
def test_summary_json_names_the_command_that_wrote_it(written, writer):
    summary = _summary(written[writer])
    assert summary["command"] == WRITERS[writer][1]
    assert summary["results_format"] == RESULTS_FORMAT == 1  # the key is added: the format is the same
    keys = list(summary)
    assert keys.index("command") == keys.index("version") + 1  # with the other keys that name the writer


def test_the_demo_reads_back_as_the_demo_in_memory_too(written):
    """The demo stamps its result before writing it: EvalResult.load gives it back so."""
    assert ragmeter.EvalResult.load(written["ragmeter demo"]).summary["command"] == "demo"


def test_an_evaluate_result_names_eval_before_it_is_written():
    assert ragmeter.evaluate(GOLDEN, RUN).summary["command"] == "eval"


def test_score_json_output_stays_without_the_folder_keys(tmp_path):
    """score --json prints the retrieval summary; the keys naming the writer are summary.json's (as before)."""
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "score", "--golden", str(GOLDEN), "--run", str(RUN),
                           "--json"], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    assert proc.returncode == 0, proc.stderr
    assert not {"results_format", "command"} & set(json.loads(proc.stdout))


# -------------------------------------------------------------------------------- folders written before the key
def _truncate_cases(folder: Path) -> None:
    data = (folder / "cases.parquet").read_bytes()
    (folder / "cases.parquet").write_bytes(data[: len(data) // 2])


def _damaged_advice(folder: Path) -> str:
    _truncate_cases(folder)
    with pytest.raises(InputError) as err:
        load_results(folder)
    return str(err.value)


def _edit(folder: Path, edit: Callable[[Dict[str, Any]], None]) -> None:
    summary = _summary(folder)
    edit(summary)
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")


@pytest.mark.parametrize("writer", ["ragmeter score", "ragmeter eval", "ragmeter demo"])
def test_a_folder_written_before_the_key_gets_the_guess_of_its_shape(written, tmp_path, writer):
    folder = Path(shutil.copytree(written[writer], tmp_path / "f"))
    _edit(folder, lambda s: s.pop("command", None))  # as every folder written before h35
    said = _damaged_advice(folder)
    assert said.endswith(f"restore it, or write the folder again with `ragmeter {WRITERS[writer][1]} --out DIR`"), said


def test_the_recorded_command_is_named_whatever_the_shape_says(written, tmp_path):
    """An eval folder recorded as the demo's (what only the demo writes) is told to run the demo: the key, not
    the judge model's name, decides."""
    folder = Path(shutil.copytree(written["ragmeter eval"], tmp_path / "f"))
    _edit(folder, lambda s: s.update(command="demo"))
    assert _damaged_advice(folder).endswith("write the folder again with `ragmeter demo --out DIR`")


@pytest.mark.parametrize("value", ["frobnicate", 3, None, "judge"])
def test_a_command_no_results_folder_is_written_by_falls_back_to_the_guess(written, tmp_path, value):
    """A value this version does not know (a later version's command, an edit) is not named as a command."""
    folder = Path(shutil.copytree(written["ragmeter score"], tmp_path / "f"))
    _edit(folder, lambda s: s.update(command=value))
    assert _damaged_advice(folder).endswith("write the folder again with `ragmeter score --out DIR`")


def test_a_score_folder_loaded_and_written_again_keeps_the_keys_naming_its_writer(written, tmp_path):
    """EvalResult.load reads a score folder in evaluate's layout (the retrieval summary under "retrieval"); the
    keys naming the writer stay at the top level, so the folder it writes still says its format and command.
    Before, they moved under "retrieval" and the written summary.json had no results_format at all."""
    source = _summary(written["ragmeter score"])
    loaded = ragmeter.EvalResult.load(written["ragmeter score"])
    stamp = {key: source[key] for key in ("results_format", "tool", "version", "command")}
    assert {key: loaded.summary.get(key) for key in stamp} == stamp
    assert not set(stamp) & set(loaded.summary["retrieval"])
    out = loaded.write(tmp_path / "again")
    again = _summary(out)
    assert {key: again.get(key) for key in stamp} == stamp
    assert list(again)[:4] == list(stamp)  # first, as every writer puts them
    assert _damaged_advice(out).endswith("write the folder again with `ragmeter score --out DIR`")


def test_a_loaded_folder_written_again_keeps_the_version_and_command_that_computed_it(tmp_path: Path) -> None:
    """docs/results.md: `version` and `command` say who computed the numbers; writing a loaded folder again does
    not restamp them with the writing ragmeter's."""
    ragmeter.evaluate(GOLDEN, RUN).write(tmp_path / "a")
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    summary.update(version="0.0.1", command="demo")
    (tmp_path / "a" / "summary.json").write_text(json.dumps(summary))
    ragmeter.EvalResult.load(tmp_path / "a").write(tmp_path / "b")
    again = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert (again["version"], again["command"], again["tool"]) == ("0.0.1", "demo", "ragmeter"), again
