"""The docs tell the truth (review 29 of README.md and docs/*.md against the code): each claim a user copies,
checked where a test can do it cheaply."""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Set, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).parent / "judge"))

from fakeserver import FakeServer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
KEY = "sk-test-docs29-0123456789"


def _ragmeter(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAGMETER_API_KEY": KEY}
    return subprocess.run([sys.executable, "-m", "ragmeter", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


def _write_jsonl(path: Path, records: List[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


# -- README exit table: `judge` input of which every row lacks what its metric needs is exit 2 -----------------------
def test_judge_refuses_input_lacking_references_even_when_one_case_failed_in_the_run(tmp_path: Path) -> None:
    """README, exit 2: "`judge` input of which every row lacks what its metric needs (no answer, no reference:
    nothing to judge; a run whose cases all failed when collected exits 3)". A golden set without reference
    answers, judged for correctness against a run in which one case of three failed when collected, measured
    nothing; it exited 3 with 'scored 0/3' and a results folder, as if the run's failure were the only gap."""
    golden = _write_jsonl(tmp_path / "golden.jsonl", [{"id": f"q{i}", "question": f"q{i}?"} for i in range(3)])
    run = _write_jsonl(tmp_path / "run.jsonl", [
        {"id": "q0", "retrieved": [], "answer": None, "error": "boom", "error_kind": "timeout"},
        {"id": "q1", "retrieved": [{"file": "f.md", "text": "x"}], "answer": "a"},
        {"id": "q2", "retrieved": [{"file": "f.md", "text": "x"}], "answer": "b"}])
    with FakeServer(api_key=KEY) as server:
        proc = _ragmeter("judge", "--golden", str(golden), "--run", str(run), "--base-url", server.base_url,
                         "--model", "m", "--metrics", "correctness", "--no-progress", "--no-cache",
                         "--out", str(tmp_path / "out"), cwd=tmp_path)
        assert server.requests == 0
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    err = " ".join(proc.stderr.split())
    assert "nothing to judge: all 3 judge rows (3 cases x 1 metrics) lack their input" in err, err
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


# -- every option is documented; every option the docs give a command exists ------------------------------------------
def _parser() -> argparse.ArgumentParser:
    from ragmeter.cli import build_parser

    return build_parser()


def _subcommands(parser: argparse.ArgumentParser) -> Dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _commands(parser: argparse.ArgumentParser, path: Tuple[str, ...] = ()) -> Iterator[Tuple[Tuple[str, ...],
                                                                                            argparse.ArgumentParser]]:
    yield path, parser
    for name, sub in _subcommands(parser).items():
        yield from _commands(sub, path + (name,))


def _options(parser: argparse.ArgumentParser) -> Set[str]:
    return {opt for action in parser._actions for opt in action.option_strings}


def _trec_options() -> Set[str]:
    from ragmeter.cli.trec import full_parser

    return _options(full_parser())


def _docs_text() -> str:
    return "\n".join(doc.read_text(encoding="utf-8") for doc in DOCS)


def _documented(option: str, text: str) -> bool:
    return re.search(r"(?<![\w-])" + re.escape(option) + r"(?![\w-])", text) is not None


def test_every_option_of_every_command_is_documented() -> None:
    """Each option of `--help` is in README.md or docs/*.md. `trec`'s long spellings are trec_eval's, which the
    README names as a group ("same flags and long options"), so of `trec` its short flags are checked."""
    text = _docs_text()
    missing = [f"{' '.join(('ragmeter',) + path)} {opt}" for path, parser in _commands(_parser())
               for opt in sorted(_options(parser) - {"-h", "--help"})
               if not (path == ("trec",) and opt.startswith("--")) and not _documented(opt, text)]
    assert not missing, f"options documented only in --help: {missing}"


def _command_lines() -> Iterator[Tuple[str, str]]:
    """(doc name, command) for every `ragmeter CMD ...` in backticks and every such line of a code block (a line
    ending in a backslash continued)."""
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for span in re.findall(r"`(ragmeter [^`\n]+)`", text):
            yield doc.name, span
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S):
            command = ""
            for line in block.splitlines():
                line = line.strip()
                if line.startswith("$ "):
                    line = line[2:]
                if command:
                    command += " " + line
                elif line.startswith("ragmeter "):
                    command = line
                else:
                    continue
                if command.endswith("\\"):
                    command = command[:-1]
                    continue
                yield doc.name, re.sub(r"\s#\s.*$", "", command)
                command = ""


def test_every_option_the_docs_give_a_command_exists() -> None:
    parser = _parser()
    checked, unknown = 0, []
    for doc, command in _command_lines():
        words = command.split()[1:]
        if words[:1] == ["trec"]:
            options, path = _trec_options(), ["trec"]
        else:
            node, path = parser, []
            for word in words:
                sub = _subcommands(node)
                if word not in sub:
                    break
                node, path = sub[word], path + [word]
            assert path or words[0].startswith("-"), f"{doc}: `{command}` names no ragmeter command"
            options = _options(node)
        for option in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", command):
            checked += 1
            if option not in options:
                unknown.append(f"{doc}: ragmeter {' '.join(path)} {option} (in `{command}`)")
    assert checked > 100  # the docs were read
    assert not unknown, unknown


# -- the README's Python example runs as written ------------------------------------------------------------------------
def test_the_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in a folder holding the bundled example under the README's file names; the values it leaves to the
    reader (`run_frame`, `ask`, the two raters' verdicts) are supplied here. The bundled TREC pair leaves
    query 106 out of the run (the README's `-c` example), so the qrels here are the other five queries'."""
    import polars as pl

    from ragmeter.cli.demo import example_dir

    example = example_dir()
    for name in ("golden.jsonl", "run.jsonl"):
        (tmp_path / name).write_bytes((example / name).read_bytes())
    qrels = [line for line in (example / "trec" / "qrels.txt").read_text().splitlines()
             if not line.startswith("106 ")]
    (tmp_path / "qrels.txt").write_text("\n".join(qrels) + "\n")
    run_lines = [line.split() for line in (example / "trec" / "run.txt").read_text().splitlines() if line.strip()]
    (tmp_path / "run.txt").write_text((example / "trec" / "run.txt").read_text())
    _write_jsonl(tmp_path / "chunks.jsonl", [{"file": p.name, "chunk_id": "1", "text": p.read_text(encoding="utf-8")}
                                             for p in sorted((example / "kb").iterdir())])
    monkeypatch.chdir(tmp_path)
    api = re.search(r"^## Python API\n(.*?)(?=^## )", (ROOT / "README.md").read_text(encoding="utf-8"), re.M | re.S)
    (block,) = re.findall(r"```python\n(.*?)```", api.group(1), re.S)
    ns: Dict[str, object] = {
        "run_frame": pl.DataFrame({"query_id": [w[0] for w in run_lines], "doc_id": [w[2] for w in run_lines],
                                   "score": [float(w[4]) for w in run_lines]}),
        "ask": lambda case: {"answer": "a", "retrieved": [{"file": "handbook.md", "text": "x"}]},
        "judge_verdicts": [True, False, True, True], "human_verdicts": [True, False, False, True]}
    # each line alone, so that the values the comments state can be checked
    values = {}
    for line in block.splitlines():
        if line.strip():
            code = line.split("  #")[0].strip()
            try:
                values[code] = eval(compile(code, "README.md", "eval"), ns)
            except SyntaxError:
                exec(compile(code, "README.md", "exec"), ns)
    assert ns["result"].summary["overall"]["hit_rate"]["value"] == pytest.approx(0.8)
    assert values["metrics.average_precision([1, 0, 1])"] == pytest.approx(0.8333, abs=1e-4)
    assert values["metrics.average_precision([0, 1, 1])"] == pytest.approx(0.5833, abs=1e-4)
    assert (tmp_path / "run.jsonl").is_file()


def test_every_ragmeter_name_the_docs_give_exists() -> None:
    """`ragmeter.x.y` in the docs is a module, class, function or attribute (`ragmeter.notes` is a logger)."""
    import importlib

    def resolve(name: str) -> None:
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            for part in parts[i:]:
                obj = getattr(obj, part)
            return

    names = {name for doc in DOCS for name in
             re.findall(r"(?<![\w/.-])ragmeter(?:\.[A-Za-z_]\w*)+", doc.read_text(encoding="utf-8"))}
    names -= {"ragmeter.notes"}
    assert len(names) > 40
    missing = []
    for name in sorted(names):
        if name.startswith("ragmeter.ray") and importlib.util.find_spec("ray") is None:
            continue
        try:
            resolve(name)
        except AttributeError:
            missing.append(name)
    assert not missing, missing


# -- README exit table: "an empty `--out` (an unset variable)" -----------------------------------------------------------
@pytest.mark.parametrize("flag", ["--out", "--json"])
def test_compare_names_an_empty_output_as_an_unset_variable(tmp_path: Path, flag: str) -> None:
    """Every other command says `--out: empty (an unset variable?)`; `compare --out ""` said `--out : the summary
    is Markdown; name the file .md`, and `--json ""` asked for a .json name, as if a name had been given."""
    folder = tmp_path / "results"
    proc = _ragmeter("compare", str(folder), str(folder), flag, "", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"ragmeter: error: {flag}: empty (an unset variable?); name the file to write"


# -- what `ragmeter demo` writes and says, and the summary.json keys the docs name ---------------------------------------
@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Path, str]:
    out = tmp_path_factory.mktemp("demo") / "ragmeter-demo"
    proc = _ragmeter("demo", "--out", str(out), cwd=out.parent)
    assert proc.returncode == 0, proc.stderr
    return out, proc.stdout


def _at(tree: object, dotted: str) -> object:
    for part in dotted.split("."):
        assert isinstance(tree, dict) and part in tree, dotted
        tree = tree[part]
    return tree


def test_the_demo_writes_the_files_and_findings_the_readme_names(demo: Tuple[Path, str]) -> None:
    out, stdout = demo
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = re.search(r"writes `ragmeter-demo/`\s*\((.*?); `--out", readme, re.S)
    assert listed, "README: the demo's file list"
    names = set(re.findall(r"`([\w.]+/?)`", listed.group(1)))
    assert names == {p.name + ("/" if p.is_dir() else "") for p in out.iterdir()}
    flat = " ".join(stdout.split())
    # "the file-level hit rate (93.3%) hides a chunk-level one of 80.0%", "66.7% to 11.1%", "17 of 20 ... kappa 0.67"
    all_row = next(line for line in stdout.splitlines() if line.startswith("ALL ") and "45/51" in line)
    assert "93.3%" in all_row and "80.0%" in all_row
    paraphrase = [line.split() for line in stdout.splitlines() if re.match(r"\s*(0|0\.2) paraphrase ", line)]
    assert [row[2] for row in paraphrase] == ["66.7%", "11.1%"]
    assert "17/20 agree" in flat and "Cohen's kappa 0.6667" in flat
    assert "all 3 disagreement(s) in one direction" in flat and "'1.5-2 个月月薪'" in flat
    assert re.search(r"3 case\(s\) ran in a retrieval mode other than", flat) and "1 golden case(s) missing" in flat


@pytest.mark.parametrize("key", [
    # README: eval's summary.json; compare's comparability checks; the repeats and calibration sections
    "version", "inputs", "settings", "started_at", "finished_at", "files", "cost.judge_cost_share",
    "cost.system_cost_usd", "cost.judge_cost_usd", "settings.k", "settings.judge.model", "settings.review.rate",
    "settings.review.seed", "settings.thresholds", "retrieval.ids_from_line_numbers",
    # docs/metrics.md, docs/collect.md, docs/scale-out.md
    "retrieval.file_vs_chunk_hit.n", "retrieval.file_vs_chunk_hit.n_file_only", "retrieval.unfound_evidence",
    "retrieval.run_errors", "retrieval.missing_from_run", "retrieval.cases_without_file",
    "retrieval.retrieval_modes", "retrieval.overall.empty_retrievals", "retrieval.overall.hit_rate.n_scored",
    "retrieval.overall.hit_rate.n_total", "judge.metrics.correctness.correct_rate",
    # docs/calibration.md
    "calibration.n", "calibration.agreement", "calibration.kappa.ci_reason", "calibration.cells",
    "calibration.strata", "calibration.ppi.n_outside_sample", "calibration.ppi.random_draw",
    "calibration.incomplete",
])
def test_a_summary_json_key_the_docs_name_is_written(demo: Tuple[Path, str], key: str) -> None:
    summary = json.loads((demo[0] / "summary.json").read_text(encoding="utf-8"))
    _at(summary, key)


# -- docs/audit.md: the worked example's console sessions print what the page shows ------------------------------------
def _console_sessions(doc: Path) -> List[List[Tuple[str, List[str]]]]:
    """Per ```console block, its (command, printed lines) pairs; a command line ending in a backslash continues."""
    sessions = []
    for block in re.findall(r"```console\n(.*?)```", doc.read_text(encoding="utf-8"), re.S):
        steps: List[Tuple[str, List[str]]] = []
        continued = False
        for line in block.splitlines():
            if line.startswith("$ ") or continued:
                command = line[2:] if line.startswith("$ ") and not continued else line.strip()
                if continued:
                    steps[-1] = (steps[-1][0] + " " + command.rstrip("\\").strip(), [])
                else:
                    steps.append((command.rstrip("\\").strip(), []))
                continued = line.endswith("\\")
            else:
                steps[-1][1].append(line)
        sessions.append(steps)
    return sessions


def test_the_audit_worked_example_prints_what_docs_audit_md_shows(tmp_path: Path) -> None:
    """The script writes golden.jsonl; `cat chunks.jsonl` shows the corpus to write. Lines shown are printed in
    that order ('...' stands for lines left out); `echo $?` is the exit status of the command before it."""
    import shlex

    doc = ROOT / "docs" / "audit.md"
    (script,) = [b for b in re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)
                 if "golden.jsonl" in b and "open(" in b]
    subprocess.run([sys.executable, "-c", script], cwd=tmp_path, check=True)
    sessions = _console_sessions(doc)
    assert len(sessions) == 4
    status = None
    for steps in sessions:
        for command, shown in steps:
            if command.startswith("cat "):
                (tmp_path / command.split()[1]).write_text("\n".join(shown) + "\n", encoding="utf-8")
                continue
            if command == "echo $?":
                assert [str(status)] == shown
                continue
            words = shlex.split(command)
            assert words[0] == "ragmeter"
            proc = _ragmeter(*words[1:], cwd=tmp_path)
            status = proc.returncode
            printed = proc.stdout.splitlines()
            at = 0
            for line in shown:
                if line.strip() == "...":
                    continue
                assert line in printed[at:], f"docs/audit.md, `{command}`: {line!r} not printed (in order)"
                at = printed.index(line, at) + 1
            if not any(line.strip() == "..." for line in shown):
                assert printed == shown, f"docs/audit.md, `{command}`: prints other lines than the page shows"


def test_eval_takes_every_judge_option_but_cases() -> None:
    """README, Judge options: "`ragmeter eval` takes the same judge options (except `--cases`...)"."""
    commands = _subcommands(_parser())
    judge, evaluate = _options(commands["judge"]), _options(commands["eval"])
    assert judge - evaluate == {"--cases"}
