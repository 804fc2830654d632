"""Actions from a policy's logits: greedy (argmax) or sampled, with explicit keys.

Pure and jittable; what both evaluations (in-training and the evaluate commands) and both
modes use to act from a network's output. Training's rollouts sample with pre-drawn Gumbel
noise instead (``rlcore.seeding.action_noise``), which gives the same samples as
``sample_actions`` with the same keys.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from rlcore.networks import step_network
from rlcore.seeding import per_env_keys, sample_actions
from rlcore.types import CoreState


def greedy_actions(logits: jax.Array) -> jax.Array:
    """The argmax action of each row: int32 ``[N]`` of ``logits [N, A]``."""
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)


def select_actions(logits: jax.Array, keys: jax.Array, greedy: bool) -> jax.Array:
    """Actions of a batch: argmax (``greedy``) or one categorical sample per row.

    Args:
      logits: ``[N, A]``.
      keys: ``[N]`` PRNG keys (unused when greedy).
      greedy: static.

    Returns:
      int32 ``[N]``.
    """
    if greedy:
        return greedy_actions(logits)
    return sample_actions(keys, logits)


def policy_actions(apply_fn: Callable, params, obs: jax.Array, action_root: jax.Array | None,
                   t: jax.Array, greedy: bool) -> jax.Array:
    """Actions of step ``t`` for envs ``0 .. N-1``, keys ``per_env_keys(action_root, i, t)``.

    Args:
      apply_fn: ``(params, obs [N, ...]) -> (logits [N, A], value [N])``.
      params: network parameters.
      obs: ``[N, *obs_shape]``.
      action_root: the action root key (``EvaluateRoots.action``); unused (may be None)
        when greedy.
      t: ``[]`` int step index.
      greedy: static; argmax instead of sampling.

    Returns:
      int32 ``[N]``.
    """
    return policy_step(apply_fn, params, obs, None, None, action_root, t, greedy)[0]


def policy_step(apply_fn: Callable, params, obs: jax.Array, core: CoreState | None, first,
                action_root: jax.Array | None, t: jax.Array,
                greedy: bool) -> tuple[jax.Array, CoreState | None]:
    """``policy_actions`` for a feed-forward (``core`` None) or recurrent agent: the actions
    and the core state after the step (``rlcore.networks.step_network``).

    Args:
      core: CoreState ``[N, H]`` before the step, or None.
      first: ``[N]`` bool, ``obs`` starts an episode (recurrent only).
      (the others as ``policy_actions``.)

    Returns:
      ``(int32 [N], core [N, H] or None)``.
    """
    logits, _, core = step_network(apply_fn, params, obs, core, first)
    if greedy:
        return greedy_actions(logits), core
    ids = jnp.arange(obs.shape[0], dtype=jnp.int32)
    return select_actions(logits, per_env_keys(action_root, ids, t), greedy), core
