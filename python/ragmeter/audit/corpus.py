"""Evidence phrases checked against the corpus they should be found in.

A phrase that no chunk of its expected files contains can never make a hit:
it raises no error and silently lowers recall. Each phrase is normalised and
matched exactly as scoring does (the Rust matcher of :mod:`ragmeter.evidence`,
with each case's "retrieved" chunks being every corpus chunk of its expected
files). A phrase not found there is looked up in the whole corpus
(``evidence_in_other_file``, with the chunk that has it) and otherwise gets
``evidence_not_in_corpus`` with the nearest variant in the expected files'
chunks, found first by folding punctuation (dashes, tildes, quotes, ... all
count as one character), then by a bounded edit distance on the folded text.
"""
from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np
import polars as pl

from ragmeter import _sniff
from ragmeter.errors import InputError

#: Files of a corpus folder read as documents (one chunk each).
TEXT_SUFFIXES = (".txt", ".text", ".md", ".markdown")
#: Elsewhere-found phrases located (file and chunk) in one pass; more are reported without the place.
MAX_LOCATED = 2000
#: Occurrences of one piece of a phrase tried per chunk by the edit-distance search.
MAX_SEEDS_PER_CHUNK = 20
#: Punctuation-like symbols folded with punctuation (tildes and waves, minus, accents used as quotes).
_FOLDED_SYMBOLS = set("~∼∽～〜〰˜⁓−‐‑‒–—―﹘﹣－`´＇＂^")
_FOLD = "\x1f"


@dataclass
class CorpusCheck:
    warnings: List[Any]
    summary: Dict[str, Any]
    phrases: pl.DataFrame


# --------------------------------------------------------------------------- loading


def load_corpus(source: Any) -> pl.DataFrame:
    """A corpus as one row per chunk: ``file``, ``chunk_id`` (null when not given), ``text``.

    ``source``: a folder (each text or Markdown file one document), a JSONL or
    Parquet chunk export with ``file``, ``chunk_id``, ``text`` (the spellings
    run files accept), or a DataFrame / list of dicts of that shape.
    """
    if isinstance(source, (str, Path)):
        path = Path(source)
        if path.is_dir():
            return _folder(path)
        if not path.exists():
            raise InputError(f"{path}: no such file or folder (--corpus takes a chunk export or a folder of text files)")
        from ragmeter._parquet_ahead import is_parquet

        if is_parquet(path):  # by its content too, as the golden set and the run are read
            try:
                frame = pl.read_parquet(path)
            except Exception as exc:  # polars raises several types for unreadable files
                raise _sniff.parquet_read_error(path, exc) from None
            return _chunk_frame(frame, str(path), None)
        fast = _jsonl_columnar(path)
        if fast is not None:
            return fast
        records, lines = _jsonl(path)
        return _records(records, str(path), lines)
    if isinstance(source, pl.DataFrame):
        return _chunk_frame(source, "corpus", None)
    if isinstance(source, (list, tuple)):
        return _records(list(source), "corpus", None)
    raise InputError(f"corpus: expected a path, a DataFrame or a list of chunks, got {type(source).__name__}")


def _folder(root: Path) -> pl.DataFrame:
    from ragmeter.dataset import read_text

    paths = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
    if not paths:
        raise InputError(f"{root}: no text or Markdown files ({', '.join(TEXT_SUFFIXES)}) in the corpus folder")
    return pl.DataFrame(
        {"file": [p.relative_to(root).as_posix() for p in paths], "chunk_id": [None] * len(paths),
         "text": [read_text(p) for p in paths]},
        schema={"file": pl.String, "chunk_id": pl.String, "text": pl.String},
    )


