"""Review of ragmeter collect as a demanding user runs it: mistakes in the target file and the flags are one
line naming the file and field (or the flag), exit 2, nothing written and nothing sent."""
from __future__ import annotations

import pytest
from collect_helpers import GOLDEN, cli

from ragmeter.collect import load_target
from ragmeter.errors import InputError


@pytest.mark.parametrize("content, words", [
    ('url = "http://127.0.0.1:1/ask"\nresponse = "data.answer"\n', ["response: must be a table"]),
    ('url = "http://127.0.0.1:1/ask"\nresponse = 5\n', ["response: must be a table"]),
    ('url = "http://"\n', ["url: has no host name"]),
    ('url = "http:///ask"\n', ["url: has no host name"]),
    ('url = "http://127.0.0.1:99999/ask"\n', ["url: not a valid address", "Port out of range"]),
    ('url = "http://[::1/ask"\n', ["url: not a valid address"]),
])
def test_a_target_file_with_a_wrong_type_or_an_unusable_url_is_one_line_exit_2(tmp_path, content, words):
    (tmp_path / "t.toml").write_text(content)
    with pytest.raises(InputError) as err:
        load_target(tmp_path / "t.toml")
    assert str(err.value).startswith(f"{tmp_path / 't.toml'}: ") and all(w in str(err.value) for w in words)
    proc = cli("collect", "--golden", str(GOLDEN), "--target", "t.toml", "--out", "r.jsonl", "--no-cache",
               cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr  # not a traceback (exit 1), not 51 failed records (exit 3)
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("ragmeter: error: t.toml: "), proc.stderr
    assert not (tmp_path / "r.jsonl").exists()
