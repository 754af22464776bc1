"""Tests for the HTML / Markdown reports and `ragmeter report`."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import polars as pl
import pytest

from ragmeter.errors import InputError

INJECT = "<script>document.title='PWNED'</script>"
INJECT_IMG = "<img src=x onerror=\"document.title='PWNED2'\">"

CHUNK = pl.Struct({"file": pl.Utf8, "chunk_id": pl.Utf8, "text": pl.Utf8, "score": pl.Float64, "relevant": pl.Boolean})

CASE_SCHEMA = {
    "id": pl.Utf8,
    "category": pl.Utf8,
    "question": pl.Utf8,
    "answer": pl.Utf8,
    "reference_answer": pl.Utf8,
    "labeled": pl.Boolean,
    "hit": pl.Boolean,
    "first_relevant_rank": pl.Int64,
    "reciprocal_rank": pl.Float64,
    "average_precision": pl.Float64,
    "ndcg": pl.Float64,
    "precision": pl.Float64,
    "file_hit": pl.Boolean,
    "all_files_hit": pl.Boolean,
    "evidence_recall": pl.Float64,
    "n_retrieved": pl.Int64,
    "empty_retrieval": pl.Boolean,
    "retrieval_mode": pl.Utf8,
    "correctness_score": pl.Float64,
    "correctness_status": pl.Utf8,
    "correct": pl.Boolean,
    "faithfulness_score": pl.Float64,
    "faithfulness_status": pl.Utf8,
    "answer_relevancy_score": pl.Float64,
    "answer_relevancy_status": pl.Utf8,
    "context_precision_score": pl.Float64,
    "context_precision_status": pl.Utf8,
    "context_recall_score": pl.Float64,
    "context_recall_status": pl.Utf8,
    "latency_ms": pl.Float64,
    "retrieved": pl.List(CHUNK),
}


def synth_cases(n: int, seed: int = 0, *, hit_p: float = 0.75, correct_p: float = 0.7, ids: Optional[List[str]] = None) -> pl.DataFrame:
    """A cases frame shaped like the scorer's output joined with the judge's."""
    import numpy as np

    rng = np.random.default_rng(seed)
    cats = ["fact", "paraphrase", "multihop", "noanswer"]
    rows: Dict[str, List[Any]] = {k: [] for k in CASE_SCHEMA}
    for i in range(n):
        cat = cats[i % len(cats)]
        labeled = cat != "noanswer"
        hit = bool(rng.random() < hit_p) if labeled else None
        rank = (int(rng.integers(1, 6)) if hit else 0) if labeled else None
        correct = bool(rng.random() < correct_p)
        status = "failed" if rng.random() < 0.03 else "ok"
        faith = float(rng.beta(5, 1.5))
        cp = float(rng.random())
        chunks = [
            {"file": f"doc{j}.md", "chunk_id": f"c{j}", "text": f"chunk {j} of case {i}", "score": float(1 - j / 10),
             "relevant": bool(hit and j == (rank or 1) - 1)}
            for j in range(5)
        ]
        row = dict(
            id=(ids[i] if ids else f"{cat}-{i:05d}"), category=cat, question=f"question {i}?",
            answer=("The documents do not mention it." if cat == "noanswer" and correct else f"answer {i}"),
            reference_answer=(None if cat == "noanswer" else f"reference {i}"), labeled=labeled, hit=hit,
            first_relevant_rank=rank, reciprocal_rank=(1 / rank if rank else 0.0) if labeled else None,
            average_precision=(1 / rank if rank else 0.0) if labeled else None,
            ndcg=(float(rng.random()) if hit else 0.0) if labeled else None,
            precision=(0.2 if hit else 0.0) if labeled else None, file_hit=(hit or bool(rng.random() < 0.5)) if labeled else None,
            all_files_hit=hit, evidence_recall=(1.0 if hit else 0.0) if labeled else None, n_retrieved=5,
            empty_retrieval=False, retrieval_mode="hybrid", correctness_score=(None if status == "failed" else (4.0 if correct else 2.0)),
            correctness_status=status, correct=(None if status == "failed" else correct),
            faithfulness_score=faith, faithfulness_status="ok", answer_relevancy_score=float(rng.random()),
            answer_relevancy_status="ok", context_precision_score=cp, context_precision_status="ok",
            context_recall_score=float(rng.random()), context_recall_status="ok", latency_ms=float(rng.gamma(2, 400)),
            retrieved=chunks,
        )
        for k in CASE_SCHEMA:
            rows[k].append(row[k])
    return pl.DataFrame(rows, schema=CASE_SCHEMA)


def judge_frame(cases: pl.DataFrame) -> pl.DataFrame:
    rows = []
    for r in cases.iter_rows(named=True):
        for m in ("correctness", "faithfulness", "answer_relevancy", "context_precision", "context_recall"):
            rows.append(dict(
                id=r["id"], metric=m, status=r[f"{m}_status"], score=r[f"{m}_score"],
                correct=r["correct"] if m == "correctness" else None,
                reason=f"{m} reason for {r['id']}", error=None if r[f"{m}_status"] == "ok" else "HTTP 500",
                attempts=1, prompt_tokens=300, completion_tokens=40, cost_usd=0.0004, latency_ms=850.0, cached=False,
            ))
    return pl.DataFrame(rows, schema_overrides={"error": pl.Utf8, "correct": pl.Boolean, "score": pl.Float64})


def write_results(path: Path, cases: pl.DataFrame, *, judge: bool = True, sweep: bool = False, summary: Optional[dict] = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    cases.write_parquet(path / "cases.parquet")
    if judge:
        judge_frame(cases).write_parquet(path / "judge.parquet")
    if sweep:
        pl.DataFrame({
            "threshold": [0.0, 0.1, 0.2, 0.0, 0.1, 0.2],
            "category": [None, None, None, "fact", "fact", "fact"],
            "hit_rate": [0.8, 0.78, 0.6, 0.9, 0.85, 0.7],
            "mrr": [0.6, 0.59, 0.5, 0.7, 0.65, 0.6],
            "empty_retrievals": [0, 1, 13, 0, 0, 4],
            "mean_kept": [5.0, 4.2, 2.1, 5.0, 4.0, 2.0],
        }).write_parquet(path / "sweep.parquet")
    base = {"version": "0.1.0", "golden_hash": "abc123", "k": 5, "warnings": ["3 cases used bm25 instead of hybrid"]}
    (path / "summary.json").write_text(json.dumps(summary if summary is not None else base), encoding="utf-8")
    return path


def inject(cases: pl.DataFrame) -> pl.DataFrame:
    """Put hostile markup into every kind of input string of the first case."""
    first = cases.head(1).with_columns(
        pl.lit(INJECT).alias("answer"),
        pl.lit(INJECT_IMG).alias("question"),
        pl.lit("fact</script><script>document.title='PWNED3'</script>").alias("category"),
        pl.lit([{"file": INJECT_IMG, "chunk_id": "<b>c0</b>", "text": INJECT + " & more", "score": 0.9, "relevant": True}]).cast(pl.List(CHUNK)).alias("retrieved"),
    )
    return pl.concat([first, cases.tail(cases.height - 1)])


@pytest.fixture()
def results_dir(tmp_path: Path) -> Path:
    cases = inject(synth_cases(60, seed=1))
    return write_results(tmp_path / "run", cases, sweep=True, summary={
        "version": "0.1.0", "golden_hash": "abc", "name": "<i>run</i>", "warnings": [INJECT]})


# ------------------------------------------------------------------ unit tests on the HTML


def test_write_reports_outputs(results_dir: Path) -> None:
    from ragmeter.report import write_reports

    paths = write_reports(results_dir, n_resamples=200)
    html = paths["html"].read_text(encoding="utf-8")
    md = paths["markdown"].read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    for section in ("overall", "categories", "diagnosis", "readings", "distributions", "sweep", "explorer"):
        assert f'id="{section}"' in html
    assert "<svg" in html and "Threshold sweep" in html
    # self-contained: no external resources
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", html)
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html
    assert "## ragmeter report" in md and "| metric | value | 95% CI | n |" in md


def test_every_input_string_is_escaped(results_dir: Path) -> None:
    from ragmeter.report import write_reports

    html = write_reports(results_dir, n_resamples=200)["html"].read_text(encoding="utf-8")
    # exactly one executable <script> block (the report's own) + two JSON blocks
    assert html.count("<script>") == 1
    assert html.count("<script") == 3
    assert html.count("</script>") == 3
    assert "PWNED" not in html.split('<script type="application/octet-stream" id="case-data"')[0].replace(
        "&lt;script&gt;document.title=&#x27;PWNED&#x27;&lt;/script&gt;", ""
    ).replace("fact&lt;/script&gt;&lt;script&gt;document.title=&#x27;PWNED3&#x27;&lt;/script&gt;", "")
    assert "<i>run</i>" not in html and "&lt;i&gt;run&lt;/i&gt;" in html
    assert "<img" not in html
    data = html.split('<script type="application/octet-stream" id="case-data"')[1].split("</script>")[0]
    assert "<" not in data and data.count(">") == 1  # the tag's own
    cols = case_data_of(html)  # columnar: {column: [value per case]}
    assert cols["answer"][0] == INJECT
    assert cols["chunk_text"][0] == [INJECT + " & more"]
    assert cols["chunk_file"][0] == [INJECT_IMG]
    assert cols["category"][0].startswith("fact</script>")
    assert cols["verdict_metric"][1][:2] == ["correctness", "faithfulness"]
    assert len(cols["id"]) == 60
    # the explorer never uses innerHTML
    assert "innerHTML" not in html


def test_json_for_script_roundtrip() -> None:
    from ragmeter.report.html import json_for_script

    payload = {"a": "</script><script>x()</script>", "b": "\u2028&<>", "c": "</SCRIPT >"}
    safe = json_for_script(json.dumps(payload, ensure_ascii=False))
    assert "</" not in safe and "<" not in safe
    assert json.loads(safe) == payload


def test_markdown_escapes_table_cells(tmp_path: Path) -> None:
    from ragmeter.report import write_reports

    cases = synth_cases(12, seed=2).with_columns(pl.lit("a|b<script>").alias("category"))
    md = write_reports(write_results(tmp_path / "r", cases), n_resamples=100)["markdown"].read_text(encoding="utf-8")
    assert "a\\|b&lt;script&gt;" in md
    assert "<script>" not in md


def test_aggregates_keep_unscored_in_total(tmp_path: Path) -> None:
    from ragmeter.report.data import compute_aggregates, load_results

    res = load_results(write_results(tmp_path / "r", synth_cases(40, seed=3), judge=False))
    agg = compute_aggregates(res.cases, n_resamples=200)
    hit = agg["overall"]["hit"]
    assert hit["n_total"] == 40 and hit["n_scored"] == 30  # noanswer cases are unlabelled
    corr = agg["overall"]["correct"]
    failed = res.cases.filter(pl.col("correctness_status") == "failed").height
    # noanswer cases without a judge verdict get the refusal rule; failed judge calls are unscored
    assert corr["n_scored"] == 40 - failed
    assert agg["by_category"]["noanswer"]["hit"]["n_scored"] == 0
    assert agg["by_category"]["noanswer"]["hit"]["value"] is None


def test_missing_files_and_other_versions(tmp_path: Path) -> None:
    from ragmeter.report import write_reports

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="missing cases.parquet, summary.json"):
        write_reports(empty)
    with pytest.raises(InputError, match="not found"):
        write_reports(tmp_path / "nope")
    d = write_results(tmp_path / "old", synth_cases(8), summary={"results_format": 99, "version": "9.9"})
    with pytest.raises(InputError, match="another version"):
        write_reports(d)
    d = write_results(tmp_path / "cols", synth_cases(8).drop("hit", "labeled"))
    with pytest.raises(InputError, match=r"missing column\(s\) labeled, hit"):
        write_reports(d)
    d = write_results(tmp_path / "badjson", synth_cases(8))
    (d / "summary.json").write_text("{nope", encoding="utf-8")
    with pytest.raises(InputError, match="summary.json:1: invalid JSON: "):
        write_reports(d)



def test_wrong_column_type_is_an_input_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from ragmeter.cli import main
    from ragmeter.report import write_reports

    good = write_results(tmp_path / "good", synth_cases(12))
    bad = write_results(tmp_path / "bad", synth_cases(12).with_columns(pl.col("hit").cast(pl.Utf8)))
    with pytest.raises(InputError, match=r"cases.parquet: column hit is String, expected Boolean"):
        write_reports(bad)
    two = write_results(tmp_path / "two", synth_cases(12).with_columns(
        pl.col("faithfulness_score").cast(pl.Utf8), pl.col("labeled").cast(pl.Int64)))
    with pytest.raises(InputError, match=r"columns labeled is Int64, expected Boolean; faithfulness_score is String, "
                                         r"expected a number"):
        write_reports(two)
    for argv in (["report", str(bad)], ["compare", str(good), str(bad)], ["compare", str(two), str(good)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err and "cases.parquet: column" in err


def test_minimal_cases_without_judge_or_chunks(tmp_path: Path) -> None:
    from ragmeter.report import write_reports

    cases = pl.DataFrame({"id": ["a-1", "a-2", "b-1"], "category": ["a", "a", "b"], "labeled": [True, True, False], "hit": [True, False, None]})
    d = write_results(tmp_path / "min", cases, judge=False, summary={})
    html = write_reports(d, n_resamples=100)["html"].read_text(encoding="utf-8")
    assert "Hit@k (chunk)" in html


def test_cli_report(results_dir: Path, capsys: pytest.CaptureFixture) -> None:
    from ragmeter.cli import main

    assert main(["report", str(results_dir), "--resamples", "200"]) == 0
    assert (results_dir / "report.html").is_file()
    assert main(["report", str(results_dir / "missing")]) == 2
    assert "results directory not found" in capsys.readouterr().err
    # a file of the folder given instead of the folder: named as a file, and its folder suggested
    assert main(["report", str(results_dir / "summary.json")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "summary.json: a file, not a results folder: pass its folder" in err and str(results_dir) in err
    stray = results_dir.parent / "notes.txt"
    stray.write_text("x", encoding="utf-8")
    assert main(["report", str(stray)]) == 2
    assert "notes.txt: a file, not a results folder (pass the folder" in " ".join(capsys.readouterr().err.split())


def test_report_on_many_cases_paginates_the_case_explorer(tmp_path: Path) -> None:
    # Speed is measured in benches/bench_report.py; here: every case is in the data, not in the DOM.
    from ragmeter.report import write_reports

    cases = synth_cases(2000, seed=4)
    big = pl.concat([cases.with_columns((pl.col("id") + f"-{k}").alias("id")) for k in range(10)])  # 20,000 cases
    d = write_results(tmp_path / "big", big, judge=False)
    html = write_reports(d)["html"].read_text(encoding="utf-8")
    assert case_data_of(html)["id"][19_999] == big["id"][19_999]
    assert html.count("<tr") < 2_000, "case rows must be rendered page by page, not all at once"


CASE_DATA = re.compile(r'<script type="application/octet-stream" id="case-data" data-block="(\d+)">([^<]*)</script>')


def case_data_of(html: str) -> Dict[str, Any]:
    """The case explorer's embedded data, decoded and put together: ``{column: [value per case]}``.

    The block holds ``"len len ...;"`` then base64 parts of gzip columnar JSON: the index (every case),
    then the other columns of ``data-block`` cases per part; category and diagnosis are coded.
    """
    import base64
    import gzip

    block, text = CASE_DATA.search(html).groups()
    head, packed = text.split(";", 1)
    sizes = [int(x) for x in head.split(" ")]
    assert sum(sizes) == len(packed)
    starts = [sum(sizes[:k]) for k in range(len(sizes) + 1)]
    parts = []
    for a, b in zip(starts, starts[1:]):
        part, coded = json.loads(gzip.decompress(base64.b64decode(packed[a:b])))
        parts.append({k: ([None if c is None else coded[k][c] for c in v] if k in coded else v) for k, v in part.items()})
    cols = dict(parts[0])
    n = len(cols["id"])
    assert len(parts) - 1 == -(-n // int(block))  # one detail part per block of cases
    for detail in parts[1:]:
        assert all(len(v) == min(int(block), n) or detail is parts[-1] for v in detail.values())
        for k, v in detail.items():
            cols.setdefault(k, []).extend(v)
    assert all(len(v) == n for v in cols.values())
    return cols


def _cjk_cases(n: int, chars: int, seed: int = 3) -> pl.DataFrame:
    """synth_cases with long Chinese answers and chunk texts (which compress worst)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    pool = np.array([chr(c) for c in range(0x4E00, 0x4E00 + 3000)])
    texts = ["".join(pool[rng.integers(0, 3000, chars)]) for _ in range(400)]
    cases = synth_cases(n, seed=seed)
    pick = rng.integers(0, 400, (n, 5))
    chunks = [[{"file": f"doc{j}.md", "chunk_id": f"c{j}", "text": texts[pick[i, j]], "score": 0.5, "relevant": j == 0} for j in range(5)]
              for i in range(n)]
    return cases.with_columns(pl.Series("answer", [texts[p] for p in pick[:, 0]]),
                              pl.Series("retrieved", chunks, dtype=cases.schema["retrieved"]))


