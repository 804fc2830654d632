"""The rules of one env step that both rollouts follow (Anakin's compiled scan,
``anakin.rollout``; Sebulba's actor threads on the host, ``sebulba.actor``), as pure
functions of ``jax.numpy`` or ``numpy`` arrays (``xp``); see docs/design.md, "Same-step
auto-reset" and "Truncation and the final observation".

- Reset: freshly reset envs all start an episode; a recurrent agent's episode-start flags are
  all set then (its core state starts at zeros: ``rlcore.networks.initial_core``).
- Same-step auto-reset: an env whose episode ends in a step (terminated or truncated: the
  step is ``done``) is reset inside that step; the step's next observation is the new
  episode's first.
- A recurrent agent's core is reset at episode starts: the next step's flag is the step's
  ``done``, and the network starts its core afresh where a flag is set
  (``rlcore.networks.step_network``); the trajectory records the flags before each step.
- Truncation: the value of a truncated episode's final observation (``final_obs``, the one
  before the auto-reset), with the params that acted in the step and the core after it
  (``rlcore.networks.final_values``), computed only in a step where some env was truncated;
  0 elsewhere.
- ``normalize_reward``: the rewards are scaled, and the discounted returns restart at 0 where
  the step is done (``rlcore.normalize.scale_rewards``).
"""

from __future__ import annotations

from typing import Any, Callable

import jax.numpy as jnp
import numpy as np
from flax import struct

from rlcore import normalize


def episode_starts(core, shape, xp: Any = jnp):
    """The episode-start flags of freshly reset envs (``shape``, e.g. ``[B]``): all set for
    a recurrent agent (``core``, its initial CoreState, not None); None for a feed-forward
    agent."""
    return None if core is None else xp.ones(shape, bool)


@struct.dataclass
class StepEnd:
    """What an env step's outcome means for the trajectory and for the next step.

    Attributes:
      done: ``[B]`` bool, the episode ended in the step (the env was reset in it).
      reward: ``[B]`` the step's reward to learn from (scaled with ``normalize_reward``).
      discounted_return: ``[B]`` float32 returns including the step (``normalize_reward``),
        else None.
      ret: ``[B]`` float32 returns to carry to the next step (0 where done), else None.
      first: ``[B]`` bool, the next step starts an episode (a recurrent agent's), else None.
    """

    done: Any
    reward: Any
    discounted_return: Any = None
    ret: Any = None
    first: Any = None


def end_of_step(reward: Any, terminated: Any, truncated: Any, first: Any, ret: Any = None,
                ret_stats: normalize.RunningStats | None = None,
                reward_scaling: tuple[float, float] | None = None, xp: Any = jnp) -> StepEnd:
    """The ``StepEnd`` of a step with ``reward``, ``terminated``, ``truncated`` ``[B]``;
    ``first [B]``: the step's episode starts (None for a feed-forward agent); ``ret [B]``,
    ``ret_stats`` and ``reward_scaling`` ``(gamma, clip)``: with ``normalize_reward``, the
    returns before the step and the return statistics (``reward_scaling`` None: raw
    rewards)."""
    done = terminated | truncated
    discounted_return = None
    if reward_scaling is not None:
        if ret_stats is None:
            raise ValueError("reward_scaling needs ret_stats, the return statistics")
        reward, discounted_return, ret = normalize.scale_rewards(
            reward, ret, done, ret_stats, *reward_scaling, xp=xp)
    return StepEnd(done=done, reward=reward, discounted_return=discounted_return, ret=ret,
                   first=None if first is None else done)


def host_branch(pred, true_fn: Callable, false_fn: Callable, *operands):
    """``jax.lax.cond``'s form for a host (Python) branch."""
    return true_fn(*operands) if pred else false_fn(*operands)


def always(pred, true_fn: Callable, false_fn: Callable, *operands):
    """``jax.lax.cond``'s form that always takes ``true_fn``."""
    del pred, false_fn
    return true_fn(*operands)


def no_final_values(params, final_obs, truncated, core):
    """``final_values``' output where no env was truncated: zeros ``[B]`` float32 (of the
    array module, and inside a compiled program the sharding type, of ``truncated``)."""
    del params, final_obs, core
    zeros_like = np.zeros_like if isinstance(truncated, np.ndarray) else jnp.zeros_like
    return zeros_like(truncated, np.float32)


def final_value(values_fn: Callable, params, final_obs, truncated, core, branch=host_branch):
    """``Trajectory.final_value`` of one step ``[B]``: ``values_fn`` (``(params, final_obs,
    truncated, core) -> [B]``, ``rlcore.networks.final_values`` or a jitted form of it) of the
    final observations, with the params that acted and the core after the step, where some
    env was truncated; zeros otherwise (``no_final_values``).

    ``branch``: ``jax.lax.cond``'s form, taking ``values_fn`` when some env was truncated:
    ``host_branch`` (a Python branch, on the host), ``jax.lax.cond`` (inside a compiled
    program) or ``always`` (a rollout ``vmap``ped over agents computes the values in every
    step).
    """
    return branch(truncated.any(), values_fn, no_final_values, params, final_obs, truncated,
                  core)
