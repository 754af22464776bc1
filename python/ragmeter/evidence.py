"""Evidence-phrase matching: is a retrieved chunk the one that holds the answer?

A golden case names its expected files and *evidence phrases* (short quotes
that must appear in the answer chunk). Both sides are normalised before
matching, in Rust (``ragmeter._core``), over the whole batch at once with the
GIL released:

* **NFKC**: Kangxi radicals (``⼤`` U+2F24 becomes ``大``), full-width forms
  (``ＲＡＧ１`` becomes ``RAG1``), ligatures, circled digits…;
* **no white space**: every Unicode ``White_Space`` character is removed
  (spaces, tabs, line breaks, NBSP, U+3000…), as are the invisible format
  characters PDF extractors leave behind (soft hyphen U+00AD, U+200B..U+200D,
  U+2060, U+FEFF);
* **lower case**, character by character, with Greek final ``ς`` folded to ``σ``.

Line-break hyphenation: a chunk is matched in two variants, the normalised
text and (only if it has any) the same text with *line-break hyphens* dropped:
a ``-`` or U+2010 right after a non-space character and followed by optional
spaces, a line break and more text. So ``retrie-\\nval`` matches ``retrieval``
and ``state-of-the-\\nart`` still matches ``state-of-the-art``. Phrases are
normalised without this step.

Files are compared case-insensitively after :func:`normalize_file_name`
(NFC, trimmed, ``\\`` to ``/``, no leading ``./``): equal, or one is a suffix
of the other on a ``/`` boundary (``guide.pdf`` matches ``docs/guide.pdf``;
``a/guide.pdf`` does not match ``b/guide.pdf``).

A retrieved chunk is **relevant** when its file is one of the expected files
(any file when none are given) and it contains at least one evidence phrase
(any chunk of an expected file when no phrase is given). Phrases that
normalise to the empty string are ignored; a case with neither files nor
non-empty phrases is unlabelled and has no relevant chunk.

:func:`match_relevance` returns ranks rather than top-k flags, so any cut-off
can be applied afterwards: ``phrase_first_rank`` is the 1-based rank of the
first chunk *of an expected file* containing the phrase (0 = never), so the
phrase counts for evidence recall at k when ``0 < rank <= k``.

Every retrieved chunk is normalised and matched, including chunks of files
the case does not expect and chunks below any k: ``phrase_any_rank`` (the
phrase was retrieved, from the wrong file), ``phrases_found`` per chunk
(``chunks.parquet``), the sweep over thresholds and the run-wide "phrase in no
chunk" check all need them. The texts reach Rust as the Arrow buffers Polars
holds (string views, no copy and no Python object per row); a run's nested
``retrieved`` column is split with Polars expressions
(:func:`retrieved_columns`), never converted to Python lists.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

import numpy as np
import polars as pl

from ragmeter import _core
from ragmeter._columns import StringColumn, arrow_from_numpy, offsets_from_lengths, string_column

__all__ = [
    "normalize",
    "normalize_dehyphenated",
    "normalize_file_name",
    "match_relevance",
    "phrases_in_texts",
    "retrieved_columns",
    "EvidenceMatch",
    "RunPhrases",
]


def normalize(text: str) -> str:
    """Normalise ``text`` for evidence matching (NFKC, no white space, lower case)."""
    return _core.evidence_normalize(text)


def normalize_dehyphenated(text: str) -> Optional[str]:
    """The second matching variant of a chunk text (line-break hyphens dropped), or None."""
    return _core.evidence_normalize_dehyphenated(text)


def normalize_file_name(name: str) -> str:
    """The form in which file names are compared."""
    return _core.evidence_normalize_file_name(name)


def _list_column(values: Any, name: str) -> Tuple[np.ndarray, StringColumn]:
    """Group offsets (n + 1) and the flattened string column of a list[str] column.

    Accepts a Polars Series (nulls count as empty lists) or a sequence of lists.
    """
    offsets, column, _nulls = _list_column_with_nulls(values, name)
    return offsets, column


def _list_column_with_nulls(values: Any, name: str) -> Tuple[np.ndarray, StringColumn, Optional[np.ndarray]]:
    """:func:`_list_column`, and which flattened values were null (None when none was); nulls become ``""``."""
    if not isinstance(values, pl.Series):
        values = pl.Series(name, [list(v) if v is not None else [] for v in values], dtype=pl.List(pl.String))
    if values.dtype == pl.List(pl.Null):
        values = values.cast(pl.List(pl.String))
    if not isinstance(values.dtype, pl.List):
        raise TypeError(f"{name}: expected a list[str] column, got {values.dtype}")
    offsets = offsets_from_lengths(_list_lengths(values))
    # Polars flattens (pyarrow's flatten is a compute kernel, slow on its first call).
    flat = values.explode(empty_as_null=False, keep_nulls=False)
    if offsets[-1] != len(flat):  # pragma: no cover - defensive
        raise ValueError(f"{name}: list lengths do not add up to the flattened values")
    nulls = None
    if flat.null_count():
        nulls = flat.is_null().to_numpy()
        if flat.dtype == pl.String:
            flat = flat.fill_null("")
    str_offsets, data = string_column(flat)
    # A read-only view over the Arrow buffer (immutable by Arrow's contract):
    # the binding borrows read-only data instead of copying it.
    data = data.view()
    data.flags.writeable = False
    return offsets, (str_offsets, data), nulls


def _list_lengths(values: pl.Series) -> np.ndarray:
    """Per row, the length of a list column (0 for a null list), with Polars: pyarrow's compute
    kernels would cost a few tenths of a second on their first call (and import pandas)."""
    return values.list.len().fill_null(0).to_numpy()


def _view_list_column(values: Any) -> Optional[Tuple[np.ndarray, np.ndarray, list]]:
    """Group offsets, string views and data buffers of a Polars list[str] column,
    as Polars holds them (Arrow string-view layout), with no copy of the text.

    None when the column is not a Polars Series in that layout or has nulls
    (the caller then takes :func:`_list_column`).
    """
    import pyarrow as pa

    if not isinstance(values, pl.Series) or values.dtype != pl.List(pl.String):
        return None
    try:
        arr = values.to_arrow(compat_level=pl.CompatLevel.newest())
    except Exception:  # pragma: no cover - older Polars
        return None
    if isinstance(arr, pa.ChunkedArray):
        if arr.num_chunks != 1:
            return None
        arr = arr.chunk(0)
    if not (pa.types.is_large_list(arr.type) or pa.types.is_list(arr.type)):
        return None
    # The child values the lists cover (pyarrow's flatten is a compute kernel, slow on its first call).
    # (From the buffer: pyarrow's to_numpy imports pandas.)
    list_offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64 if pa.types.is_large_list(arr.type) else np.int32,
                                 count=len(arr) + 1 + arr.offset)[arr.offset :]
    offsets = offsets_from_lengths(_list_lengths(values))
    if not np.array_equal(np.diff(list_offsets), np.diff(offsets)):  # a null list over values
        return None
    flat = arr.values.slice(int(list_offsets[0]), int(offsets[-1]))
    if not pa.types.is_string_view(flat.type) or flat.null_count:
        return None
    bufs = flat.buffers()
    views = np.frombuffer(bufs[1], dtype=np.uint8)[flat.offset * 16 : (flat.offset + len(flat)) * 16] if len(flat) else np.zeros(0, np.uint8)
    data = [np.frombuffer(b, dtype=np.uint8) if b is not None and b.size else np.zeros(0, np.uint8) for b in bufs[2:]]
    for a in [views, *data]:
        a.flags.writeable = False  # read-only: borrowed by the binding, not copied
    return offsets, views, data


def retrieved_columns(retrieved: pl.Series) -> Tuple[pl.Series, pl.Series]:
    """Split a run's ``retrieved`` column (list[struct{file, text, ...}]) into list[str] files and texts."""
    files = retrieved.list.eval(pl.element().struct.field("file")).alias("chunk_files")
    texts = retrieved.list.eval(pl.element().struct.field("text")).alias("chunk_texts")
    return files, texts


