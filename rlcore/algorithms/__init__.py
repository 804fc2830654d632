"""Algorithms, chosen once from ``REGISTRY`` by the config's ``algorithm`` field.

An algorithm is an object with two methods that ``rlcore.learner.make_update_fn`` calls:

- ``prepare(params, apply_fn, trajectory) -> data``: what the loss needs computed over the
  whole rollout before the epochs, with the params at the start of the update (PPO: values
  and GAE advantages and targets; IMPALA: nothing, the Trajectory itself). ``data`` is a
  time-major record with a ``take_envs(idx)`` method that selects a minibatch of envs.
- ``loss(params, apply_fn, minibatch, axis_name) -> (loss, LossMetrics)``.

Its hyperparameters are its dataclass fields, named like the ``rlcore.hparams.HParams``
fields they come from, so ``from_hparams`` fills them (see ``rlcore.algorithms.base``).

Adding an algorithm (say A2C): write ``rlcore/algorithms/a2c.py`` with a frozen dataclass
``A2C(FromHParams)`` holding its hyperparameters and implementing ``prepare`` and ``loss``
(the loss itself may live in ``rlcore.losses`` if it is a reusable pure function), give any
new hyperparameter a field in ``configs/base.py`` (its default), a row in
``runtime/config/fields.py`` and a field in ``HParams``, then add ``"a2c": A2C`` to ``REGISTRY``
below. Validation, the entry points and both architectures pick it up from there.
"""

from __future__ import annotations

from rlcore.algorithms.base import Algorithm
from rlcore.algorithms.impala import Impala
from rlcore.algorithms.ppo import PPO
from rlcore.hparams import HParams

REGISTRY: dict[str, type[Algorithm]] = {
    "ppo": PPO,
    "impala": Impala,
}


def make_algorithm(hp: HParams) -> Algorithm:
    """The algorithm named by ``hp.algorithm`` with its hyperparameters from ``hp``."""
    return REGISTRY[hp.algorithm].from_hparams(hp)
