"""Files a reader (or a resume after a kill) sees whole or not at all. Imports nothing."""

from __future__ import annotations

import os


def write_atomically(path: str, text: str) -> None:
    """Writes ``text`` to ``path`` through a temporary file and a rename: a reader (or a
    resume after a kill) sees the old file or the new one, never half of one."""
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:  # e.g. a full disk: no half-written temporary file stays
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
