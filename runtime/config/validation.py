"""Config validation and derived sizes; nothing else.

``validate(config, mode, counts)`` checks every field before anything compiles and raises
``ConfigError("field: what is wrong")``; entry points print that one line and exit 2. The
fields both modes share are checked here; ``mode`` (a ``ModeChecks`` that each architecture
hands in) checks its own fields and env ids and gives the env's spec, so rlcore imports
nothing of envs/, anakin/ or sebulba/. Each field's own rule (range, choices) is its record's
in ``runtime.config.fields`` (``check_field``; the choice lists are the registries that own them);
what is written here are the rules that read more than one field. ``derive(config,
num_shards)`` is the one place derived sizes come from; nothing is written back into the
config. See docs/design.md, "Validation".
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Callable

import ml_collections

from rlcore.algorithms import algorithm_class
from rlcore.algorithms.base import AUTO, accepted_kinds, splits_its_loss
from rlcore.errors import ConfigError
from rlcore.hparams import envs_per_minibatch, gradient_steps
from rlcore.imports import colon_hint, is_import_path
from rlcore.networks import (
    IMAGE_NETWORKS,
    NETWORKS,
    NO_CORE,
    check_torso,
    imported_torso,
    is_whole_network,
)
from rlcore.staleness import CORRECTIONS
from rlcore.types import EnvSpec
from runtime.config import env_args, pbt
from runtime.config.algo import check_own, check_own_values
from runtime.config.env_args import env_kwargs_of
from runtime.config.fields import (
    ALGO,
    BY_NAME,
    COMMON,
    DEBUG_FIELDS,
    DISTRIBUTED,
    FIELDS,
    MAX_INT32,
    MAX_INT64,  # noqa: F401 - the rules' bounds are runtime.config.fields', named here for the modes
    MAX_SEED,  # noqa: F401
    RENAMED,
    REPLAY_FIELDS,
    SWEEPABLE,
    Checked,
    Choice,
    Flag,
    Int32,
    Ints,
    Number,
    Rule,
    Text,
    hparams_of,
    renamed,
)
from runtime.config.sweep import ENV, num_variants, swept, with_values

# Number fields enter the compiled programs as float32: larger magnitudes become inf.
FLOAT32_MAX = 3.4028234663852886e38
# ``update_unroll`` and ``microbatches`` -1: chosen from the device and its memory
# (``runtime.config.plan.update_plan``).
AUTO_UNROLL = AUTO_MICROBATCHES = -1


@dataclasses.dataclass(frozen=True)
class Derived:
    """Sizes derived from a config and a device layout.

    Attributes:
      num_updates: learner updates in the run (``total_env_steps // steps_per_update``).
      steps_per_update: env steps per update over all envs (``num_envs * num_steps``).
      envs_per_shard: envs each learner device holds.
      optimizer_steps: gradient steps in the run (``num_updates * gradient_steps``).
      gradient_steps: gradient steps per update (``num_epochs * num_minibatches``).
      envs_per_minibatch: envs of one minibatch on one learner device (``envs_per_shard //
        num_minibatches``; ``microbatches`` divides it).
    """

    num_updates: int
    steps_per_update: int
    envs_per_shard: int
    optimizer_steps: int
    gradient_steps: int
    envs_per_minibatch: int


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
    """Host buffers a mode keeps besides its devices' memory (for ``runtime.config.memory_check``).

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
      check_env_id: ``(env_id, **env_kwargs)``: raises ConfigError (with close matches)
        for an id the mode cannot run, or arguments its env does not take.
      env_spec: ``(env_id, **env_kwargs) -> EnvSpec`` without compiling anything; read
        through ``spec``, which passes the config's.
      num_agents: ``config -> agents`` trained in one program.
      rollout_values: whether the learner's trajectory carries the rollout's values at
        policy lag 0, so the algorithm need not recompute them.
      devices_used: ``(config, num_shards, num_processes) -> local devices`` the run
        computes on (CPU devices share the host's RAM).
      host_memory: the mode's host buffers, or None.
      check_before_join: the mode's checks of the process fields (``num_processes``)
        against its own, before ``jax.distributed`` starts (a peer never waits on a
        refusal of process 0; docs/design.md, "Validation").
      default_lag: ``config -> lag`` where ``policy_lag`` is -1 (Anakin 0; Sebulba its
        pipeline's, None for async); read through ``policy_lag``.
      keeps_lagged_params: whether its device state keeps ``policy_lag`` copies of the
        params to act with (Anakin; no rollout values above lag 0).
      actor_threads: ``(config, num_processes) -> threads`` per actor device, the
        machine's where ``num_actor_threads`` is 0 (Sebulba); 0 for a mode without actor
        threads. Read, never written into the config by a check.
      check_swept_env: ``config -> None``: raises ConfigError for a swept env argument
        (``sweep.env_kwargs``) the mode's env cannot take traced (Anakin; a mode that
        sweeps nothing refuses every sweep in ``check_fields``).
    """

    name: str
    check_fields: Callable[[ml_collections.ConfigDict, DeviceCounts], int]
    check_env_id: Callable[..., None]
    env_spec: Callable[..., EnvSpec]
    num_agents: Callable[[ml_collections.ConfigDict], int]
    rollout_values: bool
    devices_used: Callable[[ml_collections.ConfigDict, int, int], int]
    host_memory: HostMemory | None = None
    check_before_join: Callable[[ml_collections.ConfigDict], None] = lambda config: None
    default_lag: Callable[[ml_collections.ConfigDict], int | None] = lambda config: 0
    keeps_lagged_params: bool = False
    actor_threads: Callable[[ml_collections.ConfigDict, int], int] = lambda config, p: 0
    check_swept_env: Callable[[ml_collections.ConfigDict], None] = lambda config: None

    def spec(self, config) -> EnvSpec:
        """The EnvSpec of ``config``'s env (``env_id`` with its ``env_kwargs``)."""
        return self.env_spec(config.env_id, **env_kwargs_of(config))

    def policy_lag(self, config) -> int | None:
        """The run's policy lag, by the one rule both modes follow: ``policy_lag`` where
        set (>= 0), else the mode's ``default_lag`` (None: the newest params, Sebulba's
        async pipeline). See docs/design.md, "Pipelines and staleness"."""
        return config.policy_lag if config.policy_lag >= 0 else self.default_lag(config)

    def params_ring(self, config) -> int:
        """The copies of the params its device state keeps to act with: the policy lag
        where ``keeps_lagged_params``, else 0."""
        return (self.policy_lag(config) or 0) if self.keeps_lagged_params else 0


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
    check_fields_of(config, DISTRIBUTED)
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
    _validate_sweep(config, shards, mode.check_env_id)
    mode.check_swept_env(config)
    pbt.check(config, mode.num_agents(config), check_field, derive(config).num_updates)
    # Last: the env's spec imports its library (Brax and MuJoCo take seconds).
    _validate_network(config, mode.spec(config))
    return shards


def validate_fields(config) -> None:
    """The checks of ``validate`` that need neither the runtime's devices nor the env: the
    config's structure and each shared field by its record's rule. The training commands
    run them before a resume compares the config with the run's (``runtime.run.resume``), so
    that a bad value is refused by its own rule; ``validate`` runs them again."""
    _validate_structure(config)
    check_fields_of(config, COMMON)


def _validate_structure(config) -> None:
    """No former field name (``runtime.config.fields.RENAMED``); the sub-configs the mode checks
    read: ``debug`` with its knobs, ``pbt`` and ``replay`` with their fields, and ``sweep``
    (where the config has one) with a tuple of values, or None, per field."""
    for old in RENAMED:
        require(old not in config, old, renamed(old))
    debug = config.get("debug")
    require(isinstance(debug, (ml_collections.ConfigDict, Mapping)), "debug",
            f"must be a sub-config of the debug knobs, got {shown(debug)}")
    for field in DEBUG_FIELDS:
        require(field in debug, f"debug.{field}", "is missing")
    pbt.check_structure(config)
    replay = config.get("replay")
    require(isinstance(replay, (ml_collections.ConfigDict, Mapping)), "replay",
            f"must be a sub-config of the replay fields, got {shown(replay)}")
    for field in REPLAY_FIELDS:
        require(field in replay, f"replay.{field}", "is missing")
    env_args.check_structure(config)
    if "sweep" not in config:
        return
    sweep = config.sweep
    require(isinstance(sweep, (ml_collections.ConfigDict, Mapping)), "sweep",
            f"must be a sub-config of per-field value tuples, got {shown(sweep)}")
    for field, values in sweep.items():
        require(field in config and field not in ("debug", "sweep"), "sweep",
                f"{field!r} is not a field of the config")
        if field in ("algo", env_args.FIELD):  # own hyperparameters', env arguments' tuples
            require(isinstance(values, (ml_collections.ConfigDict, Mapping)), f"sweep.{field}",
                    f"must be a sub-config of value tuples, got {shown(values)}")
            for name, own in values.items():
                require(isinstance(own, (tuple, list)), f"sweep.{field}.{name}",
                        f"must be a tuple of values, got {shown(own)}")
            continue
        require(values is None or isinstance(values, (tuple, list)), f"sweep.{field}",
                "must be a tuple of values (e.g. --config.sweep.learning_rate=1e-3,3e-4), "
                f"got {shown(values)}")


def _validate_sweep(config, num_shards: int, check_env_id) -> None:
    """Swept fields must be ``SWEEPABLE`` and every variant a valid config; errors name
    ``sweep.<field>``."""
    fields = swept(config)
    for field in fields:
        require(field in SWEEPABLE or field.startswith((ALGO, ENV)), f"sweep.{field}",
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
    """The fields both modes share: each by its record's rule, then the rules that read
    more than one field; ``num_shards``: learner devices over all processes."""
    check_fields_of(config, COMMON)
    check_own(config)  # the algorithm loads, and ``algo`` holds its own hyperparameters
    recurrent = config.recurrent != NO_CORE
    algorithm = algorithm_class(config.algorithm)
    require(bool(accepted_kinds(algorithm, recurrent)), "recurrent",
            f"{config.algorithm} learns from {', '.join(algorithm.minibatch_kinds)} only; a "
            f"recurrent agent ({config.recurrent}) needs whole sequences")
    kinds = (AUTO, *accepted_kinds(algorithm, recurrent))
    require(config.minibatch_kind in kinds, "minibatch_kind",
            f"must be one of {', '.join(kinds)} for "
            f"{'a recurrent ' if recurrent else ''}{config.algorithm}, got "
            f"{shown(config.minibatch_kind)}")
    _validate_staleness(config)
    check_own_values(config, hparams_of(config))  # the algorithm's own rules of its values
    _validate_wandb_installed(config)
    # The env registry's: a string, one the mode runs, and arguments its env takes.
    check_env_id(config.env_id, **env_kwargs_of(config))
    sizes = derive(config, num_shards)
    require(config.num_envs % num_shards == 0, "num_envs",
            f"{config.num_envs} envs do not split over {num_shards} learner devices")
    require(sizes.envs_per_shard % config.num_minibatches == 0, "num_minibatches",
            f"{sizes.envs_per_shard} envs per learner device do not split into "
            f"{config.num_minibatches} minibatches")
    mb_envs = sizes.envs_per_minibatch
    require(config.microbatches == AUTO_MICROBATCHES or mb_envs % config.microbatches == 0,
            "microbatches", f"{mb_envs} envs per minibatch per learner device do not split "
            f"into {config.microbatches} micro-batches")
    require(config.microbatches in (1, AUTO_MICROBATCHES)
            or splits_its_loss(algorithm_class(config.algorithm)), "microbatches",
            f"{config.algorithm} overrides loss below the class that splits it "
            f"(split_ready), so its loss on {config.microbatches} micro-batches may not be "
            "its loss on the minibatch: set microbatches=1, or define split_ready with it")
    require(config.total_env_steps >= sizes.steps_per_update, "total_env_steps",
            f"{config.total_env_steps} is less than one update "
            f"({config.num_envs} envs x {config.num_steps} steps)")
    require(sizes.num_updates <= MAX_INT32, "total_env_steps",
            f"{shown(config.total_env_steps)} env steps make {shown(sizes.num_updates)} "
            "updates; at most 2**31 - 1 (the int32 update counter)")


def _validate_staleness(config) -> None:
    """``staleness_correction``: one of ``rlcore.staleness.CORRECTIONS`` that the algorithm
    implements (its ``staleness_corrections``)."""
    choice(config, "staleness_correction", CORRECTIONS)
    takes = algorithm_class(config.algorithm).staleness_corrections
    require(config.staleness_correction in takes, "staleness_correction",
            f"{config.algorithm} takes {' or '.join(takes)} (the others read a proximal-policy "
            f"pass it does not run), got {shown(config.staleness_correction)}")


def check_fields_of(config, checked_in: str) -> None:
    """Checks every field whose record is ``checked_in`` there (``runtime.config.fields.COMMON``,
    ``DISTRIBUTED``, ...) by its rule, in the records' order; a ``Checked`` rule is the
    cross-field rules' or the mode's."""
    for field in FIELDS:
        if field.checked_in == checked_in and not isinstance(field.rule, Checked):
            check_field(config, field.name)


def check_field(config, name: str) -> None:
    """Checks the field ``name`` (dotted for a sub-config's) by its record's rule; raises
    ``ConfigError("name: ...")``."""
    value = config
    for part in name.split("."):
        value = value[part]
    check_value(name, value, BY_NAME[name].rule)


def check_values(values: Mapping, rules: Mapping[str, Rule]) -> None:
    """Checks ``values[name]`` by ``rules[name]`` for each name of ``rules``, each item of a
    list value alone (a command's comma-separated flag): a command's own flags checked by
    the rules the config fields use (docs/design.md, "Exit codes"); raises
    ``ConfigError("name: ...")``."""
    for name, rule in rules.items():
        value = values[name]
        for item in value if isinstance(value, list) else [value]:
            check_value(name, item, rule)


def check_value(name: str, value, rule: Rule) -> None:
    """Checks one ``value`` by ``rule`` (a field record's: ``runtime.config.fields``); raises
    ``ConfigError("name: ...")``."""
    if isinstance(rule, Ints):
        _check_ints(name, value, rule)
    elif isinstance(rule, Int32):
        require(is_int(value), name, f"must be an integer, got {shown(value)}")
        require(abs(value) <= MAX_INT32, name,
                f"must be within +-(2**31 - 1) (int32), got {shown(value)}")
    elif isinstance(rule, Number):
        number_value(name, value, rule.lo, rule.hi)
        require(not rule.above_zero or value > 0, name, rule.above_zero.format(value=value))
    elif isinstance(rule, Choice):
        require(isinstance(value, str) and (value in rule.options
                                            or (rule.imports and is_import_path(value))),
                name, f"must be {rule.text()}, got {shown(value)}"
                f"{colon_hint(value) if rule.imports else ''}")
    elif isinstance(rule, Flag):
        require(isinstance(value, bool), name, f"must be true or false, got {shown(value)}")
    elif isinstance(rule, Text):
        require(isinstance(value, str), name, "must be a string")
    else:
        raise TypeError(f"{name}: a {type(rule).__name__} rule is checked by its own code")


def _check_ints(name: str, value, rule: Ints) -> None:
    """An ``Ints`` rule (see ``runtime.config.fields.Ints``)."""
    in_range = is_int(value) and value >= rule.lo and (not rule.hi_in_phrase or value <= rule.hi)
    require(in_range and value not in rule.excluded, name,
            f"must be {rule.phrase}, got {shown(value)}")
    if not rule.hi_in_phrase:
        int_at_most(name, value, rule.hi)
    if rule.cap is not None:
        require(value <= rule.cap, name, f"must be at most {rule.cap} ({rule.cap_reason})")


def _validate_wandb_installed(config) -> None:
    """wandb installed when a project is set (it is never a hard dependency)."""
    if config.wandb_project:
        import importlib.util

        require(importlib.util.find_spec("wandb") is not None, "wandb_project",
                "is set but wandb is not installed (pip install wandb)")


def _validate_network(config, spec: EnvSpec) -> None:
    """Networks get the observations they need: ``obs_ndim`` dims where a network states it,
    uint8 ``[C, H, W]`` frame stacks (EnvPool Atari layout) for the image networks; a torso
    of the user's (an import path) imports and gives features ``[N, D]``
    (``rlcore.networks.check_torso``) and takes no ``layer_norm``."""
    if is_import_path(config.network):
        check_torso(config.network, spec)
        require(config.recurrent == NO_CORE or not is_whole_network(
            imported_torso(config.network, spec), spec), "recurrent",
            f"'{config.network}' is a whole network (it gives dist and value); a recurrent "
            "agent takes a torso (features [N, D]) before its core")
        require(not config.get("layer_norm", False), "layer_norm",
                f"is an option of the built-in networks; '{config.network}' is your own "
                "(put nn.LayerNorm in it)")
    else:
        _validate_built_in_network(config, spec)
    # Normalised observations are float32: an image network's uint8 frames are not.
    require(not config.normalize_obs or spec.obs_dtype != "uint8", "normalize_obs",
            f"normalises vector observations; {config.env_id} gives {spec.obs_dtype} frames")


def _validate_built_in_network(config, spec: EnvSpec) -> None:
    """A built-in network's needs: ``obs_ndim`` dims where it states them, uint8 frames for
    the image networks."""
    ndim = getattr(NETWORKS[config.network], "obs_ndim", None)
    require(ndim is None or len(spec.obs_shape) == ndim, "network",
            f"{config.network} needs {ndim}-d observations; {config.env_id} gives "
            f"{list(spec.obs_shape)}")
    if config.network in IMAGE_NETWORKS:
        require(spec.obs_dtype == "uint8" and len(spec.obs_shape) == 3, "network",
                f"{config.network} needs uint8 [C, H, W] frames; {config.env_id} gives "
                f"{spec.obs_dtype} {list(spec.obs_shape)} (use mlp)")


def derive(config: ml_collections.ConfigDict, num_shards: int = 1) -> Derived:
    """Derived sizes of a run whose env axis is split over ``num_shards`` learner devices
    (the one place they come from; floors where the config does not split evenly, which
    validation refuses)."""
    steps_per_update = config.num_envs * config.num_steps
    num_updates = config.total_env_steps // steps_per_update
    envs_per_shard = config.num_envs // num_shards
    steps = gradient_steps(config.num_epochs, config.num_minibatches)
    return Derived(
        num_updates=num_updates,
        steps_per_update=steps_per_update,
        envs_per_shard=envs_per_shard,
        optimizer_steps=num_updates * steps,
        gradient_steps=steps,
        envs_per_minibatch=envs_per_minibatch(envs_per_shard, config.num_minibatches),
    )
