"""Console output fits 80 columns: no line wider, no cell cut (``…``), the key numbers all there.

Each command is rendered piped (what a CI log or ``| less`` gets: plain text, 80 columns even when
COLUMNS says more) and in a pseudo-terminal 80 columns wide. Widths are terminal cells, so the
Chinese evidence phrase in a warning counts double, as it does on screen.
"""
from __future__ import annotations

import fcntl
import json
import os
import platform
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from rich.cells import cell_len

EX = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example"
GOLDEN, RUN = str(EX / "golden.jsonl"), str(EX / "run.jsonl")
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")

# The overall row of the retrieval table on the bundled example, cell by cell:
# n, Hit@5, fHit@5, MRR, MAP, NDCG, EvRec, AllF@5 (with its count), empty.
ALL_ROW = ["ALL", "45/51", "80.0%", "93.3%", "0.673", "0.667", "0.694", "74.4%", "61.5%", "13/13", "2"]
PARAPHRASE_BY_THRESHOLD = {"0": "66.7%", "0.1": "66.7%", "0.2": "11.1%"}

COMMANDS = {
    "score": ["score", "--golden", GOLDEN, "--run", RUN],
    "sweep": ["sweep", "--golden", GOLDEN, "--run", RUN, "--thresholds", "0,0.1,0.2"],
    "demo": ["demo", "--out", "demo-out"],
    "eval": ["eval", "--golden", GOLDEN, "--run", RUN, "--thresholds", "0,0.1,0.2", "--out", "eval-out"],
}


def _env(columns: int) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TERM")}
    return {**env, "COLUMNS": str(columns), "TERM": "xterm-256color"}


def piped(args: List[str], cwd: Path, columns: int = 80) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmeter", *args], cwd=cwd, capture_output=True, text=True,
                          env=_env(columns), timeout=300)


