"""Algorithms, chosen once by the config's ``algorithm`` field: a name of ``REGISTRY`` or an
import path ``PACKAGE.MODULE:NAME`` to an algorithm of the user's own package; both the same
way (``algorithm_class``), checked the same way (``check_algorithm``).

An algorithm is a frozen dataclass (``rlcore.algorithms.base.FromHParams``) with the class
attributes and methods of ``rlcore.algorithms.base.Algorithm`` that
``rlcore.learner.make_update_fn`` calls:

- ``prepare(params, apply_fn, trajectory) -> data``: what the loss needs computed over the
  whole rollout before the epochs, with the params at the start of the update (PPO: values
  and GAE advantages and targets; IMPALA: nothing, the Trajectory itself). ``data`` is a
  time-major record with a ``take_envs(idx)`` method that selects a minibatch of envs.
- ``loss(params, apply_fn, minibatch, axis_name) -> (loss, LossMetrics)``;
- what it owns beyond the loss, with defaults in ``rlcore.algorithms.base.AlgorithmBase``
  (the actor-critic family's): ``heads`` on the torso, ``act`` (how a rollout acts from
  the network's distribution), ``init_state`` (its own ``LearnerState.extra``),
  ``remember`` / ``schedule`` / ``after_update`` (the update's shape: epochs over the
  rollout, or minibatches sampled from its own state); docs/design.md, "The algorithm
  protocol".

Its hyperparameters are its dataclass fields: one named like an ``rlcore.hparams.HParams``
field reads that config field (``gamma``, ``clip_eps``, ...); any other is its own, with a
default, set with ``--config.algo.NAME=VALUE`` and (a float) swept with
``--config.sweep.algo.NAME=a,b`` (docs/extending.md, "Your own algorithm").
"""

from __future__ import annotations

import dataclasses
import inspect

from rlcore.algorithms.base import OWN_TYPES, Algorithm, own_hyperparameters
from rlcore.algorithms.dqn import DQN
from rlcore.algorithms.impala import Impala
from rlcore.algorithms.ppo import PPO
from rlcore.algorithms.pqn import PQN
from rlcore.errors import ConfigError
from rlcore.hparams import HParams
from rlcore.imports import load_object, short_repr

REGISTRY: dict[str, type[Algorithm]] = {
    "ppo": PPO,
    "impala": Impala,
    "pqn": PQN,
    "dqn": DQN,
}
# What an algorithm class has (``rlcore.algorithms.base.Algorithm``).
CLASS_ATTRIBUTES = ("minibatch_kinds", "loss_reduction", "staleness_corrections")
METHODS = ("from_hparams", "prepare", "split_ready", "loss", "heads", "act",
           "init_state", "remember", "schedule", "after_update", "check")


def algorithm_class(name: str) -> type[Algorithm]:
    """The algorithm ``name`` names: a key of ``REGISTRY`` or an import path, checked.

    Raises:
      ConfigError: an import path that does not load, or a class that is no algorithm
        (``check_algorithm``), in one ``algorithm:`` line.
    """
    cls = REGISTRY[name] if name in REGISTRY else load_object(name, "algorithm")
    check_algorithm(name, cls)
    return cls


def check_algorithm(name: str, cls) -> None:
    """Raises ConfigError (one line) unless ``cls`` is an algorithm class: a dataclass with
    the protocol's class attributes and methods, its own hyperparameters with defaults of
    a type of ``OWN_TYPES``."""
    if not (inspect.isclass(cls) and dataclasses.is_dataclass(cls)):
        raise ConfigError(f"algorithm: '{name}' gives {type(cls).__name__} "
                          f"{short_repr(cls, 50)}, not an algorithm class (a frozen dataclass, "
                          "docs/extending.md)")
    missing = [a for a in (*CLASS_ATTRIBUTES, *METHODS) if not hasattr(cls, a)]
    if missing:
        raise ConfigError(f"algorithm: '{name}' lacks {', '.join(missing)} (the Algorithm "
                          "protocol, rlcore/algorithms/base.py; AlgorithmBase has defaults)")
    for field in dataclasses.fields(cls):
        if field.name in own_hyperparameters(cls) and type(field.default) not in OWN_TYPES:
            raise ConfigError(f"algorithm: '{name}' has hyperparameter {field.name} without a "
                              "default of type float, int, bool or str")


def make_algorithm(hp: HParams) -> Algorithm:
    """The algorithm named by ``hp.algorithm`` with its hyperparameters from ``hp``."""
    return algorithm_class(hp.algorithm).from_hparams(hp)
