"""Anakin rollout: a ``lax.scan`` of vmapped jittable env steps and policy sampling.

Keys follow ``rlcore.seeding``: per env from the *global* env index, so the data do not
depend on how envs are spread over devices. A recurrent agent's core state and episode-start
flags travel in the ``EnvCarry`` from rollout to rollout (and so into checkpoints).
"""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
from flax import struct

from envs.base import JaxEnv, JaxEnvState
from rlcore import normalize, transitions
from rlcore.distributions import distribution_for
from rlcore.networks import final_values, step_network
from rlcore.seeding import map_keys, per_env_keys, rollout_keys
from rlcore.types import CoreState, EpisodeSummary, Trajectory


@struct.dataclass
class EnvCarry:
    """The per-device batch of envs between rollouts.

    Attributes:
      state: JaxEnvState with leaves ``[B_local, ...]``.
      obs: ``[B_local, *obs_shape]`` the observation the next action is taken on.
      core: recurrent agents: CoreState ``[B_local, H]``, the core's state before that
        action; None for feed-forward agents.
      first: recurrent agents: ``[B_local]`` bool, ``obs`` starts an episode; None for
        feed-forward agents.
      ret: with ``normalize_reward``: ``[B_local]`` float32, each env's discounted return so
        far (``rlcore.normalize.scale_rewards``); None otherwise.
    """

    state: JaxEnvState
    obs: jax.Array
    core: CoreState | None = None
    first: jax.Array | None = None
    ret: jax.Array | None = None


def reset_envs(env: JaxEnv, reset_root, env_ids, core: CoreState | None = None,
               scale_rewards: bool = False) -> EnvCarry:
    """Resets the envs ``env_ids [B]`` (global indices) with keys from ``reset_root``;
    ``core``: a recurrent agent's initial core state ``[B, H]`` (None: feed-forward);
    ``scale_rewards``: start the discounted returns (``EnvCarry.ret``) at 0."""
    state, ts = jax.vmap(env.reset)(per_env_keys(reset_root, env_ids))
    first = transitions.episode_starts(core, env_ids.shape)
    ret = jnp.zeros(env_ids.shape, jnp.float32) if scale_rewards else None
    return EnvCarry(state=state, obs=ts.obs, core=core, first=first, ret=ret)


def make_rollout_fn(env: JaxEnv, apply_fn: Callable, num_steps: int, nan_at_update: int = -1,
                    bootstrap_time_limits: bool = False, over_agents: bool = False,
                    reward_scaling: tuple[float, float] | None = None):
    """Builds ``rollout(params, carry, roots, env_ids, update, act) -> (carry, Trajectory,
    summary)``.

    Args:
      env: the JaxEnv (single env; vmapped here).
      apply_fn: the network's apply (feed-forward, or recurrent where the carry holds a
        core state; ``rlcore.networks.step_network``).
      num_steps: rollout length T.
      nan_at_update: debug knob, poison the rewards of this update (``-1``: off).
      bootstrap_time_limits: record ``Trajectory.final_value``, the value of each truncated
        episode's final observation (``rlcore.networks.final_values``; a forward pass only in
        the steps where one of the device's envs was truncated); off: None.
      over_agents: the rollout runs ``vmap``ped over agents (``num_seeds`` > 1 or a sweep):
        the final values are computed in every step, without the ``lax.cond`` (JAX 0.10
        fails to batch that cond's network inside ``shard_map``: a ``pvary`` error).
      reward_scaling: ``(gamma, clip)`` of ``normalize_reward`` (the carry holds ``ret`` and
        the params the return statistics): the Trajectory's rewards are scaled and its
        ``discounted_return`` set; None: raw rewards.

    Returns:
      ``rollout`` taking ``roots = (action_root, env_root)`` keys, ``env_ids [B]`` global
      indices, the int ``update`` and the algorithm's ``act`` (``Algorithm.act``: the
      distribution actions are sampled from; None: the network's); returns the new
      EnvCarry, a Trajectory ``[T, B]`` and an EpisodeSummary of this device's envs. A
      recurrent agent's Trajectory holds the core state at the rollout's start and the
      episode starts ``first [T, B]``.
    """
    one_step = _make_step(env, apply_fn, nan_at_update, bootstrap_time_limits, over_agents,
                          reward_scaling)
    dist_family = distribution_for(env.spec)

    def rollout(params, carry: EnvCarry, roots, env_ids, update, act=None):
        action_root, env_root = roots
        # All randomness of the rollout up front, in batched draws outside the loop (the
        # same keys and draws as taking them step by step; see rlcore.seeding): [T, B, ...]
        # action noise, [T, B] env step keys and the episodes that start where one ends.
        noise = dist_family.noise(rollout_keys(action_root, env_ids, update, num_steps),
                                  env.spec)
        step_keys, resets = map_keys(env.draw_reset,
                                     rollout_keys(env_root, env_ids, update, num_steps))
        start_core = carry.core
        carry, (traj, summaries) = jax.lax.scan(
            functools.partial(one_step, params, update, act), carry, (noise, step_keys, resets))
        traj = traj.replace(bootstrap_obs=carry.obs, core_state=start_core)
        summary = jax.tree.map(jnp.sum, summaries)
        return carry, traj, summary

    return rollout


