from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from ragmeter.dataset import (
    GOLDEN_SCHEMA,
    MAX_REPORTED,
    RETRIEVED_DTYPE,
    RUN_SCHEMA,
    check_run_against_golden,
    load_golden,
    load_run,
)
from ragmeter.errors import InputError


def write(path: Path, lines: list) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x, ensure_ascii=False) for x in lines) + "\n", encoding="utf-8")
    return path


GOOD_GOLDEN = [
    "# a comment",
    "// another comment",
    {"id": "fact-04-frontend-stack", "question": "Which frontend stack?", "expectedFileNames": ["architecture.md"],
     "expectedEvidence": ["React 18", "Vite"], "referenceAnswer": "React 18 with Vite"},
    "",
    "   ",
    {"id": "multi-01", "question": "Q2", "expected_files": ["a.md", "b.md"], "expected_evidence": [], "reference_answer": None,
     "category": "cross-document", "source": "wiki", "tags": ["hard", "zh"]},
    {"id": "noanswer", "question": "What is the CEO's shoe size?"},
]


def test_load_golden_jsonl(tmp_path):
    g = load_golden(write(tmp_path / "golden.jsonl", GOOD_GOLDEN))
    assert g.schema == pl.Schema(GOLDEN_SCHEMA)
    assert g["id"].to_list() == ["fact-04-frontend-stack", "multi-01", "noanswer"]
    assert g["line"].to_list() == [3, 6, 7]
    assert g["category"].to_list() == ["fact", "cross-document", "noanswer"]
    assert g["expected_files"].to_list() == [["architecture.md"], ["a.md", "b.md"], []]
    assert g["expected_evidence"].to_list() == [["React 18", "Vite"], [], []]
    assert g["reference_answer"].to_list() == ["React 18 with Vite", None, None]
    assert g["labeled"].to_list() == [True, True, False]
    assert g["tags"].to_list() == [[], ["hard", "zh"], []]
    assert g["source"].to_list() == [None, "wiki", None]


def test_load_golden_in_memory_and_dataframes():
    rows = [r for r in GOOD_GOLDEN if isinstance(r, dict)]
    g = load_golden(rows)
    assert g["line"].null_count() == 3
    assert g["id"].to_list() == ["fact-04-frontend-stack", "multi-01", "noanswer"]
    # Round trip through the output frame (snake_case columns) and through pandas.
    g2 = load_golden(g)
    assert g2.drop("line").equals(g.drop("line"))
    pd = pytest.importorskip("pandas")
    g3 = load_golden(pd.DataFrame(rows))
    assert g3["expected_files"].to_list() == g["expected_files"].to_list()


def test_golden_bad_input_lists_every_problem(tmp_path):
    path = write(tmp_path / "bad.jsonl", [
        {"id": "ok-1", "question": "fine"},                          # 1
        "{not json",                                                # 2
        {"question": "no id"},                                      # 3
        {"id": "no-question"},                                      # 4
        {"id": "str-files", "question": "q", "expectedFileNames": "a.md"},   # 5
        {"id": "ok-1", "question": "duplicate"},                    # 6
        {"id": "bad-evidence", "question": "q", "expectedEvidence": ["x", 3]},  # 7
        "[1, 2]",                                                   # 8
        {"id": "str-tags", "question": "q", "tags": "a,b"},         # 9
    ])
    with pytest.raises(InputError) as info:
        load_golden(path)
    msg = str(info.value)
    expected = [
        f"{path}:2: invalid JSON",
        f"{path}:3: missing 'id'",
        f"{path}:4: missing 'question'",
        f"{path}:5: 'expectedFileNames' must be a list of strings, got a string",
        f"{path}:6: duplicate id 'ok-1' (first at {path}:1)",
        f"{path}:7: expectedEvidence[1] must be a string, got a number",
        f"{path}:8: expected a JSON object",
        f"{path}:9: 'tags' must be a list of strings, got a string",
    ]
    for line in expected:
        assert line in msg, (line, msg)
    assert msg.startswith(f"8 problems in {path}")
    # Ordered by line.
    positions = [msg.index(line) for line in expected]
    assert positions == sorted(positions)


