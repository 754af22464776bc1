"""The ``ragmeter`` command line.

Each sub-command lives in its own module under ``ragmeter.cli`` and exposes
``HELP`` (one line), ``configure(parser)`` and ``run(args) -> int``. Modules are
imported only to configure their parser; anything heavy is imported inside
``run`` so start-up stays fast.
"""
from __future__ import annotations

import errno
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # not imported at run time: `ragmeter trec` starts without argparse and typing
    import argparse
    from typing import List, NoReturn, Optional, Sequence

# command name -> module; the order is the order of ``ragmeter --help``.
COMMANDS = {
    "trec": "ragmeter.cli.trec",
    "score": "ragmeter.cli.score",
    "sweep": "ragmeter.cli.sweep",
    "demo": "ragmeter.cli.demo",
    "collect": "ragmeter.cli.collect",
    "eval": "ragmeter.cli.eval",
    "judge": "ragmeter.cli.judge",
    "report": "ragmeter.cli.report",
    "compare": "ragmeter.cli.compare",
    "audit": "ragmeter.cli.audit",
    "cache": "ragmeter.cli.cache",
    "review": "ragmeter.cli.review",
}


#: help text is laid out for terminals this wide (a hand-laid epilog keeps to it too)
HELP_WIDTH = 80


def build_parser() -> argparse.ArgumentParser:
    import argparse
    import textwrap
    from importlib import import_module

    from ragmeter import __version__

    class Parser(argparse.ArgumentParser):
        """A usage error on one line, pointing at ``--help``: argparse printed the command's whole usage block
        first (25 lines for ``judge``), the error under it."""

        def error(self, message: str) -> NoReturn:
            self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the options)\n")

    parser = Parser(
        prog="ragmeter",
        description="Evaluate retrieval-augmented generation: rank metrics, evidence-level "
        "retrieval scoring, LLM judges, reports and regression gates.",
    )
    parser.add_argument("--version", action="version", version=f"ragmeter {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = import_module(module_name)
        # filled here: a raw formatter (kept for a hand-laid epilog) would print the description on one line
        cmd = sub.add_parser(name, help=module.HELP, description=textwrap.fill(module.HELP, HELP_WIDTH),
                             **getattr(module, "PARSER_OPTIONS", {}))
        module.configure(cmd)
        cmd.set_defaults(_module=module)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `trec` mimics trec_eval's own flag syntax, so it parses its arguments itself
    # and skips building every other command's parser.
    if argv and argv[0] == "trec":
        from ragmeter.cli import trec

        # trec holds nothing to save, so SIGTERM keeps its default (and `signal`, which imports enum, stays out
        # of its start-up).
        return _guarded(lambda: trec.main(argv[1:]), catch_sigterm=False)
    parser = build_parser()
    args = parser.parse_args(_attach_negative_lists(argv))
    if args.command is None:
        parser.print_help()
        return 2
    _numpy_without_blas_threads()
    with _NotesOnStderr():
        return _guarded(lambda: _refuse_empty_paths(args) or args._module.run(args))


#: the arguments that name an input file or folder (their dest -> how the command line names them); an empty
#: one is an unset variable (`--golden "$GOLDEN"`), which a path would read as the current folder: the whole
#: folder scanned as `audit --corpus`, the default cache used by `collect --cache`, no price table at all
PATH_ARGUMENTS = {
    "golden": "--golden", "run": "--run", "cases": "--cases", "target": "--target", "corpus": "--corpus",
    "human": "--human", "prices": "--prices", "metric_file": "--metric-file", "metric_module": "--metric-module",
    "cache": "--cache", "results_dir": "DIR", "base": "BASE_DIR", "candidate": "CAND_DIR", "sheet": "SHEET.csv",
}


def _refuse_empty_paths(args: argparse.Namespace) -> None:
    """An :class:`InputError` naming the first path argument given empty (exit status 2, before any work)."""
    from ragmeter.errors import InputError

    names = {**PATH_ARGUMENTS, "results": "--results" if args.command == "audit" else "RESULTS_DIR"}
    for dest, named in names.items():
        value = getattr(args, dest, None)
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and not v.strip() for v in values):
            what = "the file to write" if dest == "cache" else "the file or folder to read"  # a cache is created
            raise InputError(f"{named}: empty (an unset variable?); name {what}")




