"""A run's memory plan, chosen before compile (docs/design.md, "Memory plan"): a hand model
of a run's peak memory per device (``estimate``) chooses the automatic ``update_unroll`` and
``microbatches`` (``update_plan``); the compiled program depends on them, so XLA cannot be
asked first. Whether a run fits is checked after compile, by XLA's own figure
(``runtime.config.memory_check``); the device and host capacities both read are here.

The estimate compiles nothing: shapes come from ``jax.eval_shape`` of ``init_learner_state`` (params
and optimizer state) and of ``jax.vjp`` of ``network.apply`` (whose pullback holds exactly
the residuals a backward pass keeps). The terms that differ between architectures come from
the mode's ``ModeChecks`` (its agents per program, whether its rollouts carry the learner's
values, its host buffers), those that differ between algorithms from the algorithm class
(``prepared_step_bytes``, ``value_pass``); nothing here names a mode or an algorithm. Sizes
per device, with

- ``A`` agents (``ModeChecks.num_agents``: Anakin ``num_seeds`` x sweep variants, Sebulba 1),
  ``T = num_steps``, ``B = num_envs / learner shards`` (envs per device),
  ``M = num_minibatches``, ``K = microbatches``, ``n = T * B / (M * K)`` samples per
  micro-batch (a whole minibatch where ``K = 1``);
- ``o``: bytes of one observation; ``r``: bytes of other trajectory fields per step
  (action, reward, terminated, truncated, logits, the rollout's value where the mode's
  rollouts carry it, and the algorithm's ``prepared_step_bytes``: PPO's old value,
  advantages and targets); ``s``: residual bytes per sample of the network's backward pass;
  ``f``: the largest activation of one sample; ``P``: bytes of params; ``O``: bytes of the
  optimizer state; ``L``: gradient steps whose buffers are live at once (``live_steps``: 1,
  but on CPU with XLA's concurrency-optimized scheduler on, the steps one iteration of the
  unrolled gradient-step loop holds, ``num_epochs * num_minibatches`` when fully unrolled;
  1 on GPU/TPU is not measured); ``U``: the gradient steps of one loop iteration
  (``unrolled_steps``); ``e``: elements of one observation;
  ``c, v``: the algorithm's ``value_pass`` (observations copied into one batch, samples of
  its largest forward call):

::

    rollout obs     = A * (T + 1) * B * o                 (obs and bootstrap obs / env carry)
    trajectory      = A * T * B * r
    minibatch       = A * L * n * (o + BACKWARD_FACTOR * s)   (gradient steps live at once,
                      each one micro-batch: the chunks run in a rolled loop)
                      + [CPU] A * (U - L) * n * (o + 4 e)   (the other unrolled steps'
                      minibatch observations, gathered and made float32 ahead of their step)
    value pass      = A * (c * o + FORWARD_FACTOR * v * f)
                      (PPO with the rollout's values: c = 0, v = B, the bootstrap values;
                      without: c = (T + 1) * B, v = min(VALUE_CHUNK, c); IMPALA: 0)
    params, optim   = A * ((2 + [K > 1]) * P + O)         (params, gradients, state, and
                                                           the accumulator of micro-batches)
    core states     = A * B * (2 * h + T)                 (recurrent agents: the envs' core
                      state carried between rollouts and the trajectory's start state, h
                      bytes per env each, and the [T, B] bool episode starts; 0 otherwise)
    total           = rollout obs + trajectory + params, optim + core states
                      + max(minibatch, value pass)

(the value pass ends before the first gradient step, so only the larger of the two is live).
A plan fits when ``total <= HEADROOM * capacity`` (``plan_capacity``).
"""

from __future__ import annotations

import dataclasses
import functools
import os

import jax
import jax.numpy as jnp
import numpy as np

from rlcore import staleness
from rlcore.algorithms import algorithm_class
from rlcore.distributions import distribution_for
from rlcore.learner import init_learner_state
from rlcore.networks import NO_CORE, initial_core
from rlcore.optim import make_optimizer
from rlcore.types import EnvSpec
from runtime.config.agent import NetworkChoice, network_of
from runtime.config.validation import (
    AUTO_MICROBATCHES,
    AUTO_UNROLL,
    ModeChecks,
    derive,
)