def _jsonl_columnar(path: Path) -> Optional[pl.DataFrame]:
    """A well-formed JSONL export read by Polars (ten times faster than line by line), or None for
    anything else (comments, a bad line, a missing or mistyped field), which the line-by-line path
    then reports with its line number."""
    import pyarrow as pa
    import pyarrow.json as pj

    from ragmeter._sniff import deep_lines

    # Arrow's reader, not Polars': Polars reads a column of strings with a number or a list among them as
    # strings ('2024', '["page 1", "page 2"]'), where Arrow refuses the change of type, so the line-by-line path
    # names the row. Arrow does not check that the text is UTF-8: that is checked first (same path otherwise).
    try:
        raw = path.read_bytes()
        raw.decode("utf-8")
        if deep_lines(raw):
            return None  # Arrow's reader would overflow the stack on them
        table = pj.read_json(pa.BufferReader(raw), read_options=pj.ReadOptions(block_size=1 << 24))
        frame = pl.from_arrow(table)
    except Exception:  # a decode error; pyarrow and polars raise several types for input they cannot read
        return None
    if not isinstance(frame, pl.DataFrame):
        return None
    try:
        chunks = _chunk_frame(frame, str(path), None)
    except InputError:
        return None
    return chunks if chunks.height else None


def _jsonl(path: Path) -> Tuple[List[Any], List[int]]:
    from ragmeter._sniff import text_shape_diagnosis
    from ragmeter.dataset import read_text

    from ragmeter._sniff import depth_exceeded_at, too_deep_message

    records, lines = [], []
    for number, line in enumerate(read_text(path, "chunk exports").splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped.startswith("//"):
            continue
        if depth_exceeded_at(stripped) is not None:  # json.loads would raise RecursionError
            raise InputError(f"{path}:{number}: {too_deep_message()}")
        try:
            records.append(json.loads(stripped))
        except json.JSONDecodeError as exc:
            # a first line that is not JSON: one diagnosis of the whole file (CSV, TSV, ...) when it has a shape
            shape = None if records else text_shape_diagnosis(path, stripped, "chunk exports",
                                                              "see docs/audit.md (--corpus)")
            raise InputError(shape or f"{path}:{number}: invalid JSON: {exc.msg} (column {exc.colno})") from None
        lines.append(number)
    if not records:
        raise InputError(f"{path}: no chunks (the file is empty or has only comments)")
    return records, lines


def _aliases() -> Dict[str, Tuple[str, ...]]:
    from ragmeter.dataset import _CHUNK_ALIASES

    return _CHUNK_ALIASES


def _records(records: List[Any], label: str, lines: Optional[List[int]]) -> pl.DataFrame:
    aliases = _aliases()
    where = (lambda i: f"{label}:{lines[i]}") if lines else (lambda i: f"{label}[{i}]")
    rows: Dict[str, List[Any]] = {"file": [], "chunk_id": [], "text": []}
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise InputError(f"{where(i)}: expected a chunk object with file, chunk_id, text")
        for name in rows:
            value = next((rec[a] for a in aliases[name] if rec.get(a) is not None), None)
            if name == "chunk_id" and value is not None and not isinstance(value, bool) and isinstance(value, int):
                value = str(value)
            rows[name].append(value)
    for name in ("file", "text", "chunk_id"):
        bad = [i for i, v in enumerate(rows[name]) if v is not None and not isinstance(v, str)]
        if bad:
            raise InputError(f"{where(bad[0])}: {name!r} must be a string" + _more(bad))
    return _chunk_frame(pl.DataFrame(rows, schema={"file": pl.String, "chunk_id": pl.String, "text": pl.String}), label, where)


def _more(rows: List[int]) -> str:
    return f" (and {len(rows) - 1} more rows)" if len(rows) > 1 else ""


def _chunk_frame(frame: pl.DataFrame, label: str, where: Any) -> pl.DataFrame:
    """Check a chunk table column-wise: one diagnosis when a field is absent everywhere."""
    aliases = _aliases()
    for canonical, names in aliases.items():
        for alt in names[1:]:
            if alt in frame.columns and canonical not in frame.columns:
                frame = frame.rename({alt: canonical})
    for name in ("file", "text"):
        if name not in frame.columns or frame[name].null_count() == frame.height:
            raise InputError(f"{label}: no {name!r} field: a chunk export needs file, chunk_id and text per chunk "
                             f"(or pass a folder of text files)")
        if frame[name].dtype not in (pl.String, pl.Null):
            raise InputError(f"{label}: column {name!r} has type {frame[name].dtype}, expected string")
    if "chunk_id" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias("chunk_id"))
    frame = frame.select(pl.col("file").cast(pl.String), pl.col("chunk_id").cast(pl.String), pl.col("text").cast(pl.String))
    # Text read from Parquet can sit in string-view buffers that hold the page bytes around it (length
    # prefixes), which the Rust matcher's whole-buffer UTF-8 check rejects: one copy into fresh buffers.
    frame = frame.with_columns(pl.Series("text", frame["text"].to_arrow()))
    for name in ("file", "text"):
        absent = pl.col(name).is_null() | ((pl.col(name).str.strip_chars() == "") if name == "file" else pl.lit(False))
        missing = frame.with_row_index("_row").filter(absent)["_row"].to_list()
        if missing:
            at = where(missing[0]) if where else f"{label}: row {missing[0] + 1}"
            raise InputError(f"{at}: missing {name!r}" + _more(missing))
    return frame


