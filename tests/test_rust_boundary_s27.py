"""Inputs at the Rust boundary (session 27): each gives a clear error or the right number, never a panic
(``pyo3_runtime.PanicException``), an abort, a hang or an OverflowError traceback.

The tests marked ``needs_rebuild`` in their docstring exercise a fix in ``ragmeter-core``: they fail on an
extension built before it. Those that would abort the interpreter on such a build run in a child process under a
4 GB address-space limit, so that a failure is a failed test, not a dead test run.
"""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from ragmeter import stats
from ragmeter.errors import InputError
from ragmeter.trec import evaluate

ROOT = Path(__file__).resolve().parents[1]

#: gains less than 1 apart on 34 levels: Rust's sort of trec_eval's `(int)(g1 - g2)` comparison panicked on them
PAIRS = ("0=2.06,1=1.248,2=3.412,3=1.224,4=2.996,5=0.804,6=3.612,7=2.424,8=2.18,9=3.636,10=0.336,11=1.74,12=0.78,"
         "13=0.152,14=2.612,15=1.036,16=0.22,17=3.916,18=1.036,19=0.292,20=3.432,21=0.068,22=3.112,23=3.364,24=2.832,"
         "25=3,26=3.02,27=1.916,28=1.424,29=0.076,30=1.54,31=3.58,32=2.6,33=2.3")


def child(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter limited to 4 GB of address space."""
    limit = textwrap.dedent("""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (4_000_000_000, 4_000_000_000))
    """)
    return subprocess.run([sys.executable, "-c", limit + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def trec(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmeter", "trec", *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)


# -- trec: gain measures with name=gain pairs


@pytest.mark.parametrize("measure", ["ndcg", "G", "ndcg_rel", "Rndcg", "rbp"])
def test_gains_less_than_one_apart_evaluate_without_a_panic(tmp_path: Path, measure: str) -> None:
    """needs_rebuild: a PanicException ('comparison function does not correctly implement a total order')."""
    (tmp_path / "q").write_text("".join(f"1 0 d{i} {i}\n" for i in range(34)))
    (tmp_path / "r").write_text("".join(f"1 Q0 d{i} {i} {100 - i} r\n" for i in range(34)))
    out = evaluate(tmp_path / "q", tmp_path / "r", f"{measure}.{PAIRS}", per_query=False)
    assert np.isfinite(out[f"{measure}_{PAIRS}"][0])
    done = trec(tmp_path, "q", "r", "-m", f"{measure}.{PAIRS}")
    assert done.returncode == 0, done.stderr
    assert "Panic" not in done.stderr


def test_gains_less_than_one_apart_are_ordered_as_trec_eval_orders_them_with_glibc(tmp_path: Path) -> None:
    """needs_rebuild: 2.6272 (Rust's stable sort) for 2.8080 (glibc 2.36's qsort, which trec_eval calls)."""
    pairs = "0=1.828,1=0.8917538718275559,2=-4.487,3=-3.206,4=0.313,5=1.1965730201508278,6=-3.0"
    (tmp_path / "q").write_text("".join(f"1 0 d{i} {i}\n" for i in range(7)))
    (tmp_path / "r").write_text("".join(f"1 Q0 d{i} {i} {10 - i} r\n" for i in range(7)))
    done = trec(tmp_path, "q", "r", "-m", f"ideal_dcg.{pairs}")
    assert done.stdout == f"{'ideal_dcg_' + pairs:<22}\tall\t2.8080\n", done.stdout + done.stderr


def test_a_grade_of_a_million_with_unjudged_documents_is_not_quadratic(tmp_path: Path) -> None:
    """needs_rebuild: each ranked document's gain was a search of all 1,000,001 levels (25 s for these 20 queries
    and -m ndcg alone; with -m all_trec's five gain measures, minutes)."""
    qrels = "".join(f"q{q} 0 judged 1000000\n" for q in range(20))
    run = "".join(f"q{q} Q0 d{d} {d} {2000 - d} r\n" for q in range(20) for d in range(1000))
    (tmp_path / "q").write_text(qrels)
    (tmp_path / "r").write_text(run)
    done = trec(tmp_path, "q", "r", "-m", "ndcg", "-m", "G", "-m", "rbp")  # speed: not asserted (benchmarks only)
    assert done.returncode == 0, done.stderr


