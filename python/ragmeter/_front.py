"""How a message names an option: as the front the user called ragmeter from spells it.

Code shared by the command line and the Python functions names an option by its Python keyword, and the front
renders it: the Python functions (the default) as the keyword, ``ragmeter.cli`` as the flag, for as long as a
command runs (:func:`command_line`)::

    raise InputError(f"{arg('max_tokens')}: must be at least 1")   # max_tokens: ...  |  --max-tokens: ...
    f"raise {option('timeout')} if it is only slow"                  # timeout=        |  --timeout
    f"{option('repeat', 3)} judges every case 3 times"               # repeat=3        |  --repeat 3

A flag is the keyword with dashes (``max_tokens`` -> ``--max-tokens``) unless ``flag`` says otherwise
(``option("cache", None, flag="--no-cache")``: ``cache=None`` in Python). Kept free of imports: ``ragmeter trec``
passes through here at start-up.
"""
from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

__all__ = ["arg", "option", "no_cache", "no_limit", "spelled", "command_line", "on_command_line"]

#: "cli" while a command of ``ragmeter.cli`` runs, else "python". One value for the process, not a context
#: variable: the command line's worker threads (a collect target, the chunk writer) build messages too.
_front = "python"
_UNSET = object()


def on_command_line() -> bool:
    return _front == "cli"


def _flag(name: str, flag: Optional[str]) -> str:
    return flag if flag is not None else "--" + name.replace("_", "-")


def arg(name: str, *, flag: Optional[str] = None) -> str:
    """The option as a message's subject (``max_tokens: must be ...``): the keyword, or the flag on the command
    line. Also the ``name`` :func:`ragmeter._args.check_arg` takes."""
    return _flag(name, flag) if on_command_line() else name


def option(name: str, value: Any = _UNSET, *, flag: Optional[str] = None) -> str:
    """The option in a sentence, with ``value`` (shown as given: pass ``repr(x)`` for a string) when there is one:
    ``timeout=`` / ``repeat=3`` in Python, ``--timeout`` / ``--repeat 3`` on the command line. A ``flag`` given
    stands for the option and its value together on the command line (``--no-cache`` for ``cache=None``)."""
    if on_command_line():
        if flag is not None or value is _UNSET:
            return _flag(name, flag)
        return f"{_flag(name, flag)} {value}"
    return f"{name}=" + ("" if value is _UNSET else str(value))


class command_line:
    """``with command_line():`` messages name flags (``ragmeter.cli`` runs each command in it); the front before
    is restored after, so a test calling ``cli.main`` leaves the Python functions speaking Python."""

    def __enter__(self) -> None:
        global _front
        self._before = _front
        _front = "cli"

    def __exit__(self, *exc: Any) -> None:
        global _front
        _front = self._before


def no_cache() -> str:
    """No cache at all: ``cache=None`` in Python, ``--no-cache`` on the command line."""
    return option("cache", "None", flag="--no-cache")


def no_limit(name: str) -> str:
    """How to ask for no limit of ``name``: ``rpm=None`` in Python; on the command line, leaving the flag out."""
    return option(name, "None", flag="leave it out")


def spelled(*, cli: str, python: str) -> str:
    """Wording that is not one option (a command, a function): ``cli`` on the command line, else ``python``."""
    return cli if on_command_line() else python
