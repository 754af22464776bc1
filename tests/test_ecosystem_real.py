"""ragmeter.dataset.from_ragas / from_deepeval / from_hf and ragmeter.ecosystem.to_ragas / to_deepeval with the
real ragas and DeepEval classes (the ``ecosystem`` extra).

Skipped when the packages are not installed; under CI a missing package fails. scripts/test.sh installs them
in a venv of their own (target/ecosystem-venv) and runs this file there: DeepEval downgrades rich and brings
four pytest plugins, which must not reach the shared environment. Telemetry is turned off before either
package is imported, and every connection or name look-up outside loopback made while importing or testing
them is refused and recorded (the last test asserts there was none).
"""
from __future__ import annotations

import importlib
import ipaddress
import json
import os
import socket
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, List

import pytest

for _var, _value in {"DEEPEVAL_TELEMETRY_OPT_OUT": "1", "DEEPEVAL_DISABLE_DOTENV": "1", "RAGAS_DO_NOT_TRACK": "true",
                     "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                     "LANGCHAIN_TRACING_V2": "false"}.items():
    os.environ.setdefault(_var, _value)
os.environ.pop("DEEPEVAL_UPDATE_WARNING_OPT_IN", None)  # asks PyPI for a newer version on import

OUTSIDE_CALLS: List[str] = []


def _is_loopback(host: Any) -> bool:
    if host in (None, "", "localhost"):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


@contextmanager
def loopback_only() -> Iterator[None]:
    """Refuse (and record) connections and name look-ups beyond loopback; Unix sockets are left alone."""
    connect, connect_ex, getaddrinfo = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo

    def check(address: Any) -> None:
        if isinstance(address, tuple) and not _is_loopback(address[0]):
            OUTSIDE_CALLS.append(repr(address))
            raise OSError(f"test_ecosystem_real: network call to {address!r} refused")

    def guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        check((host,))
        return getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = lambda self, address: (check(address), connect(self, address))[1]  # type: ignore
    socket.socket.connect_ex = lambda self, address: (check(address), connect_ex(self, address))[1]  # type: ignore
    socket.getaddrinfo = guarded_getaddrinfo  # type: ignore[assignment]
    try:
        yield
    finally:
        socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = connect, connect_ex, getaddrinfo


def _require(module: str) -> Any:
    with loopback_only():
        if os.environ.get("CI", "") not in ("", "0", "false"):
            return importlib.import_module(module)  # scripts/test.sh installs it under CI: missing is a failure
        return pytest.importorskip(module, reason=f"{module} is not installed (the 'ecosystem' extra; "
                                                  "RAGMETER_ECOSYSTEM=1 bash scripts/test.sh installs it in a venv)")


ragas = _require("ragas")
deepeval = _require("deepeval")
datasets = _require("datasets")  # a dependency of ragas

import polars as pl  # noqa: E402
from deepeval.dataset import EvaluationDataset as DeepEvalDataset  # noqa: E402
from deepeval.dataset import Golden  # noqa: E402
from deepeval.test_case import LLMTestCase  # noqa: E402
from ragas import EvaluationDataset, SingleTurnSample  # noqa: E402

import ragmeter  # noqa: E402
from ragmeter.dataset import from_deepeval, from_hf, from_ragas, load_golden, load_run  # noqa: E402
from ragmeter.ecosystem import to_deepeval, to_ragas  # noqa: E402
from ragmeter.errors import InputError  # noqa: E402

EXAMPLE = Path(ragmeter.__file__).parent / "_example"
RETRIEVAL = ("hit", "reciprocal_rank", "first_relevant_rank", "evidence_recall", "labeled", "n_retrieved")


@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    with loopback_only():
        yield


def _records(path: Path) -> List[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]


def _example() -> tuple:
    """The bundled example's cases that have a run record (a ragas sample or DeepEval test case holds both)."""
    run = _records(EXAMPLE / "run.jsonl")
    in_run = {r["id"] for r in run}
    return [g for g in _records(EXAMPLE / "golden.jsonl") if g["id"] in in_run], run


def _golden_fields(golden: Any, *columns: str) -> pl.DataFrame:
    return load_golden(golden).select("question", "reference_answer", "expected_evidence", *columns)


def _run_fields(run: Any, *columns: str) -> pl.DataFrame:
    frame = load_run(run)
    return frame.select(pl.col("retrieved").list.eval(pl.element().struct.field("text")).alias("texts"),
                        "answer", *columns)


def _ragas_samples() -> List[Any]:
    return [SingleTurnSample(user_input="Which port does the gateway use?", response="Port 8443.",
                             reference="8443", reference_contexts=["listens on port 8443"],
                             retrieved_contexts=["The gateway listens on port 8443.", "TLS is terminated there."],
                             retrieved_context_ids=["gateway.md#2", "gateway.md#3"]),
            SingleTurnSample(user_input="Who owns billing?", response="I don't know.", reference="The Payments team",
                             retrieved_contexts=["Billing runs nightly."]),  # no ground-truth contexts: unlabelled
            SingleTurnSample(user_input="What is the SLA?", retrieved_contexts=[])]  # nothing retrieved, no answer


def test_ragas_dataset_to_ragmeter_and_back_is_the_same_dataset():
    original = EvaluationDataset(samples=_ragas_samples())
    golden, run = from_ragas(original)
    assert [g["id"] for g in golden] == ["case-0001", "case-0002", "case-0003"]
    assert golden[0] == {"id": "case-0001", "question": "Which port does the gateway use?",
                         "expected_evidence": ["listens on port 8443"], "reference_answer": "8443"}
    assert run[0]["retrieved"] == [
        {"file": "(unknown)", "chunk_id": "gateway.md#2", "text": "The gateway listens on port 8443.", "score": None},
        {"file": "(unknown)", "chunk_id": "gateway.md#3", "text": "TLS is terminated there.", "score": None}]
    assert run[1]["retrieved"][0]["chunk_id"] == "1"  # no ids given: the rank
    assert run[2] == {"id": "case-0003", "answer": None, "retrieved": [], "contexts": []}

    back = to_ragas(golden, run)
    assert isinstance(back, EvaluationDataset) and all(isinstance(s, SingleTurnSample) for s in back.samples)
    expected = original.to_list()
    expected[1]["retrieved_context_ids"] = ["1"]  # the ranks ragmeter gave the chunks
    assert back.to_list() == expected


def test_ragmeter_to_ragas_and_back_keeps_every_field_ragas_holds():
    golden, run = _example()
    dataset = to_ragas(golden, run)
    assert len(dataset.samples) == len(golden)
    golden2, run2 = from_ragas(dataset)
    assert _golden_fields(golden2).equals(_golden_fields(golden))
    chunk_ids = pl.col("retrieved").list.eval(pl.element().struct.field("chunk_id"))
    assert load_run(run2).select(chunk_ids).equals(load_run(run).select(chunk_ids))
    assert _run_fields(run2).equals(_run_fields(run))
    # no source files in ragas: every chunk's file is "(unknown)" and file-level metrics are not measured
    assert {c["file"] for r in run2 for c in r["retrieved"]} == {"(unknown)"}


def test_ragas_data_evaluates_like_the_original():
    golden, run = _example()
    evidence_only = [{k: v for k, v in g.items() if k != "expectedFileNames"} for g in golden]
    direct = ragmeter.evaluate(evidence_only, run)
    via = ragmeter.evaluate(*from_ragas(to_ragas(golden, run)))
    for column in RETRIEVAL:
        assert via.cases[column].to_list() == direct.cases[column].to_list(), column
    assert via.cases["answer"].to_list() == direct.cases["answer"].to_list()
    hit = via.summary["retrieval"]["overall"]["hit_rate"]
    assert hit == direct.summary["retrieval"]["overall"]["hit_rate"]
    assert hit["n_total"] == len(golden) and 0 < hit["n_scored"] <= hit["n_total"]


def test_a_ragas_jsonl_file_loads_directly_through_the_loaders_aliases(tmp_path):
    dataset = EvaluationDataset(samples=_ragas_samples())
    path = tmp_path / "ragas.jsonl"
    dataset.to_jsonl(str(path))
    from_file = ragmeter.evaluate(path, path)  # one file, read as the golden set and as the run
    converted = ragmeter.evaluate(*from_ragas(dataset))
    assert from_file.cases["id"].to_list() == ["line-1", "line-2", "line-3"]  # ragas samples have no ids
    for column in (*RETRIEVAL, "answer"):
        assert from_file.cases[column].to_list() == converted.cases[column].to_list(), column


def test_a_real_hugging_face_dataset_converts_like_the_ragas_dataset():
    dataset = EvaluationDataset(samples=_ragas_samples())
    hf = dataset.to_hf_dataset()
    assert isinstance(hf, datasets.Dataset)
    assert from_hf(hf) == from_ragas(dataset) == from_ragas(hf)
    old_naming = datasets.Dataset.from_dict({"question": ["Q?"], "answer": ["A"], "contexts": [["A is here"]],
                                             "ground_truth": ["A"]})
    golden, run = from_hf(old_naming)
    assert golden[0]["reference_answer"] == "A" and run[0]["contexts"] == ["A is here"]
    result = ragmeter.evaluate(*from_hf(hf))
    assert result.cases["labeled"].to_list() == [True, False, False]  # unlabelled cases counted, not scored
    assert result.summary["retrieval"]["overall"]["hit_rate"]["n_scored"] == 1


def test_evaluate_takes_real_hugging_face_datasets_in_ragmeter_naming():
    golden, run = _records(EXAMPLE / "golden.jsonl"), _records(EXAMPLE / "run.jsonl")
    direct = ragmeter.evaluate(golden, run)
    via = ragmeter.evaluate(datasets.Dataset.from_list(golden), datasets.Dataset.from_list(run))
    assert via.cases.equals(direct.cases)
    assert via.summary["retrieval"] == direct.summary["retrieval"]


def _deepeval_cases() -> List[Any]:
    return [LLMTestCase(name="port", input="Which port does the gateway use?", actual_output="Port 8443.",
                        expected_output="8443", context=["listens on port 8443"], tags=["infra"],
                        retrieval_context=["TLS is terminated there.", "The gateway listens on port 8443."],
                        completion_time=1.25, token_cost=0.0031, input_token_count=812, output_token_count=9),
            LLMTestCase(name="billing", input="Who owns billing?", actual_output="I don't know.")]


def test_deepeval_test_cases_to_ragmeter_and_back_are_the_same_test_cases():
    cases = _deepeval_cases()
    golden, run = from_deepeval(cases)
    assert golden[0] == {"id": "port", "question": "Which port does the gateway use?",
                         "expected_evidence": ["listens on port 8443"], "reference_answer": "8443", "tags": ["infra"]}
    assert run[0]["latency_ms"] == 1250.0 and run[0]["cost"] == 0.0031
    assert (run[0]["prompt_tokens"], run[0]["completion_tokens"]) == (812, 9)
    assert run[0]["contexts"] == ["TLS is terminated there.", "The gateway listens on port 8443."]
    assert run[1] == {"id": "billing", "answer": "I don't know.", "retrieved": [], "contexts": []}
    back = to_deepeval(golden, run)
    assert all(isinstance(c, LLMTestCase) for c in back)
    assert [c.model_dump() for c in back] == [c.model_dump() for c in cases]

    result = ragmeter.evaluate(golden, run)
    port = result.cases.filter(pl.col("id") == "port")
    assert port["first_relevant_rank"].item() == 2
    assert result.cases.filter(pl.col("id") == "billing")["labeled"].item() is False


def test_deepeval_datasets_of_test_cases_and_of_goldens():
    with_cases = DeepEvalDataset()
    for case in _deepeval_cases():
        with_cases.add_test_case(case)
    assert from_deepeval(with_cases) == from_deepeval(_deepeval_cases())

    goldens = DeepEvalDataset(goldens=[
        Golden(id="g-1", name="ignored when there is an id", input="Q1?", expected_output="A1", context=["A1 holds"]),
        Golden(name="g-2", input="Q2?", actual_output="A2", retrieval_context=["A2 here"])])
    golden, run = from_deepeval(goldens)
    assert [g["id"] for g in golden] == ["g-1", "g-2"]
    assert golden[0]["expected_evidence"] == ["A1 holds"] and golden[0]["reference_answer"] == "A1"
    assert run[1]["answer"] == "A2" and run[1]["contexts"] == ["A2 here"]
    with pytest.raises(InputError, match="no samples"):
        from_deepeval(DeepEvalDataset())


def test_ragmeter_to_deepeval_and_back_keeps_every_field_deepeval_holds():
    golden, run = _example()
    cases = to_deepeval(golden, run)
    assert [c.name for c in cases] == [g["id"] for g in golden]
    golden2, run2 = from_deepeval(cases)
    assert [g["id"] for g in golden2] == [g["id"] for g in golden]
    assert _golden_fields(golden2, "tags").equals(_golden_fields(golden, "tags"))
    assert load_golden(golden2)["tags"].list.len().sum() > 0  # the example's tags travelled
    usage = ("latency_ms", "cost", "prompt_tokens", "completion_tokens")
    assert _run_fields(run2, *usage).equals(_run_fields(run, *usage))
    assert load_run(run2)["latency_ms"].null_count() == load_run(run)["latency_ms"].null_count() < len(run)

    evidence_only = [{k: v for k, v in g.items() if k != "expectedFileNames"} for g in golden]
    direct, via = ragmeter.evaluate(evidence_only, run), ragmeter.evaluate(golden2, run2)
    for column in RETRIEVAL:
        assert via.cases[column].to_list() == direct.cases[column].to_list(), column


def test_bad_conversions_are_named():
    with pytest.raises(InputError, match="run: 1 case.s. not in the golden set: stray"):
        to_ragas([{"id": "a", "question": "Q?"}], [{"id": "stray", "retrieved": []}])
    with pytest.raises(InputError, match=r"retrieved_context_ids has 1 ids for 2 retrieved_contexts"):
        from_ragas([{"user_input": "Q?", "retrieved_contexts": ["a", "b"], "retrieved_context_ids": ["1"]}])


def test_the_guard_refuses_before_any_packet_is_sent():
    before = len(OUTSIDE_CALLS)
    with pytest.raises(OSError, match="refused"):
        socket.getaddrinfo("ragmeter-guard-check.invalid", 443)  # refused before the look-up is made
    assert OUTSIDE_CALLS[before:] == ["('ragmeter-guard-check.invalid',)"]
    del OUTSIDE_CALLS[before:]
    with socket.create_server(("127.0.0.1", 0)) as listener:  # loopback stays open
        socket.create_connection(listener.getsockname(), timeout=5).close()


def test_zz_no_call_left_loopback():
    """Importing and using ragas, DeepEval and datasets above made no connection or look-up outside loopback."""
    assert OUTSIDE_CALLS == []
