"""Sebulba actor threads: each steps its own EnvPool batch and runs the policy on its
actor device, then splits the rollout along the env axis onto the learner devices."""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from typing import Any, Callable

import jax
import numpy as np

from envs.base import HostEnv
from rlcore.seeding import per_env_keys, sample_actions
from rlcore.types import Trajectory
from sebulba import pipeline
from sebulba.pipeline import Layout, ParamsServer, StopControl


@dataclasses.dataclass
class RolloutItem:
    """What an actor thread hands the learner for one update.

    Attributes:
      update: rollout index.
      pieces: ``{shard index: Trajectory}`` slices ``[T, b_piece, ...]`` of this thread's
        envs, already on that shard's learner device, keyed by learner shard.
      offsets: ``{shard index: global index of the piece's first env}``.
      episodes: ``(return sum, length sum, count)`` of episodes that ended in the rollout.
      timers: seconds per stage during this rollout.
      params_version: the params version the rollout was collected with.
    """

    update: int
    pieces: dict
    offsets: dict
    episodes: tuple
    timers: dict
    params_version: int


def make_policy_fn(apply_fn: Callable, action_root):
    """Jitted ``(params, obs [n, ...], env_ids [n], update, step) -> (action, logits, value)``;
    runs where its arguments live (the actor device)."""

    def policy(params, obs, env_ids, update, step):
        logits, value = apply_fn(params, obs)
        action = sample_actions(per_env_keys(action_root, env_ids, update, step), logits)
        return action, logits, value

    return jax.jit(policy)


@dataclasses.dataclass
class ActorSpec:
    """One actor thread's place in the run."""

    actor: int          # local actor device index (into layout.actor_devices)
    thread: int         # thread index on that device
    device: Any
    first_env: int      # global index of env 0 of this thread
    num_envs: int