GIB = 2**30
# A run must fit in this share of the capacity: XLA's own buffers, fragmentation and the
# parts this estimate leaves out (env states, evaluation, the loss's own temporaries).
HEADROOM = 0.8
# Backward pass of a minibatch: the residuals the pullback keeps, plus the activation
# gradients and the convolutions' scratch live while it runs. XLA CPU measured 1.9x the
# residuals for the IMPALA ResNet and 1.05x for the MinAtar net (benchmarks/memory_check.py);
# 2 keeps the estimate at or above both.
BACKWARD_FACTOR = 2.0
# Forward-only pass: the input and output of the largest layer live at once.
FORWARD_FACTOR = 2.0


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
    """Estimated bytes of one run (see the module docstring for the formulas).

    Attributes:
      rollout_obs: observation buffers of a rollout, bootstrap obs included, per device.
      trajectory: the other trajectory fields (and what the algorithm's ``prepare`` adds per
        step), per device.
      minibatch: one gradient step's minibatch and activations (forward and backward).
      value_pass: the algorithm's value pass before the epochs (0 where it has none).
      params_optimizer: params, gradients and optimizer state of every agent.
      total: peak per device.
      core_states: a recurrent agent's core states (carried and stored) and episode-start
        flags, per device (0 for feed-forward agents).
      lagged_params: the copies of the params an Anakin run at ``policy_lag`` > 0 acts with
        (part of ``params_optimizer``).
    """

    rollout_obs: int
    trajectory: int
    minibatch: int
    value_pass: int
    params_optimizer: int
    total: int
    core_states: int = 0
    lagged_params: int = 0


@dataclasses.dataclass(frozen=True)
class NetworkSizes:
    """Per-network sizes from ``jax.eval_shape`` (see ``network_sizes``).

    Attributes:
      params: bytes of the params.
      opt_state: bytes of the optimizer state.
      residual_per_sample: bytes the backward pass keeps per sample.
      largest_per_sample: bytes of the largest single activation of one sample.
      core_per_env: bytes of one env's recurrent core state (0 for feed-forward networks).
    """

    params: int
    opt_state: int
    residual_per_sample: int
    largest_per_sample: int
    core_per_env: int = 0


def tree_bytes(tree) -> int:
    """Bytes of every array (or ShapeDtypeStruct) leaf of ``tree``."""
    return sum(int(np.prod(x.shape)) * jnp.dtype(x.dtype).itemsize
               for x in jax.tree.leaves(tree))


def obs_bytes(spec: EnvSpec) -> int:
    """Bytes of one observation."""
    return int(np.prod(spec.obs_shape)) * jnp.dtype(spec.obs_dtype).itemsize


def step_bytes(spec: EnvSpec, *, with_value: bool, prepared: int = 0) -> int:
    """Bytes per env step of the trajectory's fields other than obs: action (int32, or
    float32 x D for a box), reward (float32), terminated and truncated (bool), the behaviour
    distribution's parameters (float32 x P: ``rlcore.distributions``), the behaviour value
    where shipped, and the ``prepared`` bytes the algorithm's ``prepare`` adds (PPO's old
    value, advantages and targets)."""
    action = 4 * int(np.prod(spec.action_shape))
    params = 4 * distribution_for(spec).param_size(spec)
    return action + 4 + 1 + 1 + params + 4 * with_value + prepared


def optional_step_bytes(config) -> int:
    """Bytes per env step of the trajectory's optional float32 fields: the value of a
    truncated episode's final observation (``bootstrap_time_limits``) and the discounted
    return (``normalize_reward``); and what a staleness correction's proximal pass adds to
    the prepared batch (``rlcore.staleness.PROXIMAL_STEP_BYTES``)."""
    proximal = config.staleness_correction in staleness.PROXIMAL
    return (4 * bool(config.bootstrap_time_limits) + 4 * bool(config.normalize_reward)
            + staleness.PROXIMAL_STEP_BYTES * proximal)


