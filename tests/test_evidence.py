from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import List, Optional

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter import _core
from ragmeter._columns import string_column
from ragmeter.errors import InputError
from ragmeter.evidence import (
    RunPhrases,
    match_relevance,
    normalize,
    normalize_dehyphenated,
    normalize_file_name,
    phrases_in_texts,
    retrieved_columns,
)

VECTORS = json.loads((Path(__file__).resolve().parents[1] / "testdata" / "evidence_vectors.json").read_text(encoding="utf-8"))

# ---------------------------------------------------------------------------
# Plain Python reference (the documented rule, written the obvious way)
# ---------------------------------------------------------------------------

# Unicode White_Space (what Rust's char::is_whitespace tests; Python's isspace differs).
WHITE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(chr(c) for c in range(0x2000, 0x200B)) + "\u2028\u2029\u202f\u205f\u3000"
LINE_BREAKS = "\n\x0b\x0c\r\x85\u2028\u2029"
HSPACE = "".join(c for c in WHITE if c not in LINE_BREAKS)
INVISIBLE = "\u00ad\u200b\u200c\u200d\u2060\ufeff"
_DROP = re.compile(f"[{re.escape(WHITE + INVISIBLE)}]")
_SOFT_HYPHEN = re.compile(
    f"(?<=[^{re.escape(WHITE)}])[-\u2010][{re.escape(HSPACE)}]*[{re.escape(LINE_BREAKS)}][{re.escape(WHITE)}]*(?=[^{re.escape(WHITE)}])"
)


def _post(nfkc: str) -> str:
    return _DROP.sub("", nfkc).lower().replace("ς", "σ")


def ref_normalize(text: str) -> str:
    return _post(unicodedata.normalize("NFKC", text))


def ref_dehyphenated(text: str) -> Optional[str]:
    nfkc = unicodedata.normalize("NFKC", text)
    if not _SOFT_HYPHEN.search(nfkc):
        return None
    return _post(_SOFT_HYPHEN.sub("", nfkc))


def ref_found(text: str, phrase: str) -> bool:
    p = ref_normalize(phrase)
    if not p:
        return False
    variants = [ref_normalize(text)]
    d = ref_dehyphenated(text)
    if d is not None:
        variants.append(d)
    return any(p in v for v in variants)


def ref_file_match(expected: str, retrieved: str) -> bool:
    def canon(s: str) -> str:
        s = unicodedata.normalize("NFC", s.strip()).replace("\\", "/")
        while s.startswith("./"):
            s = s[2:]
        return s.rstrip("/").lower()

    a, b = canon(expected), canon(retrieved)
    if not a or not b:
        return False
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


# ---------------------------------------------------------------------------
# Shared vectors (also read by the cargo tests)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", VECTORS["normalize"], ids=lambda c: c["name"])
def test_normalize_vectors(case):
    assert normalize(case["input"]) == case["expected"]
    assert normalize_dehyphenated(case["input"]) == case["dehyphenated"]
    # The vectors agree with the plain Python reference too.
    assert ref_normalize(case["input"]) == case["expected"]
    assert ref_dehyphenated(case["input"]) == case["dehyphenated"]


@pytest.mark.parametrize("case", VECTORS["match"], ids=lambda c: c["name"])
def test_match_vectors(case):
    m = match_relevance([[]], [case["phrases"]], [["doc.md"]], [[case["text"]]])
    assert [bool(r) for r in m.phrase_any_rank] == case["found"]
    assert [ref_found(case["text"], p) for p in case["phrases"]] == case["found"]


# ---------------------------------------------------------------------------
# Properties: Rust == Python reference
# ---------------------------------------------------------------------------

INTERESTING = list(
    "aAbBzZ09 -\u2010\n\r\t\u3000\xa0\u2028\u0085\u00ad\u200bé\u0301\u0308大模型检索⼤⼈⾔ＡＢａｂ１２－～：（）ΣσςİßﬁÅÄ가\u11a8\u1100\u1161か\u3099カ①"
)


