"""Command-line parsing shared by the argparse commands (the launcher, the benchmarks):
a ``--help`` description from a docstring, usage errors as one line, and a command's own
check of its values run as the flags are parsed, before any work (docs/design.md, "Exit
codes")."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from rlcore.errors import ConfigError
from runtime.process.one_line import single_line

# A command's check of its parsed flags: raises ``ConfigError("<dest>: what is wrong")``.
Check = Callable[[argparse.Namespace], None]


def doc_summary(doc: str) -> str:
    """The first paragraph of a module docstring as one line: its summary sentence, whole
    however many lines it takes (a command's ``--help`` description)."""
    return " ".join(doc.strip().split("\n\n", 1)[0].split())


def int_list(text: str) -> list[int]:
    """An argparse type: ``"4,64"`` -> ``[4, 64]`` (empty items skipped); a non-integer item
    is argparse's one-line usage error naming the flag. Ranges are the command's check."""
    try:
        return [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be comma-separated integers, got {text!r}") from None


def str_list(text: str) -> list[str]:
    """An argparse type: ``"a, b,"`` -> ``["a", "b"]`` (items stripped, empty ones skipped)."""
    return [item.strip() for item in text.split(",") if item.strip()]


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line, ``<error_prefix><message>``, exit code 2
    (argparse's own print a usage block first). ``check`` (the command's rules of its
    values: ranges, env ids, files) runs on the parsed flags inside ``parse_args``; its
    ``ConfigError("dest: ...")`` is the same one line, the dest written as its flag
    (``--num_envs: ...``)."""

    def __init__(self, *args, error_prefix: str = "config error: ", check: Check | None = None,
                 **kwargs):
        super().__init__(*args, **kwargs)
        self.error_prefix = error_prefix
        self.check = check

    def parse_args(self, args: Sequence[str] | None = None, namespace=None):
        """argparse's, then ``check`` on the result."""
        parsed = super().parse_args(args, namespace)
        if self.check is not None:
            try:
                self.check(parsed)
            except ConfigError as e:
                self.error(self.as_flag(str(e)))
        return parsed

    def as_flag(self, message: str) -> str:
        """``"num_envs: ..."`` -> ``"--num_envs: ..."`` where ``num_envs`` is the dest of one
        of this parser's options (a field of a config built from the flags is named so);
        any other message as it is."""
        field, colon, rest = message.partition(":")
        for action in self._actions:
            if action.dest == field and action.option_strings:
                return f"{action.option_strings[-1]}{colon}{rest}"
        return message

    def error(self, message):
        self.exit(2, f"{self.error_prefix}{message}\n")

    def exit(self, status=0, message=None):
        """argparse's, with a message kept to one line
        (``runtime.process.one_line.single_line``)."""
        if message:
            message = single_line(message.rstrip("\n")) + "\n"
        super().exit(status, message)
