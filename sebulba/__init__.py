"""Sebulba: envs stepped on host threads, actor devices acting, learner devices training
data-parallel (docs/architectures.md). From Python: ``run``; from the command line:
``python -m sebulba.main``."""

from __future__ import annotations

import importlib

from rlcore import names

names.claim()  # our package names are ours in this process (docs/design.md, "Installed package")

from runtime.commands import door  # noqa: E402  (after the claim; imports no JAX)

__all__ = ["run"]

trainer = door.trainer_of(__name__, lambda: importlib.import_module(".train", __name__))


def run(config, workdir: str | None = None,
        **arguments: door.Unpack[door.RunArguments]) -> door.RunResult:
    """Trains a Sebulba run from Python, as ``python -m sebulba.main`` does (a jittable env
    of your own runs on a host CPU device); the arguments are ``anakin.run``'s but ``mesh``
    (``runtime.commands.train.train_in_python``), and so is what it returns (a
    ``runtime.commands.result.RunResult``; docs/design.md, "From Python")."""
    from runtime.commands.train import train_in_python

    return train_in_python(config, workdir, trainer, **arguments)
