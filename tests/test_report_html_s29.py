"""Session 29: report.html's case explorer driven as a user drives it, in headless Chromium.

A harness page loads the report in a frame, then acts as a user (chooses a category and a diagnosis, types a
search, clicks prev / next and table rows) and records, after each step, what the explorer shows: the page line,
the ids of the rows, the highlighted row, the open case and its chunks. What it shows is compared with the
results folder's cases.parquet; Chromium's console must stay empty (no script error, no refused script).
"""
from __future__ import annotations

import html as html_lib
import json
import re
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import polars as pl
import pytest

from test_report import _chromium, judge_frame, synth_cases, write_results

#: a test that opens the report in a browser is skipped where there is none (the CI machine may lack it)
needs_chromium = pytest.mark.skipif(_chromium() is None, reason="no chromium binary (Debian's `chromium` package)")

EXAMPLE = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"

#: runs STEPS against the report in the frame; each step's view ends up in body[data-result] as JSON
HARNESS = r"""<script>
var STEPS = __STEPS__, OUT = [];
function doc(){ return document.getElementById('report').contentDocument; }
function texts(list){ return Array.prototype.map.call(list, function(e){ return e.textContent; }); }
function view(){
  var d = doc(), det = d.getElementById('detail'), h = det.querySelector('h3');
  return {info: d.getElementById('pageinfo').textContent, title: d.title,
    rows: texts(d.querySelectorAll('#case-rows tr td:first-child')),
    selected: texts(d.querySelectorAll('#case-rows tr.sel td:first-child')),
    detail: h ? h.textContent : null, detailText: det.textContent,
    ownDirection: texts(det.querySelectorAll('[dir=auto]')),
    markup: d.querySelectorAll('#explorer script, #explorer img, #explorer b, #explorer i').length,
    chunks: Array.prototype.map.call(det.querySelectorAll('.chunk'), function(c){
      return {relevant: c.classList.contains('rel'), head: c.querySelector('.head').textContent,
              text: c.querySelector('.pre').textContent}; }),
    cats: texts(d.querySelectorAll('#f-cat option')), diags: texts(d.querySelectorAll('#f-diag option')),
    prevDisabled: d.getElementById('prev').disabled, nextDisabled: d.getElementById('next').disabled,
    rowsFocusable: Array.prototype.every.call(d.querySelectorAll('#case-rows tr'), function(r){ return r.tabIndex === 0; })};
}
// a view is settled once the page line is back, a listed case is open, and nothing changed for three looks
function settle(done, tries, last, same){
  var v = view(), key = JSON.stringify(v), ready = /^page /.test(v.info) && (v.rows.length ? v.detail !== null : true);
  same = key === last ? same + 1 : 0;
  if ((ready && same >= 3) || tries > 400) { v.timeout = tries > 400; done(v); return; }
  setTimeout(function(){ settle(done, tries + 1, key, same); }, 25);
}
// as a user picks an option: '' is 'all' (the first option), unless `from` 1 looks past it (a category '')
function choose(sel, value, from){
  sel.selectedIndex = -1;
  for (var k = from || 0; k < sel.options.length; k++) if (sel.options[k].value === value) { sel.selectedIndex = k; return; }
}
function act(step){
  var d = doc(), info = d.getElementById('pageinfo');
  // a filter or a search: the explorer writes the page line again once it has applied it
  if ('cat' in step || 'diag' in step || 'q' in step) info.textContent = '';
  if ('cat' in step) choose(d.getElementById('f-cat'), step.cat);
  if ('diag' in step) choose(d.getElementById('f-diag'), step.diag);
  if ('catValue' in step) choose(d.getElementById('f-cat'), step.catValue, 1);
  if ('q' in step) d.getElementById('f-q').value = step.q;
  // one event: the explorer reads every control when it applies them
  if ('q' in step) d.getElementById('f-q').dispatchEvent(new Event('input'));
  else if ('cat' in step || 'diag' in step || 'catValue' in step) d.getElementById('f-diag').dispatchEvent(new Event('change'));
  if (step.click) d.getElementById(step.click).click();
  if ('row' in step) d.querySelectorAll('#case-rows tr')[step.row].click();
}
// with {pages: true}: the ids of every page of the current filter, clicking next to the last page
function allPages(first, done){
  var ids = first.rows.slice();
  (function forward(v){ var m = /^page (\d+) \/ (\d+)/.exec(v.info);
    if (!m || m[1] === m[2] || v.timeout) { v.all = ids; done(v); return; }
    act({click: 'next'}); settle(function(w){ ids = ids.concat(w.rows); forward(w); }, 0, null, 0); })(first);
}
function run(k){
  if (k >= STEPS.length) { document.body.setAttribute('data-result', JSON.stringify(OUT)); return; }
  var step = STEPS[k];
  function record(v){ v.step = step; OUT.push(v); run(k + 1); }
  act(step);
  settle(function(v){ if (step.pages) allPages(v, record); else record(v); }, 0, null, 0);
}
function start(tries){ var d = doc(), p = d && d.getElementById('pageinfo'); tries = tries || 0;
  if (p && /^page /.test(p.textContent)) settle(function(v){ v.step = 'load'; OUT.push(v); run(0); }, 0, null, 0);
  else if (tries < 400) setTimeout(function(){ start(tries + 1); }, 25);
  else document.body.setAttribute('data-result', JSON.stringify([{step: 'load', timeout: true}])); }
</script>"""

