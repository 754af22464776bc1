"""ragmeter's rank metrics against the peers users come from: trec_eval (through pytrec_eval) and ranx.

The first tests need no peer: they check that inputs in a peer's own shapes (ranx's ``q_id, doc_id, score``
frames) are read. The others compare numbers with pytrec_eval and ranx on random qrels and runs (graded
relevance, queries with no relevant document, qrels-only and run-only queries, k larger than the ranking) and
are skipped when the peer is not installed. Where the peers differ from ragmeter, docs/metrics.md says why
("Peers: pytrec_eval and ranx"); the tests pin each documented difference to an example.
"""
from __future__ import annotations

import random
from typing import Any, Dict, List, Tuple

import pytest

from ragmeter.errors import InputError
from ragmeter.trec import evaluate

QRELS = {"q1": {"a": 1, "b": 2, "c": 0}, "q2": {"d": 1}}
RUN = {"q1": {"a": 0.9, "c": 0.8, "b": 0.1}, "q2": {"x": 2.0, "d": 1.0}}
MEASURES = ["map", "recip_rank", "ndcg_cut.10", "P.5"]


def _frame(nested: Dict[str, Dict[str, Any]]) -> Any:
    """``nested`` as the pandas frame ranx writes (``Qrels.to_dataframe()``, ``Run.to_dataframe()``)."""
    pd = pytest.importorskip("pandas")
    rows = [(q, d, v) for q, docs in nested.items() for d, v in docs.items()]
    return pd.DataFrame(rows, columns=["q_id", "doc_id", "score"])


def test_trec_evaluate_reads_qrels_in_ranx_frame_columns() -> None:
    """ranx's Qrels frame names the grade ``score`` (``Qrels.from_df``'s default ``score_col``); its query column
    ``q_id`` was already read, its grade column was refused as a missing 'relevance'."""
    by_dict = evaluate(QRELS, RUN, MEASURES)
    by_frame = evaluate(_frame(QRELS), _frame(RUN), MEASURES)
    assert by_frame.to_dicts() == by_dict.to_dicts()


def test_a_qrels_frame_with_a_relevance_column_and_a_score_column_is_read_by_its_relevance() -> None:
    pd = pytest.importorskip("pandas")
    qrels = pd.DataFrame({"q_id": ["q1", "q1"], "doc_id": ["a", "b"], "relevance": [1, 0], "score": [0, 1]})
    out = evaluate(qrels, {"q1": {"a": 2.0, "b": 1.0}}, ["recip_rank"])
    assert out["recip_rank"].to_list() == [1.0]


