"""A run's update plan from XLA's own figure (docs/design.md, "Memory plan").

``update_unroll=-1`` and ``microbatches=-1`` are resolved by compiling the update one agent
runs on one learner device (``UpdateProgram``: rlcore's update, the same for both modes and
every algorithm) for candidate plans and reading ``compiled.memory_analysis()``; to it are
added the state's exact sizes that program does not hold (an Anakin run's lagged params),
from ``jax.eval_shape``. ``update_plan`` takes, in a fixed order, the first plan whose
figure fits ``HEADROOM`` of ``runtime.config.memory.plan_capacity``; each figure is found
once per program and plan (``update_figure`` caches it), so a run plans once and its
refusal (``runtime.config.memory_check``) reads the same figures. Nothing here names a mode
or an algorithm: the mode's terms come from its ``ModeChecks``.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from rlcore.algorithms import algorithm_class
from rlcore.algorithms.base import splits_its_loss
from rlcore.distributions import distribution_for
from rlcore.hparams import HParams
from rlcore.learner import init_learner_state, make_update_fn_for, own_state_init
from rlcore.networks import initial_core
from rlcore.normalize import observer
from rlcore.optim import optimizer_for
from rlcore.types import ByEnv, EnvSpec, LearnerState, Trajectory, state_partition
from runtime.config.agent import NetworkChoice, network_of
from runtime.config.fields import hparams_of
from runtime.config.memory import HEADROOM, CompiledMemory, plan_capacity
from runtime.config.validation import AUTO_MICROBATCHES, AUTO_UNROLL, ModeChecks, derive

# The axis of the one-device mesh the plan's update compiles on (its name labels nothing
# outside this program; the config room comes before runtime.distributed).
DATA_AXIS = "data"


@dataclasses.dataclass(frozen=True)
class UpdatePlan:
    """How a run's update is laid out (the config's ``update_unroll`` and ``microbatches``,
    with their automatic -1 resolved).

    Attributes:
      unroll: ``lax.scan`` unroll of the gradient-step loop (0: fully unrolled).
      microbatches: chunks each minibatch's gradient is accumulated over (1: one pass).
    """

    unroll: int
    microbatches: int

    def fields(self) -> dict[str, int]:
        """The plan as the config / ``HParams`` fields it resolves."""
        return {"update_unroll": self.unroll, "microbatches": self.microbatches}


def tree_bytes(tree) -> int:
    """Bytes of every array (or ShapeDtypeStruct) leaf of ``tree``."""
    return sum(int(np.prod(x.shape)) * jnp.dtype(x.dtype).itemsize
               for x in jax.tree.leaves(tree))


def buffer_bytes(state) -> int:
    """Bytes of the per-env stores (``rlcore.types.ByEnv``: a replay buffer) in a learner
    state's algorithm-own part (``LearnerState.extra``); 0 where it has none."""
    leaves = jax.tree.leaves(state.extra, is_leaf=lambda x: isinstance(x, ByEnv))
    return sum(tree_bytes(x.data) for x in leaves if isinstance(x, ByEnv))


def trajectory_shapes(spec: EnvSpec, t: int, n: int, *, with_value: bool, core=None,
                      final_value: bool = False,
                      discounted_return: bool = False) -> Trajectory:
    """ShapeDtypeStructs of a ``Trajectory`` ``[t, n]`` of ``spec``: its fields as the
    modes fill them (``with_value``: the rollout's values; ``core``: a recurrent agent's
    CoreState of ``n`` envs, None for feed-forward; ``final_value``, ``discounted_return``:
    the rollout carries that field)."""
    s, tn = jax.ShapeDtypeStruct, (t, n)
    obs = tuple(spec.obs_shape)
    f32 = lambda on: s(tn, jnp.float32) if on else None  # noqa: E731
    return Trajectory(
        obs=s(tn + obs, jnp.dtype(spec.obs_dtype)),
        action=s(tn + tuple(spec.action_shape), jnp.dtype(spec.action_dtype)),
        reward=s(tn, jnp.float32), terminated=s(tn, jnp.bool_), truncated=s(tn, jnp.bool_),
        behaviour_dist_params=s(tn + (distribution_for(spec).param_size(spec),), jnp.float32),
        behaviour_value=f32(with_value), bootstrap_obs=s((n,) + obs, jnp.dtype(spec.obs_dtype)),
        core_state=None if core is None else jax.tree.map(lambda x: s(x.shape, x.dtype), core),
        first=s(tn, jnp.bool_) if core is not None else None,
        final_value=f32(final_value), discounted_return=f32(discounted_return))


# The run's length the planned update's learning-rate schedule is built for: a constant
# of the schedule, no buffer's size (the runs trace theirs), so a run of any length plans
# alike and a later run finds the candidates in the compile cache.
PLANNED_UPDATES = 1000