@functools.lru_cache(maxsize=64)
def network_sizes(choice: NetworkChoice, spec: EnvSpec, optimizer: str,
                  clip: bool) -> NetworkSizes:
    """Sizes of the network of ``choice`` (``runtime.config.agent.network_of``: the trainers' own)
    on ``spec`` with ``optimizer`` (gradient clipping or not).

    The residuals of ``jax.vjp(network.apply)`` are affine in the batch size: their bytes at
    batch 2 minus batch 1 are the per-sample part (the rest are params and constants); a
    recurrent network's batch is a sequence of one step of that many envs.
    """
    net = network_of(choice, spec)
    core = initial_core(net, 1)
    # Only the state's shapes are used: the constants do not change them.
    opt = make_optimizer(optimizer, 1e-3, max_grad_norm=1.0 if clip else 0.0, num_updates=1,
                         steps_per_update=1,
                         anneal_lr=True, adam_eps=1e-5, rmsprop_decay=0.99, rmsprop_eps=0.01)
    state = jax.eval_shape(
        functools.partial(init_learner_state, net, opt, spec=spec), jax.random.key(0))

    def apply(p, o):
        if core is None:
            return net.apply(p, o)
        n = o.shape[0]
        return net.apply(p, o[None], initial_core(net, n), jnp.ones((1, n), bool))

    def residuals(n):
        obs = jax.ShapeDtypeStruct((n,) + tuple(spec.obs_shape), jnp.dtype(spec.obs_dtype))
        pullback = jax.eval_shape(
            lambda p, o: jax.vjp(lambda p: apply(p, o), p)[1], state.params, obs)
        return [tree_bytes(leaf) for leaf in jax.tree.leaves(pullback)]

    one, two = residuals(1), residuals(2)
    per_leaf = [b - a for a, b in zip(one, two)] if len(one) == len(two) else [0]
    return NetworkSizes(params=tree_bytes(state.params), opt_state=tree_bytes(state.opt_state),
                        residual_per_sample=sum(two) - sum(one),
                        largest_per_sample=max(per_leaf + [obs_bytes(spec) * 4]),
                        core_per_env=0 if core is None else tree_bytes(core))


CONCURRENCY_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"


def concurrency_scheduler(config) -> bool:
    """Whether XLA CPU's concurrency-optimized scheduler is on for a run of ``config``: the
    value of its flag in ``XLA_FLAGS`` where given there (it wins), else the config's
    ``xla_cpu_concurrency_scheduler`` (``runtime.config.xla_flags`` puts that into
    ``XLA_FLAGS``)."""
    for flag in reversed(os.environ.get("XLA_FLAGS", "").split()):
        if flag.startswith(CONCURRENCY_FLAG + "="):
            return flag.split("=", 1)[1].lower() in ("true", "1")
    return bool(config.get("xla_cpu_concurrency_scheduler", True))


def unrolled_steps(config, unroll: int | None = None) -> int:
    """Gradient steps in one iteration of the update's loop with ``unroll`` (default the
    config's ``update_unroll``, not ``AUTO_UNROLL`` then): all of them when 0."""
    unroll = config.update_unroll if unroll is None else unroll
    steps = derive(config).gradient_steps
    return steps if unroll == 0 else min(unroll, steps)


def live_steps(config, platform: str, unroll: int | None = None) -> int:
    """Gradient steps whose buffers XLA keeps live at once with ``unroll`` (see
    ``unrolled_steps``). On CPU with XLA's concurrency-optimized scheduler on
    (``concurrency_scheduler``), every step of an unrolled loop iteration has buffers of its
    own (measured: ``update_unroll`` k holds k steps, fully unrolled all ``num_epochs *
    num_minibatches``); with it off (the Atari configs) one step's (IMPALA ResNet, B=8, T=32,
    fully unrolled: 4092 MiB of XLA buffers on, 438 MiB off, 344 MiB rolled;
    benchmarks/memory_check.py). Elsewhere one step is assumed (not measured)."""
    if platform != "cpu" or not concurrency_scheduler(config):
        return 1
    return unrolled_steps(config, unroll)


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


def divisors(n: int) -> list[int]:
    """The divisors of ``n``, ascending."""
    return [k for k in range(1, n + 1) if n % k == 0]


