"""Session 28: `ragmeter audit` on inputs a real user meets."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "python" / "ragmeter" / "_example" / "golden.jsonl"


def test_a_hard_category_the_set_does_not_have_is_named_not_dropped() -> None:
    # before: `--hard fact,multihp` (a typo) counted fact alone and said "(fact; --hard)", with no word that multihp
    # matched nothing; a list matching no category at all is refused, one matching some lost the rest silently
    proc = subprocess.run([sys.executable, "-m", "ragmeter", "audit", "--golden", str(EXAMPLE), "--hard",
                           "fact,multihp", "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    hard = json.loads(proc.stdout)["hard"]
    assert hard["categories"] == ["fact"] and hard["unmatched"] == ["multihp"]
    text = subprocess.run([sys.executable, "-m", "ragmeter", "audit", "--golden", str(EXAMPLE), "--hard",
                           "fact,multihp"], capture_output=True, text=True, timeout=120).stdout
    line = " ".join(text.split()).split("hard cases:")[1].split("minimum")[0]
    assert "'multihp'" in line and "no category" in line
    every = subprocess.run([sys.executable, "-m", "ragmeter", "audit", "--golden", str(EXAMPLE), "--hard",
                            "fact,multihop", "--json"], capture_output=True, text=True, timeout=120).stdout
    assert "unmatched" not in json.loads(every)["hard"]  # nothing to say when every name is a category
