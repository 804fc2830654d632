"""Command-line parsing shared by the argparse commands (the launcher, the benchmarks):
a ``--help`` description from a docstring, usage errors as one line."""

from __future__ import annotations

import argparse

from runtime.process.one_line import single_line


def doc_summary(doc: str) -> str:
    """The first paragraph of a module docstring as one line: its summary sentence, whole
    however many lines it takes (a command's ``--help`` description)."""
    return " ".join(doc.strip().split("\n\n", 1)[0].split())


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line, ``<error_prefix><message>``, exit code 2
    (argparse's own print a usage block first)."""

    def __init__(self, *args, error_prefix: str = "config error: ", **kwargs):
        super().__init__(*args, **kwargs)
        self.error_prefix = error_prefix

    def error(self, message):
        self.exit(2, f"{self.error_prefix}{message}\n")

    def exit(self, status=0, message=None):
        """argparse's, with a message kept to one line
        (``runtime.process.one_line.single_line``)."""
        if message:
            message = single_line(message.rstrip("\n")) + "\n"
        super().exit(status, message)