def test_golden_problem_list_is_capped(tmp_path):
    # Each duplicate names its own id: distinct problems, listed up to the cap.
    n = MAX_REPORTED + 7
    path = write(tmp_path / "many.jsonl", [{"id": f"d{i // 2}", "question": "q"} for i in range(2 * n)])
    with pytest.raises(InputError) as info:
        load_golden(path)
    msg = str(info.value)
    assert msg.startswith(f"{n} problems in {path}:")
    assert "and 7 more" in msg
    assert msg.count("duplicate id") == MAX_REPORTED


def test_equal_problems_are_grouped_with_their_first_lines(tmp_path):
    rows = [{"id": f"a{i}", "question": 3} for i in range(51)] + [{"id": "b", "question": "q", "tags": "x"}]
    path = write(tmp_path / "g.jsonl", rows)
    with pytest.raises(InputError) as info:
        load_golden(path)
    assert str(info.value).splitlines() == [
        f"52 problems in {path}:",
        f"  {path}: 51 lines: 'question' must be a string, got a number (lines 1, 2, 3, 4, 5, ...)",
        f"  {path}:52: 'tags' must be a list of strings, got a string",
    ]
    # One kind of problem on every line is a single line.
    path = write(tmp_path / "h.jsonl", [{"id": f"a{i}", "question": "q", "tags": "x"} for i in range(3)])
    with pytest.raises(InputError) as info:
        load_golden(path)
    assert str(info.value) == f"{path}: 3 lines: 'tags' must be a list of strings, got a string (lines 1, 2, 3)"


