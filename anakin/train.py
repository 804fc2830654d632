"""Anakin: env stepping, acting and learning in one compiled program over a device mesh.

Per device a batch of envs is vmapped; the rollout is a ``lax.scan`` over ``num_steps``;
the shared rlcore update averages gradients over the ``data`` mesh axis. The whole step is
``jax.shard_map``ped over a ``Mesh`` of every device of every process (params replicated,
env states sharded) and ``updates_per_call`` updates run inside one jitted call.
(Podracer, Hessel et al. 2021, arXiv 2104.06272.)
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
from flax import struct
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from anakin.episodes import make_train_eval_fn
from anakin.mode import MODE
from anakin.rollout import EnvCarry, make_rollout_fn, reset_envs
from envs import registry
from rlcore import pbt
from rlcore.algorithms import make_algorithm
from rlcore.hparams import HParams
from rlcore.learner import init_learner_state, make_update_fn_for, own_state_init
from rlcore.losses import LossMetrics
from rlcore.networks import initial_core
from rlcore.normalize import observer
from rlcore.optim import optimizer_for
from rlcore.seeding import Roots, pbt_key, pbt_root
from rlcore.types import EpisodeSummary, LearnerState, Params, state_partition
from runtime import distributed
from runtime.commands import train as train_command
from runtime.commands.result import RunResult, run_result
from runtime.config import build, memory_check, sweep
from runtime.config import pbt as population
from runtime.config.validation import derive
from runtime.config.xla_flags import compile_cache_hits
from runtime.process.signals import SignalFlag
from runtime.run.cadence import train_eval_due
from runtime.run.directory import RunDir
from runtime.run.metrics import eval_scalars
from runtime.run.population import event_lines, hparam_scalars

AXIS = distributed.DATA_AXIS


@struct.dataclass
class AnakinState:
    """Whole train state; ``envs`` leaves are sharded ``[B, ...]`` over the mesh.

    ``lagged``: at policy lag S > 0, the params of the last S versions, oldest first, each
    leaf ``[S, ...]`` (replicated): before update ``u`` versions ``max(u - S + i, 0)``,
    ``i = 0 .. S - 1`` (version ``v``: the params after ``v`` updates); the rollout acts
    with the oldest (docs/design.md, "Pipelines and staleness"). None at lag 0 (the rollout
    acts with the learner's params).

    With ``num_seeds`` A > 1 every leaf has a leading agent axis: learner ``[A, ...]``
    (replicated), envs ``[A, B, ...]`` (sharded on B), lagged ``[A, S, ...]``.

    ``population``: with population-based training, the agents' hyperparameters and the
    statistic's window (``rlcore.pbt.Population``, replicated); None without it (docs/design.md,
    "Population-based training").
    """

    learner: LearnerState
    envs: EnvCarry
    lagged: Params | None = None
    population: pbt.Population | None = None


def acting_params(state: AnakinState) -> Params:
    """The params the rollout acts with: the oldest of ``lagged``, else the learner's."""
    if state.lagged is None:
        return state.learner.params
    return jax.tree.map(lambda x: x[0], state.lagged)


def pushed(lagged: Params | None, params: Params) -> Params | None:
    """``lagged`` ``[S, ...]`` with its oldest version dropped and ``params`` appended (the
    params before an update, now one version behind the learner's)."""
    if lagged is None:
        return None
    return jax.tree.map(lambda ring, p: jnp.concatenate([ring[1:], p[None]]), lagged, params)


def ring_of(params: Params, lag: int) -> Params | None:
    """``lag`` copies of ``params`` ``[lag, ...]`` (a fresh run's ring), None at lag 0."""
    if not lag:
        return None
    return jax.tree.map(lambda p: jnp.broadcast_to(p[None], (lag,) + p.shape), params)


@struct.dataclass
class PopulationOutput:
    """A population's update: the hyperparameters the agents trained with ``[A, H]`` and
    what the step after the update did (``rlcore.pbt.Events``; nothing where none was
    due)."""

    values: jax.Array
    events: pbt.Events


