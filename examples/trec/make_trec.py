#!/usr/bin/env python3
"""Regenerate python/ragmeter/_example/trec/qrels.txt and run.txt (stdlib only, deterministic).

A small TREC-format pair for the rank-metric engine: six judged queries with graded relevance
0-3 (0 = judged not relevant), a run retrieving 20 documents for five of them. Query 106 is in
the qrels only (the run has nothing for it), some relevant documents are never retrieved, and
a few scores are tied so tie-breaking matters.

    python examples/trec/make_trec.py
"""
import os
import random

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "python", "ragmeter", "_example", "trec")
RUN_ID = "meridian-hybrid-v2"
DEPTH = 20
QUERIES = ["101", "102", "103", "104", "105", "106"]
RUN_QUERIES = QUERIES[:5]
TIES = {"102": [(3, 4)], "104": [(6, 7, 8)], "105": [(0, 1)]}   # rank positions sharing a score


def doc(n):
    return "MER-%04d" % n


def main():
    rng = random.Random(20240601)
    qrels, run = [], []
    for q in QUERIES:
        pool = rng.sample(range(1, 400), 40)
        judged = pool[:26]
        grades = {}
        for i, d in enumerate(judged):
            if i < 2:
                grades[d] = 3
            elif i < 5:
                grades[d] = rng.choice((2, 3))
            elif i < 10:
                grades[d] = rng.choice((1, 2))
            else:
                grades[d] = 0
        for d in sorted(grades):
            qrels.append("%s 0 %s %d" % (q, doc(d), grades[d]))
        if q not in RUN_QUERIES:
            continue
        # a decent but imperfect ranking: mostly relevant first, some judged-0 and unjudged docs
        candidates = judged[:8] + judged[10:16] + pool[26:]
        keyed = sorted(candidates, key=lambda d: -(grades.get(d, 0) + rng.uniform(-1.6, 1.6)))
        ranked = keyed[:DEPTH]
        scores, s = [], 1.0
        for _ in ranked:
            s -= rng.uniform(0.005, 0.06)
            scores.append(round(s, 4))
        for group in TIES.get(q, ()):
            for pos in group[1:]:
                scores[pos] = scores[group[0]]
        for rank, (d, sc) in enumerate(zip(ranked, scores), start=1):
            run.append("%s Q0 %s %d %.4f %s" % (q, doc(d), rank, sc, RUN_ID))
    with open(os.path.join(OUT_DIR, "qrels.txt"), "w", newline="\n") as f:
        f.write("\n".join(qrels) + "\n")
    with open(os.path.join(OUT_DIR, "run.txt"), "w", newline="\n") as f:
        f.write("\n".join(run) + "\n")
    print("wrote %d qrels lines and %d run lines" % (len(qrels), len(run)))


if __name__ == "__main__":
    main()
