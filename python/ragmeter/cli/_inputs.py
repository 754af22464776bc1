"""Checks the retrieval commands make on their inputs before any work."""
from __future__ import annotations

from typing import Any, Dict, Optional


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


def failed_in_run_exit(*run_errors: Optional[Dict[str, int]]) -> int:
    """3 when any of the ``run_errors`` counts (the retrieval summary's, one per collected repeat) holds a case
    that failed when the run was collected (``collect``'s ``error``), else 0.

    Those cases were scored from what the failure left (an empty retrieval, no answer): the command measured
    the run, but not the system on every question, as ``collect`` and ``eval --target`` say with the same 3."""
    return 3 if any(sum(counts.values()) for counts in run_errors if counts) else 0
