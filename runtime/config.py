"""Config validation and derived sizes; nothing else.

``validate(config, mode, counts)`` checks every field before anything compiles and raises
``ConfigError("field: what is wrong")``; entry points print that one line and exit 2. The
fields both modes share are checked here; ``mode`` (a ``ModeChecks`` that each architecture
hands in) checks its own fields and env ids and gives the env's spec, so rlcore imports
nothing of envs/, anakin/ or sebulba/. The choice lists come from the registries that own
them (``rlcore.algorithms.REGISTRY``, ``rlcore.networks.NETWORKS``,
``rlcore.optim.OPTIMIZERS``), the bool, debug and sweepable fields from the field table
(``runtime.fields``). ``derive(config, num_shards)`` is the one place derived
sizes come from; nothing is written back into the config.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Callable

import ml_collections

from rlcore.algorithms import REGISTRY as ALGORITHMS
from rlcore.algorithms.base import AUTO, accepted_kinds
from rlcore.errors import ConfigError
from rlcore.networks import CORES, IMAGE_NETWORKS, NETWORKS, NO_CORE
from rlcore.optim import OPTIMIZERS
from rlcore.seeding import MAX_EVAL_ENVS
from rlcore.types import EnvSpec
from runtime.fields import BOOL_FIELDS, DEBUG_FIELDS, SWEEPABLE
from runtime.sweep import num_variants, swept, with_values

MAX_SEED = 2**30  # EnvPool seeds are int32: seed + global env index must fit
# Counts, sizes and update indices enter the compiled programs (and EnvPool) as int32.
MAX_INT32 = 2**31 - 1
# The env-step budget is counted in Python; int64 keeps it printable and comparable.
MAX_INT64 = 2**63 - 1
# Number fields enter the compiled programs as float32: larger magnitudes become inf.
FLOAT32_MAX = 3.4028234663852886e38
# ``update_unroll`` and ``microbatches`` -1: chosen from the device and its memory
# (``runtime.memory.update_plan``).
AUTO_UNROLL = AUTO_MICROBATCHES = -1


@dataclasses.dataclass(frozen=True)
class Derived:
    """Sizes derived from a config and a device layout.

    Attributes:
      num_updates: learner updates in the run (``total_env_steps // steps_per_update``).
      steps_per_update: env steps per update over all envs (``num_envs * num_steps``).
      envs_per_shard: envs each learner device holds.
      optimizer_steps: gradient steps in the run.
    """

    num_updates: int
    steps_per_update: int
    envs_per_shard: int
    optimizer_steps: int


@dataclasses.dataclass(frozen=True)
class DeviceCounts:
    """What validation needs to know of the runtime (after ``jax.distributed`` joined).

    Attributes:
      devices: devices of every process.
      local_devices: devices of this process.
      processes: processes of the run.
    """

    devices: int
    local_devices: int
    processes: int


@dataclasses.dataclass(frozen=True)
class HostMemory:
    """Host buffers a mode keeps besides its devices' memory (for ``runtime.memory``).

    Attributes:
      bytes: ``(config, EnvSpec, num_processes) -> bytes`` of this process's buffers.
      what: what needs them, for the refusal (``"the actors' rollouts"``).
      detail: how they add up, for the refusal.
      fields: the fields that lower them, for the refusal.
    """

    bytes: Callable[[ml_collections.ConfigDict, EnvSpec, int], int]
    what: str
    detail: str
    fields: str


@dataclasses.dataclass(frozen=True)
class ModeChecks:
    """What an architecture hands validation and the memory check.

    Attributes:
      name: ``"anakin"`` or ``"sebulba"`` (for messages).
      check_fields: ``(config, DeviceCounts) -> learner shards over all processes``; checks
        the mode's own fields, raising ConfigError.
      check_env_id: raises ConfigError (with close matches) for an id the mode cannot run.
      env_spec: ``env_id -> EnvSpec`` without compiling anything.
      num_agents: ``config -> agents`` trained in one program.
      rollout_values: whether the learner's trajectory carries the rollout's values (policy
        lag 0), so the algorithm need not recompute them.
      devices_used: ``(config, num_shards, num_processes) -> local devices`` the run
        computes on (CPU devices share the host's RAM).
      host_memory: the mode's host buffers, or None.
    """

    name: str
    check_fields: Callable[[ml_collections.ConfigDict, DeviceCounts], int]
    check_env_id: Callable[[str], None]
    env_spec: Callable[[str], EnvSpec]
    num_agents: Callable[[ml_collections.ConfigDict], int]
    rollout_values: bool
    devices_used: Callable[[ml_collections.ConfigDict, int, int], int]
    host_memory: HostMemory | None = None


def require(cond, field: str, msg: str) -> None:
    """Raises ``ConfigError("field: msg")`` unless ``cond``."""
    if not cond:
        raise ConfigError(f"{field}: {msg}")


def is_int(value) -> bool:
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value) -> bool:
    """An int or float that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def shown(value) -> str:
    """``repr(value)`` for a message, short for huge ints (Python refuses to print ints of
    more than 4300 digits)."""
    if is_int(value) and value.bit_length() > 64:
        return f"{'-' if value < 0 else ''}an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def int_at_most(field: str, value: int, hi: int = MAX_INT32) -> None:
    """Refuses an int above ``hi`` (default: int32, as the programs hold it)."""
    bound = "2**31 - 1 (int32)" if hi == MAX_INT32 else f"{hi}"
    require(value <= hi, field, f"must be at most {bound}, got {shown(value)}")


def positive_int(config, field: str, hi: int = MAX_INT32) -> None:
    """A positive int, at most ``hi``."""
    value = config[field]
    require(is_int(value) and value > 0, field, f"must be a positive integer, got {shown(value)}")
    int_at_most(field, value, hi)


def int_in(config, field: str, lo: int, what: str) -> None:
    """An int in ``[lo, MAX_INT32]``; ``what`` ends the message for a value below ``lo``."""
    value = config[field]
    require(is_int(value) and value >= lo, field, f"must be an integer {what}, got {shown(value)}")
    int_at_most(field, value)


def number(config, field: str, lo=None, hi=None) -> None:
    """A finite int or float that float32 holds, within ``[lo, hi]`` where given."""
    number_value(field, config[field], lo, hi)


def number_value(field: str, value, lo=None, hi=None) -> None:
    """``number``'s checks of one value (also each swept value); errors name ``field``."""
    require(is_number(value), field, f"must be a number, got {shown(value)}")
    require(not isinstance(value, float) or math.isfinite(value), field,
            f"must be finite, got {value}")
    require(abs(value) <= FLOAT32_MAX, field,
            f"must fit in float32 (|x| <= {FLOAT32_MAX:.4g}), got {shown(value)}")
    # A Python int enters a jitted computation as int32 (weakly typed), whatever the field.
    require(not is_int(value) or abs(value) <= MAX_INT32, field,
            f"is an integer past int32 ({shown(value)}); write it as a float, e.g. "
            f"{float(value):g}")
    if lo is not None:
        require(value >= lo, field, f"must be >= {lo}, got {value}")
    if hi is not None:
        require(value <= hi, field, f"must be <= {hi}, got {value}")


def choice(config, field: str, choices) -> None:
    """One of ``choices`` (strings; a value of another type, hashable or not, is refused)."""
    value = config[field]
    require(isinstance(value, str) and value in choices, field,
            f"must be one of {', '.join(choices)}, got {shown(value)}")


def validate_distributed(config) -> None:
    """Checks the multi-process fields (before ``jax.distributed.initialize``)."""
    positive_int(config, "num_processes")
    positive_int(config, "heartbeat_timeout_s")
    require(is_int(config.process_id) and 0 <= config.process_id < config.num_processes,
            "process_id",
            f"must be in [0, {config.num_processes}), got {shown(config.process_id)}")
    if config.num_processes > 1:
        address = config.coordinator_address
        require(_is_host_port(address), "coordinator_address",
                f"must be host:port (a port in 1..65535) when num_processes > 1, got "
                f"{shown(address)}")


def _is_host_port(address) -> bool:
    """``host:port`` with a non-empty host (IPv6 in brackets) and a port in 1..65535."""
    if not isinstance(address, str) or ":" not in address:
        return False
    host, port = address.rsplit(":", 1)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return (bool(host) and not any(c.isspace() for c in host) and port.isascii()
            and port.isdigit() and 1 <= int(port) <= 65535)


def validate(config, mode: ModeChecks, counts: DeviceCounts) -> int:
    """Checks every field of a config for ``mode`` (after ``validate_distributed`` and the
    runtime join); raises ``ConfigError``.

    Args:
      config: the run config.
      mode: the architecture's checks.
      counts: device and process counts of the runtime.

    Returns:
      The learner shards over all processes (the mode's field check's count).
    """
    _validate_structure(config)
    shards = mode.check_fields(config, counts)
    _validate_common(config, shards, mode.check_env_id)
    _validate_network(config, mode.env_spec(config.env_id))
    _validate_sweep(config, shards, mode.check_env_id)
    return shards


def _validate_structure(config) -> None:
    """The sub-configs the mode checks read: ``debug`` with its knobs, and ``sweep`` (where
    the config has one) with a tuple of values, or None, per field."""
    debug = config.get("debug")
    require(isinstance(debug, (ml_collections.ConfigDict, Mapping)), "debug",
            f"must be a sub-config of the debug knobs, got {shown(debug)}")
    for field in DEBUG_FIELDS:
        require(field in debug, f"debug.{field}", "is missing")
    if "sweep" not in config:
        return
    sweep = config.sweep
    require(isinstance(sweep, (ml_collections.ConfigDict, Mapping)), "sweep",
            f"must be a sub-config of per-field value tuples, got {shown(sweep)}")
    for field, values in sweep.items():
        require(field in config and field not in ("debug", "sweep"), "sweep",
                f"{field!r} is not a field of the config")
        require(values is None or isinstance(values, (tuple, list)), f"sweep.{field}",
                "must be a tuple of values (e.g. --config.sweep.learning_rate=1e-3,3e-4), "
                f"got {shown(values)}")


def _validate_sweep(config, num_shards: int, check_env_id) -> None:
    """Swept fields must be ``SWEEPABLE`` and every variant a valid config; errors name
    ``sweep.<field>``."""
    fields = swept(config)
    for field in fields:
        require(field in SWEEPABLE, f"sweep.{field}",
                "sets an array shape or the run's structure, which agents of one program "
                f"share; sweepable fields: {', '.join(SWEEPABLE)}")
        require(all(is_number(v) for v in fields[field]), f"sweep.{field}",
                f"values must be numbers, got {shown(fields[field])}")
        for value in fields[field]:  # as given: the agents' programs take them so
            number_value(f"sweep.{field}", value)
    if "max_grad_norm" in fields:
        require(all(v > 0 for v in fields["max_grad_norm"]),
                "sweep.max_grad_norm", "swept values must be > 0 (0, no clipping, changes "
                "the optimizer's structure)")
    if "gamma" in fields:  # the running return's discount is the program's, not an agent's
        require(not config.normalize_reward, "sweep.gamma",
                "cannot be swept with normalize_reward (its running discounted return uses "
                "one gamma for every agent of the program); run one gamma per program")
    # Each value once, in a config that differs from the base only there: the checks of a
    # sweepable field read no other sweepable field, so this is every variant's check, in
    # time linear in the values (not their product).
    for field, values in fields.items():
        for value in values:
            try:
                _validate_common(with_values(config, {field: value}), num_shards,
                                 check_env_id)
            except ConfigError as e:
                if str(e).split(":", 1)[0] != field:
                    raise
                raise ConfigError(f"sweep.{e}") from None
    agents = num_variants(config) * config.num_seeds
    require(agents <= MAX_INT32, "sweep", f"{' x '.join(str(len(v)) for v in fields.values())} "
            f"values x {config.num_seeds} seeds make {agents} agents; at most 2**31 - 1")


def _validate_common(config, num_shards: int, check_env_id) -> None:
    """The fields both modes share; ``num_shards``: learner devices over all processes.
    The first field that fails is reported, in this order."""
    _validate_choices(config)
    _validate_numbers(config)
    _validate_wandb(config)
    _validate_evaluation_and_knobs(config)
    check_env_id(config.env_id)  # the env registry's (a string, and one the mode runs)
    _validate_split(config, num_shards)
    _validate_budget(config)
    _validate_debug(config)


def _validate_choices(config) -> None:
    """The seed and the named choices: algorithm, network, core, optimizer, minibatch."""
    require(is_int(config.seed) and 0 <= config.seed < MAX_SEED, "seed",
            f"must be an integer in [0, {MAX_SEED}), got {shown(config.seed)}")
    choice(config, "algorithm", ALGORITHMS)
    choice(config, "network", NETWORKS)
    choice(config, "recurrent", CORES)
    positive_int(config, "recurrent_hidden")
    choice(config, "optimizer", OPTIMIZERS)
    recurrent = config.recurrent != NO_CORE
    kinds = (AUTO, *accepted_kinds(ALGORITHMS[config.algorithm], recurrent))
    require(config.minibatch in kinds, "minibatch",
            f"must be one of {', '.join(kinds)} for "
            f"{'a recurrent ' if recurrent else ''}{config.algorithm}, got "
            f"{shown(config.minibatch)}")


def _validate_numbers(config) -> None:
    """The sizes, switches and hyperparameters of the update."""
    positive_int(config, "total_env_steps", hi=MAX_INT64)
    for field in ("num_envs", "num_steps", "num_epochs", "num_minibatches", "log_every"):
        positive_int(config, field)
    int_in(config, "checkpoint_every", 0, ">= 0")
    for field in BOOL_FIELDS:
        require(isinstance(config[field], bool), field,
                f"must be true or false, got {shown(config[field])}")
    number(config, "learning_rate", lo=0.0)
    require(config.learning_rate > 0, "learning_rate", "must be > 0")
    number(config, "adam_eps", lo=0.0)
    number(config, "rmsprop_eps", lo=0.0)
    number(config, "rmsprop_decay", 0.0, 1.0)
    number(config, "gamma", 0.0, 1.0)
    number(config, "gae_lambda", 0.0, 1.0)
    number(config, "vtrace_lambda", 0.0, 1.0)
    for field in ("clip_eps", "vf_coef", "ent_coef", "max_grad_norm", "clip_rho",
                  "clip_pg_rho"):
        number(config, field, lo=0.0)
    for field in ("normalize_obs_clip", "normalize_reward_clip"):
        number(config, field)
        require(config[field] > 0, field, f"must be > 0, got {config[field]}")


def _validate_evaluation_and_knobs(config) -> None:
    """In-training evaluation, the update unroll and the CPU thread count."""
    int_in(config, "eval_every", 0, ">= 0 (0: off)")
    positive_int(config, "eval_episodes")
    require(config.eval_episodes <= MAX_EVAL_ENVS, "eval_episodes",
            f"must be at most {MAX_EVAL_ENVS} (host eval seeds stay int32)")
    positive_int(config, "eval_max_steps")
    int_in(config, "update_unroll", AUTO_UNROLL, ">= -1 (-1: auto, 0: fully unrolled)")
    int_in(config, "cpu_threads", 0, ">= 0 (0: auto)")


def _validate_split(config, num_shards: int) -> None:
    """The envs split over ``num_shards`` learner devices, into minibatches and
    micro-batches."""
    require(config.num_envs % num_shards == 0, "num_envs",
            f"{config.num_envs} envs do not split over {num_shards} learner devices")
    per_shard = config.num_envs // num_shards
    require(per_shard % config.num_minibatches == 0, "num_minibatches",
            f"{per_shard} envs per learner device do not split into "
            f"{config.num_minibatches} minibatches")
    int_in(config, "microbatches", AUTO_MICROBATCHES, ">= 1, or -1 (auto)")
    require(config.microbatches != 0, "microbatches", "must be an integer >= 1, or -1 (auto), "
            "got 0")
    mb_envs = per_shard // config.num_minibatches
    require(config.microbatches == AUTO_MICROBATCHES or mb_envs % config.microbatches == 0,
            "microbatches", f"{mb_envs} envs per minibatch per learner device do not split "
            f"into {config.microbatches} micro-batches")


def _validate_budget(config) -> None:
    """``total_env_steps``: at least one update, at most 2**31 - 1 of them."""
    require(config.total_env_steps >= config.num_envs * config.num_steps, "total_env_steps",
            f"{config.total_env_steps} is less than one update "
            f"({config.num_envs} envs x {config.num_steps} steps)")
    updates = config.total_env_steps // (config.num_envs * config.num_steps)
    require(updates <= MAX_INT32, "total_env_steps",
            f"{shown(config.total_env_steps)} env steps make {shown(updates)} updates; at most "
            "2**31 - 1 (the int32 update counter)")


def _validate_debug(config) -> None:
    """The debug knobs: integers within int32, ``learner_delay_ms`` >= 0."""
    delay = config.debug.learner_delay_ms
    require(is_int(delay) and delay >= 0, "debug.learner_delay_ms",
            f"must be an integer >= 0, got {shown(delay)}")
    int_at_most("debug.learner_delay_ms", delay)
    for field in DEBUG_FIELDS:
        value = config.debug[field]
        require(is_int(value), f"debug.{field}", f"must be an integer, got {shown(value)}")
        require(abs(value) <= MAX_INT32, f"debug.{field}",
                f"must be within +-(2**31 - 1) (int32), got {shown(value)}")


def _validate_wandb(config) -> None:
    """W&B fields: a string project, a known mode, and wandb installed when a project is set
    (it is never a hard dependency)."""
    require(isinstance(config.wandb_project, str), "wandb_project", "must be a string")
    choice(config, "wandb_mode", ("online", "offline"))
    if config.wandb_project:
        import importlib.util

        require(importlib.util.find_spec("wandb") is not None, "wandb_project",
                "is set but wandb is not installed (pip install wandb)")


def _validate_network(config, spec: EnvSpec) -> None:
    """Networks get the observations they need: ``obs_ndim`` dims where a network states it,
    uint8 ``[C, H, W]`` frame stacks (EnvPool Atari layout) for the image networks."""
    ndim = getattr(NETWORKS[config.network], "obs_ndim", None)
    require(ndim is None or len(spec.obs_shape) == ndim, "network",
            f"{config.network} needs {ndim}-d observations; {config.env_id} gives "
            f"{list(spec.obs_shape)}")
    if config.network in IMAGE_NETWORKS:
        require(spec.obs_dtype == "uint8" and len(spec.obs_shape) == 3, "network",
                f"{config.network} needs uint8 [C, H, W] frames; {config.env_id} gives "
                f"{spec.obs_dtype} {list(spec.obs_shape)} (use mlp)")
    # Normalised observations are float32: an image network's uint8 frames are not.
    require(not config.normalize_obs or spec.obs_dtype != "uint8", "normalize_obs",
            f"normalises vector observations; {config.env_id} gives {spec.obs_dtype} frames")


def derive(config: ml_collections.ConfigDict, num_shards: int = 1) -> Derived:
    """Derived sizes of a run whose env axis is split over ``num_shards`` learner devices."""
    steps_per_update = config.num_envs * config.num_steps
    num_updates = config.total_env_steps // steps_per_update
    return Derived(
        num_updates=num_updates,
        steps_per_update=steps_per_update,
        envs_per_shard=config.num_envs // num_shards,
        optimizer_steps=num_updates * config.num_epochs * config.num_minibatches,
    )