def _make_step(env: JaxEnv, apply_fn: Callable, nan_at_update: int,
               bootstrap_time_limits: bool, over_agents: bool,
               reward_scaling: tuple[float, float] | None):
    """``one_step(params, update, act, carry, (noise_t, step_key, reset)) -> (carry,
    (Trajectory, EpisodeSummary))``: one step of the envs ``[B]`` of ``make_rollout_fn``'s
    scan (its arguments), by the rules of ``rlcore.transitions``."""
    step_envs = env.step_batch_drawn
    branch = transitions.always if over_agents else jax.lax.cond
    values_fn = functools.partial(final_values, apply_fn)

    def one_step(params, update, act, carry: EnvCarry, xs):
        action_noise_t, step_key, reset = xs
        dist, value, core = step_network(apply_fn, params, carry.obs, carry.core, carry.first)
        if act is not None:
            dist = act(dist, update)
        action = dist.sample_from_noise(action_noise_t)
        state, ts = step_envs(carry.state, action, step_key, reset)
        reward = ts.reward
        if nan_at_update >= 0:
            reward = jnp.where(update == nan_at_update, jnp.nan, reward)
        end = transitions.end_of_step(reward, ts.terminated, ts.truncated, carry.first,
                                      carry.ret, normalize.return_stats(params), reward_scaling)
        final_value = None
        if bootstrap_time_limits:
            final_value = transitions.final_value(values_fn, params, ts.final_obs,
                                                  ts.truncated, core, branch)
        traj = Trajectory(
            obs=carry.obs, action=action, reward=end.reward, terminated=ts.terminated,
            truncated=ts.truncated, behaviour_dist_params=dist.params(), behaviour_value=value,
            bootstrap_obs=None, first=carry.first, final_value=final_value,
            discounted_return=end.discounted_return)
        carry = EnvCarry(state=state, obs=ts.obs, core=core, first=end.first, ret=end.ret)
        return carry, (traj, _episodes(end.done, state.stats))

    return one_step


def _episodes(done, stats) -> EpisodeSummary:
    """The episodes that ended in a step (``done [B]``), from the envs' ``stats`` (with the
    sums of their per-episode values where the env reports them)."""
    info = None
    if stats.completed_info is not None:
        info = {k: jnp.sum(jnp.where(done, v, 0.0)) for k, v in stats.completed_info.items()}
    return EpisodeSummary(
        return_sum=jnp.sum(jnp.where(done, stats.completed_return, 0.0)),
        length_sum=jnp.sum(jnp.where(done, stats.completed_length, 0)),
        count=jnp.sum(done.astype(jnp.int32)),
        info=info,
    )
