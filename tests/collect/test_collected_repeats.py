"""A run with collected repeats (``collect --repeat N``): eval scores and judges every repeat, compare pairs the
per-case means. The system is the scripted local RAG server, answering differently by repeat; the judge is the
local fake judge server. Every expected number below is worked out by hand from the four cases."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import polars as pl
import pytest
from collect_helpers import cli, write_target
from ragserver import RagServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judge"))
from fakeserver import FakeServer  # noqa: E402

KEY = "sk-test-collected-repeats-0123456789"

GOLDEN = [
    {"id": "fact-1", "question": "What is alpha?", "expectedFileNames": ["a.md"], "expectedEvidence": ["alpha"],
     "referenceAnswer": "alpha", "category": "fact"},
    {"id": "fact-2", "question": "What is beta?", "expectedFileNames": ["b.md"], "expectedEvidence": ["beta"],
     "referenceAnswer": "beta", "category": "fact"},
    {"id": "fact-3", "question": "What is gamma?", "expectedFileNames": ["c.md"], "expectedEvidence": ["gamma"],
     "referenceAnswer": "gamma", "category": "fact"},
    {"id": "fact-4", "question": "What is delta?", "expectedFileNames": ["d.md"], "expectedEvidence": ["delta"],
     "referenceAnswer": "delta", "category": "fact"},
]


def _chunk(file: str, text: str) -> dict:
    return {"file": file, "chunk_id": f"{file}#1", "text": text, "score": 0.5}


NOTHING = _chunk("x.md", "nothing useful here")
GAMMA = _chunk("c.md", "gamma lives here")
DELTA = _chunk("d.md", "delta lives here")
RECORDS = {
    "fact-1": {"retrieved": [_chunk("a.md", "the answer is alpha")], "answer": "It is alpha."},
    "fact-2": {"retrieved": [_chunk("b.md", "beta lives here")], "answer": "beta"},
    "fact-3": {"retrieved": [NOTHING, GAMMA], "answer": "gamma"},  # the relevant chunk at rank 2
    "fact-4": {"retrieved": [NOTHING], "answer": "epsilon"},        # a miss, answered wrong
}
RECORDS = {i: {"id": i, "retrieval_mode": "hybrid", **r} for i, r in RECORDS.items()}

#: repeat 2: fact-1 retrieves nothing; repeat 3: fact-3 ranks its chunk first, fact-2 answers wrong
VARY_A = {"fact-1": [None, {"retrieved": []}, None], "fact-3": [None, None, {"retrieved": [GAMMA]}],
          "fact-2": [None, None, {"answer": "no idea"}]}
#: every repeat: fact-4 retrieves its chunk
VARY_B = {"fact-4": [{"retrieved": [DELTA]}] * 3}


def _std(xs):
    m = sum(xs) / len(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


@pytest.fixture()
def golden(tmp_path):
    path = tmp_path / "golden.jsonl"
    path.write_text("".join(json.dumps(g) + "\n" for g in GOLDEN), encoding="utf-8")
    return path


def _collect(tmp_path, out, vary, repeat=3):
    with RagServer(records=RECORDS, vary=vary, modes=None) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        args = ["collect", "--golden", str(tmp_path / "golden.jsonl"), "--target", str(target), "--out", out,
                "--concurrency", "1", "--no-cache"]
        proc = cli(*args, *(["--repeat", str(repeat)] if repeat > 1 else []), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert set(s.requests.values()) == {repeat}
    return tmp_path / out


def _eval(tmp_path, run, out, *extra, env=None):
    return cli("eval", "--golden", str(tmp_path / "golden.jsonl"), "--run", str(run), "--out", out, *extra,
               cwd=tmp_path, env=env)


def _summary(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text(encoding="utf-8"))


@pytest.fixture()
def judge_server():
    s = FakeServer(api_key=KEY)
    s.start()
    yield s
    s.stop()


def test_eval_scores_and_judges_every_collected_repeat(tmp_path, golden, judge_server):
    run = _collect(tmp_path, "run.jsonl", VARY_A)
    rows = [json.loads(line) for line in run.read_text().splitlines()]
    assert [r["repeat"] for r in rows] == [1] * 4 + [2] * 4 + [3] * 4
    proc = _eval(tmp_path, run, "res", "--base-url", judge_server.base_url, "--model", "gpt-4o-mini",
                 "--metrics", "correctness", "--no-progress", "--cache", str(tmp_path / "judge.sqlite"),
                 env={"RAGMETER_API_KEY": KEY})
    assert proc.returncode == 0, proc.stderr
    res = tmp_path / "res"
    summary = _summary(res)
    section = summary["collected_repeats"]
    assert section["n"] == 3 and section["n_cases"] == 4 and section["n_absent"] == 0
    m = section["metrics"]

    hit = m["hit"]  # repeat 2 loses fact-1's chunk; fact-4 always misses
    assert hit["per_repeat"] == [0.75, 0.5, 0.75]
    assert hit["n_scored"] == [4, 4, 4] and hit["n_total"] == [4, 4, 4]
    assert hit["mean"] == pytest.approx(2 / 3, abs=1e-6)
    assert hit["std"] == pytest.approx(_std([0.75, 0.5, 0.75]), abs=1e-6)
    assert (hit["min"], hit["max"]) == (0.5, 0.75)
    assert (hit["n_flipped"], hit["n_compared"], hit["flip_rate"]) == (1, 4, 0.25)

    mrr = m["mrr"]  # fact-3 ranks its chunk 2nd, 2nd, then 1st
    assert mrr["per_repeat"] == [0.625, 0.375, 0.75]
    assert mrr["std"] == pytest.approx(_std([0.625, 0.375, 0.75]), abs=1e-6)
    assert (mrr["n_flipped"], mrr["n_compared"]) == (2, 4)

    correct = m["correct"]  # fact-2 answers "no idea" in repeat 3; fact-4 is always wrong
    assert correct["per_repeat"] == [0.75, 0.75, 0.5] and correct["n_scored"] == [4, 4, 4]
    assert (correct["n_flipped"], correct["flip_rate"]) == (1, 0.25)
    assert m["correctness"]["per_repeat"] == [4.25, 4.25, 3.5]  # scores 5 / 2 from the fake judge

    # the headline is repeat 1, and says so
    assert summary["retrieval"]["overall"]["hit_rate"]["value"] == 0.75
    assert "repeat 1 of 3" in section["headline"] and "repeat 1" in section["definitions"]
    cases = pl.read_parquet(res / "cases.parquet")
    assert cases.height == 4 and "repeat" not in cases.columns
    assert cases.sort("id")["hit"].to_list() == [True, True, True, False]
    per_repeat = pl.read_parquet(res / "repeats.parquet")
    assert per_repeat.height == 12 and per_repeat.columns[:2] == ["id", "repeat"]
    assert per_repeat.filter(pl.col("repeat") == 3).sort("id")["answer_correct"].to_list() == [True, False, True,
                                                                                               False]
    judge = pl.read_parquet(res / "judge.parquet")
    assert judge.group_by("repeat").len().sort("repeat")["len"].to_list() == [4, 4, 4]
    assert len(section["runs"]) == 3 and section["judge_incomplete"]["rows"] == 0
    assert "repeats.parquet" in summary["files"]
    assert summary["cost"]["n_repeats"] == 3 and summary["cost"]["n_cases"] == 12

    out = proc.stdout
    assert "Spread across 3 collected repeats" in out
    spread_lines = out[out.index("Spread across"):].splitlines()
    assert all(len(line) <= 80 for line in spread_lines)
    hit_line = next(line for line in spread_lines if line.startswith("hit "))
    assert hit_line.split() == ["hit", "66.7%", "14.4pp", "50.0%", "75.0%", "4/4", "1/4", "75.0%", "50.0%", "75.0%"]

    # both reports show the spread across the collected repeats
    html = (res / "report.html").read_text()
    assert '<section id="collected_repeats">' in html and "Collected repeats (3 runs of the system" in html
    md = (res / "report.md").read_text()
    hit_row = next(line for line in md.splitlines() if line.startswith("| hit |"))
    assert "75.0% (4/4), 50.0% (4/4), 75.0% (4/4)" in hit_row and "1/4 (25.0%)" in hit_row


def test_compare_pairs_per_case_means_over_repeats(tmp_path, golden):
    a = _collect(tmp_path, "a.jsonl", VARY_A)
    b = _collect(tmp_path, "b.jsonl", VARY_B)
    c = _collect(tmp_path, "c.jsonl", {}, repeat=1)
    for run, out in ((a, "A"), (b, "B"), (c, "C")):
        proc = _eval(tmp_path, run, out)
        assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "C" / "repeats.parquet").exists()

    proc = cli("compare", "A", "B", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    comp = json.loads(proc.stdout)
    assert (comp["base_repeats"], comp["cand_repeats"]) == (3, 3)
    hit = next(r for r in comp["rows"] if r["metric"] == "hit" and r["group"] == "overall")
    # per-case hit means: A 2/3, 1, 1, 0; B 1, 1, 1, 1
    assert hit["baseline"] == pytest.approx(2 / 3) and hit["candidate"] == pytest.approx(1.0)
    assert hit["delta"] == pytest.approx(1 / 3)
    assert (hit["wins"], hit["regressions"], hit["ties"], hit["n_paired"]) == (2, 0, 2, 4)
    assert hit["p_value"] is None  # means over repeats are shares, not 0/1 outcomes: no McNemar

    # a single run against a repeated one
    proc = cli("compare", "C", "A", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    comp = json.loads(proc.stdout)
    assert (comp["base_repeats"], comp["cand_repeats"]) == (1, 3)
    hit = next(r for r in comp["rows"] if r["metric"] == "hit" and r["group"] == "overall")
    assert hit["baseline"] == pytest.approx(0.75) and hit["delta"] == pytest.approx(2 / 3 - 0.75)
    assert (hit["wins"], hit["regressions"]) == (0, 1)
    mrr = next(r for r in comp["rows"] if r["metric"] == "mrr" and r["group"] == "overall")
    # A's per-case MRR means: 2/3, 1, 2/3, 0 against C's 1, 1, 0.5, 0
    assert mrr["candidate"] == pytest.approx((2 / 3 + 1 + 2 / 3) / 4)
    assert (mrr["wins"], mrr["regressions"]) == (1, 1)
    text = cli("compare", "C", "A", cwd=tmp_path)
    said = " ".join(text.stdout.split())
    assert "4 cases x 3 collected repeats, per-case mean" in said
    assert "Hit@k (chunk): 0 case(s) better, 1 worse (per-case means over repeats, so no McNemar test" in said
    assert "p = ," not in said
    gated = cli("compare", "C", "A", "--gate", "hit>=-5pp", cwd=tmp_path)
    assert gated.returncode == 1 and "gate failed" in gated.stderr

    # the in-memory API reads the folder back with its repeats and compares the same way
    import ragmeter

    loaded = ragmeter.EvalResult.load(tmp_path / "A")
    assert loaded.repeats is not None and loaded.repeats.height == 12
    same = loaded.compare(tmp_path / "B")  # candidate A, baseline B
    assert same.row("hit").delta == pytest.approx(-1 / 3) and same.cand_repeats == 3


def _write_run(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _rec(case_id, repeat, **extra):
    rec = {k: v for k, v in RECORDS[case_id].items()}
    if repeat is not None:
        rec["repeat"] = repeat
    return {**rec, **extra}


@pytest.mark.parametrize("rows, words", [
    ([_rec("fact-1", 1), _rec("fact-2", 1), _rec("fact-1", 1), _rec("fact-1", 2)],
     ["run.jsonl:3:", "duplicate id 'fact-1' in repeat 1", "first at", "run.jsonl:1"]),
    ([_rec("fact-1", 1), _rec("fact-2", "two")], ["run.jsonl:2:", "'repeat' must be a whole number", "'two'"]),
    ([_rec("fact-1", 1), _rec("fact-2", 1.5)], ["run.jsonl:2:", "'repeat' must be a whole number", "1.5"]),
    ([_rec("fact-1", 1), _rec("fact-1", None)], ["run.jsonl:2:", "missing 'repeat'"]),
    ([_rec("fact-1", 1), _rec("fact-1", 3)], ["run.jsonl:", "without a gap", "repeat 2"]),
    ([_rec("fact-1", 1), _rec("fact-1", 0)], ["run.jsonl:2:", "'repeat' must be 1 or more"]),
    ([_rec("fact-1", 1), _rec("fact-1", 2, id="nope")], ["run.jsonl:2:", "'nope' is not in the golden set"]),
])
def test_bad_repeat_column_is_one_clear_error_and_nothing_is_written(tmp_path, golden, rows, words):
    run = _write_run(tmp_path / "run.jsonl", rows)
    proc = _eval(tmp_path, run, "res")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    text = " ".join(proc.stderr.split())
    assert text.startswith("ragmeter: error:") and all(w in text for w in words), text
    assert not (tmp_path / "res").exists()


def test_parquet_repeat_column_of_strings_is_one_line(tmp_path, golden):
    frame = pl.DataFrame({"id": ["fact-1", "fact-1"], "repeat": ["1", "2"],
                          "retrieved": [[{"file": "a.md", "text": "alpha"}]] * 2})
    frame.write_parquet(tmp_path / "run.parquet")
    proc = _eval(tmp_path, tmp_path / "run.parquet", "res")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "column 'repeat' has type String" in lines[0] and "run.parquet" in lines[0]


def test_combining_judge_repeats_with_collected_repeats_is_refused(tmp_path, golden):
    run = _write_run(tmp_path / "run.jsonl", [_rec(i, r) for r in (1, 2) for i in RECORDS])
    proc = _eval(tmp_path, run, "res", "--repeat", "2", "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert proc.returncode == 2
    assert "2 collected repeats" in proc.stderr and "--repeat 2" in proc.stderr
    assert not (tmp_path / "res").exists()


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
@pytest.mark.parametrize("command", ["score", "judge"])
def test_score_and_judge_of_a_collected_run_say_repeats_not_duplicate_ids(tmp_path, golden, command, suffix):
    rows = [_rec(i, r) for r in (1, 2, 3) for i in RECORDS]
    run = tmp_path / f"run.{suffix}"
    if suffix == "jsonl":
        _write_run(run, rows)
    else:
        pl.DataFrame(rows).write_parquet(run)
    extra = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"] if command == "judge" else []
    proc = cli(command, "--golden", str(golden), "--run", str(run), "--out", "res", *extra, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"ragmeter: error: {run}: a run collected with repeats ('repeat' takes 3 values)")
    assert "ragmeter eval --run" in lines[0] and "duplicate id" not in lines[0]
    assert not (tmp_path / "res").exists()


def test_a_plain_run_with_a_duplicate_id_still_names_both_rows(tmp_path, golden):
    rows = [_rec("fact-1", None), _rec("fact-2", None), _rec("fact-1", None)]
    for suffix in ("jsonl", "parquet"):
        run = tmp_path / f"run.{suffix}"
        _write_run(run, rows) if suffix == "jsonl" else pl.DataFrame(rows).write_parquet(run)
        proc = cli("score", "--golden", str(golden), "--run", str(run), "--out", "res", cwd=tmp_path)
        assert proc.returncode == 2
        where = "run.jsonl:3" if suffix == "jsonl" else "run.parquet: row 3"
        assert where in proc.stderr and "duplicate id 'fact-1'" in proc.stderr, proc.stderr


def test_case_missing_from_one_repeat_warns_and_is_unscored_there(tmp_path, golden):
    rows = [_rec(i, r) for r in (1, 2, 3) for i in RECORDS if not (r == 2 and i == "fact-2")]
    run = _write_run(tmp_path / "run.jsonl", rows)
    proc = _eval(tmp_path, run, "res")
    assert proc.returncode == 0, proc.stderr
    assert "fact-2 (repeat 2)" in " ".join(proc.stdout.split())
    summary = _summary(tmp_path / "res")
    hit = summary["collected_repeats"]["metrics"]["hit"]
    assert hit["n_scored"] == [4, 3, 4] and hit["n_total"] == [4, 4, 4]
    assert hit["per_repeat"] == [0.75, pytest.approx(2 / 3, abs=1e-6), 0.75]
    assert hit["n_flipped"] == 0  # an absent case is not a flip
    warning = next(w for w in summary["warnings"] if w["code"] == "repeat_missing_case")
    assert warning["count"] == 1 and warning["cases"] == ["fact-2"]
    per_repeat = pl.read_parquet(tmp_path / "res" / "repeats.parquet")
    assert per_repeat.filter(pl.col("absent_from_repeat")).select("id", "repeat").rows() == [("fact-2", 2)]


#: summary.json's sections before collected repeats existed (and ``command``, h35: every run's writer); a plain run
#: must not gain any
PLAIN_SUMMARY_KEYS = {"results_format", "tool", "version", "command", "started_at", "finished_at", "inputs", "settings",
                      "retrieval", "judge", "cost", "diagnosis", "golden_set", "warnings", "files"}


def test_plain_run_writes_the_folder_it_always_did(tmp_path, golden):
    run = _write_run(tmp_path / "run.jsonl", list(RECORDS.values()))
    proc = _eval(tmp_path, run, "res")
    assert proc.returncode == 0, proc.stderr
    summary = _summary(tmp_path / "res")
    assert set(summary) == PLAIN_SUMMARY_KEYS
    assert summary["files"] == ["cases.parquet", "chunks.parquet", "warnings.json", "summary.json", "report.html",
                                "report.md"]
    assert set(summary["cost"]) == {"system_cost_usd", "n_cases_with_cost", "n_cases", "judge_cost_usd",
                                    "total_cost_usd", "judge_cost_share"}
    assert not (tmp_path / "res" / "repeats.parquet").exists()
    cases = pl.read_parquet(tmp_path / "res" / "cases.parquet")
    assert not {"repeat", "absent_from_repeat"} & set(cases.columns) and cases.height == 4
    assert "collected repeats" not in proc.stdout
    # a stale repeats.parquet of an earlier repeated run is not read as this run's
    a = _write_run(tmp_path / "a.jsonl", [_rec(i, r) for r in (1, 2) for i in RECORDS])
    assert _eval(tmp_path, a, "res").returncode == 0
    assert _eval(tmp_path, run, "res").returncode == 0
    import ragmeter

    assert ragmeter.EvalResult.load(tmp_path / "res").repeats is None
    assert not (tmp_path / "res" / "repeats.parquet").exists()


def test_a_judge_failure_in_a_later_repeat_counts_for_max_failed(tmp_path, golden, judge_server):
    run = _collect(tmp_path, "run.jsonl", VARY_A)
    # only repeat 3 has the answer "no idea" (fact-2): its correctness call is refused, not retried
    judge_server.rules.append((lambda info: (info.get("payload") or {}).get("answer") == "no idea", 400))
    proc = _eval(tmp_path, run, "res", "--base-url", judge_server.base_url, "--model", "gpt-4o-mini",
                 "--metrics", "correctness", "--no-progress", "--no-cache", "--retry-base-delay", "0.01",
                 env={"RAGMETER_API_KEY": KEY})
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "1 of 12 judge rows were not judged" in " ".join(proc.stderr.split())
    summary = _summary(tmp_path / "res")
    assert summary["judge"]["incomplete"]["rows"] == 0  # repeat 1, the headline, was complete
    section = summary["collected_repeats"]
    assert section["judge_incomplete"] == {"rows": 1, "failed": 1, "skipped_budget": 0, "of": 12}
    correct = section["metrics"]["correct"]
    assert correct["n_scored"] == [4, 4, 3] and correct["per_repeat"] == [0.75, 0.75, pytest.approx(2 / 3,
                                                                                                   abs=1e-6)]
    assert correct["n_flipped"] == 0  # the failed row is unscored, never a wrong answer


def test_in_memory_evaluate_of_records_with_repeats(golden):
    import ragmeter

    rows = [_rec(i, r) for r in (1, 2) for i in RECORDS]
    rows[4] = {**rows[4], "retrieved": []}  # fact-1, repeat 2
    result = ragmeter.evaluate(golden, rows)
    assert result.cases.height == 4 and result.repeats is not None and result.repeats.height == 8
    hit = result.summary["collected_repeats"]["metrics"]["hit"]
    assert hit["per_repeat"] == [0.75, 0.5] and (hit["n_flipped"], hit["n_compared"]) == (1, 4)


def test_dry_run_estimates_every_collected_repeat(tmp_path, golden):
    single = _write_run(tmp_path / "one.jsonl", list(RECORDS.values()))
    double = _write_run(tmp_path / "two.jsonl", [_rec(i, r) for r in (1, 2) for i in RECORDS])
    judge = ["--base-url", "http://127.0.0.1:9/v1", "--model", "gpt-4o-mini", "--metrics", "correctness",
             "--no-cache", "--dry-run", "--json"]
    one = _eval(tmp_path, single, "res", *judge)
    two = _eval(tmp_path, double, "res", *judge)
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    a, b = json.loads(one.stdout), json.loads(two.stdout)
    assert a["calls"] == 4 and b["calls"] == 8 and b["collected_repeats"] == 2
    assert [r["calls"] for r in b["per_repeat"]] == [4, 4]
    assert b["cost_usd"] == pytest.approx(2 * a["cost_usd"], rel=1e-6)
    assert not (tmp_path / "res").exists()
