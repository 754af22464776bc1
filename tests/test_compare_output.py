"""`ragmeter compare` output (80-column tables, plain text in a pipe, strict JSON), non-finite values in a
results folder, and golden-set comparability decided on the cases rather than the file's bytes."""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from ragmeter.compare import LEGEND, CompareRefused, compare

sys.path.insert(0, str(Path(__file__).resolve().parent))  # works under any --import-mode
from compare_runs import GOLDEN, diagnosed, eval_folder, golden_cases, run_cases, variant_run, write_jsonl  # noqa: E402
from test_report import synth_cases, write_results  # noqa: E402

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _cli(*args: str, columns: int = 80) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(columns), "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.run([sys.executable, "-m", "ragmeter", "compare", *args, "--resamples", "200"],
                          capture_output=True, text=True, timeout=300, env=env)


def _assert_fits(text: str, width: int = 80) -> None:
    from rich.cells import cell_len

    assert text.strip()
    for line in text.splitlines():
        assert cell_len(line) <= width, f"{cell_len(line)} columns: {line!r}"
    assert "…" not in text, "a cell was cut"
    assert "\\[" not in text and "\\*" not in text and "\\_" not in text, "Markdown escapes on the terminal"


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("cmpout")
    base = eval_folder(tmp / "base")
    hits = diagnosed(base).filter(pl.col("hit") == True).get_column("id").to_list()  # noqa: E712
    miss = eval_folder(tmp / "miss", variant_run(tmp / "miss.jsonl", miss=hits[:7]))
    # judged-looking synthetic pair: every metric, so the widest metric names are in the tables
    synth = synth_cases(200, seed=10)
    worse = synth.with_columns(pl.when(pl.col("id").is_in(synth["id"][:30].to_list())).then(False).otherwise(pl.col("hit")).alias("hit"))
    sb, sc = write_results(tmp / "synth_b", synth), write_results(tmp / "synth_c", worse)
    return {"tmp": tmp, "base": base, "miss": miss, "synth_b": sb, "synth_c": sc}


# ------------------------------------------------------------------ rendering


@pytest.mark.parametrize("pair", [("base", "miss"), ("synth_b", "synth_c")])
def test_piped_output_is_plain_text_within_80_columns(folders, pair) -> None:  # type: ignore[no-untyped-def]
    b, c = (str(folders[p]) for p in pair)
    proc = _cli(b, c, "--gate", "hit>=-2pp,regressions<=0,hit[fact]>=-5pp")
    assert proc.returncode == 1, proc.stderr
    _assert_fits(proc.stdout)
    assert "\x1b" not in proc.stdout  # no control codes into a pipe
    assert "Deltas" in proc.stdout and "Gate: FAILED" in proc.stdout and "hit[fact]>=-5pp" in proc.stdout
    assert "| metric |" not in proc.stdout  # not Markdown


def test_wide_columns_env_still_gives_80_in_a_pipe(folders) -> None:  # type: ignore[no-untyped-def]
    proc = _cli(str(folders["synth_b"]), str(folders["synth_c"]), columns=200)
    assert proc.returncode == 0
    _assert_fits(proc.stdout)


def test_terminal_render_fits_80_columns(folders) -> None:  # type: ignore[no-untyped-def]
    import io

    from rich.console import Console

    from ragmeter import gate
    from ragmeter.cli.compare import render

    for b, c in (("base", "miss"), ("synth_b", "synth_c")):
        comp = compare(folders[b], folders[c], n_resamples=200)
        buf = io.StringIO()
        console = Console(file=buf, width=80, force_terminal=True, color_system="truecolor")
        render(comp, gate.evaluate(gate.parse_rules("regressions<=0,faithfulness>=0.5"), comp), console)
        raw = buf.getvalue()
        assert "\x1b[" in raw  # colours on a terminal
        _assert_fits(ANSI.sub("", raw))


