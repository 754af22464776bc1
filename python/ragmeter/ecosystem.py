"""Data from the RAG evaluation ecosystem as a ragmeter golden set and run.

Each converter returns ``(golden, run)``, two lists of records that every ragmeter entry point takes::

    golden, run = ragmeter.dataset.from_ragas(evaluation_dataset)
    result = ragmeter.evaluate(golden, run, judge=...)

* :func:`from_ragas`: a ragas ``EvaluationDataset`` (its ``samples``), a list of ``SingleTurnSample`` or of
  dicts, or a table (pandas, Polars, Arrow, Hugging Face) with ragas' columns ``user_input``,
  ``retrieved_contexts``, ``response``, ``reference`` and optionally ``reference_contexts``;
* :func:`from_deepeval`: DeepEval ``LLMTestCase`` or ``Golden`` objects (``input``, ``actual_output``,
  ``expected_output``, ``retrieval_context``, ``context``, ``name``, ``tags``, ``completion_time``, ``token_cost``,
  ``input_token_count``, ``output_token_count``) or an ``EvaluationDataset`` holding them (``test_cases``, else
  ``goldens``);
* :func:`from_hf`: a Hugging Face ``datasets.Dataset`` (or any table) in ragas' naming, ragas' older naming
  (``question``, ``answer``, ``contexts``, ``ground_truth``) or ragmeter's own.

Mapping: the question, the reference answer and the system's answer map one to one; the retrieved contexts
become the run's chunks in rank order (``retrieved``, with ``file`` ``"(unknown)"``: these libraries record no
source file, so file-level metrics are not measured; ``chunk_id`` is ragas' ``retrieved_context_ids`` when given,
else the rank) and its ``contexts``. A context may also be an object with a ``text`` (and ``file``, ``chunk_id``,
``score``), as a ragmeter run's retrieved item: its file, id and score are kept. DeepEval's ``completion_time`` (seconds) becomes ``latency_ms``, its
``token_cost`` ``cost`` and its token counts ``prompt_tokens`` / ``completion_tokens``. The ground-truth
contexts (ragas ``reference_contexts``, DeepEval ``context``) become ``expected_evidence``: a retrieved chunk
containing one is relevant. Without them a case is unlabelled and its retrieval is not scored (counted, never guessed).
Ids are taken from an ``id`` column (DeepEval: a golden's ``id``, else ``name``) when there is one (a text or a
whole number), else ``case-0001``, ... by position, said in a note (the ``ragmeter.notes`` logger).

:func:`to_ragas` and :func:`to_deepeval` go the other way (a golden set and a run to a ragas
``EvaluationDataset`` / a list of DeepEval ``LLMTestCase``), keeping every field the other library can hold, so
that converting back gives the same records. The converters from these libraries read objects by attribute and
import nothing; the two ``to_`` functions import ragas or DeepEval when called.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ragmeter.errors import InputError

__all__ = ["from_ragas", "from_deepeval", "from_hf", "to_ragas", "to_deepeval"]

Records = List[Dict[str, Any]]

UNKNOWN_FILE = "(unknown)"
_RAGAS = {"question": "user_input", "answer": "response", "contexts": "retrieved_contexts", "reference": "reference",
          "evidence": "reference_contexts", "context_ids": "retrieved_context_ids"}
_RAGAS_V01 = {"question": "question", "answer": "answer", "contexts": "contexts", "reference": "ground_truth",
              "evidence": "reference_contexts"}
_DEEPEVAL = {"question": "input", "answer": "actual_output", "contexts": "retrieval_context",
             "reference": "expected_output", "evidence": "context"}


def _rows(source: Any, name: str) -> List[Any]:
    """Rows (dicts or objects) of a list, a table or a dataset object."""
    import polars as pl

    if isinstance(source, (list, tuple)):
        return list(source)
    # ragas EvaluationDataset.samples; DeepEval EvaluationDataset.test_cases, else its goldens (which may carry
    # the system's outputs too)
    held = [getattr(source, attr, None) for attr in ("samples", "test_cases", "goldens")]
    held = [items for items in held if isinstance(items, (list, tuple))]
    if held:
        return list(next((items for items in held if items), []))
    if isinstance(source, (str, bytes)) or source is None:
        raise InputError(f"{name}: expected a dataset, a table or a list of samples, got {type(source).__name__}")
    from ragmeter.api import as_source

    table = as_source(source, name)
    if isinstance(table, pl.DataFrame):
        return table.to_dicts()
    if type(table).__module__.split(".")[0] == "pandas":
        from ragmeter.dataset import polars_from_pandas

        return polars_from_pandas(table, name).to_dicts()
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


def _contexts(value: Any, where: str, field: str) -> List[Dict[str, Any]]:
    """The retrieved contexts as a run's retrieved items: each a text, or an object with a ``text`` (and
    optionally ``file``, ``chunk_id``, ``score``), which is what the run loader takes under ``retrieved_contexts``."""
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InputError(f"{where}: {field} must be a list of texts, got {type(value).__name__}")
    items = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            items.append({"text": item})
        elif isinstance(item, Mapping) and isinstance(item.get("text"), str):
            items.append(dict(item))
        else:
            raise InputError(f"{where}: {field}[{i}] must be a text or an object with a 'text', got "
                             f"{type(item).__name__}")
    return items


def _text(value: Any, where: str, field: str, required: bool = False) -> Optional[str]:
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise InputError(f"{where}: {field} is missing or empty")
        return None
    if not isinstance(value, str):
        multi_turn = " (multi-turn samples are not supported)" if field != "category" else ""
        raise InputError(f"{where}: {field} must be a text{multi_turn}, got {type(value).__name__}")
    return value


def _number(value: Any, where: str, field: str) -> Optional[float]:
    """A count, a cost or a time: the run loader refuses a NaN, an infinity or a negative one under ragmeter's
    name (``latency_ms``), so it is refused here under the name the user wrote."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: {field} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{where}: {field} must be a finite number, 0 or more, got {value!r}")
    return value