@dataclass
class EvidenceMatch:
    """Result of :func:`match_relevance` (one row per case, chunk, phrase or expected file).

    Attributes hold the raw arrays returned by Rust; the properties present
    them as Polars frames.
    """

    labeled: np.ndarray  # bool, per case
    chunk_offsets: np.ndarray  # int64, n_cases + 1
    phrase_offsets: np.ndarray
    file_offsets: np.ndarray
    file_match: np.ndarray  # bool, per chunk
    relevant: np.ndarray  # bool, per chunk
    phrases_found: np.ndarray  # uint32, per chunk
    phrase_first_rank: np.ndarray  # uint32, per phrase (expected-file chunks), 0 = never
    phrase_any_rank: np.ndarray  # uint32, per phrase (any chunk), 0 = never
    phrase_empty: np.ndarray  # bool, per phrase
    file_first_rank: np.ndarray  # uint32, per expected file, 0 = never
    phrase_in_run: Optional[np.ndarray] = None  # bool, per phrase: in some chunk of any case (run_wide only)
    # bool, per case: expects files but some retrieved chunk has no file (null), matched on evidence
    # alone, so the case's file-level results are unknown; None when every chunk has a file.
    file_unknown: Optional[np.ndarray] = None
    # bool, per chunk: had no file and was given a placeholder (its file_match is unknown).
    file_placeholder: Optional[np.ndarray] = None

    @property
    def n_cases(self) -> int:
        return len(self.labeled)

    def _case_index(self, offsets: np.ndarray) -> np.ndarray:
        return np.repeat(np.arange(self.n_cases, dtype=np.uint32), np.diff(offsets))

    def _rank_index(self, offsets: np.ndarray) -> np.ndarray:
        n = int(offsets[-1])
        return (np.arange(n, dtype=np.int64) - np.repeat(offsets[:-1], np.diff(offsets))).astype(np.uint32)

    @property
    def chunks(self) -> pl.DataFrame:
        """Per retrieved chunk: ``case``, ``rank`` (1-based), ``file_match``, ``relevant`` (both as in
        :meth:`chunk_marks`: null where not decided), ``phrases_found``."""
        relevant, file_match = self.chunk_marks()
        return pl.DataFrame([
            pl.Series("case", self._case_index(self.chunk_offsets)),
            pl.Series("rank", self._rank_index(self.chunk_offsets) + 1),
            file_match, relevant,
            pl.Series("phrases_found", self.phrases_found),
        ])

    def chunk_marks(self) -> Tuple[pl.Series, pl.Series]:
        """Per chunk, ``relevant`` and ``file_match`` as ``chunks.parquet`` has them (the arrays :attr:`relevant`
        and :attr:`file_match` hold Rust's false and true where these are null).

        Both are null where they were not decided, never false: ``relevant`` in every chunk of a case whose
        relevance was not decided (not :attr:`labeled`: unlabelled, or expecting files alone with chunks that
        give none, whose ``hit`` is null), so that counting the column never counts such a chunk as a miss;
        ``file_match`` in a chunk without a file of a case expecting files (:attr:`file_placeholder`), and in
        every chunk of an unlabelled case (it expects nothing a file could match). A labelled case expecting no
        file keeps ``file_match`` true (any file passes). Masks over whole arrays, no loop over chunks: this
        runs for every slice of a streamed run."""
        relevant = pl.Series("relevant", self.relevant.astype(bool))
        file_match = pl.Series("file_match", self.file_match.astype(bool))
        file_unknown = self.file_placeholder  # a chunk without a file: unknown, not a match
        undecided = ~self.labeled.astype(bool)
        if undecided.any():
            lengths = np.diff(self.chunk_offsets)
            relevant = relevant.set(pl.Series(np.repeat(undecided, lengths)), None)
            # a case undecided for want of a file is labelled: its chunks that give a file keep file_match
            unlabelled = undecided if self.file_unknown is None else undecided & ~self.file_unknown.astype(bool)
            per_chunk = np.repeat(unlabelled, lengths)
            file_unknown = per_chunk if file_unknown is None else file_unknown | per_chunk
        if file_unknown is not None:
            file_match = file_match.set(pl.Series(file_unknown), None)
        return relevant, file_match

    @property
    def phrases(self) -> pl.DataFrame:
        """Per (case, phrase): ``case``, ``phrase_index``, ``first_rank``, ``any_rank``, ``empty``."""
        return pl.DataFrame(
            {
                "case": self._case_index(self.phrase_offsets),
                "phrase_index": self._rank_index(self.phrase_offsets),
                "first_rank": self.phrase_first_rank,
                "any_rank": self.phrase_any_rank,
                "empty": self.phrase_empty,
            }
        )

    @property
    def files(self) -> pl.DataFrame:
        """Per (case, expected file): ``case``, ``file_index``, ``first_rank`` (null where files are unknown)."""
        case = self._case_index(self.file_offsets)
        first_rank = pl.Series("first_rank", self.file_first_rank)
        if self.file_unknown is not None:
            first_rank = first_rank.set(pl.Series(self.file_unknown[case]), None)
        return pl.DataFrame({"case": case, "file_index": self._rank_index(self.file_offsets), "first_rank": first_rank})

    def relevance_lists(self, name: str = "relevant") -> pl.Series:
        """Per case, the relevance of its chunks in rank order (list[bool]; null in a case whose relevance
        was not decided, as in :meth:`chunk_marks`)."""
        flat = self.chunk_marks()[0].alias(name)
        lengths = np.diff(self.chunk_offsets)
        return _regroup(flat, lengths, name)

    def _per_case_share(self, hit: np.ndarray, offsets: np.ndarray, counted: np.ndarray) -> np.ndarray:
        """Per case: hit.sum() / counted.sum() over its rows; NaN when nothing is counted."""
        case = self._case_index(offsets)
        num = np.bincount(case, weights=(hit & counted).astype(np.float64), minlength=self.n_cases)
        den = np.bincount(case, weights=counted.astype(np.float64), minlength=self.n_cases)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)

    def evidence_recall(self, k: int) -> pl.Series:
        """Per case: share of its non-empty phrases found in top-k chunks of its expected files (null without phrases)."""
        ranks = self.phrase_first_rank.astype(np.int64)
        share = self._per_case_share((ranks > 0) & (ranks <= k), self.phrase_offsets, ~self.phrase_empty)
        return pl.Series("evidence_recall", share, nan_to_null=True)

    def file_hit(self, k: int) -> pl.Series:
        """Per case: some expected file appears in the top k (null when no file is expected or files are unknown)."""
        share = self._per_case_share(self._files_in_top(k), self.file_offsets, np.ones(len(self.file_first_rank), bool))
        return _masked_bool("file_hit", share > 0, self._file_level_unknown(share))

    def all_files_hit(self, k: int) -> pl.Series:
        """Per case: every expected file appears in the top k (null when no file is expected or files are unknown)."""
        share = self._per_case_share(self._files_in_top(k), self.file_offsets, np.ones(len(self.file_first_rank), bool))
        return _masked_bool("all_files_hit", share == 1.0, self._file_level_unknown(share))

    def _file_level_unknown(self, share: np.ndarray) -> np.ndarray:
        """No expected file, or a chunk without a file (placeholder ranks say nothing about files)."""
        unknown = np.isnan(share)
        return unknown | self.file_unknown if self.file_unknown is not None else unknown

    def _files_in_top(self, k: int) -> np.ndarray:
        ranks = self.file_first_rank.astype(np.int64)
        return (ranks > 0) & (ranks <= k)


