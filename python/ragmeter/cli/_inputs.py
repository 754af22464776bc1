"""Checks the retrieval commands make on their inputs before any work."""
from __future__ import annotations

from typing import Any


def refuse_unlabelled_golden(golden: Any) -> None:
    """Raise :class:`InputError` when no case of the golden set has expected files or evidence phrases.

    ``score`` and ``sweep`` measure retrieval against those labels alone: without any, every metric would be
    "not scored" on every case and the command would still exit 0, as if a run had been measured."""
    from ragmeter.dataset import load_golden
    from ragmeter.errors import InputError

    frame = load_golden(golden)
    if frame.height and not frame.get_column("labeled").any():
        raise InputError(f"{golden}: no case has expected files or evidence phrases ({frame.height} cases), so "
                         f"there is nothing to score retrieval against; label the cases (`ragmeter audit --golden "
                         f"{golden}` lists them), or judge the answers alone with `ragmeter eval`")
