"""Every ``ragmeter judge`` option is documented in README.md, not only in ``--help``."""
from __future__ import annotations

import argparse
import re
from pathlib import Path

from ragmeter.cli import judge as judge_cli

ROOT = Path(__file__).resolve().parents[2]


def judge_options():
    parser = argparse.ArgumentParser(add_help=False)
    judge_cli.configure(parser)
    return sorted(opt for action in parser._actions for opt in action.option_strings if opt.startswith("--"))


def test_every_judge_option_is_in_the_readme():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    options = judge_options()
    assert len(options) > 30  # the parser was read
    missing = [opt for opt in options if not re.search(re.escape(opt) + r"(?![\w-])", text)]
    assert not missing, f"judge options documented only in --help: {missing}"
