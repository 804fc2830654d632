"""Config validation and derived sizes.

``validate(config, mode, layout)`` checks every field before anything compiles and raises
``ConfigError("field: what is wrong")``; entry points print that one line and exit 2.
``derive(config, ...)`` is the one place derived sizes come from; nothing is written back
into the config.
"""

from __future__ import annotations

import dataclasses

import ml_collections

ALGORITHMS = ("ppo", "impala")
PIPELINES = ("sync", "cleanba", "async")
OPTIMIZERS = ("adam", "rmsprop")
NETWORKS = ("mlp", "nature_cnn", "impala_resnet")
MODES = ("anakin", "sebulba")
MAX_SEED = 2**30  # EnvPool seeds are int32: seed + global env index must fit
IMAGE_NETWORKS = ("nature_cnn", "impala_resnet")


class ConfigError(ValueError):
    """A config field has a bad value. The message starts with the field name."""


@dataclasses.dataclass(frozen=True)
class Derived:
    """Sizes derived from a config and a device layout.

    Attributes:
      num_updates: learner updates in the run (``total_env_steps // steps_per_update``).
      steps_per_update: env steps per update over all envs (``num_envs * num_steps``).
      envs_per_shard: envs each learner device holds.
      envs_per_minibatch: envs in one minibatch over all devices.
      optimizer_steps: gradient steps in the run (for learning-rate annealing).
    """

    num_updates: int
    steps_per_update: int
    envs_per_shard: int
    envs_per_minibatch: int
    optimizer_steps: int


def _require(cond, field, msg):
    if not cond:
        raise ConfigError(f"{field}: {msg}")


def _positive_int(config, field):
    value = config[field]
    _require(isinstance(value, int) and not isinstance(value, bool) and value > 0,
             field, f"must be a positive integer, got {value!r}")


def _number(config, field, lo=None, hi=None):
    value = config[field]
    _require(isinstance(value, (int, float)) and not isinstance(value, bool), field,
             f"must be a number, got {value!r}")
    if lo is not None:
        _require(value >= lo, field, f"must be >= {lo}, got {value}")
    if hi is not None:
        _require(value <= hi, field, f"must be <= {hi}, got {value}")


def _choice(config, field, choices):
    _require(config[field] in choices, field,
             f"must be one of {', '.join(choices)}, got {config[field]!r}")


def validate_common(config: ml_collections.ConfigDict, num_shards: int, check_env_id) -> None:
    """Checks the fields both modes share.

    Args:
      config: the run config.
      num_shards: learner devices over all processes (the env axis splits over them).
      check_env_id: the mode's env-id check (``envs.registry.check_jax_env_id`` or
        ``check_host_env_id``), raising ConfigError.
    """

    _require(isinstance(config.seed, int) and 0 <= config.seed < MAX_SEED, "seed",
             f"must be an integer in [0, {MAX_SEED}), got {config.seed!r}")
    _choice(config, "algorithm", ALGORITHMS)
    _choice(config, "network", NETWORKS)
    _choice(config, "optimizer", OPTIMIZERS)
    for field in ("total_env_steps", "num_envs", "num_steps", "num_epochs",
                  "num_minibatches", "log_every"):
        _positive_int(config, field)
    _require(isinstance(config.checkpoint_every, int) and config.checkpoint_every >= 0,
             "checkpoint_every", f"must be an integer >= 0, got {config.checkpoint_every!r}")
    _number(config, "learning_rate", lo=0.0)
    _require(0 < config.learning_rate < float("inf"), "learning_rate", "must be finite and > 0")
    _number(config, "adam_eps", lo=0.0)
    _number(config, "rmsprop_eps", lo=0.0)
    _number(config, "rmsprop_decay", 0.0, 1.0)
    _number(config, "gamma", 0.0, 1.0)
    _number(config, "gae_lambda", 0.0, 1.0)
    _number(config, "vtrace_lambda", 0.0, 1.0)
    for field in ("clip_eps", "vf_coef", "ent_coef", "max_grad_norm", "clip_rho",
                  "clip_pg_rho"):
        _number(config, field, lo=0.0)
    _require(isinstance(config.update_unroll, int) and config.update_unroll >= 0,
             "update_unroll", "must be an integer >= 0 (0: fully unrolled)")
    check_env_id(config.env_id)
    _require(config.num_envs % num_shards == 0, "num_envs",
             f"{config.num_envs} envs do not split over {num_shards} learner devices")
    per_shard = config.num_envs // num_shards
    _require(per_shard % config.num_minibatches == 0, "num_minibatches",
             f"{per_shard} envs per learner device do not split into "
             f"{config.num_minibatches} minibatches")
    _require(config.total_env_steps >= config.num_envs * config.num_steps, "total_env_steps",
             f"{config.total_env_steps} is less than one update "
             f"({config.num_envs} envs x {config.num_steps} steps)")
    for field in ("actor_jitter_ms", "fail_actor_at_update", "nan_at_update"):
        _require(isinstance(config.debug[field], int), f"debug.{field}", "must be an integer")


def derive(config: ml_collections.ConfigDict, num_shards: int = 1) -> Derived:
    """Derived sizes of a run whose env axis is split over ``num_shards`` learner devices."""
    steps_per_update = config.num_envs * config.num_steps
    num_updates = config.total_env_steps // steps_per_update
    return Derived(
        num_updates=num_updates,
        steps_per_update=steps_per_update,
        envs_per_shard=config.num_envs // num_shards,
        envs_per_minibatch=config.num_envs // config.num_minibatches,
        optimizer_steps=num_updates * config.num_epochs * config.num_minibatches,
    )