# --------------------------------------------------------------------------- files


class _FileIndex:
    """Corpus files by the name scoring compares (normalised, matched on a ``/`` suffix either way)."""

    def __init__(self, keys: Iterable[str]) -> None:
        self.keys = set(keys)
        self.by_suffix: Dict[str, List[str]] = {}
        for key in self.keys:
            parts = key.split("/")
            for i in range(len(parts)):
                self.by_suffix.setdefault("/".join(parts[i:]), []).append(key)

    def matches(self, key: str) -> List[str]:
        found = set(self.by_suffix.get(key, ()))  # corpus files ending in the expected name
        parts = key.split("/")
        for i in range(1, len(parts)):  # the expected name ends in a corpus file's name
            tail = "/".join(parts[i:])
            if tail in self.keys:
                found.add(tail)
        return sorted(found)


# --------------------------------------------------------------------------- checking


def check_corpus(golden: pl.DataFrame, source: Any) -> CorpusCheck:
    """Check every evidence phrase of ``golden`` (a :func:`load_golden` frame) against the corpus."""
    from ragmeter.evidence import normalize, normalize_file_name, phrases_in_texts

    chunks = load_corpus(source)
    label = str(source) if isinstance(source, (str, Path)) else "corpus"
    file_keys = {f: normalize_file_name(f) for f in chunks["file"].unique().to_list()}
    chunks = chunks.with_row_index("row").with_columns(pl.col("file").replace_strict(file_keys, return_dtype=pl.String).alias("fkey"))
    unit_of_case, units, warnings = _resolve_files(golden, _FileIndex(file_keys.values()), label)

    phrases = golden.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("case"), "id", pl.col("expected_evidence").alias("phrase"),
                            pl.col("expected_files")).explode("phrase").drop_nulls("phrase").with_row_index("p")
    phrases = phrases.with_columns(
        pl.Series("unit", [unit_of_case[c] for c in phrases["case"].to_list()], dtype=pl.Int64),
        pl.Series("empty", [normalize(p) == "" for p in phrases["phrase"].to_list()], dtype=pl.Boolean),
        pl.col("expected_files").list.eval(pl.element().str.strip_chars() != "").list.any().fill_null(False).alias("has_files"),
    )
    unit_chunks = _chunks_per_unit(units, chunks)
    phrases = phrases.with_columns(pl.Series("in_expected", _found_in_units(phrases, unit_chunks, len(units)), dtype=pl.Boolean))
    unfound = phrases.filter(~pl.col("empty") & ~pl.col("in_expected"))
    anywhere = np.asarray(phrases_in_texts(unfound["phrase"], chunks["text"]), dtype=bool) if unfound.height else np.zeros(0, bool)
    unfound = unfound.with_columns(pl.Series("anywhere", anywhere, dtype=pl.Boolean))
    # no file expected: found anywhere is found, as scoring counts it
    unfound = unfound.filter(~(pl.col("anywhere") & ~pl.col("has_files")))
    status = _explain_unfound(unfound, chunks, [unit_chunks["rows"][u] if u >= 0 else None for u in unit_of_case], warnings)

    table = _phrase_table(phrases, status)
    counts = table["status"].value_counts()
    by_status = dict(zip(counts["status"].to_list(), counts["count"].to_list()))
    summary = {
        "path": label, "chunks": chunks.height, "files": len(file_keys),
        "phrases": int((~table["empty"]).sum()), "found": by_status.get("found", 0),
        "in_other_file": by_status.get("in_other_file", 0), "not_in_corpus": by_status.get("not_in_corpus", 0),
        "files_not_in_corpus": sum(1 for w in warnings if w.code == "file_not_in_corpus"),
        "cases_with_evidence": int(table.filter(~pl.col("empty"))["id"].n_unique()),
        "cases_affected": int(table.filter(pl.col("status").is_in(["in_other_file", "not_in_corpus"]))["id"].n_unique()),
    }
    return CorpusCheck(warnings=warnings, summary=summary, phrases=table)