@struct.dataclass
class UpdateOutput:
    """Per-update outputs of a call, each leaf ``[K]`` for K updates; ``evals`` holds the
    greedy evaluation episodes after the update (zeros where it did not evaluate);
    ``population``, with population-based training, its update."""

    loss: LossMetrics
    episodes: EpisodeSummary
    evals: EpisodeSummary
    population: PopulationOutput | None = None


class AnakinRun:
    """The compiled pieces of one Anakin run: init, the K-update call, and the mesh.

    Several agents (``num_seeds`` seeds, times the variants of ``config.sweep``; see
    ``runtime.config.sweep``) train in the same compiled call: the whole per-agent computation
    (rollout, update, env reset) is ``jax.vmap``ped over an agent axis (params are initialised
    agent by agent), each agent with the roots of its seed and its swept values, so it is the
    plain run of those (up to XLA's batched kernels). One agent runs without the vmap.
    """

    def __init__(self, config, mesh=None):
        self.config = config
        self.mesh = mesh_for(config) if mesh is None else mesh
        self.num_devices = self.mesh.devices.size
        self.derived = derive(config, self.num_devices)
        self.env = registry.make_jax_env(config.env_id)
        self.tags = sweep.agent_tags(config)
        self.num_agents = len(self.tags)
        # The first variant's hparams, Python numbers; the agents' swept values as a record
        # of [A] arrays (None for one agent or no sweep: values run as plain numbers).
        # Every variant's optimizer state has this one's structure (validation sees to it).
        self.lag = MODE.policy_lag(config)
        learner = build.learner(config, self.env.spec, MODE, self.num_devices,
                                distributed.device_counts().processes,
                                self.derived.num_updates, sweep.variants(config)[0],
                                policy_lag=self.lag)
        self.network, self.hparams, self.optimizer = (
            learner.network, learner.hparams, learner.optimizer)
        self.swept = sweep.agent_hparams(config)
        seeds = jnp.asarray([t["seed"] for t in self.tags])
        self.roots = (Roots.from_seed(config.seed) if self.num_agents == 1
                      else jax.vmap(Roots.from_seed)(seeds))
        self.rollout = make_rollout_fn(self.env, self.network.apply, config.num_steps,
                                       config.debug.nan_at_update,
                                       config.bootstrap_time_limits, self.num_agents > 1,
                                       build.reward_scaling(config))
        self.evaluate = make_train_eval_fn(self.env, self.network.apply, config.eval_max_steps,
                                           AXIS, functools.partial(initial_core, self.network))
        env_spec = P(AXIS) if self.num_agents == 1 else P(None, AXIS)
        self.explore = (population.explore_settings(config) if population.enabled(config)
                        else None)  # population-based training's static settings
        learner_spec = state_partition(jax.eval_shape(self._init_learner, self.roots.init),
                                       AXIS, agents=self.num_agents > 1)
        self.state_spec = AnakinState(learner=learner_spec, envs=env_spec,
                                      lagged=P() if self.lag else None,
                                      population=P() if self.explore else None)
        self._call = None
        self.from_cache = False  # whether the persistent compile cache served the compile

    def per_agent(self, fn):
        """``fn`` over the agent axis (``jax.vmap``), or ``fn`` itself for one agent."""
        return fn if self.num_agents == 1 else jax.vmap(fn)

    def agent_tags(self) -> list[dict] | None:
        """What tells the agents' metrics lines apart: swept values and seed (None for one
        agent without a sweep)."""
        return None if self.num_agents == 1 and not sweep.swept(self.config) else self.tags

    def agent_update_fn(self, swept: HParams | None, num_updates):
        """The update of an agent with ``swept`` values (an HParams of traced scalars where
        swept, None elsewhere; None without a sweep) in a run of ``num_updates`` updates (a
        traced ``[]`` int: the learning rate's schedule reads it, the program does not
        depend on it)."""
        hp = self._agent_hparams(swept)
        return make_update_fn_for(hp, self.network.apply,
                                  optimizer_for(hp, num_updates, self.lag), AXIS,
                                  observer(self.network))

    def _agent_hparams(self, swept: HParams | None) -> HParams:
        """The hyperparameters of an agent with ``swept`` values (``agent_update_fn``)."""
        return self.hparams if swept is None else self.hparams.override(swept)

    def _env_ids(self, n=None):
        """Global indices of this device's ``n`` envs ``[n]`` (default: its training envs)
        inside shard_map."""
        n = self.derived.envs_per_shard if n is None else n
        return jax.lax.axis_index(AXIS) * n + jnp.arange(n)

    def _evaluations(self, learner: LearnerState, roots: Roots) -> EpisodeSummary:
        """Greedy episodes of every agent after its update ``u`` when one is due
        (``runtime.run.cadence.train_eval_due``; zeros otherwise, or when evaluation is off); sums
        over devices. The branch is taken outside the agents' vmap, so that it is skipped,
        not masked."""
        every = self.config.eval_every
        ids = self._env_ids(self.config.eval_episodes // self.num_devices)

        def run(_):
            per_agent = self.per_agent(lambda p, r: self.evaluate(p, r.train_eval, ids, u))
            return jax.lax.psum(per_agent(learner.params, roots), AXIS)

        if not every:
            lead = () if self.num_agents == 1 else (self.num_agents,)
            return EpisodeSummary(jnp.zeros(lead), jnp.zeros(lead), jnp.zeros(lead, jnp.int32))
        u = learner.update.reshape(-1)[0]
        shape = jax.eval_shape(run, None)
        zeros = lambda _: jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shape)
        return jax.lax.cond(train_eval_due(u, every), run, zeros, None)

    def _init_learner(self, keys) -> LearnerState:
        """Every agent's fresh learner state (the algorithm's own included) from its init
        key, unplaced. Agents are initialised one after another (lax.map), not vmapped: a
        batched orthogonal init is a batched LAPACK QR, whose jaxlib kernel waits on the
        intra-op pool from inside it and deadlocks when several CPU devices run it at once
        (jax 0.10)."""
        own = own_state_init(self.hparams, self.env.spec, self.config.num_envs,
                             self.config.num_steps)
        init_one = functools.partial(init_learner_state, self.network, self.optimizer,
                                     spec=self.env.spec, init_state=own)
        return init_one(keys) if self.num_agents == 1 else jax.lax.map(init_one, keys)

    def init_state(self) -> AnakinState:
        """Fresh params, optimizer state and envs reset from keys of their global index."""
        init_learner = jax.jit(self._init_learner, out_shardings=jax.tree.map(
            lambda s: NamedSharding(self.mesh, s), self.state_spec.learner))
        init_envs = jax.jit(jax.shard_map(
            lambda roots: self.per_agent(
                lambda r: reset_envs(self.env, r.env, self._env_ids(), initial_core(
                    self.network, self.derived.envs_per_shard),
                    self.config.normalize_reward))(roots),
            mesh=self.mesh, in_specs=P(), out_specs=self.state_spec.envs,
        ))
        learner = init_learner(self.roots.init)
        init_ring = jax.jit(self.per_agent(functools.partial(ring_of, lag=self.lag)),
                            out_shardings=distributed.replicated(self.mesh))
        return AnakinState(learner=learner, envs=init_envs(self.roots),
                           lagged=init_ring(learner.params) if self.lag else None,
                           population=self._fresh_population())

    def _fresh_population(self) -> pbt.Population | None:
        """The population before its first step (replicated), None without PBT."""
        if self.explore is None:
            return None
        return jax.device_put(pbt.Population.fresh(population.initial_values(self.config)),
                              distributed.replicated(self.mesh))

    def _population_step(self, state: AnakinState, out: UpdateOutput):
        """After an update: the window takes its episodes (or evaluations), and every
        ``pbt.interval`` updates the agents exploit and explore (``rlcore.pbt``, key
        ``pbt_key(pbt_root(seed), u)``); outside the agents' vmap, on every device alike."""
        pop = state.population
        seen = out.evals if self.config.pbt.statistic == "eval" else out.episodes
        pop = pop.observe(seen.return_sum, seen.count)
        u = state.learner.update.reshape(-1)[0]

        def step(_):
            stat = pop.window_statistic()
            (learner, lagged), values, events = pbt.exploit_and_explore(
                pbt_key(pbt_root(self.config.seed), u), self.explore, stat, pop.values,
                (state.learner, state.lagged))
            return state.replace(learner=learner, lagged=lagged,
                                 population=pop.restart(values, stat)), events

        def skip(_):
            return state.replace(population=pop), pbt.no_events(pop.statistic, pop.values)

        state, events = jax.lax.cond(u % self.config.pbt.interval == 0, step, skip, None)
        return state, out.replace(population=PopulationOutput(pop.values, events))

    def _device_call(self, state: AnakinState, num_active, num_updates, roots: Roots,
                     swept):
        """Runs ``updates_per_call`` update slots; slots at or past ``num_active`` are skipped
        (so a run whose length is not a multiple of the call size compiles once), of a run
        of ``num_updates`` (an argument: a longer run or an extension compiles nothing
        new)."""
        env_ids = self._env_ids()
        if self.config.debug.call_delay_ms:
            num_active = _delayed(num_active, self.config.debug.call_delay_ms / 1000)

        def agent_update(state: AnakinState, roots: Roots, swept):
            u = state.learner.update
            act = make_algorithm(self._agent_hparams(swept)).act
            envs, traj, episodes = self.rollout(acting_params(state), state.envs,
                                                (roots.action, roots.env), env_ids, u, act)
            if state.lagged is not None:  # values of older params: the learner's own instead
                traj = traj.replace(behaviour_value=None)
            learner, loss = self.agent_update_fn(swept, num_updates)(
                state.learner, traj, jax.random.fold_in(roots.update, u))
            episodes = jax.lax.psum(episodes, AXIS)
            new = AnakinState(learner=learner, envs=envs,
                              lagged=pushed(state.lagged, state.learner.params))
            return new, UpdateOutput(loss, episodes, None)

        def one_update(state: AnakinState):
            pop = state.population  # the agents' values: traced, from the state
            values = swept if pop is None else population.agent_record(self.config, pop.values)
            state, out = self.per_agent(agent_update)(state.replace(population=None), roots,
                                                      values)
            out = out.replace(evals=self._evaluations(state.learner, roots))
            if pop is None:
                return state, out
            return self._population_step(state.replace(population=pop), out)

        one_update = jax.jit(one_update)  # traced once: for the shapes and for the slots
        out_shape = jax.eval_shape(one_update, state)[1]

        def slot(state: AnakinState, i):
            def skip(state):
                return state, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), out_shape)

            return jax.lax.cond(i < num_active, one_update, skip, state)

        return jax.lax.scan(slot, state, jnp.arange(self.config.updates_per_call))

    def call(self, state: AnakinState, num_active: int):
        """Runs ``num_active <= updates_per_call`` updates in one jitted call.

        Returns ``(state, UpdateOutput)`` with leaves ``[updates_per_call]`` (``[K, A]`` for
        A agents); rows past ``num_active`` are zeros.
        """
        if self._call is None:
            self.compile(state)
        return self._call(state, jnp.int32(num_active), jnp.int32(self.derived.num_updates),
                          self.roots, self.swept)

    def abstract_state(self) -> AnakinState:
        """``init_state``'s shapes, dtypes and shardings, nothing allocated: what the call
        compiles for before the state exists (so that XLA's memory figure is checked first)."""
        shapes = jax.eval_shape(self.init_state)

        def placed(tree, spec):  # spec: one PartitionSpec, or one per leaf of tree
            specs = jax.tree.map(lambda _: spec, tree) if isinstance(spec, P) else spec
            return jax.tree.map(lambda s, sp: jax.ShapeDtypeStruct(
                s.shape, s.dtype, sharding=NamedSharding(self.mesh, sp),
                weak_type=s.weak_type), tree, specs)

        return AnakinState(learner=placed(shapes.learner, self.state_spec.learner),
                           envs=placed(shapes.envs, self.state_spec.envs),
                           lagged=None if shapes.lagged is None
                           else placed(shapes.lagged, self.state_spec.lagged),
                           population=None if shapes.population is None
                           else placed(shapes.population, self.state_spec.population))

    def compile(self, state: AnakinState) -> float:
        """Compiles the call for ``state`` (arrays, or ``abstract_state``) ahead of time (one
        program for every ``num_active``), then checks XLA's memory figure for it against
        the devices (``runtime.commands.train.check_memory``); returns the seconds the
        compile took, so that compile is timed apart from training.

        Raises:
          ConfigError: the call does not fit the devices (``memory_check``).
        """
        t, hits = time.perf_counter(), compile_cache_hits()
        fn = jax.shard_map(self._device_call, mesh=self.mesh,
                           in_specs=(self.state_spec, P(), P(), P(), P()),
                           out_specs=(self.state_spec, P()))
        self._call = jax.jit(fn, donate_argnums=0).lower(
            state, jnp.int32(0), jnp.int32(0), self.roots, self.swept).compile()
        seconds = time.perf_counter() - t
        self.from_cache = compile_cache_hits() > hits
        train_command.check_memory(self.config, memory_check.compiled_refusal(
            self.config, self._call, self.env.spec, MODE, self.num_devices,
            distributed.device_counts().processes, "the update call",
            self.hparams))
        return seconds


