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
    # 0: every step draws the episode that would start (cheap resets); k > 0: a batch's
    # step draws only the ended envs' episodes, k per pass (``step_batch_drawn``).
    lazy_reset_chunk: int = 0

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

    def draw_reset(self, key: jax.Array) -> tuple[jax.Array, ResetDraw | jax.Array]:
        """The randomness of one ``step(state, action, key)`` drawn ahead: the key of the
        step itself and the episode that starts if this step ends one.

        A rollout draws these for all its steps at once, outside its loop (on CPU every
        random draw inside a loop body is a small loop of its own). An env with
        ``lazy_reset_chunk`` > 0 draws only the reset's key: its episodes are drawn in
        ``step_batch_drawn``, for the envs that ended only.

        Args:
          key: the step's PRNG key.

        Returns:
          ``(key_step, ResetDraw)``, or ``(key_step, key_reset)`` for a lazy env.
        """
        key_step, key_reset = jax.random.split(key)
        if self.lazy_reset_chunk:
            return key_step, key_reset
        return key_step, self._draw_episode(key_reset)

    def _draw_episode(self, key: jax.Array) -> ResetDraw:
        """The episode that starts with reset key ``key``."""
        obs, inner = self._reset_inner(key)
        return ResetDraw(obs=jnp.asarray(obs, jnp.float32), inner=inner)

    def _advance(self, state: JaxEnvState, action: jax.Array,
                 key_step: jax.Array) -> tuple[Any, EpisodeStats, TimeStep]:
        """One step without the reset: ``(stepped inner state, statistics, TimeStep)`` whose
        ``obs`` and ``final_obs`` are both the stepped observation."""
        obs_st, inner_st, reward, terminated, truncated = self._step_inner(
            state.inner, action, key_step
        )
        reward = jnp.asarray(reward, jnp.float32)
        terminated = jnp.asarray(terminated, jnp.bool_)
        truncated = jnp.asarray(truncated, jnp.bool_) & ~terminated
        stats = update_episode_stats(state.stats, reward, terminated | truncated,
                                     info=self._episode_info(inner_st))
        final_obs = jnp.asarray(obs_st, jnp.float32)
        return inner_st, stats, TimeStep(obs=final_obs, reward=reward, terminated=terminated,
                                         truncated=truncated, final_obs=final_obs)

    def step_drawn(
        self, state: JaxEnvState, action: jax.Array, key_step: jax.Array,
        reset: ResetDraw | jax.Array,
    ) -> tuple[JaxEnvState, TimeStep]:
        """``step`` with its randomness from ``draw_reset``: same result, bit for bit."""
        if self.lazy_reset_chunk:
            reset = self._draw_episode(reset)
        inner_st, stats, ts = self._advance(state, action, key_step)
        done = ts.terminated | ts.truncated
        inner = select_tree(done, reset.inner, inner_st)
        obs = jnp.where(done, reset.obs, ts.final_obs)
        return JaxEnvState(inner=inner, stats=stats), ts.replace(obs=obs)

    def step_batch_drawn(
        self, state: JaxEnvState, action: jax.Array, key_step: jax.Array,
        reset: ResetDraw | jax.Array,
    ) -> tuple[JaxEnvState, TimeStep]:
        """``step_drawn`` over a batch ``[B]`` (leaves of every argument ``[B, ...]``). An env
        with ``lazy_reset_chunk`` = k > 0 draws the new episodes of the envs that ended
        only, k at a time (``reset_ended``; docs/design.md, "Same-step auto-reset"); any
        other is ``vmap(step_drawn)``."""
        if not self.lazy_reset_chunk:
            return jax.vmap(self.step_drawn)(state, action, key_step, reset)
        inner_st, stats, ts = jax.vmap(self._advance)(state, action, key_step)
        inner, obs = reset_ended(self._draw_episode, ts.terminated | ts.truncated, reset,
                                 inner_st, ts.final_obs, self.lazy_reset_chunk)
        return JaxEnvState(inner=inner, stats=stats), ts.replace(obs=obs)

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


def reset_ended(draw_episode: Any, done: jax.Array, reset_keys: jax.Array, inner: Any,
                obs: jax.Array, chunk: int) -> tuple[Any, jax.Array]:
    """Replaces the envs that ended by their next episode, drawing only theirs.

    A ``while`` loop takes the first ``chunk`` ended envs not yet reset, draws their
    episodes (``vmap(draw_episode)`` over ``chunk`` keys) and writes them in place; it runs
    ``ceil(ended / chunk)`` times, none in a step where no env ended. Each env's episode
    comes from its own key, so the result is that of a ``vmap`` over all ``B`` envs
    followed by a select, at a fraction of the cost where a reset is dear, wherever the
    env's reset draws the same episode at every batch width (bit for bit for gymnax
    CartPole and Catch, tests/envs/test_jax_env_adapters.py). Craftax's world generation
    does not (a 16-wide ``vmap`` draws other worlds than one env does); here each env gets
    the world of its own single draw (tests/envs/test_suite_envs.py; docs/design.md,
    "Same-step auto-reset").

    Args:
      draw_episode: ``key -> ResetDraw`` of one env.
      done: ``[B]`` bool, the envs whose episode ended this step.
      reset_keys: ``[B]`` PRNG keys of the resets.
      inner: the stepped inner states, leaves ``[B, ...]``.
      obs: ``[B, *obs_shape]`` float32, the stepped observations.
      chunk: episodes drawn per pass.

    Returns:
      ``(inner, obs)`` with the ended envs' entries replaced; shapes and dtypes kept.
    """
    size = done.shape[0]

    def one_pass(carry):
        pending, inner, obs = carry
        idx = jnp.nonzero(pending, size=chunk, fill_value=size)[0]  # [chunk]; size: none
        new = jax.vmap(draw_episode)(reset_keys[jnp.minimum(idx, size - 1)])
        def put(old, fresh):
            fresh = fresh if fresh.dtype == old.dtype else fresh.astype(old.dtype)
            return old.at[idx].set(fresh, mode="drop")

        return (pending.at[idx].set(False, mode="drop"), jax.tree.map(put, inner, new.inner),
                put(obs, new.obs))

    _, inner, obs = jax.lax.while_loop(lambda c: jnp.any(c[0]), one_pass, (done, inner, obs))
    return inner, obs


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