def test_large_report_stays_under_the_size_bound(tmp_path: Path) -> None:
    # 20,000 cases with 500-character Chinese answers and chunks: the explorer's
    # cuts are halved until the data fits; every case is still in it.
    from ragmeter.report import write_reports
    from ragmeter.report.html import MAX_EXPLORER_BYTES

    cases = _cjk_cases(20_000, 500)
    html = write_reports(write_results(tmp_path / "big", cases, judge=False))["html"]
    assert html.stat().st_size < MAX_EXPLORER_BYTES + 2_000_000
    data = case_data_of(html.read_text(encoding="utf-8"))
    assert len(data["id"]) == 20_000 and data["id"][-1] == cases["id"][-1]
    assert 0 < len(data["chunk_text"][0][0]) < 500 and len(data["chunk_text"][0]) >= 1


# ------------------------------------------------------------------ headless Chromium


def _chromium() -> Optional[str]:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _run_chromium(binary: str, args: List[str], tmp: Path) -> subprocess.CompletedProcess:
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--disable-extensions", "--disable-background-networking", f"--user-data-dir={tmp / 'profile'}",
           "--virtual-time-budget=5000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_html_in_headless_chromium(results_dir: Path, tmp_path: Path) -> None:
    binary = _chromium()
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but no chromium binary was found: install Debian's `chromium` package")
        pytest.skip("no chromium binary (install Debian's `chromium`; this test is mandatory when CI is set)")
    from ragmeter.report import write_reports

    html = write_reports(results_dir, n_resamples=200)["html"]
    url = html.resolve().as_uri()
    shot = tmp_path / "report.png"
    proc = _run_chromium(binary, [f"--screenshot={shot}", "--window-size=1280,2000", url], tmp_path)
    assert shot.is_file() and shot.stat().st_size > 10_000, proc.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    proc = _run_chromium(binary, ["--dump-dom", url], tmp_path)
    dom = proc.stdout
    assert "<title>" in dom, proc.stderr[-2000:]
    title = dom.split("<title>")[1].split("</title>")[0]
    assert "PWNED" not in title and title.startswith("ragmeter report")
    # the explorer ran: rows rendered, the first case's detail is open and shows the
    # injected markup as text
    assert dom.count("<tr") > 20
    assert "Case " in dom
    assert "&lt;script&gt;document.title='PWNED'&lt;/script&gt; &amp; more" in dom
    assert "<img src=\"x\"" not in dom and "<img src=x" not in dom


