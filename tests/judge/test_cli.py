"""``ragmeter judge`` as a subprocess: outputs, SIGKILL + rerun, no key anywhere."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest


def write_cases(path: Path, n: int) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            zh = i % 2 == 1
            f.write(json.dumps({
                "id": f"q{i}",
                "question": f"第{i}号产品是什么颜色？" if zh else f"What colour is product {i}?",
                "reference_answer": f"第{i}号产品是蓝色的" if zh else f"Product {i} is blue",
                "answer": f"第{i}号产品是蓝色的。" if zh else f"Product {i} is blue.",
                "contexts": [f"useful: product {i} is blue", "noise"], "category": "fact", "cost": 0.002,
            }, ensure_ascii=False) + "\n")
    return path


def cli(tmp_path, server, *extra, key=None, **popen):
    env = dict(os.environ)
    if key:
        env["RAGMETER_API_KEY"] = key
    args = [sys.executable, "-m", "ragmeter", "judge", "--base-url", server.base_url, "--model", "gpt-4o-mini",
            "--cache", str(tmp_path / "cache.sqlite"), "--out", str(tmp_path / "out"), "--no-progress",
            "--retry-base-delay", "0.01", "--retry-max-delay", "0.05", "--timeout", "5", "-v", *extra]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def test_cli_writes_outputs(tmp_path, server, api_key):
    cases = write_cases(tmp_path / "cases.jsonl", 4)
    p = cli(tmp_path, server, "--cases", str(cases), key=api_key)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    df = pl.read_parquet(tmp_path / "out" / "judge.parquet")
    assert df.height == 20 and df["status"].to_list() == ["ok"] * 20
    lang = dict(zip(df["id"], df["language"]))
    assert lang["q0"] == "en" and lang["q1"] == "zh"  # generated text follows the question's language
    summary = json.loads((tmp_path / "out" / "judge_summary.json").read_text())
    assert summary["system_cost_usd"] == pytest.approx(0.008) and summary["judge_cost_usd"] > 0
    assert "correctness" in out and api_key not in out + err


def test_cli_dry_run(tmp_path, server, api_key):
    cases = write_cases(tmp_path / "cases.jsonl", 3)
    p = cli(tmp_path, server, "--cases", str(cases), "--dry-run", key=api_key)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert "dry run: 3 cases x 5 metrics: 21 calls" in out and "$" in out
    assert server.requests == 0 and not (tmp_path / "out").exists()


def test_cli_user_errors_exit_2(tmp_path, server):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "q"}\n{"id": "b"\n')
    p = cli(tmp_path, server, "--cases", str(bad))
    out, err = p.communicate(timeout=60)
    assert p.returncode == 2 and f"{bad}:2: invalid JSON" in err and "Traceback" not in err
    good = write_cases(tmp_path / "good.jsonl", 1)
    p = cli(tmp_path, server, "--cases", str(good), "--metrics", "correctness,bogus")
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2 and "unknown metric 'bogus'" in err and "Traceback" not in err
    assert server.requests == 0


def test_sigkill_mid_run_then_rerun_repeats_no_finished_request(tmp_path, server, api_key):
    cases = write_cases(tmp_path / "cases.jsonl", 8)
    served = 15
    server.latency = 0.01
    # the first `served` requests are answered; every later one hangs, so the run stalls mid-way
    server.rules = [(lambda info: server.requests > served, "hang")]
    p = cli(tmp_path, server, "--cases", str(cases), "--concurrency", "4", key=api_key)
    deadline = time.monotonic() + 30
    while server.requests <= served and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.requests > served, p.stderr.read() if p.poll() is not None else "no progress"
    time.sleep(0.5)  # the finished responses are processed (and committed) within microseconds
    os.kill(p.pid, signal.SIGKILL)
    out1, err1 = p.communicate(timeout=30)
    assert p.returncode == -signal.SIGKILL
    finished = {r["key"] for r in server.log if r.get("action") == "ok" and "t_out" in r}
    assert len(finished) == served
    assert not (tmp_path / "out" / "judge.parquet").exists()

    server.rules = []
    server.release()
    first_run = len(server.log)
    p = cli(tmp_path, server, "--cases", str(cases), "--concurrency", "4", key=api_key)
    out2, err2 = p.communicate(timeout=60)
    assert p.returncode == 0, err2
    rerun = server.log[first_run:]
    repeated = [r for r in rerun if r["key"] in finished]
    assert repeated == []
    assert len(rerun) > 0
    df = pl.read_parquet(tmp_path / "out" / "judge.parquet")
    assert df.height == 40 and set(df["status"]) == {"ok"}
    assert df["cached_calls"].sum() >= served - 4  # repair-free calls map one to one
    # the key is in no file and no output
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert api_key.encode() not in path.read_bytes(), path
    for text in (out1, err1, out2, err2):
        assert api_key not in text


def test_cli_golden_and_run(tmp_path, server, api_key):
    try:
        import ragmeter.dataset as ds  # noqa: F401
        from ragmeter.dataset import load_golden, load_run  # noqa: F401
    except ImportError:
        pytest.skip("ragmeter.dataset (load_golden/load_run) is not in this tree yet; --cases covers the CLI")
    golden = tmp_path / "golden.jsonl"
    run = tmp_path / "run.jsonl"
    golden.write_text("\n".join(json.dumps(
        {"id": f"g{i}", "question": f"What colour is product {i}?", "expected_files": ["a.md"],
         "expected_evidence": ["blue"], "reference_answer": f"Product {i} is blue", "category": "fact"})
        for i in range(3)) + "\n")
    run.write_text("\n".join(json.dumps(
        {"id": f"g{i}", "retrieved": [{"file": "a.md", "chunk_id": "1", "text": f"useful: product {i} is blue",
                                       "score": 1.0}], "answer": f"Product {i} is blue.", "cost": 0.001})
        for i in range(2)) + "\n")
    p = cli(tmp_path, server, "--golden", str(golden), "--run", str(run), "--metrics", "correctness,context_recall",
            key=api_key)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    df = pl.read_parquet(tmp_path / "out" / "judge.parquet").sort("id", "metric")
    assert df.height == 6
    assert df.filter(pl.col("id") == "g2")["status"].to_list() == ["skipped", "skipped"]  # not in the run
    assert df.filter(pl.col("id") != "g2")["status"].to_list() == ["ok"] * 4


def test_cases_file_skips_comments_and_refuses_deep_nesting_with_its_line(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "cases.jsonl"
    path.write_text('# written by hand\n{"id": "a", "question": "q"}\n' + "[" * 1000 + "]" * 1000 + "\n",
                    encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "judge", "--cases", str(path),
                           "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--no-cache"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == f"ragmeter: error: {path}:3: JSON nested deeper than 64 levels"


def test_cases_not_in_utf8_name_their_line_counting_comments_and_the_encoding(tmp_path, server):
    """Comment and blank lines count: the line named is the file's own (it was the number of records + 1)."""
    bad = tmp_path / "gbk.jsonl"
    text = ('# cases exported by hand\n\n{"id": "a", "question": "q", "answer": "a"}\n'
            '{"id": "b", "question": "第二号产品是什么颜色？", "answer": "蓝色"}\n')
    bad.write_bytes(text.encode("gb18030"))
    p = cli(tmp_path, server, "--cases", str(bad))
    out, err = p.communicate(timeout=60)
    assert p.returncode == 2 and "Traceback" not in err, err
    assert f"{bad}:4: not valid UTF-8" in err and "iconv -f gb18030 -t utf-8" in err, err
    assert server.requests == 0
    utf16 = tmp_path / "utf16.jsonl"  # PowerShell's default: read, not refused
    utf16.write_bytes(text.replace("# cases exported by hand\n", "").encode("utf-16"))
    p = cli(tmp_path, server, "--cases", str(utf16), "--dry-run")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err