@dataclasses.dataclass(frozen=True)
class UpdateProgram:
    """The update one agent runs on one learner device, less its plan: what its compiled
    program depends on. Compared and hashed by ``key`` alone (a text of every other field),
    so that ``update_figure`` caches per program.

    Attributes:
      key: ``repr`` of the other fields.
      hparams: the agent's (a sweep's first variant: the shapes are every variant's).
      choice: the network's fields.
      spec: the env's.
      num_envs: envs per learner device.
      num_steps: steps per rollout.
      policy_lag: the rollouts' policy lag (the staleness correction ``lr_scale`` reads it).
      with_value: the trajectory carries the rollout's values (``ModeChecks``).
      final_value: it carries a truncated episode's final value (``bootstrap_time_limits``).
    """

    key: str
    hparams: HParams = dataclasses.field(compare=False)
    choice: NetworkChoice = dataclasses.field(compare=False)
    spec: EnvSpec = dataclasses.field(compare=False)
    num_envs: int = dataclasses.field(compare=False)
    num_steps: int = dataclasses.field(compare=False)
    policy_lag: int = dataclasses.field(compare=False)
    with_value: bool = dataclasses.field(compare=False)
    final_value: bool = dataclasses.field(compare=False)

    def __hash__(self) -> int:
        return hash(self.key)

    @classmethod
    def of(cls, config, spec: EnvSpec, mode: ModeChecks, num_shards: int) -> UpdateProgram:
        """The update of ``config``'s agent for ``mode`` on ``num_shards`` learner shards."""
        derived = derive(config, num_shards)
        auto = UpdatePlan(AUTO_UNROLL, AUTO_MICROBATCHES)  # every plan's program alike
        fields = dict(hparams=hparams_of(config).replace(**auto.fields()),
                      choice=NetworkChoice.of(config), spec=spec,
                      num_envs=derived.envs_per_shard, num_steps=config.num_steps,
                      policy_lag=mode.policy_lag(config) or 0,
                      with_value=mode.rollout_values and not mode.params_ring(config),
                      final_value=bool(config.bootstrap_time_limits))
        return cls(key=repr(sorted(fields.items())), **fields)

    def with_plan(self, plan: UpdatePlan) -> HParams:
        """The agent's hyperparameters under ``plan``."""
        return self.hparams.replace(**plan.fields())


@functools.lru_cache(maxsize=64)
def program_inputs(program: UpdateProgram) -> tuple[LearnerState, Trajectory]:
    """ShapeDtypeStructs of the update's learner state (``jax.eval_shape`` of the learner's
    init, the algorithm's own state included) and trajectory: exact."""
    hp, spec, n = program.hparams, program.spec, program.num_envs
    net = network_of(program.choice, spec)
    opt = optimizer_for(hp, PLANNED_UPDATES, program.policy_lag)
    own = own_state_init(hp, spec, n, program.num_steps)
    state = jax.eval_shape(functools.partial(init_learner_state, net, opt, spec=spec,
                                             init_state=own), jax.random.key(0))
    traj = trajectory_shapes(spec, program.num_steps, n, with_value=program.with_value,
                             core=initial_core(net, n), final_value=program.final_value,
                             discounted_return=program.choice.normalize_reward)
    return state, traj


def compile_update(program: UpdateProgram, plan: UpdatePlan):
    """``program`` under ``plan``, lowered and compiled on the first local device (the
    learner state donated, as an update's outputs replace it)."""
    hp = program.with_plan(plan)
    net = network_of(program.choice, program.spec)
    update = make_update_fn_for(hp, net.apply,
                                optimizer_for(hp, PLANNED_UPDATES, program.policy_lag),
                                DATA_AXIS, observer(net))
    state, traj = program_inputs(program)
    specs = (state_partition(state, DATA_AXIS),
             Trajectory.env_partition(DATA_AXIS, program.with_value, traj.core_state,
                                      traj.final_value is not None,
                                      traj.discounted_return is not None), P())
    fn = jax.shard_map(update, mesh=Mesh(jax.local_devices()[:1], (DATA_AXIS,)),
                       in_specs=specs, out_specs=(specs[0], P()))
    return jax.jit(fn, donate_argnums=0).lower(state, traj, jax.random.key(0)).compile()


@functools.lru_cache(maxsize=256)
def update_figure(program: UpdateProgram, plan: UpdatePlan) -> CompiledMemory | None:
    """XLA's figure for ``program`` under ``plan`` (``compile_update``), found once per
    program and plan; None where the backend gives none."""
    return CompiledMemory.of(compile_update(program, plan))


