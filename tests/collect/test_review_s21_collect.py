"""Review of ragmeter collect (session 21): what a demanding user scripting against a live system runs into."""
from __future__ import annotations

import pytest
from collect_helpers import FAST, GOLDEN, cli, golden_ids, no_traceback, write_target
from ragserver import RagServer, example_records

import ragmeter
from ragmeter.dataset import load_run
from ragmeter.errors import InputError


def _records_with(overrides):
    """The example run with some records replaced (case id -> record, None: the key removed)."""
    records = example_records()
    for case_id, change in overrides.items():
        rec = dict(records[case_id])
        for key, value in change.items():
            if value is None:
                rec.pop(key, None)
            else:
                rec[key] = value
        records[case_id] = rec
    return records


def test_a_reply_that_would_not_load_as_a_run_record_is_a_failed_case_never_written_as_is(tmp_path):
    ids = golden_ids()
    bad = {ids[1]: {"retrieved": None},                                          # no chunk list at all
           ids[2]: {"retrieved": "React 18"},                                    # not a list
           ids[3]: {"retrieved": [{"file": "handbook.md", "chunk_id": "c1"}]},   # a chunk without its text
           ids[4]: {"answer": {"text": "PostgreSQL"}}}                           # an answer that is not text
    with RagServer(records=_records_with(bad)) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        result = ragmeter.collect(GOLDEN, target=target, out=tmp_path / "run.jsonl", policy=FAST)
    records = {r["id"]: r for r in result.records}
    for case_id in bad:  # a failed case, saying why; never a silent empty retrieval scored as a miss
        assert records[case_id]["error_kind"] == "bad_response", records[case_id]
    assert "retrieved" in records[ids[1]]["error"] and "text" in records[ids[3]]["error"]
    assert "answer" in records[ids[4]]["error"]
    assert result.incomplete and result.summary["n_failed"] == len(bad)
    assert load_run(tmp_path / "run.jsonl").height == len(ids)  # the file collect wrote is a run file


def test_a_first_reply_that_would_not_load_is_a_usage_error_naming_the_field(tmp_path):
    ids = golden_ids()
    with RagServer(records=_records_with({ids[0]: {"retrieved": None}})) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        with pytest.raises(InputError, match=r"t\.toml: .*case " + ids[0] + r".*no retrieved"):
            ragmeter.collect(GOLDEN, target=target, policy=FAST)
        assert sum(s.requests.values()) == 1
    with pytest.raises(InputError, match=r"not a run record: retrieved\[0\]: missing 'text'"):
        ragmeter.collect(GOLDEN, target=lambda case: {"answer": "a", "retrieved": [{"file": "a.md"}]})
    with pytest.raises(InputError, match="no 'retrieved'"):
        ragmeter.collect(GOLDEN, target=lambda case: {"answer": "a"})
    # the loader's spellings of a chunk's text are read, as the run format reads them
    result = ragmeter.collect(GOLDEN, target=lambda case: {"answer": "a", "retrieved": [{"page_content": "t"}]})
    assert result.records[0]["retrieved"][0]["text"] == "t" and not result.incomplete


def test_a_token_the_system_echoes_in_an_error_never_reaches_the_run_file_or_a_message(tmp_path):
    from collect_helpers import cli

    ids = golden_ids()
    secret = "tok-ECHOED-5f3a9c"
    echo = {"status": 500, "echo": True}
    with RagServer(script={ids[1]: [echo] * 5}) as s:
        target = write_target(tmp_path / "t.toml", s.url, 'headers = { Authorization = "Bearer ${RAG_TOKEN}" }\n')
        proc = cli("collect", "--golden", str(GOLDEN), "--target", str(target), "--out", "run.jsonl",
                   "--cache", "c.sqlite", "--retry-attempts", "1", cwd=tmp_path, env={"RAG_TOKEN": secret})
        assert proc.returncode == 3, proc.stderr
        assert load_run(tmp_path / "run.jsonl").height == len(ids)
        assert "upstream error" in (tmp_path / "run.jsonl").read_text()  # the error is kept, the token masked
        with RagServer(script={ids[0]: [{"status": 400, "echo": True}]}) as s2:  # the first case: exit 2
            target2 = write_target(tmp_path / "t2.toml", s2.url, 'headers = { Authorization = "Bearer ${RAG_TOKEN}" }\n')
            proc2 = cli("collect", "--golden", str(GOLDEN), "--target", str(target2), "--out", "run2.jsonl",
                        "--no-cache", cwd=tmp_path, env={"RAG_TOKEN": secret})
        assert proc2.returncode == 2 and "upstream error" in proc2.stderr
    for path in tmp_path.iterdir():
        assert secret.encode() not in path.read_bytes(), path
    assert secret not in proc.stdout + proc.stderr + proc2.stdout + proc2.stderr


