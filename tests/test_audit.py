"""Golden-set audit (issue 14): the worked example, the corpus check on OCR text, bad input."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Dict, List, Tuple

import polars as pl
import pytest

import ragmeter
from ragmeter import stats
from ragmeter.audit import audit_warnings_count
from ragmeter.errors import InputError

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("deepseek", "zhipu", "bailian")
# category -> cases per source: term 25, semantic 15, multi 3, boundary 5, conflict 2;
# deepseek 12, zhipu 20, bailian 18; deepseek has no conflict case, zhipu no boundary case.
WORKED = {"term": (6, 12, 7), "semantic": (3, 6, 6), "multi": (1, 1, 1), "boundary": (2, 0, 3), "conflict": (0, 1, 1)}
# what fills the gap (70 more: term 25, ..., conflict 8; deepseek 28, zhipu 20, bailian 22) to
# term 50 / semantic 30 / multi 15 / boundary 15 / conflict 10 and 40 per source. (The issue's
# "deepseek 38 / zhipu 40 / bailian 42" after filling does not add up with its own gap: 12 + 28 = 40.)
FILL = {"term": (10, 7, 8), "semantic": (6, 4, 5), "multi": (5, 3, 4), "boundary": (4, 3, 3), "conflict": (3, 3, 2)}
SPEC = "category=term:50,semantic:30,multi:15,boundary:15,conflict:10;source=deepseek:40,zhipu:40,bailian:40"


def cases(cells: Dict[str, Tuple[int, ...]], start: int = 0) -> List[dict]:
    out = []
    for cat, counts in cells.items():
        for source, count in zip(SOURCES, counts):
            for i in range(count):
                n = start + len(out)
                out.append({"id": f"{cat}-{n:03d}", "question": f"Question {n}: {cat} as seen on {source}?",
                            "category": cat, "source": source, "expectedFileNames": ["hr.pdf"],
                            "expectedEvidence": [f"fact {n}"]})
    return out


def worked() -> List[dict]:
    return cases(WORKED)


def filled() -> List[dict]:
    return worked() + cases(FILL, start=50)


def write_jsonl(path: Path, rows: List[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "audit", *args], capture_output=True, text=True, env=env, cwd=cwd)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def columns(line: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in line)


# --------------------------------------------------------------------------- the worked example


def test_worked_example_counts_and_exactly_four_warnings():
    a = ragmeter.audit(worked())
    d = a.to_dict()
    assert d["n"] == 50
    assert {k: v["n"] for k, v in d["by_category"].items()} == {"term": 25, "semantic": 15, "multi": 3, "boundary": 5, "conflict": 2}
    assert {k: v["share"] for k, v in d["by_source"].items()} == {"deepseek": 0.24, "zhipu": 0.4, "bailian": 0.36}
    assert d["cross"]["conflict"]["deepseek"] == 0 and d["cross"]["boundary"]["zhipu"] == 0
    assert d["hard"]["categories"] == ["multi", "boundary", "conflict"] and d["hard"]["share"] == 0.2
    assert [w["code"] for w in d["warnings"]] == ["hard_share_low", "source_share_low", "empty_cell", "empty_cell"]
    messages = [w["message"] for w in d["warnings"]]
    assert "20.0% (10/50" in messages[0] and "under 30%" in messages[0]
    assert "deepseek only 24.0%" in messages[1] and "25.0%" in messages[1]
    assert "deepseek has no conflict" in messages[2] and "zhipu has no boundary" in messages[3]
    assert all(set(w) == {"code", "message", "cases"} for w in d["warnings"])
    assert d["gap"] is None and d["resolution"]["points_per_case"] == 2.0


def test_worked_example_gap_with_the_explicit_targets():
    d = ragmeter.audit(worked(), target=120, targets=SPEC).to_dict()
    assert d["gap"] == {"category": {"term": 25, "semantic": 15, "multi": 12, "boundary": 10, "conflict": 8},
                        "source": {"deepseek": 28, "zhipu": 20, "bailian": 22}, "total": 70}
    assert d["target"]["hard_share"] == pytest.approx(40 / 120, abs=1e-4)
    r = d["resolution"]
    assert (r["n"], r["points_per_case"]) == (50, 2.0)
    assert (r["target"]["n"], r["target"]["points_per_case"]) == (120, 0.83)
    # the spec alone implies the target size
    assert ragmeter.audit(worked(), targets=SPEC).to_dict()["gap"]["total"] == 70


def test_target_alone_asks_for_even_shares_of_what_is_seen():
    d = ragmeter.audit(worked(), target=120).to_dict()
    assert d["target"]["category"] == {c: 24 for c in WORKED}
    assert d["gap"]["category"] == {"term": 0, "semantic": 9, "multi": 21, "boundary": 19, "conflict": 22}
    assert d["gap"]["source"] == {"deepseek": 28, "zhipu": 20, "bailian": 22}
    # term already has 25 > 24: 71 more cases, not 70, and the set will hold 121
    assert d["gap"]["total"] == 71 and d["target"]["n_after"] == 121
    assert d["resolution"]["target"]["n"] == 120


def test_even_target_remainder_goes_to_the_smallest_first():
    d = ragmeter.audit(worked(), target=122).to_dict()
    assert d["target"]["category"] == {"term": 24, "semantic": 24, "multi": 25, "boundary": 24, "conflict": 25}
    assert sum(d["target"]["source"].values()) == 122


def test_the_set_filled_to_120_has_no_warning():
    a = ragmeter.audit(filled(), targets=SPEC)
    d = a.to_dict()
    assert d["n"] == 120 and d["warnings"] == []
    assert {k: v["n"] for k, v in d["by_category"].items()} == {"term": 50, "semantic": 30, "multi": 15, "boundary": 15, "conflict": 10}
    assert {k: v["n"] for k, v in d["by_source"].items()} == {"deepseek": 40, "zhipu": 40, "bailian": 40}
    assert d["by_source"]["deepseek"]["share"] == pytest.approx(0.3333, abs=1e-4)
    assert d["hard"]["share"] == pytest.approx(0.3333, abs=1e-4)
    assert d["gap"]["category"] == {c: 0 for c in WORKED} and d["gap"]["total"] == 0
    assert d["resolution"]["points_per_case"] == 0.83


def test_resolution_uses_compares_detectable_difference():
    d = ragmeter.audit(worked(), target=120, rate=0.8).to_dict()["resolution"]
    expected_50 = 100 * stats.min_detectable_difference_proportion(50, 2 * 0.8 * 0.2)
    expected_120 = 100 * stats.min_detectable_difference_proportion(120, 2 * 0.8 * 0.2)
    assert d["mde_pp"] == round(expected_50, 1) and d["target"]["mde_pp"] == round(expected_120, 1)
    assert d["mde_pp"] > d["target"]["mde_pp"]
    worst = ragmeter.audit(worked()).to_dict()["resolution"]
    assert worst["rates"] == {"rate": 0.5} and worst["mde_pp"] > d["mde_pp"]


def test_a_set_too_small_to_detect_any_difference_says_so(tmp_path):
    # at n=3 (rate 0.5) a paired test would need a difference of more than 100 points: no rate can differ by that
    tiny = write_jsonl(tmp_path / "tiny.jsonl", [{"id": f"t{i}", "question": f"q {i}?", "category": c,
                                                 "expectedEvidence": ["x"]} for i, c in enumerate("aab")])
    assert 100 * stats.min_detectable_difference_proportion(3, 0.5) > 100
    d = ragmeter.audit(tiny, target=120).to_dict()["resolution"]
    assert d["mde_pp"] is None and "n=3" in d["mde_reason"] and "100 points" in d["mde_reason"]
    assert d["target"]["mde_pp"] is not None and d["target"]["mde_reason"] is None
    proc = cli("--golden", str(tiny), "--target", "120")
    text = " ".join(proc.stdout.split())
    assert proc.returncode == 0 and "none detectable (it would take over 100 points) at n=3" in text, proc.stdout
    assert max(columns(line) for line in proc.stdout.splitlines()) <= 80


def test_frames_match_the_dict():
    a = ragmeter.audit(worked(), targets=SPEC)
    assert isinstance(a.by_category, pl.DataFrame)
    assert a.by_category.filter(pl.col("value") == "multi").row(0, named=True) == {
        "value": "multi", "n": 3, "share": 0.06, "target": 15, "needed": 12}
    assert a.cross.columns == ["category", *SOURCES]
    assert audit_warnings_count(worked()) == 4 and audit_warnings_count(filled()) == 0


# --------------------------------------------------------------------------- other warnings and options


def test_unlabeled_and_duplicate_questions():
    rows = filled()
    rows[0]["expectedFileNames"], rows[0]["expectedEvidence"] = [], []
    rows[1]["question"] = "  " + rows[2]["question"].upper().replace(":", "：") + " "
    rows.append({"id": "noanswer-1", "question": "Who founded Mars?", "category": "noanswer", "source": "zhipu"})
    a = ragmeter.audit(rows, min_source_share=0.0)
    by_code = {w.code: w for w in a.warnings}
    assert by_code["unlabeled"].cases == [rows[0]["id"]]  # the no-answer case needs no label
    assert by_code["duplicate_question"].cases == [rows[1]["id"], rows[2]["id"]]


def test_hard_from_option_and_from_difficulty_field():
    a = ragmeter.audit(worked(), hard=["term"])
    assert a.hard["categories"] == ["term"] and "hard_share_low" not in a.codes()
    rows = worked()
    for r in rows[:20]:
        r["difficulty"] = "hard"
    a = ragmeter.audit(rows)
    assert a.hard["rule"] == "difficulty" and a.hard["n"] == 20 and "hard_share_low" not in a.codes()


def test_by_another_field_and_min_source_share():
    rows = worked()
    for i, r in enumerate(rows):
        r["platform"] = "web" if i % 2 else "app"
    a = ragmeter.audit(rows, by="platform")
    assert a.by == "platform" and set(a.to_dict()["by_source"]) == {"web", "app"}
    assert "empty_cell" not in a.codes()
    assert "source_share_low" not in ragmeter.audit(worked(), min_source_share=0.2).codes()


def test_a_value_seen_once_is_reported_not_an_error():
    rows = filled() + [{"id": "rare-1", "question": "q?", "category": "rare", "source": "solo", "expectedEvidence": ["x"]}]
    d = ragmeter.audit(rows).to_dict()
    assert d["by_category"]["rare"]["n"] == 1 and d["by_source"]["solo"]["n"] == 1


# --------------------------------------------------------------------------- evidence against the corpus

OCR_CHUNKS = [
    {"file": "hr.pdf", "chunk_id": "11", "text": "第三章 福利\n员工年\n假 ５ 天，⽇常病假另计。"},  # Kangxi ⽇, full-width ５, broken word
    {"file": "hr.pdf", "chunk_id": "12", "text": "年终奖为 1.5~2 个⽉⽉薪，\n视绩效而定。"},
    {"file": "docs/arch.md", "chunk_id": "3", "text": "Ｆｒｏｎｔｅｎｄ： React 18 and retrie-\nval augmented generation"},
]


def corpus_golden() -> List[dict]:
    base = {"category": "term", "source": "zhipu"}
    return [
        {"id": "t-slip", "question": "年终奖多少？", "expectedFileNames": ["hr.pdf"], "expectedEvidence": ["1.5-2 个月月薪"], **base},
        {"id": "t-ocr", "question": "年假几天？", "expectedFileNames": ["hr.pdf"], "expectedEvidence": ["年假 5 天", "日常病假"], **base},
        {"id": "t-hyphen", "question": "What is RAG?", "expectedFileNames": ["arch.md"], "expectedEvidence": ["Retrieval augmented"], **base},
        {"id": "t-other", "question": "Frontend?", "expectedFileNames": ["hr.pdf"], "expectedEvidence": ["React 18"], **base},
        {"id": "t-nofile", "question": "Which file?", "expectedFileNames": ["handbook.pdf"], "expectedEvidence": ["年终奖"], **base},
        {"id": "t-typo", "question": "Bonus?", "expectedFileNames": ["hr.pdf"], "expectedEvidence": ["年终奖为1.5~3个月月薪"], **base},
        {"id": "t-none", "question": "Nothing?", "expectedFileNames": ["hr.pdf"], "expectedEvidence": ["completely absent"], **base},
    ]


def corpus_warnings(corpus) -> Dict[str, List]:
    a = ragmeter.audit(corpus_golden(), corpus=corpus)
    out: Dict[str, List] = {}
    for w in a.warnings:
        if w.code in ("evidence_not_in_corpus", "file_not_in_corpus", "evidence_in_other_file"):
            out.setdefault(w.code, []).append(w)
    return out


def test_ocr_slip_is_flagged_with_the_right_suggestion():
    found = corpus_warnings(OCR_CHUNKS)
    missing = {w.cases[0]: w.message for w in found["evidence_not_in_corpus"]}
    assert missing["t-slip"] == ("'1.5-2 个月月薪' not in any chunk of hr.pdf; the chunk hr.pdf#12 has "
                                 "'1.5~2 个月月薪' (case t-slip)")
    # one edit away after folding punctuation: the edit-distance step finds it
    assert "the chunk hr.pdf#12 has '年终奖为 1.5~2 个月月薪'" in missing["t-typo"]
    assert missing["t-none"] == "'completely absent' not in any chunk of hr.pdf (case t-none)"
    assert set(missing) == {"t-slip", "t-typo", "t-none"}  # no false alarm for t-ocr and t-hyphen


def test_found_elsewhere_and_file_missing():
    found = corpus_warnings(OCR_CHUNKS)
    (other,) = [w for w in found["evidence_in_other_file"] if w.cases == ["t-other"]]
    assert other.message == "'React 18' not in any chunk of hr.pdf but in docs/arch.md#3 (case t-other)"
    (nofile,) = found["file_not_in_corpus"]
    assert nofile.cases == ["t-nofile"] and nofile.message.startswith("handbook.pdf ")
    # its phrase is in hr.pdf: reported as found in another file, with the place
    assert any(w.cases == ["t-nofile"] and "hr.pdf#12" in w.message for w in found["evidence_in_other_file"])


def test_corpus_summary_and_phrase_table():
    a = ragmeter.audit(corpus_golden(), corpus=OCR_CHUNKS)
    c = a.corpus
    assert (c["chunks"], c["files"], c["phrases"]) == (3, 2, 8)
    assert (c["found"], c["in_other_file"], c["not_in_corpus"]) == (3, 2, 3)
    row = a.evidence.filter(pl.col("id") == "t-slip").row(0, named=True)
    assert row["status"] == "not_in_corpus" and row["chunk"] == "hr.pdf#12" and row["suggestion"] == "1.5~2 个月月薪"


def test_corpus_as_folder_parquet_and_aliases(tmp_path):
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "hr.pdf.md").write_text(OCR_CHUNKS[0]["text"] + "\n" + OCR_CHUNKS[1]["text"], encoding="utf-8")
    (folder / "sub" / "arch.md").write_text(OCR_CHUNKS[2]["text"], encoding="utf-8")
    golden = [dict(r, expectedFileNames=["hr.pdf.md"]) for r in corpus_golden()[:2]]
    a = ragmeter.audit(golden, corpus=folder)
    assert a.corpus["files"] == 2
    assert [w.message for w in a.warnings if w.code == "evidence_not_in_corpus"] == [
        "'1.5-2 个月月薪' not in any chunk of hr.pdf.md; the chunk hr.pdf.md has '1.5~2 个月月薪' (case t-slip)"]
    parquet = tmp_path / "chunks.parquet"
    pl.DataFrame([{"fileName": c["file"], "chunkId": c["chunk_id"], "text": c["text"]} for c in OCR_CHUNKS]).write_parquet(parquet)
    assert corpus_warnings(str(parquet)).keys() == corpus_warnings(OCR_CHUNKS).keys()


def test_corpus_missing_fields_is_one_line(tmp_path):
    bad = write_jsonl(tmp_path / "chunks.jsonl", [{"file": "a.md", "body": "x"}, {"file": "b.md", "body": "y"}])
    with pytest.raises(InputError, match=r"chunks.jsonl: no 'text' field"):
        ragmeter.audit(worked(), corpus=bad)
    some = write_jsonl(tmp_path / "some.jsonl", [{"file": "a.md", "text": "x"}, {"file": "b.md"}])
    with pytest.raises(InputError, match=r"some.jsonl:2: missing 'text'"):
        ragmeter.audit(worked(), corpus=some)


@pytest.mark.parametrize("first_line, shape", [
    ("file,chunk_id,text", "looks like CSV (first line: file,chunk_id,text)"),
    ("file;chunk_id;text", "looks like CSV (first line: file;chunk_id;text)"),
    ("file\tchunk_id\ttext", "looks like TSV"),
])
def test_corpus_in_another_text_shape_gets_one_diagnosis(tmp_path, first_line, shape):
    sep = first_line[4]
    chunks = tmp_path / "chunks.csv"
    chunks.write_text(first_line + "\n" + sep.join(["hr.pdf", "12", "年终奖为 1.5~2 个月月薪"]) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        ragmeter.audit(worked(), corpus=chunks)
    assert str(err.value).startswith(f"{chunks}: {shape}") and "invalid JSON" not in str(err.value), str(err.value)
    assert str(err.value).endswith("see docs/audit.md (--corpus)")  # where chunk exports are described


# --------------------------------------------------------------------------- command line


@pytest.fixture()
def worked_file(tmp_path) -> Path:
    return write_jsonl(tmp_path / "golden.jsonl", worked())


def test_cli_json_equals_the_api_and_fits_80_columns(worked_file, tmp_path):
    proc = cli("--golden", str(worked_file), "--targets", SPEC, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ragmeter.audit(str(worked_file), targets=SPEC).to_dict()
    text = cli("--golden", str(worked_file), "--target", "120", "--targets", SPEC)
    assert text.returncode == 0 and "70 more in all" in text.stdout
    assert max(columns(line) for line in text.stdout.splitlines()) <= 80
    corpus = write_jsonl(tmp_path / "chunks.jsonl", OCR_CHUNKS)
    golden = write_jsonl(tmp_path / "g2.jsonl", corpus_golden())
    text = cli("--golden", str(golden), "--corpus", str(corpus))
    assert text.returncode == 0 and "hr.pdf#12" in text.stdout
    assert max(columns(line) for line in text.stdout.splitlines()) <= 80


def test_cli_strict_and_out(worked_file, tmp_path):
    out = tmp_path / "out"
    proc = cli("--golden", str(worked_file), "--strict", "--out", str(out))
    assert proc.returncode == 1 and "--strict" in proc.stderr
    assert json.loads((out / "audit.json").read_text(encoding="utf-8"))["n"] == 50
    md = (out / "audit.md").read_text(encoding="utf-8")
    assert "`hard_share_low`" in md and "| conflict | · | 1 | 1 |" in md
    full = write_jsonl(tmp_path / "full.jsonl", filled())
    assert cli("--golden", str(full), "--strict").returncode == 0


@pytest.mark.parametrize("args, message", [
    (["--targets", "category=term:fifty"], "--targets: 'term:fifty'"),
    (["--targets", "category=nosuch:10"], "names no category of the golden set"),
    (["--targets", "level=a:1"], "unknown section 'level'"),
    (["--target", "0"], "--target must be an integer between 1 and 10,000,000, got 0"),
    (["--corpus", "MISSING_DIR"], "no such file or folder"),
    (["--hard", ","], "--hard: name at least one"),
])
def test_cli_bad_input_is_one_line_and_exit_2(worked_file, args, message):
    proc = cli("--golden", str(worked_file), *args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ragmeter: error:") and message in lines[0], proc.stderr


def test_cli_targets_file(worked_file, tmp_path):
    toml = tmp_path / "targets.toml"
    toml.write_text('[category]\nterm = 50\nsemantic = 30\nmulti = 15\nboundary = 15\nconflict = 10\n'
                    '[source]\ndeepseek = 40\nzhipu = 40\nbailian = 40\n', encoding="utf-8")
    proc = cli("--golden", str(worked_file), "--targets", str(toml), "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["gap"]["total"] == 70
    broken = tmp_path / "t.json"
    broken.write_text("{not json", encoding="utf-8")
    proc = cli("--golden", str(worked_file), "--targets", str(broken))
    assert proc.returncode == 2 and "targets file does not parse" in proc.stderr


def test_cli_golden_without_categories_and_corpus_without_fields(tmp_path, worked_file):
    plain = write_jsonl(tmp_path / "plain.jsonl", [{"id": f"q{i}", "question": f"q {i}?", "expectedEvidence": ["x"]} for i in range(5)])
    proc = cli("--golden", str(plain))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "no categories" in proc.stderr
    bad = write_jsonl(tmp_path / "chunks.jsonl", [{"path": "a.md", "body": "x"}])
    proc = cli("--golden", str(worked_file), "--corpus", str(bad))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "no 'file' field" in proc.stderr


def test_resolution_at_the_observed_hit_rate_of_a_results_folder(tmp_path):
    rows = worked()
    # the run finds the evidence of the first 40 cases: hit rate 80% over 50 scored cases
    run = [{"id": r["id"], "retrieved": [{"file": "hr.pdf", "chunk_id": "1", "score": 1.0,
                                          "text": r["expectedEvidence"][0] if i < 40 else "nothing"}]}
           for i, r in enumerate(rows)]
    ragmeter.score(rows, run).write(tmp_path / "res")
    d = ragmeter.audit(rows, results=tmp_path / "res").to_dict()["resolution"]
    assert d["rates"] == {"hit": 0.8} and d["rate_source"].startswith("observed in")
    assert d["mde_pp"] == round(100 * stats.min_detectable_difference_proportion(50, 2 * 0.8 * 0.2), 1)
    with pytest.raises(InputError, match="results directory not found"):
        ragmeter.audit(rows, results=tmp_path / "nothing")


def test_pointer_line_and_panel_for_other_commands(tmp_path):
    from ragmeter.audit import audit_pointer, golden_panel

    path = write_jsonl(tmp_path / "golden set.jsonl", worked())
    assert audit_pointer(str(path)) == (f"4 audit warnings (hard_share_low, source_share_low, empty_cell): "
                                        f"ragmeter audit --golden '{path}'")
    assert audit_pointer(filled()) is None
    assert audit_pointer([{"id": "a", "question": "q"}, {"id": "b", "question": "q2"}]) is None  # no categories: not audited
    panel = golden_panel(worked())
    assert panel["n"] == 50 and len(panel["warnings"]) == 4 and panel["cross"]["boundary"]["zhipu"] == 0


def test_a_case_without_files_may_find_its_phrase_in_any_file():
    rows = [{"id": "a-1", "question": "Bonus?", "category": "a", "expectedEvidence": ["年终奖为"]},
            {"id": "a-2", "question": "Other?", "category": "a", "expectedEvidence": ["nowhere at all"]}]
    a = ragmeter.audit(rows, corpus=OCR_CHUNKS)
    corpus_codes = [(w.code, w.cases) for w in a.warnings if "corpus" in w.code or "file" in w.code]
    assert corpus_codes == [("evidence_not_in_corpus", ["a-2"])]
    assert "not in any chunk of the corpus" in a.warnings[-1].message
    assert a.evidence["status"].to_list() == ["found", "not_in_corpus"]


def test_rich_tables_fit_80_columns():
    from rich.console import Console

    from ragmeter.audit import render

    rows = corpus_golden() + worked()
    d = ragmeter.audit(rows, corpus=OCR_CHUNKS, targets=SPEC).to_dict()
    console = Console(record=True, width=render.WIDTH, file=io.StringIO(), force_terminal=True)
    render.rich(d, console)
    text = console.export_text()
    assert "deepseek" in text and "hr.pdf#12" in text
    assert max(columns(line) for line in text.splitlines()) <= 80


def test_score_points_to_the_audit_when_the_golden_set_would_warn(tmp_path):
    golden = write_jsonl(tmp_path / "golden.jsonl", worked())
    run = write_jsonl(tmp_path / "run.jsonl", [{"id": case["id"], "retrieved": []} for case in worked()])
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "score", "--golden", str(golden), "--run", str(run)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    def squeezed(text: str) -> str:  # the console folds a long path wherever the line ends
        return "".join(text.split())

    assert squeezed(f"warning: {audit_warnings_count(golden)} audit warnings (hard_share_low, source_share_low, "
                    f"empty_cell): ragmeter audit --golden {golden}") in squeezed(proc.stdout)
    # --json keeps stdout for the JSON alone; the pointer goes to stderr
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "score", "--golden", str(golden), "--run", str(run),
                           "--json"], capture_output=True, text=True, timeout=120)
    assert json.loads(proc.stdout)["n_cases"] == 50 and "ragmeter audit --golden" in proc.stderr


def test_eval_reports_carry_a_golden_set_panel_with_the_audit_warnings(tmp_path):
    golden = write_jsonl(tmp_path / "golden.jsonl", worked())
    run = write_jsonl(tmp_path / "run.jsonl", [{"id": case["id"], "retrieved": []} for case in worked()])
    out = tmp_path / "ev"
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "eval", "--golden", str(golden), "--run", str(run),
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    panel = json.loads((out / "summary.json").read_text(encoding="utf-8"))["golden_set"]
    assert panel["n"] == 50 and panel["by_category"]["term"]["n"] == 25
    assert [w["code"] for w in panel["warnings"]] == [w.code for w in ragmeter.audit(golden).warnings]
    html = (out / "report.html").read_text(encoding="utf-8")
    box = html.split('<section id="golden-set">')[1].split("</section>")[0]
    assert "term 25 (50.0%)" in box and "<code>hard_share_low</code>" in box and "<code>empty_cell</code>" in box
    assert "## Golden set" in (out / "report.md").read_text(encoding="utf-8")


def test_question_key_is_the_per_character_definition_on_ascii_and_beyond():
    """The duplicate check's key: normalised, without punctuation, symbols and separators (P*, S*, Z*); the
    ASCII shortcut (str.translate) gives what the per-character rule gives."""
    import random

    from ragmeter.audit import _question_keys
    from ragmeter.evidence import normalize

    def by_character(text: str) -> str:
        return "".join(ch for ch in normalize(text) if unicodedata.category(ch)[0] not in "PSZ")

    rng = random.Random(15)
    alphabet = [chr(c) for c in range(128)] + list("ＡＢ１！？　、。—–…«»€™ⅫﬁÉé")
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30))) for _ in range(3000)]
    assert _question_keys(texts) == [by_character(t) for t in texts]
    assert _question_keys(["What's the  policy?", "whats the policy"]) == ["whatsthepolicy"] * 2


def test_blank_and_missing_sources_are_counted_as_none_in_order_of_first_appearance():
    rows = worked()
    rows[0]["source"] = " \u3000"  # blank by str.strip: no source
    del rows[1]["source"]
    rows[2]["source"] = None
    a = ragmeter.audit(rows, min_source_share=0.0)
    by_source = a.to_dict()["by_source"]
    assert list(by_source)[:1] == ["(none)"] and by_source["(none)"]["n"] == 3
    firsts = list(dict.fromkeys(r.get("source") or "(none)" for r in rows[3:]))
    assert list(by_source)[1:] == firsts
    assert sum(v["n"] for v in by_source.values()) == len(rows)
    assert "(none)" not in a.cross.columns  # the cross table counts named sources only
    assert a.cross.filter(pl.col("category") == "term")["deepseek"].item() == 3  # 6 term cases, 3 without one


def test_tables_stay_aligned_with_chinese_names(tmp_path: Path) -> None:
    """Names are cut and padded by terminal columns (a Chinese character takes two), so the counts of every
    row end in the same column and no line passes 80 columns."""
    long_category, long_source = "中文类别名称非常长的类别名字测试用例", "来源" * 10
    rows = [{"id": f"c-{i}", "question": f"问题{i}", "category": long_category if i < 3 else "fact",
             "source": long_source if i % 2 else "web", "expectedEvidence": ["x"], "expectedFileNames": ["f.md"]}
            for i in range(6)]
    proc = cli("--golden", str(write_jsonl(tmp_path / "g.jsonl", rows)), cwd=tmp_path)
    lines = proc.stdout.splitlines()
    assert max(columns(line) for line in lines) <= 80
    for head in ("category", "source"):
        start = lines.index(next(line for line in lines if line.split()[:1] == [head] and "share" in line))
        table = lines[start:start + 3]
        ends = {columns(line[: line.index("%") + 1]) for line in table[1:]}
        assert len(ends) == 1, "\n".join(table)  # the share column ends in one place
        assert columns(table[0]) == ends.pop(), "\n".join(table)
    assert any(line.startswith("中文类别名称非常长") and "…" in line for line in lines), proc.stdout


def test_a_phrase_shared_by_many_cases_is_one_warning_naming_them():
    """A phrase copied into seven cases and missing from the corpus is one finding: one warning counting the
    seven cases and naming five, each case still marked in the evidence table."""
    shared = [{"id": f"s-{i}", "question": f"Bonus {i}?", "category": "a", "expectedEvidence": ["nowhere at all"]}
              for i in range(7)]
    other = [{"id": "o-1", "question": "Other?", "category": "a", "expectedEvidence": ["also missing"]},
             {"id": "o-2", "question": "Found?", "category": "a", "expectedEvidence": ["年终奖为"]}]
    a = ragmeter.audit(shared + other, corpus=OCR_CHUNKS)
    missing = [w for w in a.warnings if w.code == "evidence_not_in_corpus"]
    assert [len(w.cases) for w in missing] == [7, 1]
    assert missing[0].cases == [f"s-{i}" for i in range(7)]
    assert missing[0].message == ("'nowhere at all' not in any chunk of the corpus "
                                  "(7 cases: s-0, s-1, s-2, s-3, s-4 and 2 more)")
    assert missing[1].message == "'also missing' not in any chunk of the corpus (case o-1)"
    assert a.evidence["status"].to_list() == ["not_in_corpus"] * 8 + ["found"]
