"""Same-step auto-reset and episode statistics, shared by every env adapter.

Both kinds of env (``JaxEnv`` for Anakin, ``HostEnv`` for Sebulba) follow one rule: the step
that ends an episode (``terminated | truncated``) returns that step's reward and flags, but the
observation is already the first observation of the next episode, and the env state has been
reset. There is never a separate "reset step".

``update_episode_stats`` is written once over an array module (``jax.numpy`` or ``numpy``) so
that both kinds keep their statistics with the same arithmetic.
"""

from __future__ import annotations

import abc
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from envs.base import EpisodeStats, JaxEnvState, TimeStep
from rlcore.types import EnvSpec


def initial_episode_stats(shape: tuple[int, ...] = (), xp: Any = jnp,
                          info_names: tuple[str, ...] = ()) -> EpisodeStats:
    """Zero statistics.

    Args:
      shape: batch shape, ``()`` for one env or ``(num_envs,)`` for a host batch.
      xp: array module, ``jax.numpy`` or ``numpy``.
      info_names: the env's ``EnvSpec.episode_info`` (empty: ``completed_info`` None).

    Returns:
      EpisodeStats with float32 returns and int32 lengths of shape ``shape``, all zero,
      and float32 zeros ``completed_info[name]`` of that shape.
    """
    return EpisodeStats(
        running_return=xp.zeros(shape, xp.float32),
        running_length=xp.zeros(shape, xp.int32),
        completed_return=xp.zeros(shape, xp.float32),
        completed_length=xp.zeros(shape, xp.int32),
        completed_info={n: xp.zeros(shape, xp.float32) for n in info_names} or None,
    )


def update_episode_stats(
    stats: EpisodeStats, reward: Any, done: Any, xp: Any = jnp, info: Any = None
) -> EpisodeStats:
    """Adds one step to the running statistics; closes the episode where ``done``.

    Where ``done`` the step's reward and length count towards the finished episode, whose
    return and length become ``completed_*``; the running values restart at zero. Elsewhere
    ``completed_*`` keep their previous values.

    Args:
      stats: EpisodeStats with leaves of batch shape ``[...]``.
      reward: ``[...]`` float32 reward of this step (the unclipped one where there is one).
      done: ``[...]`` bool, ``terminated | truncated`` of this step.
      xp: array module, ``jax.numpy`` or ``numpy``.
      info: ``{name: [...]}`` the env's per-episode values after this step (kept as
        ``completed_info`` where ``done``); None for envs that report none.

    Returns:
      The updated EpisodeStats, same shapes and dtypes.
    """
    episode_return = (stats.running_return + reward).astype(xp.float32)
    episode_length = (stats.running_length + 1).astype(xp.int32)
    completed_info = stats.completed_info
    if info is not None:
        completed_info = {k: xp.where(done, xp.asarray(v, xp.float32), completed_info[k])
                          .astype(xp.float32) for k, v in info.items()}
    return EpisodeStats(
        running_return=xp.where(done, xp.float32(0.0), episode_return).astype(xp.float32),
        running_length=xp.where(done, xp.int32(0), episode_length).astype(xp.int32),
        completed_return=xp.where(done, episode_return, stats.completed_return).astype(xp.float32),
        completed_length=xp.where(done, episode_length, stats.completed_length).astype(xp.int32),
        completed_info=completed_info,
    )


def select_tree(pred: jax.Array, on_true: Any, on_false: Any) -> Any:
    """Leafwise ``pred ? on_true : on_false`` keeping ``on_false``'s dtypes.

    Args:
      pred: ``[]`` bool (one env; ``vmap`` for a batch).
      on_true: pytree, e.g. the freshly reset state.
      on_false: pytree of the same structure, e.g. the stepped state.

    Returns:
      A pytree like ``on_false``.
    """
    return jax.tree.map(
        lambda t, f: jnp.where(pred, t, f).astype(jnp.asarray(f).dtype), on_true, on_false
    )


def strong_typed(tree: Any) -> Any:
    """Turns every leaf into an array of its canonical dtype, without weak typing.

    Python scalars in an env state (e.g. ``time=0``) would otherwise be weakly typed, and a
    ``lax.scan`` carrying the state would see different types before and after a step.
    """
    return jax.tree.map(lambda x: jnp.asarray(x, jnp.asarray(x).dtype), tree)


@struct.dataclass
class ResetDraw:
    """A fresh episode drawn ahead of the step that may need it.

    Attributes:
      obs: ``[*obs_shape]`` float32, its first observation.
      inner: the wrapped env's state at its start.
    """

    obs: jax.Array
    inner: Any


