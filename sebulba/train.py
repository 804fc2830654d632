"""Sebulba: host envs, policy on actor devices, data-parallel learner.

Host envs are EnvPool pools or jittable envs served on a host CPU device
(``envs.jax_host.JaxHostEnv``); ``envs.registry.resolve(env_id, "sebulba")`` picks which.

(Podracer, Hessel et al. 2021, arXiv 2104.06272; pipeline timing from Cleanba, Huang et al.
2023, arXiv 2310.00036.) Actor threads fill ``queue.Queue(maxsize=1)`` queues
(``pipeline.RolloutQueue``) that the learner (this, the main thread) reads in a fixed order;
see ``sebulba.pipeline`` for how the ``pipeline`` field fixes which params each rollout uses.
While the learner stays long in one stage, ``sebulba.progress`` says so on the console.
"""

from __future__ import annotations

import functools
import sys
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np

from envs import registry
from rlcore.learner import init_learner_state
from rlcore.networks import initial_core, make_network
from rlcore.normalize import maybe_normalized, observer, reward_scaling
from rlcore.optim import optimizer_for
from rlcore.seeding import Roots, host_env_seed, train_eval_host_seed
from rlcore.types import LearnerState
from runtime import distributed, failure, memory, train_command
from runtime.cadence import train_eval_due
from runtime.config import (
    DeviceCounts,
    HostMemory,
    ModeChecks,
    choice,
    derive,
    int_at_most,
    int_in,
    is_int,
    number,
    positive_int,
    require,
    shown,
)
from runtime.exits import ExitNow
from runtime.fields import hparams_of
from runtime.metrics import eval_scalars
from runtime.rundir import RunDir
from runtime.signals import SignalFlag
from runtime.sweep import swept
from sebulba import learner as sl
from sebulba import pipeline
from sebulba.actor import Actor, ActorSpec, make_final_value_fn, make_policy_fn
from sebulba.episodes import EvalPool
from sebulba.host_envs import make_host_env
from sebulba.layout import make_layout
from sebulba.progress import Progress

JOIN_TIMEOUT_S = 30.0
ABANDON_JOIN_S = 2.0  # the actors' join when an update is left in flight (see ``train``)
# Actor stage seconds of a rollout (actor_put_wait: the hand-over of the previous rollout).
TIMERS = ("params_wait", "inference", "d2h", "env_step", "actor_put_wait")


def check_fields(config, counts: DeviceCounts) -> int:
    """Checks the Sebulba fields; returns the number of learner shards over all processes."""
    n_local = counts.local_devices
    for field in ("actor_device_ids", "learner_device_ids"):
        ids = config[field]
        require(isinstance(ids, tuple) and len(ids) > 0 and all(is_int(i) for i in ids),
                field, f"must be a non-empty tuple of ints, got {ids!r}")
        require(all(0 <= i < n_local for i in ids), field,
                f"{ids} out of range: this process has {n_local} devices (0..{n_local - 1})")
        require(len(set(ids)) == len(ids), field, f"repeats a device: {ids}")
    positive_int(config, "num_actor_threads")
    require(config.num_seeds == 1, "num_seeds",
            f"Sebulba trains one agent per run, got {config.num_seeds!r} (Anakin runs many)")
    require(not swept(config), "sweep",
            f"Sebulba trains one agent per run, got a sweep of {', '.join(swept(config))} "
            "(Anakin sweeps in one program)")
    choice(config, "pipeline", pipeline.PIPELINES)
    int_in(config, "env_threads", 0, ">= 0 (0: EnvPool's default)")
    number(config, "queue_timeout_s")
    require(config.queue_timeout_s > 0, "queue_timeout_s", "must be > 0")
    jitter = config.debug.actor_jitter_ms
    require(is_int(jitter) and jitter >= 0, "debug.actor_jitter_ms",
            f"must be an integer >= 0, got {shown(jitter)}")
    int_at_most("debug.actor_jitter_ms", jitter)  # time.sleep overflows on huge ones
    positive_int(config, "num_envs")
    actors = counts.processes * len(config.actor_device_ids) * config.num_actor_threads
    require(config.num_envs % actors == 0, "num_envs",
            f"{config.num_envs} envs do not split over {counts.processes} processes x "
            f"{len(config.actor_device_ids)} actor devices x {config.num_actor_threads} threads")
    return counts.processes * len(config.learner_device_ids)