def _assigned(c: str) -> bool:
    # Characters unassigned in Python's Unicode version may be assigned (with
    # properties) in the Rust crates' newer one: leave them out.
    return unicodedata.category(c) not in ("Cn", "Cs", "Co")


chars = st.one_of(st.sampled_from(INTERESTING), st.characters(codec="utf-8").filter(_assigned))
texts = st.text(alphabet=chars, max_size=40)


@settings(max_examples=400, deadline=None)
@given(texts)
def test_normalize_equals_reference(text):
    assert normalize(text) == ref_normalize(text)
    assert normalize_dehyphenated(text) == ref_dehyphenated(text)


# Every Unicode block, each as likely as Latin: a 128-code-point range holding
# at least one assigned character is drawn first, then a character in it.
_RANGES = [r for r in range(0x110000 // 128) if any(_assigned(chr(c)) for c in range(r * 128, r * 128 + 128))]
block_chars = st.builds(lambda r, i: chr(_RANGES[r] * 128 + i), st.integers(0, len(_RANGES) - 1), st.integers(0, 127)).filter(_assigned)


@settings(max_examples=1500, deadline=None)
@given(st.text(alphabet=st.one_of(block_chars, st.sampled_from(INTERESTING)), max_size=24))
def test_normalize_equals_reference_over_every_block(text):
    # The table-driven fast path against CPython's unicodedata.
    assert normalize(text) == ref_normalize(text)
    assert normalize_dehyphenated(text) == ref_dehyphenated(text)


# Long ASCII runs (the normaliser takes ASCII sixteen bytes at a time) and CJK
# runs, next to characters from every block and the interesting ones.
_RUNS = st.sampled_from(["The Quick Brown Fox ", "ABCDEFGHIJKLMNOPQRSTUV", "retrieval\taugmented\n", "0123456789abcdefXYZ", "大模型检索增强生成", "-\n", " \r\n "])


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(_RUNS, block_chars, st.sampled_from(INTERESTING)), max_size=30).map("".join))
def test_normalize_equals_reference_on_long_runs(text):
    assert normalize(text) == ref_normalize(text)
    assert normalize_dehyphenated(text) == ref_dehyphenated(text)


@st.composite
def text_and_phrases(draw):
    text = draw(texts)
    phrases = draw(st.lists(texts, max_size=4))
    # Also phrases cut out of the text (so that matches actually happen), re-spaced and re-cased.
    for _ in range(draw(st.integers(0, 3))):
        if text:
            i = draw(st.integers(0, len(text) - 1))
            j = draw(st.integers(i, len(text)))
            piece = text[i:j]
            if draw(st.booleans()):
                piece = piece.upper()
            if draw(st.booleans()):
                piece = " ".join(piece)
            phrases.append(piece)
    return text, phrases


@settings(max_examples=400, deadline=None)
@given(text_and_phrases())
def test_matching_equals_reference(sample):
    text, phrases = sample
    m = match_relevance([[]], [phrases], [["doc.md"]], [[text]])
    got = [bool(r) for r in m.phrase_any_rank]
    assert got == [ref_found(text, p) for p in phrases]
    assert list(m.phrase_empty) == [ref_normalize(p) == "" for p in phrases]


@st.composite
def batches(draw):
    names = ["a.md", "docs/a.md", "B.md", "c/b.md", "x.pdf", "Guide.PDF", "kb/guide.pdf"]
    words = ["alpha", "Beta", "γάμμα", "大模型", "⼤模型", "ＲＡＧ", "rag", "re-\ntrieval", "retrieval", " ", "\n"]
    n = draw(st.integers(0, 6))
    cases = []
    for _ in range(n):
        files = draw(st.lists(st.sampled_from(names), max_size=2))
        evidence = draw(st.lists(st.sampled_from(words + [""]), max_size=3))
        k = draw(st.integers(0, 5))
        chunk_files = draw(st.lists(st.sampled_from(names), min_size=k, max_size=k))
        chunk_texts = [" ".join(draw(st.lists(st.sampled_from(words), max_size=5))) for _ in range(k)]
        cases.append((files, evidence, chunk_files, chunk_texts))
    return cases


