"""HostEnv adapter over a jittable env: a batch of JaxEnvs served to Sebulba's actor threads.

A ``JaxEnv`` (gymnax or our own) is ``vmap``ped over the pool's ``num_envs`` envs and stepped
by ONE jitted call on a host CPU device (``jax.devices("cpu")[0]`` unless told otherwise);
the inputs are placed there with ``jax.device_put``, the env state stays there between
calls, and one ``jax.device_get`` brings the step's TimeStep and EpisodeStats back as numpy.
Auto-reset (same step), terminated/truncated and the episode statistics are the JaxEnv's own
(``envs.autoreset``), so the data match the env run in Anakin step for step.

Seeding (by *global* env index, like ``envs.envpool``): env ``i`` of a pool made with
``(root, first_env_index)`` has global index ``g = first_env_index + i`` and the root key::

    root_g = fold_in(root, g)

where the caller derives ``root`` from the pool's integer seed (Sebulba:
``rlcore.seeding.host_env_root(seed) = fold_in(key(seed), HOST_ENV_STREAM)``; the streams
are allocated there, not here).

Every call on the pool (``reset`` or ``step``) has a counter ``c``: 0 for the first, then
1, 2, ... over the pool's life. Call ``c`` gives env ``g`` the key ``fold_in(root_g, c)``,
which ``reset`` passes to ``JaxEnv.reset`` and ``step`` to ``JaxEnv.step`` (which splits it
into the step's and the auto-reset's keys). So env ``g`` behaves the same in any pool with
the same root, whatever the pool sizes, and no two envs share a key. The stream of
``host_env_root`` keeps these keys apart from the run's other roots (``rlcore.seeding.Roots``
folds ``key(seed)`` with 0..3, and the actors' action keys descend from root 1): without it
env ``g = 1`` would draw from the action root's subtree.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import numpy as np

from envs import base
from envs.autoreset import host_initial_stats
from envs.base import EpisodeStats, JaxEnv, JaxEnvState, TimeStep, keep_obs_frame


def env_root_keys(root: jax.Array, env_ids: jax.Array) -> jax.Array:
    """Root keys of envs ``env_ids`` (global indices): ``fold_in(root, g)``.

    Args:
      root: ``[]`` PRNG key of the pool (see the module docstring).
      env_ids: ``[n]`` int32 global env indices.

    Returns:
      ``[n]`` PRNG keys.
    """
    return jax.vmap(lambda g: jax.random.fold_in(root, g))(env_ids)


def call_keys(root_keys: jax.Array, counter: jax.Array) -> jax.Array:
    """Keys of call ``counter`` of the pool: ``fold_in(root_g, counter)`` per env.

    Args:
      root_keys: ``[n]`` keys from ``env_root_keys``.
      counter: ``[]`` int, the call's counter.

    Returns:
      ``[n]`` PRNG keys.
    """
    return jax.vmap(lambda k: jax.random.fold_in(k, counter))(root_keys)


def reset_batch(
    env: JaxEnv, root_keys: jax.Array, counter: jax.Array, completed: EpisodeStats
) -> tuple[JaxEnvState, TimeStep]:
    """Resets every env of the pool with the keys of call ``counter``.

    Args:
      env: the JaxEnv (one env; vmapped here).
      root_keys: ``[n]`` root keys.
      counter: ``[]`` int call counter.
      completed: EpisodeStats ``[n]``; its ``completed_*`` (and ``completed_info``) are kept
        (running ones restart).

    Returns:
      ``(state, TimeStep)`` with leaves ``[n, ...]``.
    """
    state, ts = jax.vmap(env.reset)(call_keys(root_keys, counter))
    stats = state.stats.replace(completed_return=completed.completed_return,
                                completed_length=completed.completed_length,
                                completed_info=completed.completed_info)
    return state.replace(stats=stats), ts


def step_batch(
    env: JaxEnv, root_keys: jax.Array, counter: jax.Array, state: JaxEnvState,
    actions: jax.Array,
) -> tuple[JaxEnvState, TimeStep]:
    """Steps every env of the pool (same-step auto-reset) with the keys of call ``counter``.

    Args:
      env: the JaxEnv (one env; vmapped here).
      root_keys: ``[n]`` root keys.
      counter: ``[]`` int call counter.
      state: JaxEnvState ``[n, ...]``.
      actions: ``[n]`` int32 or ``[n, D]`` float32.

    Returns:
      ``(state, TimeStep)`` with leaves ``[n, ...]``.
    """
    return base.step_batch(env, state, actions, call_keys(root_keys, counter))


class JaxHostEnv:
    """A batch of ``num_envs`` jittable envs behind the HostEnv protocol (numpy in and out).

    Args:
      env: the JaxEnv to serve (one env; e.g. ``registry.make_jax_env("CartPole-v1")``).
      num_envs: envs in this pool.
      root: ``[]`` PRNG key the pool's env keys derive from (see the module docstring).
      first_env_index: global index of this pool's env 0.
      device: the host device to step on; default ``jax.devices("cpu")[0]``.

    Attributes:
      spec: the env's EnvSpec (obs are returned in its ``obs_dtype``).
      num_envs: envs in this pool.
      first_env_index: global index of env 0.
      stats: EpisodeStats of numpy arrays ``[num_envs]``, updated by every ``step``.
    """

    def __init__(self, env: JaxEnv, num_envs: int, *, root: jax.Array, first_env_index: int = 0,
                 device: Any = None):
        if num_envs < 1:
            raise ValueError(f"num_envs: must be >= 1, got {num_envs}")
        self.spec = env.spec
        keep_obs_frame(env, self)
        self.num_envs = int(num_envs)
        self.first_env_index = int(first_env_index)
        self.stats: EpisodeStats = host_initial_stats(self.num_envs, env.spec.episode_info)
        self._device = jax.devices("cpu")[0] if device is None else device
        self._obs_dtype = np.dtype(env.spec.obs_dtype)
        env_ids = np.arange(first_env_index, first_env_index + num_envs, dtype=np.int32)
        self._root_keys = jax.jit(env_root_keys)(
            *jax.device_put((root, env_ids), self._device))
        self._reset_fn = jax.jit(functools.partial(reset_batch, env))
        self._step_fn = jax.jit(functools.partial(step_batch, env))
        self._state: JaxEnvState | None = None
        self._counter = 0
        self._closed = False

    def reset(self) -> TimeStep:
        """Resets every env and the running episode statistics (completed ones are kept).

        Returns:
          TimeStep: obs ``[num_envs, *obs_shape]``, reward ``[num_envs]`` float32 zeros,
          terminated and truncated ``[num_envs]`` bool False.
        """
        self._check_open()
        counter, completed = jax.device_put((np.int32(self._counter), self.stats), self._device)
        self._state, ts = self._reset_fn(self._root_keys, counter, completed)
        return self._fetch(ts)

    def step(self, actions: np.ndarray) -> TimeStep:
        """Steps every env in one jitted call; ended envs are reset in the same step.

        Args:
          actions: ``[num_envs]`` int actions in ``[0, spec.num_actions)``, or ``[num_envs,
            D]`` float ones for a box (the JaxEnv clips them).

        Returns:
          TimeStep: obs ``[num_envs, *obs_shape]`` (the next episode's first obs where the
          episode ended), reward ``[num_envs]`` float32, terminated and truncated
          ``[num_envs]`` bool, never both true.
        """
        self._check_open()
        if self._state is None:
            raise RuntimeError("JaxHostEnv: call reset() before step()")
        actions = np.asarray(actions)
        expected = (self.num_envs, *self.spec.action_shape)
        if actions.shape != expected:
            raise ValueError(f"actions: expected shape {expected}, got {actions.shape}")
        actions = actions.astype(self.spec.action_dtype)
        if not self.spec.action_shape and (actions.min() < 0
                                           or actions.max() >= self.spec.num_actions):
            raise ValueError(f"actions: must be in [0, {self.spec.num_actions}), got {actions}")
        inputs = jax.device_put((np.int32(self._counter), actions), self._device)
        self._state, ts = self._step_fn(self._root_keys, inputs[0], self._state, inputs[1])
        return self._fetch(ts)

    def _fetch(self, ts: TimeStep) -> TimeStep:
        """One device_get of the call's TimeStep and statistics; advances the counter."""
        self._counter += 1
        ts, self.stats = jax.device_get((ts, self._state.stats))
        return TimeStep(obs=np.asarray(ts.obs, self._obs_dtype),
                        reward=np.asarray(ts.reward, np.float32),
                        terminated=np.asarray(ts.terminated, bool),
                        truncated=np.asarray(ts.truncated, bool),
                        final_obs=np.asarray(ts.final_obs, self._obs_dtype))

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("JaxHostEnv: used after close()")

    def close(self) -> None:
        """Drops the env state and compiled calls; the pool cannot be used afterwards."""
        self._closed = True
        self._state = None
        self._reset_fn = self._step_fn = None