def _chunk_ids(row: Any, names: Mapping[str, str], items: List[Dict[str, Any]], where: str) -> List[Any]:
    """ragas' ``retrieved_context_ids`` when given (one per context), else each item's own ``chunk_id``, else
    its rank."""
    field = names.get("context_ids")
    ids = _texts(_get(row, field), where, field) if field else []
    if not ids:
        return [str(rank) if item.get("chunk_id") is None else item["chunk_id"]
                for rank, item in enumerate(items, start=1)]
    if len(ids) != len(items):
        raise InputError(f"{where}: {field} has {len(ids)} ids for {len(items)} {names['contexts']}")
    return ids


def _given_id(row: Any, id_fields: Sequence[str], where: str) -> Optional[str]:
    """The row's own id (the first of ``id_fields`` it has), as a text; None when it has none. A whole number
    is its digits (pandas reads an integer column with a gap as floats: 2.0 is "2", NaN is no id)."""
    for field in id_fields:
        raw_id = _get(row, field)
        if raw_id is None or raw_id == "" or (isinstance(raw_id, float) and math.isnan(raw_id)):
            continue
        if isinstance(raw_id, float) and raw_id.is_integer():
            raw_id = int(raw_id)
        if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)):
            raise InputError(f"{where}: {field} must be a text or a whole number, got {type(raw_id).__name__}")
        return str(raw_id)
    return None


def _case_ids(rows: Sequence[Any], id_fields: Sequence[str], name: str) -> List[str]:
    """Each row's id; a row without one is named by its position (``case-0001``, ...), said in a note (a made id
    that is another row's own is refused by the golden loader as a duplicate, naming both rows)."""
    from ragmeter.dataset import _note

    given = [_given_id(row, id_fields, f"{name}[{i}]") for i, row in enumerate(rows)]
    made = [f"case-{i + 1:04d}" for i, case_id in enumerate(given) if case_id is None]
    if made:
        shown = ", ".join(made[:2]) + (", ..." if len(made) > 2 else "")
        _note(f"{name}: no ids; each case is named by its position ({shown})" if len(made) == len(rows) else
              f"{name}: {len(made)} of {len(rows)} rows have no id ({'/'.join(id_fields)}); each is named by its "
              f"position ({shown})")
    return [case_id or f"case-{i + 1:04d}" for i, case_id in enumerate(given)]