@dataclasses.dataclass(frozen=True)
class PlanFigure:
    """What a plan holds per device, by part (bytes, every agent's): the parts the state's
    shapes give exactly and the rest of XLA's figure for the update.

    Attributes:
      learner_state: params, optimizer state and the algorithm's own state, and one
        gradient of the params' size (exact: ``jax.eval_shape``).
      trajectory: the rollout the update reads (exact).
      working: the rest of XLA's figure for the update: its temporaries (a gradient step's
        minibatch and activations, the algorithm's passes over the rollout) and outputs
        beyond the donated state.
      lagged: the lagged copies of the params an Anakin run acts with (exact).
      buffer: the algorithm's per-env store, a replay buffer (exact; not in
        ``learner_state``).
    """

    learner_state: int
    trajectory: int
    working: int
    lagged: int = 0
    buffer: int = 0

    @property
    def total(self) -> int:
        """Every part."""
        return (self.learner_state + self.trajectory + self.working + self.lagged
                + self.buffer)


def plan_figure(config, program: UpdateProgram, plan: UpdatePlan,
                mode: ModeChecks) -> PlanFigure | None:
    """The ``PlanFigure`` of ``config``'s agents (``mode.num_agents``) under ``plan``: each
    agent's ``update_figure`` split by the exact sizes of its inputs, and the mode's lagged
    params (``ModeChecks.params_ring``); None where XLA gives no figure."""
    used = update_figure(program, plan)
    if used is None:
        return None
    state, traj = program_inputs(program)
    params, agents = tree_bytes(state.params), mode.num_agents(config)
    inputs, buffer = tree_bytes(state) + tree_bytes(traj), buffer_bytes(state)
    return PlanFigure(learner_state=agents * (tree_bytes(state) - buffer + params),
                      trajectory=agents * tree_bytes(traj),
                      working=agents * max(used.total - inputs - params, 0),
                      lagged=agents * mode.params_ring(config) * params,
                      buffer=agents * buffer)


def candidates(config, num_shards: int, platform: str) -> tuple[list[int], list[int]]:
    """The unrolls, most first, and micro-batch counts, fewest first, that ``update_plan``
    tries: the config's value where it is not -1; else ``update_unroll`` 0 (fully
    unrolled) on GPU/TPU, and on CPU, where a conv-net step in a rolled loop runs about 10x
    slower, 0, then every k from the most down to 1; ``microbatches`` the divisors of a
    minibatch's envs per device, or 1 for an algorithm whose loss its ``split_ready`` does
    not split (``rlcore.algorithms.base.splits_its_loss``)."""
    derived = derive(config, num_shards)
    steps = derived.gradient_steps
    if config.update_unroll != AUTO_UNROLL:
        unrolls = [config.update_unroll]
    else:
        unrolls = [0] if platform != "cpu" else [0, *range(steps - 1, 0, -1)]
    if config.microbatches != AUTO_MICROBATCHES:
        micros = [config.microbatches]
    elif not splits_its_loss(algorithm_class(config.algorithm)):
        micros = [1]
    else:
        n = derived.envs_per_minibatch
        micros = [k for k in range(1, n + 1) if n % k == 0]
    return unrolls, micros


def most_unroll(unrolls: list[int], fits) -> int:
    """The first of ``unrolls`` (most first, the last known to fit) that ``fits``, where
    fitting holds from some point of the list on (less unroll never needs more memory):
    the first is tried, then halves between the last that did not fit and the first that
    did (a few compiles, not one per unroll)."""
    if len(unrolls) == 1 or fits(unrolls[0]):
        return unrolls[0]
    lo, hi = 0, len(unrolls) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(unrolls[mid]) else (mid, hi)
    return unrolls[hi]


def update_plan(config, spec: EnvSpec, mode: ModeChecks, num_shards: int,
                num_processes: int = 1, platform: str | None = None) -> UpdatePlan:
    """The ``update_unroll`` and ``microbatches`` a run uses: the config's, or for the
    automatic -1 the first of ``candidates`` whose ``plan_figure`` fits ``HEADROOM`` of
    ``plan_capacity``: the fewest micro-batches whose loop with the least unroll fits (in
    order), then with those the most unroll that fits (``most_unroll``); each figure is a
    compile, cached.
    Where nothing fits, the least unroll and the most micro-batches (XLA's figure for the
    compiled program then decides: ``runtime.config.memory_check.compiled_refusal``); where
    XLA gives no figure, the first candidate.
    """
    platform = jax.local_devices()[0].platform if platform is None else platform
    unrolls, micros = candidates(config, num_shards, platform)
    if len(unrolls) * len(micros) == 1:
        return UpdatePlan(unrolls[0], micros[0])
    program = UpdateProgram.of(config, spec, mode, num_shards)
    room = HEADROOM * plan_capacity(
        config, platform, max(mode.devices_used(config, num_shards, num_processes), 1))

    def fits(plan: UpdatePlan) -> bool:
        figure = plan_figure(config, program, plan, mode)
        return figure is None or figure.total <= room

    k = next((k for k in micros if fits(UpdatePlan(unrolls[-1], k))), None)
    if k is None:
        return UpdatePlan(unrolls[-1], micros[-1])
    return UpdatePlan(most_unroll(unrolls, lambda u: fits(UpdatePlan(u, k))), k)