@settings(max_examples=200, deadline=None)
@given(batches())
def test_batch_relevance_equals_reference(cases):
    m = match_relevance(*(pl.Series([c[i] for c in cases], dtype=pl.List(pl.String)) for i in range(4)))
    exp_relevant, exp_file_match, exp_first, exp_labeled, exp_file_first = [], [], [], [], []
    for files, evidence, chunk_files, chunk_texts in cases:
        phrases = [p for p in evidence if ref_normalize(p)]
        labeled = bool(files) or bool(phrases)
        exp_labeled.append(labeled)
        first = [0] * len(evidence)
        file_first = [0] * len(files)
        for rank, (f, t) in enumerate(zip(chunk_files, chunk_texts), start=1):
            fm = not files or any(ref_file_match(e, f) for e in files)
            for j, e in enumerate(files):
                if ref_file_match(e, f) and not file_first[j]:
                    file_first[j] = rank
            found = [ref_found(t, p) for p in evidence]
            for j, hit in enumerate(found):
                if hit and fm and not first[j]:
                    first[j] = rank
            exp_file_match.append(fm)
            exp_relevant.append(labeled and fm and (not phrases or any(found)))
        exp_first += first
        exp_file_first += file_first
    assert m.labeled.tolist() == exp_labeled
    assert m.file_match.tolist() == exp_file_match
    assert m.relevant.tolist() == exp_relevant
    assert m.phrase_first_rank.tolist() == exp_first
    assert m.file_first_rank.tolist() == exp_file_first


# ---------------------------------------------------------------------------
# API details
# ---------------------------------------------------------------------------


def test_file_name_rules():
    assert normalize_file_name(" ./Docs\\Guide.PDF ") == "docs/guide.pdf"
    m = match_relevance(
        [["Guide.pdf", "a/x.md"]] * 1,
        [[]],
        [["kb/docs/guide.pdf", "b/x.md", "A/X.MD", "myguide.pdf"]],
        [["t", "t", "t", "t"]],
    )
    assert m.file_match.tolist() == [True, False, True, False]
    assert m.file_first_rank.tolist() == [1, 3]


def test_top_k_helpers_and_frames():
    golden_files = [["a.md", "b.md"], [], ["c.md"], []]
    evidence = [["alpha", "beta", "  "], ["gamma"], [], []]
    chunk_files = [["x.md", "a.md", "b.md"], ["z.md"], ["q.md", "C.md"], ["a.md"]]
    chunk_texts = [["alpha beta", "ALPHA", "be\nta"], ["the Gamma ray"], ["-", "-"], ["alpha"]]
    m = match_relevance(golden_files, evidence, chunk_files, chunk_texts)
    assert m.labeled.tolist() == [True, True, True, False]
    assert m.relevant.tolist() == [False, True, True, True, False, True, False]
    # the raw arrays hold Rust's false for the unlabelled case 3; the frames say null (not decided), as
    # chunks.parquet does, and its file_match is null too (it expects nothing a file could match)
    assert m.relevance_lists().to_list() == [[False, True, True], [True], [False, True], [None]]
    assert m.chunks["relevant"].to_list() == [False, True, True, True, False, True, None]
    assert m.chunks["file_match"].to_list() == [False, True, True, True, False, True, None]
    # "alpha" first in an expected file at rank 2, "beta" at 3; the blank phrase is ignored.
    assert m.phrase_first_rank.tolist() == [2, 3, 0, 1]
    assert m.phrase_any_rank.tolist() == [1, 1, 0, 1]
    assert m.phrase_empty.tolist() == [False, False, True, False]
    assert m.evidence_recall(2).to_list() == [0.5, 1.0, None, None]
    assert m.evidence_recall(3).to_list() == [1.0, 1.0, None, None]
    assert m.file_hit(1).to_list() == [False, None, False, None]
    assert m.file_hit(2).to_list() == [True, None, True, None]
    assert m.all_files_hit(2).to_list() == [False, None, True, None]
    assert m.all_files_hit(3).to_list() == [True, None, True, None]
    assert m.chunks.columns == ["case", "rank", "file_match", "relevant", "phrases_found"]
    assert m.chunks["rank"].to_list() == [1, 2, 3, 1, 1, 2, 1]
    assert m.phrases["phrase_index"].to_list() == [0, 1, 2, 0]
    assert m.files["case"].to_list() == [0, 0, 2]