class Actor:
    """Collects rollouts ``start .. end - 1`` into ``out_queue``.

    Args:
      spec: where this thread sits.
      env_factory: ``(num_envs, first_env) -> HostEnv``.
      policy: from ``make_policy_fn``.
      params: the ParamsServer.
      out_queue: ``queue.Queue(maxsize=1)`` read by the learner in a fixed order.
      layout: the run's Layout (learner shards).
      config: the run config (pipeline, num_steps, debug knobs, timeouts).
      start, end: rollout indices.
      stop: shared StopControl.
    """

    def __init__(self, spec: ActorSpec, env_factory, policy, params: ParamsServer,
                 out_queue: queue.Queue, layout: Layout, config, start: int, end: int,
                 stop: StopControl):
        self.spec, self.env_factory, self.policy = spec, env_factory, policy
        self.params, self.out_queue, self.layout = params, out_queue, layout
        self.config, self.start, self.end, self.stop = config, start, end, stop
        self.thread = threading.Thread(
            target=self._run, name=f"actor-{spec.actor}-{spec.thread}", daemon=True)
        # Jitter RNG: its own stream, never touching the data keys.
        self._jitter = np.random.default_rng([config.seed, spec.first_env, 7])

    def _run(self) -> None:
        env = None
        try:
            env = self.env_factory(self.spec.num_envs, self.spec.first_env)
            obs = env.reset().obs
            first, n = self.spec.first_env, self.spec.num_envs
            env_ids = jax.device_put(np.arange(first, first + n, dtype=np.int32),
                                     self.spec.device)
            for r in range(self.start, self.end):
                item, obs = self._rollout(env, obs, env_ids, r)
                item.timers["actor_put_wait"] = pipeline.put(
                    self.out_queue, item, self.stop, self.config.queue_timeout_s)
        except pipeline.PipelineStopped:
            pass
        except BaseException as e:  # noqa: BLE001 - reaches the main thread via stop
            self.stop.fail(e)
        finally:
            if env is not None:
                env.close()

    def _rollout(self, env: HostEnv, obs: np.ndarray, env_ids, r: int):
        """Collects rollout ``r`` from ``obs`` with this thread's global ``env_ids [n]``
        (on the actor device); returns ``(RolloutItem, next obs)``."""
        cfg, spec = self.config, self.spec
        if r == cfg.debug.fail_actor_at_update and spec.actor == 0 and spec.thread == 0:
            raise RuntimeError(f"debug.fail_actor_at_update: actor failed at update {r}")
        timers = dict.fromkeys(("params_wait", "inference", "d2h", "env_step"), 0.0)
        version, params, timers["params_wait"] = self.params.get(
            pipeline.params_version(cfg.pipeline, r, self.start), spec.device, self.stop,
            cfg.queue_timeout_s)
        t_len, n = cfg.num_steps, spec.num_envs
        buf = _HostBuffers.empty(t_len, n, obs)
        logits, values = [], []
        ep_ret, ep_len, ep_cnt = 0.0, 0.0, 0
        for t in range(t_len):
            if self.stop.stopped:
                raise pipeline.PipelineStopped()
            t0 = time.perf_counter()
            action, logit, value = self.policy(params, jax.device_put(obs, spec.device),
                                               env_ids, np.int32(r), np.int32(t))
            action.block_until_ready()
            t1 = time.perf_counter()
            action_np = np.asarray(action)
            t2 = time.perf_counter()
            if cfg.debug.actor_jitter_ms > 0:
                time.sleep(self._jitter.uniform(0, cfg.debug.actor_jitter_ms) / 1000.0)
            ts = env.step(action_np)
            t3 = time.perf_counter()
            timers["inference"] += t1 - t0
            timers["d2h"] += t2 - t1
            timers["env_step"] += t3 - t2
            buf.write(t, obs, action_np, ts)
            logits.append(logit)
            values.append(value)
            done = ts.terminated | ts.truncated
            if done.any():
                ep_ret += float(env.stats.completed_return[done].sum())
                ep_len += float(env.stats.completed_length[done].sum())
                ep_cnt += int(done.sum())
            obs = ts.obs
        if r == cfg.debug.nan_at_update:
            buf.reward[:] = np.nan
        pieces, offsets = self._split(buf, jax.numpy.stack(logits), jax.numpy.stack(values),
                                      obs)
        item = RolloutItem(update=r, pieces=pieces, offsets=offsets,
                           episodes=(ep_ret, ep_len, ep_cnt), timers=timers,
                           params_version=version)
        return item, obs

    def _split(self, buf: "_HostBuffers", logits, values, bootstrap_obs):
        """Slices of this thread's envs for every overlapping learner shard, placed there."""
        lo_t, hi_t = self.spec.first_env, self.spec.first_env + self.spec.num_envs
        pieces, offsets = {}, {}
        for s, device, lo_s, hi_s in self.layout.local_shards():
            lo, hi = max(lo_t, lo_s), min(hi_t, hi_s)
            if lo >= hi:
                continue
            a, b = lo - lo_t, hi - lo_t
            host = Trajectory(
                obs=buf.obs[:, a:b], action=buf.action[:, a:b], reward=buf.reward[:, a:b],
                terminated=buf.terminated[:, a:b], truncated=buf.truncated[:, a:b],
                behaviour_logits=logits[:, a:b], behaviour_value=values[:, a:b],
                bootstrap_obs=bootstrap_obs[a:b],
            )
            pieces[s] = jax.device_put(host, device)
            offsets[s] = lo
        return pieces, offsets


@dataclasses.dataclass
class _HostBuffers:
    """Host arrays of one rollout, ``[T, n, ...]``; fresh per rollout (device_put may alias)."""

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray

    @classmethod
    def empty(cls, t_len: int, n: int, obs: np.ndarray) -> "_HostBuffers":
        return cls(
            obs=np.empty((t_len,) + obs.shape, obs.dtype),
            action=np.empty((t_len, n), np.int32),
            reward=np.empty((t_len, n), np.float32),
            terminated=np.empty((t_len, n), bool),
            truncated=np.empty((t_len, n), bool),
        )

    def write(self, t: int, obs, action, ts) -> None:
        self.obs[t] = obs
        self.action[t] = action
        self.reward[t] = ts.reward
        self.terminated[t] = ts.terminated
        self.truncated[t] = ts.truncated
