"""A results folder is one consistent set, written all or nothing; disk faults are one line and exit 2;
warnings are counted, with the full lists in warnings.json."""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List

import polars as pl
import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"
GOLDEN, RUN = EXAMPLES / "golden.jsonl", EXAMPLES / "run.jsonl"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmeter", *args], capture_output=True, text=True, timeout=300)


def eval_args(out: Path, *more: str) -> List[str]:
    return ["eval", "--golden", str(GOLDEN), "--run", str(RUN), "--out", str(out), *more]


def strict_load(text: str) -> object:
    def refuse(token: str) -> None:
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def listing(folder: Path) -> List[str]:
    return sorted(p.name for p in folder.iterdir())


# ------------------------------------------------------------------ one run per folder


def test_second_eval_leaves_no_stale_file_and_keeps_foreign_files(tmp_path: Path) -> None:
    out = tmp_path / "ev"
    proc = cli(*eval_args(out, "--thresholds", "0,0.2"))
    assert proc.returncode == 0, proc.stderr
    assert (out / "sweep.parquet").is_file()
    # an earlier judged run's file, and a file of the user's
    pl.DataFrame({"id": ["x"], "metric": ["correctness"], "status": ["ok"], "cost_usd": [9.99]}) \
        .write_parquet(out / "judge.parquet")
    (out / "notes.txt").write_text("mine", encoding="utf-8")

    proc = cli(*eval_args(out))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert not (out / "sweep.parquet").exists() and not (out / "judge.parquet").exists()
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine"
    # summary.json lists exactly the run's files; nothing else of ragmeter's is there, no temporary folder
    assert sorted(summary["files"]) == [n for n in listing(out) if n != "notes.txt"]
    assert "judge.parquet" not in summary["files"]
    html = (out / "report.html").read_text(encoding="utf-8")
    assert 'id="sweep"' not in html and "9.99" not in html
    assert "judge cost (USD)</td><td class=\"num\">not judged" in html


def test_report_reads_only_the_files_summary_lists(tmp_path: Path) -> None:
    from ragmeter.evaluation import run_eval
    from ragmeter.report.data import load_results

    out = tmp_path / "ev"
    run_eval(GOLDEN, RUN, out, reports=False)
    # a sweep.parquet put there by hand is not part of the run
    pl.DataFrame({"threshold": [0.0], "hit_rate": [0.1]}).write_parquet(out / "sweep.parquet")
    assert load_results(out).sweep is None


def test_cases_parquet_carries_the_diagnosis(tmp_path: Path) -> None:
    from ragmeter.diagnosis import diagnose
    from ragmeter.evaluation import run_eval

    out = tmp_path / "ev"
    run_eval(GOLDEN, RUN, out, reports=False)
    cases = pl.read_parquet(out / "cases.parquet")
    for column in ("diagnosis", "quadrant", "faithfulness_band", "refusal"):
        assert column in cases.columns, column
    diag = dict(zip(cases["id"], cases["diagnosis"]))
    assert diag["noanswer-01-parental-leave"] == "NOT_LABELED"
    # missing from the run: scored as an empty retrieval, but the system was never seen on it
    assert diag["crossdoc-06-formats-today"] == "NOT_IN_RUN"
    n_miss = cases.filter(pl.col("labeled") & ~pl.col("hit") & ~pl.col("missing_from_run")).height
    assert n_miss == 8 and (cases["diagnosis"] == "RETRIEVAL_MISS").sum() == n_miss
    # unjudged: everything labelled and retrieved has no verdict; no quadrant or band is invented
    assert set(cases.filter(pl.col("labeled") & pl.col("hit"))["diagnosis"]) == {"NOT_JUDGED"}
    assert cases["quadrant"].null_count() == cases.height
    assert cases["faithfulness_band"].null_count() == cases.height
    noanswer = cases.filter(pl.col("category") == "noanswer")
    assert noanswer["refusal"].sum() == 5 and noanswer.height == 6
    # the stored columns are the diagnosis, computed once
    again = diagnose(cases.drop("is_noanswer", "refusal", "answer_correct", "diagnosis", "quadrant", "faithfulness_band"))
    assert again["diagnosis"].to_list() == cases["diagnosis"].to_list()


