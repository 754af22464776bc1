"""Documented interfaces that the code must keep (review 27 of the docs against the code)."""
from __future__ import annotations

import json
from pathlib import Path

import ragmeter


def _golden(tmp_path: Path) -> Path:
    path = tmp_path / "golden.jsonl"
    path.write_text("".join(json.dumps({"id": f"fact-{i}", "question": f"question {i}?",
                                        "expectedEvidence": ["x"]}) + "\n" for i in (1, 2)), encoding="utf-8")
    return path


def test_a_failed_case_error_is_one_line_when_the_callable_raises_a_multi_line_message(tmp_path: Path) -> None:
    """docs/collect.md: a case that still fails is a record with `error` (one line). An exception raised by a
    Python target with a message of several lines (a traceback-like text, a server's error page quoted in
    it) kept its line breaks in the run file and in the console's failure list."""
    def ask(case):
        if case["id"] == "fact-2":
            raise RuntimeError("upstream said:\n  500 Internal Server Error\r\n\tretry later")
        return {"answer": "a", "retrieved": [{"file": "f.md", "text": "x"}]}

    out = tmp_path / "run.jsonl"
    result = ragmeter.collect(_golden(tmp_path), target=ask, out=out)
    failed = [r for r in result.records if r.get("error")]
    assert [r["id"] for r in failed] == ["fact-2"] and failed[0]["error_kind"] == "exception"
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    (record,) = [r for r in written if r["id"] == "fact-2"]
    for error in (failed[0]["error"], record["error"]):
        assert not any(ch in error for ch in "\n\r\t"), error
        # the whole message is kept, its words in order
        assert "upstream said:" in error and "500 Internal Server Error" in error and "retry later" in error
