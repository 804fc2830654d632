"""The one exception type a bad config raises (no imports of ours, so any layer can raise it)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A config field has a bad value. The message starts with the field name:
    ``ConfigError("num_envs: 25 envs do not split over 4 learner devices")``.

    The message is one line whatever it quotes (a repr that spans several lines reads as
    one, its whitespace collapsed). ``details``: the whole traceback of the user's code that
    the refusal is about (an env, network or algorithm of theirs that raised), which a
    command writes to its details file and names in the line; None for the rest
    (docs/design.md, "Exit codes").
    """

    details: str | None = None

    def __init__(self, message: str = "", details: str | None = None):
        super().__init__(" ".join(str(message).split()))
        self.details = details
