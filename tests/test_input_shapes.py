"""Inputs in the shapes new users actually write: each is read, or gets one line saying what it is.

Every case runs ``ragmeter score`` in a subprocess, as a user would, and checks
the exit status, the exact diagnosis line and that no traceback is printed.
"""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import polars as pl
import pytest

EX = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"


def records(path: Path) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("{")]


GOLDEN = records(EX / "golden.jsonl")
RUN = records(EX / "run.jsonl")


def write_jsonl(path: Path, rows: List[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows), encoding="utf-8")
    return path


def score(golden: Any, run: Any, cwd: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmeter", "score", "--golden", str(golden), "--run", str(run), *extra],
                          capture_output=True, text=True, cwd=cwd)


def fails_with(golden: Any, run: Any, cwd: Path) -> str:
    """The one error line of a refused input (exit 2, no traceback, nothing else on stderr but notes)."""
    proc = score(golden, run, cwd, "--out", "out")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert not (cwd / "out").exists()
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("ragmeter: note:")]
    assert len(errors) == 1, proc.stderr
    prefix = "ragmeter: error: "
    assert errors[0].startswith(prefix)
    return errors[0][len(prefix):]


def summary(golden: Any, run: Any, cwd: Path) -> Dict[str, Any]:
    proc = score(golden, run, cwd, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def scores(s: Dict[str, Any]) -> Dict[str, Any]:
    """What two equivalent inputs must agree on: every aggregate, overall and per category."""
    return {"overall": s["overall"], "by_category": s["by_category"], "n_labeled": s["n_labeled"]}


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    return summary(EX / "golden.jsonl", EX / "run.jsonl", tmp_path_factory.mktemp("native"))


# ---------------------------------------------------------------------------
# Whole-file shapes
# ---------------------------------------------------------------------------


def test_csv_golden_set_is_named_as_csv(tmp_path: Path) -> None:
    lines = ["id,question,expectedFileNames"] + [f'{g["id"]},"{g["question"]}",{g["expectedFileNames"][0] if g["expectedFileNames"] else ""}' for g in GOLDEN]
    (tmp_path / "golden.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert fails_with("golden.csv", EX / "run.jsonl", tmp_path) == (
        "golden.csv: looks like CSV (first line: id,question,expectedFileNames); "
        "golden sets are JSON Lines (one object per line), see README#formats; "
        "a spreadsheet's CSV export converts with the script in README#a-golden-set-kept-in-a-spreadsheet")


def test_json_array_run_is_read_like_its_json_lines(tmp_path: Path, native: Dict[str, Any]) -> None:
    (tmp_path / "run.json").write_text(json.dumps(RUN, indent=2, ensure_ascii=False), encoding="utf-8")
    assert scores(summary(EX / "golden.jsonl", "run.json", tmp_path)) == scores(native)
    # Problems in an array name the line where the element starts.
    (tmp_path / "bad.json").write_text('[\n  {"id": "fact-01-frontend-stack", "retrieved": []},\n  {"retrieved": []}\n]\n')
    assert fails_with(EX / "golden.jsonl", "bad.json", tmp_path) == "bad.json:3: missing 'id'"
    # A cut-off array is one line at the break, not an error per line.
    (tmp_path / "cut.json").write_text(json.dumps(RUN[:3], indent=2)[:-40], encoding="utf-8")
    line = json.dumps(RUN[:3], indent=2)[:-40].count("\n") + 1
    message = fails_with(EX / "golden.jsonl", "cut.json", tmp_path)
    assert message.startswith(f"cut.json:{line}: invalid JSON in the array: "), message


def test_parquet_golden_set_scores_like_its_json_lines(tmp_path: Path, native: Dict[str, Any]) -> None:
    pl.DataFrame(GOLDEN).write_parquet(tmp_path / "golden.parquet")
    assert scores(summary("golden.parquet", EX / "run.jsonl", tmp_path)) == scores(native)
    # Recognised by its content whatever its name.
    (tmp_path / "golden.jsonl").write_bytes((tmp_path / "golden.parquet").read_bytes())
    assert scores(summary("golden.jsonl", EX / "run.jsonl", tmp_path)) == scores(native)


def test_pretty_printed_and_wrapped_json_objects(tmp_path: Path) -> None:
    (tmp_path / "one.jsonl").write_text(json.dumps(GOLDEN[0], indent=2), encoding="utf-8")
    assert fails_with("one.jsonl", EX / "run.jsonl", tmp_path) == (
        "one.jsonl: is one JSON object spread over several lines; golden sets are JSON Lines (one object per line): "
        "jq -c . one.jsonl > one.lines.jsonl")
    (tmp_path / "many.jsonl").write_text("\n".join(json.dumps(g, indent=2) for g in GOLDEN[:3]), encoding="utf-8")
    assert fails_with("many.jsonl", EX / "run.jsonl", tmp_path) == (
        "many.jsonl: holds 3 JSON objects spread over several lines (pretty-printed); golden sets are JSON Lines "
        "(one object per line): jq -c . many.jsonl > many.lines.jsonl")
    (tmp_path / "set.json").write_text(json.dumps({"name": "x", "examples": GOLDEN}, indent=2), encoding="utf-8")
    assert fails_with("set.json", EX / "run.jsonl", tmp_path) == (
        f"set.json: is one JSON object whose 'examples' holds {len(GOLDEN)} records; golden sets are JSON Lines "
        "(one object per line): jq -c '.examples[]' set.json > set.jsonl")
    (tmp_path / "run.json").write_text(json.dumps({"results": RUN}), encoding="utf-8")  # the same on one line
    assert fails_with(EX / "golden.jsonl", "run.json", tmp_path) == (
        f"run.json: is one JSON object whose 'results' holds {len(RUN)} records; run files are JSON Lines "
        "(one object per line): jq -c '.results[]' run.json > run.jsonl")


def test_compressed_binary_and_empty_files(tmp_path: Path) -> None:
    (tmp_path / "golden.jsonl.gz").write_bytes(gzip.compress((EX / "golden.jsonl").read_bytes()))
    assert fails_with("golden.jsonl.gz", EX / "run.jsonl", tmp_path) == (
        "golden.jsonl.gz: is gzip-compressed; decompress it first (gunzip -k golden.jsonl.gz)")
    (tmp_path / "blob.jsonl").write_bytes(b'{"id": "a"}\n\x00\x01\x02')
    assert fails_with("blob.jsonl", EX / "run.jsonl", tmp_path) == (
        "blob.jsonl: is a binary file (a NUL byte at offset 12), not text; "
        "golden sets are JSON Lines (one object per line), see README#formats")
    (tmp_path / "empty.jsonl").write_text("\n  \n")
    assert fails_with(EX / "golden.jsonl", "empty.jsonl", tmp_path) == (
        "empty.jsonl: is empty; run files are JSON Lines (one object per line), see README#formats")
    (tmp_path / "latin1.jsonl").write_bytes('{"id": "a", "question": "café"}\n'.encode("latin-1"))
    assert fails_with("latin1.jsonl", EX / "run.jsonl", tmp_path) == (
        "latin1.jsonl:1: not valid UTF-8 (byte 0xe9 at column 29); if it is Latin-1 or Windows-1252 text, "
        "convert it: iconv -f cp1252 -t utf-8")
    # Chinese saved by a Windows tool in its default code page: the line, the column and the right conversion
    lines = (EX / "golden.jsonl").read_text(encoding="utf-8").splitlines()
    last = next(i for i, line in enumerate(lines) if "费" in line)
    (tmp_path / "gbk.jsonl").write_bytes("\n".join(lines[: last + 1]).encode("gb18030") + b"\n")
    chinese = next(i for i, line in enumerate(lines) if not line.isascii())  # the first line UTF-8 cannot read
    raw = lines[chinese].encode("gb18030")
    with pytest.raises(UnicodeDecodeError) as bad:  # a GBK pair may read as UTF-8: the first byte that cannot
        raw.decode("utf-8")
    assert fails_with("gbk.jsonl", EX / "run.jsonl", tmp_path) == (
        f"gbk.jsonl:{chinese + 1}: not valid UTF-8 (byte 0x{raw[bad.value.start]:02x} at column "
        f"{bad.value.start + 1}); if it is Chinese text saved as GB18030 (GBK), convert it: iconv -f gb18030 -t utf-8")


def test_utf16_and_bom_files_are_read(tmp_path: Path, native: Dict[str, Any]) -> None:
    text = (EX / "golden.jsonl").read_text(encoding="utf-8")
    (tmp_path / "utf16.jsonl").write_bytes(text.encode("utf-16"))  # with a byte-order mark (PowerShell's default)
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    for name in ("utf16.jsonl", "bom.jsonl"):
        assert scores(summary(name, EX / "run.jsonl", tmp_path)) == scores(native), name


# ---------------------------------------------------------------------------
# Fields
# ---------------------------------------------------------------------------


def test_misnamed_id_is_one_line_naming_the_field(tmp_path: Path) -> None:
    rows = [{("question_id" if k == "id" else k): v for k, v in g.items()} for g in GOLDEN]
    write_jsonl(tmp_path / "golden.jsonl", rows)
    assert fails_with("golden.jsonl", EX / "run.jsonl", tmp_path) == (
        "golden.jsonl: no 'id' field; line 1 has 'question_id': accepted names are id, case_id, sample_id")
    run = [{("qid" if k == "id" else k): v for k, v in r.items()} for r in RUN]
    write_jsonl(tmp_path / "run.jsonl", ["# a comment line", *run])
    assert fails_with(EX / "golden.jsonl", "run.jsonl", tmp_path) == (
        "run.jsonl: no 'id' field; line 2 has 'qid': accepted names are id, case_id, sample_id")


def test_misnamed_question_and_retrieved_are_one_line(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "golden.jsonl", [{"id": g["id"], "prompt": g["question"]} for g in GOLDEN])
    assert fails_with("golden.jsonl", EX / "run.jsonl", tmp_path) == (
        "golden.jsonl: no 'question' field; line 1 has 'prompt': accepted names are question, user_input, input, query")
    write_jsonl(tmp_path / "run.jsonl", [{"id": r["id"], "chunks": r["retrieved"]} for r in RUN])
    assert fails_with(EX / "golden.jsonl", "run.jsonl", tmp_path) == (
        "run.jsonl: no 'retrieved' field; line 1 has 'chunks': accepted names are retrieved, retrieved_contexts, retrieval_context")
    pl.DataFrame({"id": [r["id"] for r in RUN], "hits": [[c["text"] for c in r["retrieved"]] for r in RUN]}).write_parquet(tmp_path / "run.parquet")
    assert fails_with(EX / "golden.jsonl", "run.parquet", tmp_path) == (
        "run.parquet: no 'retrieved' field; row 1 has 'hits': accepted names are retrieved, retrieved_contexts, retrieval_context")
    pl.DataFrame({"question_id": [g["id"] for g in GOLDEN], "question": [g["question"] for g in GOLDEN]}).write_parquet(tmp_path / "g.parquet")
    assert fails_with("g.parquet", EX / "run.jsonl", tmp_path) == (
        "g.parquet: no 'id' field; row 1 has 'question_id': accepted names are id, case_id, sample_id")


def test_swapped_golden_and_run_are_one_line(tmp_path: Path) -> None:
    assert fails_with(EX / "run.jsonl", EX / "golden.jsonl", tmp_path) == (
        f"{EX / 'run.jsonl'}: no 'question' field, and line 1 has 'retrieved': this looks like a run "
        "(--golden and --run swapped?)")
    # The run loader on its own says the same of a golden set.
    from ragmeter.dataset import load_run
    from ragmeter.errors import InputError

    with pytest.raises(InputError) as info:
        load_run(EX / "golden.jsonl")
    assert str(info.value) == (f"{EX / 'golden.jsonl'}: no 'retrieved' field, and line 2 has 'question': this looks like "
                               "a golden set (golden= and run= swapped?)")


def test_repeated_problems_are_grouped_with_their_first_lines(tmp_path: Path) -> None:
    rows = [{"id": g["id"]} for g in GOLDEN[:50]] + [GOLDEN[50]]
    write_jsonl(tmp_path / "golden.jsonl", rows)
    assert fails_with("golden.jsonl", EX / "run.jsonl", tmp_path) == (
        "golden.jsonl: 50 lines: missing 'question' (lines 1, 2, 3, 4, 5, ...)")
    # Several kinds: a count line, then one line per kind, in line order.
    rows = [{"id": f"x-{i}", "question": 7} for i in range(20)] + ["{oops", "{oops"] + [{"id": "y", "question": "q", "tags": "t"}]
    write_jsonl(tmp_path / "mixed.jsonl", rows)
    proc = score("mixed.jsonl", EX / "run.jsonl", tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        "ragmeter: error: 23 problems in mixed.jsonl:",
        "  mixed.jsonl: 20 lines: 'question' must be a string, got a number (lines 1, 2, 3, 4, 5, ...)",
        "  mixed.jsonl: 2 lines: invalid JSON: Expecting property name enclosed in double quotes (lines 21, 22)",
        "  mixed.jsonl:23: 'tags' must be a list of strings, got a string",
    ]
    # The same problem at different positions of each line is still one kind.
    write_jsonl(tmp_path / "run.jsonl", [{"id": r["id"], "retrieved": [{"file": "a.md"}, {"file": "b.md"}]} for r in RUN[:6]])
    assert fails_with(EX / "golden.jsonl", "run.jsonl", tmp_path) == (
        "run.jsonl: 12 times on 6 lines: retrieved[*]: missing 'text' (lines 1, 2, 3, 4, 5, ...)")
    write_jsonl(tmp_path / "one.jsonl", [{"id": RUN[0]["id"], "retrieved": [{"file": "a.md"}, {"file": "b.md"}]}])
    proc = score(EX / "golden.jsonl", "one.jsonl", tmp_path)
    assert proc.stderr.splitlines()[1:] == ["  one.jsonl:1: retrieved[0]: missing 'text'", "  one.jsonl:1: retrieved[1]: missing 'text'"]


def _renamed(rows: List[Dict[str, Any]], names: Dict[str, str]) -> List[Dict[str, Any]]:
    return [{names.get(k, k): v for k, v in r.items()} for r in rows]


GOLDEN_NAMES = {
    "ragas": {"question": "user_input", "referenceAnswer": "reference", "expectedEvidence": "reference_contexts"},
    "deepeval": {"question": "input", "referenceAnswer": "expected_output", "expectedEvidence": "context"},
}
RUN_NAMES = {
    "ragas": {"retrieved": "retrieved_contexts", "answer": "response"},
    "deepeval": {"retrieved": "retrieval_context", "answer": "actual_output"},
}


def _texts_only(rows: List[Dict[str, Any]], as_strings: bool) -> List[Dict[str, Any]]:
    """The run with each retrieved item reduced to its text: a string, or an object without ``file``."""
    return [{**r, "retrieved": [c["text"] if as_strings else {"text": c["text"], "score": c.get("score")} for c in r["retrieved"]]}
            for r in rows]


@pytest.mark.parametrize("tool", ["ragas", "deepeval"])
def test_ragas_and_deepeval_names_score_like_native_names(tmp_path: Path, tool: str, native: Dict[str, Any]) -> None:
    write_jsonl(tmp_path / "golden.jsonl", _renamed(GOLDEN, GOLDEN_NAMES[tool]))
    write_jsonl(tmp_path / "run.jsonl", _renamed(RUN, RUN_NAMES[tool]))
    assert scores(summary("golden.jsonl", EX / "run.jsonl", tmp_path)) == scores(native)
    # A run of plain strings (as both tools write them) scores as the native run without files.
    write_jsonl(tmp_path / "texts.jsonl", _renamed(_texts_only(RUN, as_strings=True), RUN_NAMES[tool]))
    write_jsonl(tmp_path / "native_texts.jsonl", _texts_only(RUN, as_strings=False))
    assert scores(summary("golden.jsonl", "texts.jsonl", tmp_path)) == scores(summary(EX / "golden.jsonl", "native_texts.jsonl", tmp_path))
    # The same run as Parquet (list-of-strings column, as the tools' to_parquet writes it).
    pl.DataFrame(_renamed(_texts_only(RUN, as_strings=True), RUN_NAMES[tool])).write_parquet(tmp_path / "texts.parquet")
    assert scores(summary("golden.jsonl", "texts.parquet", tmp_path)) == scores(summary("golden.jsonl", "texts.jsonl", tmp_path))


def test_items_without_a_file_leave_file_metrics_unscored(tmp_path: Path) -> None:
    golden = [
        {"id": "a-1", "question": "q", "expectedFileNames": ["a.md"], "expectedEvidence": ["alpha"]},
        {"id": "b-1", "question": "q", "expectedFileNames": ["b.md"]},  # files only: undecidable without files
        {"id": "c-1", "question": "q", "expectedFileNames": ["c.md"], "expectedEvidence": ["gamma"]},
        {"id": "d-1", "question": "q", "expectedEvidence": ["delta"]},  # no files expected: unaffected
        {"id": "e-1", "question": "q", "expectedFileNames": ["e.md"], "expectedEvidence": ["eps"]},  # mixed
    ]
    run = [
        {"id": "a-1", "retrieved": ["nothing", "alpha is here"]},
        {"id": "b-1", "retrieved": [{"text": "beta"}]},
        {"id": "c-1", "retrieved": [{"file": "c.md", "text": "gamma"}]},
        {"id": "d-1", "retrieved": ["delta"]},
        # A chunk that has a file keeps the file rule; the one without is judged on evidence alone.
        {"id": "e-1", "retrieved": [{"file": "x.md", "text": "eps"}, {"text": "eps again"}]},
    ]
    write_jsonl(tmp_path / "g.jsonl", golden)
    write_jsonl(tmp_path / "r.jsonl", run)
    proc = score("g.jsonl", "r.jsonl", tmp_path, "--out", "out", "--json")
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    overall = s["overall"]
    assert overall["file_hit_rate"] == {"value": 1.0, "n_scored": 1, "n_total": 5}  # only c-1 can say
    assert overall["hit_rate"] == {"value": 1.0, "n_scored": 4, "n_total": 5}  # b-1 cannot be decided
    assert s["n_labeled"] == 5 and s["cases_without_file"] == 3
    assert any(w["code"] == "no_file" and w["count"] == 3
               and w["message"].startswith("3 case(s) expecting files have retrieved items without a file")
               and w["message"].endswith(": a-1, b-1, e-1") for w in s["warnings"])
    cases = pl.read_parquet(tmp_path / "out" / "cases.parquet").sort("id")
    assert cases["file_hit"].to_list() == [None, None, True, None, None]
    assert cases["hit"].to_list() == [True, None, True, True, True]
    assert cases["first_relevant_rank"].to_list() == [2, None, 1, 1, 2]
    assert cases["labeled"].to_list() == [True] * 5
    chunks = pl.read_parquet(tmp_path / "out" / "chunks.parquet")
    assert chunks["file"].to_list() == [None, None, None, "c.md", None, "x.md", None]
    assert chunks["file_match"].to_list() == [None, None, None, True, True, False, None]
    # b-1's chunk is null, not false: its relevance could not be decided (its hit is null)
    assert chunks["relevant"].to_list() == [False, True, None, True, True, False, True]
    # A run with no file anywhere (plain strings): no file-level result at all, empty retrievals included.
    write_jsonl(tmp_path / "texts.jsonl", [{"id": "a-1", "retrieved": ["alpha"]}, {"id": "c-1", "retrieved": []}])
    s = summary("g.jsonl", "texts.jsonl", tmp_path)
    assert s["overall"]["file_hit_rate"] == {"value": None, "n_scored": 0, "n_total": 5}
    assert s["warnings"][0]["message"] == ("4 case(s) expecting files are in a run that gives no file for any retrieved item: "
                                "matched on evidence alone, file-level metrics not scored for them: a-1, b-1, c-1, e-1")


# ---------------------------------------------------------------------------
# Ids from line numbers
# ---------------------------------------------------------------------------


def test_files_without_ids_join_by_line_number_and_say_so(tmp_path: Path, native: Dict[str, Any]) -> None:
    # One ragas-style file holding both sides (no ids), used as the golden set and as the run.
    rows = [{"user_input": g["question"], "reference": g["referenceAnswer"], "reference_contexts": g["expectedEvidence"],
             "expectedFileNames": g["expectedFileNames"], "category": g["id"].split("-")[0],
             "retrieved": r["retrieved"], "response": r.get("answer")} for g, r in zip(GOLDEN, _aligned_run())]
    write_jsonl(tmp_path / "both.jsonl", rows)
    proc = score("both.jsonl", "both.jsonl", tmp_path, "--json")
    assert proc.returncode == 0, proc.stderr
    # each note once, although the file is read as the golden set, as the run and again for the audit pointer
    assert proc.stderr.splitlines() == [
        "ragmeter: note: both.jsonl: no ids; each case is named by its line number (line-1, line-2, ...), "
        "which joins it only to a file that has no ids either",
        "ragmeter: note: neither both.jsonl nor both.jsonl has ids: their cases are joined by line number"]
    s = json.loads(proc.stdout)
    assert s["ids_from_line_numbers"] is True
    assert s["overall"] == native["overall"]


def test_the_command_line_prints_each_note_once_and_leaves_logging_as_it_was(tmp_path: Path, capsys, monkeypatch) -> None:
    import logging

    from ragmeter.cli import main

    write_jsonl(tmp_path / "g.jsonl", [{"question": "q1", "expectedEvidence": ["alpha"]},
                                       {"question": "q2", "expectedEvidence": ["beta"]}])
    write_jsonl(tmp_path / "r.jsonl", [{"retrieved": [{"text": "alpha"}]}, {"retrieved": []}])
    monkeypatch.chdir(tmp_path)
    # a handler on the root logger, as `ragmeter judge`'s logging.basicConfig sets up: the notes are not printed twice
    root = logging.StreamHandler(sys.stderr)
    root.setFormatter(logging.Formatter("ragmeter: %(message)s"))
    logging.getLogger().addHandler(root)
    try:
        assert main(["score", "--golden", "g.jsonl", "--run", "r.jsonl", "--json"]) == 0
    finally:
        logging.getLogger().removeHandler(root)
    lines = capsys.readouterr().err.splitlines()
    assert [line for line in lines if "no ids" in line or "has ids" in line] == [
        "ragmeter: note: g.jsonl: no ids; each case is named by its line number (line-1, line-2), which joins it only "
        "to a file that has no ids either",
        "ragmeter: note: r.jsonl: no ids; each case is named by its line number (line-1, line-2), which joins it only "
        "to a file that has no ids either",
        "ragmeter: note: neither g.jsonl nor r.jsonl has ids: their cases are joined by line number"]
    notes = logging.getLogger("ragmeter.notes")
    assert notes.handlers == [] and notes.propagate and notes.level == logging.NOTSET  # as before the command
    import ragmeter

    (tmp_path / "h.jsonl").write_bytes((tmp_path / "g.jsonl").read_bytes())  # a note not said yet
    ragmeter.score("h.jsonl", "r.jsonl")  # a library call after the command prints nothing
    assert capsys.readouterr().err == ""


def _aligned_run() -> List[Dict[str, Any]]:
    """The example run in golden order, a case missing from it as an empty retrieval."""
    by_id = {r["id"]: r for r in RUN}
    return [by_id.get(g["id"], {"id": g["id"], "retrieved": []}) for g in GOLDEN]


def test_ids_are_joined_by_line_only_when_both_files_lack_them(tmp_path: Path) -> None:
    # labelled: a golden set without a single label is refused before any join (test_score_e2e)
    write_jsonl(tmp_path / "noid.jsonl", [{"question": g["question"], "expectedFileNames": ["kb.md"]} for g in GOLDEN[:3]])
    write_jsonl(tmp_path / "run.jsonl", [{"id": g["id"], "retrieved": []} for g in GOLDEN[:3]])
    assert fails_with("noid.jsonl", "run.jsonl", tmp_path) == (
        "run.jsonl: has ids but noid.jsonl has none, so they cannot be joined; add the same ids to noid.jsonl "
        "(or drop them from run.jsonl to join by line number)")
    write_jsonl(tmp_path / "norun.jsonl", [{"retrieved": []} for _ in range(3)])
    assert fails_with(EX / "golden.jsonl", "norun.jsonl", tmp_path) == (
        f"norun.jsonl: has no ids but {EX / 'golden.jsonl'} has, so they cannot be joined; "
        "give each run line the id of its golden case")
    write_jsonl(tmp_path / "shifted.jsonl", ["# header", *[{"retrieved": []} for _ in range(3)]])
    assert fails_with("noid.jsonl", "shifted.jsonl", tmp_path) == (
        "shifted.jsonl: neither it nor noid.jsonl has ids, and their cases are not on the same lines "
        "(line-2 to line-4 vs line-1 to line-3); files without ids join by line number only when the lines match: "
        "add ids to both")


# ---------------------------------------------------------------------------
# Nesting (issue 11.6): an input error with file and line, never a crash
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [1_000, 50_000])
def test_deep_nesting_is_an_input_error_naming_the_line(tmp_path: Path, depth: int) -> None:
    deep = "[" * depth + "]" * depth
    (tmp_path / "golden.jsonl").write_text(
        json.dumps(GOLDEN[0]) + "\n" + '{"id": "deep", "question": "q", "tags": ' + deep + "}\n", encoding="utf-8")
    expected = "golden.jsonl:2: JSON nested deeper than 64 levels"
    assert fails_with("golden.jsonl", EX / "run.jsonl", tmp_path) == expected
    (tmp_path / "run.jsonl").write_text('{"id": "fact-01-frontend-stack", "retrieved": ' + deep + "}\n", encoding="utf-8")
    assert fails_with(EX / "golden.jsonl", "run.jsonl", tmp_path) == expected.replace("golden", "run").replace(":2:", ":1:")
    (tmp_path / "array.json").write_text("[\n" + json.dumps(RUN[0]) + ",\n" + deep + "\n]\n", encoding="utf-8")
    assert fails_with(EX / "golden.jsonl", "array.json", tmp_path) == (
        "array.json:3: JSON nested deeper than 64 levels")


