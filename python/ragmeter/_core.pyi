# Type stubs for the Rust extension module ragmeter._core (rust/ragmeter-py).
# Each developer appends the section for the functions they register; string
# columns are (offsets int64[n + 1], data uint8[...]) tuples in Arrow layout
# (see ragmeter._columns.string_column).
from __future__ import annotations

from typing import Any, Optional, Tuple, final

import numpy as np
import numpy.typing as npt

_StrColumn = Tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]
# A TREC file's facts for its messages: (path, file line of each row, first line not UTF-8 or None)
_TrecFileFacts = Tuple[str, npt.NDArray[np.int64], Optional[int]]

class RagmeterError(ValueError): ...
class InputError(RagmeterError): ...
class MeasureError(RagmeterError): ...

__version__: str

# --- evidence (rust/ragmeter-py/src/evidence.rs) ---------------------------

def evidence_normalize(text: str) -> str: ...
def evidence_normalize_dehyphenated(text: str) -> Optional[str]: ...
def evidence_normalize_file_name(name: str) -> str: ...
def evidence_match(
    file_offsets: npt.NDArray[np.int64],
    expected_files: _StrColumn,
    phrase_offsets: npt.NDArray[np.int64],
    phrases: _StrColumn,
    chunk_offsets: npt.NDArray[np.int64],
    chunk_files: _StrColumn,
    chunk_texts: _StrColumn,
    run_wide: bool = False,
    run_index: Optional[RunPhraseIndex] = None,
    run_phrases: Optional[npt.NDArray[np.int64]] = None,
    text_ids: Optional[npt.NDArray[np.int32]] = None,
) -> dict[str, np.ndarray]:
    """Keys: labeled (bool, per case); file_match, relevant (bool) and
    phrases_found (uint32) per chunk; phrase_first_rank, phrase_any_rank
    (uint32, 1-based, 0 = never) and phrase_empty (bool) per phrase;
    file_first_rank (uint32) per expected file; with run_wide, also
    phrase_in_run (bool) per phrase: found in some chunk of any case. With
    run_index and run_phrases (per phrase, its index in run_index), the chunk
    texts are checked against run_index instead (see RunPhraseIndex). With
    text_ids, the texts are dictionary-encoded: chunk_texts holds the distinct
    values and text_ids, per chunk, its value's index (negative: a null text,
    matched as empty)."""
    ...