def _png_size(path: Path) -> tuple:
    import struct

    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


#: measures the report inside a 390 px frame (headless Chromium keeps a window at least 500 px wide)
NARROW_PROBE = """<script>
function measure(tries){var f=document.getElementById('report'), d=f.contentDocument, w=f.contentWindow;
tries = tries || 0;  // the explorer renders once its data is decompressed (asynchronously): wait for its rows
if (!d.querySelectorAll('#case-rows tr').length && tries < 40) { setTimeout(function(){ measure(tries + 1); }, 50); return; }
document.body.setAttribute('data-result', JSON.stringify({scrollWidth: d.documentElement.scrollWidth,
  bodyScrollWidth: d.body.scrollWidth, innerWidth: w.innerWidth, rows: d.querySelectorAll('#case-rows tr').length,
  svgWidths: Array.prototype.map.call(d.querySelectorAll('svg.chart'), function(s){return s.getBoundingClientRect().width;})}));}
</script>"""


def test_html_at_390px_has_no_horizontal_overflow(results_dir: Path, tmp_path: Path) -> None:
    import html as html_lib

    binary = _chromium()
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but no chromium binary was found: install Debian's `chromium` package")
        pytest.skip("no chromium binary (install Debian's `chromium`; this test is mandatory when CI is set)")
    from ragmeter.report import write_reports

    report = write_reports(results_dir, n_resamples=200)["html"].read_text(encoding="utf-8")
    page = tmp_path / "narrow.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body style="margin:0">' + NARROW_PROBE
        + '<iframe id="report" onload="measure()" style="width:390px;height:2400px;border:0" srcdoc="'
        + html_lib.escape(report, quote=True) + '"></iframe></body></html>', encoding="utf-8")
    shot = tmp_path / "narrow.png"
    proc = _run_chromium(binary, [f"--screenshot={shot}", "--window-size=390,2400", page.as_uri()], tmp_path)
    assert shot.is_file() and _png_size(shot) == (390, 2400), proc.stderr[-2000:]
    proc = _run_chromium(binary, ["--window-size=500,2400", "--dump-dom", page.as_uri()], tmp_path)
    found = re.search(r'data-result="([^"]*)"', proc.stdout)
    assert found, proc.stderr[-2000:]
    got = json.loads(html_lib.unescape(found.group(1)))
    assert got["innerWidth"] == 390  # the report really was laid out at 390 px
    assert got["rows"] > 0  # and its script ran
    # no horizontal overflow of the page: wide tables and charts scroll inside their cards
    assert got["scrollWidth"] <= 390 and got["bodyScrollWidth"] <= 390, got
    # charts keep their drawn size (readable text) rather than shrinking to the screen
    assert got["svgWidths"] and min(got["svgWidths"]) >= 250, got


