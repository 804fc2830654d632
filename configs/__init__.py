"""The shipped configs: one Python file each, with ``get_config()``.

``locate`` maps a ``--config`` value to a file, so that the shipped configs can be named
from any directory, also where the package is installed rather than checked out
(docs/design.md, "Installed package").
"""

from __future__ import annotations

import os

HERE = os.path.dirname(os.path.abspath(__file__))


def locate(value: str) -> str:
    """The config file a ``--config`` value names.

    The value itself when it is a file (relative to the current directory, as always);
    otherwise the shipped config of that name: ``cartpole_ppo``, ``cartpole_ppo.py`` and
    ``configs/cartpole_ppo.py`` all name this package's ``cartpole_ppo.py``. An
    ml_collections argument after a colon (``FILE:ARG``) is kept. A value that names
    neither is returned unchanged, for the flag to report the missing file.
    """
    path, colon, arg = value.partition(":")
    if os.path.isfile(path) or os.path.isabs(path):
        return value
    name = path.removeprefix("configs" + os.sep).removeprefix("configs/")
    name = name if name.endswith(".py") else name + ".py"
    shipped = os.path.join(HERE, name)
    if os.sep in name or "/" in name or not os.path.isfile(shipped):
        return value
    return shipped + colon + arg