#: options whose value is a comma-separated list of numbers, any of which may be negative
NUMBER_LIST_OPTIONS = ("--thresholds",)


def _attach_negative_lists(argv: List[str]) -> List[str]:
    """``--thresholds -2,-1,0`` as ``--thresholds=-2,-1,0``: argparse takes a value starting with ``-`` for an
    option unless it is one number, so a list of a cross-encoder's (negative) scores was "expected one
    argument". Only a value that reads as comma-separated numbers is attached; anything else is left to argparse."""
    out: List[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return out + argv[i:]
        if arg in NUMBER_LIST_OPTIONS and i + 1 < len(argv) and argv[i + 1].startswith("-") \
                and _number_list(argv[i + 1]):
            out.append(f"{arg}={argv[i + 1]}")
            i += 2
            continue
        out.append(arg)
        i += 1
    return out


def _number_list(text: str) -> bool:
    items = [item for item in text.split(",") if item.strip()]
    try:
        for item in items:
            float(item)
    except ValueError:
        return False
    return bool(items)


class _NotesOnStderr:
    """For one command: the notes logged on :data:`ragmeter.errors.NOTES_LOGGER` (which a library call leaves to the
    application) as ``ragmeter: note: MESSAGE`` lines on stderr, each note once however many times the command
    reads the same input; the logger is put back as it was afterwards. The notes do not reach other handlers
    (``judge``'s ``logging.basicConfig`` would print them a second time)."""

    def __enter__(self) -> None:
        import logging

        said: set = set()

        class NoteLines(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                message = record.getMessage()
                if message not in said:
                    said.add(message)
                    # print, as every line of the command: a closed pipe is the command's (see _guarded)
                    print(f"ragmeter: note: {message}", file=sys.stderr)

        from ragmeter.errors import NOTES_LOGGER

        self.logger = logging.getLogger(NOTES_LOGGER)
        self.saved = (self.logger.level, self.logger.propagate)
        self.handler = NoteLines()
        self.logger.addHandler(self.handler)
        self.logger.setLevel(logging.INFO)
        self.logger.propagate = False

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.saved[0])
        self.logger.propagate = self.saved[1]


def _numpy_without_blas_threads() -> None:
    """Import numpy with its OpenBLAS on one thread, unless the user chose a number. At import OpenBLAS starts
    a thread per core, and each spins for about 0.1 s of CPU waiting for work, on a core the command's Parquet
    reader was using (``ragmeter score`` starts decoding before its imports; on two cores that took about
    0.13 s off a 2-s ``score`` of 20,000 cases, ``benches/RESULTS_score.md``, 2026-12-03). ragmeter's one use
    of BLAS, the bootstrap's matrix products, runs on threads of its own with one BLAS thread each
    (:mod:`ragmeter.stats`). The variable is put back at once, so that processes started later get the user's
    environment."""
    if "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ:
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]


def console() -> NoReturn:
    """The ``ragmeter`` script (and ``python -m ragmeter``).

    Output that cannot be written (a full disk) is one line on stderr and exit
    status 2, and a reader that went away (``| head``) is not an error, for
    help text too. ``trec`` and ``score`` hold nothing that needs closing once their
    output is flushed (``score``'s files are written, closed and moved into place, its
    reader and writer threads joined, before it returns), so the process then ends
    without the interpreter's clean-up (module teardown, garbage collection, freeing
    the frames): 8-13 ms of a 20,000-query ``trec``, 0.25-0.3 s of ``score`` on 20,000
    and on 100,000 cases. Every other command exits normally.
    """
    argv = sys.argv[1:]
    if argv[:1] in (["score"], ["sweep"]):
        _large_buffers_back_to_the_system()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse, after its help text or a usage error
        code = _exit_status(exc)
    code = _flush_output(code)
    if argv[:1] in (["trec"], ["score"]):
        os._exit(code)
    sys.exit(code)