def test_golden_in_memory_problems_name_the_row():
    with pytest.raises(InputError) as info:
        load_golden([{"id": "a", "question": "q"}, {"id": "b"}, "oops"])
    msg = str(info.value)
    assert "golden[1]: missing 'question'" in msg
    assert "golden[2]: expected an object" in msg


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(InputError, match=r"nope\.jsonl: no such file"):
        load_golden(tmp_path / "nope.jsonl")
    with pytest.raises(InputError, match=r"nope\.jsonl: no such file"):
        load_run(str(tmp_path / "nope.jsonl"))
    with pytest.raises(InputError, match=r"nope\.parquet: no such file"):
        load_run(tmp_path / "nope.parquet")
    with pytest.raises(InputError, match="is a directory"):
        load_golden(tmp_path)
    (tmp_path / "bin.jsonl").write_bytes(b'{"id": "a", "question": "q"}\n\xff\xfe\n')
    with pytest.raises(InputError, match=r"bin\.jsonl:2: not valid UTF-8"):
        load_golden(tmp_path / "bin.jsonl")
    (tmp_path / "fake.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(InputError, match=r"fake\.parquet: cannot read as Parquet"):
        load_run(tmp_path / "fake.parquet")
    (tmp_path / "empty.jsonl").write_text("# nothing\n\n")
    with pytest.raises(InputError, match="no cases"):
        load_golden(tmp_path / "empty.jsonl")


RUN_ROWS = [
    {"id": "fact-04-frontend-stack", "retrieved": [
        {"file": "architecture.md", "chunk_id": "c1", "text": "We use React 18.", "score": 0.9},
        {"file": "other.md", "chunk_id": 7, "text": "Nothing", "score": None},
    ], "answer": "React", "retrieval_mode": "hybrid", "latency_ms": 412, "usage": {"prompt_tokens": 1200, "completion_tokens": 80}, "cost": 0.0012},
    {"id": "multi-01", "retrieved": [], "contexts": ["expanded context"], "retrievalMode": "bm25"},
    {"id": "noanswer", "retrieved": None, "prompt_tokens": 5},
]


def test_load_run_jsonl_and_memory(tmp_path):
    path = write(tmp_path / "run.jsonl", ["// header", *RUN_ROWS])
    for source in (path, RUN_ROWS, pl.DataFrame(load_run(RUN_ROWS))):
        r = load_run(source)
        assert r.schema == pl.Schema(RUN_SCHEMA)
        assert r["id"].to_list() == ["fact-04-frontend-stack", "multi-01", "noanswer"]
        first = r["retrieved"][0].to_list()
        assert first[0] == {"file": "architecture.md", "chunk_id": "c1", "text": "We use React 18.", "score": 0.9}
        assert first[1]["chunk_id"] == "7" and first[1]["score"] is None
        assert r["contexts"].to_list() == [["We use React 18.", "Nothing"], ["expanded context"], []]
        assert r["retrieval_mode"].to_list() == ["hybrid", "bm25", None]
        assert r["prompt_tokens"].to_list() == [1200, None, 5]
        assert r["completion_tokens"].to_list() == [80, None, None]
        assert r["latency_ms"].to_list() == [412.0, None, None]
        assert r["cost"].to_list() == [0.0012, None, None]
    assert load_run(path)["line"].to_list() == [2, 3, 4]


def test_load_run_parquet_roundtrip_and_casts(tmp_path):
    r = load_run(RUN_ROWS)
    r.drop("line").write_parquet(tmp_path / "run.parquet")
    back = load_run(tmp_path / "run.parquet")
    assert back.drop("line").equals(r.drop("line"))
    assert back["line"].to_list() == [1, 2, 3]
    # Integer chunk ids and scores, nested usage, no contexts column: converted column-wise.
    raw = pl.DataFrame({
        "id": [1, 2],
        "retrieved": [[{"file": "a.md", "chunk_id": 3, "text": "x", "score": 1}], []],
        "usage": [{"prompt_tokens": 10, "completion_tokens": 2}, None],
        "latencyMs": [5, None],
    })
    raw.write_parquet(tmp_path / "raw.parquet")
    got = load_run(tmp_path / "raw.parquet")
    assert got.schema == pl.Schema(RUN_SCHEMA)
    assert got["id"].to_list() == ["1", "2"]
    assert got["retrieved"].dtype == RETRIEVED_DTYPE
    assert got["retrieved"][0].to_list() == [{"file": "a.md", "chunk_id": "3", "text": "x", "score": 1.0}]
    assert got["contexts"].to_list() == [["x"], []]
    assert got["prompt_tokens"].to_list() == [10, None]
    assert got["latency_ms"].to_list() == [5.0, None]


def test_run_bad_input_jsonl(tmp_path):
    path = write(tmp_path / "run.jsonl", [
        {"id": "a", "retrieved": []},                                               # 1
        {"retrieved": []},                                                          # 2
        {"id": "b", "retrieved": "chunk text"},                                     # 3
        {"id": "c", "retrieved": [{"file": "x.md", "text": 5}]},                    # 4
        {"id": "a", "retrieved": []},                                               # 5
        "{bad",                                                                     # 6
        {"id": "d", "retrieved": [{"text": "t"}], "latency_ms": "fast"},            # 7
        {"id": "e", "retrieved": [{"file": "f", "text": "t", "score": "high"}]},    # 8
        {"id": "f"},                                                                # 9
        {"id": "g", "retrieved": [], "contexts": "one string"},                     # 10
    ])
    with pytest.raises(InputError) as info:
        load_run(path)
    msg = str(info.value)
    for line in [
        f"{path}:2: missing 'id'",
        f"{path}:3: 'retrieved' must be a list of chunks, got a string",
        f"{path}:4: retrieved[0].text must be a string, got a number",
        f"{path}:5: duplicate id 'a' (first at {path}:1)",
        f"{path}:6: invalid JSON",
        f"{path}:7: 'latency_ms' must be a number, got a string",
        f"{path}:8: 'retrieved[0].score' must be a number, got a string",
        f"{path}:9: missing 'retrieved'",
        f"{path}:10: 'contexts' must be a list of strings, got a string",
    ]:
        assert line in msg, (line, msg)


def test_run_bad_input_parquet_schema(tmp_path):
    pl.DataFrame({"id": ["a"], "retrieved": ["not a list"], "cost": ["cheap"]}).write_parquet(tmp_path / "bad.parquet")
    with pytest.raises(InputError) as info:
        load_run(tmp_path / "bad.parquet")
    msg = str(info.value)
    assert f"{tmp_path / 'bad.parquet'}: column 'retrieved' has type String" in msg
    assert "column 'cost' has type String, expected a number" in msg

    pl.DataFrame({"id": ["a", "b", "a", None], "retrieved": [[{"file": "x", "text": "t"}], [{"file": "y", "text": None}], [], []]}).write_parquet(tmp_path / "rows.parquet")
    with pytest.raises(InputError) as info:
        load_run(tmp_path / "rows.parquet")
    msg = str(info.value)
    p = tmp_path / "rows.parquet"
    assert f"{p}: row 2: a retrieved chunk has no 'text'" in msg
    assert f"{p}: row 3: duplicate id 'a' (first at row 1)" in msg
    assert f"{p}: row 4: missing 'id'" in msg

    pl.DataFrame({"id": ["a"], "retrieved": [[{"file": "x", "text": 3}]]}).write_parquet(tmp_path / "field.parquet")
    with pytest.raises(InputError, match="field retrieved.text has type Int64"):
        load_run(tmp_path / "field.parquet")
    # No id column: rows are numbered (and flagged), unless a column looks like a misnamed id.
    pl.DataFrame({"retrieved": [[{"file": "x", "text": "t"}]]}).write_parquet(tmp_path / "noid.parquet")
    numbered = load_run(tmp_path / "noid.parquet")
    assert numbered["id"].to_list() == ["line-1"] and numbered["id_from_line"].to_list() == [True]
    pl.DataFrame({"qid": ["a"], "retrieved": [[{"file": "x", "text": "t"}]]}).write_parquet(tmp_path / "qid.parquet")
    with pytest.raises(InputError) as info:
        load_run(tmp_path / "qid.parquet")
    assert str(info.value) == f"{tmp_path / 'qid.parquet'}: no 'id' field; row 1 has 'qid': accepted names are id, case_id, sample_id"


def test_check_run_against_golden(tmp_path):
    golden = load_golden(write(tmp_path / "golden.jsonl", GOOD_GOLDEN))
    run_path = write(tmp_path / "run.jsonl", [
        {"id": "fact-04-frontend-stack", "retrieved": []},
        {"id": "ghost-1", "retrieved": []},
        {"id": "ghost-2", "retrieved": []},
    ])
    run = load_run(run_path)
    with pytest.raises(InputError) as info:
        check_run_against_golden(golden, run, run_source=str(run_path))
    msg = str(info.value)
    # one line for all of them, naming each with its line
    assert "\n" not in msg and msg.startswith(f"{run_path}: 2 ids are not in the golden set")
    assert "'ghost-1' (line 2), 'ghost-2' (line 3)" in msg
    one = load_run(write(tmp_path / "one.jsonl", [{"id": "ghost-1", "retrieved": []}]))
    with pytest.raises(InputError, match=r"one.jsonl:1: id 'ghost-1' is not in the golden set$"):
        check_run_against_golden(golden, one, run_source=str(tmp_path / "one.jsonl"))
    # Golden cases missing from the run are returned, not raised.
    ok = load_run([{"id": "multi-01", "retrieved": []}])
    assert check_run_against_golden(golden, ok) == ["fact-04-frontend-stack", "noanswer"]


def test_golden_fast_path_equals_validating_path(tmp_path):
    """Well-formed records take a fast path; the frame must equal the validated one."""
    from ragmeter.dataset import _fast_golden

    records = [
        {"id": "a-1", "question": "q", "expectedFileNames": ["x.md"], "expectedEvidence": ["e"], "referenceAnswer": "r"},
        {"id": "b-2", "question": "q", "expected_files": ["y.md"], "expected_evidence": [" "], "reference_answer": None,
         "category": "", "source": "s", "tags": ["t"]},
        {"id": "c-3", "question": "q", "expectedFileNames": [], "category": "cat"},
        # Equal values under two spellings: not fast, but valid.
        {"id": "d-4", "question": "q", "expectedFileNames": ["z.md"], "expected_files": ["z.md"]},
        {"id": 5, "question": "q", "expectedEvidence": ["n"]},  # integer id: not fast, but valid
    ]
    assert [(_fast_golden(r) is not None) for r in records] == [True, True, True, False, False]
    path = write(tmp_path / "g.jsonl", records)
    g = load_golden(path)
    assert g.schema == pl.Schema(GOLDEN_SCHEMA)
    assert g["id_from_line"].to_list() == [False] * 5
    assert g.drop("id_from_line").to_dicts() == [
        {"id": "a-1", "question": "q", "expected_files": ["x.md"], "expected_evidence": ["e"], "reference_answer": "r",
         "category": "a", "source": None, "tags": [], "labeled": True, "line": 1},
        # a blank phrase names nothing: dropped
        {"id": "b-2", "question": "q", "expected_files": ["y.md"], "expected_evidence": [], "reference_answer": None,
         "category": "b", "source": "s", "tags": ["t"], "labeled": True, "line": 2},
        {"id": "c-3", "question": "q", "expected_files": [], "expected_evidence": [], "reference_answer": None,
         "category": "cat", "source": None, "tags": [], "labeled": False, "line": 3},
        {"id": "d-4", "question": "q", "expected_files": ["z.md"], "expected_evidence": [], "reference_answer": None,
         "category": "d", "source": None, "tags": [], "labeled": True, "line": 4},
        {"id": "5", "question": "q", "expected_files": [], "expected_evidence": ["n"], "reference_answer": None,
         "category": "5", "source": None, "tags": [], "labeled": True, "line": 5},
    ]
    # Bad records are never taken by the fast path, whatever their position.
    bad = [{"id": "x", "question": 3}, {"id": "y", "question": "q", "expectedEvidence": "not a list"},
           {"id": "z", "question": "q", "tags": [1]}, {"id": " ", "question": "q"}, {"id": "w", "question": "q", "source": 2},
           {"id": "v", "question": "q", "expectedFileNames": ["a"], "expected_files": ["b"]}]
    assert all(_fast_golden(r) is None for r in bad)
    with pytest.raises(InputError) as err:
        load_golden(write(tmp_path / "bad.jsonl", records[:1] + bad + records[:1]))
    msg = str(err.value)
    for line in range(2, 8):
        assert f"bad.jsonl:{line}:" in msg
    assert "duplicate id 'a-1'" in msg


def test_golden_fingerprint_is_about_the_cases_not_the_file(tmp_path):
    from ragmeter.dataset import golden_fingerprint

    cases = [r for r in GOOD_GOLDEN if isinstance(r, dict)]
    plain = golden_fingerprint(load_golden(write(tmp_path / "plain.jsonl", cases)))
    commented = golden_fingerprint(load_golden(write(tmp_path / "commented.jsonl", GOOD_GOLDEN)))
    reordered = golden_fingerprint(load_golden(write(tmp_path / "reordered.jsonl", cases[::-1])))
    ragas = [{("user_input" if k == "question" else "reference" if k == "referenceAnswer" else k): v for k, v in c.items()} for c in cases]
    renamed = golden_fingerprint(load_golden(write(tmp_path / "ragas.jsonl", ragas)))
    assert plain == commented == reordered == renamed
    relabelled = [dict(cases[0], expectedEvidence=["React 19"]), *cases[1:]]
    assert golden_fingerprint(load_golden(write(tmp_path / "relabelled.jsonl", relabelled))) != plain


def test_in_memory_rows_without_ids_are_numbered_and_joined_only_with_each_other(capsys, caplog):
    import logging

    import ragmeter

    golden = [{"user_input": "q1", "reference_contexts": ["alpha"]}, {"user_input": "q2", "reference_contexts": ["beta"]}]
    run = [{"retrieved_contexts": ["alpha here", "x"], "response": "a"}, {"retrieved_contexts": ["nothing"]}]
    # The notes are INFO records on the "ragmeter.notes" logger: an application shows them with logging, and a
    # library call prints nothing (the command line prints them, tests/test_input_shapes.py).
    with caplog.at_level(logging.INFO, logger="ragmeter.notes"):
        g = load_golden(golden)
        assert g["id"].to_list() == ["row-0", "row-1"] and g["id_from_line"].all()
        assert g["category"].to_list() == ["uncategorised"] * 2
        assert [(r.name, r.levelno) for r in caplog.records] == [("ragmeter.notes", logging.INFO)]
        assert caplog.messages == ["golden: no ids; each case is named by its row number (row-0, row-1), which joins "
                                   "it only to a file that has no ids either"]
        caplog.clear()
        result = ragmeter.score(golden, run)
        assert "neither golden nor run has ids: their cases are joined by row number" in caplog.messages
    assert result.summary["ids_from_line_numbers"] is True
    assert result.cases["hit"].to_list() == [True, False]
    assert capsys.readouterr().err == ""
    ragmeter.score(golden, run)  # without logging set up, too (Python's last-resort handler shows WARNING and up)
    assert capsys.readouterr().err == ""
    with pytest.raises(InputError, match="run: has ids but golden has none"):
        ragmeter.score(golden, [{"id": "row-0", "retrieved": []}])
    # A frame from load_golden keeps its flag when passed back.
    assert load_golden(g)["id_from_line"].all()


@pytest.mark.parametrize("first_line, shape", [
    ("id\tquestion", "looks like TSV (first line: id\tquestion)"),
    ("- id: fact-1", "looks like YAML"),
    ("| id | question |", "looks like a Markdown table"),
    ("<cases>", "looks like XML or HTML"),
])
def test_text_files_in_other_shapes_get_one_line(tmp_path, first_line, shape):
    path = tmp_path / "g.jsonl"
    path.write_text(first_line + "\n" + "more text\n" * 3, encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_golden(path)
    sheet = "; a spreadsheet's TSV export converts with the script in README#a-golden-set-kept-in-a-spreadsheet"
    assert str(info.value) == (f"{path}: {shape}; golden sets are JSON Lines (one object per line), see README#formats"
                               + (sheet if "TSV" in shape else ""))


def test_a_table_with_run_columns_is_validated_by_columns_with_the_same_result():
    """A Polars/Arrow table whose ``retrieved`` is a list of structs (a Parquet file's or a Ray batch's
    columns) takes the column path, not one Python dict per row; the run is the same as from the records."""
    records = [
        {"id": "a", "retrieved": [{"file": "f.md", "chunk_id": "1", "text": "alpha", "score": 0.5}],
         "answer": "x", "latency_ms": 12.0},
        {"id": "b", "retrieved": [{"file": None, "chunk_id": None, "text": "beta", "score": None},
                                  {"file": "g.md", "chunk_id": "2", "text": "gamma", "score": 0.1}]},
        {"id": "c", "retrieved": []},
    ]
    from_records = load_run(records)
    from_table = load_run(pl.DataFrame(records))
    assert from_table.equals(from_records)
    assert from_table["line"].null_count() == from_table.height  # in-memory input has no lines
    bad = pl.DataFrame(records).with_columns(pl.Series("id", ["a", "a", "c"]))
    with pytest.raises(InputError, match=r"row 2: duplicate id 'a' \(first at row 1\)"):
        load_run(bad)


_SPELLING_BASE = [{"id": f"c{i}", "retrieved": [{"file": "a.md", "text": "x y"}], "answer": "a", "latency_ms": 10.0}
                  for i in range(3)]


def _run_in_three_forms(tmp_path, rows):
    """The same records as JSON Lines, as Parquet and as an in-memory table (the column path)."""
    frame = pl.DataFrame(rows)
    frame.write_parquet(tmp_path / "t.parquet")
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return {"jsonl": tmp_path / "t.jsonl", "parquet": tmp_path / "t.parquet", "frame": frame}


@pytest.mark.parametrize("form", ["jsonl", "parquet", "frame"])
def test_two_spellings_of_a_run_field_are_read_alike_by_rows_and_by_columns(tmp_path, form):
    # the second spelling fills where the first is null; where both hold different values the row is named
    rows = [{**r, "latency_ms": None if i == 0 else r["latency_ms"], "latencyMs": 7.0 if i == 0 else 10.0}
            for i, r in enumerate(_SPELLING_BASE)]
    assert load_run(_run_in_three_forms(tmp_path, rows)[form])["latency_ms"].to_list() == [7.0, 10.0, 10.0]
    rows = [{**r, "response": "b" if i == 2 else "a"} for i, r in enumerate(_SPELLING_BASE)]
    with pytest.raises(InputError) as err:
        load_run(_run_in_three_forms(tmp_path, rows)[form])
    where = {"jsonl": "t.jsonl:3:", "parquet": "t.parquet: row 3:", "frame": "run: row 3:"}[form]
    assert str(err.value).startswith(str(tmp_path / where) if form != "frame" else where), str(err.value)
    assert "both 'answer' and 'response' given with different values" in str(err.value)
