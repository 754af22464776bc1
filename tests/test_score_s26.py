"""``score`` / ``sweep`` / ``eval`` on inputs that used to slip through or crash: lone UTF-16 surrogates,
float32 scores at a threshold, the file-vs-chunk gap line, a category named ALL, zero-width evidence phrases,
huge --k, long unfound phrases, NaN scores in Parquet."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List

import pytest

from ragmeter.cli import main


def write_lines(path: Path, lines: List[str]) -> Path:
    """Lines written as given (raw JSON, so that escapes such as ``\\udc00`` reach the file unchanged)."""
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def write_jsonl(path: Path, rows: List[Any]) -> Path:
    return write_lines(path, [json.dumps(r, ensure_ascii=False) for r in rows])


def refused(capsys: pytest.CaptureFixture, argv: List[str]) -> str:
    """The one error line of a command that must refuse its input (exit 2, nothing else but notes)."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("ragmeter: note:")]
    assert len(lines) == 1 and lines[0].startswith("ragmeter: error: "), err
    return lines[0][len("ragmeter: error: "):]


GOLDEN = '{"id":"a-1","question":"q","expectedEvidence":["gold"]}'
RUN = '{"id":"a-1","retrieved":[{"file":"f.md","text":"gold x","score":0.5}]}'


# 1. lone surrogates ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["score", "sweep", "eval"])
def test_a_lone_surrogate_in_a_run_chunk_is_malformed_input(tmp_path: Path, capsys, command: str) -> None:
    golden = write_lines(tmp_path / "g.jsonl", [GOLDEN])
    run = write_lines(tmp_path / "r.jsonl", [RUN, '{"id":"a-2","retrieved":[{"file":"f.md","text":"gold\\udc00x","score":0.5}]}'])
    write_lines(golden, [GOLDEN, '{"id":"a-2","question":"q2","expectedEvidence":["gold"]}'])
    out = tmp_path / ("out.parquet" if command == "sweep" else "out")
    line = refused(capsys, [command, "--golden", str(golden), "--run", str(run), "--out", str(out)]
                   + (["--no-judge"] if command == "eval" else []))
    assert line.startswith(f"{run}:2: ") and "retrieved[0].text" in line and "surrogate" in line, line
    assert "\\udc00" in line
    assert not out.exists()


def test_a_lone_surrogate_in_a_golden_phrase_is_malformed_input(tmp_path: Path, capsys) -> None:
    golden = write_lines(tmp_path / "g.jsonl", ['{"id":"a-1","question":"q","expectedEvidence":["ok","\\ud800"]}'])
    run = write_lines(tmp_path / "r.jsonl", [RUN])
    line = refused(capsys, ["score", "--golden", str(golden), "--run", str(run)])
    assert line.startswith(f"{golden}:1: ") and "expectedEvidence[1]" in line and "\\ud800" in line, line


def test_a_lone_surrogate_in_a_json_array_is_malformed_input(tmp_path: Path, capsys) -> None:
    golden = write_lines(tmp_path / "g.json", ["[" + GOLDEN + "]"])
    run = tmp_path / "r.json"
    run.write_text('[\n{"id":"a-1","retrieved":[],"answer":"an \\ud83d answer"}\n]\n', encoding="utf-8")
    line = refused(capsys, ["sweep", "--golden", str(golden), "--run", str(run), "--thresholds", "0.1"])
    assert line.startswith(f"{run}:2: ") and "'answer'" in line and "\\ud83d" in line, line


