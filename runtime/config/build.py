"""What both trainers build from a config before anything compiles: the agent's network and
the learner's hyperparameters with the update plan resolved (``runtime.config.plan.update_plan``),
and the optimizer they give; see docs/design.md, "One update loop".

Anakin (``anakin.train.AnakinRun``) and Sebulba (``sebulba.train.SebulbaRun``) both build
their ``Learner`` here, so the two modes learn with the same network and the same resolved
``update_unroll`` and ``microbatches`` for a config; the memory check sizes that plan.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import optax

from rlcore.hparams import HParams
from rlcore.optim import optimizer_for
from rlcore.types import EnvSpec
from runtime.config import plan
from runtime.config.agent import network
from runtime.config.fields import hparams_of
from runtime.config.validation import ModeChecks


def hparams(config, spec: EnvSpec, mode: ModeChecks, num_shards: int, num_processes: int,
            values: Mapping[str, Any] | None = None) -> HParams:
    """The learner's ``HParams`` of ``config`` (``values``, e.g. a sweep variant's, over its
    fields) with ``update_unroll`` and ``microbatches`` as ``runtime.config.plan.update_plan``
    resolves them for ``mode`` on ``num_shards`` learner shards of ``num_processes``
    processes."""
    resolved = plan.update_plan(config, spec, mode, num_shards, num_processes)
    return hparams_of(config, values).replace(**resolved.fields())


@dataclasses.dataclass(frozen=True)
class Learner:
    """What a trainer learns with.

    Attributes:
      network: the agent's network (``runtime.config.agent.network``).
      hparams: its hyperparameters, the update plan resolved (``hparams``).
      optimizer: the optimizer of ``hparams`` over the run's updates.
    """

    network: Any
    hparams: HParams
    optimizer: optax.GradientTransformation


def learner(config, spec: EnvSpec, mode: ModeChecks, num_shards: int, num_processes: int,
            num_updates: int, values: Mapping[str, Any] | None = None,
            policy_lag: int = 0) -> Learner:
    """The ``Learner`` of a run of ``num_updates`` updates (``values``: see ``hparams``);
    ``policy_lag``: updates between the params that act and the learner's (what the
    staleness correction ``lr_scale`` scales the learning rate by, ``rlcore.optim.
    optimizer_for``; 0, the default, leaves it as it is)."""
    hp = hparams(config, spec, mode, num_shards, num_processes, values)
    return Learner(network=network(config, spec), hparams=hp,
                   optimizer=optimizer_for(hp, num_updates, policy_lag))


def reward_scaling(config) -> tuple[float, float] | None:
    """``(gamma, clip)`` of a config's reward scaling (``rlcore.normalize``'s return
    statistics, which the rollouts update), None where ``normalize_reward`` is off (a sweep
    of gamma is refused with it: ``runtime.config.validation``)."""
    if not config.normalize_reward:
        return None
    return float(config.gamma), float(config.normalize_reward_clip)
