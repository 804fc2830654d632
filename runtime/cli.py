"""Command-line parsing shared by the argparse commands (the launcher, the benchmarks), and
the checks of output paths every command runs before doing work."""

from __future__ import annotations

import argparse
import os
import tempfile

from runtime.one_line import single_line


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
        """argparse's, with a message kept to one line (``runtime.one_line.single_line``)."""
        if message:
            message = single_line(message.rstrip("\n")) + "\n"
        super().exit(status, message)


def file_in_the_way(path: str) -> str | None:
    """The nearest of ``path`` and its parents that exists and is not a directory."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    return None if os.path.isdir(path) else path


def output_dir_problem(path: str) -> str | None:
    """What keeps ``path`` from being an output directory (it is one, or can be created
    and written), or None. Creates nothing."""
    blocker = file_in_the_way(path)
    if blocker is not None:
        return (f"{path} is a file" if blocker == os.path.abspath(path)
                else f"{path} cannot be a directory: {blocker} is a file")
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    return None if _can_create_in(existing) else f"{existing} is not writable"


def _can_create_in(directory: str) -> bool:
    """Whether a file can be created in ``directory`` (tried: permissions alone say yes to
    root on read-only or virtual file systems)."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            return True
    except OSError:
        return False


def output_file_problem(path: str, extensions: tuple[str, ...] = ()) -> str | None:
    """What keeps ``path`` from being written as a new file (one of ``extensions``, when
    given, in a directory that exists and is writable; not a directory itself), or None."""
    ext = os.path.splitext(path)[1].lower()
    if extensions and ext not in extensions:
        return f"extension must be one of {', '.join(extensions)}, got {path!r}"
    if os.path.isdir(path):
        return f"{path} is a directory"
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return f"no such directory: {parent}"
    if not _can_create_in(parent) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        return f"{path} cannot be written (permission denied)"
    return None