def test_a_surrogate_pair_is_a_character_not_a_problem(tmp_path: Path, capsys) -> None:
    golden = write_lines(tmp_path / "g.jsonl", ['{"id":"a-1","question":"q","expectedEvidence":["gold\\ud83d\\ude00"]}'])
    run = write_lines(tmp_path / "r.jsonl", ['{"id":"a-1","retrieved":[{"file":"f.md","text":"gold\\ud83d\\ude00 x","score":0.5}]}'])
    assert main(["score", "--golden", str(golden), "--run", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["overall"]["hit_rate"]["value"] == 1.0


def test_the_library_refuses_a_surrogate_in_records_in_memory() -> None:
    import ragmeter
    from ragmeter.errors import InputError

    with pytest.raises(InputError, match=r"run\[0\]: 'retrieved\[0\]\.text' holds a lone UTF-16 surrogate"):
        ragmeter.score([json.loads(GOLDEN)], [{"id": "a-1", "retrieved": [{"text": "gold\udc00"}]}])


# 2. float32 scores at a threshold -------------------------------------------------------------------------------

def _parquet_run(path: Path, score: Any, score_type: Any) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    item = pa.struct([("file", pa.string()), ("text", pa.string()), ("score", score_type)])
    pq.write_table(pa.table({"id": ["a-1"], "retrieved": pa.array([[{"file": "f.md", "text": "gold x", "score": score}]],
                                                                  type=pa.list_(item))}), path)
    return path


@pytest.mark.parametrize("value", [0.7, 0.3, 0.1, 0.55])
def test_a_float32_score_equal_to_the_threshold_is_kept_as_in_jsonl(tmp_path: Path, capsys, value: float) -> None:
    import pyarrow as pa

    golden = write_lines(tmp_path / "g.jsonl", [GOLDEN])
    rows = {}
    for name, run in (("jsonl", write_jsonl(tmp_path / "r.jsonl", [{"id": "a-1", "retrieved": [
                          {"file": "f.md", "text": "gold x", "score": value}]}])),
                      ("f32", _parquet_run(tmp_path / "r32.parquet", value, pa.float32())),
                      ("f64", _parquet_run(tmp_path / "r64.parquet", value, pa.float64()))):
        assert main(["sweep", "--golden", str(golden), "--run", str(run), "--thresholds", f"{value},{value + 0.01}",
                     "--json"]) == 0
        rows[name] = [(r["threshold"], r["category"], r["hit_rate"], r["mean_kept"]) for r in json.loads(capsys.readouterr().out)]
    assert rows["f32"] == rows["jsonl"] == rows["f64"]
    assert rows["f32"][0][2] == 1.0 and rows["f32"][-1][2] == 0.0


def test_float32_scores_keep_their_order_and_read_as_written(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    import ragmeter

    values = [0.9, 0.7000001, 0.7, 0.69999999, 0.1]
    item = pa.struct([("file", pa.string()), ("text", pa.string()), ("score", pa.float32())])
    run = tmp_path / "r.parquet"
    pq.write_table(pa.table({"id": ["a-1"], "retrieved": pa.array(
        [[{"file": "f.md", "text": f"t{i}", "score": v} for i, v in enumerate(values)]], type=pa.list_(item))}), run)
    golden = write_lines(tmp_path / "g.jsonl", [GOLDEN])
    scores = ragmeter.score(golden, run).chunks["score"].to_list()
    assert scores == [0.9, 0.7000001, 0.7, 0.7, 0.1]  # float32 cannot tell 0.69999999 from 0.7
    table = ragmeter.sweep(golden, run, [0.7, 0.7000001])
    assert table.filter(category="ALL")["mean_kept"].to_list() == [4.0, 2.0]


# 8. NaN scores in a Parquet run ----------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
@pytest.mark.parametrize("command", ["score", "eval"])
def test_a_non_finite_parquet_score_is_refused_as_in_jsonl(tmp_path: Path, capsys, command: str, bad: float) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    golden = write_lines(tmp_path / "g.jsonl", [GOLDEN, '{"id":"a-2","question":"q2","expectedEvidence":["gold"]}'])
    item = pa.struct([("file", pa.string()), ("text", pa.string()), ("score", pa.float64())])
    run = tmp_path / "r.parquet"
    pq.write_table(pa.table({"id": ["a-1", "a-2"], "retrieved": pa.array(
        [[{"file": "f.md", "text": "gold", "score": 0.5}],
         [{"file": "f.md", "text": "x", "score": 0.5}, {"file": "f.md", "text": "gold", "score": bad}]],
        type=pa.list_(item))}), run)
    jsonl = write_lines(tmp_path / "r.jsonl", [RUN, '{"id":"a-2","retrieved":[{"file":"f.md","text":"x","score":0.5},'
                                                    f'{{"file":"f.md","text":"gold","score":{"NaN" if bad != bad else "Infinity"}}}]}}'])
    extra = ["--no-judge"] if command == "eval" else []
    said = {}
    for name, path in (("parquet", run), ("jsonl", jsonl)):
        out = tmp_path / f"out_{name}"
        said[name] = refused(capsys, [command, "--golden", str(golden), "--run", str(path), "--out", str(out), *extra])
        assert not out.exists()
    assert said["jsonl"] == f"{jsonl}:2: 'retrieved[1].score' must be a finite number, got {bad}"
    assert said["parquet"] == f"{run}: row 2: 'retrieved[1].score' must be a finite number, got {bad}"


def test_the_library_refuses_a_nan_score_in_a_frame() -> None:
    import polars as pl

    import ragmeter
    from ragmeter.errors import InputError

    run = pl.DataFrame({"id": ["a-1"], "retrieved": [[{"file": "f.md", "text": "gold", "score": float("nan")}]]})
    with pytest.raises(InputError, match=r"row 1: 'retrieved\[0\]\.score' must be a finite number, got nan"):
        ragmeter.score([json.loads(GOLDEN)], run)


# 3. the file-level vs chunk-level line ---------------------------------------------------------------------------

def _gap_line(capsys, tmp_path: Path, golden: List[Any], run: List[Any]) -> List[str]:
    g, r = write_jsonl(tmp_path / "g.jsonl", golden), write_jsonl(tmp_path / "r.jsonl", run)
    assert main(["score", "--golden", str(g), "--run", str(r)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    return [part for part in out.split("retrieval modes:")[1:] if "file-level" in part]


def test_the_file_vs_chunk_gap_is_over_the_cases_both_score(tmp_path: Path, capsys) -> None:
    """One case expects a file (found, with its answer chunk); two expect evidence alone (missed): file Hit 100%
    over 1 case, chunk Hit 33.3% over 3. The line said "+66.7 points (the right file came back, the answer chunk
    did not)", which no case did."""
    golden = [{"id": "a-1", "question": "q", "expectedFileNames": ["f.md"], "expectedEvidence": ["gold"]},
              {"id": "a-2", "question": "q", "expectedEvidence": ["gold"]},
              {"id": "a-3", "question": "q", "expectedEvidence": ["gold"]}]
    run = [{"id": "a-1", "retrieved": [{"file": "f.md", "text": "gold"}]},
           {"id": "a-2", "retrieved": [{"file": "f.md", "text": "lead"}]},
           {"id": "a-3", "retrieved": [{"file": "f.md", "text": "lead"}]}]
    assert _gap_line(capsys, tmp_path, golden, run) == []


def test_the_gap_says_over_how_many_cases_and_how_many_lost_the_chunk(tmp_path: Path, capsys) -> None:
    golden = [{"id": "a-1", "question": "q", "expectedFileNames": ["f.md"], "expectedEvidence": ["gold"]},
              {"id": "a-2", "question": "q", "expectedFileNames": ["f.md"], "expectedEvidence": ["gold"]},
              {"id": "a-3", "question": "q", "expectedEvidence": ["gold"]}]
    run = [{"id": "a-1", "retrieved": [{"file": "f.md", "text": "lead"}]},
           {"id": "a-2", "retrieved": [{"file": "f.md", "text": "gold"}]},
           {"id": "a-3", "retrieved": [{"file": "f.md", "text": "gold"}]}]
    import ragmeter

    gap = ragmeter.score(write_jsonl(tmp_path / "g0.jsonl", golden), write_jsonl(tmp_path / "r0.jsonl", run)).summary["file_vs_chunk_hit"]
    assert gap == {"n": 2, "file_hit_rate": 1.0, "hit_rate": 0.5, "n_file_only": 1}
    [line] = _gap_line(capsys, tmp_path, golden, run)
    assert ("file-level minus chunk-level Hit@5: +50.0 points over the cases where both are scored (n=2; in 1 of them the "
            "right file came back without the answer chunk)") in line, line


# 6. an enormous --k ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["score", "sweep", "eval"])
@pytest.mark.parametrize("k", ["18446744073709551616", "4294967296", "1000001"])
def test_an_enormous_k_is_refused_naming_the_flag(tmp_path: Path, capsys, command: str, k: str) -> None:
    golden, run = write_lines(tmp_path / "g.jsonl", [GOLDEN]), write_lines(tmp_path / "r.jsonl", [RUN])
    out = tmp_path / ("out.parquet" if command == "sweep" else "out")
    line = refused(capsys, [command, "--golden", str(golden), "--run", str(run), "--k", k, "--out", str(out)]
                   + (["--no-judge"] if command == "eval" else []))
    assert line.startswith(f"--k must be at most 1,000,000, got {k}"), line
    assert not out.exists()


def test_the_largest_k_is_taken(tmp_path: Path, capsys) -> None:
    golden, run = write_lines(tmp_path / "g.jsonl", [GOLDEN]), write_lines(tmp_path / "r.jsonl", [RUN])
    assert main(["sweep", "--golden", str(golden), "--run", str(run), "--k", "1000000", "--json"]) == 0
    capsys.readouterr()


def test_the_library_bounds_k_too() -> None:
    import ragmeter
    from ragmeter.errors import InputError

    with pytest.raises(InputError, match=r"^k must be at most 1,000,000, got 18446744073709551616"):
        ragmeter.sweep([json.loads(GOLDEN)], [json.loads(RUN)], [0.1], k=2 ** 64)


# 7. a long phrase never found ----------------------------------------------------------------------------------

def test_a_long_unfound_phrase_is_cut_on_the_console_and_kept_whole_in_warnings_json(tmp_path: Path, capsys) -> None:
    phrase = "needle " * 14_000 + "end"
    golden = write_jsonl(tmp_path / "g.jsonl", [{"id": "a-1", "question": "q", "expectedEvidence": [phrase, "gold"]}])
    run = write_lines(tmp_path / "r.jsonl", [RUN])
    out = tmp_path / "out"
    assert main(["score", "--golden", str(golden), "--run", str(run), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert len(said.splitlines()) < 40, said[:2000]
    flat = " ".join(said.split())
    assert " ".join(f"a-1: '{phrase[:80]}...' ({len(phrase):,} characters)".split()) in flat, flat[-1500:]
    assert "needle " * 20 not in said
    full = json.loads((out / "warnings.json").read_text())["warnings"]
    [never] = [w for w in full if w["code"] == "evidence_never_found"]
    assert never["details"] == [f"a-1: {phrase!r}"]
    assert len(never["message"]) < 300


# 5. phrases of zero-width characters -----------------------------------------------------------------------------

@pytest.mark.parametrize("phrase", ["\u200b", "\u200b\ufeff \u00ad", "\u2060\n"])
def test_a_golden_set_whose_phrases_normalise_to_nothing_is_refused(tmp_path: Path, capsys, phrase: str) -> None:
    golden = write_jsonl(tmp_path / "g.jsonl", [{"id": "a-1", "question": "q", "expectedEvidence": [phrase]}])
    run = write_lines(tmp_path / "r.jsonl", [RUN])
    line = refused(capsys, ["score", "--golden", str(golden), "--run", str(run)])
    assert "no case has expected files or evidence phrases" in line, line


def test_a_zero_width_phrase_labels_nothing_and_is_never_reported_unfound(tmp_path: Path, capsys) -> None:
    import ragmeter

    golden = write_jsonl(tmp_path / "g.jsonl", [
        {"id": "a-1", "question": "q", "expectedEvidence": ["gold", "\u200b"]},
        {"id": "a-2", "question": "q", "expectedEvidence": ["\u200b\u200c"]}])
    run = write_jsonl(tmp_path / "r.jsonl", [json.loads(RUN), {"id": "a-2", "retrieved": [{"file": "f.md", "text": "gold"}]}])
    result = ragmeter.score(golden, run)
    assert result.cases["labeled"].to_list() == [True, False]
    assert result.summary["unfound_evidence"] == []
    assert not [w for w in result.summary["warnings"] if w["code"] == "evidence_never_found"]
    assert result.summary["overall"]["hit_rate"]["n_scored"] == 1


# 4. a category named ALL --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", [{"id": "x-2", "question": "q", "expectedEvidence": ["gold"], "category": "ALL"},
                                  {"id": "ALL-2", "question": "q", "expectedEvidence": ["gold"]}])
@pytest.mark.parametrize("command", ["score", "sweep"])
def test_the_reserved_category_all_is_refused_naming_file_and_line(tmp_path: Path, capsys, case: Any, command: str) -> None:
    golden = write_jsonl(tmp_path / "g.jsonl", [json.loads(GOLDEN), case])
    run = write_jsonl(tmp_path / "r.jsonl", [json.loads(RUN), {**json.loads(RUN), "id": case["id"]}])
    line = refused(capsys, [command, "--golden", str(golden), "--run", str(run)])
    assert line.startswith(f"{golden}:2: ") and "'ALL'" in line and "reserved" in line, line


def test_the_sweeps_overall_row_comes_first_at_each_threshold(tmp_path: Path, capsys) -> None:
    golden = write_jsonl(tmp_path / "g.jsonl", [{"id": f"{c}-1", "question": "q", "expectedEvidence": ["gold"]}
                                                 for c in ("42", "ACL", "b")])
    run = write_jsonl(tmp_path / "r.jsonl", [{**json.loads(RUN), "id": f"{c}-1"} for c in ("42", "ACL", "b")])
    assert main(["sweep", "--golden", str(golden), "--run", str(run), "--thresholds", "0.1,0.9", "--json"]) == 0
    rows = [(r["threshold"], r["category"]) for r in json.loads(capsys.readouterr().out)]
    assert rows == [(t, c) for t in (0.1, 0.9) for c in ("ALL", "42", "ACL", "b")]