class AutoResetJaxEnv(abc.ABC):
    """A JaxEnv built from an inner reset and an inner step (no auto-reset of their own).

    Subclasses implement ``_reset_inner`` and ``_step_inner``; this class adds the same-step
    auto-reset, the dtype contract (obs float32, reward float32, flags bool) and the episode
    statistics. One env; ``vmap`` ``reset``/``step`` for a batch. An env that reports
    per-episode values (``spec.episode_info``) also implements ``_episode_info``.
    """

    spec: EnvSpec

    def _episode_info(self, inner: Any) -> dict[str, jax.Array] | None:
        """``{name: [] float32}`` for every name of ``spec.episode_info``, read from the
        stepped inner state (before any auto-reset); None (the default) for envs that
        report none."""
        del inner
        return None

    @abc.abstractmethod
    def _reset_inner(self, key: jax.Array) -> tuple[jax.Array, Any]:
        """Returns ``(obs [*obs_shape], inner_state)`` of a new episode."""

    @abc.abstractmethod
    def _step_inner(
        self, inner: Any, action: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, Any, jax.Array, jax.Array, jax.Array]:
        """Returns ``(obs, inner_state, reward, terminated, truncated)`` without resetting.

        ``terminated`` and ``truncated`` must not both be true.
        """

    def reset(self, key: jax.Array) -> tuple[JaxEnvState, TimeStep]:
        """Starts an episode.

        Args:
          key: PRNG key.

        Returns:
          ``(state, TimeStep)``: obs ``[*obs_shape]`` float32, reward ``0.0`` float32,
          terminated and truncated ``False``.
        """
        obs, inner = self._reset_inner(key)
        state = JaxEnvState(inner=strong_typed(inner),
                            stats=initial_episode_stats(info_names=self.spec.episode_info))
        obs = jnp.asarray(obs, jnp.float32)
        timestep = TimeStep(
            obs=obs,
            reward=jnp.zeros((), jnp.float32),
            terminated=jnp.zeros((), jnp.bool_),
            truncated=jnp.zeros((), jnp.bool_),
            final_obs=obs,
        )
        return state, timestep

    def draw_reset(self, key: jax.Array) -> tuple[jax.Array, ResetDraw]:
        """The randomness of one ``step(state, action, key)`` drawn ahead: the key of the
        step itself and the episode that starts if this step ends one.

        A rollout draws these for all its steps at once, outside its loop (on CPU every
        random draw inside a loop body is a small loop of its own).

        Args:
          key: the step's PRNG key.

        Returns:
          ``(key_step, ResetDraw)``.
        """
        key_step, key_reset = jax.random.split(key)
        obs, inner = self._reset_inner(key_reset)
        return key_step, ResetDraw(obs=jnp.asarray(obs, jnp.float32), inner=inner)

    def step_drawn(
        self, state: JaxEnvState, action: jax.Array, key_step: jax.Array, reset: ResetDraw
    ) -> tuple[JaxEnvState, TimeStep]:
        """``step`` with its randomness from ``draw_reset``: same result, bit for bit."""
        obs_st, inner_st, reward, terminated, truncated = self._step_inner(
            state.inner, action, key_step
        )
        reward = jnp.asarray(reward, jnp.float32)
        terminated = jnp.asarray(terminated, jnp.bool_)
        truncated = jnp.asarray(truncated, jnp.bool_) & ~terminated
        done = terminated | truncated
        inner = select_tree(done, reset.inner, inner_st)
        final_obs = jnp.asarray(obs_st, jnp.float32)
        obs = jnp.where(done, reset.obs, final_obs)
        stats = update_episode_stats(state.stats, reward, done,
                                     info=self._episode_info(inner_st))
        timestep = TimeStep(obs=obs, reward=reward, terminated=terminated, truncated=truncated,
                            final_obs=final_obs)
        return JaxEnvState(inner=inner, stats=stats), timestep

    def step(
        self, state: JaxEnvState, action: jax.Array, key: jax.Array
    ) -> tuple[JaxEnvState, TimeStep]:
        """Steps once and, if the episode ended, resets in the same step.

        Args:
          state: JaxEnvState of one env.
          action: ``[]`` int action.
          key: PRNG key, split into one key for the step and one for the reset.

        Returns:
          ``(state, TimeStep)``: obs ``[*obs_shape]`` float32 (the next episode's first obs
          where ``terminated | truncated``), reward ``[]`` float32, flags ``[]`` bool,
          ``final_obs`` the stepped obs before the reset.
        """
        key_step, reset = self.draw_reset(key)
        return self.step_drawn(state, action, key_step, reset)


def keys_as_data(tree: Any) -> Any:
    """``tree`` with every PRNG key leaf replaced by its raw data (``jax.random.key_data``),
    so that it copies to numpy (an env state kept for a video: ``frame_state``)."""
    def data(x):
        is_key = jnp.issubdtype(jnp.asarray(x).dtype, jax.dtypes.prng_key)
        return jax.random.key_data(x) if is_key else x

    return jax.tree.map(data, tree)


def host_initial_stats(num_envs: int, info_names: tuple[str, ...] = ()) -> EpisodeStats:
    """Zero numpy statistics for a host batch of ``num_envs`` envs (leaves ``[num_envs]``)."""
    return initial_episode_stats((num_envs,), xp=np, info_names=info_names)
