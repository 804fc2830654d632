"""The absl flags parser of every entry point: a bad command line is one line and exit 2.

``parse_flags`` serves the training commands (``runtime.commands.train_flags``) and the evaluate
commands (``runtime.commands.evaluation``). Imports no library but absl, so a bad command line fails
before JAX loads.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from runtime.process.exits import EXIT_BAD_INPUT, EXIT_OK

HELP_FLAGS = ("--help", "-help", "-h", "-?", "--helpfull", "--helpshort", "--helpxml")


class UsageError(Exception):
    """A bad command line found after absl parsed it (e.g. unexpected arguments)."""


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
    except SystemExit as e:  # absl ends --help / --helpfull with exit code 1: asked for, 0
        if e.code == 1 and any(a.split("=")[0] in HELP_FLAGS for a in argv[1:]):
            sys.exit(EXIT_OK)
        raise
    except Exception as e:  # noqa: BLE001 - ``problem`` says which are bad input
        line = problem(e, argv)
        if line is None:
            raise
        print(line, file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    if not flags.FLAGS["verbosity"].present:  # library INFO chatter only when asked for
        logging.set_verbosity(logging.WARNING)
    return rest
