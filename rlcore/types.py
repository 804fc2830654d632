"""Named pytrees shared by both architectures: Trajectory, LearnerState, EnvSpec.

Time-major throughout: a leaf of a Trajectory is ``[T, B, ...]`` (T rollout steps, B envs).
"""

from __future__ import annotations

from typing import Any

import jax
import optax
from flax import struct


@struct.dataclass
class EnvSpec:
    """Static description of an environment's interface.

    Attributes:
      obs_shape: shape of one observation, e.g. ``(4,)`` or ``(4, 84, 84)``.
      obs_dtype: numpy dtype name of observations, e.g. ``"float32"`` or ``"uint8"``.
      num_actions: size of the discrete action set.
    """

    obs_shape: tuple[int, ...] = struct.field(pytree_node=False)
    obs_dtype: str = struct.field(pytree_node=False)
    num_actions: int = struct.field(pytree_node=False)


@struct.dataclass
class Trajectory:
    """A rollout of T steps of B envs, time-major.

    ``obs[t]`` is the observation the action ``action[t]`` was taken on; ``reward[t]``,
    ``terminated[t]`` and ``truncated[t]`` are what that step returned. Envs auto-reset in the
    step that ends an episode, so ``obs[t + 1]`` is then the first observation of the next
    episode. ``bootstrap_obs`` is the observation after the last step (``obs[T]``).

    Attributes:
      obs: ``[T, B, *obs_shape]``.
      action: ``[T, B]`` int32.
      reward: ``[T, B]`` float32.
      terminated: ``[T, B]`` bool, the episode reached a terminal state.
      truncated: ``[T, B]`` bool, the episode was cut (time limit), not a terminal state.
      behaviour_logits: ``[T, B, A]`` float32, logits of the policy that acted.
      behaviour_value: ``[T, B]`` float32, that policy's value estimates.
      bootstrap_obs: ``[B, *obs_shape]``.
    """

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    behaviour_logits: jax.Array
    behaviour_value: jax.Array
    bootstrap_obs: jax.Array


@struct.dataclass
class LearnerState:
    """Everything the learner updates.

    Attributes:
      params: network parameters.
      opt_state: optax optimizer state.
      update: int32 scalar, number of updates done.
    """

    params: Any
    opt_state: optax.OptState
    update: jax.Array