def test_retrieved_columns_from_a_run():
    from ragmeter.dataset import load_run

    run = load_run([
        {"id": "a", "retrieved": [{"file": "a.md", "text": "Alpha", "score": 0.3}, {"file": "b.md", "text": "b"}]},
        {"id": "b", "retrieved": []},
    ])
    files, texts = retrieved_columns(run["retrieved"])
    m = match_relevance([["a.md"], []], [["alpha"], ["x"]], files, texts)
    assert m.relevant.tolist() == [True, False]


def test_phrases_in_texts():
    found = phrases_in_texts(["1.5~2秒", "1.5-2秒", "", "ＲＡＧ"], ["响应时间约为１．５～２秒", "rag pipeline"])
    assert found.tolist() == [True, False, False, True]


def test_binding_copies_writeable_and_borrows_readonly_text():
    texts = ["大模型 rag", "nothing"]
    off, data = string_column(texts)
    data = data.view()
    data.flags.writeable = False  # read-only: borrowed; writeable: copied
    args = lambda o, d: (
        np.array([0, 0], np.int64), string_column([]),
        np.array([0, 1], np.int64), string_column(["⼤模型"]),
        np.array([0, 2], np.int64), string_column(["a", "b"]), (o, d),
    )
    ro = _core.evidence_match(*args(off, data))
    rw = _core.evidence_match(*args(off.copy(), data.copy()))
    assert ro["relevant"].tolist() == rw["relevant"].tolist() == [True, False]


def test_binding_rejects_bad_columns():
    good = string_column(["x"])
    z = np.array([0, 0], np.int64)
    with pytest.raises(InputError, match="chunk_offsets"):
        _core.evidence_match(z, string_column([]), z, string_column([]), np.array([0, 2], np.int64), good, good)
    bad_utf8 = (np.array([0, 2], np.int64), np.frombuffer(b"\xff\xfe", np.uint8))
    with pytest.raises(InputError, match="UTF-8"):
        _core.evidence_match(z, string_column([]), z, string_column([]), np.array([0, 1], np.int64), good, bad_utf8)
    split = (np.array([0, 1], np.int64), np.frombuffer("大".encode(), np.uint8))
    with pytest.raises(InputError, match="UTF-8"):
        _core.evidence_match(z, string_column([]), z, string_column([]), np.array([0, 1], np.int64), good, split)
    with pytest.raises(ValueError, match="different number"):
        match_relevance([[]], [[]], [["a", "b"]], [["t"]])


def test_empty_batch():
    m = match_relevance([], [], [], [])
    assert m.n_cases == 0 and m.relevant.tolist() == []


@settings(max_examples=200, deadline=None)
@given(batches())
def test_run_wide_flags_equal_reference(cases):
    cols = [pl.Series([c[i] for c in cases], dtype=pl.List(pl.String)) for i in range(4)]
    m = match_relevance(*cols, run_wide=True)
    plain = match_relevance(*cols)
    all_texts = [t for c in cases for t in c[3]]
    expected = [any(ref_found(t, p) for t in all_texts) for c in cases for p in c[1]]
    assert m.phrase_in_run.tolist() == expected
    assert phrases_in_texts([p for c in cases for p in c[1]], all_texts).tolist() == expected
    assert plain.phrase_in_run is None
    for name in ("labeled", "file_match", "relevant", "phrases_found", "phrase_first_rank", "phrase_any_rank", "phrase_empty", "file_first_rank"):
        assert getattr(m, name).tolist() == getattr(plain, name).tolist(), name