def _usage(row: Any, where: str) -> Dict[str, Any]:
    """DeepEval's latency, cost and token counts in ragmeter's run fields (absent ones left out)."""
    seconds = _number(_get(row, "completion_time"), where, "completion_time")
    usage = {"latency_ms": None if seconds is None else seconds * 1000.0,
             "cost": _number(_get(row, "token_cost"), where, "token_cost"),
             "prompt_tokens": _number(_get(row, "input_token_count"), where, "input_token_count"),
             "completion_tokens": _number(_get(row, "output_token_count"), where, "output_token_count")}
    return {k: v for k, v in usage.items() if v is not None}


def _convert(rows: Sequence[Any], names: Mapping[str, str], name: str, id_fields: Sequence[str] = ("id",),
             with_usage: bool = False) -> Tuple[Records, Records]:
    if not rows:
        raise InputError(f"{name}: no samples")
    golden: Records = []
    run: Records = []
    for i, (row, case_id) in enumerate(zip(rows, _case_ids(rows, id_fields, name))):
        where = f"{name}[{i}]"
        items = _contexts(_get(row, names["contexts"]), where, names["contexts"])
        evidence = _texts(_get(row, names["evidence"]), where, names["evidence"])
        case: Dict[str, Any] = {"id": case_id, "question": _text(_get(row, names["question"]), where,
                                                                  names["question"], required=True),
                                "expected_evidence": evidence}
        reference = _text(_get(row, names["reference"]), where, names["reference"])
        if reference is not None:
            case["reference_answer"] = reference
        category = _text(_get(row, "category"), where, "category")
        if category is not None:
            case["category"] = category
        tags = _texts(_get(row, "tags"), where, "tags")
        if tags:
            case["tags"] = tags
        golden.append(case)
        chunk_ids = _chunk_ids(row, names, items, where)
        record = {"id": case_id, "answer": _text(_get(row, names["answer"]), where, names["answer"]),
                  "retrieved": [{"file": UNKNOWN_FILE if item.get("file") is None else item["file"],
                                 "chunk_id": chunk_id, "text": item["text"], "score": item.get("score")}
                                for chunk_id, item in zip(chunk_ids, items)],
                  "contexts": [item["text"] for item in items]}
        if with_usage:
            record.update(_usage(row, where))
        run.append(record)
    return golden, run


def _has(rows: Sequence[Any], key: str) -> bool:
    """Some row has ``key``: the naming is told from every row, as a field that only later rows hold would
    otherwise be dropped (ragas v0.1 data whose first row has no ``ground_truth``)."""
    return any(_get(row, key) is not None for row in rows)


def from_ragas(dataset: Any) -> Tuple[Records, Records]:
    """``(golden, run)`` from ragas samples (see the module docstring)."""
    rows = _rows(dataset, "ragas dataset")
    names = _RAGAS if _has(rows, "user_input") or not _has(rows, "question") else _RAGAS_V01
    return _convert(rows, names, "ragas dataset")


def from_deepeval(test_cases: Any) -> Tuple[Records, Records]:
    """``(golden, run)`` from DeepEval test cases (see the module docstring)."""
    rows = _rows(test_cases, "deepeval test cases")
    return _convert(rows, _DEEPEVAL, "deepeval test cases", id_fields=("id", "name"), with_usage=True)


def from_hf(dataset: Any) -> Tuple[Records, Records]:
    """``(golden, run)`` from a Hugging Face dataset (or any table) in ragas', ragas v0.1's or ragmeter's naming.

    In ragmeter's naming (``question``, ``reference_answer``, ``answer``, ``retrieved`` or ``contexts``) the
    golden fields and the run fields are split apart and kept as they are, in any spelling the golden loader
    accepts (``expectedFileNames``, ``expectedEvidence``, ``referenceAnswer``, ``case_id``, ...)."""
    rows = _rows(dataset, "dataset")
    if _has(rows, "user_input"):
        return _convert(rows, _RAGAS, "dataset")
    if _has(rows, "ground_truth"):
        return _convert(rows, _RAGAS_V01, "dataset")
    from ragmeter.dataset import QUESTION_NAMES

    golden_keys, run_keys = _ragmeter_keys()
    if not rows or not isinstance(rows[0], Mapping) or not any(n in rows[0] for n in QUESTION_NAMES):
        raise InputError("dataset: no known columns: expected ragas' (user_input, retrieved_contexts, response, "
                         "reference) or ragmeter's (id, question, reference_answer, answer, retrieved)")
    golden = [{k: row[k] for k in golden_keys if k in row} for row in rows]
    run = []
    for i, row in enumerate(rows):
        rec = {k: row[k] for k in run_keys if k in row}
        if "retrieved" not in rec:
            contexts = _texts(rec.get("contexts"), f"dataset[{i}]", "contexts")
            rec["retrieved"] = [{"file": UNKNOWN_FILE, "chunk_id": str(r), "text": t, "score": None}
                                for r, t in enumerate(contexts, start=1)]
        run.append(rec)
    return golden, run