def update_plan(config, spec: EnvSpec, mode: ModeChecks, num_shards: int,
                num_processes: int = 1, platform: str | None = None) -> UpdatePlan:
    """The ``update_unroll`` and ``microbatches`` a run uses: the config's, or for the
    automatic -1 the first plan whose ``estimate`` fits ``HEADROOM`` of the capacity, trying
    the fewest micro-batches first (each is a rolled loop) and for each the most unrolled
    loop:

    - ``update_unroll`` on GPU/TPU: 0 (fully unrolled; one step's buffers live is assumed
      there); on CPU, where a conv-net step with XLA's convolution in a rolled loop runs
      about 10x slower: 0, then the largest k, then 1 (with XLA's concurrency-optimized
      scheduler off, the default, 0 costs little more than 1: ``live_steps``);
    - ``microbatches``: the divisors of a minibatch's envs per device, ascending.

    The capacity is ``plan_capacity``'s. Where nothing fits, the plan with the most
    micro-batches and the least unroll (XLA's figure for the compiled program then decides:
    ``runtime.config.memory_check.compiled_refusal``).
    """
    platform = jax.local_devices()[0].platform if platform is None else platform
    derived = derive(config, num_shards)
    steps = derived.gradient_steps
    if config.update_unroll != AUTO_UNROLL:
        unrolls = [config.update_unroll]
    else:
        unrolls = [0] if platform != "cpu" else [0, *range(steps - 1, 0, -1)]
    if config.microbatches != AUTO_MICROBATCHES:
        micros = [config.microbatches]
    else:
        micros = divisors(derived.envs_per_minibatch)
    if len(unrolls) * len(micros) == 1:
        return UpdatePlan(unrolls[0], micros[0])
    capacity = plan_capacity(config, platform,
                             max(mode.devices_used(config, num_shards, num_processes), 1))
    for k in micros:
        for unroll in unrolls:
            est = estimate(config, spec, mode, num_shards, num_processes, platform,
                           unroll=unroll, microbatches=k)
            if est.total <= HEADROOM * capacity:
                return UpdatePlan(unroll, k)
    return UpdatePlan(unrolls[-1], micros[-1])


def memory_limit(config) -> int | None:
    """The bytes ``device_memory_gib`` lets a device use; None for 0 (the device's own)."""
    limit = config.get("device_memory_gib", 0) or 0
    return int(limit * GIB) if limit > 0 else None


def plan_capacity(config, platform: str, devices: int) -> int:
    """The bytes ``update_plan`` fits a plan into: ``memory_limit`` where set, else the
    device's ``bytes_limit`` (GPU/TPU) or, on CPU, the host's *total* RAM over the
    ``devices`` the run uses (total, not available: the plan, and with it the compiled
    program, is the same every time the run starts on one machine)."""
    limit = memory_limit(config)
    if limit is not None:
        return limit
    return host_total_bytes() // devices if platform == "cpu" else device_capacity(devices)[0]


