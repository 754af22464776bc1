"""ragas / DeepEval / Hugging Face data into ragmeter (ragmeter.dataset.from_ragas, from_deepeval, from_hf).

These tests use stand-ins with the attributes of their classes (ragas ``SingleTurnSample`` /
``EvaluationDataset.samples``, DeepEval ``LLMTestCase`` / ``EvaluationDataset.test_cases``), so that they run
everywhere; tests/test_ecosystem_real.py does the same with the real packages (the ``ecosystem`` extra)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

import polars as pl
import pytest

import ragmeter
from ragmeter.dataset import from_deepeval, from_hf, from_ragas
from ragmeter.errors import InputError

EX = Path(__file__).resolve().parents[1] / "python" / "ragmeter" / "_example"


@dataclass
class SingleTurnSample:  # ragas.dataset_schema.SingleTurnSample's fields
    user_input: str
    retrieved_contexts: Optional[List[str]] = None
    reference_contexts: Optional[List[str]] = None
    response: Optional[str] = None
    reference: Optional[str] = None


@dataclass
class RagasEvaluationDataset:
    samples: List[SingleTurnSample] = field(default_factory=list)


@dataclass
class LLMTestCase:  # deepeval.test_case.LLMTestCase's fields
    input: str
    actual_output: Optional[str] = None
    expected_output: Optional[str] = None
    context: Optional[List[str]] = None
    retrieval_context: Optional[List[str]] = None
    name: Optional[str] = None


@dataclass
class DeepEvalDataset:
    test_cases: List[LLMTestCase] = field(default_factory=list)


def _records(path: Path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]


def _evidence_only_example():
    """The bundled example with its evidence phrases as the only labels (what ragas/DeepEval data carry)."""
    golden = [{k: v for k, v in g.items() if k not in ("expected_files", "expectedFileNames")} for g in _records(EX / "golden.jsonl")]
    golden = [g for g in golden if g.get("expected_evidence") or g.get("expectedEvidence")]
    run = _records(EX / "run.jsonl")
    in_run = {r["id"] for r in run}
    golden = [g for g in golden if g["id"] in in_run]  # a ragas sample always holds both sides
    ids = {g["id"] for g in golden}
    return golden, [r for r in run if r["id"] in ids]


def test_from_ragas_round_trip_gives_the_same_retrieval_and_answers():
    golden, run = _evidence_only_example()
    by_id = {r["id"]: r for r in run}
    samples = [SingleTurnSample(user_input=g["question"], reference=g.get("reference_answer") or g.get("referenceAnswer"),
                                reference_contexts=g.get("expected_evidence") or g.get("expectedEvidence"),
                                retrieved_contexts=[c["text"] for c in by_id[g["id"]]["retrieved"]],
                                response=by_id[g["id"]].get("answer")) for g in golden]
    g2, r2 = from_ragas(RagasEvaluationDataset(samples))
    assert len(g2) == len(golden) and g2[0]["id"] == "case-0001"
    direct = ragmeter.evaluate(golden, run).cases
    via = ragmeter.evaluate(g2, r2).cases
    for col in ("hit", "reciprocal_rank", "evidence_recall", "labeled", "n_retrieved"):
        assert via[col].to_list() == direct[col].to_list(), col
    assert via["answer"].to_list() == direct["answer"].to_list()
    assert via["file_hit"].null_count() == via.height or not via["file_hit"].any()  # no files: not a file hit


def test_from_ragas_takes_tables_dicts_and_hf_style_datasets():
    rows = [{"user_input": "Q1?", "retrieved_contexts": ["alpha beta", "gamma"], "response": "alpha",
             "reference": "alpha", "reference_contexts": ["alpha beta"]},
            {"user_input": "Q2?", "retrieved_contexts": [], "response": None, "reference": "delta"}]
    expected = from_ragas(rows)
    assert from_ragas(pl.DataFrame(rows)) == expected

    class HFDataset:  # datasets.Dataset: to_arrow / to_pandas
        def to_arrow(self):
            import pyarrow as pa

            return pa.Table.from_pylist(rows)

    assert from_hf(HFDataset()) == expected
    golden, run = expected
    assert golden[1] == {"id": "case-0002", "question": "Q2?", "expected_evidence": [], "reference_answer": "delta"}
    assert run[0]["retrieved"][0] == {"file": "(unknown)", "chunk_id": "1", "text": "alpha beta", "score": None}
    result = ragmeter.evaluate(golden, run)
    assert result.cases["hit"].to_list() == [True, None]  # the unlabelled case is not scored, not a miss
    assert result.summary["retrieval"]["overall"]["hit_rate"]["n_scored"] == 1


def test_from_ragas_v01_column_names():
    golden, run = from_hf([{"question": "Q?", "answer": "A", "contexts": ["A is here"], "ground_truth": "A"}])
    assert golden[0]["reference_answer"] == "A" and run[0]["contexts"] == ["A is here"]


def test_from_deepeval():
    cases = [LLMTestCase(input="What is X?", actual_output="X is 1", expected_output="X is 1",
                         context=["X is 1"], retrieval_context=["noise", "we know X is 1 here"], name="x1"),
             LLMTestCase(input="What is Y?", actual_output="no idea")]
    golden, run = from_deepeval(DeepEvalDataset(cases))
    assert [g["id"] for g in golden] == ["x1", "case-0002"]
    assert golden[0]["reference_answer"] == "X is 1" and golden[0]["expected_evidence"] == ["X is 1"]
    assert run[0]["contexts"] == ["noise", "we know X is 1 here"] and run[1]["retrieved"] == []
    assert from_deepeval(cases) == (golden, run)
    result = ragmeter.evaluate(golden, run)
    assert result.cases.filter(pl.col("id") == "x1")["first_relevant_rank"].item() == 2


def test_bad_samples_are_named():
    with pytest.raises(InputError, match=r"ragas dataset\[0\]: user_input is missing"):
        from_ragas([{"response": "a"}])
    with pytest.raises(InputError, match=r"ragas dataset\[0\]: retrieved_contexts must be a list of texts"):
        from_ragas([{"user_input": "q", "retrieved_contexts": "one string"}])
    with pytest.raises(InputError, match="multi-turn"):
        from_ragas([SingleTurnSample(user_input=[{"role": "user"}])])  # type: ignore[arg-type]
    with pytest.raises(InputError, match="no samples"):
        from_deepeval([])
    with pytest.raises(InputError, match="no known columns"):
        from_hf([{"foo": 1}])
