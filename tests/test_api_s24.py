"""Session 24: sweep thresholds at infinity, the embeddable API's inputs, ``cache repair`` on odd paths."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import ragmeter
from ragmeter.cli.demo import example_dir

INF = float("inf")


def example() -> tuple:
    ex = example_dir()
    return ex / "golden.jsonl", ex / "run.jsonl"


def ragmeter_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmeter", *args], capture_output=True, text=True, cwd=cwd)


def overall_thresholds(rows: list) -> list:
    return [r["threshold"] for r in rows if r["category"] == "ALL"]


def test_sweep_json_keeps_infinite_thresholds_apart(tmp_path: Path) -> None:
    """-inf (keep every scored chunk: cross-encoder logits are negative) and inf (keep none) are thresholds the
    sweep takes; its JSON (stdout and --out .json) wrote both as null, two rows nobody could tell apart."""
    golden, run = example()
    proc = ragmeter_cli("sweep", "--golden", str(golden), "--run", str(run), "--thresholds=-inf,0,inf", "--json",
                        "--out", "sweep.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    written = json.loads((tmp_path / "sweep.json").read_text(encoding="utf-8"))
    assert overall_thresholds(printed) == overall_thresholds(written) == ["-inf", 0.0, "inf"]
    by_t = {r["threshold"]: r for r in printed if r["category"] == "ALL"}
    assert by_t["inf"]["empty_retrievals"] == by_t["inf"]["n_total"] == 51  # inf keeps no chunk
    assert by_t["-inf"]["hit_rate"] == by_t[0.0]["hit_rate"]  # the example's scores are all >= 0
    # the Parquet and CSV tables hold the floats themselves
    assert ragmeter_cli("sweep", "--golden", str(golden), "--run", str(run), "--thresholds=-inf,inf",
                        "--out", "sweep.parquet", cwd=tmp_path).returncode == 0
    assert pl.read_parquet(tmp_path / "sweep.parquet")["threshold"].unique().sort().to_list() == [-INF, INF]


def test_evaluate_with_infinite_thresholds_writes_its_folder(tmp_path: Path) -> None:
    """evaluate(thresholds=[-inf, 0, inf]).write(dir) and `ragmeter eval --thresholds=-inf,0,inf` crashed in the
    HTML report (TypeError: float() argument must be ... not 'NoneType'), nothing written; summary.json's
    settings.thresholds read [null, 0.0, null]."""
    golden, run = example()
    result = ragmeter.evaluate(golden, run, thresholds=[-INF, 0, INF])
    out = result.write(tmp_path / "res")
    settings = json.loads((out / "summary.json").read_text(encoding="utf-8"))["settings"]
    assert settings["thresholds"] == ["-inf", 0.0, "inf"]
    assert "Threshold sweep" in (out / "report.html").read_text(encoding="utf-8")
    loaded = ragmeter.EvalResult.load(out)
    assert loaded.sweep is not None and sorted(loaded.sweep["threshold"].unique().to_list()) == [-INF, 0.0, INF]
    proc = ragmeter_cli("eval", "--golden", str(golden), "--run", str(run), "--thresholds=-inf,0,inf",
                        "--out", "ev", cwd=tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert (tmp_path / "ev" / "report.html").is_file()


# -- ragmeter cache repair -----------------------------------------------------------------------------------

def damaged_cache(path: Path, n: int = 20) -> None:
    """A judge cache of ``n`` entries, one of whose stored replies does not decode (repair moves such a file
    aside and salvages the rest)."""
    import sqlite3

    from ragmeter.judge.cache import Cache

    with Cache(path) as cache:
        for i in range(n):
            cache.put(f"{i:064x}", {"content": f"reply {i}"}, prompt="p", model="m")
    conn = sqlite3.connect(path)
    conn.execute("UPDATE judge_cache SET value = 'not json' WHERE key = ?", (f"{0:064x}",))
    conn.commit()
    conn.close()


HOLDER = """
import sys
from pathlib import Path
from ragmeter.judge.cache import Cache
cache = Cache(Path(sys.argv[1]))
cache.put("f" * 64, {"content": "paid while the repair ran"}, prompt="p", model="m")
print("open", flush=True)
sys.stdin.readline()
cache.put("e" * 64, {"content": "paid after"}, prompt="p", model="m")
cache.close()
"""


def test_cache_repair_refuses_a_cache_a_running_judge_has_open(tmp_path: Path) -> None:
    """A judge still writing to the cache kept writing into the file repair had moved aside: every reply it was
    paid for after the repair went to PATH.damaged-..., and a rerun with --cache PATH paid for it again."""
    cache = tmp_path / "judge cache.sqlite"
    damaged_cache(cache)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(cache)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        proc = ragmeter_cli("cache", "repair", str(cache), cwd=tmp_path)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr and "in use" in proc.stderr and str(cache) in proc.stderr
        assert sorted(p.name for p in tmp_path.iterdir() if ".damaged" in p.name) == []  # nothing moved
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == 0
    proc = ragmeter_cli("cache", "repair", str(cache), cwd=tmp_path)  # once the judge is done, it repairs
    assert proc.returncode == 0 and "21 entries salvaged, 1 unreadable entries dropped" in proc.stdout, proc.stdout
    from ragmeter.judge.cache import Cache

    with Cache(cache) as repaired:
        assert len(repaired) == 21 and repaired.get("e" * 64) == {"content": "paid after"}


@pytest.mark.parametrize("given, said", [(".", "is a folder, not a cache file"),
                                         ("", "an empty path")])
def test_cache_repair_names_a_folder_or_an_empty_path(tmp_path: Path, given: str, said: str) -> None:
    """`cache repair DIR` said 'DIR: no such cache file' (it exists), and `cache repair "$UNSET"` '.: no such
    cache file'."""
    proc = ragmeter_cli("cache", "repair", given, cwd=tmp_path)
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert "no such cache file" not in proc.stderr and list(tmp_path.iterdir()) == []


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE stands in for a full disk")
def test_cache_repair_on_a_full_disk_changes_nothing(tmp_path: Path) -> None:
    """A disk that filled while the repaired copy was written ended in a traceback (sqlite3.OperationalError:
    database or disk is full, exit 1) with the damaged cache moved aside and an empty cache at PATH: the next
    run paid again for every salvaged reply."""
    import resource

    from ragmeter.judge.cache import Cache

    cache = tmp_path / "cache.sqlite"
    damaged_cache(cache, n=300)
    with Cache(cache) as big:  # larger than the limit below
        for i in range(300, 2000):
            big.put(f"{i:064x}", {"content": "x" * 500}, prompt="p", model="m")
    before = cache.read_bytes()

    def small_files() -> None:  # writes past 256 kB fail as on a full disk (Python ignores SIGXFSZ)
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10))

    proc = subprocess.run([sys.executable, "-m", "ragmeter", "cache", "repair", str(cache)], capture_output=True,
                          text=True, cwd=tmp_path, preexec_fn=small_files)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "nothing changed" in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.sqlite"]
    assert cache.read_bytes() == before
    proc = ragmeter_cli("cache", "repair", str(cache), cwd=tmp_path)  # with room, it repairs
    assert proc.returncode == 0 and "1999 entries salvaged, 1 unreadable entries dropped" in proc.stdout, proc.stdout


