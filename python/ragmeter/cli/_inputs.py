"""Checks the commands make on their inputs and output paths before any work."""
from __future__ import annotations

import argparse
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple


def share(text: str) -> float:
    """A share given as 0.3 or 30% (argparse type); the caller checks its range."""
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a share: {text!r} (e.g. 0.3 or 30%)") from None


def fraction(text: str) -> float:
    """A share between 0 and 1, given as 0.3 or 30% (argparse type)."""
    value = share(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"not between 0 and 1: {text!r}")
    return value


def refuse_unlabelled_golden(golden: Any, judge_remedy: str = "judge the answers alone with `ragmeter eval`") -> None:
    """Raise :class:`InputError` when no case of the golden set has expected files or evidence phrases.

    ``score`` and ``sweep`` measure retrieval against those labels alone (so does ``eval`` without a judge):
    without any, every metric would be "not scored" on every case and the command would still exit 0, as if a
    run had been measured. ``judge_remedy``: how to measure the answers instead."""
    from ragmeter.dataset import load_golden
    from ragmeter.errors import InputError

    frame = load_golden(golden)
    if frame.height and not frame.get_column("labeled").any():
        raise InputError(f"{golden}: no case has expected files or evidence phrases ({frame.height} cases), so "
                         f"there is nothing to score retrieval against; label the cases (`ragmeter audit --golden "
                         f"{golden}` lists them), or {judge_remedy}")


def failed_in_run_exit(*run_errors: Optional[Dict[str, int]]) -> int:
    """3 when any of the ``run_errors`` counts (the retrieval summary's, one per collected repeat) holds a case
    that failed when the run was collected (``collect``'s ``error``), else 0.

    Those cases were scored from what the failure left (an empty retrieval, no answer): the command measured
    the run, but not the system on every question, as ``collect`` and ``eval --target`` say with the same 3."""
    return 3 if any(sum(counts.values()) for counts in run_errors if counts) else 0


def check_k_flag(k: Any) -> int:
    """``--k`` as the commands take it: an integer from 1 to ``MAX_K``, else an :class:`InputError`
    naming the flag (the engine's own messages named a metric ``hit@...``, or overflowed)."""
    from ragmeter._args import check_k

    return check_k(k, "--k")


def failed_in_run_warned(warnings: List[Dict[str, Any]]) -> int:
    """:func:`failed_in_run_exit` for a command that has the warnings (``failed_in_run``) rather than the counts."""
    return failed_in_run_exit({str(w["code"]): int(w["count"]) for w in warnings if w.get("code") == "failed_in_run"})


def check_out(path: Any, *, folder: bool = True, flag: str = "--out",
              inputs: Sequence[Tuple[str, Any]] = (), files: Sequence[str] = ()) -> None:
    """Refuse, before any work, an output path that cannot be written because a part of it that must be a
    folder is a file: ``--out afile/x.md: afile is a file, not a folder`` (an :class:`InputError`, exit status 2,
    nothing written), or a file to write is a folder, or that is one of the command's ``inputs`` ((what, path)
    pairs): writing would replace it.
    ``folder``: the path names a folder (``--out DIR``) rather than a file; None passes. ``files``: the files
    the command writes in that folder, refused when one is a folder there (found when the results are moved
    into place: after the judge's paid calls)."""
    if path is None:
        return
    from ragmeter._io import input_overwritten, output_path_problem
    from ragmeter.errors import InputError

    if not str(path).strip():  # `--out "$OUT"` with OUT unset: not "no --out", not the current folder
        raise InputError(f"{flag}: empty (an unset variable?); name the {'folder' if folder else 'file'} to write")

    problem = output_path_problem(path, folder=folder)
    if problem is not None:
        raise InputError(f"{flag} {path}: {problem}")
    what = input_overwritten(path, inputs)
    if what is not None:
        raise InputError(f"{flag} {path}: is {what}; writing there would replace it, choose another {flag}")
    if not folder and os.path.isdir(path):  # found when writing, after the work and the command's other outputs
        raise InputError(f"{flag} {path}: is a folder, not a file")
    in_the_way = next((name for name in files if os.path.isdir(os.path.join(path, name))), None)
    if in_the_way is not None:
        raise InputError(f"{os.path.join(path, in_the_way)}: is a folder, not a file")  # as when moving into place
