"""Sebulba actor threads: each steps its own EnvPool batch and runs the policy on its
actor device, then splits the rollout along the env axis onto the learner devices.

A recurrent agent's core state lives on the actor device, one row per env of the thread,
and is carried from rollout to rollout with the episode-start flags; each rollout ships
the state at its start and the flags (``Trajectory.core_state``, ``Trajectory.first``). A
thread starts (and a resumed run restarts) from zeros with every flag set: its envs are
reset then (re-seeded from ``(seed, update)`` on resume), so every env begins an episode.
"""

from __future__ import annotations

import dataclasses
import functools
import queue
import threading
import time
from typing import Any, Callable

import jax
import numpy as np

from envs.base import HostEnv
from rlcore import normalize, transitions
from rlcore.networks import final_values, row_stable, step_network
from rlcore.seeding import per_env_keys
from rlcore.types import CoreState, EpisodeSummary, Trajectory
from sebulba import pipeline, timers
from sebulba.layout import ShardSlice
from sebulba.pipeline import ParamsServer, StopControl


@dataclasses.dataclass(frozen=True)
class ShardPiece:
    """One actor thread's envs for one learner shard, already on that shard's device.

    Attributes:
      shard: learner shard index.
      first_env: global index of the piece's first env (the learner orders pieces by it).
      trajectory: Trajectory ``[T, b_piece, ...]`` (``behaviour_value`` None).
    """

    shard: int
    first_env: int
    trajectory: Trajectory


@dataclasses.dataclass
class RolloutItem:
    """What an actor thread hands the learner for one update.

    Attributes:
      update: rollout index.
      pieces: one ShardPiece per learner shard this thread's envs overlap, in shard order.
      episodes: the episodes that ended during the rollout.
      timers: seconds per stage during this rollout (``sebulba.timers.ACTOR``).
      params_version: the params version the rollout was collected with.
    """

    update: int
    pieces: tuple[ShardPiece, ...]
    episodes: EpisodeSummary
    timers: dict
    params_version: int


@dataclasses.dataclass(frozen=True)
class ActorSpec:
    """Everything one actor thread knows of the run.

    Attributes:
      name: thread name, ``actor-<device>-<thread>``.
      device: the actor device the policy runs on.
      first_env: global index of the thread's env 0.
      num_envs: envs the thread steps.
      slices: how those envs split over the local learner shards.
      num_steps: rollout length T.
      lag: the policy lag (``sebulba.mode.MODE.policy_lag``; None: async): rollout ``r`` uses
        params version ``sebulba.pipeline.params_version(lag, r, start)``.
      start, end: rollout indices ``start .. end - 1`` to collect.
      timeout_s: longest wait on params or on room in the queue.
      seed: the run seed (for the jitter RNG only).
      jitter_ms: debug: random extra sleep per env step (0: off).
      fail_at_update: debug: raise before this rollout (-1: off).
      nan_at_update: debug: poison this rollout's rewards (-1: off).
      initial_core: ``n -> `` a recurrent agent's zero core state of ``n`` envs, None for
        feed-forward agents (``rlcore.networks.initial_core``).
      reward_scaling: ``(gamma, clip)`` of ``normalize_reward`` (``rlcore.normalize``): the
        thread scales its rewards by the return statistics handed over with the params;
        None: raw rewards.
    """

    name: str
    device: Any
    first_env: int
    num_envs: int
    slices: tuple[ShardSlice, ...]
    num_steps: int
    lag: int | None
    start: int
    end: int
    timeout_s: float
    seed: int = 0
    jitter_ms: int = 0
    fail_at_update: int = -1
    nan_at_update: int = -1
    initial_core: Callable[[int], CoreState | None] = lambda n: None
    reward_scaling: tuple[float, float] | None = None


def make_policy_fn(apply_fn: Callable, action_root, act: Callable | None = None):
    """Jitted ``(params, obs [n, ...], core, first [n], env_ids [n], update, step) ->
    (action [n, *action_shape], dist_params [n, P], core)``; runs where its arguments live
    (the actor device). ``core``: a recurrent agent's CoreState ``[n, H]`` before the step
    (returned after it), ``first``: its episode starts; both None for a feed-forward agent.
    Each env's row is computed as in any other batch (``rlcore.networks.row_stable``), so a
    thread's share of the envs does not change its envs' logits. ``act``: the algorithm's
    (``Algorithm.act``: the distribution the actions are sampled from, at ``update``);
    None: the network's."""
    step = row_stable(functools.partial(step_network, apply_fn))

    def policy(params, obs, core, first, env_ids, update, step_index):
        dist, _, core = step(params, obs, core, first)
        if act is not None:
            dist = act(dist, update)
        action = dist.sample_rows(per_env_keys(action_root, env_ids, update, step_index))
        return action, dist.params(), core

    return jax.jit(policy)


