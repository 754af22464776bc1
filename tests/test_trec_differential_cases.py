"""Reduced cases from differential testing of ragmeter.trec against pytrec_eval.

Each case is one where pytrec_eval (built on trec_eval 9.x C code) differs from
trec_eval 10.0, and ragmeter already gives trec_eval 10's value. The expected
values are computed by hand from trec_eval 10.0's source (usnistgov/trec_eval,
commit f425365); the comment on each case gives the arithmetic and pytrec_eval's
value for contrast. They guard against drifting back to the 9.x behaviour.
"""

import math

import pytest

from ragmeter.trec import evaluate


def _write(tmp_path, qrels, run):
    q = tmp_path / "qrels"
    r = tmp_path / "run"
    q.write_text(qrels)
    r.write_text(run)
    return str(q), str(r)


def _one(df, query, measure):
    rows = [row for row in df.iter_rows(named=True) if row["query"] == query]
    assert len(rows) == 1, rows
    return rows[0][measure]


# R = 4 relevant (r1..r4); retrieved: r1 (rank 1), n1, n2, r2 (rank 4).
# trec_eval 10 (m_iprec_at_recall.c, m_11pt_avg.c): cutoff = lround(p * R).
#   p=0.3: lround(1.2)=1 -> max precision at ranks >= rank of 1st rel = 1.0
#   p=0.6: lround(2.4)=2 -> max precision at ranks >= 4 = 2/4 = 0.5
#   p=0.7: lround(2.8)=3 > num_rel_ret=2 -> 0
#   11pt_avg = (1+1+1+1 + .5+.5+.5 + 0+0+0+0) / 11 = 0.5
# trec_eval 9 / pytrec_eval used (long)(p*R + 0.9): 0.30 -> 0.5, 0.60 -> 0.0,
# 11pt_avg = 4.5/11 = 0.40909.
IPREC_QRELS = "1 0 r1 1\n1 0 r2 1\n1 0 r3 1\n1 0 r4 1\n"
IPREC_RUN = "1 Q0 r1 1 4 r\n1 Q0 n1 2 3 r\n1 Q0 n2 3 2 r\n1 Q0 r2 4 1 r\n"


@pytest.mark.parametrize(
    "measure, expected",
    [
        ("iprec_at_recall_0.10", 1.0),
        ("iprec_at_recall_0.20", 1.0),
        ("iprec_at_recall_0.30", 1.0),
        ("iprec_at_recall_0.40", 0.5),
        ("iprec_at_recall_0.50", 0.5),
        ("iprec_at_recall_0.60", 0.5),
        ("iprec_at_recall_0.70", 0.0),
        ("iprec_at_recall_1.00", 0.0),
        ("11pt_avg", 0.5),
    ],
)
def test_iprec_cutoffs_use_lround(tmp_path, measure, expected):
    q, r = _write(tmp_path, IPREC_QRELS, IPREC_RUN)
    df = evaluate(q, r, ["iprec_at_recall", "11pt_avg"], per_query=True)
    assert _one(df, "1", measure) == pytest.approx(expected, abs=1e-12)


def test_iprec_cutoff_param_lround(tmp_path):
    # iprec_at_recall.0.33 with R = 4: lround(1.32) = 1 -> 1.0 (9.x: (long)2.22 = 2 -> 0.5)
    q, r = _write(tmp_path, IPREC_QRELS, IPREC_RUN)
    df = evaluate(q, r, ["iprec_at_recall.0.33"], per_query=True)
    assert _one(df, "1", "iprec_at_recall_0.33") == pytest.approx(1.0)


