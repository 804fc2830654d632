"""Sebulba: host envs, policy on actor devices, data-parallel learner.

Host envs are EnvPool pools or jittable envs served on a host CPU device
(``envs.jax_host.JaxHostEnv``); ``envs.registry.resolve(env_id, "sebulba")`` picks which.

(Podracer, Hessel et al. 2021, arXiv 2104.06272; pipeline timing from Cleanba, Huang et al.
2023, arXiv 2310.00036.) Actor threads fill ``pipeline.RolloutQueue`` queues (of
``pipeline.queue_capacity`` rollouts) that the learner (``LearnerLoop``, the main thread)
reads in a fixed order; see ``sebulba.pipeline`` for how the ``policy_lag`` and ``pipeline``
fields fix which params each rollout uses. While the learner stays long in one stage,
``sebulba.progress`` says so on the console.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import threading
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding

from envs import registry
from rlcore.algorithms import make_algorithm
from rlcore.learner import init_learner_state, own_state_init
from rlcore.networks import initial_core
from rlcore.normalize import observer
from rlcore.optim import optimizer_for
from rlcore.seeding import Roots, host_env_seed, train_eval_host_seed
from rlcore.types import LearnerState, Trajectory, state_partition
from runtime import distributed
from runtime.commands import train as train_command
from runtime.commands.result import RunResult, run_result
from runtime.config import build, memory_check
from runtime.config.env_args import env_kwargs_of, evaluation_kwargs_of
from runtime.config.resolved import recorded, resolve
from runtime.config.xla_flags import compile_cache_hits
from runtime.process import failure
from runtime.process.exits import ExitNow
from runtime.process.signals import SignalFlag
from runtime.run.cadence import train_eval_due
from runtime.run.directory import RunDir
from runtime.run.metrics import eval_scalars
from sebulba import learner as sl
from sebulba import pipeline, timers
from sebulba.actor import Actor, ActorSpec, RolloutItem, make_final_value_fn, make_policy_fn
from sebulba.episodes import EvalPool
from sebulba.host_envs import make_host_env
from sebulba.layout import make_layout
from sebulba.mode import MODE
from sebulba.progress import COMPILING, EVALUATING, TRAINING, WAITING, Progress

JOIN_TIMEOUT_S = 30.0
ABANDON_JOIN_S = 2.0  # the actors' join when an update is left in flight (see ``train``)


# ``prepare(config)``: joins the runtime and checks every field before anything compiles.
prepare = functools.partial(train_command.prepare, mode=MODE)


class SebulbaRun:
    """The pieces of one Sebulba run: layout, network, learner step, params server."""

    def __init__(self, config):
        processes = distributed.device_counts().processes
        self.resolved = resolve(config, MODE, processes * len(config.learner_device_ids),
                                processes)
        self.config = config = recorded(config, self.resolved)
        self.layout = make_layout(config)
        self.derived, self.spec = self.resolved.sizes, self.resolved.spec
        lag = self.resolved.policy_lag or 0
        learner = self.resolved.learner
        self.network, self.hparams, self.optimizer = (
            learner.network, learner.hparams, learner.optimizer)
        self.roots = Roots.from_seed(config.seed)
        self.from_cache = False  # the compile cache served the learner step (compile_learner)
        # The learner step builds its optimizer from the run's length, a traced argument.
        optimizer_of = functools.partial(optimizer_for, self.hparams, policy_lag=lag)
        self.state_spec = state_partition(jax.eval_shape(self._init), sl.AXIS)
        self.learner_step = sl.make_learner_step(
            self.hparams, self.network.apply, optimizer_of, self.layout, self.roots,
            initial_core(self.network, 1), config.bootstrap_time_limits,
            config.normalize_reward, observer(self.network),
            info_names=self.spec.episode_info, state_spec=self.state_spec)
        self.policy = make_policy_fn(self.network.apply, self.roots.action,
                                     make_algorithm(self.hparams).act)
        self.final_value = (make_final_value_fn(self.network.apply)
                            if config.bootstrap_time_limits else None)

    def compile_learner(self, *args) -> None:
        """Compiles the learner update for its first call's ``args`` ahead of that call, and
        checks XLA's memory figure for it against the learner devices
        (``runtime.commands.train.check_memory``); the compiled program serves every
        update from then on (the same program ``jax.jit`` would have compiled).
        ``from_cache`` says whether the persistent compile cache served it.

        Raises:
          ConfigError: the update does not fit the devices (``memory_check``).
        """
        hits = compile_cache_hits()
        compiled = self.learner_step.lower(*args).compile()
        self.from_cache = compile_cache_hits() > hits
        train_command.check_memory(self.config, memory_check.compiled_refusal(
            self.config, compiled, self.spec, MODE, self.layout.learner_mesh.devices.size,
            distributed.device_counts().processes, "the learner update",
            self.hparams))
        self.learner_step = compiled

    def make_eval_pool(self) -> EvalPool | None:
        """The evaluation envs (seeds ``train_eval_host_seed(seed)``) and greedy policy on the
        first actor device; None when ``eval_every`` is 0."""
        cfg = self.config
        if not cfg.eval_every:
            return None
        env = make_host_env(cfg.env_id, cfg.eval_episodes, seed=train_eval_host_seed(cfg.seed),
                            num_threads=cfg.env_threads, **evaluation_kwargs_of(cfg))
        return EvalPool(env, self.network.apply, self.layout.actor_devices[0],
                        cfg.eval_max_steps, functools.partial(initial_core, self.network))

    def _init(self) -> LearnerState:
        """A fresh learner state, the algorithm's own included (unplaced: ``init_state``)."""
        own = own_state_init(self.hparams, self.spec, self.config.num_envs,
                             self.config.num_steps)
        return init_learner_state(self.network, self.optimizer, self.roots.init, self.spec, own)

    def init_state(self) -> LearnerState:
        """A fresh learner state on the learner mesh (``state_spec``: replicated, the
        algorithm's ``ByEnv`` state split on the env axis)."""
        mesh = self.layout.learner_mesh
        return jax.jit(self._init, out_shardings=jax.tree.map(
            lambda s: NamedSharding(mesh, s), self.state_spec))()

    def start_actors(self, start: int, end: int, server, stop) -> tuple[list, list]:
        """Starts one thread per (actor device, thread); returns (actors, queues) in the
        fixed order the learner reads them."""
        cfg, layout = self.config, self.layout
        base_seed = host_env_seed(cfg.seed, start)

        def env_factory(n, first):
            return make_host_env(cfg.env_id, n, seed=base_seed, first_env_index=first,
                                 num_threads=cfg.env_threads, **env_kwargs_of(cfg))

        actors, queues = [], []
        lag = MODE.policy_lag(cfg)
        for a, device in enumerate(layout.actor_devices):
            for j in range(cfg.num_actor_threads):
                q = pipeline.RolloutQueue(pipeline.queue_capacity(lag))
                spec = ActorSpec(
                    name=f"actor-{a}-{j}", device=device, first_env=layout.thread_offset(a, j),
                    num_envs=layout.envs_per_thread, slices=layout.thread_slices(a, j),
                    num_steps=cfg.num_steps, lag=lag, start=start, end=end,
                    timeout_s=cfg.queue_timeout_s, seed=cfg.seed,
                    jitter_ms=cfg.debug.actor_jitter_ms,
                    fail_at_update=cfg.debug.fail_actor_at_update if a == j == 0 else -1,
                    nan_at_update=cfg.debug.nan_at_update,
                    initial_core=functools.partial(initial_core, self.network),
                    reward_scaling=build.reward_scaling(cfg))
                actors.append(Actor(spec, env_factory, self.policy, server, q, stop,
                                    self.final_value))
                queues.append(q)
        for actor in actors:
            actor.thread.start()
        return actors, queues


