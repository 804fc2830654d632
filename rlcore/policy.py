"""Actions from a policy's distribution: greedy (its mode) or sampled, with explicit keys.

Pure and jittable; what both evaluations (in-training and the evaluate commands) and both
modes use to act from a network's output (``rlcore.distributions``: the argmax of a
categorical, the mean of a Gaussian). Training's rollouts sample with pre-drawn noise
instead (``Distribution.noise``), which gives the same samples as ``select_actions`` with
the same keys.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from rlcore.distributions import Distribution
from rlcore.networks import step_network
from rlcore.seeding import per_env_keys
from rlcore.types import ApplyFn, CoreState, Params, PRNGKey


def acting_apply(apply_fn: ApplyFn, act: Callable[[Distribution, jax.Array], Distribution],
                 update: int) -> ApplyFn:
    """``apply_fn`` whose distribution is ``act(dist, update)`` (an algorithm's
    ``Algorithm.act`` at update ``update``: what its rollouts sampled from then), the rest
    of its output (value, core state) as it is. Its mode is the greedy action wherever
    ``act`` keeps the network's argmax (sampling; epsilon-greedy below 1)."""
    at = jnp.int32(update)

    def apply(params: Params, *args: Any) -> Any:
        dist, *rest = apply_fn(params, *args)
        return (act(dist, at), *rest)

    return apply


def select_actions(dist: Distribution, keys: PRNGKey, greedy: bool) -> jax.Array:
    """Actions of a batch: the mode (``greedy``) or one sample per row.

    Args:
      dist: a distribution of batch ``[N]``.
      keys: ``[N]`` PRNG keys (unused when greedy).
      greedy: static.

    Returns:
      ``[N, *action_shape]`` (int32 or float32).
    """
    if greedy:
        return dist.mode()
    return dist.sample_rows(keys)


def policy_actions(apply_fn: ApplyFn, params: Params, obs: jax.Array,
                   action_root: PRNGKey | None, t: jax.Array, greedy: bool) -> jax.Array:
    """Actions of step ``t`` for envs ``0 .. N-1``, keys ``per_env_keys(action_root, i, t)``.

    Args:
      apply_fn: ``(params, obs [N, ...]) -> (dist [N], value [N])``.
      params: network parameters.
      obs: ``[N, *obs_shape]``.
      action_root: the action root key (``EvaluateRoots.action``); unused (may be None)
        when greedy.
      t: ``[]`` int step index.
      greedy: static; the mode instead of sampling.

    Returns:
      ``[N, *action_shape]``.
    """
    return policy_step(apply_fn, params, obs, None, None, action_root, t, greedy)[0]


def policy_step(apply_fn: ApplyFn, params: Params, obs: jax.Array, core: CoreState | None,
                first: jax.Array | None, action_root: PRNGKey | None, t: jax.Array,
                greedy: bool) -> tuple[jax.Array, CoreState | None]:
    """``policy_actions`` for a feed-forward (``core`` None) or recurrent agent: the actions
    and the core state after the step (``rlcore.networks.step_network``).

    Args:
      core: CoreState ``[N, H]`` before the step, or None.
      first: ``[N]`` bool, ``obs`` starts an episode (recurrent only).
      (the others as ``policy_actions``.)

    Returns:
      ``([N, *action_shape], core [N, H] or None)``.
    """
    dist, _, core = step_network(apply_fn, params, obs, core, first)
    if greedy:
        return dist.mode(), core
    if action_root is None:
        raise ValueError("policy_step: sampling (greedy False) needs an action_root key")
    ids = jnp.arange(obs.shape[0], dtype=jnp.int32)
    return select_actions(dist, per_env_keys(action_root, ids, t), greedy), core
