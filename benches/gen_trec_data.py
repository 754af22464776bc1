"""Seeded generator of TREC qrels/run pairs for benches/bench_trec.py.

    python benches/gen_trec_data.py 20000 [--docs 100] [--seed 7] [--out benches/data]

Each query retrieves ``--docs`` distinct documents and has 10-30 judged
documents with grades 0-3 (45% / 25% / 18% / 12%; at least one grade >= 1).
About 60% of the judged documents are retrieved, the rest are judged but not
retrieved; most retrieved documents are unjudged. Relevant documents tend to
score higher (latent score = 0.8 * grade + N(0, 1)).

Scores are chosen so that float32 (pytrec_eval, trec_eval <= 9) and float64
(ragmeter, trec_eval 10, ranx) parse them to the same ranking:

* 90% of queries get distinct scores ``k / 1024`` with integer ``k < 2**18``;
  these are exact in float32 and printed exactly (e.g. ``123.4560546875``).
* 10% of queries (``tied``) get the latent score rounded to one decimal
  (e.g. ``4.3``), so most of their documents share a score with another one.
  One-decimal values below 100 stay distinct and in the same order in
  float32, so every tool sees the same ties; trec_eval breaks them by
  document id descending (strcmp), ranx in an unspecified order.

Document ids are ``d<int>`` of 3 to 6 digits within one query, so strcmp order differs from
numeric order. Files are cached: they are rewritten only if missing or made by
another generator version.
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Dict, Tuple

import numpy as np

GENERATOR_VERSION = 2
DEFAULT_SEED = 7
DEFAULT_DIR = Path(__file__).resolve().parent / "data"
GRADE_P = (0.45, 0.25, 0.18, 0.12)
TIE_FRACTION = 0.10


def generate(n_queries: int, docs_per_query: int = 100, seed: int = DEFAULT_SEED) -> Dict[str, np.ndarray]:
    """All columns of one data set, as numpy arrays (deterministic in the arguments).

    Keys: ``ret_doc`` (nq, k) int64 doc numbers in file order (score descending),
    ``ret_score`` (nq, k) float64, ``ret_grade`` (nq, k) int64 (-1 = unjudged),
    ``tied`` (nq,) bool, ``unret_off`` (nq + 1,) int64 with ``unret_doc`` and
    ``unret_grade``: judged documents that were not retrieved.
    """
    rng = np.random.default_rng([seed, n_queries, docs_per_query])
    nq, k = n_queries, docs_per_query
    rows = np.arange(nq)[:, None]

    # Distinct retrieved documents per query (strictly increasing, then shuffled by score).
    base = rng.integers(0, 20_000, size=(nq, 1))
    # ids span 3 to 6 digits within one query, so strcmp order != numeric order
    ret_doc = base + np.cumsum(rng.integers(1, 2_000, size=(nq, k)), axis=1)

    # Judged documents: J in [10, 30], about 60% of them retrieved.
    n_judged = rng.integers(10, 31, size=nq)
    n_jr = np.minimum(np.rint(n_judged * rng.uniform(0.4, 0.8, size=nq)).astype(np.int64), k)
    n_ju = n_judged - n_jr
    perm = np.argsort(rng.random((nq, k)), axis=1)
    judged = np.zeros((nq, k), dtype=bool)
    judged[rows, perm] = np.arange(k)[None, :] < n_jr[:, None]
    ret_grade = np.where(judged, rng.choice(4, size=(nq, k), p=GRADE_P), -1)

    unret_off = np.zeros(nq + 1, dtype=np.int64)
    np.cumsum(n_ju, out=unret_off[1:])
    total_u = int(unret_off[-1])
    u_query = np.repeat(np.arange(nq), n_ju)
    steps = rng.integers(1, 2_000, size=total_u)
    # running sum restarted per query, starting past the last retrieved document
    cs = np.cumsum(steps)
    start_cs = np.where(unret_off[:-1] > 0, cs[np.maximum(unret_off[:-1] - 1, 0)], 0)
    start_cs[unret_off[:-1] == 0] = 0
    unret_doc = ret_doc[u_query, -1] + cs - start_cs[u_query]
    unret_grade = rng.choice(4, size=total_u, p=GRADE_P)

    # At least one relevant judgement per query.
    has_rel = (ret_grade >= 1).any(axis=1)
    np.logical_or.at(has_rel, u_query, unret_grade >= 1)
    for q in np.flatnonzero(~has_rel):
        j = np.flatnonzero(judged[q])
        if j.size:
            ret_grade[q, j[0]] = 1
        else:
            unret_grade[unret_off[q]] = 1

    # Scores.
    latent = 0.8 * np.maximum(ret_grade, 0) + rng.normal(0.0, 1.0, size=(nq, k))
    order = np.argsort(-latent, axis=1, kind="stable")
    ladder = np.cumsum(rng.integers(1, 2048, size=(nq, k)), axis=1)[:, ::-1]  # descending, < 2**18
    distinct = np.empty((nq, k))
    distinct[rows, order] = ladder / 1024.0
    tied = rng.random(nq) < TIE_FRACTION
    rounded = np.round(np.clip(latent + 5.0, 0.0, 99.0), 1)
    score = np.where(tied[:, None], rounded, distinct)

    # File order: score descending (the rank column); tools re-sort anyway.
    fo = np.argsort(-score, axis=1, kind="stable")
    return {
        "ret_doc": ret_doc[rows, fo],
        "ret_score": score[rows, fo],
        "ret_grade": ret_grade[rows, fo],
        "tied": tied,
        "unret_off": unret_off,
        "unret_doc": unret_doc,
        "unret_grade": unret_grade,
    }


def flat_arrays(data: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """Inputs for ``ragmeter._core.rank_metrics`` in trec_eval's ranking order.

    Rankings are sorted by score descending, then document id descending as
    strings (trec_eval's tie-break). Unjudged documents get grade 0.
    """
    ret_doc, score, grade = data["ret_doc"], data["ret_score"], data["ret_grade"]
    nq, k = ret_doc.shape
    grade = np.maximum(grade, 0).astype(np.float64)
    # File order is already score-descending; re-sort only the tied queries by (score desc, docid-string desc).
    tq = np.flatnonzero(data["tied"])
    if tq.size:
        ids = np.char.add("d", ret_doc[tq].astype(str))
        for i, q in enumerate(tq):
            o = np.lexsort((ids[i], score[q]))[::-1]  # ascending by (score, id) reversed
            grade[q] = grade[q][o]
    offsets = np.arange(0, nq * k + 1, k, dtype=np.int64)
    uo = data["unret_off"]
    u_query = np.repeat(np.arange(nq), np.diff(uo))
    num_rel = (grade >= 1).sum(axis=1).astype(np.float64)
    num_rel += np.bincount(u_query, weights=(data["unret_grade"] >= 1), minlength=nq)
    # Ideal: every positive judgement, descending.
    all_q = np.concatenate([np.repeat(np.arange(nq), k), u_query])
    all_g = np.concatenate([grade.ravel(), data["unret_grade"].astype(np.float64)])
    pos = all_g > 0
    all_q, all_g = all_q[pos], all_g[pos]
    o = np.lexsort((-all_g, all_q))
    ideal_grades = all_g[o]
    ideal_offsets = np.zeros(nq + 1, dtype=np.int64)
    np.cumsum(np.bincount(all_q, minlength=nq), out=ideal_offsets[1:])
    return {
        "offsets": offsets,
        "grades": grade.ravel(),
        "num_relevant": num_rel,
        "ideal_offsets": ideal_offsets,
        "ideal_grades": ideal_grades,
    }


def paths(n_queries: int, seed: int = DEFAULT_SEED, out_dir: Path = DEFAULT_DIR, docs_per_query: int = 100) -> Tuple[Path, Path]:
    stem = f"trec_{n_queries}q_{docs_per_query}d_s{seed}"
    return out_dir / f"{stem}.qrels", out_dir / f"{stem}.run"


def ensure(n_queries: int, seed: int = DEFAULT_SEED, out_dir: Path = DEFAULT_DIR, docs_per_query: int = 100) -> Tuple[Path, Path]:
    """Write the qrels and run files unless an identical set is already there."""
    qrels_path, run_path = paths(n_queries, seed, out_dir, docs_per_query)
    stamp = qrels_path.with_suffix(".json")
    meta = {"version": GENERATOR_VERSION, "queries": n_queries, "docs": docs_per_query, "seed": seed}
    if qrels_path.exists() and run_path.exists() and stamp.exists():
        try:
            if json.loads(stamp.read_text()) == meta:
                return qrels_path, run_path
        except ValueError:
            pass
    out_dir.mkdir(parents=True, exist_ok=True)
    write(generate(n_queries, docs_per_query, seed), qrels_path, run_path)
    stamp.write_text(json.dumps(meta))
    return qrels_path, run_path


def write(data: Dict[str, np.ndarray], qrels_path: Path, run_path: Path) -> None:
    import polars as pl

    ret_doc, score, grade = data["ret_doc"], data["ret_score"], data["ret_grade"]
    nq, k = ret_doc.shape
    qid = pl.Series(np.repeat(np.arange(nq), k)).cast(pl.Utf8)
    run = pl.DataFrame({
        "q": "q" + qid,
        "iter": pl.Series(["Q0"]).extend_constant("Q0", nq * k - 1),
        "doc": "d" + pl.Series(ret_doc.ravel()).cast(pl.Utf8),
        "rank": np.tile(np.arange(1, k + 1), nq),
        "score": score.ravel(),
        "tag": pl.Series(["bench"]).extend_constant("bench", nq * k - 1),
    })
    tmp = run_path.with_suffix(".run.tmp")
    run.write_csv(tmp, separator=" ", include_header=False, quote_style="never")
    os.replace(tmp, run_path)

    # qrels: retrieved judged documents, then the unretrieved judged ones, per query.
    uo = data["unret_off"]
    rq, rc = np.nonzero(grade >= 0)
    uq = np.repeat(np.arange(nq), np.diff(uo))
    q = np.concatenate([rq, uq])
    d = np.concatenate([ret_doc[rq, rc], data["unret_doc"]])
    g = np.concatenate([grade[rq, rc], data["unret_grade"]])
    o = np.argsort(q, kind="stable")
    qrels = pl.DataFrame({
        "q": "q" + pl.Series(q[o]).cast(pl.Utf8),
        "iter": pl.Series(["0"]).extend_constant("0", len(o) - 1),
        "doc": "d" + pl.Series(d[o]).cast(pl.Utf8),
        "rel": g[o],
    })
    tmp = qrels_path.with_suffix(".qrels.tmp")
    qrels.write_csv(tmp, separator=" ", include_header=False, quote_style="never")
    os.replace(tmp, qrels_path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("queries", type=int, nargs="+")
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--out", type=Path, default=DEFAULT_DIR)
    a = ap.parse_args()
    for n in a.queries:
        q, r = ensure(n, a.seed, a.out, a.docs)
        print(f"{q} ({q.stat().st_size / 1e6:.1f} MB)\n{r} ({r.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