# -- the embeddable API ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def result() -> "ragmeter.EvalResult":
    return ragmeter.evaluate(*example())


@pytest.mark.parametrize("how", ["evaluate", "score"])
def test_writing_to_an_empty_path_is_refused_not_the_current_folder(how: str, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      result: "ragmeter.EvalResult") -> None:
    """result.write(os.environ.get("OUT", "")) wrote into the current folder, removing an earlier run's
    judge.parquet and sweep.parquet there; the command line refuses an empty --out."""
    from ragmeter.errors import InputError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "judge.parquet").write_bytes(b"an earlier run's")
    target = result if how == "evaluate" else ragmeter.score(*example())
    with pytest.raises(InputError, match=r"^out_dir: an empty path \(an unset variable\?\)"):
        target.write("")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["judge.parquet"]


@pytest.mark.parametrize("how", ["evaluate", "score"])
@pytest.mark.parametrize("value", [None, 42, b"res"])
def test_writing_to_something_not_a_path_names_out_dir(how: str, value: object,
                                                       result: "ragmeter.EvalResult") -> None:
    """write(None) raised pathlib's 'TypeError: expected str, bytes or os.PathLike object, not NoneType'."""
    from ragmeter.errors import InputError

    target = result if how == "evaluate" else ragmeter.score(*example())
    with pytest.raises(InputError, match=rf"^out_dir: expected a folder \(a path\), got {type(value).__name__}$"):
        target.write(value)