def _resolve_files(golden: pl.DataFrame, index: _FileIndex, label: str) -> Tuple[List[int], Dict[Tuple[str, ...], int], List[Any]]:
    """Per case, its matcher unit (-1: no expected file in the corpus); the units (sets of corpus files);
    a ``file_not_in_corpus`` warning per expected file the corpus lacks. Cases naming the same files
    share a unit, so each corpus chunk is normalised and scanned about once however many cases point at it."""
    from ragmeter.audit import AuditWarning
    from ragmeter.evidence import normalize_file_name

    missing: Dict[str, List[str]] = {}
    unit_of_case: List[int] = []
    units: Dict[Tuple[str, ...], int] = {}
    for case_id, files in zip(golden["id"].to_list(), golden["expected_files"].to_list()):
        keys = set()
        for name in dict.fromkeys(f for f in files if f.strip()):
            hits = index.matches(normalize_file_name(name))
            if not hits:
                missing.setdefault(name, []).append(case_id)
            keys.update(hits)
        unit_of_case.append(units.setdefault(tuple(sorted(keys)), len(units)) if keys else -1)
    warnings = [AuditWarning("file_not_in_corpus", f"{name} (named by {len(cases)} case(s)) is no file of the corpus "
                             f"{label}: its evidence cannot be found there", cases) for name, cases in missing.items()]
    return unit_of_case, units, warnings


def _explain_unfound(unfound: pl.DataFrame, chunks: pl.DataFrame, rows_of_case: List[Optional[List[int]]],
                     warnings: List[Any]) -> Dict[Tuple[int, str], Tuple[str, Optional[str], Optional[str]]]:
    """A warning per phrase not in its expected files (appended to ``warnings``): where else it is,
    or the nearest variant in those files. Returns ``(case, phrase) -> (status, chunk, suggestion)``."""
    from ragmeter.audit import AuditWarning

    located = _locate(unfound.filter(pl.col("anywhere"))["phrase"].unique(maintain_order=True).to_list(), chunks)
    cache: Dict[int, Tuple[str, str]] = {}
    status: Dict[Tuple[int, str], Tuple[str, Optional[str], Optional[str]]] = {}
    # one warning per finding (code and text), naming every case that shares it: a phrase copied into 49 cases
    # is one problem, not 49 warnings
    grouped: Dict[Tuple[str, str], List[str]] = {}
    for row in unfound.iter_rows(named=True):
        key = (row["case"], row["phrase"])
        files = ", ".join(f for f in row["expected_files"] if f.strip())
        if row["anywhere"]:
            place = located.get(row["phrase"])
            where = f" but in {place}" if place else " but in another file"
            grouped.setdefault(("evidence_in_other_file", f"{_quote(row['phrase'])} not in any chunk of {files}{where}"),
                               []).append(row["id"])
            status[key] = ("in_other_file", place, None)
            continue
        rows = rows_of_case[row["case"]]
        hint = _suggest(row["phrase"], rows, chunks, cache) if rows else None
        scope = f"any chunk of {files}" if row["has_files"] else "any chunk of the corpus"
        tail = f"; the chunk {hint[0]} has {_quote(hint[1])}" if hint else ""
        grouped.setdefault(("evidence_not_in_corpus", f"{_quote(row['phrase'])} not in {scope}{tail}"), []).append(row["id"])
        status[key] = ("not_in_corpus", hint[0] if hint else None, hint[1] if hint else None)
    warnings.extend(AuditWarning(code, f"{text} ({_cases_named(ids)})", ids) for (code, text), ids in grouped.items())
    return status


