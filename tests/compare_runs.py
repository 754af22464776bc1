"""Results folders of the bundled example for the compare and gate tests: ``ragmeter eval --no-judge`` on
The bundled example (python/ragmeter/_example) golden set and a variant of its run (answers and retrievals changed per case)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Iterable, List, Optional

EXAMPLES = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"
GOLDEN = EXAMPLES / "golden.jsonl"
RUN = EXAMPLES / "run.jsonl"

REFUSAL = "The provided context does not mention this."
INVENTED = "It is 42, as everyone knows."


def golden_cases(path: Path = GOLDEN) -> List[Dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]


def run_cases() -> List[Dict]:
    return [json.loads(line) for line in RUN.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, rows: Iterable[Dict], header: Optional[str] = None) -> Path:
    lines = ([header] if header else []) + [json.dumps(r, ensure_ascii=False) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def variant_run(path: Path, *, miss: Iterable[str] = (), answers: Optional[Dict[str, str]] = None) -> Path:
    """The bundled run with the expected files' chunks removed from the cases in ``miss`` (a certain
    retrieval miss) and the answers in ``answers`` replaced."""
    expected = {c["id"]: set(c.get("expectedFileNames") or []) for c in golden_cases()}
    miss, answers = set(miss), dict(answers or {})
    rows = []
    for row in run_cases():
        if row["id"] in miss:
            row["retrieved"] = [x for x in row["retrieved"] if x["file"] not in expected[row["id"]]]
        if row["id"] in answers:
            row["answer"] = answers[row["id"]]
        rows.append(row)
    return write_jsonl(path, rows)


def eval_folder(out: Path, run: Path = RUN, golden: Path = GOLDEN) -> Path:
    """``ragmeter eval --no-judge`` in process; the folder it wrote."""
    from ragmeter.cli import main

    code = main(["eval", "--golden", str(golden), "--run", str(run), "--out", str(out), "--no-judge", "--no-progress"])
    assert code == 0, f"ragmeter eval exited {code}"
    return out


def diagnosed(folder: Path):  # type: ignore[no-untyped-def]
    from ragmeter.report.data import load_results

    return load_results(folder).cases
