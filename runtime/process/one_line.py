"""Keeping a console message to one line, whatever input it quotes (the one-line errors of
every command: ``runtime.process.exits``, ``runtime.process.failure``,
``runtime.process.arguments``).

Imports nothing, so every command-line module can use it before any library loads.
"""

from __future__ import annotations


def single_line(text: str) -> str:
    """``text`` with every non-printable character escaped (a newline in a path becomes
    ``\\n``), so that a message stays one line whatever input it quotes."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)
