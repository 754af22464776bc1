"""Differential check of ``ragmeter trec`` against a trec_eval binary on random qrels and runs.

    python scripts/trec_eval_differential.py --trec-eval PATH/trec_eval [--cases 400] [--seed 7]

Each case draws 1-5 queries with 1-25 ranked documents, grades from -2 to 4 (negative: in the pool, unjudged),
judged documents that are never retrieved, tied and integer scores, shuffled run lines, sometimes a query only
in the run or only in the qrels, and one flag set (``-l``, ``-J``, ``-M``, ``-N``, ``-c`` and their
combinations); both programs run ``-q -m all_trec`` and their standard output must be the same byte for byte.
``--gain-tables``: graded qrels and an ndcg-family measure with a random gain table instead.
A case where both refuse the input is skipped. Every query has a judgement of 0 or more: trec_eval 10 cannot
evaluate a query whose judgements are all negative (``Can't calculate measure``, exit 4, or a crash), which
ragmeter evaluates (docs/metrics.md). Mismatching inputs are kept in ``--keep`` for a look. Exit 1 on any
mismatch. Not a test: it needs a trec_eval binary (``make`` in a clone of usnistgov/trec_eval).
"""
from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List

FLAG_SETS = [
    [], ["-l", "-1"], ["-l", "-2"], ["-l", "0"], ["-l", "2"], ["-l", "3"], ["-J"], ["-J", "-l", "0"],
    ["-J", "-l", "-1"], ["-M", "3"], ["-M", "1", "-l", "0"], ["-M", "5", "-J"], ["-N", "100"], ["-N", "5"],
    ["-N", "100", "-l", "-1"], ["-c"], ["-c", "-l", "-1"], ["-c", "-J"], ["-c", "-M", "2", "-l", "2"],
]
GRADES = [-2, -1, 0, 0, 1, 1, 2, 3, 4]


def write_case(rng: random.Random, qrels: Path, run: Path) -> None:
    q_lines: List[str] = []
    r_lines: List[str] = []
    for qi in range(rng.randint(1, 5)):
        query = f"q{qi}"
        docs = [f"d{j}" for j in range(rng.randint(1, 25))]
        judged = rng.sample(docs, rng.randint(0, len(docs))) + [f"x{j}" for j in range(rng.randint(0, 4))]
        grades = [rng.choice(GRADES) for _ in judged]
        if not grades or max(grades) < 0:
            judged, grades = judged or docs[:1], (grades or [0])[:-1] + [rng.choice([0, 1, 2])]
        q_lines += [f"{query} 0 {doc} {grade}" for doc, grade in zip(judged, grades)]
        if qi == 0 or rng.random() < 0.85:
            for rank, doc in enumerate(rng.sample(docs, rng.randint(1, len(docs)))):
                score = rng.choice([1.0, 0.5, 0.5, round(rng.random(), 3), rng.randint(0, 3)])
                r_lines.append(f"{query} Q0 {doc} {rank} {score} run")
    if rng.random() < 0.3:
        r_lines.append("zz Q0 d1 1 1.0 run")
    rng.shuffle(r_lines)
    qrels.write_text("\n".join(q_lines) + "\n")
    run.write_text("\n".join(r_lines) + "\n")


GAIN_MEASURES = ["ndcg", "ndcg_rel", "Rndcg", "ideal_dcg"]


def write_gain_case(rng: random.Random, qrels: Path, run: Path) -> List[str]:
    """Grades 0 to 39 and a gain table over some of them (gains -5 to 5, often less than 1 apart: trec_eval orders
    such tables with qsort and a comparator that truncates); returns the measure argument."""
    levels = rng.randint(2, 40)
    q_lines: List[str] = []
    r_lines: List[str] = []
    for qi in range(rng.randint(1, 4)):
        docs = [f"d{j}" for j in range(rng.randint(1, 30))]
        judged = [f"q{qi} 0 {doc} {rng.randint(0, levels - 1)}" for doc in docs if rng.random() < 0.7]
        q_lines += judged or [f"q{qi} 0 {docs[0]} 1"]
        for rank, doc in enumerate(rng.sample(docs, rng.randint(1, len(docs)))):
            r_lines.append(f"q{qi} Q0 {doc} {rank} {round(rng.random(), 2)} run")
    qrels.write_text("\n".join(q_lines) + "\n")
    run.write_text("\n".join(r_lines) + "\n")
    pairs = ",".join(f"{level}={round(rng.uniform(-5, 5), rng.choice([0, 1, 3]))}"
                     for level in rng.sample(range(levels), rng.randint(1, levels)))
    return [f"-m{rng.choice(GAIN_MEASURES)}.{pairs}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trec-eval", required=True, help="path of a trec_eval 10 binary")
    parser.add_argument("--cases", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", default="trec-eval-mismatches", help="folder for mismatching inputs")
    parser.add_argument("--gain-tables", action="store_true",
                        help="cases of graded qrels (0-39) and ndcg-family measures with random gain tables, -q")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    mismatches = compared = 0
    with tempfile.TemporaryDirectory() as tmp:
        qrels, run = Path(tmp) / "qrels", Path(tmp) / "run"
        for case in range(args.cases):
            if args.gain_tables:
                flags = write_gain_case(rng, qrels, run)
                argv = ["-q", *flags, str(qrels), str(run)]
            else:
                write_case(rng, qrels, run)
                flags = rng.choice(FLAG_SETS)
                argv = ["-q", "-m", "all_trec", *flags, str(qrels), str(run)]
            theirs = subprocess.run([args.trec_eval, *argv], capture_output=True, text=True)
            ours = subprocess.run([sys.executable, "-m", "ragmeter", "trec", *argv], capture_output=True, text=True)
            if theirs.returncode != 0 and ours.returncode != 0:
                continue
            compared += 1
            if theirs.stdout == ours.stdout and theirs.returncode == ours.returncode == 0:
                continue
            mismatches += 1
            keep = Path(args.keep) / f"case{case}"
            keep.mkdir(parents=True, exist_ok=True)
            (keep / "qrels").write_text(qrels.read_text())
            (keep / "run").write_text(run.read_text())
            (keep / "flags").write_text(" ".join(flags) + "\n")
            print(f"case {case} {' '.join(flags)}: trec_eval exit {theirs.returncode}, ragmeter exit "
                  f"{ours.returncode}; inputs in {keep}")
    print(f"{compared} cases compared ({args.cases - compared} refused by both), {mismatches} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