def test_cli_golden_and_run_with_failed_cases_exits_3_and_names_them(tmp_path, server, api_key):
    """Cases that failed when the run was collected have no answer: their rows are skipped (missing input),
    so the judge itself finished, but it did not measure the system on every question: 3, as eval says."""
    example = Path(__file__).resolve().parents[2] / "python" / "ragmeter" / "_example"
    records = [json.loads(line) for line in (example / "run.jsonl").read_text(encoding="utf-8").splitlines()
               if line.startswith("{")][:4]
    for rec in records[:2]:
        rec.update(retrieved=[], answer=None, error="the system failed", error_kind="timeout")
    run = tmp_path / "run.jsonl"
    run.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    golden = tmp_path / "golden.jsonl"
    ids = {r["id"] for r in records}
    golden.write_text("".join(line + "\n" for line in (example / "golden.jsonl").read_text(encoding="utf-8")
                              .splitlines() if line.startswith("{") and json.loads(line)["id"] in ids),
                      encoding="utf-8")
    p = cli(tmp_path, server, "--golden", str(golden), "--run", str(run), "--metrics", "correctness", key=api_key)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 3, err
    assert "2 case(s) failed when the run was collected" in " ".join(err.split())
    assert records[0]["id"] in err and (tmp_path / "out" / "judge.parquet").exists()
    judged = pl.read_parquet(tmp_path / "out" / "judge.parquet")
    assert judged.filter(pl.col("status") == "ok").height == 2

    records = records[2:]  # the same without the failed cases: 0
    run.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    golden.write_text("".join(line + "\n" for line in golden.read_text(encoding="utf-8").splitlines()
                              if json.loads(line)["id"] in {r["id"] for r in records}), encoding="utf-8")
    p = cli(tmp_path, server, "--golden", str(golden), "--run", str(run), "--metrics", "correctness", key=api_key)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert "failed when the run was collected" not in err


def test_cli_dry_run_lines_fit_80_columns(tmp_path, server, api_key):
    """The estimate's tokens/cost line was 95 columns."""
    cases = write_cases(tmp_path / "cases.jsonl", 3)
    p = cli(tmp_path, server, "--cases", str(cases), "--dry-run", "--price", "0.15,0.6", key=api_key)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert "at most $" in out  # the long line is there
    too_wide = [line for line in out.splitlines() if len(line) > 80 or line != line.rstrip()]
    assert not too_wide, too_wide