@pytest.mark.parametrize("what, columns, names", [
    ("qrels", ["q_id", "doc_id", "grade_x"], "relevance, rel, grade, label, score"),
    ("run", ["q_id", "doc_id", "sim_x"], "score, sim"),
])
def test_a_missing_value_column_lists_each_accepted_name_once(what: str, columns: List[str], names: str) -> None:
    """It read 'accepted names: relevance, relevance, rel, grade, label' (the wanted name, then again as an alias)."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame([["q1", "a", 1]], columns=columns)
    args = (frame, RUN) if what == "qrels" else (QRELS, frame)
    with pytest.raises(InputError) as err:
        evaluate(*args, ["map"])
    assert f"(accepted names: {names})" in str(err.value)


# ---------------------------------------------------------------------------------------------- the peers

def _random_case(seed: int, ties: bool,
                 negative: bool = False) -> Tuple[Dict[str, Dict[str, int]], Dict[str, Dict[str, float]]]:
    """Random qrels and run: grades 0-3 (-2 to 3 with ``negative``: "in the pool, unjudged"), some queries with no
    relevant document, some qrels-only queries, a run-only query, rankings of 1 to 20 documents (shorter than the
    largest cut-off), unjudged documents."""
    rnd = random.Random(seed)
    grades = [-2, -1, 0, 0, 1, 1, 2, 3] if negative else [0, 0, 1, 1, 2, 3]
    qrels: Dict[str, Dict[str, int]] = {}
    run: Dict[str, Dict[str, float]] = {}
    for i in range(25):
        q = f"q{i}"
        pool = [f"d{j}" for j in range(rnd.randint(1, 25))]
        judged = rnd.sample(pool, rnd.randint(1, len(pool)))
        no_relevant = rnd.random() < 0.15
        qrels[q] = {d: 0 if no_relevant else rnd.choice(grades) for d in judged}
        if rnd.random() < 0.1:
            continue
        candidates = pool + [f"x{j}" for j in range(10)]
        docs = rnd.sample(candidates, min(rnd.randint(1, 20), len(candidates)))
        if ties:  # one-decimal scores: many ties, the same in float32 and double
            run[q] = {d: rnd.choice([0.1, 0.2, 0.3, 0.5]) for d in docs}
        else:
            run[q] = {d: s / 100.0 for d, s in zip(docs, rnd.sample(range(1, 10000), len(docs)))}
    run["run_only"] = {"d1": 1.0}
    return qrels, run


CUTS = (1, 3, 5, 10, 100)
ALIKE = ["map", "recip_rank", "ndcg", "Rprec", "bpref"] + [
    f"{m}.{','.join(map(str, CUTS))}" for m in ("map_cut", "ndcg_cut", "P", "recall", "success")]


def _ranx_names() -> Dict[str, str]:
    """ragmeter trec column -> ranx metric of the same definition (bpref aside: see its own test)."""
    names = {"map": "map", "recip_rank": "mrr", "ndcg": "ndcg", "Rprec": "r-precision", "dcg": "dcg"}
    for k in CUTS:
        names.update({f"map_cut_{k}": f"map@{k}", f"ndcg_cut_{k}": f"ndcg@{k}", f"P_{k}": f"precision@{k}",
                      f"recall_{k}": f"recall@{k}", f"success_{k}": f"hit_rate@{k}"})
    return names


def _rows(frame: Any) -> Dict[str, Dict[str, float]]:
    return {row["query"]: row for row in frame.iter_rows(named=True)}


@pytest.mark.parametrize("negative", [False, True])
@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize("seed", range(4))
def test_trec_equals_pytrec_eval_per_query_with_ties_and_graded_relevance(seed: int, level: int,
                                                                           negative: bool) -> None:
    """pytrec_eval (trec_eval 9's C code) and ragmeter agree on every alike-named measure, ties included (their
    one-decimal scores order the same in float32). pytrec_eval leaves out qrels-only queries; ragmeter with
    complete=True gives them 0s, so only the queries both return are compared. A query judged all below 0 is
    left out: pytrec_eval's bpref crashes on it (docs/metrics.md)."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, run = _random_case(seed, ties=True, negative=negative)
    qrels = {q: judged for q, judged in qrels.items() if max(judged.values()) >= 0}
    ours = _rows(evaluate(qrels, run, ALIKE, relevance_level=level, complete=True))
    theirs = pytrec_eval.RelevanceEvaluator(qrels, set(ALIKE), relevance_level=level).evaluate(run)
    assert set(theirs) == set(qrels) & set(run)  # run-only and qrels-only queries left out
    compared = 0
    for q, values in theirs.items():
        for measure, value in values.items():
            assert ours[q][measure] == pytest.approx(value, abs=1e-12), (q, measure)
            compared += 1
    assert compared > 500


