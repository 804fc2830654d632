"""Sebulba: envs stepped on host threads, actor devices acting, learner devices training
data-parallel (docs/architectures.md). From Python: ``run``; from the command line:
``python -m sebulba.main``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlcore import names

names.claim()  # our package names are ours in this process (docs/design.md, "Installed package")

if TYPE_CHECKING:  # no import at run time: ``import sebulba`` starts no JAX
    from typing import Unpack

    from runtime.commands.result import RunResult
    from runtime.commands.train import RunArguments

__all__ = ["run"]


def trainer():
    """Sebulba's checks and trainer, ``(MODE, train_result)``, imported when called (the
    command line's and ``run``'s)."""
    from sebulba.train import MODE, train_result

    return MODE, train_result


def run(config, workdir: str | None = None,
        **arguments: Unpack[RunArguments]) -> RunResult:
    """Trains a Sebulba run from Python, as ``python -m sebulba.main`` does (a jittable env
    of your own runs on a host CPU device); the arguments are ``anakin.run``'s but ``mesh``
    (``runtime.commands.train.train_in_python``), and so is what it returns (a
    ``runtime.commands.result.RunResult``; docs/design.md, "From Python")."""
    from runtime.commands.train import train_in_python

    return train_in_python(config, workdir, trainer, **arguments)