def test_unjudged_report_says_not_judged(tmp_path: Path) -> None:
    from ragmeter.evaluation import run_eval

    examples = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"
    out = tmp_path / "ev"
    run_eval(examples / "golden.jsonl", examples / "run.jsonl", out)
    html = (out / "report.html").read_text(encoding="utf-8")
    md = (out / "report.md").read_text(encoding="utf-8")
    for label in ("Correctness score", "Faithfulness", "Answer relevancy", "Context precision", "Context recall"):
        assert f"| {label} | not judged | n/a | 0/51 |" in md
        assert f"<td>{label}</td><td class=\"num\">not judged</td>" in html
    # the refusal rule on no-answer cases is not a correctness rate, and says so
    label = "No-answer cases refused (refusal detection; answers not judged)"
    assert f"| {label} | 83.3% |" in md and "| Correct |" not in md
    assert f"<td>{label}</td>" in html and "<td>Correct</td>" not in html
    # no zero-filled judge tables
    readings = html.split('id="readings"')[1].split("</section>")[0]
    assert "high/high" not in readings and "&gt;=85%" not in readings and readings.count("not judged") >= 3
    assert "Faithfulness bands: not judged." in md
    diagnosis = html.split('id="diagnosis"')[1].split("</section>")[0]
    assert "<td>OK</td>" not in diagnosis and "<td>NOT_JUDGED</td>" in diagnosis