# Rollouts per actor thread alive at once: queued, being filled, held by the learner.
QUEUE_DEPTH = 3


def host_bytes(config, spec, num_processes: int = 1) -> int:
    """Host bytes of this process's rollouts: ``QUEUE_DEPTH`` rollouts per actor thread plus
    the learner's assembled batch (one rollout of every local env); a rollout of ``n`` envs
    is ``runtime.memory.rollout_bytes``: ``(T + 1) * n`` obs and ``T * n`` steps of the other
    fields (actors ship no values)."""
    threads = len(config.actor_device_ids) * config.num_actor_threads
    local_envs = config.num_envs // num_processes
    optional = memory.optional_step_bytes(config)
    per_thread = memory.rollout_bytes(config.num_steps, local_envs // threads, spec, optional)
    return (QUEUE_DEPTH * threads * per_thread
            + memory.rollout_bytes(config.num_steps, local_envs, spec, optional))


def devices_used(config, num_shards: int, num_processes: int) -> int:
    """Local actor and learner devices (those that share the host's RAM on CPU)."""
    del num_shards, num_processes
    return len(set(config.actor_device_ids) | set(config.learner_device_ids))


# What validation and the memory check need of Sebulba: its fields, the ids it runs
# (EnvPool ones and jittable ones through JaxHostEnv, see envs.registry) and their specs;
# one agent; the actors' params may be older than the learner's, so they ship no values;
# the rollout queues live in host memory.
MODE = ModeChecks(
    name="sebulba", check_fields=check_fields, check_env_id=registry.check_host_env_id,
    env_spec=registry.host_env_spec, num_agents=lambda config: 1, rollout_values=False,
    devices_used=devices_used,
    host_memory=HostMemory(bytes=host_bytes, what="the actors' rollouts",
                           detail=f"{QUEUE_DEPTH} per actor thread and the learner's batch",
                           fields="num_envs, num_steps or num_actor_threads"))


# ``prepare(config)``: joins the runtime and checks every field before anything compiles.
prepare = functools.partial(train_command.prepare, mode=MODE)


class SebulbaRun:
    """The pieces of one Sebulba run: layout, network, learner step, params server."""

    def __init__(self, config):
        self.config = config
        self.layout = make_layout(config)
        shards = self.layout.learner_mesh.devices.size
        self.derived = derive(config, shards)
        self.spec = registry.host_env_spec(config.env_id)
        self.network = maybe_normalized(
            make_network(config.network, self.spec, config.recurrent, config.recurrent_hidden),
            self.spec.obs_shape, config.normalize_obs, config.normalize_reward,
            config.normalize_obs_clip)
        self.hparams = hparams_of(config).replace(**memory.update_plan(
            config, self.spec, MODE, shards, distributed.device_counts().processes).fields())
        self.optimizer = optimizer_for(self.hparams, self.derived.num_updates)
        self.roots = Roots.from_seed(config.seed)
        self.learner_step = sl.make_learner_step(
            self.hparams, self.network.apply, self.optimizer, self.layout, self.roots,
            initial_core(self.network, 1), config.bootstrap_time_limits,
            config.normalize_reward, observer(self.network))
        self.policy = make_policy_fn(self.network.apply, self.roots.action)
        self.final_value = (make_final_value_fn(self.network.apply)
                            if config.bootstrap_time_limits else None)

    def make_eval_pool(self) -> EvalPool | None:
        """The evaluation envs (seeds ``train_eval_host_seed(seed)``) and greedy policy on the
        first actor device; None when ``eval_every`` is 0."""
        cfg = self.config
        if not cfg.eval_every:
            return None
        env = make_host_env(cfg.env_id, cfg.eval_episodes, seed=train_eval_host_seed(cfg.seed),
                            num_threads=cfg.env_threads)
        return EvalPool(env, self.network.apply, self.layout.actor_devices[0],
                        cfg.eval_max_steps, functools.partial(initial_core, self.network))

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
            return make_host_env(cfg.env_id, n, seed=base_seed, first_env_index=first,
                                 num_threads=cfg.env_threads)

        actors, queues = [], []
        for a, device in enumerate(layout.actor_devices):
            for j in range(cfg.num_actor_threads):
                q = pipeline.RolloutQueue()
                spec = ActorSpec(
                    name=f"actor-{a}-{j}", device=device, first_env=layout.thread_offset(a, j),
                    num_envs=layout.envs_per_thread, slices=layout.thread_slices(a, j),
                    num_steps=cfg.num_steps, pipeline=cfg.pipeline, start=start, end=end,
                    timeout_s=cfg.queue_timeout_s, seed=cfg.seed,
                    jitter_ms=cfg.debug.actor_jitter_ms,
                    fail_at_update=cfg.debug.fail_actor_at_update if a == j == 0 else -1,
                    nan_at_update=cfg.debug.nan_at_update,
                    initial_core=functools.partial(initial_core, self.network),
                    reward_scaling=reward_scaling(cfg))
                actors.append(Actor(spec, env_factory, self.policy, server, q, stop,
                                    self.final_value))
                queues.append(q)
        for actor in actors:
            actor.thread.start()
        return actors, queues


def train(config, workdir: str | None, *, on_batch=None) -> list[dict]:
    """Runs Sebulba training; writes the run directory; returns the logged rows.

    A signal (SIGINT/SIGTERM) stops the run at the last completed update: a checkpoint of
    it, then exit 130/143. The learner acts on it within ``pipeline.POLL_S`` while it waits
    for rollouts or for its update in flight: that update is abandoned (its metrics never
    written) and the state before it, kept alive for this, is saved from host copies of its
    arrays (an orbax save of device arrays would wait for the update still running there);
    the command then ends the process at once (``exits.ExitNow``: an interpreter exit would
    wait for it too). With several processes a signal seen by any of them stops all of
    them, agreed through the coordination service, not device collectives
    (``distributed.StopBoard``): they checkpoint the same update, the last one any of them
    completed (a process one behind finishes its update in flight first).

    Args:
      config: a validated config (see ``prepare``).
      workdir: run directory, or None.
      on_batch: test hook ``(update, Trajectory)`` called with each assembled batch.

    Raises:
      RuntimeError: an actor thread failed (chained to its exception).
      SystemExit: 130/143 after SIGINT/SIGTERM, once a checkpoint is written
        (``exits.ExitNow`` when an update was left in flight).
    """
    run = SebulbaRun(config)
    total = run.derived.num_updates
    rundir = RunDir(config, workdir, total, run.derived.steps_per_update)
    state = rundir.restore_or(run.init_state())
    start = int(distributed.to_host(state.update))
    stop = pipeline.StopControl()
    server = pipeline.ParamsServer(run.layout.actor_devices)
    evaluator = run.make_eval_pool()
    server.publish(start, state.params)
    actors: list = []
    progress = None
    in_flight = False  # a signal left an update running on the devices
    t0 = time.perf_counter()
    try:
        with SignalFlag() as flag:
            actors, queues = run.start_actors(start, total, server, stop)
            progress = Progress(queues, total, run.layout.envs_per_thread * config.num_steps,
                                enabled=rundir.main)
            board = distributed.StopBoard()  # the signals of every process (see docstring)

            def interrupted():
                return board.requested(flag.exit_code) is not None

            for u in range(start, total):
                progress.stage(u, "waiting")
                try:
                    items, wait_s = _collect(queues, stop, config.queue_timeout_s, u,
                                             interrupted)
                except pipeline.Interrupted:
                    board.agree_on_update(u)  # u: no process can be further (see StopBoard)
                    rundir.checkpoint_or_exit(u, u, state, board.requested(flag.exit_code))
                if t0 is not None:
                    rundir.first_rollout(time.perf_counter() - t0)
                with stop.learner_busy():  # the actors' waits do not time out meanwhile
                    batch = sl.assemble(items, run.layout)
                    if on_batch is not None:
                        on_batch(u, batch)
                    progress.stage(u, "training" if t0 is None else "compiling")
                    t_learn = time.perf_counter()
                    new_state, out = run.learner_step(state, batch,
                                                      sl.episode_array(items, run.layout),
                                                      jnp.int32(u))
                    progress.stage(u, "training")
                    server.publish(u + 1, new_state.params)
                    # debug.learner_delay_ms: the run's first update (it compiles) is not held.
                    hold_s = 0.0 if t0 is not None else config.debug.learner_delay_ms / 1000
                    if (not _wait_ready((new_state, out), interrupted, hold_s)
                            and board.agree_on_update(u) == u):
                        # Abandoned: checkpoint the update before it, from host copies of its
                        # arrays (a save of device arrays would wait for the update in flight).
                        in_flight = True
                        rundir.checkpoint_or_exit(u, u, distributed.to_host(state),
                                                  board.requested(flag.exit_code),
                                                  in_flight=u + 1)
                    # Done, or a peer finished it before it stopped: this process does too.
                    _wait_ready((new_state, out), None)
                    state = new_state
                    out = distributed.to_host(out)
                    learn_s = time.perf_counter() - t_learn
                    if t0 is not None:  # the first update compiles the learner step
                        now = time.perf_counter()
                        rundir.first_call_done(1, now - t0, steady_from=(u + 1, now))
                        t0 = None
                    evals = _evaluate(run, server, evaluator, stop, interrupted, u + 1,
                                      progress)
                    progress.stage(u, None)
                    rundir.record(u + 1, {**_scalars(out, items, wait_s, learn_s), **evals},
                                  out.episodes)
                    exit_code = board.requested(flag.exit_code)
                    if exit_code is not None:
                        board.agree_on_update(u + 1)
                    rundir.checkpoint_or_exit(u + 1, u, state, exit_code)
    except pipeline.PipelineStopped:
        stop.raise_if_failed()
        raise
    except SystemExit as e:
        if in_flight:
            raise ExitNow(e.code) from None
        raise
    finally:
        stop.stop()
        try:
            # Left in flight, the update holds the devices: an actor inside a policy call on
            # one of them would wait for it; the process ends without them (ExitNow).
            _join(actors, ABANDON_JOIN_S if in_flight else JOIN_TIMEOUT_S, quiet=in_flight)
        finally:  # every one closed (its threads stopped) even when another fails
            closers = [rundir.close, *([evaluator.close] if evaluator is not None else []),
                       *([progress.close] if progress is not None else [])]
            failure.close_all(*closers)
    stop.raise_if_failed()
    return rundir.history


def _wait_ready(tree, interrupted, hold_s: float = 0.0) -> bool:
    """Waits until every array of ``tree`` is computed, and ``hold_s`` more (a test knob);
    True then. With ``interrupted`` (None: wait to the end) polled every ``pipeline.POLL_S``:
    False as soon as it is true, the arrays still being computed (a helper thread waits on
    them, so the wait ends the moment they are ready)."""
    leaves = jax.tree.leaves(tree)
    done = threading.Event()

    def wait():
        try:
            jax.block_until_ready(leaves)
        except Exception:  # noqa: BLE001 - a failed computation: reading the arrays raises it
            pass
        if hold_s:
            time.sleep(hold_s)
        done.set()

    if interrupted is None:
        wait()
        return True
    threading.Thread(target=wait, name="learner-wait", daemon=True).start()
    while not done.wait(pipeline.POLL_S):
        if interrupted():
            return False
    return True


def _evaluate(run, server, evaluator, stop, interrupted, version: int, progress) -> dict:
    """The eval scalars after update ``version`` when one is due (else none). A signal or
    a failed thread abandons the evaluation: no eval values that time."""
    config = run.config
    if evaluator is None or not train_eval_due(version, config.eval_every):
        return {}
    progress.stage(version - 1, "evaluating")
    _, params, _ = server.get(version, run.layout.actor_devices[0], stop,
                              config.queue_timeout_s)
    summary = evaluator.run(params, lambda: stop.stopped or interrupted())
    return eval_scalars(summary) if summary is not None else {}


def _collect(queues, stop, timeout_s, update, interrupted=None):
    """One item from every actor queue, in the fixed order; returns (items, seconds waited).

    Raises:
      pipeline.Interrupted: ``interrupted()`` became true while waiting.
    """
    items, waited = [], 0.0
    for q in queues:
        item, w = pipeline.get(q, stop, timeout_s, interrupted)
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


def _join(actors, timeout_s: float = JOIN_TIMEOUT_S, quiet: bool = False) -> None:
    """Joins the actor threads; raises if one is still alive after ``timeout_s`` (only when
    no other exception is already on its way out; never when ``quiet``)."""
    deadline = time.perf_counter() + timeout_s
    for actor in actors:
        actor.thread.join(timeout=max(deadline - time.perf_counter(), 0.0))
    alive = [a.thread.name for a in actors if a.thread.is_alive()]
    if not alive or quiet:
        return
    message = f"actor threads did not stop within {timeout_s} s: {alive}"
    if sys.exc_info()[1] is not None:
        print(message, file=sys.stderr)
    else:
        raise RuntimeError(message)
