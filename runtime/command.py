"""The one command-line driver of the entry points: absl flag parsing and exit codes.

``python -m anakin.main`` / ``sebulba.main`` (``runtime.entry.run_main``) and ``python -m
anakin.evaluate`` / ``sebulba.evaluate`` (``runtime.evaluation.run``) parse their flags with
``parse_flags`` and run their work through ``run_command``, the one place that turns an
outcome into an exit code:

- 0: done;
- 1: a runtime failure: its traceback (or, for the error kinds a command names, one line);
- 2: a bad config or argument: one line ``"<prefix>: <what is wrong>"``;
- 130 / 143: after SIGINT / SIGTERM (a trainer checkpoints first, then exits with them).

This module imports no library but absl, so a bad command line fails before JAX loads.
"""

from __future__ import annotations

import dataclasses
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
EXIT_SIGINT = 130
EXIT_SIGTERM = 143


class UsageError(Exception):
    """A bad command line found after absl parsed it (e.g. unexpected arguments)."""


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


def single_line(text: str) -> str:
    """``text`` with every non-printable character escaped (a newline in a path becomes
    ``\\n``), so that a message stays one line whatever input it quotes."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def run_command(body: Callable[[], None], one_line: Sequence[OneLine] = ()) -> NoReturn:
    """Runs ``body()`` and exits with the code of its outcome (the module's table).

    Args:
      body: the command's work (its output printed by itself).
      one_line: the error kinds reported as one line, first match wins; any other error is
        a runtime failure (traceback, exit 1). A ``SystemExit`` (e.g. 130/143 after a
        signal) passes through; ``KeyboardInterrupt`` exits 130.
    """
    try:
        body()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.exit(EXIT_SIGINT)
    except BaseException as e:  # noqa: BLE001 - every other outcome is mapped here
        for rule in one_line:
            if rule.matches(e):
                print(single_line(f"{rule.prefix}: {e}"), file=sys.stderr)
                sys.exit(rule.code)
        traceback.print_exc()
        sys.exit(EXIT_FAILURE)
    sys.exit(EXIT_OK)


def parse_flags(argv: Sequence[str], problem: Callable[[Exception, Sequence[str]], str | None],
                check: Callable[[list[str]], None] | None = None) -> list[str]:
    """The absl flags parser of every entry point (``app.run(..., flags_parser=...)``).

    Parses ``argv`` into ``absl.flags.FLAGS``, then runs ``check(rest)`` (the command's own
    checks of what was parsed). An error of either is the one line ``problem(error, argv)``
    on stderr and exit code 2 (re-raised where ``problem`` gives None). Library logging stays
    at WARNING unless ``--verbosity`` is given.

    Returns:
      The arguments absl left (the program name first).
    """
    from absl import flags, logging

    try:
        rest = flags.FLAGS(argv)
        if check is not None:
            check(rest)
    except Exception as e:  # noqa: BLE001 - ``problem`` says which are bad input
        line = problem(e, argv)
        if line is None:
            raise
        print(line, file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    if not flags.FLAGS["verbosity"].present:  # library INFO chatter only when asked for
        logging.set_verbosity(logging.WARNING)
    return rest
