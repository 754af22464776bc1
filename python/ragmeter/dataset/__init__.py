"""Loading golden sets and retrieval runs.

Golden set (JSON Lines, one case per line; blank lines and lines starting with
``#`` or ``//`` are skipped; a JSON array of objects and Parquet are read too)::

    {"id": "fact-04-frontend-stack", "question": "...",
     "expectedFileNames": ["architecture.md"], "expectedEvidence": ["React 18"],
     "referenceAnswer": "...", "category": "fact", "source": "...", "tags": ["..."]}

``expected_files``, ``expected_evidence`` and ``reference_answer`` are accepted
too, and so are ragas' and DeepEval's names (see :data:`FIELD_NAMES`).
``category`` defaults to the id's prefix before the first ``-``.

Run (JSON Lines, a JSON array or Parquet)::

    {"id": "fact-04-frontend-stack",
     "retrieved": [{"file": "architecture.md", "chunk_id": "c12", "text": "...", "score": 0.83}],
     "contexts": ["..."], "answer": "...", "retrieval_mode": "hybrid",
     "latency_ms": 412, "usage": {"prompt_tokens": 1200, "completion_tokens": 80}, "cost": 0.0012}

A retrieved item may be a plain string (its text) and may omit ``file``
(``file`` is then null and the scorer decides relevance by evidence alone).
A file in which no line has an id gets ids from its line numbers
(``line-12``; ``row-3`` for in-memory rows), flagged in ``id_from_line``: a
golden set and a run join by line number only when neither has ids.

Every problem in an input is collected and reported at once, each as
``file:line: what is wrong`` (``name[row]`` for in-memory rows, ``file: row N``
for Parquet), in one :class:`ragmeter.errors.InputError`; the same problem on
many lines is one line (``51 lines: missing 'question' (lines 1, 2, ...)``),
and a file in the wrong shape (CSV, gzip, a pretty-printed object...) gets one
line saying what it looks like.

The package's modules, one concern each: ``_names`` (fields, spellings, schemas), ``_problems`` (collecting
problems into one error), ``_records`` (a source read as records with their file and line), ``_fields`` (one
field of a record, and the checks naming a record's problems), ``_golden``, ``_run`` and ``_repeats`` (the
loaders). Import from ``ragmeter.dataset``: the modules' names may move.
"""
from __future__ import annotations

from ragmeter._parquet_ahead import is_parquet as _is_parquet  # noqa: F401
from ragmeter.dataset._fields import _note  # noqa: F401
from ragmeter.dataset._golden import (  # noqa: F401
    OVERALL,
    _PY_WHITESPACE,
    _fast_golden,
    _load_golden,
    default_category,
    golden_fields,
    golden_fingerprint,
    load_golden,
    reusing_golden_loads,
)
from ragmeter.dataset._names import (  # noqa: F401
    ANSWER_NAMES,
    CHUNK_ALIASES,
    CHUNK_DTYPE,
    FIELD_NAMES,
    GOLDEN_ALIASES,
    GOLDEN_SCHEMA,
    ID_NAMES,
    MAX_REPORTED,
    QUESTION_NAMES,
    RETRIEVED_DTYPE,
    RETRIEVED_NAMES,
    RUN_ALIASES,
    RUN_SCHEMA,
    UNCATEGORISED,
    Source,
    _ANSWER_NAMES,
    _CHUNK_ALIASES,
    _GOLDEN_ALIASES,
    _ID_NAMES,
    _QUESTION_NAMES,
    _RETRIEVED_NAMES,
    _RUN_ALIASES,
)
from ragmeter.dataset._records import (  # noqa: F401
    _SURROGATE_ESCAPE,
    _is_path,
    _lone_surrogate,
    _surrogate_message,
    polars_from_pandas,
    raw_records,
    read_text,
)
from ragmeter.dataset._repeats import RunRepeat, load_run_repeats  # noqa: F401
from ragmeter.dataset._run import (  # noqa: F401
    ParquetRun,
    RecordProblem,
    _run_from_columns,
    arrow_chunk_texts,
    check_id_sources,
    check_run_against_golden,
    load_run,
    run_record_problems,
)

# Data from ragas, DeepEval and Hugging Face datasets (see ragmeter.ecosystem): (golden, run) record lists.
from ragmeter.ecosystem import from_deepeval, from_hf, from_ragas, to_deepeval, to_ragas  # noqa: E402,F401

__all__ = [
    "load_golden",
    "load_run",
    "check_run_against_golden",
    "GOLDEN_SCHEMA",
    "RUN_SCHEMA",
    "RETRIEVED_DTYPE",
    "MAX_REPORTED",
    "FIELD_NAMES",
    "ID_NAMES",
    "QUESTION_NAMES",
    "GOLDEN_ALIASES",
    "RETRIEVED_NAMES",
    "ANSWER_NAMES",
    "RUN_ALIASES",
    "CHUNK_ALIASES",
    "golden_fingerprint",
    "check_id_sources",
    "RecordProblem",
    "run_record_problems",
    # re-exported for `from ragmeter.dataset import from_hf` (docs/api.md), which mypy --strict refuses otherwise
    "from_deepeval",
    "from_hf",
    "from_ragas",
    "to_deepeval",
    "to_ragas",
]