def _cases_named(ids: List[str]) -> str:
    """``case a`` for one case, ``3 cases: a, b, c`` (the first five, then how many more) for several."""
    from ragmeter._warnings import SHOWN

    if len(ids) == 1:
        return f"case {ids[0]}"
    more = len(ids) - SHOWN
    return f"{len(ids)} cases: " + ", ".join(ids[:SHOWN]) + (f" and {more} more" if more > 0 else "")


def _chunks_per_unit(units: Dict[Tuple[str, ...], int], chunks: pl.DataFrame) -> Dict[str, Any]:
    """Per matcher unit (a set of corpus files), its chunks: files, texts (list columns), row numbers."""
    unit_ids = [u for keys, u in units.items() for _ in keys]
    pairs = pl.DataFrame({"unit": unit_ids, "fkey": [k for keys in units for k in keys]}, schema={"unit": pl.Int64, "fkey": pl.String})
    joined = pairs.join(chunks.select("fkey", "row", "file", "text"), on="fkey").sort("unit", "row")
    grouped = joined.group_by("unit", maintain_order=True).agg("file", "text", "row")
    full = pl.DataFrame({"unit": np.arange(len(units), dtype=np.int64)}).join(grouped, on="unit", how="left").sort("unit")
    empty = pl.lit([], dtype=pl.List(pl.String))
    full = full.with_columns(pl.col("file").fill_null(empty), pl.col("text").fill_null(empty))
    return {"files": full["file"], "texts": full["text"], "rows": full["row"].to_list()}


def _found_in_units(phrases: pl.DataFrame, unit_chunks: Dict[str, Any], n_units: int) -> np.ndarray:
    """Per phrase row: is it in some chunk of its case's expected files? One call of the Rust matcher,
    each unit's phrases being those of all its cases (no expected file: every chunk given counts)."""
    from ragmeter.evidence import match_relevance

    found = np.zeros(phrases.height, dtype=bool)
    if n_units == 0:
        return found
    sub = phrases.filter(pl.col("unit") >= 0).sort("unit", "p")
    lists = sub.group_by("unit", maintain_order=True).agg("phrase")
    lists = pl.DataFrame({"unit": np.arange(n_units, dtype=np.int64)}).join(lists, on="unit", how="left").sort("unit")
    lists = lists.with_columns(pl.col("phrase").fill_null(pl.lit([], dtype=pl.List(pl.String))))
    no_files = pl.Series([[]] * n_units, dtype=pl.List(pl.String))
    match = match_relevance(no_files, lists["phrase"], unit_chunks["files"], unit_chunks["texts"])
    found[sub["p"].to_numpy()] = match.phrase_first_rank.astype(np.int64) > 0
    return found


def _phrase_table(phrases: pl.DataFrame, status: Dict[Tuple[int, str], Tuple[str, Optional[str], Optional[str]]]) -> pl.DataFrame:
    keys = list(zip(phrases["case"].to_list(), phrases["phrase"].to_list()))
    empty = phrases["empty"].to_list()
    rows = [("empty", None, None) if e else status.get(k, ("found", None, None)) for k, e in zip(keys, empty)]
    return phrases.select("id", "phrase", "empty").with_columns(
        pl.Series("status", [r[0] for r in rows], dtype=pl.String),
        pl.Series("chunk", [r[1] for r in rows], dtype=pl.String),
        pl.Series("suggestion", [r[2] for r in rows], dtype=pl.String),
    )


def _chunk_label(file: str, chunk_id: Optional[str]) -> str:
    return f"{file}#{chunk_id}" if chunk_id is not None else file


def _quote(text: str) -> str:
    """A phrase as a warning shows it: its spaces collapsed, cut with its length past the characters every
    warning shows of a user's text (a pasted document made a warning of thousands of lines)."""
    from ragmeter._warnings import SHOWN_CHARS

    text = " ".join(text.split())
    if len(text) <= SHOWN_CHARS:
        return f"'{text}'"
    return f"'{text[:SHOWN_CHARS]}...' ({len(text):,} characters)"