#: glibc's mallopt parameter for the size from which a block is mapped on its own (and unmapped when freed)
_M_MMAP_THRESHOLD = -3
#: that size, for ``score`` and ``sweep``
MMAP_THRESHOLD = 1 << 20


def _large_buffers_back_to_the_system() -> None:
    """With glibc, blocks of :data:`MMAP_THRESHOLD` bytes or more are mapped on their own, so that freeing one
    gives its memory back. glibc's default threshold grows to the size of the largest mapped block freed (up
    to 32 MB), after which the per-slice and per-table arrays of a run (a few to tens of MB) are carved from the
    heap and their memory stays with the process once freed: ``ragmeter score`` of 100,000 cases of ASCII text
    peaked at 441-447 MiB that way, at 385-394 MiB with a fixed 1 MB (402-413 MiB with 4 MB), in the same time
    within this machine's noise (``benches/RESULTS_score.md``, 2026-12-05).
    Setting the threshold also stops it growing. Left alone when the user set ``MALLOC_MMAP_THRESHOLD_``, and
    where there is no glibc ``mallopt`` (musl's ignores it)."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # pragma: no cover - a libc without mallopt
        return
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def _exit_status(exc: SystemExit) -> int:
    """What ``sys.exit`` would make of ``exc``: a message is printed and gives status 1."""
    if exc.code is None or isinstance(exc.code, int):
        return exc.code or 0
    print(exc.code, file=sys.stderr)
    return 1


def _flush_output(code: int) -> int:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except ValueError:
            continue  # closed
        except OSError as exc:
            if not isinstance(exc, BrokenPipeError):
                code = _os_error(exc)
            # What stays buffered goes nowhere, so the interpreter's own last flush cannot fail again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
    return code


def _guarded(call, catch_sigterm: bool = True) -> int:  # type: ignore[no-untyped-def]
    """Run a command; user errors become one line on stderr and exit status 2.

    SIGTERM takes the path of Ctrl-C (a clean stop: the judge's paid replies are kept and what was done is
    said), then gives status 143 instead of 130.
    """
    from ragmeter._core import RagmeterError
    from ragmeter._front import command_line

    terminated: list = []
    previous = _on_sigterm(terminated) if catch_sigterm else None
    try:
        with command_line():  # messages of the shared code name flags (--timeout), not keywords (timeout=)
            return int(call() or 0)
    except RagmeterError as exc:
        print(f"ragmeter: error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 2)
    except KeyboardInterrupt as exc:
        detail = str(exc)
        word = "terminated" if terminated else "interrupted"
        print(f"ragmeter: {word}" + (f": {detail}" if detail else ""), file=sys.stderr)
        return 143 if terminated else 130
    except BrokenPipeError:
        return 0
    except OSError as exc:
        # A file or folder that could not be read or written (a missing parent, no
        # permission, a full disk): the command's surroundings, not a bug.
        return _os_error(exc)
    finally:
        if previous is not None:
            import signal

            signal.signal(signal.SIGTERM, previous)


def _on_sigterm(flag: list):  # type: ignore[no-untyped-def]
    """Make SIGTERM act as SIGINT does now (asyncio's handler cancels the run; else KeyboardInterrupt) and note it
    in ``flag``; returns the previous handler (None when handlers cannot be set: not the main thread)."""
    import signal

    def handler(signum, frame):  # type: ignore[no-untyped-def]
        flag.append(signum)
        current = signal.getsignal(signal.SIGINT)
        if callable(current):
            current(signal.SIGINT, frame)
        else:  # SIGINT ignored or default (a background job): stop here all the same
            raise KeyboardInterrupt()

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:
        return None


def _os_error(exc: OSError) -> int:
    where = f"{exc.filename}: " if exc.filename else "writing the output: " if exc.errno == errno.ENOSPC else ""
    print(f"ragmeter: error: {where}{exc.strerror or exc}", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
