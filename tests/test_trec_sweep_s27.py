"""Review 27: ``ragmeter.trec.evaluate`` on tables and dicts, ``ragmeter sweep`` and ``ragmeter cache repair``."""
from __future__ import annotations

import pytest

from ragmeter.errors import InputError

# -- 1. a null in a table's query, document or value column is refused naming the row and column, never read
#       as an empty id (a null document was a retrieved or judged document "", a null query a query "")

_QRELS = {"q1": {"d1": 1, "d2": 0}, "q2": {"a": 1}}


def _tables():
    import polars as pl

    run = pl.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["d1", "d2", "a"], "score": [2.0, 1.0, 1.0]})
    qrels = pl.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["d1", "d2", "a"], "relevance": [1, 0, 1]})
    return pl, qrels, run


@pytest.mark.parametrize("which, column, row", [
    ("run", "doc_id", 1), ("run", "query_id", 3), ("qrels", "doc_id", 2), ("qrels", "query_id", 3),
    ("qrels", "relevance", 2), ("run", "score", 1),
])
def test_a_null_in_a_trec_table_is_refused_naming_row_and_column(which: str, column: str, row: int) -> None:
    from ragmeter.trec import evaluate

    pl, qrels, run = _tables()
    assert evaluate(qrels, run, "map")["map"].to_list() == [1.0, 1.0]
    table = run if which == "run" else qrels
    nulled = table.with_columns(pl.when(pl.int_range(pl.len()) == row - 1).then(None)
                                .otherwise(pl.col(column)).alias(column))
    args = (qrels, nulled) if which == "run" else (nulled, run)
    with pytest.raises(InputError, match=rf"^{which}: row {row}: {column} is missing \(null\)"):
        evaluate(*args, "map")


def test_a_null_id_in_a_pandas_table_is_refused_too() -> None:
    import pandas as pd

    from ragmeter.trec import evaluate

    run = pd.DataFrame({"qid": ["q1", "q1", "q2"], "docno": ["d1", None, "a"], "score": [2.0, 1.0, 1.0]})
    with pytest.raises(InputError, match=r"^run: row 2: docno is missing \(null\)"):
        evaluate(_QRELS, run, "map")


# -- 2. `sweep --thresholds -2,-1,0` (a cross-encoder's logits are negative): argparse took a value starting with
#       '-' for an option unless it is one number, so a list was "argument --thresholds: expected one argument"

_GOLDEN = [{"id": "a", "question": "qa", "expectedFileNames": ["x.md"], "category": "c1"},
           {"id": "b", "question": "qb", "expectedFileNames": ["y.md"], "category": "c1"}]
_RUN = [{"id": "a", "retrieved": [{"file": "x.md", "text": "t", "score": -1.5}, {"file": "w.md", "text": "t",
                                                                                "score": -3.0}]},
        {"id": "b", "retrieved": [{"file": "w.md", "text": "t", "score": 0.5}, {"file": "y.md", "text": "t",
                                                                               "score": -0.5}]}]


def _sweep_cli(tmp_path, *extra: str):
    import json
    import subprocess
    import sys

    for name, rows in (("g.jsonl", _GOLDEN), ("r.jsonl", _RUN)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "ragmeter", "sweep", "--golden", "g.jsonl", "--run", "r.jsonl",
                           *extra], capture_output=True, text=True, cwd=tmp_path)


@pytest.mark.parametrize("given, thresholds", [("-2,-1,0", [-2.0, -1.0, 0.0]), ("-inf,0", [float("-inf"), 0.0])])
def test_negative_thresholds_are_read_after_a_space_as_after_an_equals_sign(tmp_path, given, thresholds) -> None:
    import json

    import ragmeter

    proc = _sweep_cli(tmp_path, "--thresholds", given, "--json")
    assert proc.returncode == 0, proc.stderr
    rows = [r for r in json.loads(proc.stdout) if r["category"] == "ALL"]
    assert [float(r["threshold"]) for r in rows] == thresholds
    expected = ragmeter.sweep(_GOLDEN, _RUN, thresholds).filter(category="ALL")
    assert [r["hit_rate"] for r in rows] == expected["hit_rate"].to_list()
    assert [r["n_scored"] for r in rows] == expected["n_scored"].to_list() == [2] * len(thresholds)


def test_a_missing_thresholds_value_is_still_a_usage_error(tmp_path) -> None:
    proc = _sweep_cli(tmp_path, "--thresholds", "--json")
    assert proc.returncode == 2 and "--thresholds" in proc.stderr and proc.stdout == ""


# -- 3. `cache repair` prints its report within 80 columns, as every command's prose (the report of a repair
#       was one line of 130 characters and more: path, counts and the damaged file's name)

def _damaged_cache(path) -> None:
    from ragmeter.judge.cache import Cache

    cache = Cache(path)
    for i in range(40):
        cache.put(f"k{i}", {"content": f"{i} " + "x" * 3000, "finish_reason": "stop"}, prompt="p", model="m")
    cache.close()
    with open(path, "r+b") as fh:  # a page of the table's data overwritten
        fh.seek(4096 * 5)
        fh.write(b"\xff" * 4096)


def test_cache_repair_report_fits_80_columns(tmp_path) -> None:
    import subprocess
    import sys

    folder = tmp_path / "a-project-folder-with-a-long-name" / ".ragmeter"
    folder.mkdir(parents=True)
    _damaged_cache(folder / "cache.sqlite")
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "cache", "repair", str(folder / "cache.sqlite")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    damaged = [p.name for p in folder.iterdir() if ".damaged-" in p.name]
    assert len(damaged) == 1
    assert "entries salvaged" in " ".join(proc.stdout.split())
    assert damaged[0] in "".join(line.strip() for line in proc.stdout.splitlines())  # a long path is cut, not lost
    assert max(map(len, proc.stdout.splitlines())) <= 80, proc.stdout
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "cache", "repair", str(folder / "cache.sqlite")],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "healthy cache" in " ".join(proc.stdout.split())
    assert max(map(len, proc.stdout.splitlines())) <= 80, proc.stdout