def test_judged_report_has_no_not_judged_rows(results_dir: Path) -> None:
    from ragmeter.report import write_reports

    paths = write_reports(results_dir, n_resamples=200)
    assert "not judged" not in paths["markdown"].read_text(encoding="utf-8")
    assert "<td>Correct</td>" in paths["html"].read_text(encoding="utf-8")


def test_judge_failed_box_groups_failures_by_kind(tmp_path: Path) -> None:
    from ragmeter.report import write_reports

    cases = synth_cases(40, seed=5)
    d = write_results(tmp_path / "r", cases, judge=False)
    judge = judge_frame(cases)
    failed = pl.col("metric") == "faithfulness"
    kinds = pl.when(pl.col("id").str.contains("fact")).then(pl.lit("auth")).otherwise(pl.lit("timeout"))
    judge = judge.with_columns(
        pl.when(failed).then(pl.lit("failed")).otherwise(pl.col("status")).alias("status"),
        pl.when(failed).then(kinds).alias("error_kind"),
        pl.when(failed).then(pl.when(kinds == "auth").then(pl.lit("HTTP 401, the endpoint refused the API key"))
                             .otherwise(pl.lit("timed out after 120 s"))).otherwise(pl.col("error")).alias("error"),
    )
    judge.write_parquet(d / "judge.parquet")
    paths = write_reports(d, n_resamples=200)
    html = paths["html"].read_text(encoding="utf-8")
    box = html.split('id="judge-failed"')[1].split("</section>")[0]
    assert html.index('id="judge-failed"') < html.index('id="overall"')  # at the top
    assert "<b>faithfulness</b>: 40 of 40 rows failed" in box
    assert "auth \u00d7 10" in box and "timeout \u00d7 30" in box
    assert box.count("HTTP 401, the endpoint refused the API key") == 1 and box.count("timed out after 120 s") == 1
    n_corr = judge.filter((pl.col("metric") == "correctness") & (pl.col("status") == "failed")).height
    assert n_corr > 0 and f"<b>correctness</b>: {n_corr} of 40 rows failed" in box
    md = paths["markdown"].read_text(encoding="utf-8")
    assert "**Judge failed**" in md and "faithfulness: 40 of 40 rows failed: timeout x 30" in md


def test_judge_failed_box_prefers_the_judge_summary(tmp_path: Path) -> None:
    from ragmeter.report import write_reports

    summary = {"judge": {"metrics": {
        "correctness": {"n_total": 12, "failures": {"quota": {"count": 3, "example": "HTTP 429, quota exhausted"}}},
        "faithfulness": {"n_total": 12, "failures": {}},
    }}}
    d = write_results(tmp_path / "r", synth_cases(12, seed=6), summary=summary)
    html = write_reports(d, n_resamples=100)["html"].read_text(encoding="utf-8")
    box = html.split('id="judge-failed"')[1].split("</section>")[0]
    assert "<b>correctness</b>: 3 of 12 rows failed" in box and "HTTP 429, quota exhausted" in box
    assert "faithfulness" not in box


def test_reports_read_the_stored_diagnosis(tmp_path: Path) -> None:
    from ragmeter.diagnosis import diagnose
    from ragmeter.report.data import load_results

    cases = diagnose(synth_cases(16, seed=7))
    stored = cases.with_columns(pl.lit("RETRIEVAL_MISS").alias("diagnosis"))  # as if computed by the writer
    d = write_results(tmp_path / "r", stored, judge=False)
    assert set(load_results(d).cases["diagnosis"]) == {"RETRIEVAL_MISS"}
    d = write_results(tmp_path / "old", synth_cases(16, seed=7), judge=False)  # no stored diagnosis: computed
    assert load_results(d).cases["diagnosis"].to_list() == cases["diagnosis"].to_list()


