"""Sebulba: EnvPool envs on host threads, policy on actor devices, data-parallel learner.

(Podracer, Hessel et al. 2021, arXiv 2104.06272; pipeline timing from Cleanba, Huang et al.
2023, arXiv 2310.00036.) Actor threads fill ``queue.Queue(maxsize=1)`` queues that the
learner (this, the main thread) reads in a fixed order; see ``sebulba.pipeline`` for how the
``pipeline`` field fixes which params each rollout uses.
"""

from __future__ import annotations

import functools
import queue
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from envs import registry
from rlcore import config as rlconfig
from rlcore import distributed
from rlcore.checkpoint import SignalFlag
from rlcore.learner import init_learner_state
from rlcore.networks import make_network
from rlcore.rundir import RunDir
from rlcore.seeding import Roots, host_env_seed
from rlcore.types import LearnerState
from sebulba import learner as sl
from sebulba import pipeline
from sebulba.actor import Actor, ActorSpec, make_policy_fn

JOIN_TIMEOUT_S = 30.0
TIMERS = ("params_wait", "inference", "d2h", "env_step", "actor_put_wait")


def prepare(config) -> None:
    """Joins the runtime, then checks every Sebulba field (before anything compiles).

    Raises:
      ConfigError: ``"field: what is wrong"``.
    """
    rlconfig.validate_distributed(config)
    distributed.initialize(config)
    rlconfig.validate(config, "sebulba", distributed.device_counts())


class SebulbaRun:
    """The pieces of one Sebulba run: layout, network, learner step, params server."""

    def __init__(self, config):
        self.config = config
        self.layout = pipeline.make_layout(config)
        self.derived = rlconfig.derive(config, self.layout.learner_mesh.devices.size)
        self.spec = registry.obs_spec(config.env_id)
        self.network = make_network(config.network, self.spec)
        self.optimizer = rlconfig.optimizer(config, self.derived)
        self.roots = Roots.from_seed(config.seed)
        self.learner_step = sl.make_learner_step(
            config, self.network.apply, self.optimizer, rlconfig.loss_hparams(config),
            rlconfig.unroll(config), self.layout, self.roots)
        self.policy = make_policy_fn(self.network.apply, self.roots.action)

    def init_state(self) -> LearnerState:
        init = functools.partial(init_learner_state, self.network, self.optimizer,
                                 self.roots.init, self.spec)
        return jax.jit(init, out_shardings=distributed.replicated(self.layout.learner_mesh))()

    def start_actors(self, start: int, end: int, server, stop) -> tuple[list, list]:
        """Starts one thread per (actor device, thread); returns (actors, queues) in the
        fixed order the learner reads them."""
        cfg, layout = self.config, self.layout
        base_seed = host_env_seed(cfg.seed, start)

        def env_factory(n, first):
            return registry.make_host_env(cfg.env_id, n, seed=base_seed, first_env_index=first,
                                          num_threads=cfg.env_threads)

        actors, queues = [], []
        for a, device in enumerate(layout.actor_devices):
            for j in range(cfg.num_actor_threads):
                q = queue.Queue(maxsize=1)
                spec = ActorSpec(actor=a, thread=j, device=device,
                                 first_env=layout.thread_offset(a, j),
                                 num_envs=layout.envs_per_thread)
                actors.append(Actor(spec, env_factory, self.policy, server, q, layout, cfg,
                                    start, end, stop))
                queues.append(q)
        for actor in actors:
            actor.thread.start()
        return actors, queues


def train(config, workdir: str | None, *, on_batch=None) -> list[dict]:
    """Runs Sebulba training; writes the run directory; returns the logged rows.

    Args:
      config: a validated config (see ``prepare``).
      workdir: run directory, or None.
      on_batch: test hook ``(update, Trajectory)`` called with each assembled batch.

    Raises:
      RuntimeError: an actor thread failed (chained to its exception).
      SystemExit: 130/143 after SIGINT/SIGTERM, once a checkpoint is written.
    """
    run = SebulbaRun(config)
    total = run.derived.num_updates
    rundir = RunDir(config, workdir, total, run.derived.steps_per_update)
    state = rundir.restore_or(run.init_state())
    start = int(distributed.to_host(state.update))
    stop = pipeline.StopControl()
    server = pipeline.ParamsServer(run.layout.actor_devices)
    server.publish(start, state.params)
    actors: list = []
    t0 = time.perf_counter()
    try:
        # A signal is acted on after the current update (the actors keep producing, so the
        # learner gets there), where every process agrees, checkpoints and exits.
        with SignalFlag() as flag:
            actors, queues = run.start_actors(start, total, server, stop)
            for u in range(start, total):
                items, wait_s = _collect(queues, stop, config.queue_timeout_s, u)
                batch = sl.assemble(items, run.layout)
                if on_batch is not None:
                    on_batch(u, batch)
                episodes = sl.episode_array(items, run.layout)
                t_learn = time.perf_counter()
                state, out = run.learner_step(state, batch, episodes, jnp.int32(u))
                server.publish(u + 1, state.params)
                out = distributed.to_host(out)
                learn_s = time.perf_counter() - t_learn
                if t0 is not None:
                    print(f"first update done after {time.perf_counter() - t0:.1f} s",
                          file=sys.stderr)
                    t0 = None
                rundir.record(u + 1, _scalars(out, items, wait_s, learn_s), out.episodes)
                rundir.after_update(u + 1, u, state, flag)
    except pipeline.PipelineStopped:
        stop.raise_if_failed()
        raise
    finally:
        stop.stop()
        try:
            _join(actors)
        finally:
            rundir.close()
    stop.raise_if_failed()
    return rundir.history


def _collect(queues, stop, timeout_s, update):
    """One item from every actor queue, in the fixed order; returns (items, seconds waited)."""
    items, waited = [], 0.0
    for q in queues:
        item, w = pipeline.get(q, stop, timeout_s)
        if item.update != update:
            raise RuntimeError(f"actor sent rollout {item.update}, learner expected {update}")
        items.append(item)
        waited += w
    return items, waited


def _scalars(out, items, wait_s, learn_s) -> dict:
    """Loss scalars and per-stage seconds of one update (actor timers averaged over threads)."""
    row = out.loss.scalars()
    for name in TIMERS:
        row[f"time/{name}_s"] = float(np.mean([it.timers.get(name, 0.0) for it in items]))
    row["time/rollout_queue_wait_s"] = wait_s
    row["time/learner_step_s"] = learn_s
    row["params_lag"] = float(np.mean([items[0].update - it.params_version for it in items]))
    return row


def _join(actors) -> None:
    """Joins the actor threads; raises if one is still alive after ``JOIN_TIMEOUT_S``
    (only when no other exception is already on its way out)."""
    deadline = time.perf_counter() + JOIN_TIMEOUT_S
    for actor in actors:
        actor.thread.join(timeout=max(deadline - time.perf_counter(), 0.0))
    alive = [a.thread.name for a in actors if a.thread.is_alive()]
    if not alive:
        return
    message = f"actor threads did not stop within {JOIN_TIMEOUT_S} s: {alive}"
    if sys.exc_info()[1] is not None:
        print(message, file=sys.stderr)
    else:
        raise RuntimeError(message)
