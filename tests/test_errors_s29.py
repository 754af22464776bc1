"""Session 29: bad input across the commands: one line naming the file (or field), the exit table's status, no
traceback, and nothing half-written (an output of a failed run neither left behind nor clobbered)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "python" / "ragmeter" / "_example"
GOLDEN, RUN = EXAMPLE / "golden.jsonl", EXAMPLE / "run.jsonl"
#: an endpoint nothing listens on: the commands below refuse their input (or only estimate) before any call
NO_ENDPOINT = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--no-cache", "--no-progress"]


def ragmeter(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "python"), "RAGMETER_API_KEY": "k"}
    return subprocess.run([sys.executable, "-m", "ragmeter", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


def error_lines(proc: subprocess.CompletedProcess) -> List[str]:
    """stderr without its notes and warnings (and their wrapped, indented lines); asserts there is no traceback."""
    assert "Traceback" not in proc.stderr, proc.stderr
    return [line for line in proc.stderr.splitlines()
            if not line.startswith(("ragmeter: note:", "ragmeter: warning:", " "))]


def one_error(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    lines = error_lines(proc)
    assert proc.returncode == code and len(lines) == 1, (proc.returncode, proc.stderr)
    assert lines[0].startswith("ragmeter: error: "), lines
    return lines[0]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "results"
    proc = ragmeter("demo", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


def golden_records() -> List[dict]:
    return [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]


# -- tracebacks ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, content", [("targets.json", b"\x89PNG\r\n\x1a\n\x00\x00"),
                                           ("targets.toml", "[category]\nr\xe9sum\xe9 = 3\n".encode("latin-1"))])
def test_a_targets_file_that_is_not_utf8_text_is_one_line(tmp_path: Path, name: str, content: bytes) -> None:
    targets = tmp_path / name
    targets.write_bytes(content)
    line = one_error(ragmeter("audit", "--golden", str(GOLDEN), "--targets", str(targets)))
    assert f"{targets}:" in line and "UTF-8" in line, line


@pytest.mark.parametrize("shape", ["utf-16", "json array"])
def test_a_custom_metrics_fields_are_read_from_a_golden_set_in_any_shape_the_loader_reads(tmp_path: Path,
                                                                                          shape: str) -> None:
    rows = [{**row, "policy": "be brief"} for row in golden_records()]
    golden = tmp_path / "golden.jsonl"
    if shape == "utf-16":
        golden.write_bytes("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-16"))
    else:
        golden.write_text(json.dumps(rows), encoding="utf-8")
    _dry_run_with_a_policy_metric("eval", golden, tmp_path)


def _dry_run_with_a_policy_metric(command: str, golden: Path, tmp_path: Path) -> None:
    """``command`` (eval, judge) --dry-run with a custom metric reading the golden set's own ``policy`` field:
    no error expected."""
    metric = tmp_path / "metrics.toml"
    metric.write_text('[metrics.policy_check]\ncriteria = "Does the answer follow the policy?"\nscale = [1, 5]\n'
                      'pass_threshold = 4\nfields = ["answer", "policy"]\n', encoding="utf-8")
    proc = ragmeter(command, "--golden", str(golden), "--run", str(RUN), *NO_ENDPOINT, "--dry-run", "--metrics",
                    "faithfulness", "--metric-file", str(metric), "--out", str(tmp_path / "out"))
    assert error_lines(proc) == [] and proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("manifest", ["[1, 2]", "null", '"text"'])
def test_a_review_manifest_that_is_not_an_object_is_a_warning_like_one_that_does_not_parse(
        tmp_path: Path, demo: Path, manifest: str) -> None:
    results = tmp_path / "results"
    shutil.copytree(demo, results)
    shutil.copy(EXAMPLE / "review_filled.csv", results / "review" / "review.csv")
    (results / "review" / "manifest.json").write_text(manifest, encoding="utf-8")
    proc = ragmeter("review", "import", str(results), str(results / "review" / "review.csv"))
    assert error_lines(proc) == [] and proc.returncode == 0, proc.stderr
    assert "manifest.json is not a JSON object" in proc.stdout, proc.stdout


# -- nothing half-written ----------------------------------------------------------------------------------------

def test_report_writes_neither_report_when_one_cannot_be_written(tmp_path: Path, demo: Path) -> None:
    out = tmp_path / "reports"
    (out / "report.md").mkdir(parents=True)  # a folder where the Markdown report goes
    line = one_error(ragmeter("report", str(demo), "--out", str(out)))
    assert f"{out / 'report.md'}: is a folder, not a file" in line, line
    assert sorted(p.name for p in out.iterdir()) == ["report.md"], "report.html was written by a failed run"


def test_compare_refuses_a_json_file_that_is_a_folder_before_writing_the_markdown(tmp_path: Path,
                                                                                 demo: Path) -> None:
    markdown, folder = tmp_path / "summary.md", tmp_path / "comparison.json"
    folder.mkdir()
    line = one_error(ragmeter("compare", str(demo), str(demo), "--out", str(markdown), "--json", str(folder)))
    assert f"--json {folder}: is a folder, not a file" in line, line
    assert not markdown.exists(), "the Markdown summary was written by a failed run"


def test_compare_out_that_is_a_folder_is_named_with_its_flag(tmp_path: Path, demo: Path) -> None:
    folder = tmp_path / "summary.md"
    folder.mkdir()
    line = one_error(ragmeter("compare", str(demo), str(demo), "--out", str(folder)))
    assert f"--out {folder}: is a folder, not a file" in line, line


def test_compare_empty_out_is_called_empty(demo: Path) -> None:
    line = one_error(ragmeter("compare", str(demo), str(demo), "--out", ""))
    assert "--out: empty (an unset variable?)" in line, line


def test_demo_refuses_a_file_named_review_in_its_folder_before_writing(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    out.mkdir()
    (out / "review").write_text("notes\n", encoding="utf-8")
    line = one_error(ragmeter("demo", "--out", str(out)))
    assert f"{out / 'review'}" in line and "is a file, not a folder" in line, line
    assert sorted(p.name for p in out.iterdir()) == ["review"], "the demo wrote its tables, then failed"


# -- judge --cases: what each field holds -----------------------------------------------------------------------

def _cases_file(tmp_path: Path, **changes: object) -> Path:
    rows = [{"id": f"c{i}", "question": "q?", "answer": "a", "reference": "r", "contexts": ["x"]} for i in range(3)]
    rows[1].update(changes)
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("changes, said", [
    ({"answer": float("nan")}, "'answer' must be a string, got a number"),
    ({"answer": 42}, "'answer' must be a string, got a number"),
    ({"response": ["a", "b"], "answer": None}, "'response' must be a string, got a list"),
    ({"reference": {"text": "r"}}, "'reference' must be a string, got an object"),
    ({"contexts": ["x", 1]}, "'contexts[1]' must be a string, got a number"),
])
def test_judge_cases_refuses_a_field_that_is_not_text(tmp_path: Path, changes: dict, said: str) -> None:
    cases = _cases_file(tmp_path, **changes)
    line = one_error(ragmeter("judge", "--cases", str(cases), *NO_ENDPOINT, "--dry-run"))
    assert f"{cases}:2: {said}" in line, line


def test_judge_cases_reads_null_fields_as_absent(tmp_path: Path) -> None:
    cases = _cases_file(tmp_path, answer=None, reference=None, contexts=["x", None])
    proc = ragmeter("judge", "--cases", str(cases), *NO_ENDPOINT, "--dry-run")
    assert error_lines(proc) == [] and proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("shape, said", [
    ("csv", "looks like CSV"),
    ("array", "is a JSON array"),
    ("parquet", "is a Parquet file"),
])
def test_judge_cases_of_the_wrong_shape_get_one_diagnosis(tmp_path: Path, shape: str, said: str) -> None:
    rows = [{"id": f"c{i}", "question": "q?", "answer": "a"} for i in range(3)]
    cases = tmp_path / "cases.jsonl"
    if shape == "csv":
        cases.write_text("id,question,answer\n" + "".join(f"c{i},q?,a\n" for i in range(3)), encoding="utf-8")
    elif shape == "array":
        cases.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    else:
        import polars as pl

        pl.DataFrame(rows).write_parquet(cases)
    line = one_error(ragmeter("judge", "--cases", str(cases), *NO_ENDPOINT, "--dry-run"))
    assert f"{cases}: {said}" in line and "JSON Lines" in line, line


# -- audit --corpus: a chunk export read as the golden set and the run are ---------------------------------------

def test_a_parquet_chunk_export_is_read_by_its_content_whatever_its_name(tmp_path: Path) -> None:
    import polars as pl

    corpus = tmp_path / "chunks.jsonl"  # a Parquet export given a JSON Lines name
    pl.DataFrame({"file": ["handbook.md"], "chunk_id": ["c1"], "text": ["React 18 and TypeScript 5"]}).write_parquet(corpus)
    proc = ragmeter("audit", "--golden", str(GOLDEN), "--corpus", str(corpus), "--json")
    assert error_lines(proc) == [] and proc.returncode == 0, proc.stderr


def test_a_binary_chunk_export_is_called_a_chunk_export(tmp_path: Path) -> None:
    corpus = tmp_path / "chunks.jsonl"
    corpus.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    line = one_error(ragmeter("audit", "--golden", str(GOLDEN), "--corpus", str(corpus)))
    assert f"{corpus}: is a binary file" in line and "chunk exports are JSON Lines" in line, line


@pytest.mark.parametrize("flag, name", [("--out", "summary.md"), ("--json", "comparison.json")])
def test_compare_names_the_file_it_cannot_write_not_its_folder(demo: Path, flag: str, name: str) -> None:
    target = f"/proc/{name}"  # a folder nobody, root included, can create a file in
    line = one_error(ragmeter("compare", str(demo), str(demo), flag, target))
    assert line.startswith(f"ragmeter: error: {target}: "), line


def test_compare_writes_neither_output_when_one_cannot_be_written(tmp_path: Path, demo: Path) -> None:
    markdown = tmp_path / "summary.md"
    line = one_error(ragmeter("compare", str(demo), str(demo), "--out", str(markdown), "--json", "/proc/c.json"))
    assert line.startswith("ragmeter: error: /proc/c.json: "), line
    assert not markdown.exists(), "the Markdown summary was written by a failed run"


# -- collect: a stop names a cache only when there is one ----------------------------------------------------------

def _always_raising(case: dict) -> dict:
    raise RuntimeError("RAG_API_KEY is not set")


@pytest.mark.parametrize("cached", [False, True])
def test_a_function_raising_the_same_error_claims_no_cache_of_replies(tmp_path: Path, cached: bool) -> None:
    # every case failed: there is no reply for any cache to keep, and without --cache no cache at all
    import ragmeter
    from ragmeter.errors import InputError

    cache = tmp_path / "collect.sqlite" if cached else None
    with pytest.raises(InputError) as raised:
        ragmeter.collect(GOLDEN, target=_always_raising, concurrency=1, cache=cache)
    assert "raised the same error for 5 cases" in str(raised.value) and "cache" not in str(raised.value), \
        str(raised.value)


# -- a line of 10 MB: what is shown of it ---------------------------------------------------------------------------

def test_audit_shows_a_long_evidence_phrase_cut_with_its_length(tmp_path: Path) -> None:
    rows = golden_records()
    rows[0]["expectedEvidence"] = ["y" * 100_000]  # a document pasted as an evidence phrase
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    proc = ragmeter("audit", "--golden", str(golden), "--corpus", str(EXAMPLE.parent / "_example" / "kb"))
    assert error_lines(proc) == [] and proc.returncode == 0, proc.stderr
    assert "(100,000 characters)" in proc.stdout and "y" * 81 not in proc.stdout, proc.stdout[-2000:]


def test_wrap_cuts_a_word_wider_than_a_line_at_the_columns_left() -> None:
    from ragmeter._text import columns, wrap

    word = "ab" + "\u4e2d" * 50 + "c" * 100  # CJK characters take two columns
    lines = wrap("x " + word, width=20, indent="", subsequent="  ")
    assert "".join(line.strip() for line in lines) == "x" + word
    assert all(columns(line) <= 20 for line in lines), lines
    # the word starts a line of its own, then each line is filled to the last column a character fits in
    assert lines[:3] == ["x", "  ab" + "\u4e2d" * 8, "  " + "\u4e2d" * 9], lines[:3]


def test_review_import_of_a_sheet_with_a_quote_left_open_is_one_line(tmp_path: Path, demo: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(demo, results)
    rows = (EXAMPLE / "review_filled.csv").read_text(encoding="utf-8").splitlines()
    # a note opening a quote it never closes: the rest of the sheet (a long one) reads as one cell
    rows[-1] += '"see the thread'
    sheet = tmp_path / "review.csv"
    sheet.write_text("\n".join(rows + ["x" * 200] * 1000) + "\n", encoding="utf-8")
    line = one_error(ragmeter("review", "import", str(results), str(sheet)))
    assert line.startswith(f"ragmeter: error: {sheet}:") and "quote" in line, line


@pytest.mark.parametrize("id_type", ["Int64", "Categorical"])
def test_compare_pairs_cases_whose_ids_another_tool_stored_as_another_type(tmp_path: Path, demo: Path,
                                                                          id_type: str) -> None:
    # ids 1, 2, ... as integers in one folder and as the text "1", "2", ... in the other (a hand-made
    # cases.parquet, or one rewritten by pandas); a Categorical id as Polars' categorical
    import polars as pl

    ids = {case_id: n for n, case_id in enumerate(pl.read_parquet(demo / "cases.parquet")["id"].to_list(), 1)}
    folders = []
    for name, dtype in (("text", pl.String), ("other", getattr(pl, id_type))):
        folder = tmp_path / name
        shutil.copytree(demo, folder)
        for table in ("cases.parquet", "judge.parquet"):
            frame = pl.read_parquet(folder / table)
            as_text = frame.with_columns(pl.col("id").replace_strict(ids, return_dtype=pl.Int64).cast(pl.String))
            as_text.with_columns(pl.col("id").cast(dtype)).write_parquet(folder / table)
        folders.append(str(folder))
    proc = ragmeter("compare", *folders, "--json")
    assert error_lines(proc) == [] and proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["n_paired"] == len(ids), proc.stdout[:500]


@pytest.mark.parametrize("command, folder_named", [("judge", "judge_summary.json"), ("eval", "report.md")])
def test_a_folder_named_as_an_output_is_refused_before_any_judge_call(tmp_path: Path, command: str,
                                                                     folder_named: str) -> None:
    # the endpoint does not listen: refused after a call, the error would be the connection's
    out = tmp_path / "out"
    (out / folder_named).mkdir(parents=True)
    line = one_error(ragmeter(command, "--golden", str(GOLDEN), "--run", str(RUN), *NO_ENDPOINT, "--out", str(out)))
    assert line == f"ragmeter: error: {out / folder_named}: is a folder, not a file", line


# -- a UTF-8 byte-order mark (Notepad's) in the configuration files, as in the golden set and the sheet -------------

BOM = b"\xef\xbb\xbf"


def test_a_target_toml_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    from ragmeter.collect.target import load_target

    target = tmp_path / "target.toml"
    target.write_bytes(BOM + b'url = "http://127.0.0.1:9/ask"\n')
    assert load_target(target).url == "http://127.0.0.1:9/ask"


def test_a_price_table_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    from ragmeter.judge.cost import PriceTable

    prices = tmp_path / "prices.json"
    prices.write_bytes(BOM + b'{"my-model": [1.5, 2.0]}')
    assert PriceTable.from_file(prices).lookup("my-model") is not None


def test_a_metric_file_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    from ragmeter.judge.custom import load_metric_file

    metrics = tmp_path / "metrics.toml"
    metrics.write_bytes(BOM + b'[metrics.tone]\ncriteria = "Is the answer polite?"\nscale = [1, 5]\npass_threshold = 4\n')
    assert [m.name for m in load_metric_file(metrics)] == ["tone"]


# -- an empty path (`--golden "$GOLDEN"` with GOLDEN unset) is said to be empty, not read as the current folder --

@pytest.mark.parametrize("args, named", [
    (["score", "--golden", "", "--run", str(RUN)], "--golden"),
    (["sweep", "--golden", str(GOLDEN), "--run", ""], "--run"),
    (["audit", "--golden", str(GOLDEN), "--corpus", ""], "--corpus"),  # read the whole current folder as a corpus
    (["collect", "--golden", str(GOLDEN), "--target", "", "--out", "run.jsonl"], "--target"),
    (["collect", "--golden", str(GOLDEN), "--target", "x:y", "--out", "run.jsonl", "--cache", ""], "--cache"),
    (["judge", "--cases", "", *NO_ENDPOINT, "--dry-run"], "--cases"),
    (["judge", "--golden", str(GOLDEN), "--run", str(RUN), *NO_ENDPOINT, "--dry-run", "--prices", ""], "--prices"),
    (["report", ""], "DIR"),
    (["compare", "", str(EXAMPLE)], "BASE_DIR"),
    (["review", "import", str(EXAMPLE), ""], "SHEET.csv"),
    (["cache", "repair", ""], "cache repair"),
])
def test_an_empty_path_is_called_empty(tmp_path: Path, args: List[str], named: str) -> None:
    line = one_error(ragmeter(*args, cwd=tmp_path))
    assert line.startswith(f"ragmeter: error: {named}: ") and "empty" in line and "unset variable" in line, line
    assert list(tmp_path.iterdir()) == [], "something was written"


@pytest.mark.parametrize("name", ["report.md", "warnings.json"])
def test_compare_never_writes_over_a_file_of_the_folders_it_compares(tmp_path: Path, name: str) -> None:
    # 'compare BASE CAND --out BASE/report.md' replaced the baseline's own report with the comparison
    from ragmeter.cli import main

    base, cand = tmp_path / "base", tmp_path / "cand"
    for folder in (base, cand):
        assert main(["score", "--golden", str(GOLDEN), "--run", str(RUN), "--out", str(folder)]) == 0
    target = base / name
    if not target.exists():
        target.write_text("the baseline's own report\n", encoding="utf-8")
    before = target.read_bytes()
    out = ["--out", str(target)] if name.endswith(".md") else ["--json", str(target)]
    assert main(["compare", str(base), str(cand), *out]) == 2
    assert target.read_bytes() == before


def test_judge_passes_a_custom_metrics_fields_from_the_golden_set_as_eval_does(tmp_path: Path) -> None:
    # 'ragmeter judge --golden G --run R' refused: "field 'policy' is in none of the 51 cases" (eval read it)
    rows = [{**row, "policy": "be brief"} for row in golden_records()]
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    _dry_run_with_a_policy_metric("judge", golden, tmp_path)


@pytest.mark.parametrize("args, said", [
    (["judge", "--max-failed", "5x"], "argument --max-failed"),
    (["score", "--k", "1.5", "--golden", "g", "--run", "r"], "argument --k: invalid int value: '1.5'"),
    (["score"], "the following arguments are required"),
    (["nosuchcommand"], "invalid choice: 'nosuchcommand'"),
])
def test_a_usage_error_is_one_line_pointing_at_help(args: List[str], said: str) -> None:
    # argparse printed the command's whole usage block first (25 lines for judge) and the error under it
    proc = ragmeter(*args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and "--help" in lines[0], proc.stderr
