"""How every command ends: its exit codes, and errors as one line.

``python -m anakin.main`` / ``sebulba.main`` (``runtime.commands.train.run_main``) and
``python -m anakin.evaluate`` / ``sebulba.evaluate`` (``runtime.commands.evaluation.run``) run their
work through ``run_command``, the one place that turns an outcome into an exit code:

- 0: done;
- 1: a runtime failure: one summary line, the traceback in a file (``runtime.process.failure``;
  without a details file, the traceback; for the error kinds a command names, one line);
- 2: a bad config or argument: one line ``"<prefix>: <what is wrong>"``;
- 130 / 143: after SIGINT / SIGTERM (a trainer checkpoints first, then exits with them).

This module imports no library but absl (and ``runtime.process.failure``, the standard library's),
so a bad command line fails before JAX loads. See docs/design.md, "Exit codes".
"""

from __future__ import annotations

import dataclasses
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

from runtime.process import failure

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
EXIT_SIGINT = 130
EXIT_SIGTERM = 143


class ExitNow(SystemExit):  # noqa: N818 - an exit, as SystemExit
    """An exit (130/143 after a signal) that leaves device work in flight, which an
    interpreter exit would wait for: ``run_command`` ends the process at once
    (``os._exit``) once the command's own files are closed (the trainer closes them in
    ``finally``). Anywhere else it is a plain ``SystemExit``."""


@dataclasses.dataclass(frozen=True)
class OneLine:
    """Errors printed as one line ``"<prefix>: <error>"`` with exit code ``code``.

    Attributes:
      kinds: exception classes, or dotted names ``"package.module.Class"`` of classes whose
        module is imported only late (an error of a module not yet imported cannot have
        been raised, so the name is looked up only among the loaded modules).
      prefix: the line's first word(s), e.g. ``"config error"`` or ``"error"``.
      code: the exit code.
    """

    kinds: tuple
    prefix: str
    code: int = EXIT_BAD_INPUT

    def matches(self, error: BaseException) -> bool:
        for kind in self.kinds:
            if isinstance(kind, str):
                module, _, name = kind.rpartition(".")
                kind = getattr(sys.modules.get(module), name, None)
                if kind is None:
                    continue
            if isinstance(error, kind):
                return True
        return False


def run_command(body: Callable[[], None], one_line: Sequence[OneLine] = (),
                details: failure.Details | None = None) -> NoReturn:
    """Runs ``body()`` and exits with the code of its outcome (the module's table).

    Args:
      body: the command's work (its output printed by itself).
      one_line: the error kinds reported as one line, first match wins; any other error is
        a runtime failure (exit 1). A ``SystemExit`` (e.g. 130/143 after a signal) passes
        through (``ExitNow``: the process ends at once); ``KeyboardInterrupt`` exits 130.
      details: the file for library output and tracebacks (``runtime.process.failure``): from now
        on the libraries write there, and a runtime failure is one summary line naming it,
        after which the console stays silent. None: a runtime failure prints its traceback.
    """
    if details is not None:
        failure.capture(details, console_logging=_verbosity_given())
    try:
        body()
    except ExitNow as e:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(e.code)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.exit(EXIT_SIGINT)
    except BaseException as e:  # noqa: BLE001 - every other outcome is mapped here
        for rule in one_line:
            if rule.matches(e):
                print(failure.one_line_report(rule.prefix, e, details), file=sys.stderr,
                      flush=True)
                _exit_after_line(details, rule.code)
        if details is None:
            traceback.print_exc()
        else:
            print(failure.report(e, details), file=sys.stderr, flush=True)
        _exit_after_line(details, EXIT_FAILURE)
    if details is not None and details.used is not None:
        print(f"library messages: {details.lines} lines in {details.used}", file=sys.stderr)
    sys.exit(EXIT_OK)


def _exit_after_line(details: failure.Details | None, code: int) -> NoReturn:
    """Exits with ``code`` after a failure's line. With a details file nothing reaches the
    console any more (``failure.quiet_console``) and the process ends at once: a library
    thread left waiting by the failure (orbax's commit threads after a failed save wait
    for signals that never come) would otherwise block the interpreter's exit forever.
    The command's own files are closed by then (the trainers close them in ``finally``)."""
    if details is None:
        sys.exit(code)
    failure.quiet_console(details)
    os._exit(code)


def _verbosity_given() -> bool:
    """Whether ``--verbosity`` was given (library logging then stays on the console too)."""
    from absl import flags

    return flags.FLAGS.is_parsed() and flags.FLAGS["verbosity"].present
