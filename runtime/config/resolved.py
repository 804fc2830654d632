"""A run resolved once (docs/design.md, "Resolved once"): what both trainers read of a
checked config instead of working it out again, in one record made in one step.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from rlcore.types import EnvSpec
from runtime.config import build
from runtime.config.validation import Derived, ModeChecks, derive


@dataclasses.dataclass(frozen=True)
class Resolved:
    """A checked config, resolved for a mode on its devices.

    Attributes:
      sizes: the derived sizes over ``num_shards`` learner shards (``derive``).
      num_shards: learner devices over all processes.
      num_processes: processes of the run.
      policy_lag: updates the acting params trail the learner's (``ModeChecks.policy_lag``;
        None: Sebulba's async pipeline, the newest).
      actor_threads: actor threads per actor device (``ModeChecks.actor_threads``: the
        machine's where ``num_actor_threads`` is 0); 0 where the mode has none.
      spec: the env's spec (``ModeChecks.spec``: its id and ``env_kwargs``).
      learner: the network, the hyperparameters with the update plan resolved
        (``runtime.config.plan``) and the optimizer (``runtime.config.build.Learner``).
    """

    sizes: Derived
    num_shards: int
    num_processes: int
    policy_lag: int | None
    actor_threads: int
    spec: EnvSpec
    learner: build.Learner


def resolve(config, mode: ModeChecks, num_shards: int, num_processes: int,
            values: Mapping[str, Any] | None = None) -> Resolved:
    """The one step that resolves ``config`` (checked: ``runtime.commands.train.prepare``)
    for ``mode`` on ``num_shards`` learner shards of ``num_processes`` processes;
    ``values``: a sweep variant's, for the learner's hyperparameters (Anakin's first)."""
    sizes = derive(config, num_shards)
    lag = mode.policy_lag(config)
    spec = mode.spec(config)
    learner = build.learner(config, spec, mode, num_shards, num_processes, sizes.num_updates,
                            values, policy_lag=lag or 0)
    return Resolved(sizes=sizes, num_shards=num_shards, num_processes=num_processes,
                    policy_lag=lag, actor_threads=mode.actor_threads(config, num_processes),
                    spec=spec, learner=learner)


def recorded(config, resolved: Resolved):
    """``config`` with what the run resolved from the machine written in, so that its
    ``config.json``, resume check and summary name it: ``num_actor_threads`` where 0. The
    one write of a resolution into a config (no field check writes one)."""
    if "num_actor_threads" in config and config.num_actor_threads == 0:
        config.num_actor_threads = resolved.actor_threads
    return config