# -- 4. a relevance grade beyond a 64-bit integer is refused naming where it is; it wrapped round to a negative
#       grade (1e19 from a float column or dict, 2**63 + 1 from a dict of ints): a relevant document judged
#       "unjudged", map 0.0 with no word

@pytest.mark.parametrize("grade", [1e19, -1e19, 2 ** 63 + 1, 1e30])
def test_a_relevance_grade_beyond_64_bits_is_refused_not_wrapped(grade) -> None:
    import polars as pl

    from ragmeter.trec import evaluate

    run = {"q1": {"d1": 1.0, "d2": 0.5}}
    assert evaluate({"q1": {"d1": 3, "d2": 0}}, run, "map")["map"].to_list() == [1.0]
    with pytest.raises(InputError, match=r"qrels: .*query 'q1', document 'd1': .* is out of range"):
        evaluate({"q1": {"d1": grade, "d2": 0}}, run, "map")
    if isinstance(grade, float):
        table = pl.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["d2", "d1"], "relevance": [0.0, grade]})
        with pytest.raises(InputError, match=r"qrels: .*row 2: .* is out of range"):
            evaluate(table, run, "map")


# -- 5. `cache repair` on an intact SQLite file without any table (what a run stopped between creating the file
#       and its table leaves, or an empty database of another tool) leaves it as it is, an empty cache a run opens
#       as such; it was "repaired": moved aside as PATH.damaged-<timestamp> and replaced by a new file, exit 0,
#       "SQLite reported: no such table: judge_cache"

def test_cache_repair_leaves_an_sqlite_file_without_tables_as_it_is(tmp_path) -> None:
    import sqlite3
    import subprocess
    import sys

    path = tmp_path / "cache.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")  # what a judge run does first on a new cache file
    conn.close()
    before = path.read_bytes()
    assert before[:16] == b"SQLite format 3\x00"
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "cache", "repair", str(path)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stdout.split())
    assert "an empty cache" in said and "nothing changed" in said and "repaired" not in said
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["cache.sqlite"]


# -- 6. an error in a {query: {doc: value}} dict names the query and document, as a fractional grade's does; the
#       engine's "run:3: score is NaN" counted entries across every query of the dict, which have no lines

def test_an_error_in_a_dict_run_names_the_query_and_document() -> None:
    from ragmeter.trec import evaluate

    qrels = {"q1": {"d1": 1}, "q2": {"x": 1}}
    run = {"q1": {"d1": 0.5}, "q2": {"a": 0.3, "b": float("nan"), "x": 1.0}}
    with pytest.raises(InputError, match=r"^run: query 'q2', document 'b': score is NaN$"):
        evaluate(qrels, run)
    run = {"q1": {"d1": 0.5, 1: 0.2, "1": 0.3}, "q2": {"x": 1.0}}  # two keys, one id
    with pytest.raises(InputError, match=r"^run: query 'q1', document '1': document 1 appears twice in the ranking "
                                         r"of query q1 \(first at query 'q1', document 1\)$"):
        evaluate(qrels, run)
    qrels = {"q1": {"d1": 1, 7: 0, "7": 1}}
    with pytest.raises(InputError, match=r"^qrels: query 'q1', document '7': .*\(first at query 'q1', document 7\)$"):
        evaluate(qrels, {"q1": {"d1": 0.5}})


def test_an_error_in_a_table_still_names_its_row() -> None:
    import polars as pl

    from ragmeter.trec import evaluate

    run = pl.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["d1", "d2"], "score": [0.5, float("nan")]})
    with pytest.raises(InputError, match=r"^run:2: score is NaN$"):
        evaluate({"q1": {"d1": 1}}, run)


# -- 7. a run without a single retrieved chunk has no chunk score: nothing to sweep (exit 2, nothing written), as
#       the README's exit-status table says; it printed a table of 0% at every threshold, exit 0

def test_a_run_without_any_chunk_has_nothing_to_sweep(tmp_path) -> None:
    import json
    import subprocess
    import sys

    import ragmeter

    run = [{"id": "a", "retrieved": []}, {"id": "b", "retrieved": []}]
    (tmp_path / "g.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _GOLDEN), encoding="utf-8")
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in run), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "sweep", "--golden", "g.jsonl", "--run", "r.jsonl",
                           "--out", "s.csv"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout
    assert "r.jsonl" in proc.stderr and "nothing to sweep" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == "" and not (tmp_path / "s.csv").exists()
    with pytest.raises(InputError, match="no case retrieved a chunk"):
        ragmeter.sweep(_GOLDEN, run, [0.0, 0.5])
    assert ragmeter.sweep(_GOLDEN, _RUN, [0.0]).height == 2  # one chunk with a score is enough


# -- 8. the sweep's table tells every threshold apart: 0.1234561 and 0.1234562 were both printed "0.123456"
#       (six significant digits), two rows of one label; the usual thresholds keep their short form

def test_the_sweep_table_labels_close_thresholds_apart(tmp_path) -> None:
    proc = _sweep_cli(tmp_path, "--thresholds", "-0.1234562,-0.1234561,0,0.5")
    assert proc.returncode == 0, proc.stderr
    firsts = [line.split()[0] for line in proc.stdout.splitlines() if line.split()[1:2] == ["ALL"]]
    assert firsts == ["-0.1234562", "-0.1234561", "0", "0.5"]
    assert max(map(len, proc.stdout.splitlines())) <= 80
