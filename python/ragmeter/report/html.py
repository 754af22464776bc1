"""The self-contained HTML report.

One file, no network: CSS and JavaScript inline, charts as inline SVG drawn in
Python. The case explorer's data is columnar JSON in gzip-compressed parts,
base64-encoded, concatenated in one ``<script type="application/octet-stream">``
block (base64 has no ``<``, so data cannot close the block; the HTML parser
only scans it, and the script takes it out of the DOM once read). Part 0 is
the index (the table's columns for every case, decompressed when the page has
been drawn); each further part holds the details of :data:`BLOCK_CASES` cases
and is decompressed only when one of its cases is shown (or, for the search,
once). The browser's own ``DecompressionStream`` does the decompression (no
library); the data is rendered only through ``textContent`` (never
``innerHTML``), a page at a time. Texts are cut for the explorer so that the
file stays under :data:`MAX_EXPLORER_BYTES` at any size (the full texts are in
the Parquet files). Everything else taken from the inputs is HTML-escaped in
Python. Only the compressed data grows with the number of cases.
"""
from __future__ import annotations

import base64
import datetime as _dt
import gzip
import json
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import polars as pl

from ragmeter._text import ellipsis_cut
from ragmeter.report.data import (
    METRICS,
    BAND_CASES,
    NO_ANSWERS,
    QUADRANT_CASES,
    Results,
    correct_rate_note,
    pass_rate_notes,
    cost_latency,
    fmt_value,
    judge_failures,
    judge_row_totals,
    metric_frame,
    metric_label,
    more_categories_line,
    not_judged_metrics,
    not_measured_rows,
    placed_line,
    resolution_text,
    retrieval_modes,
    settings_texts,
)
from ragmeter.report.svg import PALETTE, bar_chart, esc, hbar_chart, histogram, line_chart

__all__ = ["render_html", "case_json", "case_frame", "case_data", "json_for_script", "ExplorerData", "ExplorerLimits",
           "explorer_limits"]

#: chunks per case and characters per chunk text embedded in the case explorer
MAX_CHUNKS = 10
#: from this many cases on, fewer chunks per case (at least MIN_CHUNKS)
FULL_CHUNKS_UP_TO = 10_000
MIN_CHUNKS = 3
MAX_CHUNK_CHARS = 1500
MIN_CHUNK_CHARS = 60
#: total characters of chunk text embedded (before cutting each chunk)
CHUNK_TEXT_BUDGET = 12_000_000
#: characters of a question, answer, reference or judge reason: at most, and the budget over all cases
MAX_TEXT_CHARS = 4000
MIN_TEXT_CHARS = 80
TEXT_BUDGET = 40_000_000
#: the compressed explorer data is kept under this size (limits halved until it fits): the browser's HTML
#: parser still scans it, at roughly 50 ms per MB on a busy 2-core machine (benches/RESULTS_report.md)
MAX_EXPLORER_BYTES = 10_000_000
#: cases per detail part of the explorer's data: showing a case decompresses its part only
BLOCK_CASES = 2_000
#: cases compressed to estimate the size of the explorer's data (see case_data)
SAMPLE_CASES = 2_000
#: the explorer's index: what its table, filters and page count need for every case
INDEX_COLUMNS = ("id", "category", "diagnosis", "hit", "answer_correct", "faithfulness_score", "context_precision_score")

DIAGNOSIS_COLORS = {
    "OK": "#4f9d69",
    "RETRIEVAL_MISS": "#b8474a",
    "MISS_BUT_CORRECT": "#e07b39",
    "PROMPT_OR_MODEL": "#c55f9e",
    "GENERATION_FAILED": "#7a5ea8",
    "JUDGE_FAILED": "#9a7b4f",
    "SYSTEM_FAILED": "#5a3e3e",
    "NOT_IN_RUN": "#2f6f8f",
    "RETRIEVAL_UNKNOWN": "#5f7f99",
    "NOT_LABELED": "#6d6d6d",
    "NOT_JUDGED": "#a0a0a0",
}


def json_for_script(text: str) -> str:
    """Make JSON text safe inside ``<script type="application/json">``."""
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _struct_fields(df: pl.DataFrame, column: str) -> List[str]:
    dtype = df.schema[column]
    inner = getattr(dtype, "inner", None)
    return [f.name for f in getattr(inner, "fields", [])]


