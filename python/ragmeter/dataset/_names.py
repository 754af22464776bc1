"""Field names and spellings of golden sets and runs, and the frames' schemas."""
from __future__ import annotations

import os
from typing import Any, Dict, Sequence, Tuple, Union

import polars as pl

from ragmeter import _parquet_ahead


#: At most this many problems are listed in one error message.
MAX_REPORTED = 50

CHUNK_DTYPE = pl.Struct({"file": pl.String, "chunk_id": pl.String, "text": pl.String, "score": pl.Float64})
RETRIEVED_DTYPE = pl.List(CHUNK_DTYPE)

GOLDEN_SCHEMA: Dict[str, Any] = {
    "id": pl.String,
    "question": pl.String,
    "expected_files": pl.List(pl.String),
    "expected_evidence": pl.List(pl.String),
    "reference_answer": pl.String,
    "category": pl.String,
    "source": pl.String,
    "tags": pl.List(pl.String),
    "labeled": pl.Boolean,
    "line": pl.Int64,
    "id_from_line": pl.Boolean,
}

RUN_SCHEMA: Dict[str, Any] = {
    "id": pl.String,
    "retrieved": RETRIEVED_DTYPE,
    "contexts": pl.List(pl.String),
    "answer": pl.String,
    "retrieval_mode": pl.String,
    "latency_ms": pl.Float64,
    "prompt_tokens": pl.Int64,
    "completion_tokens": pl.Int64,
    "cost": pl.Float64,
    "run_error": pl.String,
    # the record's 'retrieved' was null: no chunk list (read as an empty retrieval, and said so)
    "retrieved_null": pl.Boolean,
    "line": pl.Int64,
    "id_from_line": pl.Boolean,
}

# Accepted spellings, canonical name first (ragas' and DeepEval's names included). Public for the readers of
# records outside this module (``ragmeter.judge.Case.from_record``, ``judge --cases``); the private names are
# the same objects, kept for the code that uses them.
ID_NAMES = ("id", "case_id", "sample_id")
QUESTION_NAMES = ("question", "user_input", "input", "query")
#: golden-set fields (other than id and question) -> spellings
GOLDEN_ALIASES = {
    "expected_files": ("expectedFileNames", "expected_files", "expected_file_names", "expectedFiles"),
    "expected_evidence": ("expectedEvidence", "expected_evidence", "reference_contexts", "context"),
    "reference_answer": ("referenceAnswer", "reference_answer", "reference", "expected_output", "ground_truth"),
}
RETRIEVED_NAMES = _parquet_ahead.RETRIEVED_NAMES
ANSWER_NAMES = ("answer", "response", "actual_output")
#: run fields (other than id, retrieved and answer) -> spellings
RUN_ALIASES = {
    "retrieval_mode": ("retrieval_mode", "retrievalMode"),
    "latency_ms": ("latency_ms", "latencyMs"),
}
#: fields of one retrieved item -> spellings
CHUNK_ALIASES = {
    "file": ("file", "fileName", "file_name"),
    "chunk_id": ("chunk_id", "chunkId"),
    "text": _parquet_ahead.TEXT_NAMES,
    "score": ("score",),
}
_ID_NAMES, _QUESTION_NAMES, _GOLDEN_ALIASES = ID_NAMES, QUESTION_NAMES, GOLDEN_ALIASES
_RETRIEVED_NAMES, _ANSWER_NAMES, _RUN_ALIASES, _CHUNK_ALIASES = RETRIEVED_NAMES, ANSWER_NAMES, RUN_ALIASES, CHUNK_ALIASES

#: Every accepted field name, canonical first: (file kind, field) -> names.
FIELD_NAMES: Dict[Tuple[str, str], Tuple[str, ...]] = {
    ("golden, run", "id"): _ID_NAMES,
    ("golden", "question"): _QUESTION_NAMES,
    ("golden", "expected_files"): _GOLDEN_ALIASES["expected_files"],
    ("golden", "expected_evidence"): _GOLDEN_ALIASES["expected_evidence"],
    ("golden", "reference_answer"): _GOLDEN_ALIASES["reference_answer"],
    ("run", "retrieved"): _RETRIEVED_NAMES,
    ("run", "answer"): _ANSWER_NAMES,
    ("run", "retrieval_mode"): _RUN_ALIASES["retrieval_mode"],
    ("run", "latency_ms"): _RUN_ALIASES["latency_ms"],
    ("retrieved item", "file"): _CHUNK_ALIASES["file"],
    ("retrieved item", "chunk_id"): _CHUNK_ALIASES["chunk_id"],
    ("retrieved item", "text"): _CHUNK_ALIASES["text"],
}

#: Category of cases whose ids were made from line numbers and that name none.
UNCATEGORISED = "uncategorised"

Source = Union[str, "os.PathLike[str]", Sequence[Dict[str, Any]], Any]
