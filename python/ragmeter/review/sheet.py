"""The review sheet as one self-contained HTML file (no network, one inline script allowed by its hash).

One card per case: the question, the answer, the key points as checkboxes (core points starred) and the
retrieved passages, collapsed. Nothing about the automatic grading is in the page (no grade, no outcome, no
reasoning, no group the case was drawn from), so the reviewer is not anchored. "Save as CSV" writes the
filled sheet in the columns of ``review.csv``; a case left untouched stays empty (unreviewed), and "none of
these points" says explicitly that nothing is covered.
"""
from __future__ import annotations

import base64
import hashlib
import html
from typing import Any, Dict, List

from ragmeter._text import markup as _esc

__all__ = ["render_sheet", "SHEET_JS", "to_sheet_cell", "from_sheet_cell"]

#: a spreadsheet runs a cell starting with one of these as a formula (=HYPERLINK can send data away)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _would_run(text: str) -> bool:
    """Whether ``text``, once any leading apostrophes are taken off, starts as a formula would."""
    return text.lstrip("'")[:1] in FORMULA_STARTS


def to_sheet_cell(text: str) -> str:
    """``text`` as a CSV cell a spreadsheet shows as text: an apostrophe ahead of a formula start (the OWASP
    advice for CSV files opened in Excel or LibreOffice). Text that already starts with apostrophes before one
    gets one more, so that :func:`from_sheet_cell` gives back exactly ``text``."""
    return "'" + text if _would_run(text) else text


def from_sheet_cell(cell: str) -> str:
    """The text :func:`to_sheet_cell` made ``cell`` from."""
    return cell[1:] if cell[:1] == "'" and _would_run(cell[1:]) else cell

CSS = """
*{box-sizing:border-box}body{font:15px/1.5 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;background:#f6f6f6;color:#222}
header{background:#22364d;color:#fff;padding:12px 20px;position:sticky;top:0;z-index:1}header h1{font-size:18px;margin:0}
header button{margin-top:6px;padding:6px 14px;font-size:14px}main{max-width:900px;margin:0 auto;padding:10px}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px 14px;margin:12px 0}
.card h2{font-size:13px;color:#666;margin:0 0 6px;font-weight:600;overflow-wrap:anywhere}.label{font-weight:600}
.pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f8f8f8;border:1px solid #eee;padding:6px;border-radius:4px;margin:2px 0 8px}
.points label{display:block;margin:4px 0}.core{color:#b35c00;font-weight:700}.none{color:#666;margin-top:6px}
details{margin-top:6px}summary{cursor:pointer;color:#22364d}textarea.note{width:100%;min-height:2.2em}
#csv-output{white-space:pre-wrap;font-size:12px;background:#fff;border:1px solid #ddd;padding:6px}#csv-output:empty{display:none}
"""

SHEET_JS = r"""
(function(){
  function cell(v){
    v = String(v === undefined || v === null ? '' : v);
    if (/^'*[=+\-@\t\r]/.test(v)) v = "'" + v;  // as review.csv: a spreadsheet would run it as a formula
    return /[",\n\r]/.test(v) ? '"' + v.replace(/"/g, '""') + '"' : v;
  }
  function buildCsv(){
    var lines = ['id,point,key_point,core,covered,note'];
    Array.prototype.forEach.call(document.querySelectorAll('.card'), function(card){
      var boxes = card.querySelectorAll('input.kp'), none = card.querySelector('input.nonecovered');
      var ticked = Array.prototype.some.call(boxes, function(b){ return b.checked; });
      var reviewed = ticked || (none && none.checked);
      var note = card.querySelector('textarea.note').value;
      Array.prototype.forEach.call(boxes, function(b, k){
        var covered = reviewed ? (b.checked ? '1' : '0') : '';
        lines.push([card.getAttribute('data-id'), b.getAttribute('data-point'), b.getAttribute('data-text'),
                    b.getAttribute('data-core'), covered, k === 0 ? note : ''].map(cell).join(','));
      });
    });
    return lines.join('\n') + '\n';
  }
  function save(){
    var text = buildCsv();
    document.getElementById('csv-output').textContent = text;
    var url = URL.createObjectURL(new Blob([text], {type: 'text/csv'}));
    var a = document.createElement('a'); a.href = url; a.download = 'review-filled.csv';
    document.body.appendChild(a); a.click(); document.body.removeChild(a);
    setTimeout(function(){ URL.revokeObjectURL(url); }, 1000);
  }
  document.getElementById('save').addEventListener('click', save);
  Array.prototype.forEach.call(document.querySelectorAll('.card'), function(card){
    var none = card.querySelector('input.nonecovered');
    Array.prototype.forEach.call(card.querySelectorAll('input.kp'), function(b){
      b.addEventListener('change', function(){ if(b.checked) none.checked = false; }); });
    none.addEventListener('change', function(){ if(none.checked) Array.prototype.forEach.call(card.querySelectorAll('input.kp'), function(b){ b.checked = false; }); });
  });
  window.ragmeterReviewCsv = buildCsv;
})();
"""


def _attr(value: Any) -> str:
    """A ``data-`` attribute the script copies into the CSV: the exact text (entities only), so that the id
    and the key point read back as exported; what the reviewer sees goes through :func:`_esc`."""
    return html.escape("" if value is None else str(value), quote=True)


def _card(card: Dict[str, Any], number: int) -> str:
    cid = _esc(card["id"])
    points = []
    for k, point in enumerate(card["points"], start=1):
        star = '<span class="core" title="core point">*</span> ' if point.core else ""
        points.append(f'<label><input type="checkbox" class="kp" data-point="{k}" data-core="{1 if point.core else 0}" '
                      f'data-text="{_attr(point.text)}"> {star}{_esc(point.text)}</label>')
    passages = "".join(f'<div class="label">{_esc(p.get("file") or "")}</div><div class="pre">{_esc(p["text"])}</div>'
                       for p in card["passages"])
    return (f'<section class="card" data-id="{_attr(card["id"])}"><h2>{number}. {cid}</h2>'
            f'<div class="label">Question</div><div class="pre">{_esc(card.get("question"))}</div>'
            f'<div class="label">Answer</div><div class="pre">{_esc(card.get("answer") or "(no answer)")}</div>'
            f'<div class="label">Which key points does the answer cover? (* = core)</div><div class="points">'
            + "".join(points)
            + '<label class="none"><input type="checkbox" class="nonecovered"> none of these points</label></div>'
            f'<details><summary>Source passages ({len(card["passages"])})</summary>{passages or "<p>none</p>"}</details>'
            '<div class="label">Note</div><textarea class="note" rows="1"></textarea></section>')


def render_sheet(cards: List[Dict[str, Any]], *, title: str) -> str:
    digest = base64.b64encode(hashlib.sha256(SHEET_JS.encode("utf-8")).digest()).decode("ascii")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        f"script-src 'sha256-{digest}'\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Review sheet \u2014 {_esc(title)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>Review sheet \u2014 {_esc(title)} ({len(cards)} cases)</h1>"
        "<div>Tick every key point the answer covers; tick \u201cnone of these points\u201d when it covers none. "
        "A case left untouched counts as not reviewed.</div>"
        '<button id="save" type="button">Save as CSV</button></header><main>'
        + "".join(_card(card, k) for k, card in enumerate(cards, start=1))
        + '<pre id="csv-output"></pre></main><script>' + SHEET_JS + "</script></body></html>"
    )
