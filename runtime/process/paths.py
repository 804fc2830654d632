"""The checks of output paths every command runs before doing work: what keeps a path from
being written (a file in the way, a missing or read-only directory), in one line. Creates
nothing; imports nothing, so a command checks its paths before any library loads."""

from __future__ import annotations

import os
import tempfile


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
