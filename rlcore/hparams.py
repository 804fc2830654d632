"""What the learner reads of a run's settings: one record, ``HParams``.

The loss and optimizer scalars are pytree leaves: an agent of a sweep holds its swept
values there as traced scalars (``jax.vmap`` over a record of ``[A]`` arrays, see
``runtime.config.sweep.agent_hparams``), while the others stay Python numbers, constants of the
compiled program. The choices that shape the program (algorithm, optimizer, flags, epochs
and minibatches) are static fields, part of the record's tree structure.

The record has no defaults: the field records of ``runtime.config.fields`` hold them (and
``configs/base.py`` builds its config from them); ``runtime.config.fields.hparams_of`` builds the
record from a config (fields named like the config fields). The update-plan sizes derived
from these fields are derived here once (``gradient_steps``, ``envs_per_minibatch``).
"""

from __future__ import annotations

import dataclasses

from flax import struct

from rlcore.replay import ReplaySettings


@struct.dataclass
class HParams:
    """Loss and optimizer hyperparameters: the config fields of the same names, whose
    meanings and values are their records in ``runtime.config.fields`` (docs/configuration.md).

    The first thirteen, the loss and optimizer scalars, are pytree leaves (an agent of a
    sweep holds traced values there), and so is ``algo``, the own hyperparameters of an
    algorithm (``{name: value}``, the config's ``algo`` sub-config: a swept one traced, the
    others Python values); the others are static, part of the tree structure:
    ``algorithm`` (a key of ``rlcore.algorithms.REGISTRY`` or an import path), ``optimizer`` (of
    ``rlcore.optim.OPTIMIZERS``), ``minibatch_kind`` (``rlcore.algorithms.base.minibatch_kind``
    resolves ``"auto"``), ``recurrent`` (``"none"``: feed-forward; a recurrent agent's
    minibatches are whole sequences), the flags, epochs and minibatches, and the resolved
    ``update_unroll`` (0: fully unrolled) and ``microbatches`` (``>= 1``), the
    staleness correction (``rlcore.staleness``) with its two constants, and the run's size
    (``num_envs``, ``num_steps``, ``total_env_steps``: what a schedule in env steps reads,
    PQN's epsilon), and the ``replay`` fields (``rlcore.replay.ReplaySettings``; read by an
    algorithm with a buffer).
    """

    learning_rate: float
    max_grad_norm: float
    adam_eps: float
    rmsprop_decay: float
    rmsprop_eps: float
    gamma: float
    gae_lambda: float
    clip_eps: float
    vf_coef: float
    ent_coef: float
    vtrace_lambda: float
    clip_rho: float
    clip_pg_rho: float
    algo: dict  # an algorithm's own hyperparameters by name (``rlcore.algorithms.base``)
    algorithm: str = struct.field(pytree_node=False)
    optimizer: str = struct.field(pytree_node=False)
    anneal_lr: bool = struct.field(pytree_node=False)
    clip_vloss: bool = struct.field(pytree_node=False)
    norm_adv: bool = struct.field(pytree_node=False)
    num_epochs: int = struct.field(pytree_node=False)
    num_minibatches: int = struct.field(pytree_node=False)
    minibatch_kind: str = struct.field(pytree_node=False)
    update_unroll: int = struct.field(pytree_node=False)
    microbatches: int = struct.field(pytree_node=False)
    recurrent: str = struct.field(pytree_node=False)
    staleness_correction: str = struct.field(pytree_node=False)
    decoupled_max_weight: float = struct.field(pytree_node=False)
    filter_threshold: float = struct.field(pytree_node=False)
    num_envs: int = struct.field(pytree_node=False)
    num_steps: int = struct.field(pytree_node=False)
    total_env_steps: int = struct.field(pytree_node=False)
    replay: ReplaySettings = struct.field(pytree_node=False, default=ReplaySettings())

    def override(self, part: "HParams") -> "HParams":
        """This record with the scalars that ``part`` holds (those not None) from ``part``,
        own hyperparameters of ``algo`` included: e.g. one agent's traced swept values over
        the run's constants."""
        algo = {**self.algo, **{k: v for k, v in (part.algo or {}).items() if v is not None}}
        return dataclasses.replace(
            self, algo=algo, **{k: v for k in SCALARS if (v := getattr(part, k)) is not None})


def gradient_steps(num_epochs: int, num_minibatches: int) -> int:
    """Optimizer steps per update: one per minibatch of every epoch (the one place this is
    derived; ``runtime.config.validation.derive`` and the learning-rate schedule read it)."""
    return num_epochs * num_minibatches


def envs_per_minibatch(envs_per_shard: int, num_minibatches: int) -> int:
    """Envs (whole sequences, or their samples' share) of one minibatch on one learner
    device, whose ``envs_per_shard`` envs split into ``num_minibatches`` (the one place this
    is derived; ``runtime.config.validation.derive`` reads it)."""
    return envs_per_shard // num_minibatches


# The scalar fields (pytree leaves), in field order; ``algo`` holds an algorithm's own.
SCALARS = tuple(f.name for f in dataclasses.fields(HParams)
                if f.metadata.get("pytree_node", True) and f.name != "algo")
# Every field name: an algorithm's hyperparameter of one of these names reads that field.
NAMES = frozenset(f.name for f in dataclasses.fields(HParams))
