"""ragmeter trec / ragmeter.trec.evaluate against trec_eval's own test suite."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragmeter.errors import InputError, MeasureError
from ragmeter.trec import evaluate

MEAS_PARAMS = [
    "-miprec_at_recall..10,.20,.25,.75,.50", "-m", "P.5,7,3", "-m", "recall.20,2000",
    "-m", "Rprec_mult.5.0,0.2,0.35", "-mutility.2,-1,0,0", "-m", "11pt_avg..25,.5,.75",
    "-mndcg.1=3,2=9,4=4.5", "-mndcg_cut.10,20,23.4", "-msuccess.2,5,20",
]

# (expected output, arguments) exactly as in the conformance README.
CASES = [
    ("out.test", ["qrels.test", "results.test"]),
    ("out.test", ["qrels.test.with-comments", "results.test"]),
    ("out.test.a", ["-m", "all_trec", "qrels.test", "results.test"]),
    ("out.test.aq", ["-m", "all_trec", "-q", "qrels.test", "results.test"]),
    ("out.test.aqc", ["-m", "all_trec", "-q", "-c", "qrels.test", "results.trunc"]),
    ("out.test.aqcM", ["-m", "all_trec", "-q", "-c", "-M100", "qrels.test", "results.trunc"]),
    ("out.test.aql", ["-m", "all_trec", "-mrelstring.20", "-q", "-l2", "qrels.rel_level", "results.test"]),
    ("out.test.meas_params", ["-q", *MEAS_PARAMS, "qrels.test", "results.test"]),
]


def ragmeter(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmeter", *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize("expected,args", CASES, ids=[f"{e}:{' '.join(a)}" for e, a in CASES])
def test_cli_reproduces_trec_eval_byte_for_byte(conformance: Path, expected: str, args: list) -> None:
    files = {"qrels.test", "qrels.test.with-comments", "qrels.rel_level", "results.test", "results.trunc"}
    argv = [str(conformance / a) if a in files else a for a in args]
    proc = ragmeter("trec", *argv)
    assert proc.returncode == 0, proc.stderr
    want = (conformance / expected).read_text()
    assert proc.stdout == want


def test_api_matches_cli_summary(conformance: Path) -> None:
    summary = evaluate(conformance / "qrels.test", conformance / "results.test", "all_trec", per_query=False)
    want = {}
    for line in (conformance / "out.test.a").read_text().splitlines():
        name, _, value = line.split("\t")
        want[name.strip()] = value
    assert summary["runid"][0] == want.pop("runid")
    for name, value in want.items():
        got = summary[name][0]
        assert f"{got:.4f}" == value if "." in value else int(got) == int(value), name


def test_api_per_query_and_input_shapes_agree(conformance: Path) -> None:
    by_files = evaluate(conformance / "qrels.test", conformance / "results.test", ["map", "ndcg_cut.10", "P.5"])
    qrels, run = {}, {}
    for line in (conformance / "qrels.test").read_text().splitlines():
        q, _, d, r = line.split()
        qrels.setdefault(q, {})[d] = int(r)
    for line in (conformance / "results.test").read_text().splitlines():
        q, _, d, _, s, _ = line.split()
        run.setdefault(q, {})[d] = float(s)
    by_dicts = evaluate(qrels, run, ["map", "ndcg_cut.10", "P.5"])
    assert by_files.drop("missing_from_run").equals(by_dicts.drop("missing_from_run"))
    rows = [(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    frame = pl.DataFrame(rows, schema=["query_id", "doc_id", "score"], orient="row")
    qframe = pl.DataFrame([(q, d, r) for q, docs in qrels.items() for d, r in docs.items()],
                          schema=["query_id", "doc_id", "relevance"], orient="row")
    by_frames = evaluate(qframe.to_pandas(), frame.to_arrow(), ["map", "ndcg_cut.10", "P.5"])
    assert by_frames.drop("missing_from_run").equals(by_files.drop("missing_from_run"))


def test_ties_break_by_document_id_descending_as_bytes() -> None:
    # All scores tie: trec_eval ranks d9 > d10 > d1 (strcmp descending), so RR is 1/2 for d10.
    qrels = {"q": {"d10": 1}}
    run = {"q": {"d1": 1.0, "d9": 1.0, "d10": 1.0}}
    assert evaluate(qrels, run, "recip_rank")["recip_rank"][0] == 0.5


def test_qrels_only_query_needs_c_and_run_only_queries_are_ignored() -> None:
    qrels = {"a": {"d1": 1}, "b": {"d2": 1}}
    run = {"a": {"d1": 1.0}, "zzz": {"d1": 1.0}}
    with pytest.raises(InputError, match="query b .* pass complete=True to count"):
        evaluate(qrels, run, "map")
    out = evaluate(qrels, run, "map", complete=True)
    assert out["query"].to_list() == ["a", "b"]
    assert out["map"].to_list() == [1.0, 0.0]
    assert out["missing_from_run"].to_list() == [False, True]


def test_relevance_below_zero_is_never_relevant_and_counts_in_mean() -> None:
    qrels = {"a": {"d1": 1}, "b": {"d2": -2, "d3": 0}}
    run = {"a": {"d1": 1.0}, "b": {"d2": 2.0, "d3": 1.0}}
    s = evaluate(qrels, run, ["map", "num_q"], per_query=False)
    assert s["num_q"][0] == 2 and s["map"][0] == 0.5


@pytest.mark.parametrize("qrels,run,message", [
    ("1 0 d1 1\n1 0 d2\n", "1 Q0 d1 1 1.0 r\n", "qrels.txt:2: expected 4 columns"),
    ("1 0 d1 x\n", "1 Q0 d1 1 1.0 r\n", "qrels.txt:1: relevance \"x\" is not an integer"),
    ("1 0 d1 1\n", "1 Q0 d1 1 high r\n", "run.txt:1: score \"high\" is not a number"),
    ("1 0 d1 1\n", "1 Q0 d1 1 1.0 r\n1 Q0 d1 2 0.5 r\n", "run.txt:2: document d1 appears twice in the ranking of query 1"),
    ("1 0 d1 1\n1 0 d1 0\n", "1 Q0 d1 1 1.0 r\n", "qrels.txt:2: document d1 is judged twice"),
    ("", "1 Q0 d1 1 1.0 r\n", "qrels.txt:1: no judgements"),
    ("1 0 d1 1\n", "# nothing\n", "run.txt:1: no results"),
])
def test_bad_input_names_file_and_line_and_exits_2(tmp_path: Path, qrels: str, run: str, message: str) -> None:
    (tmp_path / "qrels.txt").write_text(qrels)
    (tmp_path / "run.txt").write_text(run)
    proc = ragmeter("trec", "qrels.txt", "run.txt", cwd=tmp_path)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_whole_number_relevance_written_as_decimal_reads_as_the_integer(tmp_path: Path) -> None:
    # A qrels file exported from a dataframe writes grades as 1.0; trec_eval (atol) reads 1.
    run = "1 Q0 d1 1 3.0 r\n1 Q0 d2 2 2.0 r\n1 Q0 d3 3 1.0 r\n"
    (tmp_path / "run.txt").write_text(run)
    (tmp_path / "ints.txt").write_text("1 0 d1 0\n1 0 d2 2\n1 0 d3 1\n")
    (tmp_path / "decimals.txt").write_text("1 0 d1 0.0\n1 0 d2 2.0\n1 0 d3 1.\n")
    ints = ragmeter("trec", "-m", "all_trec", "ints.txt", "run.txt", cwd=tmp_path)
    decimals = ragmeter("trec", "-m", "all_trec", "decimals.txt", "run.txt", cwd=tmp_path)
    assert ints.returncode == 0 and decimals.returncode == 0, decimals.stderr
    assert decimals.stdout == ints.stdout
    (tmp_path / "fraction.txt").write_text("1 0 d1 0.5\n")
    proc = ragmeter("trec", "fraction.txt", "run.txt", cwd=tmp_path)
    assert proc.returncode == 2 and 'fraction.txt:1: relevance "0.5" is not an integer' in proc.stderr
    assert evaluate(tmp_path / "decimals.txt", tmp_path / "run.txt", ["ndcg"], per_query=False)["ndcg"][0] == \
        evaluate(tmp_path / "ints.txt", tmp_path / "run.txt", ["ndcg"], per_query=False)["ndcg"][0]


def test_a_huge_grade_is_refused_not_allocated(tmp_path: Path) -> None:
    # A count per grade from 0 to the highest: 10^9 was an 8 GB allocation (abort, rc 134), 2^62 a panic.
    (tmp_path / "run.txt").write_text("q1 Q0 d1 1 0.5 r\nq1 Q0 d2 2 0.4 r\n")
    for grade in (10**9, 2**62):
        (tmp_path / "qrels.txt").write_text(f"q1 0 d2 0\nq1 0 d1 {grade}\n")
        proc = ragmeter("trec", "-m", "all_trec", "qrels.txt", "run.txt", cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert f"qrels.txt:2: relevance {grade} is above 1000000" in proc.stderr and "Traceback" not in proc.stderr
        with pytest.raises(InputError, match="above 1000000"):
            evaluate({"q1": {"d1": grade}}, {"q1": {"d1": 1.0}}, ["ndcg"])
    (tmp_path / "qrels.txt").write_text("q1 0 d2 0\nq1 0 d1 1000000\n")
    proc = ragmeter("trec", "-m", "ndcg", "qrels.txt", "run.txt", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.split()[-1] == "1.0000", proc.stdout


def test_missing_file_and_unknown_measure(tmp_path: Path) -> None:
    (tmp_path / "q").write_text("1 0 d1 1\n")
    proc = ragmeter("trec", str(tmp_path / "q"), str(tmp_path / "nope"))
    assert proc.returncode == 2 and "nope: no such file" in proc.stderr
    (tmp_path / "r").write_text("1 Q0 d1 1 1 r\n")
    proc = ragmeter("trec", "-m", "mapp", str(tmp_path / "q"), str(tmp_path / "r"))
    assert proc.returncode == 2 and "unknown measure 'mapp'" in proc.stderr and "all_trec" in proc.stderr
    with pytest.raises(MeasureError):
        evaluate(tmp_path / "q", tmp_path / "r", "P.0")


def test_trec_output_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    # `ragmeter trec -q ... | head`: the reader goes away before the output is written.
    (tmp_path / "q").write_text("".join(f"q{i} 0 d1 1\n" for i in range(1000)))
    (tmp_path / "r").write_text("".join(f"q{i} Q0 d1 1 1.0 r\n" for i in range(1000)))
    proc = subprocess.Popen([sys.executable, "-m", "ragmeter", "trec", "-q", "-m", "all_trec", "q", "r"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait() == 0 and err == ""


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_trec_output_to_a_full_disk_is_an_error_not_a_traceback(conformance: Path) -> None:
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "ragmeter", "trec", "-q", str(conformance / "qrels.test"),
                               str(conformance / "results.test")], stdout=full, stderr=subprocess.PIPE, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "No space left on device" in proc.stderr


def test_trec_cli_flushes_everything_before_its_quick_exit(tmp_path: Path) -> None:
    # The script ends `trec` with os._exit: output larger than any buffer must still arrive whole.
    (tmp_path / "q").write_text("".join(f"q{i} 0 d1 1\n" for i in range(3000)))
    (tmp_path / "r").write_text("".join(f"q{i} Q0 d1 1 1.0 r\n" for i in range(3000)))
    proc = ragmeter("trec", "-q", "-m", "all_trec", "q", "r", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    from ragmeter import _core

    whole, _ = _core.trec_eval_output(str(tmp_path / "q"), str(tmp_path / "r"), ["all_trec"], _core.TrecOptions(),
                                      per_query=True, summary=True)
    assert len(whole) > 1 << 20 and proc.stdout == whole


def test_trec_cli_does_not_import_heavy_modules(conformance: Path) -> None:
    # -S: without site, so that no .pth hook of this machine has imported anything first.
    import ragmeter

    code = ("import sys, io\n"
            "import ragmeter.cli as c\n"
            "sys.stdout, out = io.StringIO(), sys.stdout\n"
            f"rc = c.main(['trec', '-q', '-m', 'map', {str(conformance / 'qrels.test')!r}, "
            f"{str(conformance / 'results.test')!r}])\n"
            # re (with enum) alone takes 13-15 ms to import on the benchmark machine.
            "heavy = ('polars', 'numpy', 'aiohttp', 'pyarrow', 'argparse', 'typing', 're', 'enum')\n"
            "print('rc', rc, 'loaded:', ','.join(m for m in heavy if m in sys.modules), file=out)")
    env = {**os.environ, "PYTHONPATH": str(Path(ragmeter.__file__).parent.parent)}
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env)
    assert proc.stdout.strip() == "rc 0 loaded:", proc.stdout + proc.stderr


TOKENS = ["-q", "-c", "-n", "-J", "-qc", "-cJn", "-M", "-M5", "-M100", "-M 7", "-l2", "-l", "-1", "2", "x", "+3",
          "-N", "7", "-m", "P.5", "-mP.5,10", "-mndcg.1=3,2=9", "-m=P.5", "-mutility.2,-1,0,0", "-qm", "-Mq",
          "--", "-", "-Z", "-h", "--help", "--q", "qrels", "run", "", "map", "5_0", "-l٣"]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=8))
def test_trec_fast_argument_reader_agrees_with_argparse(argv: list) -> None:
    import contextlib
    import io

    from ragmeter.cli import trec

    fast = trec.parse_common(argv)
    if fast is None:
        return  # argparse reads it (or refuses it) itself
    with contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            full = vars(trec.full_parser().parse_args(argv))
        except SystemExit:
            pytest.fail(f"{argv}: the fast reader accepts what argparse refuses: {err.getvalue()}")
    assert fast == full


@pytest.mark.parametrize("args", [a for _, a in CASES] + [["-q", "-c", "-M", "10", "-l", "2", "-N", "9", "q", "r"]])
def test_trec_fast_argument_reader_reads_the_usual_command_lines(args: list) -> None:
    from ragmeter.cli import trec

    assert trec.parse_common(args) == vars(trec.full_parser().parse_args(args))


def test_dict_inputs_with_wrong_value_types_are_input_errors() -> None:
    with pytest.raises(InputError, match="qrels: values must be integers"):
        evaluate({"q": {"d": 1.5}}, {"q": {"d": 1.0}}, "map")
    with pytest.raises(InputError, match="run: values must be numbers"):
        evaluate({"q": {"d": 1}}, {"q": {"d": "high"}}, "map")
    with pytest.raises(InputError, match="expected a mapping"):
        evaluate({"q": [1]}, {"q": {"d": 1.0}}, "map")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(["a", "b", " ", "\0", "\x7f", "é", "中"]), max_size=4), max_size=8))
def test_ascii_id_columns_equal_arrow_columns(items: list) -> None:
    import pyarrow as pa

    from ragmeter._columns import ascii_list_column, string_column

    got = ascii_list_column(items)
    if any(not s.isascii() or "\0" in s for s in items):
        assert got is None
    else:
        offsets, data = string_column(pa.array(items, pa.large_string()))
        assert got is not None and got[0].tolist() == offsets.tolist() and bytes(got[1]) == bytes(data)


def test_dict_ids_of_every_kind_evaluate_as_tables() -> None:
    qrels = {"q\0": {"d1": 1, "é": 2}, 7: {"d2": 1, 3: 1}, "q": {"x": 1}}
    run = {"q\0": {"d1": 0.5, "é": 0.7, "z": 0.9}, "7": {"3": 1.0, "d2": 0.2}, "q": {"x": 0.1}}
    by_dicts = evaluate(qrels, run, ["map", "P.5"])
    rows = lambda d: [(str(q), str(doc), v) for q, docs in d.items() for doc, v in docs.items()]  # noqa: E731
    by_tables = evaluate(pl.DataFrame(rows(qrels), schema=["query", "doc", "relevance"], orient="row"),
                         pl.DataFrame(rows(run), schema=["query", "doc", "score"], orient="row"), ["map", "P.5"])
    assert by_dicts.equals(by_tables) and by_dicts.height == 3


def test_mixed_inputs_parse_the_path_side_in_rust(tmp_path: Path) -> None:
    qrels_path, run_path = tmp_path / "q.txt", tmp_path / "r.txt"
    qrels_path.write_text("# judged\nq1 0 a 1\nq1 0 b 0\nq2 0 c 2\nq1 0 d 1\n")
    run_path.write_text("q1 Q0 a 1 0.5 r\nq2 Q0 c 1 0.9 r\n\nq1 Q0 d 2 0.7 r\nq1 Q0 b 3 0.1 r\n")
    measures = ["map", "ndcg_cut.10", "P.5"]
    files = evaluate(qrels_path, run_path, measures)
    qrels = pl.DataFrame({"query": ["q1", "q1", "q2", "q1"], "doc": ["a", "b", "c", "d"], "relevance": [1, 0, 2, 1]})
    run = pl.DataFrame({"query": ["q1", "q2", "q1", "q1"], "doc": ["a", "c", "d", "b"], "score": [0.5, 0.9, 0.7, 0.1]})
    assert evaluate(qrels_path, run, measures).equals(files)
    assert evaluate(qrels, run_path, measures).equals(files)
    run_path.write_text("q1 Q0 a 1 0.5 r\nq1 Q0 d 2 high r\n")
    with pytest.raises(InputError, match=r"r\.txt:2: score \"high\" is not a number"):
        evaluate(qrels, run_path, measures)
    qrels_path.write_text("q1 0 a 1\nq1 0 b\n")
    with pytest.raises(InputError, match=r"q\.txt:2: expected 4 columns"):
        evaluate(qrels_path, run, measures)
    with pytest.raises(InputError, match="no such file"):
        evaluate(tmp_path / "absent.txt", run, measures)


def test_console_keeps_sys_exit_semantics(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    import ragmeter.cli as cli

    for raised, status, printed in ((SystemExit("stopped: why"), 1, "stopped: why"), (SystemExit(3), 3, ""),
                                    (SystemExit(None), 0, "")):
        def fake_main(argv: object, exc: SystemExit = raised) -> int:
            raise exc

        monkeypatch.setattr(cli, "main", fake_main)
        monkeypatch.setattr(sys, "argv", ["ragmeter", "sweep"])  # trec and score end with os._exit instead
        with pytest.raises(SystemExit) as exited:
            cli.console()
        assert exited.value.code == status
        assert capsys.readouterr().err.strip() == printed


BUNDLED_TREC = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example" / "trec"


def test_bundled_pair_needs_c_on_the_command_line_and_complete_true_in_python() -> None:
    qrels, run = str(BUNDLED_TREC / "qrels.txt"), str(BUNDLED_TREC / "run.txt")
    proc = ragmeter("trec", qrels, run)
    assert proc.returncode == 2 and "query 106" in proc.stderr and "pass -c to count" in proc.stderr
    proc = ragmeter("trec", "-c", qrels, run)
    assert proc.returncode == 0, proc.stderr
    assert "num_q                 \tall\t6\n" in proc.stdout  # 106 counts, as an empty ranking
    with pytest.raises(InputError, match="query 106 .* pass complete=True to count") as caught:
        evaluate(qrels, run)
    assert "pass -c" not in str(caught.value)  # the Python message names the keyword, not the flag
    assert evaluate(qrels, run, ["map", "num_q"], complete=True, per_query=False)["num_q"][0] == 6


def _documented_trec_commands() -> list:
    repo = Path(__file__).resolve().parent.parent
    lines = []
    for doc in (repo / "README.md", repo / "examples" / "README.md"):
        lines += [line.split("#")[0].strip() for line in doc.read_text(encoding="utf-8").splitlines()
                  if line.strip().startswith("ragmeter trec ") and "_example/trec/" in line]
    return lines


def test_documented_trec_examples_run_as_written() -> None:
    import shlex

    commands = _documented_trec_commands()
    assert commands, "the READMEs show ragmeter trec on the bundled pair"
    for command in commands:
        proc = ragmeter(*shlex.split(command)[1:], cwd=Path(__file__).resolve().parent.parent)
        assert proc.returncode == 0, f"{command}: {proc.stderr}"
        assert "meridian-hybrid-v2" in proc.stdout
