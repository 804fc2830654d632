"""Anakin rollout: a ``lax.scan`` of vmapped jittable env steps and policy sampling.

Keys follow ``rlcore.seeding``: per env from the *global* env index, so the data do not
depend on how envs are spread over devices.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from flax import struct

from envs.base import JaxEnv, JaxEnvState
from rlcore.seeding import per_env_keys, sample_actions
from rlcore.types import EpisodeSummary, Trajectory


@struct.dataclass
class EnvCarry:
    """The per-device batch of envs between rollouts.

    Attributes:
      state: JaxEnvState with leaves ``[B_local, ...]``.
      obs: ``[B_local, *obs_shape]`` the observation the next action is taken on.
    """

    state: JaxEnvState
    obs: jax.Array


def reset_envs(env: JaxEnv, reset_root, env_ids) -> EnvCarry:
    """Resets the envs ``env_ids [B]`` (global indices) with keys from ``reset_root``."""
    state, ts = jax.vmap(env.reset)(per_env_keys(reset_root, env_ids))
    return EnvCarry(state=state, obs=ts.obs)


def make_rollout_fn(env: JaxEnv, apply_fn: Callable, num_steps: int, nan_at_update: int = -1):
    """Builds ``rollout(params, carry, roots, env_ids, update) -> (carry, Trajectory, summary)``.

    Args:
      env: the JaxEnv (single env; vmapped here).
      apply_fn: ``(params, obs [B, ...]) -> (logits [B, A], value [B])``.
      num_steps: rollout length T.
      nan_at_update: debug knob, poison the rewards of this update (``-1``: off).

    Returns:
      ``rollout`` taking ``roots = (action_root, env_root)`` keys, ``env_ids [B]`` global
      indices and the int ``update``; returns the new EnvCarry, a Trajectory ``[T, B]`` and an
      EpisodeSummary of this device's envs.
    """
    step_envs = jax.vmap(env.step)

    def rollout(params, carry: EnvCarry, roots, env_ids, update):
        action_root, env_root = roots

        def one_step(carry: EnvCarry, t):
            logits, value = apply_fn(params, carry.obs)
            keys = per_env_keys(action_root, env_ids, update, t)
            action = sample_actions(keys, logits)
            state, ts = step_envs(carry.state, action, per_env_keys(env_root, env_ids, update, t))
            reward = ts.reward
            if nan_at_update >= 0:
                reward = jnp.where(update == nan_at_update, jnp.nan, reward)
            done = ts.terminated | ts.truncated
            record = (
                Trajectory(
                    obs=carry.obs, action=action, reward=reward, terminated=ts.terminated,
                    truncated=ts.truncated, behaviour_logits=logits, behaviour_value=value,
                    bootstrap_obs=None,
                ),
                EpisodeSummary(
                    return_sum=jnp.sum(jnp.where(done, state.stats.completed_return, 0.0)),
                    length_sum=jnp.sum(jnp.where(done, state.stats.completed_length, 0)),
                    count=jnp.sum(done.astype(jnp.int32)),
                ),
            )
            return EnvCarry(state=state, obs=ts.obs), record

        carry, (traj, summaries) = jax.lax.scan(one_step, carry, jnp.arange(num_steps))
        traj = traj.replace(bootstrap_obs=carry.obs)
        summary = jax.tree.map(jnp.sum, summaries)
        return carry, traj, summary

    return rollout
