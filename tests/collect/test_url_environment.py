"""``${VAR}`` in a target's url is read from the environment, as in its headers: it was sent as the literal
text '${VAR}'. A value read from the environment is a credential as far as masking goes."""
from __future__ import annotations

import json
import os

from collect_helpers import GOLDEN, cli, write_target
from ragserver import RagServer

TENANT = "tenant-Secret-4b7d2e"


def test_url_variables_are_read_from_the_environment_and_masked_when_echoed(tmp_path):
    with RagServer(echo_url=True) as s:
        port = s.url.split(":")[2].split("/")[0]
        template = "http://127.0.0.1:${RAG_PORT}/ask?tenant=${RAG_TENANT}"
        write_target(tmp_path / "t.toml", template)
        env = {**os.environ, "RAG_PORT": port, "RAG_TENANT": TENANT}
        proc = cli("collect", "--golden", str(GOLDEN), "--target", "t.toml", "--out", "run.jsonl", "--cache",
                   "c.sqlite", cwd=tmp_path, env=env)
        sent = sum(s.requests.values())
    assert proc.returncode == 0, proc.stderr
    assert sent > 0  # the url was a real address once its variables were read
    records = [json.loads(line) for line in (tmp_path / "run.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all("tenant=***" in r["answer"] for r in records if r.get("answer")), records[0]["answer"]
    with open(tmp_path / "c.sqlite", "rb") as fh:
        cache = fh.read()
    for text in (proc.stdout, proc.stderr, (tmp_path / "run.jsonl").read_text(encoding="utf-8")):
        assert TENANT not in text
    assert TENANT.encode() not in cache


def test_an_unset_url_variable_is_named_before_any_call(tmp_path):
    with RagServer() as s:
        write_target(tmp_path / "t.toml", s.url.replace("/ask", "/${RAG_ROUTE}"))
        env = {k: v for k, v in os.environ.items() if k != "RAG_ROUTE"}
        proc = cli("collect", "--golden", str(GOLDEN), "--target", "t.toml", "--out", "run.jsonl", "--no-cache",
                   cwd=tmp_path, env=env)
        sent = sum(s.requests.values())
    assert proc.returncode == 2, proc.stderr
    assert "t.toml: url: environment variable RAG_ROUTE is not set" in proc.stderr
    assert sent == 0 and not (tmp_path / "run.jsonl").exists()


def test_query_parameters_that_change_the_system_are_part_of_the_cache_key(tmp_path):
    """`?top_k=5` and `?top_k=10` are two systems: with one cache, the second run replayed the first's replies.
    A credential-named parameter's value stays out of the key (a rotated key still resumes)."""
    from ragmeter.collect import load_target

    def target(query: str):
        return load_target(write_target(tmp_path / "t.toml", f"http://127.0.0.1:9/ask?{query}")).identity

    assert target("top_k=5") != target("top_k=10")
    assert target("top_k=5&api_key=AAA") == target("top_k=5&api_key=BBB")
    assert "AAA" not in json.dumps(target("top_k=5&api_key=AAA"))
    plain = load_target(write_target(tmp_path / "t.toml", "http://127.0.0.1:9/ask")).identity
    assert "query" not in plain  # a url without a query keeps the key it had: existing caches serve it