def test_warnings_box_is_collapsible_and_bounded(tmp_path: Path) -> None:
    from ragmeter.report import write_reports

    old_style = "99999 case(s) missing from the run: " + ", ".join(f"case-{i}" for i in range(99999))
    structured = {"code": "mode_fallback", "message": "3 case(s) ran in bm25: a, b, c", "count": 3, "cases": ["a", "b", "c"]}
    d = write_results(tmp_path / "r", synth_cases(8), judge=False, summary={"warnings": [old_style, structured]})
    html = write_reports(d, n_resamples=100)["html"].read_text(encoding="utf-8")
    box = html.split('<section class="warn" id="warnings">')[1].split("</section>")[0]
    assert box.startswith("<details><summary>Warnings: 2 kind(s)") and box.count("<li>") == 2
    assert "mode_fallback (3)" in box and len(box) < 2000  # an old folder's listing is cut, not pasted whole


def test_static_html_does_not_grow_with_the_number_of_cases(tmp_path: Path) -> None:
    # only the explorer's compressed data scales with the cases; the rest is counts, charts and tables
    from ragmeter.report import write_reports

    sizes = {}
    for n in (200, 4000):
        d = write_results(tmp_path / f"r{n}", synth_cases(n, seed=1), sweep=True)
        html = write_reports(d, n_resamples=200)["html"].read_text(encoding="utf-8")
        data = CASE_DATA.search(html).group(2)
        sizes[n] = (len(html) - len(data), len(data))
        assert len(case_data_of(html)["id"]) == n
    (static_small, data_small), (static_big, data_big) = sizes[200], sizes[4000]
    assert data_big > 10 * data_small  # the data does grow with the cases ...
    assert abs(static_big - static_small) < 1_000, sizes  # ... the page around it does not (a few digits more)


#: types the last case's question into the explorer's search (inside a frame) and reports what it then shows
SEARCH_PROBE = """<script>
function probe(tries){var f=document.getElementById('report'), d=f.contentDocument;
  var info=d.getElementById('pageinfo').textContent, h=d.querySelector('#detail h3'), q=d.getElementById('f-q');
  tries = tries || 0;
  if (tries === 0) document.body.setAttribute('data-first', JSON.stringify({info: info, detail: h ? h.textContent : null}));
  if (!q.value) { q.value = QUERY; q.dispatchEvent(new Event('input')); }
  else if (/^page 1 \\/ 1 /.test(info) && h && h.textContent === 'Case ' + LAST) {
    document.body.setAttribute('data-result', JSON.stringify({info: info, detail: d.getElementById('detail').textContent})); return; }
  if (tries < 200) setTimeout(function(){ probe(tries + 1); }, 50);
}
function start(tries){ var d=document.getElementById('report').contentDocument, p=d && d.getElementById('pageinfo');
  tries = tries || 0;
  if (p && /^page /.test(p.textContent) && d.querySelector('#detail h3')) probe(0);
  else if (tries < 200) setTimeout(function(){ start(tries + 1); }, 50); }
</script>"""


def test_explorer_shows_every_case_across_its_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 300 cases in detail parts of 64: the page count covers every case, the first case's detail is read
    # from the first part, and a search of the questions (in the parts) finds the last case and shows it.
    import html as html_lib

    from ragmeter.report import html as report_html
    from ragmeter.report import write_reports

    binary = _chromium()
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but no chromium binary was found: install Debian's `chromium` package")
        pytest.skip("no chromium binary (install Debian's `chromium`; this test is mandatory when CI is set)")
    monkeypatch.setattr(report_html, "BLOCK_CASES", 64)
    cases = synth_cases(300, seed=8)
    report = write_reports(write_results(tmp_path / "r", cases), n_resamples=100)["html"]
    text = report.read_text(encoding="utf-8")
    assert len(CASE_DATA.search(text).group(2).split(";")[0].split(" ")) == 1 + 5  # index + ceil(300 / 64) parts
    proc = _run_chromium(binary, ["--dump-dom", report.resolve().as_uri()], tmp_path)
    info = re.search(r'id="pageinfo"[^>]*>([^<]*)<', proc.stdout)
    assert info and info.group(1) == "page 1 / 6 \u00b7 300 of 300 cases", proc.stderr[-2000:]
    first = cases["id"][0]
    assert f'<h3>Case <span class="bidi" dir="auto">{first}</span></h3>' in proc.stdout and "question 0?" in proc.stdout
    assert 'id="case-data"' in proc.stdout and len(proc.stdout) < len(text)  # the data left the DOM once read

    last = cases["id"][-1]
    page = tmp_path / "search.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>'
        + SEARCH_PROBE.replace("LAST", json.dumps(last)).replace("QUERY", json.dumps("Question 299?"))
        + '<iframe id="report" onload="start()" style="width:1000px;height:2000px;border:0" srcdoc="'
        + html_lib.escape(text, quote=True) + '"></iframe></body></html>', encoding="utf-8")
    proc = _run_chromium(binary, ["--dump-dom", page.as_uri()], tmp_path)
    first_seen = re.search(r'data-first="([^"]*)"', proc.stdout)
    found = re.search(r'data-result="([^"]*)"', proc.stdout)
    assert first_seen and found, proc.stderr[-2000:]
    assert json.loads(html_lib.unescape(first_seen.group(1)))["info"] == "page 1 / 6 \u00b7 300 of 300 cases"
    got = json.loads(html_lib.unescape(found.group(1)))
    assert got["info"] == "page 1 / 1 \u00b7 1 of 300 cases"
    assert "question 299?" in got["detail"] and "chunk 0 of case 299" in got["detail"]
    assert "correctness reason for " + last in got["detail"]


