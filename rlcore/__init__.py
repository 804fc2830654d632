"""rlcore: the RL math and the policy, pure JAX and time-major (docs/api/index.md).

The names a user calls are exported here (``__all__``, each from the module that defines
it), loaded on first use, so that ``import rlcore`` (and ``rlcore.errors``, which the
commands import before JAX starts) imports no JAX:

- types: ``EnvSpec`` (what an env of yours states), ``Trajectory``, ``CoreState``;
- errors: ``ConfigError``;
- algorithms: ``Algorithm`` (the protocol), ``FromHParams``, ``PPO``, ``Impala``,
  ``REGISTRY``, ``algorithm_class``, and ``HParams`` (the learner's record);
- losses and returns: ``ppo_loss``, ``impala_loss``, ``LossMetrics``, ``Objective``,
  ``gae``, ``vtrace``;
- networks: ``make_network``, ``MLPActorCritic``, ``TorsoActorCritic``,
  ``RecurrentActorCritic``.
"""

from __future__ import annotations

import importlib

# name -> the module that defines it
EXPORTS = {
    "EnvSpec": "rlcore.types", "Trajectory": "rlcore.types", "CoreState": "rlcore.types",
    "ConfigError": "rlcore.errors",
    "Algorithm": "rlcore.algorithms.base", "FromHParams": "rlcore.algorithms.base",
    "PPO": "rlcore.algorithms", "Impala": "rlcore.algorithms", "REGISTRY": "rlcore.algorithms",
    "algorithm_class": "rlcore.algorithms", "HParams": "rlcore.hparams",
    "ppo_loss": "rlcore.losses", "impala_loss": "rlcore.losses",
    "LossMetrics": "rlcore.losses", "Objective": "rlcore.losses",
    "gae": "rlcore.returns", "vtrace": "rlcore.returns",
    "make_network": "rlcore.networks", "MLPActorCritic": "rlcore.networks",
    "TorsoActorCritic": "rlcore.networks", "RecurrentActorCritic": "rlcore.networks",
}
__all__ = list(EXPORTS)  # pyright: ignore[reportUnsupportedDunderAll] - one list, above


def __getattr__(name: str):
    """An exported name, from its module on first use."""
    if name in EXPORTS:
        return getattr(importlib.import_module(EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