def _locate(phrases: List[str], chunks: pl.DataFrame) -> Dict[str, str]:
    """The first chunk (corpus order) holding each phrase, in one pass of the matcher: every corpus
    file is one "case" whose phrases are all of ``phrases``."""
    from ragmeter.evidence import match_relevance

    phrases = phrases[:MAX_LOCATED]
    if not phrases:
        return {}
    groups = chunks.group_by("fkey", maintain_order=True).agg("file", "text", "row")
    n = groups.height
    match = match_relevance(
        pl.Series([[]] * n, dtype=pl.List(pl.String)), pl.Series([phrases] * n, dtype=pl.List(pl.String)),
        groups["file"], groups["text"],
    )
    ranks = match.phrase_first_rank.reshape(n, len(phrases))
    rows = groups["row"].to_list()
    out: Dict[str, str] = {}
    for j, phrase in enumerate(phrases):
        where = np.flatnonzero(ranks[:, j])
        if len(where):
            g = int(where[0])
            row = rows[g][int(ranks[g, j]) - 1]
            out[phrase] = _chunk_label(chunks["file"][row], chunks["chunk_id"][row])
    return out


# --------------------------------------------------------------------------- suggestions


_FOLD_CHARS: set = set()  # the punctuation met so far
_SEEN_CHARS: set = set()
_FOLD_RE: Optional["re.Pattern[str]"] = None


def _fold(text: str) -> str:
    """``text`` with every punctuation mark (and punctuation-like symbol) replaced by one character,
    so positions are kept. A regular expression over the marks met so far: several times faster than
    ``str.translate`` on CJK text."""
    global _FOLD_RE
    new = set(text) - _SEEN_CHARS
    if new:
        _FOLD_CHARS.update(ch for ch in new if ch in _FOLDED_SYMBOLS or unicodedata.category(ch).startswith("P"))
        _SEEN_CHARS.update(new)
        _FOLD_RE = re.compile("[" + "".join(re.escape(ch) for ch in sorted(_FOLD_CHARS)) + "]") if _FOLD_CHARS else None
    return _FOLD_RE.sub(_FOLD, text) if _FOLD_RE is not None else text


def _max_edits(length: int) -> int:
    return 1 if length <= 8 else 2 if length <= 16 else 3


def _suggest(phrase: str, rows: List[int], chunks: pl.DataFrame, cache: Dict[int, Tuple[str, str]]) -> Optional[Tuple[str, str]]:
    """The nearest variant of ``phrase`` in the given chunks: ``(chunk label, its text there)``.
    ``cache`` keeps each chunk's normalised and folded text across phrases."""
    from ragmeter.evidence import normalize

    target = _fold(normalize(phrase))
    if len(target) < 2:
        return None
    texts = chunks["text"]
    folded = []
    for row in rows:
        if row not in cache:
            text = normalize(texts[row])
            cache[row] = (text, _fold(text))
        folded.append(cache[row][1])
    best: Optional[Tuple[int, int, int, int]] = None  # (edits, order, start, end)
    for order, text in enumerate(folded):
        at = text.find(target)
        if at >= 0:
            best = (0, order, at, at + len(target))
            break
    if best is None and len(target) >= 4:
        limit = _max_edits(len(target))
        for order, text in enumerate(folded):
            found = _nearest(target, text, limit if best is None else best[0] - 1)
            if found is not None:
                best = (found[0], order, found[1], found[2])
                if found[0] == 1:
                    break
    if best is None:
        return None
    row = rows[best[1]]
    original = _original_span(texts[row], cache[row][0], best[2], best[3])
    return _chunk_label(chunks["file"][row], chunks["chunk_id"][row]), original