def test_nesting_at_the_limit_and_brackets_in_strings_are_fine() -> None:
    from ragmeter._sniff import MAX_DEPTH, deep_lines, depth_exceeded_at

    at_limit = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert depth_exceeded_at(at_limit) is None
    assert depth_exceeded_at("[" + at_limit + "]") == MAX_DEPTH
    in_string = json.dumps({"text": "[" * 500 + "\\\"{" * 100})
    assert depth_exceeded_at(in_string) is None
    raw = "\n".join([in_string, at_limit, "[" + at_limit + "]"]).encode()
    assert deep_lines(raw) == [2]


def test_comment_lines_are_skipped_in_golden_and_run_files(tmp_path: Path, native: Dict[str, Any]) -> None:
    golden = (EX / "golden.jsonl").read_text(encoding="utf-8").splitlines()
    run = (EX / "run.jsonl").read_text(encoding="utf-8").splitlines()
    (tmp_path / "golden.jsonl").write_text("\n".join(["# first", *golden[:5], "// middle", "", *golden[5:]]) + "\n", encoding="utf-8")
    (tmp_path / "run.jsonl").write_text("\n".join(["// first", *run[:5], "  # indented", *run[5:]]) + "\n", encoding="utf-8")
    assert scores(summary("golden.jsonl", "run.jsonl", tmp_path)) == scores(native)