#: 34 recall points with NaNs among them: the sort of the cutoffs panicked (a NaN has no order)
NAN_POINTS = ("0.312,nan,0.749,nan,0.606,0.909,0.435,nan,0.653,nan,nan,nan,0.073,0.017,0.841,0.75,0.479,0.019,0.895,"
              "0.575,0.099,0.003,0.217,0.323,0.113,0.82,0.896,0.114,0.286,nan,0.759,0.513,0.14,0.134")


@pytest.mark.parametrize("measure", ["iprec_at_recall", "Rprec_mult"])
@pytest.mark.parametrize("points", [NAN_POINTS, "nan,0.5", "0.5,inf"])
def test_a_recall_point_that_is_not_a_number_is_refused_naming_the_measure(tmp_path: Path, measure: str,
                                                                          points: str) -> None:
    """needs_rebuild: a PanicException for 34 points; a column named iprec_at_recall_nan for 2."""
    (tmp_path / "q").write_text("1 0 d1 1\n")
    (tmp_path / "r").write_text("1 Q0 d1 1 0.5 r\n")
    done = trec(tmp_path, "q", "r", "-m", f"{measure}.{points}")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"ragmeter: error: measure '{measure}': cutoff "), done.stderr
    assert "is not a finite number" in done.stderr


def test_measures_asking_for_more_values_than_memory_holds_are_refused() -> None:
    """needs_rebuild: 300,000 cutoffs on 2,000 queries was a 4.8 GB allocation (an abort, rc 134); in a child
    process, as it aborts the interpreter on an extension built before the fix."""
    done = child("""
        from ragmeter import trec
        from ragmeter.errors import MeasureError
        q = {f"q{i}": {"d": 1} for i in range(2000)}
        r = {f"q{i}": {"d": 1.0} for i in range(2000)}
        try:
            trec.evaluate(q, r, "P." + ",".join(str(k) for k in range(1, 300_001)))
        except MeasureError as e:
            print(e)
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("the measures ask for 300000 values per query, 2000 queries: more than the "
                                  "268435456 values (2 GiB) ragmeter holds"), done.stdout


@pytest.mark.parametrize(("measure", "said"), [("11pt_avg.nan,0.5", "measure '11pt_avg': parameter nan is not a number"),
                                             ("ndcg.1=nan", "measure 'ndcg': the value of 1 is not a number (nan)")])
def test_a_measure_parameter_that_is_nan_is_refused(tmp_path: Path, measure: str, said: str) -> None:
    """needs_rebuild: 11pt_avg.nan,0.5 printed 0.5000 (trec_eval casts the NaN to a count: undefined)."""
    (tmp_path / "q").write_text("1 0 d1 1\n")
    (tmp_path / "r").write_text("1 Q0 d1 1 0.5 r\n")
    done = trec(tmp_path, "q", "r", "-m", measure)
    assert (done.returncode, done.stderr) == (2, f"ragmeter: error: {said}\n")


# -- trec: -l, -M, -N beyond a 64-bit integer


@pytest.mark.parametrize("flag", ["-l", "-M", "-N"])
@pytest.mark.parametrize("value", ["99999999999999999999", "-9223372036854775809"])
def test_an_option_beyond_64_bits_is_refused_naming_its_flag(tmp_path: Path, flag: str, value: str) -> None:
    (tmp_path / "q").write_text("1 0 d1 1\n")
    (tmp_path / "r").write_text("1 Q0 d1 1 0.5 r\n")
    done = trec(tmp_path, "q", "r", flag, value)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"ragmeter: error: {flag} {value}: out of range"), done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("name", ["relevance_level", "max_docs", "num_docs_in_coll"])
def test_an_option_beyond_64_bits_is_refused_naming_its_argument(tmp_path: Path, name: str) -> None:
    (tmp_path / "q").write_text("1 0 d1 1\n")
    (tmp_path / "r").write_text("1 Q0 d1 1 0.5 r\n")
    with pytest.raises(InputError, match=rf"^{name} must be a 64-bit integer \(trec_eval's C long\), got {2**63}$"):
        evaluate(tmp_path / "q", tmp_path / "r", **{name: 2**63})
    assert len(evaluate(tmp_path / "q", tmp_path / "r", **{name: 2**63 - 1})) == 1


# -- stats: resample counts


@pytest.mark.parametrize("n_resamples", [10**11, 2**62, 2**64 + 1])
def test_resamples_beyond_memory_are_refused_by_bootstrap_means(n_resamples: int) -> None:
    """An abort (terabytes) for 10**11, a 'capacity overflow' PanicException for 2**62, an OverflowError for 2**64."""
    with pytest.raises(InputError, match=rf"^bootstrap: n_resamples = {n_resamples} is too many"):
        stats.bootstrap_means([0.1, 0.5, 0.9], n_resamples=n_resamples)
    with pytest.raises(InputError, match=rf"^bootstrap: n_resamples = {n_resamples} is too many"):
        stats.bootstrap_ci([0.1, 0.5, 0.9] * 10, n_resamples=n_resamples)


@pytest.mark.parametrize(("kwargs", "said"), [({"n_resamples": -1}, "n_resamples must be a non-negative integer"),
                                             ({"threads": -1}, "threads must be an integer between 1 and 1024 or None"),
                                             ({"threads": 0}, "threads must be an integer between 1 and 1024 or None")])
def test_negative_resamples_or_threads_are_refused_naming_the_argument(kwargs: dict, said: str) -> None:
    """An OverflowError ("can't convert negative int to unsigned") from the binding before."""
    with pytest.raises(InputError, match=f"^{said}, got "):
        stats.bootstrap_means([0.1, 0.5, 0.9], **kwargs)
    assert stats.bootstrap_means([0.1, 0.5, 0.9], n_resamples=0)[None].shape == (0, 1)


@pytest.mark.parametrize("engine", ["rust", "numpy"])
@pytest.mark.parametrize("big", [float("inf"), float("-inf"), 1e300])
def test_an_infinite_or_huge_value_is_refused_not_resampled_into_nan(engine: str, big: float) -> None:
    """[0.1, 0.5, 0.9, inf]: the Rust kernel gave NaN for every resample without the last case and inf for the
    others, the numpy path NaN for all; 1e300 overflowed their float32 sums the same way."""
    said = f"bootstrap: value {big!r} (case 3, column 0) is beyond what the kernel sums (finite, |x| <= 1e30)"
    with pytest.raises(InputError, match=f"^{re.escape(said)}$"):
        stats.bootstrap_means([0.1, 0.5, 0.9, big], n_resamples=200, engine=engine)
    with pytest.raises(InputError, match=r"^bootstrap: value inf \(case 3, column 1\)"):
        stats.bootstrap_means(np.array([[0.1, 0.2]] * 3 + [[0.3, np.inf]]), n_resamples=200, engine=engine)
    means = stats.bootstrap_means([0.1, np.nan, 1e30, -1e30], n_resamples=200, engine=engine)[None][:, 0]
    assert not np.isinf(means).any()


def test_the_kernel_refuses_an_infinite_value_itself() -> None:
    """needs_rebuild: ``_core.bootstrap_means`` resampled it into NaN and inf."""
    from ragmeter import _core

    with pytest.raises(_core.InputError, match=r"^bootstrap: value inf \(case 3, column 0\)"):
        _core.bootstrap_means(np.array([[0.1], [0.5], [0.9], [np.inf]]), np.zeros(4, np.int64), 1, 100, 1)


def test_the_kernel_refuses_resamples_beyond_memory_itself() -> None:
    """needs_rebuild: ``_core.bootstrap_means`` and ``_core.bootstrap_counts`` aborted (rc 134) allocating them."""
    done = child("""
        import numpy as np
        from ragmeter import _core
        for call in (lambda: _core.bootstrap_means(np.array([[0.1], [0.5]]), np.zeros(2, np.int64), 1, 10**11, 1),
                     lambda: _core.bootstrap_counts(1000, 10**11, 1),
                     lambda: _core.bootstrap_means(np.array([[0.1]]), np.zeros(1, np.int64), 2**64 - 1, 100, 1)):
            try:
                call()
            except _core.InputError as e:
                print(e)
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 3, done.stdout
    assert lines[0].startswith("bootstrap: n_resamples = 100000000000 is too many"), lines
    assert lines[1].startswith("bootstrap: n_resamples = 100000000000 is too many"), lines
    assert lines[2].startswith("bootstrap: n_resamples = 100 is too many"), lines


# -- evidence: a case with very many phrases


def test_a_case_with_many_phrases_is_matched_in_linear_time() -> None:
    """needs_rebuild: each phrase was compared with every earlier phrase of its case (80,000 phrases: 11 s; these
    200,000: over a minute)."""
    from ragmeter.evidence import match_relevance

    phrases = [f"phrase number {i} here" for i in range(200_000)]
    m = match_relevance([[]], [phrases], [["a.pdf"]], [["… Phrase number 5 here …"]])  # speed: benchmarks only
    assert m.relevant.tolist() == [True]


# -- sweep: many thresholds


def test_a_sweep_of_a_hundred_thousand_thresholds_is_not_quadratic() -> None:
    """Each threshold was counted among all the others to find one given twice: 10,000 thresholds took 1 s,
    100,000 over a minute (the sweep engine itself takes 100,000 in under 2 s)."""
    from ragmeter import retrieval

    ex = ROOT / "python" / "ragmeter" / "_example"
    thresholds = np.linspace(0, 1, 100_000).tolist()
    table = retrieval.sweep(ex / "golden.jsonl", ex / "run.jsonl", thresholds=thresholds)  # speed: benchmarks only
    assert table.height % 100_000 == 0
    with pytest.raises(InputError, match=r"^thresholds: 0, 1 given more than once"):
        retrieval.sweep(ex / "golden.jsonl", ex / "run.jsonl", thresholds=[0.5, 0.0, -0.0, 1, 1.0, 2])


# -- rank metrics: no metric asked for


def test_rank_metrics_without_metrics_keep_one_row_per_query() -> None:
    """needs_rebuild: the (queries x metrics) matrix had 0 rows for 0 metrics, whatever the queries."""
    from ragmeter import _core

    out = _core.rank_metrics(np.array([0, 2, 2, 3], np.int64), np.ones(3), np.ones(3), [])
    assert out.shape == (3, 0)
    assert _core.rank_metrics(np.array([0, 2], np.int64), np.ones(2), np.ones(1), ["ap"]).shape == (1, 1)


def test_a_cutoff_beyond_the_machine_s_integers_is_named_as_such() -> None:
    """needs_rebuild: k=2**70 said "the cutoff after '@' must be a positive integer"."""
    from ragmeter import metrics
    from ragmeter.errors import MeasureError

    with pytest.raises(MeasureError, match=r"the cutoff after '@' is above 18446744073709551615"):
        metrics.precision([1, 0, 1], k=2**70)


def test_threads_beyond_what_a_machine_runs_are_refused() -> None:
    # threads=10**6 spawned OS threads until the system refused
    import pytest as _pytest

    from ragmeter import stats
    from ragmeter.errors import InputError

    with _pytest.raises(InputError, match="threads"):
        stats.bootstrap_means([0.1, 0.5, 0.9], n_resamples=10, threads=10**6)
    assert len(stats.bootstrap_means([0.1, 0.5, 0.9], n_resamples=10, threads=2)[None]) == 10