def test_reports_state_the_settings_that_tell_two_runs_apart(tmp_path: Path) -> None:
    # summary.json as `ragmeter eval` writes it: inputs and settings nested
    from ragmeter.report import write_reports

    summary = {"version": "0.1.0",
               "inputs": {"golden": {"path": "/data/golden-v2.jsonl", "sha256": "82bec70787aef8fd02d8"},
                          "run": {"path": "/data/run-bm25.jsonl", "sha256": "3e787436c2cd"}},
               "settings": {"k": 7, "judge": {"model": "judge-model-x", "metrics": ["correctness", "faithfulness"]}}}
    paths = write_reports(write_results(tmp_path / "r", synth_cases(12, seed=8), summary=summary), n_resamples=100)
    html = paths["html"].read_text(encoding="utf-8")
    md = paths["markdown"].read_text(encoding="utf-8")
    header = html.split("</header>")[0]
    for text in (md.split("| metric |")[0], header):
        assert "golden-v2.jsonl" in text and "82bec70787ae" in text and "run-bm25.jsonl" in text
        assert "k = 7" in text and "judge-model-x" in text and "correctness, faithfulness" in text
    summary["settings"]["judge"] = None
    paths = write_reports(write_results(tmp_path / "n", synth_cases(12, seed=8), summary=summary), n_resamples=100)
    assert "judge: none" in paths["markdown"].read_text(encoding="utf-8").split("| metric |")[0]


def test_cost_rows_say_how_many_rows_they_cover_and_never_show_an_unknown_cost_as_zero(tmp_path: Path) -> None:
    from ragmeter.report import write_reports

    cases = synth_cases(12, seed=9).with_columns(
        pl.Series("cost", [0.001 if i % 3 else None for i in range(12)], dtype=pl.Float64))
    d = write_results(tmp_path / "r", cases)
    judge_frame(cases).with_columns(pl.lit(None, dtype=pl.Float64).alias("cost_usd")).write_parquet(d / "judge.parquet")
    html = write_reports(d, n_resamples=100)["html"].read_text(encoding="utf-8")
    costs = html.split("<h3>Cost and latency</h3>")[1].split("</table>")[0]
    judge_cost = costs.split("judge cost (USD)</td>")[1].split("</tr>")[0]
    assert "0.0000" not in judge_cost and "unknown" in judge_cost
    system_cost = costs.split("system cost (USD, from the run)</td>")[1].split("</tr>")[0]
    assert "0.0080" in system_cost and "8/12 cases" in system_cost
    # eval's judge summary is the judge's own total: null (calls without a price) even if a skipped row cost 0
    (d / "summary.json").write_text(json.dumps({"judge": {"judge_cost_usd": None}}), encoding="utf-8")
    judge_frame(cases).with_columns(pl.when(pl.col("id") == cases["id"][0]).then(0.0).alias("cost_usd")) \
        .write_parquet(d / "judge.parquet")
    html = write_reports(d, n_resamples=100)["html"].read_text(encoding="utf-8")
    judge_cost = html.split("judge cost (USD)</td>")[1].split("</tr>")[0]
    assert "0.0000" not in judge_cost and "unknown" in judge_cost


def test_report_of_a_score_folder_shows_no_answer_outcomes(tmp_path: Path) -> None:
    # `ragmeter score --out` reads no answers: the report must not call them failed generations or show
    # empty refusal and correctness rows
    from ragmeter.cli import main
    from ragmeter.report import write_reports

    examples = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"
    d = tmp_path / "s"
    assert main(["score", "--golden", str(examples / "golden.jsonl"), "--run", str(examples / "run.jsonl"),
                 "--out", str(d)]) == 0
    paths = write_reports(d, n_resamples=100)
    md = paths["markdown"].read_text(encoding="utf-8")
    html = paths["html"].read_text(encoding="utf-8")
    for text in (md, html):
        assert "GENERATION_FAILED" not in text.split("case-data")[0] and "NOT\\_JUDGED" in md
        assert "No-answer cases refused" not in text  # no empty rows: the answer-based ones say why they are empty
    assert "| Refusal rate (answerable questions) | not measured: no answers in this folder | n/a | 0/45 |" in md
    assert "| Correct | not measured: no answers in this folder | n/a | 0/51 |" in md
    assert "Refusals: 0/0" not in md and "Refusals: no answers in this folder" in md
    refusals = html.split("<h3>Refusals</h3>")[1].split("</div>")[0]
    assert "no answers in this folder" in refusals and "<table" not in refusals
    assert "| Hit@k (chunk) | 80.0% |" in md