#: a console line of Chromium's log: an uncaught error, a refused script, a failed promise ...
CONSOLE = re.compile(r':CONSOLE\(\d+\)\] "(.*)", source: (.*)$', re.M)


def explore(report: Path, steps: List[Dict[str, Any]], work: Path) -> Tuple[List[Dict[str, Any]], List[Any]]:
    """The explorer's view after loading and after each step, and the console lines Chromium logged."""
    page = work / "explore.html"
    page.write_text('<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>'
                    + HARNESS.replace("__STEPS__", json.dumps(steps))
                    + '<iframe id="report" onload="start()" style="width:1200px;height:2000px;border:0" srcdoc="'
                    + html_lib.escape(report.read_text(encoding="utf-8"), quote=True) + '"></iframe></body></html>',
                    encoding="utf-8")
    cmd = [str(_chromium()), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--disable-extensions", "--disable-background-networking", f"--user-data-dir={work / 'profile'}",
           "--enable-logging=stderr", "--v=0", "--virtual-time-budget=600000", "--dump-dom", page.as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    found = re.search(r'data-result="([^"]*)"', proc.stdout)
    assert found, proc.stderr[-3000:]
    views = json.loads(html_lib.unescape(found.group(1)))
    assert not any(v.get("timeout") for v in views), views
    return views, CONSOLE.findall(proc.stderr)


def console_of(report: Path, work: Path) -> List[Any]:
    """Console lines of the report opened on its own (its Content-Security-Policy in force)."""
    cmd = [str(_chromium()), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--disable-extensions", "--disable-background-networking", f"--user-data-dir={work / 'profile1'}",
           "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--dump-dom", report.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert re.search(r'id="pageinfo"[^>]*>page 1 / ', proc.stdout), proc.stderr[-3000:]
    return CONSOLE.findall(proc.stderr)


def _lines(path: Path) -> List[Dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith(("#", "//"))]


#: user text a report must show as text: markup, quotes, control characters, right-to-left words
HOSTILE_QUESTION = ("<script>document.title='PWNED'</script> \"double\" 'single' \x1b[31mred\x07 bell "
                    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd?")
HOSTILE_ID = "id\"<b>bold</b>'\u05e9\u05dc\u05d5\u05dd"
HOSTILE_ANSWER = "<img src=x onerror=\"document.title='PWNED2'\"> \u0645\u0631\u062d\u0628\u0627."
HOSTILE_CHUNK = "</script><script>document.title='PWNED3'</script>"
HOSTILE_CATEGORY = "<i>cat</i>\x1b\x00"
RTL_FILE = "\u05de\u05e1\u05de\u05da (\u05d1).md"


@pytest.fixture(scope="module")
def eval_folder(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    """`eval` without a judge on the bundled example, edited: hostile texts, one case whose run record gives
    "retrieved": null, one with no chunks, one missing from the run."""
    from ragmeter.evaluation import run_eval

    work = tmp_path_factory.mktemp("eval")
    golden, run = _lines(EXAMPLE / "golden.jsonl"), _lines(EXAMPLE / "run.jsonl")
    golden[0]["question"] = HOSTILE_QUESTION
    renamed = golden[1]["id"]
    golden[1]["id"] = HOSTILE_ID
    golden[1]["category"] = HOSTILE_CATEGORY
    for record in run:
        if record["id"] == renamed:
            record["id"] = HOSTILE_ID
        if record["id"] == golden[0]["id"]:
            record["answer"] = HOSTILE_ANSWER
            record["retrieved"][0]["text"] = HOSTILE_CHUNK
            record["retrieved"][0]["file"] = RTL_FILE
    ids = {"null": run[2]["id"], "empty": run[3]["id"], "missing": run[5]["id"]}
    run[2]["retrieved"] = None
    run[3]["retrieved"] = []
    run = [r for r in run if r["id"] != ids["missing"]]
    for name, rows in (("golden.jsonl", golden), ("run.jsonl", run)):
        (work / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    run_eval(work / "golden.jsonl", work / "run.jsonl", work / "out")
    return {"folder": work / "out", "ids": ids, "work": work}


@pytest.fixture(scope="module")
def demo_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragmeter.cli import main

    out = tmp_path_factory.mktemp("demo") / "demo"
    assert main(["demo", "--out", str(out)]) == 0
    return out


def _expected(cases: pl.DataFrame, category: str, diagnosis: str) -> List[str]:
    keep = cases
    if category:
        keep = keep.filter(pl.col("category") == category)
    if diagnosis:
        keep = keep.filter(pl.col("diagnosis") == diagnosis)
    return keep["id"].to_list()


# ------------------------------------------------------------------ filters, search, pages


@needs_chromium
def test_every_filter_combination_lists_the_cases_of_cases_parquet(demo_folder: Path, tmp_path: Path) -> None:
    cases = pl.read_parquet(demo_folder / "cases.parquet")
    categories = sorted(cases["category"].unique().to_list())
    diagnoses = sorted(cases["diagnosis"].unique().to_list())
    combos = [(c, d) for c in [""] + categories for d in [""] + diagnoses]
    views, console = explore(demo_folder / "report.html", [{"cat": c, "diag": d, "pages": True} for c, d in combos],
                             tmp_path)
    assert console == []
    from ragmeter.diagnosis import DIAGNOSES

    # the diagnoses in the order the Diagnosis table lists them (session 29; they were alphabetical)
    assert views[0]["cats"] == ["all"] + categories
    assert views[0]["diags"] == ["all"] + [d for d in DIAGNOSES if d in diagnoses]
    for (c, d), v in zip(combos, views[1:]):
        expected = _expected(cases, c, d)
        assert v["all"] == expected, (c, d)
        assert v["info"].endswith(f"{len(expected)} of {cases.height} cases"), (c, d, v["info"])
        assert v["detail"] == (f"Case {expected[0]}" if expected else None), (c, d)


@needs_chromium
def test_search_finds_ids_and_question_text_cjk_too(demo_folder: Path, tmp_path: Path) -> None:
    cases = pl.read_parquet(demo_folder / "cases.parquet")
    queries = ["FACT-0", "一线城市", "  Frontend Stack  ", "no such text at all", "出差"]
    views, console = explore(demo_folder / "report.html", [{"q": q, "pages": True} for q in queries], tmp_path)
    assert console == []
    for q, v in zip(queries, views[1:]):
        s = q.strip().lower()
        expected = [r["id"] for r in cases.iter_rows(named=True)
                    if s in r["id"].lower() or s in (r["question"] or "").lower() or s in (r["answer"] or "").lower()]
        assert v["all"] == expected, q
    assert views[1]["all"] and views[2]["all"] and not views[4]["all"]


@needs_chromium
def test_paging_first_last_and_past_the_end_after_filtering(tmp_path: Path) -> None:
    from ragmeter.report import write_reports

    cases = synth_cases(120, seed=3)
    report = write_reports(write_results(tmp_path / "r", cases), n_resamples=100)["html"]
    ids = cases["id"].to_list()
    steps = [{"click": "prev"}, {"click": "next"}, {"click": "next"}, {"click": "next"}, {"row": 5},
             {"cat": "noanswer"}, {"click": "next"}, {"click": "prev"}, {"cat": "", "q": ids[119]}]
    views, console = explore(report, steps, tmp_path)
    assert console == []
    info = [v["info"] for v in views]
    assert info[:5] == ["page 1 / 3 \u00b7 120 of 120 cases", "page 1 / 3 \u00b7 120 of 120 cases",
                        "page 2 / 3 \u00b7 120 of 120 cases", "page 3 / 3 \u00b7 120 of 120 cases",
                        "page 3 / 3 \u00b7 120 of 120 cases"]
    assert views[0]["rows"] == ids[:50] and views[2]["rows"] == ids[50:100] and views[4]["rows"] == ids[100:]
    assert views[5]["detail"] == f"Case {ids[105]}"
    # filtered on the last page: back to the first page of the filtered cases
    noanswer = [i for i in ids if i.startswith("noanswer")]
    assert info[6:9] == ["page 1 / 1 \u00b7 30 of 120 cases"] * 3 and views[6]["rows"] == noanswer
    assert views[9]["rows"] == [ids[119]] and views[9]["detail"] == f"Case {ids[119]}"
    # prev and next say when there is nowhere to go (session 29), and every row takes the keyboard's focus
    assert [(v["prevDisabled"], v["nextDisabled"]) for v in views[:5]] == \
        [(True, False), (True, False), (False, False), (False, True), (False, True)]
    assert views[6]["prevDisabled"] and views[6]["nextDisabled"]
    assert all(v["rowsFocusable"] for v in views)


@needs_chromium
def test_the_highlighted_row_is_the_case_whose_details_are_shown(demo_folder: Path, tmp_path: Path) -> None:
    # before: the detail showed the first listed case while no row was highlighted (on load, after a filter), or
    # another row stayed highlighted (a case clicked before filtering): the table pointed at a case not shown
    ids = pl.read_parquet(demo_folder / "cases.parquet")["id"].to_list()
    steps = [{"row": 3}, {"q": ids[0][:6]}, {"q": ""}, {"click": "next"}, {"row": 0}, {"cat": "fact"}]
    views, console = explore(demo_folder / "report.html", steps, tmp_path)
    assert console == []
    for v in views:
        shown = v["detail"][len("Case "):] if v["detail"] else None
        assert v["selected"] == ([shown] if shown in v["rows"] else []), (v["step"], v["selected"], shown)
    assert views[0]["selected"] == [ids[0]] and views[1]["selected"] == [ids[3]]
    assert views[4]["selected"] == [] and views[4]["detail"] == f"Case {ids[0]}"  # page 2: the case is on page 1
    assert views[-1]["selected"] == [ids[0]]


# ------------------------------------------------------------------ a case's details


def _row_of(folder: Path, case_id: str) -> Tuple[int, int]:
    """(page step count, row on that page) of a case in the unfiltered table."""
    ids = pl.read_parquet(folder / "cases.parquet")["id"].to_list()
    return divmod(ids.index(case_id), 50)


def _open(folder: Path, case_id: str) -> List[Dict[str, Any]]:
    pages, row = _row_of(folder, case_id)
    return [{"click": "next"}] * pages + [{"row": row}] + [{"click": "prev"}] * pages


@needs_chromium
def test_a_case_without_a_chunk_list_says_why_it_has_no_chunks(eval_folder: Dict[str, Any], tmp_path: Path) -> None:
    # before: a case whose run record gives "retrieved": null (RETRIEVAL_UNKNOWN) and one missing from the run
    # (NOT_IN_RUN) both said 'no chunks retrieved', as a case whose retrieval came back empty: chunks nobody saw
    # were shown as a retrieval that found nothing
    folder, ids = eval_folder["folder"], eval_folder["ids"]
    steps = []
    for name in ("null", "empty", "missing"):
        steps += _open(folder, ids[name])
    views, console = explore(folder / "report.html", steps, tmp_path)
    assert console == []
    shown = {v["detail"]: v for v in views if v["step"] != "load" and "row" in v["step"]}
    null, empty, missing = (shown[f"Case {ids[k]}"] for k in ("null", "empty", "missing"))
    assert "RETRIEVAL_UNKNOWN" in null["detailText"] and "NOT_IN_RUN" in missing["detailText"]
    assert empty["detailText"].endswith("no chunks retrieved")
    assert null["detailText"].endswith('no chunk list in the run ("retrieved": null): what was retrieved is unknown')
    assert missing["detailText"].endswith("not in the run: nothing was retrieved or answered for this case")
    assert not null["chunks"] and not empty["chunks"] and not missing["chunks"]


#: characters the rest of the report writes as \x1b escapes (C0 but tab and newline, DEL, C1)
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@needs_chromium
def test_user_text_in_the_explorer_is_text_never_markup_and_shows_its_control_characters(
        eval_folder: Dict[str, Any], tmp_path: Path) -> None:
    # before: markup, quotes and right-to-left words were shown as text, but control characters (ESC, BEL, NUL)
    # went into the page raw, invisible, while the tables above show the same category as <i>cat</i>\x1b\x00
    folder = eval_folder["folder"]
    steps = [{"q": "bold</b>"}, {"q": "", "cat": HOSTILE_CATEGORY}, {"cat": ""}]
    views, console = explore(folder / "report.html", steps, tmp_path)
    assert console == []
    for v in views:
        assert "PWNED" not in v["title"] and v["markup"] == 0
        assert not RAW_CONTROL.search(v["detailText"] + "".join(v["cats"]) + "".join(v["rows"])), v["step"]
    first = views[0]
    assert first["detail"] == "Case fact-01-frontend-stack"
    question = HOSTILE_QUESTION.replace("\x1b", "\\x1b").replace("\x07", "\\x07")
    assert question in first["detailText"] and HOSTILE_ANSWER in first["detailText"]
    assert first["chunks"][0]["text"] == HOSTILE_CHUNK
    shown_category = "<i>cat</i>\\x1b\\x00"
    assert shown_category in first["cats"]
    assert views[1]["rows"] == [HOSTILE_ID] and views[1]["detail"] == "Case " + HOSTILE_ID
    assert views[2]["rows"] == [HOSTILE_ID] and views[2]["info"].startswith("page 1 / 1 \u00b7 1 of ")
    assert shown_category in views[2]["detailText"]
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert "&lt;i&gt;cat&lt;/i&gt;\\x1b\\x00" in page  # as the rest of the report shows it


@needs_chromium
def test_a_failed_judge_call_and_an_unjudged_case_render_without_a_script_error(tmp_path: Path) -> None:
    from ragmeter.report import write_reports

    cases = synth_cases(40, seed=2)
    ids = cases["id"].to_list()
    failed, unjudged = ids[2], ids[3]
    cases = cases.with_columns(
        pl.when(pl.col("id") == failed).then(pl.lit("failed")).otherwise(pl.col("correctness_status")).alias("correctness_status"),
        pl.when(pl.col("id") == failed).then(None).otherwise(pl.col("correctness_score")).alias("correctness_score"),
        pl.when(pl.col("id") == failed).then(None).otherwise(pl.col("correct")).alias("correct"))
    folder = write_results(tmp_path / "r", cases)
    judge = judge_frame(cases).filter(pl.col("id") != unjudged)  # a failed call has an error, no reason
    judge.with_columns(pl.when(pl.col("status") == "failed").then(None).otherwise(pl.col("reason")).alias("reason")) \
        .write_parquet(folder / "judge.parquet")
    report = write_reports(folder, n_resamples=100)["html"]
    assert console_of(report, tmp_path) == []
    views, console = explore(report, [{"row": 2}, {"row": 3}], tmp_path)
    assert console == []
    failed_view, unjudged_view = views[1], views[2]
    assert failed_view["detail"] == f"Case {failed}" and "correctnessfailed" in failed_view["detailText"]
    assert "HTTP 500" in failed_view["detailText"] and "JUDGE_FAILED" in failed_view["detailText"]
    assert unjudged_view["detail"] == f"Case {unjudged}" and unjudged_view["chunks"]
    assert [c["relevant"] for c in failed_view["chunks"]].count(True) <= 1


@needs_chromium
def test_a_folder_scored_without_a_judge_shows_each_case_s_chunks_from_chunks_parquet(
        eval_folder: Dict[str, Any], tmp_path: Path) -> None:
    # `score --out` then `report`: cases.parquet has no `retrieved` column, the chunks are in chunks.parquet.
    # before: every case of the explorer said 'no chunks retrieved' (8 were, the relevant one among them)
    from ragmeter.cli import main

    work = eval_folder["work"]
    out = tmp_path / "scored"
    assert main(["score", "--golden", str(work / "golden.jsonl"), "--run", str(work / "run.jsonl"), "--out", str(out)]) == 0
    assert main(["report", str(out)]) == 0
    assert console_of(out / "report.html", tmp_path) == []
    cases = pl.read_parquet(out / "cases.parquet")
    chunks = pl.read_parquet(out / "chunks.parquet").filter(pl.col("id") == HOSTILE_ID).sort("rank")
    views, console = explore(out / "report.html", [{"row": 1}, {"row": 2}, {"cat": "noanswer", "pages": True}],
                             tmp_path)
    assert console == []
    shown = views[1]
    assert shown["detail"] == "Case " + HOSTILE_ID
    assert [c["text"] for c in shown["chunks"]] == [t[:1500] for t in chunks["text"].to_list()][:10]
    assert [c["relevant"] for c in shown["chunks"]] == chunks["relevant"].to_list()[:10] and any(chunks["relevant"])
    assert shown["chunks"][0]["head"].startswith("\u2713 relevant #1 \u00b7 " + chunks["file"][0])
    assert views[2]["detailText"].endswith('("retrieved": null): what was retrieved is unknown')
    assert views[3]["all"] == _expected(cases, "noanswer", "") and views[3]["chunks"]


@needs_chromium
def test_a_category_named_like_all_or_like_an_object_key_is_its_own_filter(tmp_path: Path) -> None:
    # before: a category '' was the 'all' option's value (choosing it listed every case), and a category
    # '__proto__' was missing from the filter (the distinct values were collected as keys of a plain object)
    from ragmeter.report import write_reports

    names = ["", "__proto__", "constructor", "fact"]
    cases = synth_cases(12, seed=1).with_columns(pl.Series("category", [names[i % 4] for i in range(12)]))
    report = write_reports(write_results(tmp_path / "r", cases), n_resamples=100)["html"]
    steps = [{"catValue": name, "pages": True} for name in names] + [{"cat": "", "pages": True}]
    views, console = explore(report, steps, tmp_path)
    assert console == []
    assert views[0]["cats"] == ["all"] + sorted(names)
    for name, v in zip(names, views[1:]):
        assert v["all"] == cases.filter(pl.col("category") == name)["id"].to_list(), repr(name)
        assert len(v["all"]) == 3
    assert len(views[-1]["all"]) == 12


@needs_chromium
def test_a_case_nobody_judged_says_so_instead_of_an_empty_verdict_table(eval_folder: Dict[str, Any],
                                                                         tmp_path: Path) -> None:
    # before: eval without a judge showed each case's 'Judge verdicts' as a table of headers without a row
    folder = eval_folder["folder"]
    assert console_of(folder / "report.html", tmp_path) == []
    views, console = explore(folder / "report.html", [{"row": 4}], tmp_path)
    assert console == []
    for v in views:
        assert "Judge verdictsnot judgedRetrieved chunks" in v["detailText"], v["detailText"]
        assert "reason / error" not in v["detailText"]


@needs_chromium
def test_user_texts_in_a_case_s_details_take_their_own_direction(eval_folder: Dict[str, Any], tmp_path: Path) -> None:
    # before: the question, answer and chunk texts said dir="auto", but the case's id (its heading), its
    # category and its chunks' file names were laid out left to right: a Hebrew id or file name ending in
    # punctuation showed it at the wrong end
    folder = eval_folder["folder"]
    views, console = explore(folder / "report.html", [{"row": 1}], tmp_path)
    assert console == []
    first, hostile = views
    assert RTL_FILE in first["ownDirection"] and first["chunks"][0]["head"].startswith("\u2717 not relevant #1 \u00b7 " + RTL_FILE)
    assert HOSTILE_ID in hostile["ownDirection"] and hostile["detail"] == "Case " + HOSTILE_ID
    assert "<i>cat</i>\\x1b\\x00" in hostile["ownDirection"]


def test_chunks_parquet_of_other_types_or_unreadable_is_read_or_named(tmp_path: Path) -> None:
    # the explorer's chunks from chunks.parquet (a `score --out` folder): a column of another type (a score
    # written as text) is shown where it can be read, and a file that is not Parquet is an error naming it
    from test_report import case_data_of

    from ragmeter.errors import InputError
    from ragmeter.report import write_reports

    cases = synth_cases(6, seed=4)
    folder = write_results(tmp_path / "r", cases.drop("retrieved"), judge=False)
    chunks = cases.select("id", "retrieved").explode("retrieved").unnest("retrieved") \
        .with_columns(pl.int_range(1, pl.len() + 1).over("id").alias("rank"), pl.col("score").cast(pl.Utf8))
    chunks.with_columns(pl.when(pl.col("rank") == 2).then(pl.lit("n/a")).otherwise(pl.col("score")).alias("score")) \
        .write_parquet(folder / "chunks.parquet")
    data = case_data_of(write_reports(folder, n_resamples=100)["html"].read_text(encoding="utf-8"))
    assert data["chunk_text"][0] == [f"chunk {j} of case 0" for j in range(5)]
    assert data["chunk_score"][0] == [1.0, None, 0.8, 0.7, 0.6]
    (folder / "chunks.parquet").write_text("not parquet", encoding="utf-8")
    with pytest.raises(InputError, match=r"chunks\.parquet: cannot read Parquet file"):
        write_reports(folder, n_resamples=100)
