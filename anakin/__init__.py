"""Anakin: jittable envs, acting and learning in one compiled program per device mesh
(docs/architectures.md). From Python: ``run``; from the command line: ``python -m
anakin.main``."""

from __future__ import annotations

import importlib

from rlcore import names

names.claim()  # our package names are ours in this process (docs/design.md, "Installed package")

from runtime.commands import door  # noqa: E402  (after the claim; imports no JAX)

__all__ = ["run"]

trainer = door.trainer_of(__name__, lambda: importlib.import_module(".train", __name__))


def run(config, workdir: str | None = None, *, mesh=None,
        **arguments: door.Unpack[door.RunArguments]) -> door.RunResult:
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