def test_rows_skipped_at_the_budget_are_shown_with_their_reason(tmp_path: Path) -> None:
    # eval --budget: the rows it did not judge are their own outcome, named at the top like failed ones
    from ragmeter.report import write_reports

    cases = synth_cases(12, seed=10)
    d = write_results(tmp_path / "r", cases, judge=False)
    budget = pl.col("id").is_in(cases["id"][:5].to_list()) & (pl.col("metric") == "faithfulness")
    judge_frame(cases).with_columns(
        pl.when(budget).then(pl.lit("skipped")).otherwise(pl.col("status")).alias("status"),
        pl.when(budget).then(pl.lit("budget")).alias("error_kind"),
        pl.when(budget).then(pl.lit("--budget $0.50 reached")).otherwise(pl.col("error")).alias("error"),
    ).write_parquet(d / "judge.parquet")
    paths = write_reports(d, n_resamples=100)
    html = paths["html"].read_text(encoding="utf-8")
    box = html.split('id="judge-skipped"')[1].split("</section>")[0]
    assert html.index('id="judge-skipped"') < html.index('id="overall"')
    assert "<b>faithfulness</b>: 5 of 12 rows skipped" in box and "budget \u00d7 5" in box
    assert "--budget $0.50 reached" in box and "correctness" not in box
    md = paths["markdown"].read_text(encoding="utf-8")
    assert "**Judge skipped**" in md and "faithfulness: 5 of 12 rows skipped: budget x 5" in md
    # from eval's judge summary (its per-metric skips), as the terminal prints them
    summary = {"judge": {"metrics": {"correctness": {"n_total": 12, "failures": {}, "skips": {
        "budget": {"count": 7, "example": "--budget $1 reached"}}}}}}
    (d / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    md = write_reports(d, n_resamples=100)["markdown"].read_text(encoding="utf-8")
    assert "correctness: 7 of 12 rows skipped: budget x 7 (e.g. --budget $1 reached)" in md


def test_the_two_correct_rates_are_named_side_by_side_when_calls_failed(tmp_path: Path) -> None:
    """The report's Correct leaves failed calls out (n scored / total); the judge summary's correct_rate counts
    them as not correct. With failed calls the two differ, and the report says both, each by its name."""
    from ragmeter.report import write_reports

    cases = synth_cases(60, seed=4)
    failed = int((cases["correctness_status"] == "failed").sum())
    assert failed > 0
    ok = cases.filter(pl.col("correctness_status") == "ok")
    n_correct = int(ok["correct"].sum())
    expected = (f"Counting the {failed} failed correctness call(s) as not correct, as summary.json's correct_rate "
                f"does: {100 * n_correct / (ok.height + failed):.1f}% ({n_correct}/{ok.height + failed}).")
    d = write_results(tmp_path / "r", cases)
    paths = write_reports(d, n_resamples=100)
    md = paths["markdown"].read_text(encoding="utf-8")
    html = paths["html"].read_text(encoding="utf-8")
    from ragmeter.report.markdown import md_escape

    assert md_escape(expected) in md and f"{100 * n_correct / ok.height:.1f}%" in md  # the judged-rows rate stays
    assert expected.replace("'", "&#x27;") in html or expected in html
    no_failures = cases.with_columns(pl.lit("ok").alias("correctness_status"),
                                     pl.col("correct").fill_null(False))
    d2 = write_results(tmp_path / "r2", no_failures)
    assert "failed correctness call" not in write_reports(d2, n_resamples=100)["markdown"].read_text(encoding="utf-8")


def test_markdown_says_no_faithfulness_was_scored_rather_than_dropping_the_line(tmp_path: Path) -> None:
    from ragmeter.report import write_reports

    cases = synth_cases(8, seed=2).with_columns(pl.lit("failed").alias("faithfulness_status"),
                                                pl.lit(None, dtype=pl.Float64).alias("faithfulness_score"))
    md = write_reports(write_results(tmp_path / "r", cases), n_resamples=100)["markdown"].read_text(encoding="utf-8")
    assert "Faithfulness bands: no answer scored (0/8)." in md


def test_all_files_hit_counts_the_cases_expecting_two_or_more_files_as_the_summary_does() -> None:
    """All files hit applies to cases that expect two or more files: the report's n_total is theirs (13 in the
    example), as summary.json and the terminal say, not every case (51), which read as 38 unscored cases."""
    import ragmeter
    from ragmeter.report.data import compute_aggregates

    example = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"
    result = ragmeter.score(example / "golden.jsonl", example / "run.jsonl")
    aggregates = compute_aggregates(result.cases, n_resamples=200)
    summary = result.summary["overall"]["all_files_hit_rate"]
    assert {k: aggregates["overall"]["all_files_hit"][k] for k in ("n_scored", "n_total")} == \
        {"n_scored": summary["n_scored"], "n_total": summary["n_total"]}
    multi = result.cases.group_by("category").agg((pl.col("n_expected_files") >= 2).sum().alias("n"))
    for category, n in multi.iter_rows():
        assert aggregates["by_category"][category]["all_files_hit"]["n_total"] == n, category
    assert aggregates["overall"]["hit"]["n_total"] == result.cases.height  # the others count every case


def test_the_repeats_table_says_how_many_rows_each_repeat_mean_is_over_and_which_repeats_failed() -> None:
    """A run whose repeat 2 failed showed 'n/a' in the report's repeats table and nothing else; the terminal said
    '50/51, 0/51' and 'repeat 2: 51 of 51 judge rows not judged'."""
    from ragmeter.repeats import repeat_sections, repeat_table

    repeats = {"n": 2, "metrics": {"correctness": {
        "per_repeat": [2.06, None], "n_scored": [50, 0], "n_total": [51, 51], "mean": 2.06, "std": None,
        "min": 2.06, "max": 2.06, "n_compared": 0, "n_flipped": 0, "flip_rate": None}},
        "runs": [{"repeat": 1, "incomplete": {"rows": 1, "of": 51, "failed": 1, "skipped_budget": 0}},
                 {"repeat": 2, "incomplete": {"rows": 51, "of": 51, "failed": 51, "skipped_budget": 0}}]}
    _headers, rows = repeat_table(repeats)
    assert rows[0][4] == "2.060 (50/51), n/a (0/51)"
    (_key, _title, note), = repeat_sections({"repeats": repeats})
    assert "repeat 1: 1 of 51 judge rows not judged (1 failed)" in note
    assert "repeat 2: 51 of 51 judge rows not judged (51 failed)" in note