def estimate(config, spec: EnvSpec, mode: ModeChecks, num_shards: int, num_processes: int = 1,
             platform: str | None = None, unroll: int | None = None,
             microbatches: int | None = None) -> MemoryEstimate:
    """The memory a run of ``config`` needs (bytes; formulas in the module docstring).

    Args:
      config: a config that passed the other checks.
      spec: the env's EnvSpec.
      mode: the architecture's checks (its agents, whether rollouts carry values, its host
        memory).
      num_shards: learner devices over all processes (the env axis is split over them).
      num_processes: processes of the run (the host part is per process).
      platform: the learner devices' platform (``cpu``, ``gpu``, ``tpu``); default the
        first local device's.
      unroll: the gradient-step unroll; default ``update_plan(...)``'s.
      microbatches: chunks per minibatch; default ``update_plan(...)``'s.
    """
    platform = jax.local_devices()[0].platform if platform is None else platform
    if unroll is None or microbatches is None:
        plan = update_plan(config, spec, mode, num_shards, num_processes, platform)
        unroll = plan.unroll if unroll is None else unroll
        microbatches = plan.microbatches if microbatches is None else microbatches
    algorithm = algorithm_class(config.algorithm)
    agents = mode.num_agents(config)
    sizes = network_sizes(NetworkChoice.of(config), spec, config.optimizer,
                          config.max_grad_norm > 0)
    derived = derive(config, num_shards)
    t, b = config.num_steps, derived.envs_per_shard
    o = obs_bytes(spec)
    ring = mode.params_ring(config)
    with_value = mode.rollout_values and not ring
    r = (step_bytes(spec, with_value=with_value, prepared=algorithm.prepared_step_bytes)
         + optional_step_bytes(config))
    samples = t * derived.envs_per_minibatch // microbatches  # one chunk's
    rollout_obs = agents * (t + 1) * b * o
    trajectory = agents * t * b * r
    live = live_steps(config, platform, unroll)
    minibatch = agents * live * samples * int(o + BACKWARD_FACTOR * sizes.residual_per_sample)
    if platform == "cpu":  # the other unrolled steps' minibatch inputs, computed ahead
        minibatch += (agents * (unrolled_steps(config, unroll) - live) * samples
                      * (o + 4 * int(np.prod(spec.obs_shape))))
    # A recurrent agent's values come from an unroll of the learner's params over the whole
    # rollout (the rollout's own values are not used; the unroll is not chunked); so do those
    # of a staleness correction's proximal pass.
    value = algorithm.value_pass(t, b, with_value and config.recurrent == NO_CORE
                                 and config.staleness_correction not in staleness.PROXIMAL)
    value_pass = agents * (value.copied_obs * o
                           + int(FORWARD_FACTOR * value.forward_samples * sizes.largest_per_sample))
    # params and gradients (and the gradient accumulator of micro-batches), optimizer state,
    # the lagged params an Anakin run acts with
    params = agents * ((2 + (microbatches > 1) + ring) * sizes.params + sizes.opt_state)
    cores = agents * b * (2 * sizes.core_per_env + t) if sizes.core_per_env else 0
    total = rollout_obs + trajectory + params + cores + max(minibatch, value_pass)
    return MemoryEstimate(rollout_obs=rollout_obs, trajectory=trajectory, minibatch=minibatch,
                          value_pass=value_pass, params_optimizer=params, total=total,
                          core_states=cores, lagged_params=agents * ring * sizes.params)


def rollout_bytes(t: int, n: int, spec: EnvSpec, optional: int = 0) -> int:
    """One rollout of ``n`` envs as actors ship it: ``(t + 1) * n`` obs and ``t * n`` steps of
    the other fields (no values; ``optional``: ``optional_step_bytes``)."""
    return (t + 1) * n * obs_bytes(spec) + t * n * (step_bytes(spec, with_value=False)
                                                     + optional)


def _meminfo_bytes(field: str) -> int | None:
    """``field`` (e.g. ``MemTotal``) of /proc/meminfo in bytes; None where there is none."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def host_total_bytes() -> int:
    """The host's total RAM: ``MemTotal`` of /proc/meminfo where there is one, else
    ``SC_PHYS_PAGES * SC_PAGE_SIZE``."""
    total = _meminfo_bytes("MemTotal")
    return total if total is not None else os.sysconf("SC_PHYS_PAGES") * os.sysconf(
        "SC_PAGE_SIZE")


def host_available_bytes() -> int:
    """The host's available RAM: ``MemAvailable`` of /proc/meminfo (free memory plus the
    page cache the kernel can drop) where there is one, else ``SC_AVPHYS_PAGES *
    SC_PAGE_SIZE`` (free pages only, so lower)."""
    available = _meminfo_bytes("MemAvailable")
    return available if available is not None else os.sysconf(
        "SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def device_capacity(devices_used: int) -> tuple[int, str]:
    """``(bytes, name)`` of the first local device: its ``bytes_limit`` where the platform
    keeps memory stats (GPU/TPU), else the host's available RAM over ``devices_used`` (CPU
    devices share the host's RAM)."""
    device = jax.local_devices()[0]
    name = f"{device.platform}:{device.id}"
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - a platform without stats
        stats = None
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"]), name
    return host_available_bytes() // max(devices_used, 1), name
