"""Command-line parsing shared by the argparse commands (the launcher, the benchmarks)."""

from __future__ import annotations

import argparse


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line, ``<error_prefix><message>``, exit code 2
    (argparse's own print a usage block first)."""

    def __init__(self, *args, error_prefix: str = "config error: ", **kwargs):
        super().__init__(*args, **kwargs)
        self.error_prefix = error_prefix

    def error(self, message):
        self.exit(2, f"{self.error_prefix}{message}\n")