def test_markdown_only_when_asked(folders, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = _cli(str(folders["base"]), str(folders["miss"]), "--markdown")
    assert proc.returncode == 0 and proc.stdout.startswith("## ragmeter compare") and "| metric |" in proc.stdout
    out = tmp_path / "cmp.md"
    proc = _cli(str(folders["base"]), str(folders["miss"]), "--out", str(out))
    assert proc.returncode == 0 and "| metric |" not in proc.stdout and "| metric |" in out.read_text(encoding="utf-8")
    proc = _cli(str(folders["base"]), str(folders["miss"]), "--out", str(tmp_path / "cmp.parquet"))
    assert proc.returncode == 2 and "name the file .md" in proc.stderr
    proc = _cli(str(folders["base"]), str(folders["miss"]), "--json", str(tmp_path / "cmp.txt"))
    assert proc.returncode == 2 and "name the file .json" in proc.stderr and not (tmp_path / "cmp.txt").exists()
    # both on stdout: one would silently win; refused, and --json FILE beside --markdown works
    proc = _cli(str(folders["base"]), str(folders["miss"]), "--markdown", "--json")
    assert proc.returncode == 2 and "--json and --markdown both print" in proc.stderr and not proc.stdout
    proc = _cli(str(folders["base"]), str(folders["miss"]), "--markdown", "--json", str(tmp_path / "cmp.json"))
    assert proc.returncode == 0 and proc.stdout.startswith("## ragmeter compare")
    assert json.loads((tmp_path / "cmp.json").read_text(encoding="utf-8"))["rows"]


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def short(folders):  # type: ignore[no-untyped-def]
    """The example evaluated from a run file that lacks its last five cases: long warnings, a gate that fails."""
    tmp = folders["tmp"]
    return eval_folder(tmp / "short", write_jsonl(tmp / "short.jsonl", run_cases()[:-5]))


def test_stderr_warnings_wrap_at_80_columns_with_a_hanging_indent(folders, short) -> None:  # type: ignore[no-untyped-def]
    # the candidate's run file lacks its last five cases: two long warnings and a failed gate on stderr, which were
    # single lines of 200 columns and more; COLUMNS does not widen a pipe
    proc = _cli(str(folders["base"]), str(short), "--gate", "regressions<=0", columns=200)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    _assert_fits(proc.stderr)
    heads = [line for line in lines if line.startswith("ragmeter: ")]
    assert len(heads) >= 3 and len(lines) > len(heads)
    head = ""
    for line in lines:
        if line.startswith("ragmeter: "):
            head = re.match(r"ragmeter: [a-zA-Z ]+: ", line).group(0)
        else:  # a continuation line: indented under its message's text
            assert line.startswith(" " * len(head)) and line[len(head)] != " ", line
        assert line == line.rstrip()
    comp = compare(folders["base"], short, n_resamples=200)
    assert len(comp.warnings) >= 2
    for w in comp.warnings:
        assert "ragmeter: warning: " + _flat(w) in _flat(proc.stderr)
    assert "ragmeter: gate failed: regressions<=0: not measured on every case" in _flat(proc.stderr)


def test_prose_on_stdout_wraps_with_a_hanging_indent(folders, short) -> None:  # type: ignore[no-untyped-def]
    # rich wrapped the header, the gate's lines, the legend, warnings and notes at column 0 with a trailing space on
    # each broken line, so a continuation read as a new line and an interval could be split
    import io

    from rich.console import Console

    from ragmeter import gate
    from ragmeter.cli.compare import render

    comp = compare(folders["base"], short, n_resamples=200)
    buf = io.StringIO()
    render(comp, gate.evaluate(gate.parse_rules("hit>=-2pp,regressions<=0"), comp), Console(file=buf, width=80))
    lines = buf.getvalue().splitlines()
    _assert_fits(buf.getvalue())
    assert all(line == line.rstrip() for line in lines), [line for line in lines if line != line.rstrip()]

    def paragraph(start: str) -> list:
        i = next(i for i, line in enumerate(lines) if line.startswith(start))
        j = i + 1
        while j < len(lines) and lines[j].startswith(" ") and not lines[j].lstrip().startswith(("ok:", "FAILED:")):
            j += 1
        return lines[i:j]

    legend = paragraph("* = the 95% interval")
    assert len(legend) > 1 and all(line.startswith("  ") for line in legend[1:])
    assert " ".join(" ".join(legend).split()) == " ".join(LEGEND.split())
    failed = paragraph("  FAILED: regressions<=0")
    assert len(failed) > 1 and all(line.startswith("    ") for line in failed[1:])
    for w in comp.warnings:
        block = paragraph("warning: " + w.split()[0])
        assert " ".join(" ".join(block).split()) == "warning: " + " ".join(w.split())
        assert all(line.startswith(" " * len("warning: ")) for line in block[1:])
    note = paragraph("note: " + comp.notes[0].split()[0])
    assert " ".join(" ".join(note).split()) == "note: " + " ".join(comp.notes[0].split())


def test_a_folder_compared_with_itself_is_named(folders) -> None:  # type: ignore[no-untyped-def]
    # a CI job whose baseline and candidate paths point at one folder passed every gate rule without a word
    base = folders["base"]
    for other in (base, base.parent / ".." / base.parent.name / base.name):
        comp = compare(base, other, n_resamples=200)
        same = [w for w in comp.warnings if "same folder" in w]
        assert len(same) == 1 and str(base.resolve()) in same[0], comp.warnings
        assert all(r.delta in (0, None) for r in comp.rows)
    assert not any("same folder" in w for w in compare(base, folders["miss"], n_resamples=200).warnings)
    proc = _cli(str(base), str(base), "--gate", "regressions<=0")
    assert proc.returncode == 0 and "the baseline and the candidate are the same folder" in _flat(proc.stderr)


# ------------------------------------------------------------------ strict JSON, non-finite values


def _strict(text: str):  # type: ignore[no-untyped-def]
    def refuse(token: str):  # type: ignore[no-untyped-def]
        raise AssertionError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_values_are_missing_with_a_warning_and_json_is_strict(tmp_path: Path) -> None:
    base = synth_cases(80, seed=3)
    ids = base["id"].to_list()
    bad = {ids[0]: float("nan"), ids[1]: float("-inf"), ids[2]: float("inf")}
    cand = base.with_columns(
        pl.Series("faithfulness_score", [bad.get(i, v) for i, v in zip(ids, base["faithfulness_score"].to_list())]),
        pl.Series("reciprocal_rank", [float("inf") if i == ids[4] else v for i, v in zip(ids, base["reciprocal_rank"].to_list())]),
    )
    b, c = write_results(tmp_path / "b", base), write_results(tmp_path / "c", cand)
    comp = compare(b, c, n_resamples=200)
    faith = comp.row("faithfulness")
    assert faith.n_paired == 77 and faith.delta == pytest.approx(0.0) and math.isfinite(faith.ci_low)
    # the folder reader turns them into missing values and says so, per column
    assert any("non-finite" in w and "faithfulness_score (3)" in w and "reciprocal_rank (1)" in w
               for w in comp.warnings)

    out = tmp_path / "cmp.json"
    proc = _cli(str(b), str(c), "--json")
    assert proc.returncode == 0, proc.stderr
    payload = _strict(proc.stdout)
    assert payload["n_paired"] == 80 and "non-finite" in _flat(proc.stderr) and "Traceback" not in proc.stderr
    # the 3 faithfulness values the candidate lacks were not measured: a rule on faithfulness cannot pass
    proc = _cli(str(b), str(c), "--json", str(out), "--gate", "faithfulness>=-1pp")
    assert proc.returncode == 1 and "Deltas" in proc.stdout
    assert "3 case(s) scored in the baseline only" in _flat(proc.stderr)
    assert _strict(out.read_text(encoding="utf-8"))["gate"]["passed"] is False


def test_json_never_writes_nan_tokens() -> None:
    from ragmeter.compare import Comparison, MetricDelta, to_json

    row = MetricDelta("hit", "overall", "rate", float("nan"), 0.5, float("-inf"), None, None, 0, 3, 0, 0, 0, None, float("inf"))
    text = to_json(Comparison("a", "b", [row], 3, 3, 0, 100, 1))
    assert "NaN" not in text and "Infinity" not in text
    assert _strict(text)["rows"][0]["delta"] is None


# ------------------------------------------------------------------ comparability on cases, not bytes


def _golden_variant(path: Path, edit=None, header: str = "# edited copy") -> Path:  # type: ignore[no-untyped-def]
    rows = golden_cases()
    if edit:
        rows = edit(rows)
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    lines.insert(10, "# a comment line in the middle")
    path.write_text("\n".join([header, *lines]) + "\n", encoding="utf-8")
    return path


def test_comment_line_in_golden_set_is_comparable(folders) -> None:  # type: ignore[no-untyped-def]
    tmp = folders["tmp"]
    golden = _golden_variant(tmp / "golden_commented.jsonl")
    assert golden.read_bytes() != GOLDEN.read_bytes()
    other = eval_folder(tmp / "commented", golden=golden)
    comp = compare(folders["base"], other, n_resamples=200)
    assert not comp.forced and comp.n_paired == 51
    assert any("differ byte for byte" in n for n in comp.notes)
    proc = _cli(str(folders["base"]), str(other), "--gate", "regressions<=0")
    assert proc.returncode == 0, proc.stderr


def test_different_golden_set_names_the_cases(folders) -> None:  # type: ignore[no-untyped-def]
    tmp = folders["tmp"]

    def edit(rows):  # type: ignore[no-untyped-def]
        rows = [dict(r) for r in rows]
        rows[0]["question"] += " (reworded)"
        rows[1]["expectedEvidence"] = ["a different phrase"]
        rows[2]["referenceAnswer"] = "another answer"
        for r in rows[3:9]:
            r["question"] += "?"
        return rows + [{"id": "extra-01-new-case", "question": "A new question?", "expectedFileNames": ["handbook.md"]}]

    golden = _golden_variant(tmp / "golden_changed.jsonl", edit)
    other = eval_folder(tmp / "changed", golden=golden)
    ids = [r["id"] for r in golden_cases()]
    with pytest.raises(CompareRefused) as info:
        compare(folders["base"], other)
    msg = str(info.value)
    assert "golden sets differ in 10 case(s)" in msg and "the recorded golden files" in msg
    assert f"{ids[0]} (question differs)" in msg and f"{ids[1]} (expected_evidence differs)" in msg
    assert f"{ids[2]} (reference_answer differs)" in msg and "and 5 more" in msg and "extra-01-new-case" not in msg
    from ragmeter.compare import case_differences
    from ragmeter.dataset import load_golden

    diffs = case_differences(*(load_golden(g).drop("line") for g in (GOLDEN, golden)))
    assert len(diffs) == 10 and diffs[-1] == ("extra-01-new-case", "only in the candidate")
    proc = _cli(str(folders["base"]), str(other))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and ids[0] in proc.stderr
    proc = _cli(str(folders["base"]), str(other), "--force")
    assert proc.returncode == 0 and "FORCED COMPARISON" in proc.stdout and "WARNING" in proc.stderr
    _assert_fits(proc.stdout)


def test_moved_golden_file_falls_back_to_cases_parquet(folders) -> None:  # type: ignore[no-untyped-def]
    tmp = folders["tmp"]

    def edit(rows):  # type: ignore[no-untyped-def]
        rows = [dict(r) for r in rows]
        rows[5]["question"] = "something else entirely?"
        return rows

    golden = _golden_variant(tmp / "golden_moved.jsonl", edit)
    other = eval_folder(tmp / "moved", golden=golden)
    golden.unlink()  # the recorded file is gone: the cases are compared from cases.parquet
    with pytest.raises(CompareRefused, match=r"golden sets differ in 1 case\(s\), compared from cases.parquet"):
        compare(folders["base"], other)


def test_worst_case_widths_fold_instead_of_cutting() -> None:
    # 100,000 cases, every metric, a category name longer than the screen, all values at their widest
    import io

    from rich.console import Console

    from ragmeter.cli.compare import render
    from ragmeter.compare import Comparison, MetricDelta, better
    from ragmeter.report.data import METRICS

    long_cat = "a-category-name-without-any-space-that-is-longer-than-a-column"
    rows = [MetricDelta(m, g, d.kind, 0.999, 0.001, -0.998, -1.0, -0.9, 100000, 100000, 99999, 100000, 0, 0.0001,
                        0.9999, better(m)) for g in ("overall", long_cat, "fact") for m, d in METRICS.items()]
    comp = Comparison("/a/long/path/to/the/baseline-results-folder-2026-12-01", "/b/candidate", rows, 100000, 100000,
                      100000, 10000, 1)
    buf = io.StringIO()
    render(comp, None, Console(file=buf, width=80))
    text = buf.getvalue()
    _assert_fits(text)
    assert "100000/100000" in text and "[-100.0pp, -90.0pp]" in text and "One case = 0.001 points" in text


def test_unreadable_folder_is_one_line_exit_2(folders, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "cases.parquet").write_bytes(b"not parquet at all")
    (broken / "summary.json").write_text("{}", encoding="utf-8")
    proc = _cli(str(folders["base"]), str(broken))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "cases.parquet" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_the_resolution_sentence_says_it_is_per_paired_case_not_per_metric() -> None:
    """'One case = 1.96 points' read as every rate's resolution; hit covers 45 of the example's 51 paired cases,
    where one case is 2.22 points."""
    from ragmeter.compare import Comparison, header_sentence, to_markdown

    comp = Comparison("a", "b", [], 51, 51, 51, 200, 1)
    for text in (header_sentence(comp), to_markdown(comp, None)):
        flat = " ".join(text.split())
        assert "One case = 1.96 points of a rate over all 51 paired cases; more for a metric scored on fewer" in flat