@settings(max_examples=150, deadline=None)
@given(batches(), st.data())
def test_run_phrases_over_slices_equal_reference(cases, data):
    # The cases in a shuffled order, matched in slices with one RunPhrases index: each slice matches as alone,
    # and the index ends with every phrase found in some chunk of any slice.
    cols = [pl.Series([c[i] for c in cases], dtype=pl.List(pl.String)) for i in range(4)]
    order = np.array(data.draw(st.permutations(range(len(cases)))), dtype=np.int64)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(cases)), max_size=3)))
    index = RunPhrases(cols[1])
    for part in np.split(order, cuts):
        sliced = [col.gather(part) for col in cols]
        m = match_relevance(*sliced, run_index=index, run_cases=part)
        plain = match_relevance(*sliced)
        assert m.phrase_in_run is None
        for name in ("labeled", "relevant", "phrases_found", "phrase_first_rank", "phrase_any_rank", "phrase_empty"):
            assert getattr(m, name).tolist() == getattr(plain, name).tolist(), name
    all_texts = [t for c in cases for t in c[3]]
    assert index.phrase_in_run().tolist() == [any(ref_found(t, p) for t in all_texts) for c in cases for p in c[1]]


@settings(max_examples=150, deadline=None)
@given(batches(), st.data())
def test_dictionary_encoded_texts_match_as_plain_ones(cases, data):
    """Texts given as a dictionary (values in any order, some unused, null texts) match as the same texts given
    one by one, alone, run-wide and against a RunPhrases index; strings_gather writes them out."""
    import pyarrow as pa

    from ragmeter._columns import dictionary_text_column

    cols = [pl.Series([c[i] for c in cases], dtype=pl.List(pl.String)) for i in range(4)]
    texts = [t for c in cases for t in c[3]]
    nulls = [data.draw(st.booleans()) and not t for t in texts]  # a null text matches as the empty one
    values = data.draw(st.permutations(sorted(set(texts) | {"unused value", ""})))
    indices = pa.array([None if null else values.index(t) for t, null in zip(texts, nulls)], pa.int32())
    dictionary = pa.DictionaryArray.from_arrays(indices, pa.array(values, pa.string()))
    (offsets, data_), ids = dictionary_text_column(dictionary)
    assert (ids < 0).tolist() == nulls
    group = np.concatenate([[0], np.cumsum([len(c[3]) for c in cases])]).astype(np.int64)
    encoded = (group, (offsets, data_), ids)
    for options in ({}, {"run_wide": True}):
        m, plain = match_relevance(*cols[:3], encoded, **options), match_relevance(*cols, **options)
        for name in ("labeled", "file_match", "relevant", "phrases_found", "phrase_first_rank", "phrase_any_rank",
                     "phrase_empty", "file_first_rank", "phrase_in_run"):
            got, want = getattr(m, name), getattr(plain, name)
            assert (got is None and want is None) or got.tolist() == want.tolist(), name
    index = RunPhrases(cols[1])
    match_relevance(*cols[:3], encoded, run_index=index, run_cases=np.arange(len(cases)))
    assert index.phrase_in_run().tolist() == [any(ref_found(t, p) for t in texts) for c in cases for p in c[1]]
    out_offsets, out_data = _core.strings_gather(offsets, data_, ids)
    assert [bytes(out_data[a:b]).decode() for a, b in zip(out_offsets[:-1], out_offsets[1:])] == texts


def test_dictionary_indices_past_the_values_are_refused():
    values = string_column(["a", "b"])
    with pytest.raises(ValueError, match="past the 2 values"):
        _core.strings_gather(*values, np.array([0, 2], np.int32))
    z = np.array([0, 0], np.int64)
    with pytest.raises(ValueError, match="past the 2 values"):
        _core.evidence_match(z, string_column([]), z, string_column([]), np.array([0, 1], np.int64),
                             string_column(["f"]), values, text_ids=np.array([7], np.int32))
    bad_utf8 = (np.array([0, 2], np.int64), np.frombuffer(b"\xff\xfe", np.uint8))
    with pytest.raises(InputError, match="UTF-8"):
        _core.strings_gather(*bad_utf8, np.array([0], np.int32))