@dataclass(frozen=True)
class ExplorerLimits:
    """What the case explorer embeds per case: chunks, characters per chunk text and per other text."""

    chunks: int
    chunk_chars: int
    text_chars: int

    def halved(self) -> "ExplorerLimits":
        return ExplorerLimits(max(1, self.chunks // 2), max(20, self.chunk_chars // 2), max(20, self.text_chars // 2))


def explorer_limits(n_cases: int) -> ExplorerLimits:
    """The explorer's cuts for ``n_cases`` cases: budgets shared out over the cases (see the constants)."""
    n = max(1, n_cases)
    chunks = MAX_CHUNKS if n <= FULL_CHUNKS_UP_TO else max(MIN_CHUNKS, MAX_CHUNKS * FULL_CHUNKS_UP_TO // n)
    chunk_chars = min(MAX_CHUNK_CHARS, max(MIN_CHUNK_CHARS, CHUNK_TEXT_BUDGET // (n * chunks)))
    text_chars = min(MAX_TEXT_CHARS, max(MIN_TEXT_CHARS, TEXT_BUDGET // (n * 8)))
    return ExplorerLimits(chunks, chunk_chars, text_chars)


def chunk_char_limit(n_cases: int) -> int:
    """Characters kept per chunk text for ``n_cases`` cases (before any halving to fit the size bound)."""
    return explorer_limits(n_cases).chunk_chars


@dataclass(frozen=True)
class ExplorerData:
    """The explorer's data as embedded: base64 parts concatenated, and how to cut them apart.

    ``parts`` are the lengths in ``packed`` of the index part, then of each detail part (cases
    ``k * block_cases`` to ``(k + 1) * block_cases - 1``); each part is written by :func:`_pack`.
    """

    packed: str
    parts: Tuple[int, ...]
    block_cases: int
    limits: ExplorerLimits

    def embedded(self) -> str:
        """The block's text: the part lengths (``"12 34 56;"``, inside the data so that nothing else in the
        page grows with the number of cases; neither space nor ``;`` is base64), then the parts."""
        return " ".join(map(str, self.parts)) + ";" + self.packed


#: index columns written as codes into their distinct values (a few names repeated over every case)
CODED_COLUMNS = ("category", "diagnosis")


def _pack(frame: pl.DataFrame) -> str:
    """``[{column: [value per case]}, {coded column: [its values]}]``, gzip-compressed, base64.

    A column of :data:`CODED_COLUMNS` holds, per case, the position of its value in the second object.
    """
    coded = [c for c in CODED_COLUMNS if c in frame.columns]
    frame = frame.with_columns([pl.col(c).cast(pl.Utf8) for c in coded])
    values = {c: sorted(frame.get_column(c).drop_nulls().unique().to_list()) for c in coded}
    frame = frame.with_columns([pl.col(c).replace_strict(v, list(range(len(v))), return_dtype=pl.Int32) for c, v in values.items()])
    text = frame.select(pl.all().implode()).write_json()[:-1] if frame.width else "[{}"
    text += "," + json.dumps(values, ensure_ascii=False) + "]"
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0)).decode("ascii")


def _packed_parts(results: Results, limits: ExplorerLimits, cases: Optional[pl.DataFrame] = None) -> List[str]:
    frame = case_frame(results, limits, cases)
    index = [c for c in INDEX_COLUMNS if c in frame.columns]
    detail = frame.select([c for c in frame.columns if c not in index])
    pieces = [frame.select(index)] + [detail.slice(start, BLOCK_CASES) for start in range(0, frame.height, BLOCK_CASES)]
    with ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:  # zlib lets go of the GIL
        return list(pool.map(_pack, pieces))


#: a chunk's fields the explorer shows, as in cases.parquet's ``retrieved`` and in chunks.parquet
CHUNK_FIELDS = ("file", "chunk_id", "text", "score", "relevant")


def cases_with_chunks(results: Results) -> pl.DataFrame:
    """The cases, each with its chunks as a ``retrieved`` list: a folder of ``score --out`` keeps them in
    chunks.parquet only (one row per case and rank), and its explorer would show no chunk for any case.

    Only what the explorer can show is read (its first chunks per case, their texts cut); a column of another
    type is read where it can be (a value that cannot, as null)."""
    from ragmeter.errors import InputError
    from ragmeter.report.data import _listed, not_parquet_diagnosis, rewrite_advice

    cases = results.cases
    path = results.path / "chunks.parquet"
    if "retrieved" in cases.columns or not _listed(results.path, "chunks.parquet", results.summary):
        return cases
    not_parquet = not_parquet_diagnosis(path, results.summary)
    if not_parquet:
        raise InputError(not_parquet)
    limits = explorer_limits(cases.height)
    types = {"file": pl.Utf8, "chunk_id": pl.Utf8, "text": pl.Utf8, "score": pl.Float64, "relevant": pl.Boolean}
    try:
        schema = pl.read_parquet_schema(path)
        fields = [f for f in CHUNK_FIELDS if f in schema]
        if "id" not in schema or not fields:
            return cases
        ranked = "rank" in schema and schema["rank"].is_numeric()
        frame = pl.scan_parquet(path).select("id", *fields, *(["rank"] if ranked else []))
        if ranked:
            frame = frame.filter(pl.col("rank") <= limits.chunks).sort("rank", maintain_order=True)
        chunks = frame.with_columns(pl.col("id").cast(pl.Utf8, strict=False).alias("_case"),
                                    *(pl.col(f).cast(types[f], strict=False) for f in fields)) \
            .with_columns(*([pl.col("text").str.slice(0, limits.chunk_chars)] if "text" in fields else [])).collect()
    except Exception as exc:  # polars raises several error types for corrupt files
        raise InputError(f"{path}: cannot read Parquet file ({exc}); "
                         f"{rewrite_advice(results.summary, restore=True)}") from None
    lists = chunks.group_by("_case", maintain_order=True).agg(pl.struct(fields).head(limits.chunks).alias("retrieved"))
    return cases.with_columns(pl.col("id").cast(pl.Utf8).alias("_case")) \
        .join(lists, on="_case", how="left", maintain_order="left").drop("_case")


def case_data(results: Results) -> ExplorerData:
    """The explorer's data: the index part (:data:`INDEX_COLUMNS` of every case), then the other columns in
    parts of :data:`BLOCK_CASES` cases, each gzip-compressed and base64-encoded.

    The cuts of :func:`explorer_limits` are halved until the data fits
    :data:`MAX_EXPLORER_BYTES` (text that compresses badly, such as long
    CJK answers at 100,000 cases): first on the estimate from the first
    :data:`SAMPLE_CASES` cases (compressing every case once per halving is
    slow at scale), then on the data itself.
    """
    cases = cases_with_chunks(results)
    n = cases.height
    limits = explorer_limits(n)
    if n > 2 * SAMPLE_CASES:
        sample = cases.head(SAMPLE_CASES)
        while limits != limits.halved() and \
                sum(map(len, _packed_parts(results, limits, sample))) * n / SAMPLE_CASES > MAX_EXPLORER_BYTES:
            limits = limits.halved()
    while True:
        parts = _packed_parts(results, limits, cases)
        if sum(map(len, parts)) <= MAX_EXPLORER_BYTES or limits == limits.halved():
            return ExplorerData("".join(parts), tuple(map(len, parts)), BLOCK_CASES, limits)
        limits = limits.halved()


def _verdict_column(judge: pl.DataFrame, column: str, limits: ExplorerLimits) -> pl.Expr:
    if column in ("reason", "error"):
        return pl.col(column).cast(pl.Utf8).str.slice(0, limits.text_chars)
    if column == "score" and judge.schema[column].is_numeric():  # as the cases' scores: 4 decimals, not 17 digits
        return pl.col(column).cast(pl.Float64).fill_nan(None).round(4)
    return pl.col(column)


def case_json(results: Results, limits: Optional[ExplorerLimits] = None) -> str:
    """The case explorer's data (:func:`case_frame`) as columnar JSON: ``[{column: [value per case], ...}]``."""
    return case_frame(results, limits).select(pl.all().implode()).write_json()


def case_frame(results: Results, limits: Optional[ExplorerLimits] = None, cases: Optional[pl.DataFrame] = None) -> pl.DataFrame:
    """The case explorer's data, one row per case, in the order of the cases.

    Chunks and judge verdicts become list columns (``chunk_text``,
    ``verdict_reason``, ...), so keys are written once, not once per case.
    Texts are cut by ``limits`` (default :func:`explorer_limits`): the first
    chunks of each case, each chunk text and each other text to a number of
    characters, so that 100,000 cases still give a file a browser opens.
    ``cases``: some of the results' cases (default: all of them).
    """
    cases = results.cases if cases is None else cases
    limits = limits or explorer_limits(results.cases.height)
    keep = [
        "id", "category", "diagnosis", "question", "answer", "reference_answer", "answer_correct", "refusal",
        "is_noanswer", "quadrant", "faithfulness_band", "labeled", "hit", "file_hit", "first_relevant_rank",
        "reciprocal_rank", "ndcg", "retrieval_mode", "n_retrieved", "correctness_score", "faithfulness_score",
        "answer_relevancy_score", "context_precision_score", "context_recall_score",
        "correctness_status", "faithfulness_status", "answer_relevancy_status", "context_precision_status",
        "context_recall_status", "latency_ms", "retrieved_null", "missing_from_run",
    ]
    exprs: List[pl.Expr] = []
    for c in keep:
        if c not in cases.columns:
            continue
        e = pl.col(c)
        if c == "id":
            e = e.cast(pl.Utf8)
        elif cases.schema[c] == pl.Utf8 and c not in ("category", "diagnosis"):
            e = e.str.slice(0, limits.text_chars)
        elif c == "latency_ms" and cases.schema[c].is_numeric():
            e = e.cast(pl.Float64).fill_nan(None).round(0).cast(pl.Int64)
        elif cases.schema[c] in (pl.Float32, pl.Float64):
            e = e.fill_nan(None).round(4)
        exprs.append(e)
    if "retrieved" in cases.columns and isinstance(cases.schema["retrieved"], pl.List):
        fields = _struct_fields(cases, "retrieved")
        per_chunk = limits.chunk_chars
        for f in ("file", "chunk_id", "text", "score", "relevant"):
            if f in fields:
                el = pl.element().struct.field(f)
                if f == "text":
                    el = el.cast(pl.Utf8).str.slice(0, per_chunk)
                elif f in ("file", "chunk_id"):
                    el = el.cast(pl.Utf8)
                elif f == "score":
                    el = el.cast(pl.Float64).round(4)
                exprs.append(pl.col("retrieved").list.head(limits.chunks).list.eval(el).alias(f"chunk_{f}"))
    df = cases.select(exprs)
    if results.judge is not None and results.judge.height:
        j = results.judge
        if "repeat" in j.columns:  # repeat runs: the case shows repeat 1's verdicts, as its diagnosis does
            j = j.filter(pl.col("repeat") == 1)
        cols = [c for c in ("metric", "status", "score", "correct", "reason", "error") if c in j.columns]
        fix = [_verdict_column(j, c, limits).alias(f"verdict_{c}") for c in cols]
        verdicts = (
            j.select([pl.col("id").cast(pl.Utf8), *fix])
            .group_by("id", maintain_order=True)
            .agg([pl.col(f"verdict_{c}") for c in cols])
        )
        df = df.join(verdicts, on="id", how="left", maintain_order="left")
    return df


CSS = """
*{box-sizing:border-box}body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#22364d;color:#fff;padding:14px 24px;overflow-wrap:anywhere}header h1{margin:0;font-size:20px}header .meta{opacity:.85;font-size:12px}
main{padding:12px 24px;max-width:1400px}section{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:12px 16px;margin:12px 0;min-width:0;overflow-x:auto}
.tw,.cw{max-width:100%;overflow-x:auto;min-width:0}.charts>div{min-width:0;max-width:100%}svg.chart{display:block;flex:none}
.warn summary{cursor:pointer;font-weight:600}.warn li{overflow-wrap:anywhere}.warn.fail{background:#fde8e8;border-color:#e09a9a}
@media (max-width:640px){header{padding:10px 12px}main{padding:6px 8px}section{padding:10px 10px}#explorer input{max-width:100%}}
h2{font-size:16px;margin:4px 0 10px}table{border-collapse:collapse;font-size:13px}th,td{border-bottom:1px solid #eee;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f5f8}td.num{text-align:right;font-variant-numeric:tabular-nums}.warn{background:#fff4e0;border-color:#f0c070}
.charts{display:flex;flex-wrap:wrap;gap:14px}.chart .ct{font-weight:600;font-size:12px}.chart .ax{font-size:11px;fill:#444}.chart .sm{font-size:10px;fill:#777}
.chart .grid{stroke:#e6e6e6}.chart .wh{stroke:#222;stroke-width:1.3;fill:none}.muted{color:#777}
#explorer .controls{display:flex;gap:8px;flex-wrap:wrap;align-items:center;margin-bottom:8px}
#explorer select,#explorer input{padding:3px 6px}#case-table{width:100%}#case-table tbody tr{cursor:pointer}#case-table tbody tr:hover{background:#f0f5ff}
#case-table tr.sel{background:#e3edff}.diag{padding:1px 6px;border-radius:3px;color:#fff;font-size:11px;white-space:nowrap}
#detail{margin-top:10px;border-top:2px solid #22364d;padding-top:8px}#detail .field{margin:4px 0}#detail .label{font-weight:600;margin-right:6px}
.pre{white-space:pre-wrap;word-break:break-word;background:#f7f7f7;border:1px solid #eee;padding:6px;border-radius:4px;margin:2px 0}
.chunk{border:1px solid #ddd;border-left:5px solid #bbb;margin:6px 0;padding:4px 8px;border-radius:4px}.chunk.rel{border-left-color:#4f9d69}
.chunk .head{font-size:12px;color:#555}.mark-rel{color:#2e7d4f;font-weight:700}.mark-no{color:#999}
"""

JS = r"""
(function(){
  // The case data: base64 parts of gzip-compressed JSON (see ragmeter.report.html), decompressed by the browser itself.
  var node = document.getElementById('case-data'), info = document.getElementById('pageinfo');
  if (typeof DecompressionStream === 'undefined') {
    info.textContent = 'This browser cannot decompress the case data (DecompressionStream): open the report in a current browser, or read cases.parquet.';
    return;
  }
  // Kept in a string, out of the DOM: whatever serialises the page (--dump-dom, devtools) would copy megabytes.
  var packed = node.textContent, head = packed.indexOf(';'), B = Number(node.getAttribute('data-block'));
  var sizes = packed.substring(0, head).split(' ').map(Number);
  node.textContent = '';
  var starts = [head + 1]; for (var k = 0; k < sizes.length; k++) starts.push(starts[k] + sizes[k]);
  function part(k){
    var text = packed.substring(starts[k], starts[k + 1]), bytes;
    if (Uint8Array.fromBase64) bytes = Uint8Array.fromBase64(text);
    else { var bin = atob(text); bytes = new Uint8Array(bin.length); for (var b = 0; b < bin.length; b++) bytes[b] = bin.charCodeAt(b); }
    return new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'))).text().then(function(t){
      var d = JSON.parse(t), cols = d[0] || {}, coded = d[1] || {};  // coded columns: positions in their values
      Object.keys(coded).forEach(function(k){ var v = coded[k]; cols[k] = cols[k].map(function(c){ return c === null ? null : v[c]; }); });
      return cols; });
  }
  info.textContent = 'reading the case data\u2026';
  // after the summary above has been drawn: the explorer never delays it
  setTimeout(function(){ part(0).then(function(index){ explorer(index, part, B, sizes.length - 1); }); }, 0);
})();
function explorer(IDX, part, B, nBlocks){
  var COLORS = JSON.parse(document.getElementById('diag-colors').textContent);
  var N = IDX.id.length, PAGE = 50, page = 0, filtered = [], selected = -1, generation = 0, blocks = {}, search = null;
  var info = document.getElementById('pageinfo');
  function block(b){ if (!blocks[b]) blocks[b] = part(b + 1); return blocks[b]; }
  // a case's columns: the index's, then those of its detail part
  function caseOf(i){ return block(Math.floor(i / B)).then(function(D){ var r = i % B;
    return { has: function(k){ return (k in IDX) || (k in D); }, get: function(k){ return (k in IDX) ? IDX[k][i] : ((k in D) ? D[k][r] : undefined); } }; }); }
  // the searched texts of every case, read part by part once (without keeping the parts)
  function searchTexts(){
    if (search) return search;
    var out = new Array(N);
    search = (function next(b){
      if (b >= nBlocks) return Promise.resolve(out);
      return part(b + 1).then(function(D){ var q = D.question || [], a = D.answer || [];
        for (var r = 0; r < B && b * B + r < N; r++) out[b * B + r] = ((q[r] || '') + ' ' + (a[r] || '')).toLowerCase();
        return next(b + 1); });
    })(0);
    return search;
  }
  // user texts (class pre, bidi) take their own direction: a Hebrew or Arabic answer reads right to left
  function el(tag, cls, text){var e=document.createElement(tag); if(cls) e.className=cls; if(cls==='pre'||cls==='bidi') e.dir='auto'; if(text!==undefined && text!==null) e.textContent=printable(String(text)); return e;}
  // control characters (ESC, BEL, NUL, DEL, C1; not tab and newline) as \x1b escapes, as the rest of the report
  // and report.md show them (ragmeter._text.markup): raw, they are invisible or drive a terminal a text is pasted in
  function printable(s){ return s.replace(/[\x00-\x08\x0b-\x1f\x7f-\x9f]/g, function(c){ var n=c.charCodeAt(0);
    return n===13 ? '\\r' : '\\x'+(n<16?'0':'')+n.toString(16); }); }
  function fmt(v){ if(v===null||v===undefined) return '\u2014'; if(typeof v==='boolean') return v?'yes':'no'; if(typeof v==='number') return (Math.round(v*1000)/1000).toString(); return String(v);}
  function idx(k,i){ return (k in IDX) ? IDX[k][i] : undefined; }
  function options(sel, values){ values.forEach(function(v){var o=document.createElement('option'); o.value=v; o.textContent=printable(v); sel.appendChild(o);}); }
  var catSel=document.getElementById('f-cat'), diagSel=document.getElementById('f-diag'), q=document.getElementById('f-q');
  // without a prototype: a category may be named __proto__
  var cats=Object.create(null), diags=Object.create(null); for(var i=0;i<N;i++){ cats[IDX.category[i]]=1; diags[IDX.diagnosis[i]]=1; }
  // the diagnoses in the Diagnosis table's order (COLORS' keys), any other after them
  var ORDER=Object.keys(COLORS); function rank(d){ var r=ORDER.indexOf(d); return r<0 ? ORDER.length : r; }
  options(catSel, Object.keys(cats).sort());
  options(diagSel, Object.keys(diags).sort().sort(function(a,b){ return rank(a)-rank(b); }));
  // the chosen value, null for 'all' (the first option): a category may be '', the 'all' option's value
  function chosen(sel){ return sel.selectedIndex > 0 ? sel.value : null; }
  function apply(){
    var c=chosen(catSel), d=chosen(diagSel), s=q.value.trim().toLowerCase(), mine=++generation;
    if (s) info.textContent = 'searching ' + N + ' cases\u2026';
    (s ? searchTexts() : Promise.resolve(null)).then(function(texts){
      if (mine !== generation) return;  // a later filter replaced this one
      filtered=[];
      for(var i=0;i<N;i++){
        if(c!==null && IDX.category[i]!==c) continue; if(d!==null && IDX.diagnosis[i]!==d) continue;
        if(s && (String(IDX.id[i]).toLowerCase()+' '+(texts[i]||'')).indexOf(s)<0) continue;
        filtered.push(i); }
      // the first case is selected before the rows are drawn: its row is the one highlighted
      page=0; if(filtered.length) show(filtered[0]); else clearDetail(); render();
    });
  }
  function render(){
    var body=document.getElementById('case-rows'); body.textContent='';
    var pages=Math.max(1, Math.ceil(filtered.length/PAGE)); if(page>=pages) page=pages-1;
    filtered.slice(page*PAGE, page*PAGE+PAGE).forEach(function(i){
      var tr=el('tr'); if(selected===i) tr.className='sel';
      tr.appendChild(el('td','bidi',IDX.id[i])); tr.appendChild(el('td','bidi',IDX.category[i]));
      var td=el('td'); var b=el('span','diag',IDX.diagnosis[i]); b.style.background=COLORS[IDX.diagnosis[i]]||'#888'; td.appendChild(b); tr.appendChild(td);
      tr.appendChild(el('td',null,fmt(idx('hit',i)))); tr.appendChild(el('td',null,fmt(idx('answer_correct',i))));
      tr.appendChild(el('td',null,fmt(idx('faithfulness_score',i)))); tr.appendChild(el('td',null,fmt(idx('context_precision_score',i))));
      tr.addEventListener('click', function(){ show(i); render(); });
      // the keyboard opens a row too (Tab to it, Enter or Space)
      tr.tabIndex=0; tr.addEventListener('keydown', function(e){ if(e.key==='Enter'||e.key===' '){ e.preventDefault(); show(i); render(); } });
      body.appendChild(tr); });
    info.textContent = 'page '+(page+1)+' / '+pages+' \u00b7 '+filtered.length+' of '+N+' cases';
    document.getElementById('prev').disabled = page===0; document.getElementById('next').disabled = page>=pages-1;
  }
  function clearDetail(){ document.getElementById('detail').textContent=''; selected=-1; }
  function field(parent, label, value, pre){ var d=el('div','field'); d.appendChild(el('span','label',label)); if(pre){ d.appendChild(el('div','pre',fmt(value))); } else { d.appendChild(el('span','bidi',fmt(value))); } parent.appendChild(d); }
  // a line of labels and user texts (an id, a file name), each user text in its own direction
  function line(tag, cls, items){ var e=el(tag, cls); items.forEach(function(x, k){ e.appendChild(k % 2 ? el('span','bidi',x) : document.createTextNode(x)); }); return e; }
  function show(i){
    selected=i;
    caseOf(i).then(function(C){ if(selected===i) detail(i, C); });
  }
  function detail(i, C){
    var val=C.get, det=document.getElementById('detail'); det.textContent='';
    det.appendChild(line('h3',null,['Case ', val('id')]));
    field(det,'Category',val('category')); field(det,'Diagnosis',val('diagnosis'));
    if(C.has('question')) field(det,'Question',val('question'),true);
    field(det,'Answer',val('answer'),true);
    if(C.has('reference_answer')) field(det,'Reference answer',val('reference_answer'),true);
    field(det,'Correct',val('answer_correct')); field(det,'Refusal',val('refusal')); field(det,'Quadrant',val('quadrant'));
    field(det,'Retrieval', 'hit '+fmt(val('hit'))+' \u00b7 first relevant rank '+fmt(val('first_relevant_rank'))+' \u00b7 mode '+fmt(val('retrieval_mode')));
    var tbl=el('table'); var hr=el('tr'); ['metric','status','score','correct','reason / error'].forEach(function(h){hr.appendChild(el('th',null,h));}); tbl.appendChild(hr);
    var verdicts=[], vm=val('verdict_metric');
    if(vm){ for(var k=0;k<vm.length;k++){ var g=function(f){ var a=val('verdict_'+f); return a?a[k]:null; }; verdicts.push({metric:vm[k],status:g('status'),score:g('score'),correct:g('correct'),reason:g('reason'),error:g('error')}); } }
    else { ['correctness','faithfulness','answer_relevancy','context_precision','context_recall'].forEach(function(m){ if(C.has(m+'_score')) verdicts.push({metric:m,status:val(m+'_status'),score:val(m+'_score')}); }); }
    verdicts.forEach(function(v){ var tr=el('tr'); tr.appendChild(el('td',null,v.metric)); tr.appendChild(el('td',null,fmt(v.status))); tr.appendChild(el('td',null,fmt(v.score))); tr.appendChild(el('td',null,fmt(v.correct))); var r=el('td'); r.appendChild(el('div','pre',fmt(v.reason||v.error))); tr.appendChild(r); tbl.appendChild(tr); });
    det.appendChild(el('h4',null,'Judge verdicts')); det.appendChild(verdicts.length ? tbl : el('div','muted','not judged'));
    det.appendChild(el('h4',null,'Retrieved chunks'));
    var texts=val('chunk_text')||[], rels=val('chunk_relevant'), files=val('chunk_file'), ids=val('chunk_chunk_id'), scores=val('chunk_score');
    // a case whose relevance was not decided (labeled false, or hit null) marks none of its chunks, whatever they
    // hold: builds before 2026-12-07 wrote relevant false there (docs/results.md "chunks.parquet"), now null
    var undecided=val('labeled')===false||(C.has('hit')&&val('hit')===null);
    for(var k=0;k<texts.length;k++){
      var rel=(rels&&!undecided)?rels[k]:null;
      var box=el('div','chunk'+(rel?' rel':'')); var head=el('div','head');
      // null: not decided (chunks.parquet), in an unlabelled case or a labelled one whose hit is null
      head.appendChild(el('span', rel?'mark-rel':'mark-no', rel?'\u2713 relevant ':(rel===false?'\u2717 not relevant ':(val('labeled')===true?'? not decided ':'? unlabelled '))));
      head.appendChild(line('span',null,['#'+(k+1)+' \u00b7 ', fmt(files?files[k]:null), ' \u00b7 ', fmt(ids?ids[k]:null), ' \u00b7 score '+fmt(scores?scores[k]:null)]));
      box.appendChild(head); box.appendChild(el('div','pre',texts[k])); det.appendChild(box); }
    if(!texts.length) det.appendChild(el('div','muted',noChunks(C)));
  }
  // a case without chunks: an empty retrieval, or one nobody saw (no chunk list in the run, or not in the run)
  function noChunks(C){
    var d=C.get('diagnosis');
    if(C.get('missing_from_run') || (!C.has('missing_from_run') && d==='NOT_IN_RUN')) return 'not in the run: nothing was retrieved or answered for this case';
    if(C.get('retrieved_null') || (!C.has('retrieved_null') && d==='RETRIEVAL_UNKNOWN')) return 'no chunk list in the run ("retrieved": null): what was retrieved is unknown';
    return 'no chunks retrieved';
  }
  catSel.addEventListener('change',apply); diagSel.addEventListener('change',apply);
  var t=null; q.addEventListener('input',function(){ clearTimeout(t); t=setTimeout(apply,250); });
  document.getElementById('prev').addEventListener('click',function(){ if(page>0){page--; render();} });
  document.getElementById('next').addEventListener('click',function(){ if((page+1)*PAGE<filtered.length){page++; render();} });
  apply();
}
"""


def _script_hash() -> str:
    """CSP source for the report's one script: only it may run, even if markup slipped through."""
    import base64
    import hashlib

    return "sha256-" + base64.b64encode(hashlib.sha256(JS.encode("utf-8")).digest()).decode("ascii")


def _table(headers: List[str], rows: List[List[str]], numeric_from: int = 1) -> str:
    """A table in a scrolling box: a wide table scrolls inside its card instead of widening the page."""
    out = ['<div class="tw"><table><tr>', *(f"<th>{esc(h)}</th>" for h in headers), "</tr>"]
    for row in rows:
        out.append("<tr>")
        for i, cell in enumerate(row):
            cls = ' class="num"' if i >= numeric_from else ""
            out.append(f"<td{cls}>{esc(cell)}</td>")
        out.append("</tr>")
    out.append("</table></div>")
    return "".join(out)


def _charts(charts: List[str]) -> str:
    """Charts keep their drawn size (readable text) and scroll inside their box on a narrow screen."""
    return '<div class="charts">' + "".join(f'<div class="cw">{c}</div>' for c in charts) + "</div>"


#: characters of one warning's message shown in the report (messages of earlier versions listed every case)
MAX_WARNING_CHARS = 400


def _warnings_section(results: Results) -> str:
    """One collapsible box, one line per warning kind (the full lists are in warnings.json)."""
    from ragmeter._warnings import normalise

    items = [normalise(w) for w in (results.summary.get("warnings") or []) if w is not None] \
        if isinstance(results.summary.get("warnings"), list) else []
    items += [normalise(w) for w in results.warnings]
    if not items:
        return ""
    kinds: Dict[str, List[Dict[str, Any]]] = {}
    for w in items:
        kinds.setdefault(str(w.get("code") or "note"), []).append(w)
    lines = []
    for code, ws in kinds.items():
        text = "; ".join(str(w["message"]) for w in ws)
        text = ellipsis_cut(text, MAX_WARNING_CHARS)
        lines.append(f'<li><code>{esc(code)}</code> {esc(text)}</li>')
    counts = ", ".join(f"{esc(code)} ({sum(w.get('count') or 0 for w in ws)})" if any(w.get("count") for w in ws)
                       else esc(code) for code, ws in kinds.items())
    return (f'<section class="warn" id="warnings"><details><summary>Warnings: {len(kinds)} kind(s) \u2014 {counts}'
            f'</summary><ul>{"".join(lines)}</ul><p class="muted">Each warning names its first few cases; '
            f"warnings.json in the results folder lists them all.</p></details></section>")


def _judge_failed_section(results: Results, status: str = "failed") -> str:
    """The judge-failed box at the top: per metric, failed rows grouped by error kind with one example each
    (``status="skipped"``: the judge-skipped box, rows grouped by reason, e.g. ``budget``)."""
    failures = judge_failures(results, status)
    if not failures:
        return ""
    totals = judge_row_totals(results)
    lines = []
    for metric, kinds in failures.items():
        n_failed = sum(int(k.get("count") or 0) for k in kinds.values())
        total = totals.get(metric)
        parts = [f"{esc(kind)} \u00d7 {int(info.get('count') or 0)}"
                 + (f" (e.g. \u201c{esc(ellipsis_cut(str(info['example']), 300))}\u201d)" if info.get("example") else "")
                 for kind, info in kinds.items()]
        of = f" of {total}" if total else ""
        lines.append(f"<li><b>{esc(metric)}</b>: {n_failed}{of} rows {status} \u2014 {'; '.join(parts)}</li>")
    return (f'<section class="warn{" fail" if status == "failed" else ""}" id="judge-{status}"><h2>Judge {status}</h2>'
            f'<ul>{"".join(lines)}</ul><p class="muted">{status.capitalize()} rows are not scored: they are excluded '
            "from the means and counted in the totals (n scored / total).</p></section>")


def _agg_cells(agg: Dict[str, Any], kind: str) -> List[str]:
    lo, hi = agg.get("ci_low"), agg.get("ci_high")
    ci = f"[{fmt_value(lo, kind)}, {fmt_value(hi, kind)}]" if lo is not None else "n/a"
    return [fmt_value(agg.get("value"), kind), ci, f"{agg['n_scored']}/{agg['n_total']}"]


def _summary_meta(summary: Dict[str, Any]) -> str:
    items = [esc(text) for text in settings_texts(summary)]
    for key in ("name", "version", "ragmeter_version", "created", "started", "finished", "timestamp"):
        v = summary.get(key)
        if v is not None and not isinstance(v, (dict, list)):
            items.append(f"{esc(key)}: {esc(v)}")
    return " \u00b7 ".join(items)


def _sweep_section(sweep: Optional[pl.DataFrame]) -> str:
    if sweep is None or sweep.height == 0:
        return ""
    df = sweep
    if "category" in df.columns:
        overall = df.filter(pl.col("category").is_null() | pl.col("category").cast(pl.Utf8).is_in(["all", "overall", "ALL", "(all)"]))
        df = overall if overall.height else df.group_by("threshold").agg(pl.all().exclude("category").mean())
    df = df.filter(pl.col("threshold").is_finite()).sort("threshold")  # -inf/inf (read as null) have no x
    if df.height == 0:
        return ""
    xs = [float(x) for x in df.get_column("threshold").to_list()]
    rate_cols = [c for c in ("hit_rate", "hit", "mrr", "MRR") if c in df.columns and df.schema[c].is_numeric()]
    other_cols = [c for c in ("empty_retrievals", "empty", "mean_kept", "mean_chunks_kept") if c in df.columns and df.schema[c].is_numeric()]
    charts = []
    if rate_cols:
        charts.append(line_chart("Hit rate / MRR by threshold", xs, [(c, df.get_column(c).cast(pl.Float64).to_list()) for c in rate_cols], percent=True, xlabel="score threshold"))
    for c in other_cols:
        charts.append(line_chart(f"{c} by threshold", xs, [(c, df.get_column(c).cast(pl.Float64).to_list())], xlabel="score threshold"))
    if not charts:
        return ""
    return f'<section id="sweep"><h2>Threshold sweep</h2>{_charts(charts)}</section>'


def _percent(share: Any) -> str:
    """A share of summary.json as a percentage; a value that is not a number (an edited file) as it is."""
    if isinstance(share, (int, float)) and not isinstance(share, bool):
        return f"{100 * share:.1f}%"
    return str(share)


def _golden_set_section(summary: Dict[str, Any]) -> str:
    """A compact panel on the golden set itself: size, categories, sources, hard share, audit warnings."""
    panel = summary.get("golden_set")
    if not isinstance(panel, dict) or not panel.get("n"):
        return ""

    def shares(groups: Dict[str, Any]) -> str:
        return ", ".join(f"{esc(name)} {esc(g.get('n'))} ({esc(_percent(g.get('share')))})" if isinstance(g, dict)
                         else esc(name) for name, g in groups.items())

    hard = panel.get("hard") or {}
    lines = [f"<li>{esc(panel['n'])} cases, {esc(panel.get('n_labeled', 0))} labelled for retrieval</li>",
             f"<li>by category: {shares(panel.get('by_category') or {})}</li>"]
    sources = {k: v for k, v in (panel.get("by_source") or {}).items() if k != "(none)"}
    if sources:
        lines.append(f"<li>by {esc(panel.get('by') or 'source')}: {shares(sources)}</li>")
    if hard.get("n_total"):
        lines.append(f"<li>hard cases ({esc(', '.join(hard.get('categories') or []) or 'none')}): "
                     f"{esc(hard.get('n'))}/{esc(hard['n_total'])} = {esc(_percent(hard.get('share')))}</li>")
    warnings = panel.get("warnings") or []
    warn = "".join(f"<li><code>{esc(w.get('code'))}</code> {esc(w.get('message'))}</li>" for w in warnings[:10])
    advice = ("<p class=\"muted\">ragmeter audit --golden G gives the gap to a target size and checks every "
              "evidence phrase against the corpus.</p>")
    return ('<section id="golden-set"><h2>Golden set</h2><ul>' + "".join(lines) + "</ul>"
            + (f'<p class="warn"><b>{len(warnings)} audit warning(s)</b></p><ul>{warn}</ul>' if warnings else "")
            + advice + "</section>")


def _calibration_section(results: Results) -> str:
    """Judge vs human reviewers (``ragmeter review import``): agreement, kappa, cells, strata, PPI."""
    from ragmeter.report.data import calibration_section
    from ragmeter.review import render

    c = calibration_section(results)
    if c is None:
        return ""
    warn = "".join(f'<p class="warn"><b>Warning:</b> {esc(w)}</p>' for w in (c.get("warning"), c.get("manifest_warning")) if w)
    findings = "".join(f"<li>{esc(f)}</li>" for f in c.get("findings") or [])
    incomplete = (f'<p>Incomplete: {esc(c["n_incomplete"])} case(s) of the sheet not (fully) reviewed, left out, '
                  f'not guessed: {esc(", ".join(map(str, (c.get("incomplete") or [])[:20])))}'
                  f'{" ..." if len(c.get("incomplete") or []) > 20 else ""}</p>'
                  if c.get("n_incomplete") else "")
    return (
        '<section id="calibration"><h2>Calibration: judge vs human reviewers</h2>' + warn
        + _table(["", "value"], render.headline_rows(c))
        + "<h3>Confusion cells</h3>" + _table(["", "human correct", "human wrong"], render.cell_rows(c))
        + "<h3>Per stratum</h3>"
        + _table(["stratum", "in sheet", "reviewed", "agreement", "human correct"], render.stratum_rows(c))
        + (f"<h3>Disagreements</h3><ul>{findings}</ul>" if findings else "")
        + f"<p>{esc(render.ppi_line(c))}</p>" + incomplete
        + f'<p class="muted">Human verdicts from key points ticked on the review sheet ({esc(c.get("sheet"))}); '
        "strata A (judged incorrect), B (evidence missed, judged correct) and judge-failed are reviewed in full, "
        "C is a random sample of the rest and alone corrects the judge's rate.</p></section>"
    )


def _more_categories_html(aggregates: Dict[str, Any]) -> str:
    line = more_categories_line(aggregates)
    return f'<p class="muted">{esc(line)}</p>' if line else ""


def render_html(results: Results, aggregates: Dict[str, Any], readings: Dict[str, Any]) -> str:
    """The whole report as one HTML string."""
    cases = results.cases
    summary = results.summary
    n = cases.height
    parts: List[str] = []
    title = f"ragmeter report \u2014 {results.title}"
    parts.append(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        f"script-src '{_script_hash()}'; img-src data:\">"
        f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{esc(title)}</title><style>{CSS}</style></head><body>"
    )
    generated = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts.append(
        f"<header><h1>{esc(title)}</h1><div class=\"meta\">{n} cases \u00b7 generated {esc(generated)}"
        f"{' · ' + _summary_meta(summary) if _summary_meta(summary) else ''}</div></header><main>"
    )
    parts.append(_judge_failed_section(results))
    parts.append(_judge_failed_section(results, "skipped"))
    parts.append(_warnings_section(results))

    # overall
    rows = []
    for name in aggregates.get("metrics", []):
        m = METRICS[name]
        rows.append([metric_label(name, results)] + _agg_cells(aggregates["overall"][name], m.kind))
    rows += [[label, why, "\u2014", f"0/{n_total}"] for label, why, n_total in not_measured_rows(results)]
    parts.append(
        '<section id="overall"><h2>Overall</h2>'
        + _table(["metric", "value", "95% interval", "n scored / total"], rows)
        + f'<p class="muted">Intervals: percentile bootstrap, {esc(readings.get("n_resamples"))} resamples, seed {esc(readings.get("seed"))}. '
        f"Unscored cases (unlabelled, judge failed or skipped) are excluded from the mean and counted in the total. "
        f"Resolution: one case = {resolution_text(n)} points.</p>"
        + (f'<p class="muted" id="correct-rate-note">{esc(note)}</p>' if (note := correct_rate_note(results.cases))
           else "")
        + "".join(f'<p class="muted pass-rate-note">{esc(note)}</p>' for note in pass_rate_notes(results))
        + "</section>"
    )

    # per category
    cats = sorted(aggregates.get("by_category", {}))
    charts = []
    for name in ("hit", "file_hit", "correct", "faithfulness"):
        if name not in aggregates.get("metrics", []):
            continue
        m = METRICS[name]
        vals = [aggregates["by_category"][c][name]["value"] for c in cats]
        cis = [(aggregates["by_category"][c][name]["ci_low"], aggregates["by_category"][c][name]["ci_high"]) for c in cats]
        notes = [f"n={aggregates['by_category'][c][name]['n_scored']}/{aggregates['by_category'][c][name]['n_total']}" for c in cats]
        label = metric_label(name, results)
        charts.append(bar_chart(f"{label} by category, 95% CI", cats, [(label, vals, cis)], percent=True, notes=notes))
    cat_rows = []
    shown = [x for x in ("hit", "file_hit", "mrr", "ndcg", "correct", "faithfulness", "context_precision") if x in aggregates.get("metrics", [])]
    for c in cats:
        row = [c]
        for name in shown:
            agg = aggregates["by_category"][c][name]
            row.append(f"{fmt_value(agg['value'], METRICS[name].kind)} ({agg['n_scored']}/{agg['n_total']})")
        cat_rows.append(row)
    parts.append(
        '<section id="categories"><h2>Per category</h2>' + _more_categories_html(aggregates) + _charts(charts)
        + _table(["category"] + [metric_label(x, results) for x in shown], cat_rows)
        + "</section>"
    )

    # diagnosis
    from ragmeter.diagnosis import DIAGNOSES, DIAGNOSIS_HINTS, QUADRANTS

    diag = readings["diagnosis"]["diagnosis"]
    # OK / PROMPT_OR_MODEL need a correctness verdict: an unjudged run lists them only if some case has one
    always = ("OK", "RETRIEVAL_MISS", "PROMPT_OR_MODEL") if results.judged else ("RETRIEVAL_MISS",)
    items = [(d, diag.get(d, 0)) for d in DIAGNOSES if diag.get(d, 0) or d in always]
    parts.append(
        '<section id="diagnosis"><h2>Diagnosis</h2>'
        + _charts([hbar_chart("Cases by diagnosis", items, total=n, colors=DIAGNOSIS_COLORS)])
        + _table(["diagnosis", "cases", "what it means"], [[d, str(c), DIAGNOSIS_HINTS[d]] for d, c in items], numeric_from=1)
        + "</section>"
    )

    # readings
    quad = readings["diagnosis"]["quadrants"]
    bands = readings["diagnosis"]["faithfulness_bands"]
    ref = readings["diagnosis"]["refusal"]
    r_rows = []
    for key, label in (("overall", "all answered cases"), ("noanswer", "no-answer cases (refusing is right)"), ("answerable", "answerable cases (false refusals)")):
        r = ref[key]
        r_rows.append([label, str(r["refusals"]), str(r["answered"]), fmt_value(r["rate"], "rate")])
    modes = retrieval_modes(cases)
    cl = cost_latency(results)
    cl_rows = []
    for key, label, of, unit in (("system_cost_usd", "system cost (USD, from the run)", "system_cost_cases", "cases"),
                                 ("judge_cost_usd", "judge cost (USD)", "judge_cost_rows", "judge rows")):
        if key in cl:
            known, total = cl[of]
            cl_rows.append([label, "unknown (no price: --price IN,OUT or --prices FILE)" if cl[key] is None
                            else f"{cl[key]:.4f}" + ("" if known == total else f" ({known}/{total} {unit} report one)")])
    for key, label in (("system_latency_ms", "system latency ms"), ("judge_latency_ms", "judge latency ms")):
        if key in cl and cl[key]["p50"] is not None:
            known, total = cl[key]["n"], cl[key]["n_total"]
            unit = "cases" if key == "system_latency_ms" else "judge rows"
            cl_rows.append([label, f"p50 {cl[key]['p50']:.0f} \u00b7 p95 {cl[key]['p95']:.0f}"
                            + ("" if known == total else f" ({known}/{total} {unit} report one)")])
    if "judge_cost_share" in cl:
        cl_rows.append(["judge share of the total cost", f"{100 * cl['judge_cost_share']:.1f}%"])
    if "judge_calls" in cl:
        cl_rows.append(["judge rows by status", ", ".join(f"{k}: {v}" for k, v in sorted(cl["judge_calls"].items(), key=lambda kv: str(kv[0])))])
    if not results.judged:
        cl_rows.append(["judge cost (USD)", "not judged"])
    unjudged = set(not_judged_metrics(results))
    not_judged = '<p class="muted">not judged</p>'
    parts.append(
        '<section id="readings"><h2>Readings</h2><div class="charts"><div>'
        + "<h3>Context precision \u00d7 answer quality</h3>"
        + (not_judged if "context_precision" in unjudged else
           _table(["quadrant", "cases", "reading"], [[k, str(quad.get(k, 0)), v] for k, v in QUADRANTS.items()])
           + f'<p class="muted">{esc(placed_line(quad, n, QUADRANT_CASES))}. Precision high when context_precision '
           '&ge; 0.5; quality high when the answer is correct.</p>')
        + "</div><div><h3>Faithfulness bands</h3>"
        + (not_judged if "faithfulness" in unjudged else _table(["band", "cases"], [[k, str(v)] for k, v in bands.items()])
           + f'<p class="muted">{esc(placed_line(bands, n, BAND_CASES))}.</p>')
        + "</div><div><h3>Refusals</h3>"
        + (_table(["cases", "refusals", "answered", "rate"], r_rows) if results.refusals_measured
           else f'<p class="muted">{esc(NO_ANSWERS)}</p>')
        + "</div><div><h3>Retrieval modes</h3>"
        + (_table(["mode", "cases"], [[str(k), str(v)] for k, v in modes.items()]) if modes else '<p class="muted">no retrieval_mode column</p>')
        + "</div><div><h3>Cost and latency</h3>"
        + (_table(["", "value"], cl_rows) if cl_rows else '<p class="muted">no cost or latency columns</p>')
        + "</div></div></section>"
    )
    from ragmeter.repeats import repeat_sections, repeat_table

    for key, title, note in repeat_sections(results.summary):
        r_headers, r_table = repeat_table(results.summary[key])
        parts.append(f'<section id="{key}"><h2>{esc(title)}</h2>' + _table(r_headers, r_table)
                     + f'<p class="muted">{esc(note)}</p></section>')

    # distributions
    mf = metric_frame(cases)
    hists = []
    for name in ("ndcg", "reciprocal_rank", "correctness", "faithfulness", "answer_relevancy", "context_precision", "context_recall", "evidence_recall"):
        key = "mrr" if name == "reciprocal_rank" else name
        if key not in mf.columns:
            continue
        v = mf.get_column(key).to_numpy().astype(np.float64)
        scored = v[~np.isnan(v)]
        if key == "correctness":
            lo_, hi_ = (1.0, 5.0) if scored.size and scored.max() > 1 else (0.0, 1.0)
        else:
            lo_, hi_ = 0.0, 1.0
        hists.append(histogram(f"{METRICS[key].label} distribution", scored.tolist(), lo=lo_, hi=hi_, n_missing=int(v.size - scored.size)))
    if hists:
        parts.append('<section id="distributions"><h2>Score distributions</h2>' + _charts(hists) + "</section>")

    parts.append(_sweep_section(results.sweep))
    parts.append(_calibration_section(results))
    parts.append(_golden_set_section(results.summary))

    # explorer
    data = case_data(results)
    limits = data.limits

    parts.append(
        '<section id="explorer"><h2>Case explorer</h2><div class="controls">'
        '<label>category <select id="f-cat"><option value="">all</option></select></label>'
        '<label>diagnosis <select id="f-diag"><option value="">all</option></select></label>'
        '<label>search <input id="f-q" type="search" placeholder="id, question or answer"></label>'
        '<button id="prev" type="button">&larr; prev</button><button id="next" type="button">next &rarr;</button>'
        '<span id="pageinfo" class="muted"></span></div>'
        '<div class="tw"><table id="case-table"><thead><tr><th>id</th><th>category</th><th>diagnosis</th><th>hit</th><th>correct</th>'
        "<th>faithfulness</th><th>context precision</th></tr></thead><tbody id=\"case-rows\"></tbody></table></div>"
        f'<div id="detail"></div><p class="muted">Chunks: the first {limits.chunks} per case, texts cut at {limits.chunk_chars} characters; '
        f"questions, answers and judge reasons at {limits.text_chars} (the full texts are in cases.parquet and judge.parquet).</p></section>"
    )
    parts.append("</main>")
    parts.append(f'<script type="application/octet-stream" id="case-data" data-block="{data.block_cases}">'
                 + data.embedded() + "</script>")
    from ragmeter.diagnosis import DIAGNOSES

    # in the Diagnosis table's order: the explorer lists the diagnoses in the order of these keys
    colors = {d: DIAGNOSIS_COLORS[d] for d in DIAGNOSES if d in DIAGNOSIS_COLORS}
    parts.append('<script type="application/json" id="diag-colors">' + json_for_script(json.dumps(colors)) + "</script>")
    parts.append("<script>" + JS + "</script></body></html>")
    _ = PALETTE
    return "".join(parts)
