"""The agent's network of a config: the one place both trainers (through
``runtime.config.build``) and the update plan (``runtime.config.plan``)
build it; see docs/design.md, "One update loop" and "Memory plan"."""

from __future__ import annotations

import dataclasses

from rlcore.algorithms import algorithm_class
from rlcore.networks import NO_CORE, make_network
from rlcore.normalize import maybe_normalized
from rlcore.types import EnvSpec


@dataclasses.dataclass(frozen=True)
class NetworkChoice:
    """The config fields that make the agent's network (hashable, so the update plan
    can cache per choice).

    Attributes:
      network: the torso (``rlcore.networks.NETWORKS``).
      recurrent: the core after the torso (``none``, ``lstm``, ``gru``).
      recurrent_hidden: units of the core.
      layer_norm: the built-in torso's LayerNorms (``rlcore.networks.normed``).
      normalize_obs: the params carry observation statistics (``rlcore.normalize``).
      normalize_reward: the params carry return statistics.
      normalize_obs_clip: bound of a normalised observation.
      algorithm: the algorithm, whose ``heads`` go on the torso (``Algorithm.heads``).
    """

    network: str
    recurrent: str = NO_CORE
    recurrent_hidden: int = 128
    layer_norm: bool = False
    normalize_obs: bool = False
    normalize_reward: bool = False
    normalize_obs_clip: float = 10.0
    algorithm: str = "ppo"

    @classmethod
    def of(cls, config) -> NetworkChoice:
        """The choice a config makes."""
        return cls(**{f.name: config[f.name] for f in dataclasses.fields(cls)})


def network_of(choice: NetworkChoice, spec: EnvSpec):
    """The network of ``choice`` on ``spec``: the torso with its core and the algorithm's
    heads, wrapped in ``rlcore.normalize.Normalized`` where either normalisation is on."""
    net = make_network(choice.network, spec, choice.recurrent, choice.recurrent_hidden,
                       algorithm_class(choice.algorithm).heads(spec), choice.layer_norm)
    return maybe_normalized(net, spec.obs_shape, choice.normalize_obs,
                            choice.normalize_reward, choice.normalize_obs_clip)


def network(config, spec: EnvSpec):
    """The run's network on ``spec`` (``network_of(NetworkChoice.of(config), spec)``)."""
    return network_of(NetworkChoice.of(config), spec)