def _masked_bool(name: str, values: np.ndarray, null: np.ndarray) -> pl.Series:
    """A Boolean Series with nulls where ``null`` is true."""
    return pl.select(
        pl.when(pl.lit(pl.Series(null, dtype=pl.Boolean))).then(None).otherwise(pl.lit(pl.Series(values, dtype=pl.Boolean)))
    ).to_series().alias(name)


def _regroup(flat: pl.Series, lengths: np.ndarray, name: str) -> pl.Series:
    """Rebuild a list column from flat values and per-row lengths (zero-copy through Arrow)."""
    import pyarrow as pa

    offsets = offsets_from_lengths(lengths)
    values = flat.to_arrow()
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return pl.Series(name, pa.LargeListArray.from_arrays(arrow_from_numpy(offsets), values))


def match_relevance(
    expected_files: Any,
    expected_evidence: Any,
    chunk_files: Any,
    chunk_texts: Any,
    *,
    run_wide: bool = False,
    no_file_in_run: Optional[bool] = None,
    run_index: Optional["RunPhrases"] = None,
    run_cases: Optional[np.ndarray] = None,
) -> EvidenceMatch:
    """Decide relevance for every retrieved chunk of every case, in Rust.

    All four arguments are per-case list[str] columns of the same length
    (Polars Series, or sequences of lists; ``chunk_texts`` may also be
    ``(group offsets, (offsets, data))`` in Arrow layout, the data borrowed
    when read-only, or ``(group offsets, (offsets, data), ids)`` for texts
    dictionary-encoded: text ``i`` is value ``ids[i]``, empty when negative,
    and copies are known by their index): the case's expected files, its
    evidence phrases, and the file and text of each retrieved chunk in rank
    order (``chunk_files[i]`` and ``chunk_texts[i]`` must have equal lengths;
    see :func:`retrieved_columns`). Null lists count as empty.

    With ``run_wide=True`` the result also has ``phrase_in_run``: per phrase,
    does it occur in some retrieved chunk of *any* case (what
    :func:`phrases_in_texts` answers over all chunk texts). A phrase found in
    its own case is in the run; after the match, the others are searched for
    in every chunk text, except the texts whose raw bytes lack any character
    that can normalise to a character each such phrase needs (those are not
    normalised again).

    With ``run_index`` (a :class:`RunPhrases` over the golden set's phrases) and ``run_cases`` (the golden
    position of each of these cases), these chunk texts are checked against that index instead, in the same
    pass: how a run matched a slice at a time gets its run-wide check.

    A null chunk file means the retriever gave none. Such a chunk of a case
    that expects files is matched on evidence alone: the Rust matcher gets the
    case's first expected file in its place (so it passes the file test; chunks
    that have a file keep the file rule), and the case is marked in
    ``file_unknown``. Its file-level results (``file_hit``, ``all_files_hit``,
    ``files``; the placeholder chunks' ``file_match``) are then unknown, not a
    miss or a hit. When no chunk of the batch has a file, that holds for every
    case expecting files, empty retrievals included. A case that expects files but has no evidence phrase cannot
    be decided from such a chunk: it comes back unlabelled, nothing relevant. ``no_file_in_run`` says whether
    that holds when these chunks are one slice of a run (default: decided from these chunks; see
    :func:`mark_no_file_in_run` for the whole run).
    """
    if not isinstance(expected_files, pl.Series):
        expected_files = pl.Series("expected_files", [list(v) if v is not None else [] for v in expected_files], dtype=pl.List(pl.String))
    chunk_offsets, cfiles, file_nulls = _list_column_with_nulls(chunk_files, "chunk_files")
    file_offsets, files = _list_column(expected_files, "expected_files")
    phrase_offsets, phrases = _list_column(expected_evidence, "expected_evidence")
    views = None
    text_ids = None
    if _is_split_list(chunk_texts):  # (group offsets, (offsets, data)[, ids]): already in Arrow layout
        text_offsets, texts, *dictionary = chunk_texts
        text_ids = dictionary[0] if dictionary else None
    else:
        views = _view_list_column(chunk_texts)
        if views is not None:
            text_offsets = views[0]
        else:
            text_offsets, texts = _list_column(chunk_texts, "chunk_texts")
    n = len(chunk_offsets) - 1
    if not (len(file_offsets) - 1 == len(phrase_offsets) - 1 == n == len(text_offsets) - 1):
        raise ValueError("match_relevance: all columns must have one row per case")
    if not np.array_equal(chunk_offsets, text_offsets):
        bad = int(np.flatnonzero(np.diff(chunk_offsets) != np.diff(text_offsets))[0])
        raise ValueError(f"match_relevance: case {bad} has a different number of chunk files and chunk texts")
    placeholders = None
    if file_nulls is not None:
        placeholders = _placeholder_files(expected_files, chunk_offsets, cfiles, file_nulls,
                                          bool(file_nulls.all()) if no_file_in_run is None else no_file_in_run)
        cfiles = placeholders[0]
    run: dict = {}
    if run_index is not None:
        if run_cases is None:
            raise ValueError("match_relevance: run_index needs run_cases (the golden position of each case)")
        run = {"run_index": run_index._index, "run_phrases": run_index.phrase_ids(np.asarray(run_cases, dtype=np.int64))}
    if views is not None:
        out = _core.evidence_match_views(file_offsets, files, phrase_offsets, phrases, chunk_offsets, cfiles, views[1], views[2],
                                         run_wide=run_wide, **run)
    else:
        out = _core.evidence_match(file_offsets, files, phrase_offsets, phrases, chunk_offsets, cfiles, texts,
                                   run_wide=run_wide, text_ids=text_ids, **run)
    match = EvidenceMatch(
        labeled=out["labeled"],
        chunk_offsets=chunk_offsets,
        phrase_offsets=phrase_offsets,
        file_offsets=file_offsets,
        file_match=out["file_match"],
        relevant=out["relevant"],
        phrases_found=out["phrases_found"],
        phrase_first_rank=out["phrase_first_rank"],
        phrase_any_rank=out["phrase_any_rank"],
        phrase_empty=out["phrase_empty"],
        file_first_rank=out["file_first_rank"],
        phrase_in_run=out.get("phrase_in_run"),
    )
    if placeholders is not None:
        _mark_unknown_files(match, placeholders[1], placeholders[2])
    return match