def _ragmeter_keys() -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    """(golden keys, run keys) of rows in ragmeter's naming: every spelling the golden loader accepts, so that a
    row in the README's golden format (``expectedFileNames``, ``referenceAnswer``, ...) keeps its labels."""
    from ragmeter.dataset import GOLDEN_ALIASES, ID_NAMES, QUESTION_NAMES

    golden = (*ID_NAMES, *QUESTION_NAMES, *(n for names in GOLDEN_ALIASES.values() for n in names), "category",
              "source", "tags")
    run = (*ID_NAMES, "retrieved", "contexts", "answer", "retrieval_mode", "latency_ms", "usage", "prompt_tokens",
           "completion_tokens", "cost")
    return golden, run


def _joined(golden: Any, run: Any) -> List[Tuple[Dict[str, Any], Dict[str, Any]]]:
    """``(case, run record)`` pairs in the golden set's order, from any source the loaders take; a case the
    run lacks pairs with an empty record."""
    from ragmeter.dataset import load_golden, load_run

    cases = load_golden(golden).to_dicts()
    records = {r["id"]: r for r in load_run(run).to_dicts()}
    unknown = sorted(set(records) - {c["id"] for c in cases})
    if unknown:
        raise InputError(f"run: {len(unknown)} case(s) not in the golden set: {', '.join(unknown[:5])}")
    return [(case, records.get(case["id"], {})) for case in cases]


def _chunk_texts(record: Mapping[str, Any]) -> List[str]:
    return [chunk["text"] for chunk in record.get("retrieved") or []]  # the run loader requires the texts


def _or_none(values: List[Any]) -> Optional[List[Any]]:
    return values or None


def to_ragas(golden: Any, run: Any) -> Any:
    """A ragas ``EvaluationDataset`` of ``SingleTurnSample`` from a golden set and a run (needs ``ragas``).

    A sample holds no id, file, score or category: :func:`from_ragas` numbers the cases again
    (``case-0001``, ...) and gives the chunks ``file`` ``"(unknown)"``; the chunk ids travel in
    ``retrieved_context_ids``."""
    from ragas import EvaluationDataset, SingleTurnSample

    samples = []
    for case, record in _joined(golden, run):
        texts = _chunk_texts(record)
        chunk_ids = [chunk["chunk_id"] for chunk in record.get("retrieved") or []]
        samples.append(SingleTurnSample(
            user_input=case["question"], reference=case.get("reference_answer"),
            reference_contexts=_or_none(case.get("expected_evidence") or []), response=record.get("answer"),
            retrieved_contexts=texts if record else None,
            retrieved_context_ids=chunk_ids if chunk_ids and None not in chunk_ids else None))
    return EvaluationDataset(samples=samples)


def to_deepeval(golden: Any, run: Any) -> List[Any]:
    """DeepEval ``LLMTestCase`` objects from a golden set and a run (needs ``deepeval``); the case id is the
    test case's ``name``. A test case holds no file, chunk id, score or category: :func:`from_deepeval` gives the
    chunks ``file`` ``"(unknown)"`` and their ranks as ids."""
    from deepeval.test_case import LLMTestCase

    def seconds(ms: Optional[float]) -> Optional[float]:
        return None if ms is None else ms / 1000.0

    return [LLMTestCase(name=case["id"], input=case["question"], expected_output=case.get("reference_answer"),
                        context=_or_none(case.get("expected_evidence") or []), tags=_or_none(case.get("tags") or []),
                        actual_output=record.get("answer"),
                        retrieval_context=_or_none(_chunk_texts(record)),
                        completion_time=seconds(record.get("latency_ms")), token_cost=record.get("cost"),
                        input_token_count=record.get("prompt_tokens"),
                        output_token_count=record.get("completion_tokens"))
            for case, record in _joined(golden, run)]