def in_terminal(args: List[str], cwd: Path, columns: int = 80, coloured: bool = True,
                stdout_only: bool = False) -> Tuple[int, str]:
    """Run in a pseudo-terminal ``columns`` wide; returns the exit status and the text without escapes.
    ``stdout_only``: stderr is discarded (the terminal shows what a script reading stdout sees)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "ragmeter", *args], cwd=cwd, stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=subprocess.DEVNULL if stdout_only else slave, env=_env(columns))
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    status = proc.wait(timeout=300)
    raw = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    if coloured:
        assert "\x1b[" in raw, "a terminal gets colours (else this test would not exercise the terminal path)"
    return status, ANSI.sub("", raw)


def assert_fits(text: str, width: int = 80) -> None:
    too_wide = [line for line in text.splitlines() if cell_len(line) > width]
    assert not too_wide, f"{len(too_wide)} line(s) wider than {width} cells:\n" + "\n".join(too_wide)
    assert "…" not in text, "a cell was cut:\n" + text


def assert_key_numbers(name: str, text: str) -> None:
    rows = [line.split() for line in text.splitlines()]
    if name in ("score", "demo", "eval"):
        assert ALL_ROW in rows, text
        assert "file-level minus chunk-level Hit@5: +13.3 points" in " ".join(text.split())
    lines = text.splitlines()
    if name in ("score", "demo", "eval"):
        assert "Retrieval at k=5 (chunk level unless marked)" in lines, text
    if name in ("sweep", "demo"):  # eval prints the score part only
        # the sweep's table is 44 columns wide; its title is not broken to that width
        assert "Threshold sweep (keep score >= t, then the top 5)" in lines, text
        paraphrase = {row[0]: row[2] for row in rows if len(row) == 7 and row[1] == "paraphrase"}
        assert paraphrase == PARAPHRASE_BY_THRESHOLD, text
        assert ["0.2", "ALL", "60.0%", "0.556", "45/51", "9", "1.88"] in rows, text


@pytest.mark.parametrize("name", list(COMMANDS))
def test_piped_output_is_plain_text_80_columns_wide(name: str, tmp_path: Path) -> None:
    # A wide COLUMNS does not widen a pipe's output: logs read the same everywhere.
    proc = piped(COMMANDS[name], tmp_path, columns=80 if name == "eval" else 200)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout, "no control codes in a pipe"
    assert_fits(proc.stdout)
    assert_key_numbers(name, proc.stdout)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_terminal_output_fits_80_columns(name: str, tmp_path: Path) -> None:
    status, text = in_terminal(COMMANDS[name], tmp_path, columns=80)
    assert status == 0, text
    assert_fits(text)
    assert_key_numbers(name, text)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_piped_lines_end_without_spaces_and_wrapped_prose_is_indented(name: str, tmp_path: Path) -> None:
    # eval's "wrote DIR/: ..." line ended in a space where rich wrapped it, its rest at column 0
    proc = piped(COMMANDS[name], tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line for line in lines if line != line.rstrip()] == []
    for first, rest in zip(lines, lines[1:]):
        if first.startswith("wrote ") and rest.strip():
            assert rest.startswith(" "), (first, rest)


def test_demo_says_where_it_wrote(tmp_path: Path) -> None:
    proc = piped(["demo", "--out", "my-demo"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    # without white space: a path wider than the 80 columns is cut, its rest indented on the next line
    flat = "".join(proc.stdout.split())
    assert f"wrote{tmp_path / 'my-demo'}/:cases.parquet" in flat
    assert f"open{tmp_path / 'my-demo' / 'report.html'}inabrowser" in flat
    assert (tmp_path / "my-demo" / "report.html").stat().st_size > 0
    written = flat.split("/:", 1)[1].split("open", 1)[0]
    named = {name.strip() for name in written.split(",")}
    on_disk = {p.name + ("/" if p.is_dir() else "") for p in (tmp_path / "my-demo").iterdir()}
    assert named == on_disk  # the line names every file written, and only those


def _category_cell(text: str, first: str, column: int) -> str:
    """A category name that may be folded over several lines of its column (the other cells empty)."""
    lines = [line.split() for line in text.splitlines()]
    start = next(i for i, row in enumerate(lines) if len(row) > column and row[column].startswith(first))
    name = lines[start][column]
    for row in lines[start + 1:]:
        if len(row) != 1:
            break
        name += row[0]
    return name


def test_a_long_category_name_folds_instead_of_pushing_numbers_out(tmp_path: Path) -> None:
    long_name = "customer-support-billing-escalations-emea"
    lines = []
    for line in Path(GOLDEN).read_text(encoding="utf-8").splitlines():
        if line.startswith("{"):
            case = json.loads(line)
            if case["id"].startswith("fact-"):
                case["category"] = long_name
            line = json.dumps(case, ensure_ascii=False)
        lines.append(line)
    golden = tmp_path / "golden.jsonl"
    golden.write_text("\n".join(lines) + "\n", encoding="utf-8")
    score = piped(["score", "--golden", str(golden), "--run", RUN], tmp_path)
    assert score.returncode == 0, score.stderr
    assert_fits(score.stdout)
    assert ALL_ROW in [line.split() for line in score.stdout.splitlines()], score.stdout
    assert _category_cell(score.stdout, "customer", 0) == long_name, score.stdout
    sweep = piped(["sweep", "--golden", str(golden), "--run", RUN, "--thresholds", "0,0.2"], tmp_path)
    assert sweep.returncode == 0, sweep.stderr
    assert_fits(sweep.stdout)
    assert _category_cell(sweep.stdout, "customer", 1) == long_name, sweep.stdout


@pytest.mark.parametrize("args", [
    ["score", "--golden", GOLDEN, "--run", RUN, "--json"],
    ["score", "--golden", GOLDEN, "--run", RUN, "--json", "--out", "out"],
    ["sweep", "--golden", GOLDEN, "--run", RUN, "--thresholds", "0,0.2", "--json"],
], ids=["score", "score-out", "sweep"])
def test_json_prints_machine_readable_output_only(args: List[str], tmp_path: Path) -> None:
    """stdout is the JSON alone, in a pipe and in a terminal; warnings (sweep's run health) go to stderr."""
    proc = piped(args, tmp_path)
    for status, text in ((proc.returncode, proc.stdout), in_terminal(args, tmp_path, coloured=False,
                                                                       stdout_only=True)):
        assert status == 0, text
        data = json.loads(text)  # the whole of stdout, nothing around it
        if args[0] == "score":
            assert data["overall"]["hit_rate"] == {"value": 0.8, "n_scored": 45, "n_total": 51}
        else:
            assert {(row["threshold"], row["category"]): row["n_scored"] for row in data}[(0.2, "ALL")] == 45


_LARGE_BUFFERS = """
import ctypes, sys
from ragmeter import cli
class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t)
                for n in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] == "fix":
    cli._large_buffers_back_to_the_system()
libc.free(libc.malloc(30 << 20))  # glibc's own threshold then grows to 30 MB
before = libc.mallinfo2().hblkhd
block = libc.malloc(8 << 20)
print(libc.mallinfo2().hblkhd - before >= 8 << 20)  # mapped on its own: given back when freed
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator")
def test_score_gives_large_freed_buffers_back_to_the_system() -> None:
    """``score`` and ``sweep`` fix glibc's mmap threshold at 1 MB: a buffer of 8 MB is mapped on its own even after
    a larger one was freed (glibc's default would carve it from the heap and keep its memory once freed)."""
    def mapped(mode: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
        return subprocess.run([sys.executable, "-c", _LARGE_BUFFERS, mode], capture_output=True, text=True,
                              env=env, check=True).stdout.strip()

    assert mapped("plain") == "False"
    assert mapped("fix") == "True"


def test_a_value_over_fewer_cases_than_the_row_says_how_many(tmp_path: Path) -> None:
    """Chunks without a file leave their cases out of fHit, not of Hit: the table's n is Hit's, so fHit's cell
    carries its own count, as summary.json does, and still fits 80 columns."""
    lines = []
    for line in Path(RUN).read_text(encoding="utf-8").splitlines():
        if line.startswith("{"):
            case = json.loads(line)
            if case["id"].startswith(("fact-", "conflict-")):
                for chunk in case.get("retrieved") or []:
                    chunk.pop("file", None)
            line = json.dumps(case, ensure_ascii=False)
        lines.append(line)
    run = tmp_path / "run.jsonl"
    run.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = piped(["score", "--golden", GOLDEN, "--run", str(run)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert_fits(proc.stdout)
    data = json.loads(piped(["score", "--golden", GOLDEN, "--run", str(run), "--json"], tmp_path).stdout)
    hit, file_hit = data["overall"]["hit_rate"], data["overall"]["file_hit_rate"]
    assert file_hit["n_scored"] < hit["n_scored"]
    row = next(line.split() for line in proc.stdout.splitlines() if line.startswith("ALL"))
    assert row[1] == f"{hit['n_scored']}/{hit['n_total']}"
    assert row[3:5] == [f"{100 * file_hit['value']:.1f}%", f"({file_hit['n_scored']})"], proc.stdout
    assert "(m): a value over m cases" in " ".join(proc.stdout.split())


@pytest.mark.parametrize("command", [
    [], ["trec"], ["score"], ["sweep"], ["demo"], ["collect"], ["eval"], ["judge"], ["report"], ["compare"],
    ["audit"], ["cache"], ["cache", "repair"], ["review"], ["review", "export"], ["review", "import"],
    ["review", "compare"],
], ids=lambda c: "-".join(c) or "ragmeter")
def test_help_fits_80_columns(command: List[str], tmp_path: Path) -> None:
    """Descriptions and hand-laid epilogs alike (argparse wraps neither under a raw formatter)."""
    proc = piped([*command, "--help"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "usage: ragmeter" in proc.stdout
    assert_fits(proc.stdout)


def test_no_file_level_gap_line_when_there_is_no_gap(tmp_path: Path) -> None:
    """'+0.0 points (the right file came back, the answer chunk did not)' explained a gap that was not there."""
    import json

    golden = [json.loads(line) for line in Path(GOLDEN).read_text(encoding="utf-8").splitlines()
              if line.strip() and not line.startswith("#")]
    run = {r["id"]: r for r in (json.loads(line) for line in Path(RUN).read_text(encoding="utf-8").splitlines()
                               if line.strip() and not line.startswith("#"))}
    # every case retrieves exactly its evidence: the chunk-level and file-level hit rates are equal
    g = tmp_path / "g.jsonl"
    g.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in golden), encoding="utf-8")
    same = [dict(run[c["id"]], retrieved=[{"file": f, "text": " ".join(c.get("expectedEvidence") or ["x"])}
                                          for f in (c.get("expectedFileNames") or ["none.md"])])
            for c in golden if c["id"] in run]
    r = tmp_path / "r.jsonl"
    r.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in same), encoding="utf-8")
    proc = piped(["score", "--golden", str(g), "--run", str(r)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    row = next(line.split() for line in proc.stdout.splitlines() if line.startswith("ALL"))
    assert row[2] == row[3] and float(row[2].rstrip("%")) > 90, row  # Hit and fHit equal, and not both 0
    assert "file-level minus chunk-level" not in proc.stdout, proc.stdout


@pytest.mark.parametrize("command", ["score", "sweep", "eval", "demo"])
def test_a_bad_k_is_named_by_its_flag(command: str, tmp_path: Path, capsys) -> None:
    """Every other numeric flag's error names the flag (--repeat, --concurrency, ...); --k said 'k must be'."""
    from ragmeter.cli import main

    inputs = [] if command == "demo" else ["--golden", GOLDEN, "--run", RUN]
    out = ["--out", str(tmp_path / ("sweep.csv" if command == "sweep" else "out"))]
    assert main([command, *inputs, *out, "--k", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragmeter: error: --k must be a positive integer, got 0"), err
    assert not (tmp_path / "out").exists() and not (tmp_path / "sweep.csv").exists()


def _subparsers(parser) -> Dict[str, object]:
    import argparse

    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[name] = sub
                found.update({f"{name} {k}": v for k, v in _subparsers(sub).items()})
    return found


def test_every_flag_a_help_text_names_is_one_its_command_takes() -> None:
    """collect's help said '--rpm, --tpm and --concurrency are ceilings' (a text shared with judge): collect has
    no --tpm, and trying it was a usage error."""
    import re

    from ragmeter.cli import build_parser

    commands = _subparsers(build_parser())
    wrong = {}
    for name, sub in commands.items():
        # a command's own flags, those of its subcommands (review's help names export's --force), and flags of
        # another command named with it ("eval --review-seed")
        known = {o for other, parser in commands.items() if other == name or other.startswith(name + " ")
                 for a in parser._actions for o in a.option_strings}
        text = re.sub(rf"(?<![\w-])(?:{'|'.join(map(re.escape, commands))})\s+--[\w-]+", "", sub.format_help())
        named = set(re.findall(r"(?<![\w-])--[a-zA-Z][a-zA-Z0-9_-]*[a-zA-Z0-9]", text))
        if named - known:
            wrong[name] = sorted(named - known)
    assert not wrong, wrong


@pytest.mark.parametrize("args", [
    ["score", "--golden", GOLDEN, "--run", RUN], ["sweep", "--golden", GOLDEN, "--run", RUN],
    ["audit", "--golden", GOLDEN], ["demo"], ["eval", "--golden", GOLDEN, "--run", RUN, "--no-judge"],
    ["judge", "--golden", GOLDEN, "--run", RUN, "--base-url", "http://127.0.0.1:9/v1", "--model", "m"],
], ids=lambda a: a[0])
def test_an_empty_out_is_refused_not_read_as_no_out_or_the_current_folder(args: List[str], tmp_path: Path,
                                                                           capsys, monkeypatch) -> None:
    """`--out "$OUT"` with OUT unset: score and audit wrote nothing and exited 0, demo and report wrote into the
    current folder (replacing its ragmeter-named files)."""
    from ragmeter.cli import main

    monkeypatch.chdir(tmp_path)
    for value in ("", "  "):
        assert main([*args, "--out", value]) == 2
        assert "--out: empty" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_category_names_that_look_like_rich_markup_are_shown_as_written(tmp_path: Path) -> None:
    # a category is the user's text: "[/]odd" crashed score with a MarkupError traceback, "[bold]x" lost its tag
    names = {"fact-": "[/]odd", "multi": "[bold]x"}
    lines = []
    for line in Path(GOLDEN).read_text(encoding="utf-8").splitlines():
        if line.startswith("{"):
            case = json.loads(line)
            case["category"] = next((v for k, v in names.items() if case["id"].startswith(k)), "plain")
            line = json.dumps(case, ensure_ascii=False)
        lines.append(line)
    golden = tmp_path / "golden.jsonl"
    golden.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for args in (["score"], ["sweep", "--thresholds", "0,0.2"],
                 ["eval", "--no-judge", "--out", "a"], ["eval", "--no-judge", "--out", "b"]):
        proc = piped([*args, "--golden", str(golden), "--run", RUN], tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        for name in names.values():
            assert name in proc.stdout, (args, name, proc.stdout)
    status, text = in_terminal(["score", "--golden", str(golden), "--run", RUN], tmp_path)
    assert status == 0 and "Traceback" not in text and "[/]odd" in text, text
    proc = piped(["compare", "a", "b", "--resamples", "200"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert all(name in proc.stdout for name in names.values()), proc.stdout