def make_final_value_fn(apply_fn: Callable):
    """Jitted ``(params, final_obs [n, ...], truncated [n], core) -> [n]``: the values of the
    truncated episodes' final observations, 0 elsewhere (``rlcore.networks.final_values``),
    with the params that acted in the step and a recurrent agent's core after it; rows as in
    any other batch (``rlcore.networks.row_stable``)."""
    return jax.jit(row_stable(functools.partial(final_values, apply_fn)))


class Actor:
    """Collects rollouts ``spec.start .. spec.end - 1`` into ``out_queue``.

    Args:
      spec: the thread's ActorSpec.
      env_factory: ``(num_envs, first_env) -> HostEnv``.
      policy: from ``make_policy_fn``.
      params: the ParamsServer.
      out_queue: ``pipeline.RolloutQueue`` (``queue_capacity(lag)`` items) read by the
        learner in a fixed order.
      stop: shared StopControl.
      final_value: from ``make_final_value_fn``: rollouts carry ``Trajectory.final_value``
        (computed in the steps where an env was truncated); None: they do not
        (``bootstrap_time_limits`` off).
    """

    def __init__(self, spec: ActorSpec, env_factory, policy, params: ParamsServer,
                 out_queue: queue.Queue, stop: StopControl, final_value=None):
        self.spec, self.env_factory, self.policy = spec, env_factory, policy
        self.final_value = final_value
        self.params, self.out_queue, self.stop = params, out_queue, stop
        self.thread = threading.Thread(target=self._run, name=spec.name, daemon=True)
        # Jitter RNG: its own stream, never touching the data keys.
        self._jitter = np.random.default_rng([spec.seed, spec.first_env, 7])

    def _run(self) -> None:
        env = None
        spec = self.spec
        try:
            env = self.env_factory(spec.num_envs, spec.first_env)
            obs = env.reset().obs
            env_ids = jax.device_put(
                np.arange(spec.first_env, spec.first_env + spec.num_envs, dtype=np.int32),
                spec.device)
            core = jax.device_put(spec.initial_core(spec.num_envs), spec.device)
            first = transitions.episode_starts(core, spec.num_envs, np)
            # normalize_reward: each env's discounted return, from 0 with its fresh episode.
            self._ret = np.zeros(spec.num_envs, np.float32)
            handover = timers.Timers([timers.ACTOR_PUT_WAIT])
            for r in range(spec.start, spec.end):
                item, obs, core, first = self._rollout(env, obs, core, first, env_ids, r)
                # The wait to hand over the previous rollout: once an item is in the queue
                # the learner may read it, so nothing is written to it after the put.
                item.timers.update(handover)
                handover = timers.Timers([timers.ACTOR_PUT_WAIT])
                with handover.time(timers.ACTOR_PUT_WAIT):
                    pipeline.put(self.out_queue, item, self.stop, spec.timeout_s)
        except pipeline.PipelineStopped:
            pass
        except BaseException as e:  # noqa: BLE001 - reaches the main thread via stop
            self.stop.fail(e)
        finally:
            if env is not None:
                try:
                    env.close()
                except BaseException as e:  # noqa: BLE001 - a failed close fails the run too
                    self.stop.fail(e)

    def _rollout(self, env: HostEnv, obs: np.ndarray, core: CoreState | None,
                 first: np.ndarray | None, env_ids, r: int):
        """Collects rollout ``r`` from ``obs`` (and a recurrent agent's ``core [n, H]`` and
        episode starts ``first [n]``; None for feed-forward) with this thread's global
        ``env_ids [n]`` (on the actor device); returns ``(RolloutItem, next obs, next core,
        next first)``."""
        spec = self.spec
        if r == spec.fail_at_update:
            raise RuntimeError(f"debug.fail_actor_at_update: actor failed at update {r}")
        stages = timers.Timers(timers.ROLLOUT)
        with stages.time(timers.PARAMS_WAIT):
            version, params, _ = self.params.get(
                pipeline.params_version(spec.lag, r, spec.start), spec.device, self.stop,
                spec.timeout_s)
        buf = _HostBuffers.empty(spec.num_steps, spec.num_envs, obs, env.spec)
        ret_stats = None
        if spec.reward_scaling is not None:  # the statistics of the params' version
            ret_stats = jax.device_get(normalize.return_stats(params))
        start_core, firsts, dist_params = core, [], []
        episodes = EpisodeSummary.zero()
        for t in range(spec.num_steps):
            if self.stop.stopped:
                raise pipeline.PipelineStopped()
            if first is not None:
                firsts.append(first)
            obs, core, first, dist_p, done = self._step(env, buf, t, params, obs, core, first,
                                                        env_ids, r, ret_stats, stages)
            dist_params.append(dist_p)
            episodes = _count_episodes(episodes, env.stats, done)
        if r == spec.nan_at_update:
            buf.reward[:] = np.nan
        rollout = buf.trajectory(jax.numpy.stack(dist_params), obs, start_core, firsts,
                                 self.final_value is not None, ret_stats is not None)
        item = RolloutItem(update=r, pieces=self._split(rollout), episodes=episodes,
                           timers=stages, params_version=version)
        return item, obs, core, first

    def _step(self, env: HostEnv, buf: "_HostBuffers", t: int, params, obs, core, first,
              env_ids, r: int, ret_stats, stages: timers.Timers):
        """Step ``t`` of rollout ``r``, written into ``buf`` by the rules of
        ``rlcore.transitions``; returns ``(next obs, core after the step, next first,
        the step's distribution params [n, P] on the device, done [n])``."""
        spec = self.spec
        with stages.time(timers.INFERENCE):
            action, dist_p, core = self.policy(params, jax.device_put(obs, spec.device), core,
                                              first, env_ids, np.int32(r), np.int32(t))
            action.block_until_ready()
        with stages.time(timers.D2H):
            action_np = np.asarray(action)
        with stages.time(timers.ENV_STEP):
            if spec.jitter_ms > 0:
                time.sleep(self._jitter.uniform(0, spec.jitter_ms) / 1000.0)
            ts = env.step(action_np)
        buf.write(t, obs, action_np, ts)
        end = transitions.end_of_step(buf.reward[t], ts.terminated, ts.truncated, first,
                                      self._ret, ret_stats, spec.reward_scaling, np)
        if ret_stats is not None:
            buf.reward[t], buf.discounted_return[t], self._ret = (
                end.reward, end.discounted_return, end.ret)
        if self.final_value is not None:
            buf.final_value[t] = transitions.final_value(
                self._final_values, params, ts.final_obs, ts.truncated, core)
        return ts.obs, core, end.first, dist_p, end.done

    def _final_values(self, params, final_obs, truncated, core) -> np.ndarray:
        """``final_value`` on the actor device, back on the host ``[n]``."""
        return np.asarray(self.final_value(
            params, jax.device_put(final_obs, self.spec.device), truncated, core))

    def _split(self, rollout: Trajectory) -> tuple[ShardPiece, ...]:
        """The rollout's slices for every overlapping learner shard, placed there."""
        return tuple(
            ShardPiece(shard=sl.shard, first_env=sl.first_env,
                       trajectory=jax.device_put(rollout.slice_envs(sl.lo, sl.hi), sl.device))
            for sl in self.spec.slices)


