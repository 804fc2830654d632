"""Env adapter contracts shared by both architectures.

``TimeStep`` is the one step record for both kinds of env:

- ``JaxEnv`` (Anakin): pure, jittable, one env; ``vmap`` it for a batch. Auto-resets in the
  step that ends an episode (the returned obs is then the first obs of the next episode) and
  keeps episode statistics in its state.
- ``HostEnv`` (Sebulba): a batch of envs stepped on host CPU threads, numpy in and out, with
  the same auto-reset semantics and episode statistics kept on the host.

Terminated and truncated are kept apart everywhere: a truncated step is not a terminal state.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import numpy as np
from flax import struct

from rlcore.types import EnvSpec


@struct.dataclass
class TimeStep:
    """What one env step returns (leading batch axis when batched).

    Attributes:
      obs: ``[*obs_shape]`` observation after the step (after auto-reset if the episode ended).
      reward: ``[]`` float32 reward of the step.
      terminated: ``[]`` bool, the episode reached a terminal state.
      truncated: ``[]`` bool, the episode was cut by a time limit (and did not terminate).
      final_obs: ``[*obs_shape]`` the observation the step reached *before* any auto-reset:
        the last observation of the episode where it ended, ``obs`` elsewhere (and at a
        reset). What the value target of a truncated step bootstraps on
        (``rlcore.returns.step_inputs``).
    """

    obs: Any
    reward: Any
    terminated: Any
    truncated: Any
    final_obs: Any = None


@struct.dataclass
class EpisodeStats:
    """Running and last-completed episode statistics of one env (batch axis when batched).

    Attributes:
      running_return: ``[]`` float32 undiscounted return of the current episode so far.
      running_length: ``[]`` int32 steps of the current episode so far.
      completed_return: ``[]`` float32 return of the most recently completed episode;
        read it where the last TimeStep has ``terminated | truncated``.
      completed_length: ``[]`` int32 length of that episode.
      completed_info: ``{name: []}`` float32 the env's per-episode values of that episode
        (``EnvSpec.episode_info``, read from its last state before the auto-reset); None for
        envs that report none (docs/design.md, "Episode info").
    """

    running_return: Any
    running_length: Any
    completed_return: Any
    completed_length: Any
    completed_info: Any = None


@struct.dataclass
class JaxEnvState:
    """State of a JaxEnv: the wrapped env's state plus episode statistics."""

    inner: Any
    stats: EpisodeStats


class JaxEnv(Protocol):
    """A jittable single env (vmap for a batch)."""

    spec: EnvSpec

    def reset(self, key: jax.Array) -> tuple[JaxEnvState, TimeStep]:
        """Starts an episode. Returns (state, TimeStep with reward 0, flags False)."""

    def step(
        self, state: JaxEnvState, action: jax.Array, key: jax.Array
    ) -> tuple[JaxEnvState, TimeStep]:
        """Steps once; auto-resets (with ``key``) when the episode ends."""

    def draw_reset(self, key: jax.Array) -> tuple[jax.Array, Any]:
        """``step``'s randomness drawn ahead: ``(key_step, reset draw)``."""

    def step_drawn(
        self, state: JaxEnvState, action: jax.Array, key_step: jax.Array, reset: Any
    ) -> tuple[JaxEnvState, TimeStep]:
        """``step`` with its randomness from ``draw_reset(key)``: the same result."""

    def step_batch_drawn(
        self, state: JaxEnvState, action: jax.Array, key_step: jax.Array, reset: Any
    ) -> tuple[JaxEnvState, TimeStep]:
        """``vmap(step_drawn)`` over a batch ``[B]``: the same result (an env may draw only
        the ended envs' episodes, ``envs.autoreset.reset_ended``)."""


def step_batch(env: JaxEnv, state: JaxEnvState, action: jax.Array,
               keys: jax.Array) -> tuple[JaxEnvState, TimeStep]:
    """``vmap(env.step)`` over a batch ``[B]`` (``keys [B]``), the same result, through
    ``draw_reset`` and ``step_batch_drawn`` (an env with lazy resets draws only the ended
    envs' episodes). Every batched step outside the rollout's scan goes through here."""
    key_step, reset = jax.vmap(env.draw_reset)(keys)
    return env.step_batch_drawn(state, action, key_step, reset)


class HostEnv(Protocol):
    """A batch of host-side envs with numpy inputs and outputs."""

    spec: EnvSpec
    num_envs: int
    stats: EpisodeStats  # numpy arrays [num_envs], updated by every step

    def reset(self) -> TimeStep:
        """Resets every env. Returns a TimeStep of arrays with leading axis num_envs."""

    def step(self, actions: np.ndarray) -> TimeStep:
        """Steps every env with ``actions`` ``[num_envs]`` int; auto-resets ended envs."""

    def close(self) -> None:
        """Releases the env threads."""


def keep_obs_frame(env: Any, adapter: Any) -> None:
    """Gives ``adapter`` the ``obs_frame(obs) -> uint8 [H, W, 3]`` of the ``env`` it wraps,
    where it has one: an env's own frames for videos pass through its adapters
    (``envs.registry.obs_frame_fn``; docs/extending.md, "Your own env")."""
    if callable(getattr(env, "obs_frame", None)):
        adapter.obs_frame = env.obs_frame