def test_summary_carries_the_system_cost_without_a_judge(tmp_path: Path) -> None:
    from ragmeter.evaluation import run_eval

    summary = run_eval(GOLDEN, RUN, tmp_path / "ev", reports=False)
    run_cost = sum(json.loads(line).get("cost") or 0 for line in RUN.read_text(encoding="utf-8").splitlines() if line.strip())
    cost = summary["cost"]
    assert cost["system_cost_usd"] == pytest.approx(run_cost, abs=1e-6) and run_cost > 0
    assert cost["judge_cost_usd"] is None and cost["judge_cost_share"] is None
    assert cost["n_cases_with_cost"] == 50 and cost["n_cases"] == 51  # one case is missing from the run


# ------------------------------------------------------------------ disk faults


def _no_space(*_args: object, **_kwargs: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_full_disk_while_writing_cases_parquet_is_one_line_and_leaves_the_folder_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from ragmeter.cli import main

    out = tmp_path / "ev"
    assert main(eval_args(out)) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    real = pl.DataFrame.write_parquet

    def failing(self: pl.DataFrame, file: object, *args: object, **kwargs: object) -> None:
        if Path(str(file)).name == "cases.parquet":
            # what polars raises on a full disk: its own error type, the OS error inside the text
            raise pl.exceptions.ComputeError("parquet: underlying IO error: No space left on device (os error 28)")
        real(self, file, *args, **kwargs)

    monkeypatch.setattr(pl.DataFrame, "write_parquet", failing)
    assert main(eval_args(out, "--thresholds", "0,0.1")) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"ragmeter: error: {out / 'cases.parquet'}: No space left on device"]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no sweep.parquet, no temporary folder