def train(config, workdir: str | None, *, on_batch=None, on_row=None) -> list[dict]:
    """Runs Sebulba training (``train_result``); returns the logged rows."""
    return list(train_result(config, workdir, on_batch=on_batch, on_row=on_row).rows)


def train_result(config, workdir: str | None, *, on_batch=None, on_row=None) -> RunResult:
    """Runs Sebulba training; writes the run directory; returns the logged rows, the final
    params and the policy (``runtime.commands.result.RunResult``).

    The lifecycle around the learner's updates (``LearnerLoop``): the actors start inside the
    signal handlers, the learner runs its updates, and whatever ends the loop, the actors
    stop and are joined and every part is closed (``LearnerLoop.shutdown``).

    A signal (SIGINT/SIGTERM) stops the run at the last completed update: a checkpoint of
    it, then exit 130/143. The learner acts on it within ``pipeline.POLL_S`` while it waits
    for rollouts or for its update in flight: that update is abandoned (its metrics never
    written) and the state before it, kept alive for this, is saved from host copies of its
    arrays (an orbax save of device arrays would wait for the update still running there);
    the command then ends the process at once (``exits.ExitNow``: an interpreter exit would
    wait for it too). With several processes a signal seen by any of them stops all of
    them, agreed through the coordination service, not device collectives
    (``distributed.StopBoard``): they checkpoint the same update, the last one any of them
    completed (a process one behind finishes its update in flight first). See
    docs/design.md, "Signals and checkpoints".

    Args:
      config: a validated config (see ``prepare``).
      workdir: run directory, or None.
      on_batch: test hook ``(update, Trajectory)`` called with each assembled batch.
      on_row: called with each ``metrics.jsonl`` row as it is logged (a copy); a row for
        which it returns ``False`` ends the run after its update, checkpointed
        (docs/design.md, "From Python").

    Raises:
      RuntimeError: an actor thread failed (chained to its exception).
      SystemExit: 130/143 after SIGINT/SIGTERM, once a checkpoint is written
        (``exits.ExitNow`` when an update was left in flight).
    """
    learner = LearnerLoop.begin(SebulbaRun(config), workdir, on_batch, on_row)
    try:
        with SignalFlag() as flag:
            learner.start_actors(flag)
            for u in range(learner.start, learner.run.derived.num_updates):
                learner.update(u)
                if learner.rundir.stopped is not None:
                    break
    except pipeline.PipelineStopped:
        learner.stop.raise_if_failed()
        raise
    except SystemExit as e:
        if learner.in_flight:
            raise ExitNow(e.code) from None
        raise
    finally:
        learner.shutdown()
    learner.stop.raise_if_failed()
    run = learner.run
    return run_result(learner.rundir.history, learner.state.params, run.network,
                      run.spec.obs_shape, 1, int(distributed.to_host(learner.state.update)))


