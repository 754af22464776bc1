"""The built wheel works on its own: installed into a fresh virtual environment, ``ragmeter demo``
runs from an unrelated directory on the example data shipped inside the package.

Slow (it builds the release wheel: minutes without a warm ``target/``): ``-m "not slow"``
deselects it; CI runs it. The build reuses the repository's ``target/`` (or ``CARGO_TARGET_DIR``).
"""
from __future__ import annotations

import importlib.util
import json
import os
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _build_wheel(out: Path) -> Path:
    # maturin comes with the test extras, so nothing is downloaded (no isolated build environment).
    if importlib.util.find_spec("maturin") is not None:
        cmd = [sys.executable, "-m", "maturin", "build", "--release", "--quiet", "--out", str(out)]
    else:
        cmd = [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "--quiet",
               "--wheel-dir", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = out.glob("ragmeter-*.whl")
    return wheel


def _clean_env(venv: Path) -> dict:
    """The environment of a user's shell with the venv activated: nothing points at the source tree."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    root = tmp_path_factory.mktemp("wheel")
    wheel = _build_wheel(root / "dist")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    # The dependencies (polars, numpy, rich ...) come from this environment's site-packages, listed
    # after the venv's own, so nothing is downloaded and the wheel's ragmeter is the one imported.
    # (A .pth line only extends sys.path: an editable install's hook there is not run.)
    venv_site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                    capture_output=True, text=True, check=True).stdout.strip())
    outer = [*site.getsitepackages(), site.getusersitepackages()]
    (venv_site / "outer-environment.pth").write_text("\n".join(outer) + "\n", encoding="utf-8")
    env = _clean_env(venv)
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
                           "--no-deps", "--no-index", str(wheel)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return wheel, venv, env


def test_wheel_ships_the_example_data(installed: tuple) -> None:
    wheel, _, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("golden.jsonl", "run.jsonl", "human_labels.jsonl", "trec/qrels.txt", "trec/run.txt", "kb/handbook.md"):
        assert f"ragmeter/_example/{name}" in names, name
    assert not any(n.startswith("examples/") for n in names)  # nothing outside the package


def test_installed_wheel_runs_the_demo_from_another_directory(installed: tuple, tmp_path: Path) -> None:
    _, venv, env = installed
    elsewhere = tmp_path / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import ragmeter; print(ragmeter.__file__)"],
                           cwd=elsewhere, capture_output=True, text=True, env=env, check=True).stdout.strip()
    assert Path(where).is_relative_to(venv) and not Path(where).is_relative_to(REPO), where

    proc = subprocess.run([str(venv / "bin" / "ragmeter"), "demo", "--out", "demo-out"], cwd=elsewhere,
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    flat = "".join(out.split())  # a path wider than the line is cut, its rest indented on the next line
    assert f"(in{Path(where).parent / '_example'})" in flat
    # The findings the README promises: file-level 93.3% hides chunk-level 80.0% over 45 of 51 cases;
    # the 0.2 threshold takes paraphrases from 66.7% to 11.1%.
    all_row = next(line for line in out.splitlines() if line.startswith("ALL ") and "93.3%" in line)
    assert "45/51" in all_row and "80.0%" in all_row
    paraphrase = [line.split() for line in out.splitlines() if " paraphrase " in f" {line} " and "9/9" in line]
    assert [row[2] for row in paraphrase if row[0] in ("0", "0.2")] == ["66.7%", "11.1%"]
    written = elsewhere / "demo-out"
    assert f"wrote{written}/" in flat
    for name in ("cases.parquet", "chunks.parquet", "sweep.parquet", "summary.json", "report.html", "report.md"):
        assert (written / name).stat().st_size > 0, name
    summary = json.loads((written / "summary.json").read_text(encoding="utf-8"))
    overall = summary["retrieval"]["overall"]
    assert overall["hit_rate"]["n_scored"] == 45 and overall["hit_rate"]["n_total"] == 51
    assert round(100 * overall["file_hit_rate"]["value"], 1) == 93.3