def test_run_phrases_refuse_cases_they_do_not_hold():
    evidence = pl.Series([["alpha"], ["beta", "gamma"]], dtype=pl.List(pl.String))
    index = RunPhrases(evidence)
    assert index.phrase_ids(np.array([1, 0])).tolist() == [1, 2, 0]
    one = [["f"]], [["alpha beta"]]
    with pytest.raises(InputError, match="run phrases"):
        match_relevance([[]], evidence.gather([1]), *one, run_index=index, run_cases=np.array([0]))
    with pytest.raises(ValueError, match="run_cases"):
        match_relevance([[]], evidence.gather([0]), *one, run_index=index)
    with pytest.raises(ValueError, match="exclude"):
        match_relevance([[]], evidence.gather([0]), *one, run_wide=True, run_index=index, run_cases=np.array([0]))
    assert index.phrase_in_run().tolist() == [False, False, False]
    match_relevance([[]], evidence.gather([0]), *one, run_index=index, run_cases=np.array([0]))
    assert index.phrase_in_run().tolist() == [True, True, False]


def test_run_wide_finds_other_cases_phrases_in_every_length_class():
    # Each case's evidence is only in the other case's chunks: short (< 4 bytes),
    # 4-7 bytes and >= 8 bytes after normalisation, with OCR artefacts.
    evidence = [["ab", "Ｗｘｙｚ", "⼤模型 retrie val 1.5~2s", "missing phrase"], ["endofthetext", "c d", "wxyz"]]
    texts = [["endofthetext at the end? no: x endofthetext", "c\td"], ["AB", "wx yz", "大模型 retrie-\nval 1.5～2s"]]
    files = [["f"] * len(t) for t in texts]
    m = match_relevance([[], []], evidence, files, texts, run_wide=True)
    assert m.phrase_in_run.tolist() == [True, True, True, False, True, True, True]
    assert m.phrase_any_rank.tolist() == [0, 0, 0, 0, 0, 0, 2]


def _view(data: bytes, buf: int = 0, off: int = 0) -> bytes:
    """One Arrow string view: inline when <= 12 bytes, else (prefix, buffer, offset)."""
    import struct

    if len(data) <= 12:
        return struct.pack("<I", len(data)) + data.ljust(12, b"\0")
    return struct.pack("<I4sII", len(data), data[:4], buf, off)


def test_string_view_texts_are_borrowed_and_validated():
    buf = "xx大模型 retrieval augmented generation".encode()
    long_text = buf[2:]
    views = np.frombuffer(_view(long_text, 0, 2) + _view("⼤模型".encode()), np.uint8)
    args = (np.array([0, 0], np.int64), string_column([]), np.array([0, 1], np.int64), string_column(["大模型"]),
            np.array([0, 2], np.int64), string_column(["a", "b"]))
    out = _core.evidence_match_views(*args, views, [np.frombuffer(buf, np.uint8)], run_wide=True)
    assert out["relevant"].tolist() == [True, True] and out["phrase_in_run"].tolist() == [True]
    # Polars columns take this path; the answer equals the copying one.
    texts = pl.Series([[long_text.decode(), "⼤模型"]], dtype=pl.List(pl.String))
    assert match_relevance([[]], [["大模型"]], [["a", "b"]], texts).relevant.tolist() == [True, True]
    for bad_views, bad_buf in [
        (_view(b"\xff" * 13), b"\xff" * 13),  # invalid UTF-8 in the buffer
        (_view(buf[3:16], 0, 3), buf),  # starts inside 大
        (_view(buf[0:20], 0, 30), buf),  # out of bounds
        (_view(b"\xe5\xa4" + b"a" * 10), b""),  # inline, invalid
    ]:
        with pytest.raises(InputError, match="UTF-8|outside|splits"):
            _core.evidence_match_views(*args[:4], np.array([0, 1], np.int64), string_column(["a"]),
                                       np.frombuffer(bad_views, np.uint8), [np.frombuffer(bad_buf, np.uint8)])