@dataclasses.dataclass
class LearnerLoop:
    """The learner of one run (the main thread) and what its steps share: each update is
    collect, assemble, step, publish, settle (wait for it, or abandon it on a signal) and
    record (docs/design.md, "Sebulba layout" and "Pipelines and staleness").

    Attributes:
      run: the run's pieces.
      rundir: its run directory.
      state: the last completed update's LearnerState.
      start: the first update to run (after a restored checkpoint's).
      stop: the StopControl shared with the actors.
      server: the ParamsServer the actors read.
      evaluator: the in-training evaluation, or None.
      on_batch: ``train``'s test hook, or None.
      compile_from: ``time.perf_counter()`` when the run began, until its first update (which
        compiles the learner step) is done; None after.
      actors, queues: the actor threads and their queues (the learner's order).
      progress: the console's progress lines (once the actors run).
      native: XLA's native output to the errors file, until the first update is done (its
        compiles: ``failure.NativeOutput``).
      flag, board: this process's signal flag and every process's (``distributed.StopBoard``).
      clock: when the wall-clock checkpoints fall, process 0's clock (``ClockBoard``).
      in_flight: a signal left an update running on the devices.
    """

    run: SebulbaRun
    rundir: RunDir
    state: LearnerState
    start: int
    stop: pipeline.StopControl
    server: pipeline.ParamsServer
    evaluator: EvalPool | None
    on_batch: Callable | None
    compile_from: float | None
    actors: list = dataclasses.field(default_factory=list)
    queues: list = dataclasses.field(default_factory=list)
    progress: Progress | None = None
    native: failure.NativeOutput | None = None
    flag: SignalFlag | None = None
    board: distributed.StopBoard | None = None
    clock: distributed.ClockBoard | None = None
    in_flight: bool = False

    @classmethod
    def begin(cls, run: SebulbaRun, workdir: str | None, on_batch=None,
              on_row=None) -> "LearnerLoop":
        """The run directory (``on_row``: called with each logged row), the restored (or
        fresh) state, the params server with its params and the evaluation envs; no thread
        runs yet."""
        rundir = RunDir(run.config, workdir, run.derived.num_updates,
                        run.derived.steps_per_update,
                        return_label=registry.return_axis_label(run.config.env_id),
                        on_row=on_row)
        state = rundir.restore_or(run.init_state())
        start = int(distributed.to_host(state.update))
        server = pipeline.ParamsServer(
            run.layout.actor_devices, pipeline.versions_kept(MODE.policy_lag(run.config)))
        evaluator = run.make_eval_pool()
        server.publish(start, state.params)
        return cls(run=run, rundir=rundir, state=state, start=start,
                   stop=pipeline.StopControl(), server=server, evaluator=evaluator,
                   on_batch=on_batch, compile_from=time.perf_counter())

    def start_actors(self, flag: SignalFlag) -> None:
        """Starts the actor threads and the progress lines, under the signal ``flag``."""
        run = self.run
        self.flag = flag
        self.native = failure.NativeOutput(failure.captured())
        self.native.start()  # the actors compile their policies, the learner its step
        self.actors, self.queues = run.start_actors(self.start, run.derived.num_updates,
                                                    self.server, self.stop)
        self.progress = Progress(self.queues, run.derived.num_updates,
                                 run.layout.envs_per_thread * run.config.num_steps,
                                 enabled=self.rundir.main)
        self.board = distributed.StopBoard()  # the signals of every process (see ``train``)
        self.clock = distributed.ClockBoard()

    def exit_code(self) -> int | None:
        """The exit code a signal to any process asks for, or None."""
        return self.board.requested(self.flag.exit_code)

    def interrupted(self) -> bool:
        return self.exit_code() is not None

    def update(self, u: int) -> None:
        """Update ``u`` (0-based), from its rollouts to its metrics line and checkpoint."""
        stages = timers.Timers(timers.LEARNER)
        items = self.collect(u, stages)
        with self.stop.learner_busy():  # the actors' waits do not time out meanwhile
            batch = self.assemble(u, items)
            self.progress.stage(u, TRAINING if self.compile_from is None else COMPILING)
            with stages.time(timers.LEARNER_STEP):
                new_state, out = self.step(u, batch, items)
                self.publish(u, new_state)
                out = self.settle(u, new_state, out)
            self.first_update_done(u)
            self.record(u, out, items, stages)

    def collect(self, u: int, stages: timers.Timers) -> list[RolloutItem]:
        """Every actor's rollout ``u``; a signal meanwhile checkpoints update ``u`` (the last
        completed: no process can be further, see ``distributed.StopBoard``) and exits."""
        self.progress.stage(u, WAITING)
        try:
            with stages.time(timers.ROLLOUT_QUEUE_WAIT):
                items = _collect(self.queues, self.stop, self.run.config.queue_timeout_s, u,
                                 self.interrupted)
        except pipeline.Interrupted:
            self.board.agree_on_update(u)
            self.rundir.checkpoint_or_exit(u, u, self.state, self.exit_code())
        if self.compile_from is not None:
            self.rundir.first_rollout(time.perf_counter() - self.compile_from,
                                      self.run.layout.describe())
        return items

    def assemble(self, u: int, items: list[RolloutItem]) -> Trajectory:
        """The global batch of rollout ``u`` (``on_batch`` sees it)."""
        batch = sl.assemble(items, self.run.layout)
        if self.on_batch is not None:
            self.on_batch(u, batch)
        return batch

    def step(self, u: int, batch: Trajectory, items: list[RolloutItem]):
        """Dispatches update ``u``; returns ``(new state, LearnerOutput)``, still being
        computed."""
        run = self.run
        args = (self.state, batch, sl.episode_array(items, run.layout, run.spec.episode_info),
                jnp.int32(u), jnp.int32(run.derived.num_updates))
        if self.compile_from is not None:  # the first update compiles: nothing new to save
            self.flag.compiling()
            run.compile_learner(*args)
        new_state, out = run.learner_step(*args)
        self.flag.compiled()
        self.progress.stage(u, TRAINING)
        return new_state, out

    def publish(self, u: int, new_state: LearnerState) -> None:
        """Hands the params after update ``u`` (version ``u + 1``) to the actors."""
        self.server.publish(u + 1, new_state.params)

    def settle(self, u: int, new_state: LearnerState, out):
        """Waits for update ``u``; returns its ``LearnerOutput`` on the host, ``new_state``
        being the last completed state from then on. A signal meanwhile abandons the update,
        unless a peer finished it: the state before it is checkpointed from host copies of
        its arrays (a save of device arrays would wait for the update in flight), then
        exit."""
        # debug.learner_delay_ms: the run's first update (it compiles) is not held.
        hold_s = (0.0 if self.compile_from is not None
                  else self.run.config.debug.learner_delay_ms / 1000)
        if (not _wait_ready((new_state, out), self.interrupted, hold_s)
                and self.board.agree_on_update(u) == u):
            self.in_flight = True
            self.rundir.checkpoint_or_exit(u, u, distributed.to_host(self.state),
                                           self.exit_code(), in_flight=u + 1)
        # Done, or a peer finished it before it stopped: this process does too.
        _wait_ready((new_state, out), None)
        self.state = new_state
        return distributed.to_host(out)

    def first_update_done(self, u: int) -> None:
        """After the run's first update (it compiles the learner step): its timing, and
        training time counts from now."""
        if self.compile_from is None:
            return
        now = time.perf_counter()
        self.rundir.first_call_done(1, now - self.compile_from, steady_from=(u + 1, now),
                                    from_cache=self.run.from_cache)
        self.compile_from = None
        self.native.stop()

    def record(self, u: int, out, items: list[RolloutItem], stages: timers.Timers) -> None:
        """Update ``u``'s evaluation (when due), metrics line and checkpoint (by updates or
        by process 0's clock; and exit on a signal, agreed with every process)."""
        evals = _evaluate(self.run, self.server, self.evaluator, self.stop, self.interrupted,
                          u + 1, self.progress)
        self.progress.stage(u, None)
        self.rundir.record(u + 1, {**_scalars(out, items, stages), **evals}, out.episodes)
        exit_code = self.exit_code()
        if exit_code is not None:
            self.board.agree_on_update(u + 1)
        clock = self.clock.due(u + 1, self.rundir.clock_due())
        self.rundir.checkpoint_or_exit(u + 1, u, self.state, exit_code, clock=clock)

    def shutdown(self) -> None:
        """Stops the actors and joins them, then closes every part (each one even when
        another fails). Left in flight, the update holds the devices: an actor inside a
        policy call on one of them would wait for it, so the join is short and quiet (the
        process ends without them: ``exits.ExitNow``)."""
        self.stop.stop()
        try:
            _join(self.actors, ABANDON_JOIN_S if self.in_flight else JOIN_TIMEOUT_S,
                  quiet=self.in_flight)
        finally:
            closers = [*([self.native.stop] if self.native is not None else []),
                       self.rundir.close,
                       *([self.evaluator.close] if self.evaluator is not None else []),
                       *([self.progress.close] if self.progress is not None else [])]
            failure.close_all(*closers)


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
    progress.stage(version - 1, EVALUATING)
    _, params, _ = server.get(version, run.layout.actor_devices[0], stop,
                              config.queue_timeout_s)
    summary = evaluator.run(params, lambda: stop.stopped or interrupted())
    return eval_scalars(summary) if summary is not None else {}


def _collect(queues, stop, timeout_s, update, interrupted=None) -> list[RolloutItem]:
    """One item from every actor queue, in the fixed order.

    Raises:
      pipeline.Interrupted: ``interrupted()`` became true while waiting.
    """
    items = []
    for q in queues:
        item, _ = pipeline.get(q, stop, timeout_s, interrupted)
        if item.update != update:
            raise RuntimeError(f"actor sent rollout {item.update}, learner expected {update}")
        items.append(item)
    return items


def _scalars(out, items, stages: timers.Timers) -> dict:
    """Loss scalars and per-stage seconds of one update: the actors' stages averaged over
    their threads, the learner's ``stages``."""
    row = out.loss.scalars()
    for name in timers.ACTOR:
        row[timers.metric_key(name)] = float(np.mean([it.timers.get(name, 0.0)
                                                      for it in items]))
    for name in timers.LEARNER:
        row[timers.metric_key(name)] = stages[name]
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
