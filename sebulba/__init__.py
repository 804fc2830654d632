"""Sebulba: envs stepped on host threads, actor devices acting, learner devices training
data-parallel (docs/architectures.md). From Python: ``run``; from the command line:
``python -m sebulba.main``."""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["run"]


def trainer():
    """Sebulba's checks and trainer, ``(MODE, train)``, imported when called (the command
    line's and ``run``'s)."""
    from sebulba.train import MODE, train

    return MODE, train


def run(config, workdir: str | None = None, *, env: Any = None, network: Any = None,
        algorithm: Any = None, on_row: Callable[[dict], None] | None = None,
        fresh: bool = False) -> list[dict]:
    """Trains a Sebulba run from Python, as ``python -m sebulba.main`` does; the arguments
    are ``anakin.run``'s (a jittable env of your own runs on a host CPU device).

    Returns:
      Every logged row of this call.

    Raises:
      rlcore.errors.ConfigError: a refused config, in one line naming the field.
    """
    from runtime.commands.train import train_in_python

    return train_in_python(config, workdir, trainer, env=env, network=network,
                           algorithm=algorithm, fresh=fresh, on_row=on_row)