def test_a_body_in_another_charset_is_read_in_it_and_one_that_is_not_utf8_fails_never_garbled(tmp_path):
    ids = golden_ids()
    records = {i: {"id": i, "retrieved": [{"file": "notes.md", "text": "Déjà vu, café crème"}],
                   "answer": "Le café est à 2 euros.", "retrieval_mode": "hybrid"} for i in ids}
    with RagServer(records=records, script={ids[1]: ["latin1"], ids[2]: ["not_utf8"] * 5}) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        result = ragmeter.collect(GOLDEN, target=target, policy=FAST)
        got = {r["id"]: r for r in result.records}
        assert got[ids[1]]["answer"] == records[ids[1]]["answer"]  # read in its declared charset
        assert got[ids[1]]["retrieved"][0]["text"] == "Déjà vu, café crème"
        assert got[ids[2]]["error_kind"] == "bad_response" and "not utf-8 text" in got[ids[2]]["error"]
        assert not any("\ufffd" in str(r) for r in result.records)
        s.script[ids[0]] = ["not_utf8"]
        with pytest.raises(InputError, match=f"t.toml: the response to case {ids[0]} is not utf-8 text"):
            ragmeter.collect(GOLDEN, target=target, policy=FAST)


def test_an_unwritable_out_is_refused_before_the_first_question_is_sent(tmp_path):
    from collect_helpers import cli

    (tmp_path / "folder").mkdir()
    with RagServer() as s:
        target = write_target(tmp_path / "t.toml", s.url)
        # a missing folder is made (session 29), so the unwritable one is a folder that is a file
        for out, words in ((tmp_path / "t.toml" / "run.jsonl", "t.toml is a file, not a folder"),
                           (tmp_path / "folder", "folder")):
            with pytest.raises(OSError, match=words):
                ragmeter.collect(GOLDEN, target=target, out=out)
            proc = cli("collect", "--golden", str(GOLDEN), "--target", str(target), "--out", str(out), "--no-cache",
                       cwd=tmp_path)
            assert proc.returncode == 2 and str(out) in proc.stderr and proc.stderr.count("\n") == 1
        assert sum(s.requests.values()) == 0  # nothing asked, so nothing paid for and lost
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "t.toml"]
    assert list((tmp_path / "folder").iterdir()) == []


def test_collect_works_inside_a_running_event_loop_as_evaluate_does():
    import asyncio

    async def ask(case):
        await asyncio.sleep(0)
        return {"answer": "a", "retrieved": [{"file": "f.md", "text": case["question"]}]}

    async def notebook_cell():  # Jupyter runs every cell inside its event loop
        return ragmeter.collect(GOLDEN, target=ask, concurrency=4)

    result = asyncio.run(notebook_cell())
    assert [r["id"] for r in result.records] == golden_ids() and not result.incomplete


def test_a_parquet_run_keeps_every_field_of_a_failed_case(tmp_path):
    import polars as pl

    def ask(case):
        if case["id"] == golden_ids()[1]:
            raise RuntimeError("vector store down")
        return {"answer": "a", "retrieved": []}

    result = ragmeter.collect(GOLDEN, target=ask, out=tmp_path / "run.parquet", policy=FAST)
    failed = pl.read_parquet(tmp_path / "run.parquet").filter(pl.col("error").is_not_null()).to_dicts()
    expected = [r for r in result.records if "error" in r]
    assert [{k: row[k] for k in ("id", "error", "error_kind", "attempts")} for row in failed] == \
        [{k: r[k] for k in ("id", "error", "error_kind", "attempts")} for r in expected]
    assert load_run(tmp_path / "run.parquet").height == len(golden_ids())


def test_a_system_failing_every_case_with_5xx_stops_the_collection(tmp_path):
    # the first case answers (the target is right), then the system goes down behind its gateway
    ids = golden_ids()
    with RagServer(script={i: [503] * 10 for i in ids[1:]}, modes=None) as s:
        target = write_target(tmp_path / "t.toml", s.url)
        proc = cli("collect", "--golden", str(GOLDEN), "--target", str(target), "--out", "run.jsonl",
                   "--no-cache", "--concurrency", "2", "--retry-attempts", "3",
                   cwd=tmp_path)
        sent = sum(s.requests.values())
    no_traceback(proc)
    # before: each of the 50 cases spent its 3 attempts (151 requests), exit 3 with 50 failed records
    assert proc.returncode == 2, proc.stderr
    assert sent <= 1 + 3 * 8, sent
    said = " ".join(proc.stderr.split())
    assert "5 cases in a row failed on server errors" in said and "HTTP 503" in said
    assert not (tmp_path / "run.jsonl").exists()