def test_chunks_without_a_file_are_matched_on_evidence_alone():
    expected_files = [["a.md"], ["b.md"], ["c.md"], []]
    evidence = [["alpha"], [], ["gamma"], ["delta"]]
    chunk_files = [[None, "x.md"], [None], ["c.md", None], [None]]
    chunk_texts = [["alpha", "alpha"], ["beta"], ["gamma", "gamma"], ["delta"]]
    for files in (chunk_files, pl.Series(chunk_files, dtype=pl.List(pl.String))):
        m = match_relevance(expected_files, evidence, files, chunk_texts)
        # Case 0: the chunk without a file counts on evidence; the one in x.md keeps the file rule.
        # Case 1: files expected, no phrase, no file given: undecidable. Case 3 expects no file: unaffected.
        assert m.file_unknown.tolist() == [True, True, True, False]
        assert m.file_placeholder.tolist() == [True, False, True, False, True, False]
        assert m.relevant.tolist() == [True, False, False, True, True, True]
        assert m.labeled.tolist() == [True, False, True, True]
        assert m.file_hit(5).to_list() == [None, None, None, None]
        assert m.all_files_hit(5).to_list() == [None, None, None, None]
        assert m.files["first_rank"].to_list() == [None, None, None]
        assert m.evidence_recall(5).to_list() == [1.0, None, 1.0, 1.0]
    # Every chunk with a file: nothing is marked, results as before.
    m = match_relevance(expected_files, evidence, [["a.md", "x.md"], ["b.md"], ["c.md", "c.md"], ["d.md"]], chunk_texts)
    assert m.file_unknown is None and m.file_placeholder is None
    assert m.file_hit(5).to_list() == [True, True, True, None]


def test_a_batch_without_any_file_leaves_every_file_result_unknown():
    # Case 1 retrieved nothing: with no file anywhere in the batch its file-level result is unknown too.
    m = match_relevance([["a.md"], ["b.md"], []], [["alpha"], ["beta"], ["x"]], [[None], [], [None]], [["alpha"], [], ["x"]])
    assert m.file_unknown.tolist() == [True, True, False]
    assert m.file_hit(5).to_list() == [None, None, None]
    assert m.relevant.tolist() == [True, True]
    assert m.labeled.tolist() == [True, True, True]


def test_parquet_texts_regrouped_by_polars_match(tmp_path):
    # Polars' Parquet reader leaves the pages' 4-byte length prefixes between the
    # values in its string-view buffers; a 500-byte value's prefix (f4 01 00 00) is
    # not UTF-8, so only each view's own bytes may be validated.
    rows = [("文本" * 80 + f" retrieval {i} ", i // 5, f"f{i % 3}.md") for i in range(300)]
    pl.DataFrame({"text": [r[0] for r in rows], "case": [r[1] for r in rows], "file": [r[2] for r in rows]}).write_parquet(tmp_path / "c.parquet")
    grouped = pl.read_parquet(tmp_path / "c.parquet").group_by("case", maintain_order=True).agg("file", "text")
    n = grouped.height
    phrases = pl.Series([["Retrieval 3"]] * n, dtype=pl.List(pl.String))
    no_files = pl.Series([[] for _ in range(n)], dtype=pl.List(pl.String))
    assert _view_list_column_used(grouped["text"])
    m = match_relevance(no_files, phrases, grouped["file"], grouped["text"], run_wide=True)
    expected = [ref_found(t, "Retrieval 3") for t, _, _ in rows]
    assert m.relevant.tolist() == expected and sum(expected) == 11
    assert m.phrase_in_run.tolist() == [True] * n


def _view_list_column_used(texts: pl.Series) -> bool:
    from ragmeter.evidence import _view_list_column

    return _view_list_column(texts) is not None