@pytest.mark.parametrize("negative", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_trec_equals_ranx_per_query_and_mean_without_ties(seed: int, negative: bool) -> None:
    """ranx's make_comparable=True is trec_eval's -c (complete=True). Without ties (ranx orders them
    arbitrarily) and at relevance level 1 every alike-named metric agrees, per query and averaged."""
    np = pytest.importorskip("numpy")
    ranx = pytest.importorskip("ranx")
    qrels, run = _random_case(seed, ties=False, negative=negative)
    ours = _rows(evaluate(qrels, run, ALIKE + ["dcg"], complete=True))
    names = _ranx_names()
    rq, rr = ranx.Qrels.from_dict(qrels), ranx.Run.from_dict(run)
    theirs = ranx.evaluate(rq, rr, list(names.values()), return_mean=False, make_comparable=True)
    queries = list(rq.keys())
    assert sorted(queries) == sorted(qrels)
    for measure, ranx_name in names.items():
        per_query = [ours[q][measure] for q in queries]
        assert per_query == pytest.approx([float(v) for v in theirs[ranx_name]], abs=1e-12), measure
        assert float(np.mean(per_query)) == pytest.approx(float(np.mean(theirs[ranx_name])), abs=1e-12), measure


@pytest.mark.parametrize("seed", range(3))
def test_the_python_rank_metrics_equal_ranx_per_query(seed: int) -> None:
    """ragmeter.metrics on each query's verdicts (ranked by trec_eval's rule) against ranx, k up to 100 (longer
    than any ranking): precision_at_k, recall, reciprocal_rank (with k: ranx mrr@k), average_precision with
    n_relevant, hit, ndcg and ndcg_exp (ranx ndcg_burges) with the query's judged grades as ideal."""
    ranx = pytest.importorskip("ranx")
    from ragmeter import metrics

    qrels, run = _random_case(seed, ties=False)
    queries = sorted(q for q in set(qrels) & set(run) if any(g >= 1 for g in qrels[q].values()))
    rq = ranx.Qrels.from_dict({q: qrels[q] for q in queries})
    rr = ranx.Run.from_dict({q: run[q] for q in queries})
    ours: Dict[str, List[float]] = {}
    for q in rq.keys():
        ranked = sorted(run[q], key=lambda d: -run[q][d])
        grades = [float(max(qrels[q].get(d, 0), 0)) for d in ranked]
        n_relevant = sum(g >= 1 for g in qrels[q].values())
        ideal = [g for g in qrels[q].values() if g > 0]
        values = {"mrr": metrics.reciprocal_rank(grades), "map": metrics.average_precision(grades, n_relevant),
                  "ndcg": metrics.ndcg(grades, ideal=ideal), "ndcg_burges": metrics.ndcg_exp(grades, ideal=ideal)}
        for k in CUTS:
            values.update({
                f"precision@{k}": metrics.precision_at_k(grades, k),
                f"recall@{k}": metrics.recall(grades, n_relevant, k),
                f"mrr@{k}": metrics.reciprocal_rank(grades, k), f"hit_rate@{k}": metrics.hit(grades, k),
                f"map@{k}": metrics.average_precision(grades, n_relevant, k),
                f"ndcg@{k}": metrics.ndcg(grades, k, ideal=ideal),
                f"ndcg_burges@{k}": metrics.ndcg_exp(grades, k, ideal=ideal)})
        for name, value in values.items():
            ours.setdefault(name, []).append(value)
    theirs = ranx.evaluate(rq, rr, list(ours), return_mean=False)
    for name, values in ours.items():
        assert values == pytest.approx([float(v) for v in theirs[name]], abs=1e-12), name


def test_ndcg_at_a_relevance_level_above_1_differs_from_ranx_as_documented() -> None:
    """trec_eval's ndcg ignores -l (a grade-1 document still gains); ranx's ``-l2`` drops grades below 2 from the
    gains and from the ideal. docs/metrics.md: grade 1 at rank 1, grade 2 at rank 2."""
    ranx = pytest.importorskip("ranx")
    qrels, run = {"q": {"a": 1, "b": 2}}, {"q": {"a": 2.0, "b": 1.0}}
    ours = evaluate(qrels, run, ["ndcg"], relevance_level=2)["ndcg"][0]
    theirs = float(ranx.evaluate(ranx.Qrels.from_dict(qrels), ranx.Run.from_dict(run), "ndcg-l2"))
    assert ours == pytest.approx((1 + 2 / 1.5849625007211563) / (2 + 1 / 1.5849625007211563))  # 0.8597
    assert theirs == pytest.approx(1 / 1.5849625007211563)  # 0.6309: b alone, at rank 2 of an ideal [b]


def test_bpref_without_judged_non_relevant_documents_is_1_where_ranx_gives_nan() -> None:
    """trec_eval's bpref (and ragmeter's): a relevant document above no judged non-relevant one adds 1; ranx
    divides by min(R, judged non-relevant) = 0 and gives NaN (docs/metrics.md)."""
    ranx = pytest.importorskip("ranx")
    qrels, run = {"q": {"a": 1}}, {"q": {"x": 2.0, "a": 1.0}}
    assert evaluate(qrels, run, ["bpref"])["bpref"][0] == 1.0
    theirs = float(ranx.evaluate(ranx.Qrels.from_dict(qrels), ranx.Run.from_dict(run), "bpref"))
    assert theirs != theirs  # NaN


def test_trec_evaluate_takes_ranx_qrels_and_run_objects() -> None:
    """A ranx user's Qrels and Run were refused ('expected a file path, a dict of dicts, or a
    Polars/pandas/pyarrow table, got Qrels'); they are read as their dicts."""
    ranx = pytest.importorskip("ranx")
    out = evaluate(ranx.Qrels.from_dict(QRELS), ranx.Run.from_dict(RUN), MEASURES)
    assert out.to_dicts() == evaluate(QRELS, RUN, MEASURES).to_dicts()


@pytest.mark.parametrize("pytrec_name, trec_name", [
    ("P_5", "P.5"), ("ndcg_cut_10", "ndcg_cut.10"), ("map_cut_5", "map_cut.5"), ("recall_10", "recall.10"),
    ("success_1", "success.1"), ("relative_P_5", "relative_P.5"), ("ndcg_cut_10,20", "ndcg_cut.10,20"),
    ("iprec_at_recall_0.10", "iprec_at_recall.0.10"), ("Rprec_mult_0.20", "Rprec_mult.0.20"),
])
def test_trec_evaluate_reads_a_measure_in_pytrec_eval_spelling(pytrec_name: str, trec_name: str) -> None:
    """pytrec_eval takes a measure at its cut-off as the name of its result (``{"P_5", "ndcg_cut_10"}``: what its
    users write, and the columns of ragmeter's result); it was refused as "unknown measure 'P_5'; known measures:
    ...". Read as trec_eval's ``P.5``: the same columns, the same numbers."""
    out = evaluate(QRELS, RUN, {pytrec_name, "map"})
    assert out.to_dicts() == evaluate(QRELS, RUN, [trec_name, "map"]).to_dicts()


@pytest.mark.parametrize("name, column", [("ndcg_cut.10", "ndcg_cut_10"), ("ndcg.1=3,2=9", "ndcg_1=3,2=9"),
                                          ("set_P", "set_P"), ("num_rel_ret", "num_rel_ret"), ("gm_map", "gm_map")])
def test_measures_in_trec_eval_syntax_are_read_as_before(name: str, column: str) -> None:
    """Only a name that is not a measure is read as pytrec_eval's spelling: 'ndcg_cut.10' stays ndcg_cut (not
    'ndcg' with the parameters 'cut.10'), 'set_P' stays set_P."""
    out = evaluate(QRELS, RUN, [name], per_query=False)
    assert out.columns[1:] == [column]


@pytest.mark.parametrize("name", ["precision_5", "map_foo", "P_x"])
def test_an_unknown_measure_with_an_underscore_is_still_refused_as_written(name: str) -> None:
    """'map_foo' is not pytrec_eval's map with the parameters 'foo': it is refused naming 'map_foo'."""
    from ragmeter.errors import MeasureError

    with pytest.raises(MeasureError, match=f"unknown measure '{name}'"):
        evaluate(QRELS, RUN, [name])


def test_trec_cli_names_trec_eval_syntax_for_a_measure_in_pytrec_eval_spelling(tmp_path: Any) -> None:
    """``ragmeter trec -m P_5`` stays refused, as trec_eval refuses it, but the message said only "unknown measure
    'P_5'; known measures: official, set, ..." (40 names); it says to write -m P.5, in one line, exit 2."""
    import subprocess
    import sys

    (tmp_path / "qrels").write_text("1 0 a 1\n")
    (tmp_path / "run").write_text("1 Q0 a 1 1.0 r\n")
    done = subprocess.run([sys.executable, "-m", "ragmeter", "trec", "-m", "map", "-m", "ndcg_cut_10", "qrels", "run"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "ragmeter: error: unknown measure 'ndcg_cut_10': trec_eval's syntax for it is -m ndcg_cut.10 "
        "(ndcg_cut_10 is the name of its output)"]


def test_bpref_reads_a_negative_judgement_as_unjudged_where_ranx_counts_it_non_relevant() -> None:
    """trec_eval (and pytrec_eval, ragmeter): a judgement below 0 is "in the pool, unjudged", so b ranked above the
    relevant a costs nothing (bpref 1.0); ranx counts b as judged non-relevant (0.0). docs/metrics.md, bpref."""
    ranx = pytest.importorskip("ranx")
    qrels, run = {"q": {"a": 1, "b": -1, "c": 0}}, {"q": {"b": 3.0, "a": 2.0, "c": 1.0}}
    assert evaluate(qrels, run, ["bpref"])["bpref"][0] == 1.0
    assert float(ranx.evaluate(ranx.Qrels.from_dict(qrels), ranx.Run.from_dict(run), "bpref")) == 0.0


def test_average_precision_over_retrieved_relevant_is_deepeval_contextual_precision() -> None:
    """DeepEval's ContextualPrecisionMetric._calculate_score restated (its verdicts 1/0): the sum of precision@k
    over the relevant ranks, divided by the relevant nodes, 0 when none (docs/metrics.md, AP over retrieved)."""
    from ragmeter import metrics

    def deepeval_contextual_precision(verdicts: List[int]) -> float:
        total, relevant = 0.0, 0
        for k, is_relevant in enumerate(verdicts, start=1):
            if is_relevant:
                relevant += 1
                total += relevant / k
        return 0 if relevant == 0 else total / relevant

    rnd = random.Random(3)
    for _ in range(500):
        verdicts = [rnd.choice([0, 1]) for _ in range(rnd.randint(0, 12))]
        expected = deepeval_contextual_precision(verdicts)
        assert metrics.average_precision(verdicts) == pytest.approx(expected, abs=1e-15)


def test_scores_are_doubles_where_pytrec_eval_reads_float32() -> None:
    """0.30000002 and 0.30000001 are one float32: pytrec_eval ties them and ranks z first (document id
    descending), RR 0.5; ragmeter reads doubles, as trec_eval 10 does: RR 1.0 (docs/metrics.md)."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, run = {"q": {"a": 1}}, {"q": {"a": 0.30000002, "z": 0.30000001}}
    assert evaluate(qrels, run, ["recip_rank"])["recip_rank"][0] == 1.0
    assert pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(run)["q"]["recip_rank"] == 0.5


def test_a_fractional_grade_in_a_frame_names_its_column() -> None:
    """A run frame passed as qrels (ranx's frames both name their values 'score') was refused as "qrels: relevance
    must be integers: row 1: 0.9 is not a whole number", naming a column the frame does not have."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"q_id": ["q1", "q1"], "doc_id": ["a", "b"], "score": [0.9, 0.5]})
    with pytest.raises(InputError) as err:
        evaluate(frame, frame, ["map"])
    assert str(err.value) == "qrels: relevance (column 'score') must be integers: row 1: 0.9 is not a whole number"