def test_loading_an_empty_path_is_refused() -> None:
    """EvalResult.load("") read the current folder as a results folder."""
    from ragmeter.errors import InputError

    with pytest.raises(InputError, match=r"^EvalResult.load: an empty path"):
        ragmeter.EvalResult.load("")


def test_evaluate_takes_metrics_as_one_name_or_a_comma_separated_list(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """evaluate(metrics="faithfulness") read the string letter by letter: "--metrics: unknown metric 'f'"."""
    sys.path.insert(0, str(Path(__file__).parent / "judge"))
    from fakeserver import FakeServer

    from ragmeter.judge import JudgeConfig

    monkeypatch.setenv("RAGMETER_API_KEY", "sk-test-s24")
    golden, run = example()
    with FakeServer(api_key="sk-test-s24") as server:
        cfg = JudgeConfig(base_url=server.base_url, model="m", cache=None, progress=False)
        one = ragmeter.evaluate(golden, run, judge=cfg, metrics="faithfulness")
        two = ragmeter.evaluate(golden, run, judge=cfg, metrics=" correctness, faithfulness ")
    assert one.judge["metric"].unique().to_list() == ["faithfulness"]
    assert sorted(two.judge["metric"].unique().to_list()) == ["correctness", "faithfulness"]
    assert list(two.summary["settings"]["judge"]["metrics"]) == ["correctness", "faithfulness"]


@pytest.mark.parametrize("empty", [[], (), pl.DataFrame(), "pandas"])
@pytest.mark.parametrize("which", ["golden", "run"])
@pytest.mark.parametrize("call", ["score", "sweep", "evaluate"])
def test_an_empty_golden_set_or_run_in_memory_is_refused_as_the_files_are(empty: object, which: str,
                                                                          call: str) -> None:
    """An empty run list was scored as every golden case missing (hit rate 0.0 over 51, exit-less), an empty
    golden list blamed the run ('50 ids are not in the golden set golden (0 cases)'), and evaluate([], [])
    raised ZeroDivisionError; `ragmeter score` refuses an empty file ('is empty')."""
    from ragmeter.errors import InputError

    if isinstance(empty, str):
        import pandas as pd

        empty = pd.DataFrame()
    golden, run = example()
    args = {"golden": golden, "run": run, which: empty}
    fn = {"score": ragmeter.score, "evaluate": ragmeter.evaluate,
          "sweep": lambda g, r: ragmeter.sweep(g, r, [0.0])}[call]
    with pytest.raises(InputError, match=rf"^{which}: no cases \(an empty "):
        fn(args["golden"], args["run"])
    with pytest.raises(InputError, match=r"^golden: no cases"):
        fn([], [])


def test_a_bytes_path_or_one_record_is_named_for_what_it_is() -> None:
    """score(b"golden.jsonl", ...) read the bytes as 12 rows of numbers ('expected an object (dict), got a
    number'), and one case's dict as columns of unequal length (polars' 'height of column ... does not match')."""
    from ragmeter.errors import InputError

    golden, run = example()
    with pytest.raises(InputError, match=r"^golden: expected a path .*got bytes"):
        ragmeter.score(bytes(golden), run)
    case = {"id": "a", "question": "q", "expectedFileNames": ["x.md"]}
    with pytest.raises(InputError, match=r"^golden: a mapping is read as columns .* one case\? pass \[case\]"):
        ragmeter.score(case, run)


def test_thresholds_from_a_pandas_series_are_its_values() -> None:
    """A NumPy array or a Polars Series of thresholds was taken, a pandas Series (df["t"].unique() is an array,
    df["t"].drop_duplicates() a Series) refused with the Series' whole multi-line repr in the message."""
    import numpy as np
    import pandas as pd

    golden, run = example()
    expected = ragmeter.sweep(golden, run, [0.0, 0.1])
    assert ragmeter.sweep(golden, run, pd.Series([0.0, 0.1], index=[7, 9])).equals(expected)
    assert ragmeter.sweep(golden, run, np.array([0.0, 0.1])).equals(expected)
    assert ragmeter.evaluate(golden, run, thresholds=pd.Series([0.0, 0.1])).sweep.equals(expected)


def test_sweep_out_creates_its_folder_as_score_and_compare_do(tmp_path: Path) -> None:
    """`sweep --out "new dir/sweep.csv"` swept, then failed with 'new dir/sweep.csv: No such file or directory'
    (exit 2); `score --out DIR` and `compare --out DIR/x.md` create their folder."""
    golden, run = example()
    proc = ragmeter_cli("sweep", "--golden", str(golden), "--run", str(run), "--out", "new dir/é.csv", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert pl.read_csv(tmp_path / "new dir" / "é.csv")["threshold"].unique().sort().to_list() == [0.0, 0.1, 0.2]


@pytest.mark.parametrize("form", ["polars", "parquet"])
def test_a_nan_or_infinite_chunk_score_is_refused_by_the_sweep_in_every_form(form: str, tmp_path: Path) -> None:
    """A run given as records refuses a NaN or infinite score ("'retrieved[0].score' must be a finite number");
    the same run as a Polars frame or a Parquet file was swept, the NaN chunk silently kept at every threshold
    (and not counted in the note on unscored chunks). Every form is now refused when loaded, for scoring too
    (a Parquet run's NaN was scored, exit 0, where JSON Lines was refused), naming the row and the chunk."""
    from ragmeter.errors import InputError

    golden = [{"id": i, "question": f"q{i}", "expectedFileNames": [f"{i}.md"]} for i in "abc"]
    run = [{"id": "a", "retrieved": [{"file": "a.md", "text": "t", "score": float("nan")}]},
           {"id": "b", "retrieved": [{"file": "b.md", "text": "t", "score": 0.2}]},
           {"id": "c", "retrieved": [{"file": "c.md", "text": "t", "score": float("inf")}]}]
    with pytest.raises(InputError, match="must be a finite number"):
        ragmeter.sweep(golden, run, [0.0, 0.3])
    given: object = pl.DataFrame(run)
    if form == "parquet":
        pl.DataFrame(run).write_parquet(tmp_path / "run.parquet")
        given = tmp_path / "run.parquet"
    rows = r"row 1: 'retrieved\[0\]\.score' must be a finite number, got nan\n.*row 3: 'retrieved\[0\]\.score' " \
           r"must be a finite number, got inf"
    with pytest.raises(InputError, match=rows):
        ragmeter.sweep(golden, given, [0.0, 0.3])
    with pytest.raises(InputError, match=rows):
        ragmeter.evaluate(golden, given, thresholds=[0.0])
    with pytest.raises(InputError, match=rows):
        ragmeter.score(golden, given)  # the scores are not used, but the same run as records is refused


# -- ragmeter.metrics -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda m: m.average_precision("101"), r"^verdicts must be a list of numbers, got '101' \(a str\)"),
    (lambda m: m.average_precision(None), r"^verdicts must be a list of numbers, got None"),
    (lambda m: m.hit({"d1": 1}), r"^verdicts must be a list of numbers, got \{'d1': 1\} \(a dict\)"),
    (lambda m: m.precision([[1, 0], [1]]), r"^verdicts must be a list of numbers; item 0 is \[1, 0\] \(a list\)"),
    (lambda m: m.precision([[1, 0], [1, 1]]), r"^verdicts must be a flat list of numbers, got 2 dimensions"),
    (lambda m: m.reciprocal_rank([float("nan"), 1]), r"^verdicts: item 0 is nan; verdicts must be finite"),
    (lambda m: m.ndcg([2, 1], ideal="21"), r"^ideal must be a list of numbers, got '21' \(a str\)"),
    (lambda m: m.average_precision([1, 0, 1], n_relevant=1),
     r"^n_relevant=1, but 2 relevant items are in the ranking: it counts every relevant item, retrieved or not"),
    (lambda m: m.recall([1, 1], n_relevant=1), r"^n_relevant=1, but 2 relevant items"),
])
def test_rank_metrics_refuse_what_is_not_a_ranking(call: object, message: str) -> None:
    """average_precision("101") gave 1.0 (the string read as the number 101), average_precision(None) 0.0, a NaN
    verdict counted as relevant, and n_relevant below the relevant items retrieved gave AP 1.67 and recall 2.0."""
    from ragmeter import metrics
    from ragmeter.errors import InputError

    with pytest.raises(InputError, match=message):
        call(metrics)  # type: ignore[operator]


