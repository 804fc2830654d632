"""Anakin: jittable envs, acting and learning in one compiled program per device mesh
(docs/architectures.md). From Python: ``run``; from the command line: ``python -m
anakin.main``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlcore import names

names.claim()  # our package names are ours in this process (docs/design.md, "Installed package")

if TYPE_CHECKING:  # no import at run time: ``import anakin`` starts no JAX
    from typing import Unpack

    from runtime.commands.result import RunResult
    from runtime.commands.train import RunArguments

__all__ = ["run"]


def trainer():
    """Anakin's checks and trainer, ``(MODE, train_result)``, imported when called (the
    command line's and ``run``'s)."""
    from anakin.train import MODE, train_result

    return MODE, train_result


def run(config, workdir: str | None = None, *, mesh=None,
        **arguments: Unpack[RunArguments]) -> RunResult:
    """Trains an Anakin run from Python, as ``python -m anakin.main`` does: every check
    before anything compiles, the run directory (resumed or extended where it holds a run of
    this config), the same metrics (docs/design.md, "From Python").

    Args:
      config: a config (e.g. ``configs.cartpole_ppo.get_config()``); not changed.
      workdir: run directory, or None for none (nothing written, no resume).
      mesh: the devices' mesh (default: the config's devices).
      **arguments: ``env``, ``network``, ``algorithm``, ``on_row`` and ``fresh``, the same
        for both architectures: ``runtime.commands.train.train_in_python``.

    Returns:
      A ``runtime.commands.result.RunResult``: the rows this call logged (it is their
      sequence too), the final params and agent 0's policy.

    Raises:
      rlcore.errors.ConfigError: a refused config or argument, in one line naming it.
    """
    from runtime.commands.train import train_in_python

    return train_in_python(config, workdir, trainer, mesh=mesh, **arguments)