def test_full_disk_while_writing_report_html_keeps_the_old_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    from ragmeter.cli import main

    out = tmp_path / "ev"
    assert main(eval_args(out)) == 0
    old = (out / "report.html").read_bytes()
    capsys.readouterr()
    real = Path.write_text

    def half_then_full(self: Path, data: str, *args: object, **kwargs: object) -> int:
        if self.name == "report.html" and self.parent.name.startswith(".ragmeter-"):  # the report being written
            real(self, data[: len(data) // 2], *args, **kwargs)
            _no_space()
        return real(self, data, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", half_then_full)
    assert main(["report", str(out), "--resamples", "200"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"ragmeter: error: {out / 'report.html'}: No space left on device"]
    assert (out / "report.html").read_bytes() == old
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_a_folder_where_an_output_goes_is_one_line_and_nothing_is_moved(tmp_path: Path) -> None:
    out = tmp_path / "ev"
    assert cli(*eval_args(out)).returncode == 0
    (out / "summary.json").unlink()
    (out / "summary.json").mkdir()  # summary.json is moved last: every other file would have been replaced
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    proc = cli(*eval_args(out, "--thresholds", "0,0.1"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [f"ragmeter: error: {out / 'summary.json'}: is a folder, not a file"]
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before  # no sweep.parquet either
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["summary.json"]  # no temporary folder
    # the same for a sheet folder written all or nothing
    sheet = tmp_path / "sheet"
    (sheet / "manifest.json").mkdir(parents=True)
    from ragmeter._io import atomic_outputs

    with pytest.raises(OSError) as failed, atomic_outputs(sheet) as tmp:
        (tmp / "review.csv").write_text("id\n")
        (tmp / "manifest.json").write_text("{}\n")
    assert failed.value.filename == str(sheet / "manifest.json") and failed.value.errno == errno.EISDIR
    assert sorted(p.name for p in sheet.iterdir()) == ["manifest.json"]


def test_out_that_is_a_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    target = tmp_path / "results"
    target.write_text("not a folder", encoding="utf-8")
    for args in (eval_args(target), ["score", "--golden", str(GOLDEN), "--run", str(RUN), "--out", str(target)]):
        proc = cli(*args)
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr
        assert proc.stderr.strip().splitlines()[-1] == f"ragmeter: error: --out {target}: is a file, not a folder"
        assert target.read_text(encoding="utf-8") == "not a folder"


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import ragmeter

    return ragmeter.evaluate(GOLDEN, RUN).write(tmp_path_factory.mktemp("res") / "res", reports=False)


#: every command that writes to a path it is given: (flag, path under the file, the rest of the command line)
UNDER_A_FILE = {
    "score": ("--out", "afile/x", ["score", "--golden", str(GOLDEN), "--run", str(RUN)]),
    "eval": ("--out", "afile/x", ["eval", "--golden", str(GOLDEN), "--run", str(RUN)]),
    "sweep": ("--out", "afile/x.csv", ["sweep", "--golden", str(GOLDEN), "--run", str(RUN)]),
    "report": ("--out", "afile/x", ["report", "RES"]),
    "audit": ("--out", "afile/x", ["audit", "--golden", str(GOLDEN)]),
    "compare-out": ("--out", "afile/x.md", ["compare", "RES", "RES", "--resamples", "200"]),
    "compare-json": ("--json", "afile/x.json", ["compare", "RES", "RES", "--resamples", "200"]),
    "compare-deeper": ("--out", "afile/sub/x.md", ["compare", "RES", "RES", "--resamples", "200"]),
    "demo": ("--out", "afile/x", ["demo"]),
    "review-export": ("--out", "afile/x", ["review", "export", "RES"]),
    "judge": ("--out", "afile/x", ["judge", "--cases", "cases.jsonl", "--base-url", "http://127.0.0.1:9", "--model", "m"]),
    "collect": ("--out", "afile/run.jsonl", ["collect", "--golden", str(GOLDEN), "--target", "target.toml"]),
    "eval-target": ("--out", "afile/x", ["eval", "--golden", str(GOLDEN), "--target", "target.toml"]),
}


@pytest.mark.parametrize("name", list(UNDER_A_FILE))
def test_an_output_path_under_a_regular_file_names_the_file_and_writes_nothing(
        name: str, results_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragmeter.cli import main

    flag, path, argv = UNDER_A_FILE[name]
    (tmp_path / "afile").write_text("mine", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    before = listing(results_dir)
    code = main([results_dir.as_posix() if a == "RES" else a for a in argv] + [flag, path])
    assert (code, capsys.readouterr().err) == (2, f"ragmeter: error: {flag} {path}: afile is a file, not a folder\n")
    assert listing(tmp_path) == ["afile"] and (tmp_path / "afile").read_text(encoding="utf-8") == "mine"
    assert listing(results_dir) == before


def test_the_library_names_the_file_in_the_way_too(results_dir: Path, tmp_path: Path) -> None:
    import ragmeter
    from ragmeter._io import atomic_file

    (tmp_path / "afile").write_text("mine", encoding="utf-8")
    folder, file = tmp_path / "afile" / "x", tmp_path / "afile" / "x.md"
    result = ragmeter.EvalResult.load(results_dir)
    with pytest.raises(OSError) as failed:
        result.write(folder)
    assert (failed.value.errno, failed.value.filename) == (errno.ENOTDIR, str(folder))
    assert failed.value.strerror == f"{tmp_path / 'afile'} is a file, not a folder"
    with pytest.raises(OSError) as failed, atomic_file(file) as tmp:
        tmp.write_text("never", encoding="utf-8")
    assert (failed.value.errno, failed.value.filename) == (errno.ENOTDIR, str(file))
    assert failed.value.strerror == f"{tmp_path / 'afile'} is a file, not a folder"
    assert listing(tmp_path) == ["afile"] and (tmp_path / "afile").read_text(encoding="utf-8") == "mine"


@pytest.mark.skipif(os.name != "posix", reason="file modes and umask are POSIX")
@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_every_output_gets_the_mode_a_plain_open_gives(tmp_path: Path, mask: int) -> None:
    out, table = tmp_path / "ev", tmp_path / "sweep.csv"
    for args in (eval_args(out, "--thresholds", "0,0.1"),
                 ["sweep", "--golden", str(GOLDEN), "--run", str(RUN), "--thresholds", "0,0.1", "--out", str(table)]):
        proc = subprocess.run([sys.executable, "-m", "ragmeter", *args], capture_output=True, text=True, timeout=300,
                              preexec_fn=lambda: os.umask(mask))
        assert proc.returncode == 0, proc.stderr
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in [*out.iterdir(), table]}
    assert "report.html" in modes and modes == {name: oct(0o666 & ~mask) for name in modes}


def _can_mount() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("mount") is not None


@pytest.fixture()
def small_tmpfs(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A 64 KiB tmpfs (when running as root and mount works), too small for a results folder."""
    if not _can_mount():
        pytest.skip("needs root and mount for a small tmpfs")
    point = tmp_path / "small"
    point.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(point)], capture_output=True).returncode:
        pytest.skip("mount -t tmpfs failed here")
    yield point
    subprocess.run(["umount", str(point)], capture_output=True)


def test_eval_onto_a_full_tmpfs_is_one_line_exit_2_and_leaves_nothing(small_tmpfs: Path) -> None:
    out = small_tmpfs / "ev"
    proc = cli(*eval_args(out, "--thresholds", "0,0.1"))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ragmeter: error: {out}/") and "No space left on device" in lines[0]
    assert listing(small_tmpfs) == []  # the folder the run created is gone again, nothing half-written


def test_sweep_out_onto_a_full_tmpfs_leaves_no_partial_file(small_tmpfs: Path) -> None:
    thresholds = ",".join(str(i / 1000) for i in range(1000))
    proc = cli("sweep", "--golden", str(GOLDEN), "--run", str(RUN), "--thresholds", thresholds,
               "--out", str(small_tmpfs / "sweep.csv"))
    assert proc.returncode == 2, proc.stderr[-500:]
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [f"ragmeter: error: {small_tmpfs / 'sweep.csv'}: No space left on device"]
    assert listing(small_tmpfs) == []


def test_unwritable_out_is_one_line_and_exit_2(tmp_path: Path) -> None:
    if _can_mount():  # root writes anywhere: make the place read-only instead
        point = tmp_path / "ro"
        point.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(point)], capture_output=True).returncode:
            pytest.skip("mount -t tmpfs -o ro failed here")
        try:
            proc = cli(*eval_args(point / "ev"))
        finally:
            subprocess.run(["umount", str(point)], capture_output=True)
    else:
        point = tmp_path / "locked"
        point.mkdir()
        point.chmod(0o500)
        try:
            proc = cli(*eval_args(point / "ev"))
        finally:
            point.chmod(0o700)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"ragmeter: error: {point / 'ev'}: ")


# ------------------------------------------------------------------ non-finite values, strict JSON


def test_strict_json_turns_non_finite_numbers_into_null() -> None:
    from ragmeter._io import strict_json

    text = strict_json({"a": float("nan"), "b": [float("inf"), -float("inf"), 1.5], "c": {"d": float("nan")}})
    assert strict_load(text) == {"a": None, "b": [None, None, 1.5], "c": {"d": None}}


def test_nan_in_a_results_folder_is_missing_with_a_warning(tmp_path: Path) -> None:
    from ragmeter.evaluation import run_eval

    out = tmp_path / "ev"
    run_eval(GOLDEN, RUN, out, reports=False)
    cases = pl.read_parquet(out / "cases.parquet")
    fact = pl.col("category") == "fact"
    cases.with_columns(
        pl.when(fact).then(float("nan")).otherwise(pl.col("reciprocal_rank")).alias("reciprocal_rank"),
        pl.when(fact).then(float("inf")).otherwise(pl.col("ndcg")).alias("ndcg"),
    ).write_parquet(out / "cases.parquet")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    summary["retrieval"]["overall"]["mrr"]["value"] = float("-inf")
    (out / "summary.json").write_text(json.dumps(summary), encoding="utf-8")  # Python writes -Infinity
    proc = cli("report", str(out), "--resamples", "200")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    # the warning is wrapped at 80 columns on stderr: read it as one line
    assert "20 non-finite value(s) (NaN or infinity) in cases.parquet treated as missing" in " ".join(proc.stderr.split())
    assert "-Infinity" in proc.stderr
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "non_finite" in html and "nan" not in html.split('id="overall"')[1].split("</section>")[0].lower()
    # the ten fact cases are unscored for MRR now: 35 of 51, not a NaN mean
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "| MRR |" in md and "35/51" in md.split("| MRR |")[1].splitlines()[0]


def test_score_json_and_summary_json_are_strict_json(tmp_path: Path) -> None:
    proc = cli("score", "--golden", str(GOLDEN), "--run", str(RUN), "--json", "--out", str(tmp_path / "s"))
    assert proc.returncode == 0, proc.stderr
    strict_load(proc.stdout)
    strict_load((tmp_path / "s" / "summary.json").read_text(encoding="utf-8"))
    strict_load((tmp_path / "s" / "warnings.json").read_text(encoding="utf-8"))


# ------------------------------------------------------------------ warnings are counted


@pytest.fixture()
def run_missing_nine(tmp_path: Path) -> Path:
    """The example run without 8 of its cases: with the one the example lacks, 9 golden cases are missing."""
    lines = [line for line in RUN.read_text(encoding="utf-8").splitlines() if line.strip()]
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(lines[8:]) + "\n", encoding="utf-8")
    return path


def _warning_blocks(stdout: str) -> list:
    """Each console warning as one line: ``warning: ...`` and its indented continuation lines joined."""
    blocks: list = []
    for line in stdout.splitlines():
        if line.startswith("warning:"):
            blocks.append(line.rstrip())
        elif blocks and line.startswith(" " * len("warning: ")) and line.strip():
            blocks[-1] += " " + line.strip()
        else:
            blocks.append(None)
    return [b for b in blocks if b]


def test_warnings_name_five_cases_and_warnings_json_lists_them_all(tmp_path: Path, run_missing_nine: Path) -> None:
    out = tmp_path / "ev"
    proc = cli("eval", "--golden", str(GOLDEN), "--run", str(run_missing_nine), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    full = json.loads((out / "warnings.json").read_text(encoding="utf-8"))
    missing = next(w for w in full["warnings"] if w["code"] == "missing_from_run")
    assert missing["count"] == 9 and len(missing["cases"]) == 9
    codes = [w["code"] for w in full["warnings"]]
    # summary.json: the count and the first five
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    brief = next(w for w in summary["warnings"] if w["code"] == "missing_from_run")
    assert brief["count"] == 9 and brief["cases"] == missing["cases"][:5]
    # console: one line per warning, five ids named, the rest counted
    lines = _warning_blocks(proc.stdout)
    assert len(lines) == len(full["warnings"]) == proc.stdout.count("warning:")
    line = next(line for line in lines if line.startswith("warning: 9 golden case(s) missing from the run"))
    assert sum(case in line for case in missing["cases"]) == 5 and line.endswith("and 4 more")
    # HTML: one line per warning kind, in a collapsible box, five ids
    html = (out / "report.html").read_text(encoding="utf-8")
    box = html.split('<section class="warn" id="warnings">')[1].split("</section>")[0]
    assert box.startswith("<details>") and box.count("<li>") == len(set(codes))
    assert sum(case in box for case in missing["cases"]) == 5


def test_score_out_writes_warnings_json_and_keeps_messages(tmp_path: Path, run_missing_nine: Path) -> None:
    from ragmeter import score

    result = score(GOLDEN, run_missing_nine)
    assert all(isinstance(w, str) for w in result.warnings)
    structured = {w["code"]: w for w in result.summary["warnings"]}
    assert set(structured) >= {"mode_fallback", "missing_from_run", "evidence_never_found", "resolution"}
    assert [w["message"] for w in result.summary["warnings"]] == result.warnings
    result.write(tmp_path / "s")
    full = json.loads((tmp_path / "s" / "warnings.json").read_text(encoding="utf-8"))
    assert {w["code"]: w["count"] for w in full["warnings"]}["missing_from_run"] == 9
    assert len(structured["missing_from_run"]["cases"]) == 9


# ------------------------------------------------------------------ --out extensions


def test_sweep_out_checks_the_extension(tmp_path: Path) -> None:
    base = ["sweep", "--golden", str(GOLDEN), "--run", str(RUN), "--thresholds", "0,0.2"]
    proc = cli(*base, "--out", str(tmp_path / "x.txt"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == f"ragmeter: error: --out {tmp_path / 'x.txt'}: unknown extension '.txt': use .parquet, .csv or .json"
    assert not (tmp_path / "x.txt").exists()
    for ext in ("parquet", "csv", "json"):
        assert cli(*base, "--out", str(tmp_path / f"t.{ext}")).returncode == 0
    parquet = pl.read_parquet(tmp_path / "t.parquet")
    assert pl.read_csv(tmp_path / "t.csv").height == parquet.height
    rows = strict_load((tmp_path / "t.json").read_text(encoding="utf-8"))
    assert isinstance(rows, list) and len(rows) == parquet.height and rows[0]["threshold"] == 0.0
    assert listing(tmp_path) == ["t.csv", "t.json", "t.parquet"]  # no temporary file left


def test_answerable_cases_without_labels_are_counted_in_a_warning() -> None:
    from ragmeter import score

    golden = [{"id": "fact-1", "question": "q1", "referenceAnswer": "600"},  # answerable, not labelled
              {"id": "noanswer-1", "question": "q2"},  # nothing to retrieve: no warning
              {"id": "fact-2", "question": "q3", "expectedFileNames": ["a.md"], "expectedEvidence": ["cap"]}]
    run = [{"id": g["id"], "retrieved": [{"file": "a.md", "chunk_id": "a#1", "text": "the cap"}]} for g in golden]
    by_code = {w["code"]: w for w in score(golden, run).summary["warnings"]}
    assert by_code["unlabelled"]["cases"] == ["fact-1"] and by_code["unlabelled"]["count"] == 1
    assert by_code["unlabelled"]["message"].startswith("1 case(s) have a reference answer but no expected files")