def strings_gather(
    offsets: npt.NDArray[np.int64], data: npt.NDArray[np.uint8], ids: npt.NDArray[np.int32]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
    """The strings values[ids[i]] (empty where ids[i] is negative) of the
    string column (offsets, data), as (offsets, data) in large_string layout."""
    ...
def evidence_match_views(
    file_offsets: npt.NDArray[np.int64],
    expected_files: _StrColumn,
    phrase_offsets: npt.NDArray[np.int64],
    phrases: _StrColumn,
    chunk_offsets: npt.NDArray[np.int64],
    chunk_files: _StrColumn,
    text_views: npt.NDArray[np.uint8],
    text_buffers: list[npt.NDArray[np.uint8]],
    run_wide: bool = False,
    run_index: Optional[RunPhraseIndex] = None,
    run_phrases: Optional[npt.NDArray[np.int64]] = None,
) -> dict[str, np.ndarray]:
    """evidence_match with the chunk texts in Arrow string-view layout (16-byte
    views, no nulls, and their data buffers), borrowed when read-only."""
    ...
def evidence_phrases_in_texts(phrases: _StrColumn, texts: _StrColumn) -> npt.NDArray[np.bool_]: ...

@final
class RunPhraseIndex:
    """The run-wide check of a run matched a slice at a time: built from every
    evidence phrase of the golden set; each evidence_match* call given it
    checks its chunk texts against it while matching them."""
    def __new__(cls, phrases: _StrColumn) -> RunPhraseIndex: ...
    def __len__(self) -> int: ...
    def phrase_in_run(self) -> npt.NDArray[np.bool_]:
        """Per phrase: found in some chunk text matched with this index so far."""
        ...

# --- rank metrics and trec_eval (rust/ragmeter-py/src/trec.rs) -------------

@final
class TrecOptions:
    """trec_eval's options that change the numbers (-l, -M, -c, -J, -N)."""
    def __new__(
        cls,
        relevance_level: int = 1,
        max_docs: Optional[int] = None,
        complete: bool = False,
        judged_only: bool = False,
        num_docs_in_coll: int = 0,
    ) -> TrecOptions: ...

def trec_eval_output(
    qrels_path: str,
    run_path: str,
    measures: list[str],
    options: Optional[TrecOptions] = None,
    per_query: bool = False,
    summary: bool = True,
    run_text: Optional[bytes] = None,
) -> tuple[str, Optional[tuple[str, int]]]:
    """trec_eval's output for QRELS and RUN (``run_text``: the run's bytes, from stdin) and where a file is first
    not UTF-8, (path, line), or None. When either file is not UTF-8 both are read byte for byte, as trec_eval reads them: each byte is the character of that code
    point (Latin-1), so the output's encode("latin-1") is trec_eval's output, ids as their bytes."""
    ...
def trec_evaluate_files(
    qrels_path: str,
    run_path: str,
    measures: list[str],
    options: Optional[TrecOptions] = None,
) -> dict[str, Any]:
    """Keys: names, kinds, per_query_names, qids, missing, relstrings,
    values (float64[n_queries, n_values]), summary (float64[n_values]),
    run_id, run_only_queries, not_utf8 ((path, line) where a file is first not UTF-8:
    both were read byte for byte, each byte a Latin-1 character of the ids; or None)."""
    ...
def trec_evaluate_columns(
    qrels_qid: _StrColumn,
    qrels_doc: _StrColumn,
    qrels_rel: npt.NDArray[np.int64],
    run_qid: _StrColumn,
    run_doc: _StrColumn,
    run_score: npt.NDArray[np.float64],
    run_id: str,
    measures: list[str],
    options: Optional[TrecOptions] = None,
    qrels_groups: Optional[npt.NDArray[np.int64]] = None,
    run_groups: Optional[npt.NDArray[np.int64]] = None,
    qrels_file: Optional[_TrecFileFacts] = None,
    run_file: Optional[_TrecFileFacts] = None,
) -> dict[str, Any]:
    """qrels_file / run_file: for the columns of a file (trec_read_qrels / trec_read_run give them), its path,
    the file line of each row and its first line not UTF-8 (or None). Errors then name the file and its lines
    instead of "qrels" / "run" and rows; the ids of a file read byte for byte are shown as bytes (\\xNN beyond
    ASCII), and a judged non-ASCII query missing beside such a file says why and how to convert it."""
def trec_read_qrels(
    path: str,
) -> tuple[_StrColumn, _StrColumn, npt.NDArray[np.int64], npt.NDArray[np.int64], _TrecFileFacts]:
    """A qrels file as (query ids, one per group of consecutive lines; documents;
    relevance; group offsets), the inputs of trec_evaluate_columns, and the file's facts
    (trec_evaluate_columns's qrels_file): its path, the line of each row, and the line
    where it is first not UTF-8 (it was then read byte for byte, each byte a Latin-1
    character) or None."""
def trec_read_run(
    path: str,
) -> tuple[_StrColumn, _StrColumn, npt.NDArray[np.float64], npt.NDArray[np.int64], _TrecFileFacts]:
    """A run file as trec_read_qrels reads qrels (values: float64 scores)."""
def rank_metrics(
    offsets: npt.NDArray[np.int64],
    grades: npt.NDArray[np.float64],
    num_relevant: npt.NDArray[np.float64],
    metrics: list[str],
    relevance_level: float = 1.0,
    ideal_offsets: Optional[npt.NDArray[np.int64]] = None,
    ideal_grades: Optional[npt.NDArray[np.float64]] = None,
) -> npt.NDArray[np.float64]: ...
def threshold_sweep(
    offsets: npt.NDArray[np.int64],
    grades: npt.NDArray[np.float64],
    scores: npt.NDArray[np.float64],
    thresholds: list[float],
    k: int,
    relevance_level: float = 1.0,
) -> dict[str, npt.NDArray[np.float64]]: ...
def trec_known_measures() -> list[str]: ...

# --- stats: seeded bootstrap kernel (rust/ragmeter-py/src/stats.rs)
BOOTSTRAP_BLOCK: int
def bootstrap_means(
    values: npt.NDArray[np.float64],
    codes: npt.NDArray[np.int64],
    n_groups: int,
    n_resamples: int,
    seed: int,
    threads: Optional[int] = None,
) -> npt.NDArray[np.float64]:
    """Resampled means (n_resamples, 1 + n_groups, k); slot 0 overall, NaN = unscored."""
    ...
def bootstrap_counts(n: int, n_resamples: int, seed: int) -> npt.NDArray[np.int32]: ...