def test_complete_num_rel_summary_counts_rel_above_zero(tmp_path):
    # -c -l 2; query 2 is missing from the run.
    # m_num_rel.c te_calc_avg_num_rel: with -c the summary is the number of qrels
    # lines with rel > 0 over every qrels topic, whatever -l: a, b, c -> 3.
    # Per query (rel >= 2): q1 = 1, q2 = 0 (pytrec_eval's sum of these: 1).
    # map: q1 = (1/2)/1 = 0.5, q2 = 0 -> 0.25;
    # gm_map = exp((log 0.5 + log 1e-5) / 2) = sqrt(5e-6).
    q, r = _write(tmp_path, "1 0 a 1\n1 0 b 2\n2 0 c 1\n", "1 Q0 a 1 2 r\n1 Q0 b 2 1 r\n")
    per_q = evaluate(q, r, ["num_rel", "map"], per_query=True, complete=True, relevance_level=2)
    assert _one(per_q, "1", "num_rel") == 1
    assert _one(per_q, "2", "num_rel") == 0
    summary = evaluate(q, r, ["num_rel", "map", "gm_map"], per_query=False, complete=True, relevance_level=2)
    assert _one(summary, "all", "num_rel") == 3
    assert _one(summary, "all", "map") == pytest.approx(0.25)
    assert _one(summary, "all", "gm_map") == pytest.approx(math.sqrt(5e-6))


def test_scores_are_double_not_float32(tmp_path):
    # 0.30000002 and 0.30000001 are one float32 (trec_eval <= 9.0.8, pytrec_eval:
    # a tie, broken by docno descending -> b first, RR = 0.5). trec_eval 10 reads
    # doubles: a (relevant) is first, RR = 1.0, P_1 = 1.0.
    q, r = _write(tmp_path, "1 0 a 1\n1 0 b 0\n", "1 Q0 a 1 0.30000002 r\n1 Q0 b 2 0.30000001 r\n")
    df = evaluate(q, r, ["recip_rank", "P.1"], per_query=True)
    assert _one(df, "1", "recip_rank") == 1.0
    assert _one(df, "1", "P_1") == 1.0


def test_ties_by_docno_descending_bytes(tmp_path):
    # Equal scores (1, 1.0e0, 1.000 are one value); trec_eval orders ties by
    # strcmp descending: c > b > a, and "d9" > "d10".
    q, r = _write(tmp_path, "1 0 b 1\n2 0 d10 1\n",
                  "1 Q0 a 1 1 r\n1 Q0 b 2 1.0e0 r\n1 Q0 c 3 1.000 r\n2 Q0 d10 1 7 r\n2 Q0 d9 2 7 r\n")
    df = evaluate(q, r, ["recip_rank"], per_query=True)
    assert _one(df, "1", "recip_rank") == 0.5
    assert _one(df, "2", "recip_rank") == 0.5


def test_max_docs_cuts_before_judged_only(tmp_path):
    # form_res_rels.c cuts the sorted ranking at -M, then -J drops unjudged docs:
    # [u, a, c] -M 2 -> [u, a] -J -> [a]: num_ret 1, map = (1/1)/2 = 0.5 (R = 2).
    # (-J first would give [a, c] and map 1.0.)
    q, r = _write(tmp_path, "1 0 a 1\n1 0 c 1\n", "1 Q0 u 1 3 r\n1 Q0 a 2 2 r\n1 Q0 c 3 1 r\n")
    df = evaluate(q, r, ["num_ret", "map"], per_query=True, max_docs=2, judged_only=True)
    assert _one(df, "1", "num_ret") == 1
    assert _one(df, "1", "map") == pytest.approx(0.5)


def test_judged_only_drops_negative_judgements(tmp_path):
    # -J keeps docs with a judgement >= 0; rel -1 / -2 are "in pool, unjudged".
    # ranking x(-1), y(-2), a(1): -J -> [a], RR = 1, num_ret = 1.
    q, r = _write(tmp_path, "1 0 x -1\n1 0 y -2\n1 0 a 1\n",
                  "1 Q0 x 1 3 r\n1 Q0 y 2 2 r\n1 Q0 a 3 1 r\n")
    df = evaluate(q, r, ["num_ret", "recip_rank"], per_query=True, judged_only=True)
    assert _one(df, "1", "num_ret") == 1
    assert _one(df, "1", "recip_rank") == 1.0