def loss_hparams(config):
    """The ``rlcore.learner.LossHParams`` of a config."""
    from rlcore.learner import LossHParams

    return LossHParams(
        gamma=config.gamma, gae_lambda=config.gae_lambda, clip_eps=config.clip_eps,
        clip_vloss=config.clip_vloss, norm_adv=config.norm_adv, vf_coef=config.vf_coef,
        ent_coef=config.ent_coef, vtrace_lambda=config.vtrace_lambda,
        clip_rho=config.clip_rho, clip_pg_rho=config.clip_pg_rho,
    )


def optimizer(config, derived: Derived):
    """The optimizer of a config (``rlcore.optim.make_optimizer``)."""
    from rlcore.optim import make_optimizer

    return make_optimizer(
        config.optimizer, config.learning_rate, max_grad_norm=config.max_grad_norm,
        total_steps=derived.optimizer_steps, anneal_lr=config.anneal_lr,
        adam_eps=config.adam_eps, rmsprop_decay=config.rmsprop_decay,
        rmsprop_eps=config.rmsprop_eps,
    )


def unroll(config) -> int | bool:
    """``lax.scan`` unroll for the update loop: ``update_unroll``, 0 meaning fully unrolled."""
    return True if config.update_unroll == 0 else config.update_unroll


def validate_distributed(config) -> None:
    """Checks the multi-process fields (before ``jax.distributed.initialize``)."""
    _positive_int(config, "num_processes")
    _require(isinstance(config.process_id, int) and 0 <= config.process_id < config.num_processes,
             "process_id", f"must be in [0, {config.num_processes}), got {config.process_id!r}")
    if config.num_processes > 1:
        _require(isinstance(config.coordinator_address, str) and ":" in config.coordinator_address,
                 "coordinator_address", "must be host:port when num_processes > 1")


@dataclasses.dataclass(frozen=True)
class DeviceCounts:
    """What validation needs to know of the runtime (after ``jax.distributed`` joined)."""

    devices: int        # devices of every process
    local_devices: int  # devices of this process
    processes: int


def validate(config, mode: str, counts: DeviceCounts) -> None:
    """Checks every field of an Anakin or Sebulba config; raises ``ConfigError``.

    Args:
      config: the run config.
      mode: ``"anakin"`` or ``"sebulba"``.
      counts: device and process counts of the runtime.
    """
    from envs import registry  # local: envs imports rlcore

    validate_distributed(config)
    if mode == "anakin":
        shards = _validate_anakin(config, counts)
        check_env_id = registry.check_jax_env_id
    elif mode == "sebulba":
        shards = _validate_sebulba(config, counts)
        check_env_id = registry.check_host_env_id
    else:
        raise ValueError(f"mode: unknown '{mode}' (expected one of {MODES})")
    validate_common(config, shards, check_env_id)
    _validate_network(config, registry.obs_spec(config.env_id))


def _validate_anakin(config, counts: DeviceCounts) -> int:
    """Anakin fields; returns the number of data shards."""
    n = config.num_devices
    _require(isinstance(n, int) and 0 <= n <= counts.devices, "num_devices",
             f"must be 0 (all) or 1..{counts.devices}, got {n!r}")
    _require(counts.processes == 1 or n in (0, counts.devices), "num_devices",
             "must be 0 (all) in a multi-process run")
    _positive_int(config, "updates_per_call")
    return n or counts.devices


def _validate_sebulba(config, counts: DeviceCounts) -> int:
    """Sebulba fields; returns the number of learner shards over all processes."""
    n_local = counts.local_devices
    for field in ("actor_device_ids", "learner_device_ids"):
        ids = config[field]
        _require(isinstance(ids, tuple) and len(ids) > 0
                 and all(isinstance(i, int) for i in ids),
                 field, f"must be a non-empty tuple of ints, got {ids!r}")
        _require(all(0 <= i < n_local for i in ids), field,
                 f"{ids} out of range: this process has {n_local} devices (0..{n_local - 1})")
        _require(len(set(ids)) == len(ids), field, f"repeats a device: {ids}")
    _positive_int(config, "num_actor_threads")
    _choice(config, "pipeline", PIPELINES)
    _require(isinstance(config.env_threads, int) and config.env_threads >= 0, "env_threads",
             "must be an integer >= 0")
    _number(config, "queue_timeout_s")
    _require(config.queue_timeout_s > 0, "queue_timeout_s", "must be > 0")
    jitter = config.debug.actor_jitter_ms
    _require(isinstance(jitter, int) and jitter >= 0, "debug.actor_jitter_ms",
             f"must be an integer >= 0, got {jitter!r}")
    actors = counts.processes * len(config.actor_device_ids) * config.num_actor_threads
    _require(isinstance(config.num_envs, int) and config.num_envs % actors == 0, "num_envs",
             f"{config.num_envs} envs do not split over {counts.processes} processes x "
             f"{len(config.actor_device_ids)} actor devices x {config.num_actor_threads} threads")
    return counts.processes * len(config.learner_device_ids)


def _validate_network(config, spec) -> None:
    """Image networks need uint8 ``[C, H, W]`` frame stacks (EnvPool Atari layout)."""
    if config.network in IMAGE_NETWORKS:
        _require(spec.obs_dtype == "uint8" and len(spec.obs_shape) == 3, "network",
                 f"{config.network} needs uint8 [C, H, W] frames; {config.env_id} gives "
                 f"{spec.obs_dtype} {list(spec.obs_shape)} (use mlp)")
