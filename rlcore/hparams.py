"""What the learner reads of a run's settings: one record, ``HParams``.

The loss and optimizer scalars are pytree leaves: an agent of a sweep holds its swept
values there as traced scalars (``jax.vmap`` over a record of ``[A]`` arrays, see
``runtime.sweep.agent_hparams``), while the others stay Python numbers, constants of the
compiled program. The choices that shape the program (algorithm, optimizer, flags, epochs
and minibatches) are static fields, part of the record's tree structure.

The record has no defaults: ``configs/base.py`` holds them, and ``runtime.fields.hparams_of``
builds the record from a config (fields named like the config fields).
"""

from __future__ import annotations

import dataclasses

from flax import struct


@struct.dataclass
class HParams:
    """Loss and optimizer hyperparameters (config fields of the same names).

    Attributes:
      learning_rate: initial learning rate.
      max_grad_norm: global-norm gradient clip (``<= 0`` disables it).
      adam_eps: Adam epsilon.
      rmsprop_decay, rmsprop_eps: torch RMSProp alpha and epsilon (outside the root).
      gamma: discount factor.
      gae_lambda: PPO's GAE lambda.
      clip_eps: PPO ratio (and value) clip.
      vf_coef: value-loss coefficient.
      ent_coef: entropy-bonus coefficient.
      vtrace_lambda: IMPALA's V-trace lambda.
      clip_rho, clip_pg_rho: IMPALA's importance-weight clips (targets, policy gradient).
      algorithm: a key of ``rlcore.algorithms.REGISTRY`` (static).
      optimizer: a key of ``rlcore.optim.OPTIMIZERS`` (static).
      anneal_lr: decay the learning rate linearly to 0 over the run (static).
      clip_vloss: PPO value clipping (static).
      norm_adv: PPO per-minibatch advantage normalisation (static).
      num_epochs: passes over each rollout (static).
      num_minibatches: minibatches per epoch (static).
      minibatch: ``"auto"`` (the algorithm's own kind), ``"samples"`` or ``"sequences"``
        (static; ``rlcore.algorithms.base.minibatch_kind``).
      update_unroll: scan unroll of the gradient steps, 0 = fully unrolled (static).
      microbatches: chunks each minibatch's gradient is accumulated over (static).
      recurrent: the network's core, ``"none"`` (feed-forward), ``"lstm"`` or ``"gru"``
        (static; a recurrent agent's minibatches are whole sequences).
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
    algorithm: str = struct.field(pytree_node=False)
    optimizer: str = struct.field(pytree_node=False)
    anneal_lr: bool = struct.field(pytree_node=False)
    clip_vloss: bool = struct.field(pytree_node=False)
    norm_adv: bool = struct.field(pytree_node=False)
    num_epochs: int = struct.field(pytree_node=False)
    num_minibatches: int = struct.field(pytree_node=False)
    minibatch: str = struct.field(pytree_node=False)
    update_unroll: int = struct.field(pytree_node=False)
    microbatches: int = struct.field(pytree_node=False)
    recurrent: str = struct.field(pytree_node=False)

    def override(self, part: "HParams") -> "HParams":
        """This record with the scalars that ``part`` holds (those not None) from ``part``:
        e.g. one agent's traced swept values over the run's constants."""
        return dataclasses.replace(
            self, **{k: v for k in SCALARS if (v := getattr(part, k)) is not None})


# The scalar fields (pytree leaves), in field order.
SCALARS = tuple(f.name for f in dataclasses.fields(HParams)
                if f.metadata.get("pytree_node", True))
