"""Data from the RAG evaluation ecosystem as a ragmeter golden set and run.

Each converter returns ``(golden, run)``, two lists of records that every ragmeter entry point takes::

    golden, run = ragmeter.dataset.from_ragas(evaluation_dataset)
    result = ragmeter.evaluate(golden, run, judge=...)

* :func:`from_ragas`: a ragas ``EvaluationDataset`` (its ``samples``), a list of ``SingleTurnSample`` or of
  dicts, or a table (pandas, Polars, Arrow, Hugging Face) with ragas' columns ``user_input``,
  ``retrieved_contexts``, ``response``, ``reference`` and optionally ``reference_contexts``;
* :func:`from_deepeval`: DeepEval ``LLMTestCase`` objects (``input``, ``actual_output``, ``expected_output``,
  ``retrieval_context``, ``context``, ``name``) or an ``EvaluationDataset`` holding them (``test_cases``);
* :func:`from_hf`: a Hugging Face ``datasets.Dataset`` (or any table) in ragas' naming, ragas' older naming
  (``question``, ``answer``, ``contexts``, ``ground_truth``) or ragmeter's own.

Mapping: the question, the reference answer and the system's answer map one to one; the retrieved contexts
become the run's chunks in rank order (``retrieved``, with ``file`` ``"(unknown)"``: these libraries record no
source file, so file-level metrics are not measured) and its ``contexts``. The ground-truth contexts (ragas
``reference_contexts``, DeepEval ``context``) become ``expected_evidence``: a retrieved chunk containing one
is relevant. Without them a case is unlabelled and its retrieval is not scored (counted, never guessed).
Ids are taken from an ``id`` column (``name`` for DeepEval) when there is one, else ``case-0001``, ...

Nothing here imports ragas, DeepEval or datasets: their objects are read by attribute.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ragmeter.errors import InputError

__all__ = ["from_ragas", "from_deepeval", "from_hf"]

Records = List[Dict[str, Any]]

UNKNOWN_FILE = "(unknown)"
_RAGAS = {"question": "user_input", "answer": "response", "contexts": "retrieved_contexts", "reference": "reference",
          "evidence": "reference_contexts"}
_RAGAS_V01 = {"question": "question", "answer": "answer", "contexts": "contexts", "reference": "ground_truth",
              "evidence": "reference_contexts"}
_DEEPEVAL = {"question": "input", "answer": "actual_output", "contexts": "retrieval_context",
             "reference": "expected_output", "evidence": "context"}


def _rows(source: Any, name: str) -> List[Any]:
    """Rows (dicts or objects) of a list, a table or a dataset object."""
    import polars as pl

    if isinstance(source, (list, tuple)):
        return list(source)
    for attr in ("samples", "test_cases"):  # ragas / DeepEval EvaluationDataset
        items = getattr(source, attr, None)
        if isinstance(items, (list, tuple)) and items:
            return list(items)
    if isinstance(source, (str, bytes)) or source is None:
        raise InputError(f"{name}: expected a dataset, a table or a list of samples, got {type(source).__name__}")
    from ragmeter.api import as_source

    table = as_source(source, name)
    if isinstance(table, pl.DataFrame):
        return table.to_dicts()
    if type(table).__module__.split(".")[0] == "pandas":
        return pl.from_pandas(table).to_dicts()
    return list(table)


def _get(row: Any, key: str) -> Any:
    if isinstance(row, Mapping):
        return row.get(key)
    return getattr(row, key, None)


def _texts(value: Any, where: str, field: str) -> List[str]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InputError(f"{where}: {field} must be a list of texts, got {type(value).__name__}")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise InputError(f"{where}: {field}[{i}] must be a text, got {type(item).__name__}")
        out.append(item)
    return out


def _text(value: Any, where: str, field: str, required: bool = False) -> Optional[str]:
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise InputError(f"{where}: {field} is missing or empty")
        return None
    if not isinstance(value, str):
        raise InputError(f"{where}: {field} must be a text (multi-turn samples are not supported), got "
                         f"{type(value).__name__}")
    return value


def _convert(rows: Sequence[Any], names: Mapping[str, str], name: str, id_field: str = "id") -> Tuple[Records, Records]:
    if not rows:
        raise InputError(f"{name}: no samples")
    golden: Records = []
    run: Records = []
    for i, row in enumerate(rows):
        where = f"{name}[{i}]"
        raw_id = _get(row, id_field)
        case_id = f"case-{i + 1:04d}" if raw_id is None or raw_id == "" else str(raw_id)
        contexts = _texts(_get(row, names["contexts"]), where, names["contexts"])
        evidence = _texts(_get(row, names["evidence"]), where, names["evidence"])
        case: Dict[str, Any] = {"id": case_id, "question": _text(_get(row, names["question"]), where,
                                                                  names["question"], required=True),
                                "expected_evidence": evidence}
        reference = _text(_get(row, names["reference"]), where, names["reference"])
        if reference is not None:
            case["reference_answer"] = reference
        category = _get(row, "category")
        if isinstance(category, str) and category:
            case["category"] = category
        golden.append(case)
        run.append({"id": case_id, "answer": _text(_get(row, names["answer"]), where, names["answer"]),
                    "retrieved": [{"file": UNKNOWN_FILE, "chunk_id": str(rank), "text": text, "score": None}
                                  for rank, text in enumerate(contexts, start=1)],
                    "contexts": contexts})
    return golden, run


def _has(rows: Sequence[Any], key: str) -> bool:
    return bool(rows) and _get(rows[0], key) is not None


def from_ragas(dataset: Any) -> Tuple[Records, Records]:
    """``(golden, run)`` from ragas samples (see the module docstring)."""
    rows = _rows(dataset, "ragas dataset")
    names = _RAGAS if _has(rows, "user_input") or not _has(rows, "question") else _RAGAS_V01
    return _convert(rows, names, "ragas dataset")


def from_deepeval(test_cases: Any) -> Tuple[Records, Records]:
    """``(golden, run)`` from DeepEval test cases (see the module docstring)."""
    rows = _rows(test_cases, "deepeval test cases")
    return _convert(rows, _DEEPEVAL, "deepeval test cases", id_field="name")


def from_hf(dataset: Any) -> Tuple[Records, Records]:
    """``(golden, run)`` from a Hugging Face dataset (or any table) in ragas', ragas v0.1's or ragmeter's naming.

    In ragmeter's naming (``question``, ``reference_answer``, ``answer``, ``retrieved`` or ``contexts``) the
    golden fields and the run fields are split apart and kept as they are."""
    rows = _rows(dataset, "dataset")
    if _has(rows, "user_input"):
        return _convert(rows, _RAGAS, "dataset")
    if rows and _get(rows[0], "ground_truth") is not None:
        return _convert(rows, _RAGAS_V01, "dataset")
    golden_keys = ("id", "question", "reference_answer", "expected_files", "expected_evidence", "category",
                   "source", "tags")
    run_keys = ("id", "retrieved", "contexts", "answer", "retrieval_mode", "latency_ms", "usage", "prompt_tokens",
                "completion_tokens", "cost")
    if not rows or not isinstance(rows[0], Mapping) or "question" not in rows[0]:
        raise InputError("dataset: no known columns: expected ragas' (user_input, retrieved_contexts, response, "
                         "reference) or ragmeter's (id, question, reference_answer, answer, retrieved)")
    golden = [{k: row[k] for k in golden_keys if k in row} for row in rows]
    run = []
    for row in rows:
        rec = {k: row[k] for k in run_keys if k in row}
        if "retrieved" not in rec:
            contexts = _texts(rec.get("contexts"), "dataset", "contexts")
            rec["retrieved"] = [{"file": UNKNOWN_FILE, "chunk_id": str(r), "text": t, "score": None}
                                for r, t in enumerate(contexts, start=1)]
        run.append(rec)
    return golden, run
