"""Anakin's compiled program (docs/design.md, "Anakin calls"): env stepping, acting and
learning in one program over a device mesh.

Per device a batch of envs is vmapped; the rollout is a ``lax.scan`` over ``num_steps``;
the shared rlcore update averages gradients over the ``data`` mesh axis. The whole step is
``jax.shard_map``ped over a ``Mesh`` of every device of every process (params replicated,
env states sharded) and ``updates_per_call`` updates run inside one jitted call.
(Podracer, Hessel et al. 2021, arXiv 2104.06272.) The train state is ``anakin.state``'s,
the agents' values and the PBT step ``anakin.population``'s; the loop that calls the
program is ``anakin.train``.
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from anakin.episodes import make_train_eval_fn
from anakin.mode import MODE
from anakin.population import agent_values, fresh_population, has_population, population_step
from anakin.rollout import make_rollout_fn, reset_envs
from anakin.state import AnakinState, UpdateOutput, acting_params, pushed, ring_of
from envs import registry
from rlcore.algorithms import make_algorithm
from rlcore.hparams import HParams
from rlcore.learner import init_learner_state, make_update_fn_for, own_state_init
from rlcore.networks import initial_core
from rlcore.normalize import observer
from rlcore.optim import optimizer_for
from rlcore.seeding import Roots
from rlcore.types import EpisodeSummary, LearnerState, state_partition
from runtime import distributed
from runtime.commands import train as train_command
from runtime.config import build, memory_check, sweep
from runtime.config import pbt as population
from runtime.config.env_args import env_kwargs_of
from runtime.config.resolved import resolve
from runtime.config.xla_flags import compile_cache_hits
from runtime.run.cadence import train_eval_due

AXIS = distributed.DATA_AXIS


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
        self.tags = sweep.agent_tags(config)
        self.num_agents = len(self.tags)
        # The first variant's hparams, Python numbers; the agents' swept values live in the
        # state (anakin.population). Every variant's optimizer state has this one's
        # structure (validation sees to it).
        self.resolved = resolve(config, MODE, self.num_devices,
                                distributed.device_counts().processes, sweep.variants(config)[0])
        self.derived, self.lag = self.resolved.sizes, self.resolved.policy_lag
        learner = self.resolved.learner
        # The swept env arguments' values per agent ([A] constants; empty without them): each
        # agent builds its env with its own (``env_of``); ``env``, the first's, gives the spec.
        first = sweep.variants(config)[0]
        self.env = self._make_env({k[len(sweep.ENV):]: v for k, v in first.items()
                                   if k.startswith(sweep.ENV)})
        self.env_values = sweep.agent_env_values(config) if self.num_agents > 1 else {}
        self.network, self.hparams, self.optimizer = (
            learner.network, learner.hparams, learner.optimizer)
        seeds = jnp.asarray([t["seed"] for t in self.tags])
        self.roots = (Roots.from_seed(config.seed) if self.num_agents == 1
                      else jax.vmap(Roots.from_seed)(seeds))
        self.rollout_of = functools.partial(
            make_rollout_fn, apply_fn=self.network.apply, num_steps=config.num_steps,
            nan_at_update=config.debug.nan_at_update,
            bootstrap_time_limits=config.bootstrap_time_limits,
            over_agents=self.num_agents > 1, reward_scaling=build.reward_scaling(config))
        self.evaluate_of = functools.partial(
            make_train_eval_fn, apply_fn=self.network.apply, max_steps=config.eval_max_steps,
            axis_name=AXIS, initial_core=functools.partial(initial_core, self.network))
        self.rollout = self.rollout_of(self.env)
        env_spec = P(AXIS) if self.num_agents == 1 else P(None, AXIS)
        self.explore = (population.explore_settings(config) if population.enabled(config)
                        else None)  # population-based training's static settings
        learner_spec = state_partition(jax.eval_shape(self._init_learner, self.roots.init),
                                       AXIS, agents=self.num_agents > 1)
        self.state_spec = AnakinState(learner=learner_spec, envs=env_spec,
                                      lagged=P() if self.lag else None,
                                      population=P() if has_population(config) else None)
        self._call = None
        self.from_cache = False  # whether the persistent compile cache served the compile

    def per_agent(self, fn):
        """``fn`` over the agent axis (``jax.vmap``), or ``fn`` itself for one agent."""
        return fn if self.num_agents == 1 else jax.vmap(fn)

    def env_of(self, values: dict):
        """The env of an agent whose swept env arguments are ``values`` (``{NAME: value}``,
        traced inside the agents' vmap): the run's env where nothing of it is swept."""
        return self._make_env(values) if values else self.env

    def _make_env(self, values: dict):
        """The config's env with ``values`` over its ``env_kwargs``."""
        return registry.make_jax_env(self.config.env_id,
                                     **{**env_kwargs_of(self.config), **values})

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
            per_agent = self.per_agent(lambda p, r, e: self.evaluate_of(self.env_of(e))(
                p, r.train_eval, ids, u))
            return jax.lax.psum(per_agent(learner.params, roots, self.env_values), AXIS)

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
                lambda r, e: reset_envs(self.env_of(e), r.env, self._env_ids(), initial_core(
                    self.network, self.derived.envs_per_shard),
                    self.config.normalize_reward))(roots, self.env_values),
            mesh=self.mesh, in_specs=P(), out_specs=self.state_spec.envs,
        ))
        learner = init_learner(self.roots.init)
        init_ring = jax.jit(self.per_agent(functools.partial(ring_of, lag=self.lag)),
                            out_shardings=distributed.replicated(self.mesh))
        return AnakinState(learner=learner, envs=init_envs(self.roots),
                           lagged=init_ring(learner.params) if self.lag else None,
                           population=fresh_population(self.config, self.mesh))

    def _device_call(self, state: AnakinState, num_active, num_updates, roots: Roots):
        """Runs ``updates_per_call`` update slots; slots at or past ``num_active`` are skipped
        (so a run whose length is not a multiple of the call size compiles once), of a run
        of ``num_updates`` (an argument: a longer run or an extension compiles nothing
        new)."""
        env_ids = self._env_ids()
        if self.config.debug.call_delay_ms:
            num_active = _delayed(num_active, self.config.debug.call_delay_ms / 1000)

        def agent_update(state: AnakinState, roots: Roots, swept, env_values):
            u = state.learner.update
            act = make_algorithm(self._agent_hparams(swept)).act
            rollout = self.rollout_of(self.env_of(env_values)) if env_values else self.rollout
            envs, traj, episodes = rollout(acting_params(state), state.envs,
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
            state, out = self.per_agent(agent_update)(state.replace(population=None), roots,
                                                      agent_values(self.config, pop),
                                                      self.env_values)
            state = state.replace(population=pop)
            out = out.replace(evals=self._evaluations(state.learner, roots))
            if self.explore is None:  # no PBT: the population never exploits
                return state, out
            return population_step(self.config, self.explore, state, out)

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
                          self.roots)

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
                           in_specs=(self.state_spec, P(), P(), P()),
                           out_specs=(self.state_spec, P()))
        self._call = jax.jit(fn, donate_argnums=0).lower(
            state, jnp.int32(0), jnp.int32(0), self.roots).compile()
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


def _delayed(x, seconds: float):
    """``x`` once a host callback has slept ``seconds`` (``debug.call_delay_ms``): the call
    lasts that much longer, its results unchanged."""
    def sleep(value):
        time.sleep(seconds)
        return value

    return jax.pure_callback(sleep, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