def _is_split_list(value: Any) -> bool:
    """A list[str] column given as ``(group offsets, (offsets, data))`` numpy arrays, or dictionary-encoded as
    ``(group offsets, (offsets, data) of the values, int32 value index per string, -1 for a null)``."""
    return isinstance(value, tuple) and len(value) in (2, 3) and isinstance(value[0], np.ndarray) \
        and isinstance(value[1], tuple)


def _placeholder_files(expected_files: pl.Series, chunk_offsets: np.ndarray, cfiles: StringColumn,
                       file_nulls: np.ndarray, no_file: bool) -> Tuple[StringColumn, np.ndarray, np.ndarray]:
    """Chunk files with each null of a case expecting files replaced by that case's first expected file.

    Returns the new column, which chunks got a placeholder, and which cases have one.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(chunk_offsets) - 1
    case = np.repeat(np.arange(n), np.diff(chunk_offsets))
    first = expected_files.list.first().cast(pl.String).to_arrow()
    if isinstance(first, pa.ChunkedArray):
        first = first.combine_chunks()
    first = first.cast(pa.large_string())
    placeholder = first.take(arrow_from_numpy(case))
    has_first = expected_files.list.first().is_not_null().to_numpy()  # Polars': pyarrow's to_numpy imports pandas
    replaced = file_nulls & has_first[case]
    offsets, data = cfiles
    current = pa.LargeStringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets), pa.py_buffer(data))
    filled = pc.if_else(arrow_from_numpy(replaced), placeholder, current)
    if no_file:
        # No chunk of the batch has a file (a retriever without files): file-level results are
        # unknown for every case expecting files, an empty retrieval's included.
        unknown = first.is_valid().to_numpy(zero_copy_only=False)
    else:
        unknown = np.bincount(case[replaced], minlength=n) > 0
    return string_column(filled), replaced, unknown


def _mark_unknown_files(match: EvidenceMatch, replaced: np.ndarray, unknown: np.ndarray) -> None:
    """Record the cases matched with placeholder files; those without an evidence phrase are undecided."""
    phrase_case = match._case_index(match.phrase_offsets)
    has_phrase = np.bincount(phrase_case[~match.phrase_empty.astype(bool)], minlength=match.n_cases) > 0
    undecided = unknown & ~has_phrase
    if undecided.any():
        match.labeled = match.labeled & ~undecided
        match.relevant = match.relevant & ~undecided[match._case_index(match.chunk_offsets)]
    match.file_unknown = unknown
    match.file_placeholder = replaced


def mark_no_file_in_run(match: EvidenceMatch, expected_files: pl.Series) -> None:
    """The whole run's chunks have no file: file-level results are unknown for every case expecting files
    (empty retrievals included), as :func:`match_relevance` decides over a whole run; for a match assembled
    from slices matched with ``no_file_in_run=False``."""
    unknown = expected_files.list.first().is_not_null().to_numpy()
    replaced = match.file_placeholder if match.file_placeholder is not None else np.zeros(len(match.relevant), bool)
    _mark_unknown_files(match, replaced, unknown)


class RunPhrases:
    """The run-wide check of a run matched a slice at a time: which of a golden set's evidence phrases occur in
    some retrieved chunk of any slice.

    Built once from the golden set's ``expected_evidence`` column; each slice's :func:`match_relevance` call
    given it (``run_index=``, ``run_cases=``) checks that slice's chunk texts against it in Rust while matching
    them (each text normalised once for both), and keeps none of them. Phrases found in their own case's
    chunks leave the index as the slices go. :meth:`phrase_in_run` is, per phrase of the golden set
    (flattened, golden order), what :func:`phrases_in_texts` over every chunk text of those slices answers.
    """

    def __init__(self, expected_evidence: pl.Series) -> None:
        self._offsets, phrases = _list_column(expected_evidence, "expected_evidence")
        self._index = _core.RunPhraseIndex(phrases)

    def phrase_ids(self, cases: np.ndarray) -> np.ndarray:
        """The golden set's phrase numbers of the cases at golden positions ``cases``, case after case."""
        lengths = np.diff(self._offsets)[cases]
        starts = np.repeat(self._offsets[:-1][cases] - offsets_from_lengths(lengths)[:-1], lengths)
        return (starts + np.arange(int(lengths.sum()), dtype=np.int64)).astype(np.int64)

    def phrase_in_run(self) -> np.ndarray:
        """Per phrase of the golden set: found in some chunk text of the slices matched so far."""
        return np.asarray(self._index.phrase_in_run(), dtype=bool)


def phrases_in_texts(phrases: Any, texts: Any) -> np.ndarray:
    """Per phrase (a str column), does it occur, normalised, in at least one of ``texts``?

    Use it over every retrieved chunk of a run to find evidence phrases no chunk
    contains (often an annotation slip such as ``1.5-2`` written for ``1.5~2``).
    """
    return _core.evidence_phrases_in_texts(string_column(phrases), string_column(texts))