def mesh_for(config):
    """The data mesh: the first ``num_devices`` devices, or all of them when 0."""
    n = config.num_devices
    return distributed.data_mesh(jax.devices()[:n] if n else None)


def _update_of(state: AnakinState) -> int:
    """The updates ``state`` has done (agent 0's: the agents move together)."""
    return int(distributed.to_host(state.learner.update).reshape(-1)[0])


def _call_sizes(start: int, total: int, per_call: int) -> list[int]:
    """Sizes of successive calls from update ``start`` to ``total``."""
    sizes, u = [], start
    while u < total:
        sizes.append(min(per_call, total - u))
        u += sizes[-1]
    return sizes


# A signal during a call lets it finish and save (``runtime.process.signals``) within its bound:
# the first call's (not measured yet; a call that has not returned by then is taken as hung),
# later ones twice the longest call so far.
FIRST_CALL_BOUND_S = 600.0


def train(config, workdir: str | None, *, mesh=None, on_row=None) -> list[dict]:
    """Runs Anakin training (``train_result``); returns the logged rows."""
    return list(train_result(config, workdir, mesh=mesh, on_row=on_row).rows)


def train_result(config, workdir: str | None, *, mesh=None, on_row=None) -> RunResult:
    """Runs Anakin training; writes the run directory; returns the logged rows, the final
    params and agent 0's policy (``runtime.commands.result.RunResult``); calls ``on_row``
    (where given) with each row as it is logged (a copy).

    Resumes from the latest checkpoint in ``workdir`` when there is one. Raises
    ``SystemExit(130/143)`` after a SIGINT/SIGTERM, once a checkpoint is written: a signal
    during a call lets the call finish and saves its last update (docs/design.md, "Signals
    and checkpoints"). A row for which ``on_row`` returns ``False`` ends the run after the
    call that logged it, checkpointed (docs/design.md, "From Python").
    """
    run = AnakinRun(config, mesh)
    total = run.derived.num_updates
    rundir = RunDir(config, workdir, total, run.derived.steps_per_update, run.agent_tags(),
                    return_label=registry.return_axis_label(config.env_id), on_row=on_row)
    # A resume restores first, so that a finished run says so before compiling.
    state = rundir.restore_or(run.init_state()) if rundir.resumes() else None
    first = _call_sizes(0 if state is None else _update_of(state), total,
                        config.updates_per_call)[0]  # announced as the call the compile serves
    try:
        with SignalFlag() as flag:
            flag.compiling()
            with rundir.compiling(first):
                compile_s = run.compile(run.abstract_state())  # a fresh run: before its state
            if state is None:
                state = rundir.restore_or(run.init_state())
            start = _update_of(state)
            longest = None  # the longest call so far, seconds
            for k in _call_sizes(start, total, config.updates_per_call):
                t_call = time.perf_counter()
                state, out, call_s = _timed_call(run, flag, state, start, k, longest)
                if longest is None:  # training time counts from here: the call's is real
                    rundir.first_call_done(k, call_s, compile_s=compile_s,
                                           steady_from=(start, t_call),
                                           from_cache=run.from_cache)
                else:  # debug.learner_delay_ms (a test knob): not the first call
                    _hold(config.debug.learner_delay_ms / 1000, flag)
                longest = max(longest or 0.0, call_s)
                per_update_s = (time.perf_counter() - t_call) / k
                _record_call(run, rundir, out, start, k, t_call, per_update_s)
                # A collective in multi-process runs: every process, after every call.
                exit_code, clock = distributed.agree_after_call(flag.exit_code,
                                                                rundir.clock_due())
                rundir.checkpoint_or_exit(start + k, start, state, exit_code, clock=clock)
                start += k
                if rundir.stopped is not None:
                    break
    finally:
        rundir.close()
    return run_result(rundir.history, state.learner.params, run.network, run.env.spec.obs_shape,
                      run.num_agents, _update_of(state))