def _count_episodes(episodes: EpisodeSummary, stats, done: np.ndarray) -> EpisodeSummary:
    """``episodes`` with those that ended in a step (``done [n]``) added, from the env's
    ``stats`` (with the sums of their per-episode values where the env reports them)."""
    if not done.any():
        return episodes
    info = None
    if stats.completed_info is not None:
        info = {k: float(v[done].sum()) for k, v in stats.completed_info.items()}
    return episodes + EpisodeSummary(float(stats.completed_return[done].sum()),
                                     float(stats.completed_length[done].sum()),
                                     int(done.sum()), info)


@dataclasses.dataclass
class _HostBuffers:
    """Host arrays of one rollout, ``[T, n, ...]``; fresh per rollout (device_put may alias)."""

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    final_value: np.ndarray  # zeros but where a final observation's value is written
    discounted_return: np.ndarray  # normalize_reward's returns G

    @classmethod
    def empty(cls, t_len: int, n: int, obs: np.ndarray, env_spec) -> "_HostBuffers":
        return cls(
            obs=np.empty((t_len,) + obs.shape, obs.dtype),
            action=np.empty((t_len, n) + env_spec.action_shape, env_spec.action_dtype),
            reward=np.empty((t_len, n), np.float32),
            terminated=np.empty((t_len, n), bool),
            truncated=np.empty((t_len, n), bool),
            final_value=np.zeros((t_len, n), np.float32),
            discounted_return=np.zeros((t_len, n), np.float32),
        )

    def trajectory(self, behaviour_dist_params, bootstrap_obs, core_state, firsts: list,
                   final_value: bool, discounted_return: bool) -> Trajectory:
        """The rollout's Trajectory ``[T, n, ...]`` (no behaviour values); ``firsts``: the
        episode starts of each step (empty for a feed-forward agent); ``final_value``,
        ``discounted_return``: the rollout carries that field."""
        return Trajectory(
            obs=self.obs, action=self.action, reward=self.reward, terminated=self.terminated,
            truncated=self.truncated, behaviour_dist_params=behaviour_dist_params,
            behaviour_value=None, bootstrap_obs=bootstrap_obs, core_state=core_state,
            first=np.stack(firsts) if firsts else None,
            final_value=self.final_value if final_value else None,
            discounted_return=self.discounted_return if discounted_return else None,
        )

    def write(self, t: int, obs, action, ts) -> None:
        self.obs[t] = obs
        self.action[t] = action
        self.reward[t] = ts.reward
        self.terminated[t] = ts.terminated
        self.truncated[t] = ts.truncated