def test_rank_metrics_still_take_arrays_series_bools_and_grades() -> None:
    import numpy as np
    import pandas as pd

    from ragmeter import metrics

    for ranking in ([1, 0, 1], (1, 0, 1), np.array([1, 0, 1]), pd.Series([1, 0, 1]), pl.Series([1, 0, 1]),
                    [True, False, True], [1.0, 0.0, 1.0]):
        assert metrics.average_precision(ranking) == pytest.approx(5 / 6)
    assert metrics.average_precision([1, 0, 1], n_relevant=4) == pytest.approx(5 / 12)
    assert metrics.average_precision([], n_relevant=0) == 0.0 and metrics.hit([]) == 0.0
    assert metrics.ndcg([3, 2, 0], ideal=[3, 3, 2]) < 1.0
    assert metrics.recall([0, -1, 1], n_relevant=1) == 1.0  # a negative judgement is not relevant


def test_a_sweep_table_piped_into_head_exits_0(tmp_path: Path) -> None:
    """`ragmeter sweep ... | head` exited 1 (rich's broken-pipe handler), the status README gives a failed
    gate; a reader that stops early is no failure (score's --json and the judge already exit 0 there)."""
    golden, run = example()
    thresholds = ",".join(f"{i / 1000:g}" for i in range(400))  # a table far larger than a pipe's buffer
    proc = subprocess.Popen([sys.executable, "-m", "ragmeter", "sweep", "--golden", str(golden), "--run", str(run),
                             "--thresholds", thresholds], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=tmp_path)
    assert proc.stdout is not None and proc.stdout.readline().startswith(b"Threshold sweep")
    proc.stdout.close()
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and b"Traceback" not in err, err.decode()


def test_evaluate_with_an_empty_threshold_list_is_refused_as_sweep_and_eval_refuse_it() -> None:
    """evaluate(thresholds=[]) returned a result without a sweep, silently; sweep(..., []) and
    `ragmeter eval --thresholds ""` refuse it."""
    from ragmeter.errors import InputError

    golden, run = example()
    with pytest.raises(InputError, match=r"^thresholds: give at least one threshold"):
        ragmeter.evaluate(golden, run, thresholds=[])
    with pytest.raises(InputError, match=r"^thresholds: give at least one threshold"):
        ragmeter.sweep(golden, run, [])
