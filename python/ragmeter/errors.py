"""Exceptions raised for user errors.

The classes are created in the Rust extension (from one error enum) so that an
error raised while parsing a TREC file in Rust and one raised while reading a
JSONL golden set in Python are the same type. Every user error carries a message
that names the file and line (or field); the command line prints it without a
traceback and exits with status 2.
"""
from __future__ import annotations

from ragmeter._core import InputError, MeasureError, RagmeterError

__all__ = ["RagmeterError", "InputError", "MeasureError", "input_error", "NOTES_LOGGER"]

#: the logger a library call says how an input was read on (INFO records, never printed by the library); the
#: command line prints them as ``ragmeter: note: ...`` (``ragmeter.cli``). Here, in the one light module both
#: import, so that the two cannot name different loggers.
NOTES_LOGGER = "ragmeter.notes"


def input_error(path: object, line: int | None, message: str) -> InputError:
    """Build an :class:`InputError` whose text is ``path:line: message``."""
    where = f"{path}:{line}" if line is not None else f"{path}"
    return InputError(f"{where}: {message}")
