"""Anakin: jittable envs, acting and learning in one compiled program per device mesh
(docs/architectures.md). From Python: ``run``; from the command line: ``python -m
anakin.main``."""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["run"]


def trainer():
    """Anakin's checks and trainer, ``(MODE, train)``, imported when called (the command
    line's and ``run``'s)."""
    from anakin.train import MODE, train

    return MODE, train


def run(config, workdir: str | None = None, *, env: Any = None, network: Any = None,
        algorithm: Any = None, on_row: Callable[[dict], None] | None = None,
        fresh: bool = False, mesh=None) -> list[dict]:
    """Trains an Anakin run from Python, as ``python -m anakin.main`` does: every check
    before anything compiles, the run directory (resumed or extended where it holds a run of
    this config), the same metrics.

    Args:
      config: a config (e.g. ``configs.cartpole_ppo.get_config()``); not changed.
      workdir: run directory, or None for none (nothing written, no resume).
      env: your env (docs/extending.md, "Your own env"): a class, function or object with a
        name at the top level of a module (a notebook's own included), or an import path;
        None: ``config.env_id``.
      network: your torso (docs/extending.md, "Your own network"), as ``env``; None:
        ``config.network``.
      algorithm: your algorithm class (docs/extending.md, "Your own algorithm"), as
        ``env``; None: ``config.algorithm``. Its own hyperparameters: ``config.algo``.
      on_row: called with each ``metrics.jsonl`` row (a dict) as it is logged.
      fresh: move a previous run in ``workdir`` aside first (``--fresh``).
      mesh: the devices' mesh (default: the config's devices).

    Returns:
      Every logged row of this call.

    Raises:
      rlcore.errors.ConfigError: a refused config, in one line naming the field.
    """
    from runtime.commands.train import train_in_python

    return train_in_python(config, workdir, trainer, env=env, network=network,
                           algorithm=algorithm, fresh=fresh, on_row=on_row, mesh=mesh)