@pytest.mark.parametrize("side", ["golden", "run"])
@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_file_of_the_wrong_shape_gets_one_line_and_no_note_before_it(tmp_path: Path, side: str, suffix: str) -> None:
    """A file with neither ids nor the fields its side needs is refused as the wrong shape: that one line on
    stderr, not first a note that its cases will be named by line number."""
    wrong = tmp_path / f"wrong{suffix}"
    rows = [{"foo": 1, "bar": "a"}, {"foo": 2, "bar": "b"}]
    if suffix == ".parquet":
        pl.DataFrame(rows).write_parquet(wrong)
    else:
        write_jsonl(wrong, rows)
    golden, run = (wrong, EX / "run.jsonl") if side == "golden" else (EX / "golden.jsonl", wrong)
    proc = score(golden, run, tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"ragmeter: error: {wrong}") and ("question" if side == "golden" else "retrieved") in proc.stderr


def test_blank_expected_files_and_phrases_label_nothing(tmp_path: Path) -> None:
    """``expectedFileNames: [""]`` and ``expectedEvidence: [""]`` name nothing: score and audit both count such a
    case as unlabelled, and the empty phrase is not reported as evidence never found."""
    import ragmeter

    golden = write_jsonl(tmp_path / "g.jsonl", [
        {"id": "a-1", "question": "q1", "expectedEvidence": ["alpha"], "expectedFileNames": ["f.md"]},
        {"id": "a-2", "question": "q2", "expectedFileNames": [""], "expectedEvidence": [" "]},
        {"id": "a-3", "question": "q3", "expectedEvidence": ["", "beta"]},
    ])
    run = write_jsonl(tmp_path / "r.jsonl", [{"id": f"a-{i}", "retrieved": [{"file": "f.md", "text": "x beta"}]}
                                            for i in (1, 2, 3)])
    result = ragmeter.score(golden, run)
    assert dict(result.cases.select("id", "labeled").iter_rows()) == {"a-1": True, "a-2": False, "a-3": True}
    assert result.summary["overall"]["hit_rate"]["n_scored"] == 2
    assert [u["phrase"] for u in result.summary["unfound_evidence"]] == ["alpha"]
    assert ragmeter.audit(golden).n_labeled == 2