def _nearest(pattern: str, text: str, k: int) -> Optional[Tuple[int, int, int]]:
    """Best approximate occurrence of ``pattern`` in ``text`` with at most ``k`` edits:
    ``(edits, start, end)``. With k edits one of k + 1 pieces of the pattern occurs
    exactly (pigeonhole), so only windows around those pieces are scored (bit-parallel),
    and only the best window is aligned to find where the occurrence starts."""
    m = len(pattern)
    if k < 1 or m - k > len(text):  # an occurrence within k edits is at least m - k long: none fits in the text
        return None  # (and the pattern's bit masks, m bits each, cost m * m bits to build: a pasted document's)
    step = m // (k + 1)
    peq: Dict[str, int] = {}
    for i, ch in enumerate(pattern):
        peq[ch] = peq.get(ch, 0) | (1 << i)
    best: Optional[Tuple[int, int, str]] = None  # (edits, window start, window)
    seen = set()
    for p in range(k + 1):
        lo = p * step
        piece = pattern[lo: lo + step] if p < k else pattern[lo:]
        at = text.find(piece)
        tries = 0
        while at >= 0 and tries < MAX_SEEDS_PER_CHUNK:
            start = max(0, at - lo - k)
            if start not in seen:
                seen.add(start)
                window = text[start: at - lo + m + k]
                edits = _best_edits(peq, m, window)
                if edits <= (k if best is None else best[0] - 1) and edits > 0:
                    best = (edits, start, window)
                    if edits == 1:
                        break
            at = text.find(piece, at + 1)
            tries += 1
        if best is not None and best[0] == 1:
            break
    if best is None:
        return None
    edits, start, window = best
    end = _first_end(peq, m, window, edits)
    # where it starts: the same scan, backwards from that end with the pattern reversed
    rev: Dict[str, int] = {}
    for i, ch in enumerate(reversed(pattern)):
        rev[ch] = rev.get(ch, 0) | (1 << i)
    length = _first_end(rev, m, window[:end][::-1], edits)
    return edits, start + end - length, start + end


def _scores(peq: Dict[str, int], m: int, text: str) -> Iterable[int]:
    """Per position j of ``text``: the fewest edits turning the pattern (given by ``peq``, its
    character masks) into a substring ending at j. Myers' bit-parallel algorithm: a few integer
    operations per character."""
    full = (1 << m) - 1
    top = 1 << (m - 1)
    pv, mv, score = full, 0, m
    for ch in text:
        eq = peq.get(ch, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = mv | (~(xh | pv) & full)
        mh = pv & xh
        if ph & top:
            score += 1
        elif mh & top:
            score -= 1
        ph = (ph << 1) & full
        mh = (mh << 1) & full
        pv = mh | (~(xv | ph) & full)
        mv = ph & xv
        yield score


def _best_edits(peq: Dict[str, int], m: int, text: str) -> int:
    return min(_scores(peq, m, text), default=m)


def _first_end(peq: Dict[str, int], m: int, text: str, edits: int) -> int:
    """Length of the shortest prefix of ``text`` that ends with an occurrence within ``edits``."""
    for j, score in enumerate(_scores(peq, m, text)):
        if score <= edits:
            return j + 1
    return len(text)  # pragma: no cover - called with the best score of this text


def _original_span(text: str, normalised: str, start: int, end: int) -> str:
    """The original text behind ``normalised[start:end]`` (as :func:`_display` shows it), or the
    normalised slice when the text does not normalise character by character."""
    from ragmeter.evidence import normalize

    pieces = [normalize(ch) for ch in text]
    if "".join(pieces) != normalised:
        return normalised[start:end]
    pos, first, last = 0, None, None
    for i, piece in enumerate(pieces):
        if piece:
            if first is None and pos + len(piece) > start:
                first = i
            if pos < end:
                last = i
            pos += len(piece)
    if first is None or last is None:
        return normalised[start:end]
    return _display(text[first: last + 1])


def _display(span: str) -> str:
    """A chunk's words as a label would quote them: NFKC (no Kangxi radicals or full-width forms),
    white space runs as one space, none left between two CJK characters (a line break inside a word)."""
    words = unicodedata.normalize("NFKC", span).split()
    out = words[:1]
    for word in words[1:]:
        out.append(word if _wide(out[-1][-1]) and _wide(word[0]) else " " + word)
    return "".join(out)


def _wide(ch: str) -> bool:
    return unicodedata.east_asian_width(ch) in ("W", "F")