def _timed_call(run: AnakinRun, flag: SignalFlag, state: AnakinState, start: int, k: int,
                longest: float | None) -> tuple[AnakinState, UpdateOutput, float]:
    """Updates ``start + 1 .. start + k`` in one call, which a signal lets finish (within
    its bound: ``FIRST_CALL_BOUND_S``, or twice ``longest``); returns the new state, the
    outputs on the host and the call's seconds."""
    t = time.perf_counter()
    flag.call_started(start + 1, start + k,
                      FIRST_CALL_BOUND_S if longest is None else 2 * longest)
    new_state, out = run.call(state, k)
    out = distributed.to_host(out)
    flag.call_done()
    return new_state, out, time.perf_counter() - t


def _record_call(run: AnakinRun, rundir: RunDir, out: UpdateOutput, start: int, k: int,
                 t_call: float, per_update_s: float) -> None:
    """The metrics lines of a call's ``k`` updates ``start + 1 .. start + k`` (``out``
    on the host, leaves ``[K]`` or ``[K, A]``), each ended, at the call's steady rate of
    ``per_update_s``, that long after ``t_call``."""
    for i in range(k):
        row = jax.tree.map(lambda x, i=i: x[i], out)
        rows = [row] if run.num_agents == 1 else [
            jax.tree.map(lambda x, a=a: x[a], row) for a in range(run.num_agents)]
        # Rollout u acts with version max(u - S, 0): a lag of min(u, S) updates (S > 0).
        lag = {"params_lag": float(min(start + i, run.lag))} if run.lag else {}
        scalars = [{**r.loss.scalars(), **eval_scalars(r.evals), **lag,
                    **_hparams(run, r), "time/update_s": per_update_s} for r in rows]
        if run.explore is not None:
            rundir.record_population(event_lines(
                start + i + 1, population.names(run.config), [r.population.events for r in rows]))
        rundir.record(start + i + 1, scalars, [r.episodes for r in rows],
                      sps=run.derived.steps_per_update / per_update_s,
                      at=t_call + (i + 1) * per_update_s)


def _hparams(run: AnakinRun, row: UpdateOutput) -> dict[str, float]:
    """An agent's ``hparam/<name>`` values of an update (one agent's ``row``, on the host):
    with population-based training, the values it trained with; else none."""
    if run.explore is None:
        return {}
    return hparam_scalars(population.names(run.config), row.population.values)


def _delayed(x, seconds: float):
    """``x`` once a host callback has slept ``seconds`` (``debug.call_delay_ms``): the call
    lasts that much longer, its results unchanged."""
    def sleep(value):
        time.sleep(seconds)
        return value

    return jax.pure_callback(sleep, jax.ShapeDtypeStruct(x.shape, x.dtype), x)


def _hold(seconds: float, flag: SignalFlag) -> None:
    """Waits ``seconds``, or until a signal comes."""
    end = time.perf_counter() + seconds
    while flag.exit_code is None and (left := end - time.perf_counter()) > 0:
        time.sleep(min(left, 0.05))


# ``prepare(config)``: joins the runtime and checks every field before anything compiles.
prepare = functools.partial(train_command.prepare, mode=MODE)
