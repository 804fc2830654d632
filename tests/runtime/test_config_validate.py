"""Config validation, table-driven: one bad field per row, refused with a message that
starts with the field name; the shipped configs pass; derived sizes; the choice lists come
from the registries; rlcore imports nothing of envs/, anakin/ or sebulba/.

No compiling and no subprocesses: validation only builds env specs.
"""

import dataclasses
import importlib
import math
import re
from pathlib import Path

import pytest

from anakin import train as anakin_train
from configs import cartpole_ppo, cartpole_ppo_sebulba
from rlcore import algorithms, networks, optim
from rlcore.errors import ConfigError
from runtime.config.validation import MAX_SEED, DeviceCounts, derive, validate, validate_distributed
from sebulba import train as sebulba_train

ROOT = Path(__file__).resolve().parents[2]
COUNTS = DeviceCounts(devices=4, local_devices=4, processes=1)
MODES = {"anakin": anakin_train.MODE, "sebulba": sebulba_train.MODE}
GOOD = {"anakin": cartpole_ppo.get_config, "sebulba": cartpole_ppo_sebulba.get_config,
        "distributed": cartpole_ppo.get_config}


def _set(config, path: str, value) -> None:
    """Sets ``a.b.c`` to ``value``, whatever the field's declared type."""
    *parents, leaf = path.split(".")
    for key in parents:
        config = config[key]
    with config.ignore_type():
        config[leaf] = value


def _check(mode: str, config) -> None:
    if mode == "distributed":
        validate_distributed(config)
    else:
        validate(config, MODES[mode], COUNTS)


def _row(mode, path, value, fragment, *, also=None, field=None, marks=()):
    """One bad config: ``also`` sets other fields first (still valid on their own);
    ``field`` is the field the message names (default ``path``)."""
    return pytest.param(mode, path, value, fragment, also or {}, field or path, marks=marks,
                        id=f"{mode}-{path}={value!r}")


BAD = [
    # Shared fields (checked by runtime.config.validation for both modes).
    _row("anakin", "seed", MAX_SEED, "must be an integer in [0, "),
    _row("anakin", "seed", -1, "got -1"),
    _row("anakin", "seed", True, "must be an integer"),
    _row("sebulba", "seed", 2**31, "must be an integer in [0, "),
    _row("anakin", "algorithm", "a2c",
         "must be one of ppo, impala, pqn, dqn, or an import path PACKAGE.MODULE:NAME, got 'a2c'"),
    _row("anakin", "network", "transformer", "must be one of mlp, nature_cnn, impala_resnet"),
    _row("anakin", "optimizer", "sgd", "must be one of adam, radam, rmsprop, got 'sgd'"),
    _row("anakin", "total_env_steps", 0, "must be a positive integer, got 0"),
    _row("anakin", "num_envs", -1, "must be a positive integer, got -1"),
    _row("anakin", "num_envs", 4.0, "must be a positive integer, got 4.0"),
    _row("anakin", "num_steps", 0, "must be a positive integer, got 0"),
    _row("anakin", "num_epochs", 0, "must be a positive integer, got 0"),
    _row("anakin", "num_minibatches", 0, "must be a positive integer, got 0"),
    _row("anakin", "num_minibatches", 3, "4 envs per learner device do not split into 3"),
    _row("sebulba", "num_minibatches", 5, "24 envs per learner device do not split into 5"),
    _row("anakin", "num_envs", 6, "6 envs do not split over 4 learner devices",
         also={"num_devices": 0, "num_minibatches": 1}),
    _row("anakin", "log_every", 0, "must be a positive integer, got 0"),
    _row("anakin", "checkpoint_every", -1, "must be an integer >= 0, got -1"),
    _row("anakin", "learning_rate", 0.0, "must be > 0"),
    _row("anakin", "learning_rate", math.inf, "must be finite"),
    _row("anakin", "learning_rate", math.nan, "must be finite, got nan"),
    _row("anakin", "learning_rate", -1e-3, "must be >= 0.0"),
    _row("anakin", "learning_rate", "1e-3", "must be a number, got '1e-3'"),
    _row("anakin", "gamma", 1.5, "must be <= 1.0, got 1.5"),
    _row("anakin", "normalize_obs_clip", 0.0, "must be > 0, got 0.0"),
    _row("sebulba", "normalize_reward_clip", -1.0, "must be > 0, got -1.0"),
    _row("anakin", "normalize_obs", 1, "must be true or false, got 1"),
    _row("sebulba", "normalize_obs", True, "normalises vector observations",
         also={"env_id": "Breakout-v5", "network": "nature_cnn"}),
    _row("anakin", "gamma", math.nan, "must be finite, got nan"),
    _row("anakin", "gae_lambda", -0.1, "must be >= 0.0, got -0.1"),
    _row("anakin", "vtrace_lambda", 2, "must be <= 1.0, got 2"),
    _row("anakin", "clip_eps", -1, "must be >= 0.0, got -1"),
    _row("anakin", "ent_coef", -0.01, "must be >= 0.0"),
    _row("anakin", "adam_eps", -1e-8, "must be >= 0.0"),
    _row("anakin", "rmsprop_decay", 1.01, "must be <= 1.0"),
    _row("anakin", "update_unroll", -2, "must be an integer >= -1"),
    _row("anakin", "cpu_threads", -1, "must be an integer >= 0 (0: auto)"),
    _row("sebulba", "cpu_threads", 1.5, "must be an integer >= 0 (0: auto)"),
    _row("anakin", "microbatches", 0, "must be an integer >= 1, or -1 (auto), got 0"),
    _row("anakin", "microbatches", -2, "must be an integer >= 1, or -1 (auto), got -2"),
    _row("sebulba", "microbatches", 5, "envs per minibatch per learner device do not split "
         "into 5 micro-batches"),
    _row("anakin", "minibatch_kind", "envs", "must be one of auto, samples, sequences for ppo, got "
         "'envs'"),
    _row("sebulba", "minibatch_kind", "samples", "must be one of auto, sequences for impala, got "
         "'samples'", also={"algorithm": "impala"}),
    _row("anakin", "staleness_correction", "retrace", "must be one of none, decoupled, vtrace, "
         "lr_scale, filter, got 'retrace'"),
    _row("sebulba", "staleness_correction", "decoupled", "impala takes none or lr_scale (the "
         "others read a proximal-policy pass it does not run), got 'decoupled'",
         also={"algorithm": "impala"}),
    _row("anakin", "staleness_correction", "filter", "impala takes none or lr_scale",
         also={"algorithm": "impala"}),
    _row("anakin", "decoupled_max_weight", 0.0, "must be > 0, got 0.0"),
    _row("sebulba", "filter_threshold", -0.1, "must be > 0, got -0.1"),
    _row("anakin", "total_env_steps", 511, "511 is less than one update (4 envs x 128 steps)"),
    _row("sebulba", "total_env_steps", 767, "767 is less than one update (24 envs x 32 steps)"),
    _row("anakin", "network", "nature_cnn", "nature_cnn needs uint8 [C, H, W] frames; "
         "CartPole-v1 gives float32 [4]"),
    _row("sebulba", "network", "impala_resnet", "impala_resnet needs uint8 [C, H, W] frames"),
    _row("anakin", "env_id", "CartPole-v2", "unknown env 'CartPole-v2'; close matches: "
         "CartPole-v1"),
    _row("sebulba", "env_id", "Breakout-v4", "close matches: Breakout-v5"),
    _row("anakin", "env_id", "Breakout-v5", "is not a jittable (Anakin) env"),
    _row("sebulba", "env_id", "envpool:Breakout-MinAtar", "unknown env"),
    _row("anakin", "env_id", "envpool:CartPole-v1", "is not a jittable (Anakin) env"),
    _row("anakin", "env_id", "Reacher-misc", "continuous gymnax env not supported"),
    _row("anakin", "debug.nan_at_update", 1.5, "must be an integer"),
    # Anakin's own fields.
    _row("anakin", "num_devices", 5, "must be 0 (all) or 1..4, got 5"),
    _row("anakin", "num_devices", -1, "got -1"),
    _row("anakin", "updates_per_call", 0, "must be a positive integer, got 0"),
    # Sebulba's own fields.
    _row("sebulba", "actor_device_ids", (), "must be a non-empty tuple of ints, got ()"),
    _row("sebulba", "actor_device_ids", (4,), "(4,) out of range: this process has 4 devices"),
    _row("sebulba", "actor_device_ids", (-1,), "out of range"),
    _row("sebulba", "actor_device_ids", (1, 1), "repeats a device: (1, 1)"),
    _row("sebulba", "learner_device_ids", (1, 9), "(1, 9) out of range"),
    _row("sebulba", "learner_device_ids", (), "must be a non-empty tuple"),
    _row("sebulba", "num_actor_threads", -1,
         "must be an integer >= 0 (0: from the machine), got -1"),
    _row("sebulba", "pipeline", "eager", "must be one of sync, cleanba, async, got 'eager'"),
    _row("sebulba", "queue_timeout_s", 0, "must be > 0"),
    _row("sebulba", "queue_timeout_s", "soon", "must be a number"),
    _row("sebulba", "env_threads", -1, "must be an integer >= 0"),
    _row("sebulba", "debug.actor_jitter_ms", -1, "must be an integer >= 0, got -1"),
    _row("sebulba", "debug.learner_delay_ms", -5, "must be an integer >= 0, got -5"),
    _row("sebulba", "debug.learner_delay_ms", 2**31, "must be at most 2**31 - 1"),
    _row("anakin", "debug.learner_delay_ms", -1, "must be an integer >= 0, got -1"),
    _row("sebulba", "num_envs", 25, "25 envs do not split over 1 processes x 1 actor devices "
         "x 2 threads"),
    _row("sebulba", "num_actor_threads", 5, "24 envs do not split over 1 processes x 1 actor "
         "devices x 5 threads", field="num_envs"),
    # Sweeps: only loss/optimizer scalars, each value valid on its own, Anakin only.
    _row("anakin", "sweep.num_envs", (4, 8), "sets an array shape or the run's structure"),
    _row("anakin", "sweep.num_minibatches", (1, 2), "sweepable fields: learning_rate"),
    _row("anakin", "sweep.learning_rate", (1e-3, -1.0), "must be >= 0.0, got -1.0"),
    _row("anakin", "sweep.gamma", (0.9, 1.5), "must be <= 1.0, got 1.5"),
    _row("anakin", "sweep.ent_coef", ("a",), "values must be numbers"),
    _row("anakin", "sweep.max_grad_norm", (0.5, 0.0), "swept values must be > 0"),
    _row("anakin", "sweep.gamma", (0.9, 0.99), "cannot be swept with normalize_reward",
         also={"normalize_reward": True}),
    _row("sebulba", "sweep.learning_rate", (1e-3, 1e-4), "Sebulba trains one agent per run",
         field="sweep"),
    # Population-based training: each field by its rule, then the population's rules.
    _row("anakin", "pbt.interval", -1, "must be an integer >= 0 (0: off), got -1"),
    _row("anakin", "pbt.fraction", 0.75, "must be a number in (0, 0.5]"),
    _row("anakin", "pbt.statistic", "median", "must be one of return, eval"),
    _row("anakin", "pbt.method", "mutate", "must be one of perturb, resample"),
    _row("anakin", "pbt.explore", ("num_envs",), "'num_envs' is not a sweepable field"),
    _row("anakin", "pbt.explore", ("gamma", "gamma"), "names a field twice"),
    _row("anakin", "pbt.factors", (0.8, -1.0), "must be a non-empty tuple of numbers > 0"),
    _row("anakin", "pbt.interval", 5, "0.25 of 1 agent copies none", field="pbt.fraction"),
    _row("sebulba", "pbt.interval", 5, "population-based training is Anakin's"),
    _row("anakin", "pbt.interval", 13, "13 is longer than the run (12 updates), so no agent "
         "would ever copy", also={"num_seeds": 4, "sweep.learning_rate": (1e-3, 1e-4),
                                  "total_env_steps": 4 * 128 * 12}),
    _row("anakin", "pbt.statistic", "eval", "eval needs an evaluation at every exploit",
         also={"num_seeds": 4, "sweep.learning_rate": (1e-3, 1e-4), "pbt.interval": 5}),
    _row("anakin", "pbt.interval", 5, "learning_rate is not swept", also={"num_seeds": 4},
         field="pbt.low"),
    _row("anakin", "pbt.low", (-1.0,), "learning_rate: must be >= 0.0, got -1.0",
         also={"num_seeds": 4, "pbt.interval": 5, "pbt.low": (1e-4,), "pbt.high": (1e-2,)}),
    _row("anakin", "pbt.high", (1e-2, 1.0), "must be empty or one number per pbt.explore",
         also={"num_seeds": 4, "sweep.learning_rate": (1e-3, 1e-4), "pbt.interval": 5}),
    _row("anakin", "pbt.method", "resample", "learning_rate has fewer than 2",
         also={"num_seeds": 4, "pbt.interval": 5, "pbt.low": (1e-4,), "pbt.high": (1e-2,)}),
    _row("anakin", "pbt.explore", ("max_grad_norm",), "max_grad_norm must stay > 0",
         also={"num_seeds": 4, "max_grad_norm": 0.0, "pbt.interval": 5, "pbt.low": (1e-4,),
               "pbt.high": (1e-2,)}, field="pbt.low"),
    # Multi-process fields (before the runtime joins).
    _row("distributed", "num_processes", 0, "must be a positive integer, got 0"),
    _row("distributed", "process_id", 1, "must be in [0, 1), got 1"),
    _row("distributed", "process_id", -1, "must be in [0, 2), got -1",
         also={"num_processes": 2, "coordinator_address": "localhost:1234"}),
    _row("distributed", "coordinator_address", "",
         "must be host:port (a port in 1..65535) when num_processes > 1, got ''",
         also={"num_processes": 2, "coordinator_address": "localhost:1234"}),
    *[_row("distributed", "coordinator_address", bad, "must be host:port",
           also={"num_processes": 2, "coordinator_address": "localhost:1234"})
      for bad in ("localhost", "127.0.0.1:notaport", ":1234", "host:0", "host:70000",
                  "host:", "host:-1", "my host:1234")],
    _row("distributed", "num_processes", 2, "must be host:port (a port in 1..65535) when",
         field="coordinator_address"),
]


def test_table_is_big_enough():
    assert len(BAD) >= 25
    assert {p.values[0] for p in BAD} == {"anakin", "sebulba", "distributed"}


@pytest.mark.parametrize("mode, path, value, fragment, also, field", BAD)
def test_bad_field_is_refused_naming_the_field(mode, path, value, fragment, also, field):
    config = GOOD[mode]()
    for other, other_value in also.items():
        _set(config, other, other_value)
    _check(mode, config)  # the row's other fields alone are fine
    _set(config, path, value)
    with pytest.raises(ConfigError, match=rf"^{re.escape(field)}: ") as info:
        _check(mode, config)
    assert fragment in str(info.value)


def test_nan_learning_rate_message_names_nan():
    """NaN fails every comparison: ``number`` refuses it as not finite, naming it."""
    config = cartpole_ppo.get_config()
    config.learning_rate = math.nan
    with pytest.raises(ConfigError, match=r"^learning_rate: .*\bnan\b"):
        validate(config, anakin_train.MODE, COUNTS)


@pytest.mark.parametrize("mode, name", [
    ("anakin", "cartpole_ppo"),
    ("anakin", "cartpole_impala"),
    ("anakin", "minatar_breakout_ppo"),
    ("anakin", "minatar_breakout_impala"),
    ("sebulba", "minatar_breakout_impala"),
    ("sebulba", "cartpole_ppo_sebulba"),
    ("sebulba", "cartpole_impala_sebulba"),
    ("sebulba", "atari_ppo"),
    ("sebulba", "atari_impala"),
    ("sebulba", "atari_ppo_2core"),
    ("sebulba", "atari_ppo_1gpu"),
    ("anakin", "memory_ppo"),
    ("sebulba", "memory_ppo"),
    ("anakin", "masked_cartpole_ppo"),
    ("anakin", "pendulum_ppo"),
    ("sebulba", "pendulum_ppo"),
    ("sebulba", "halfcheetah_ppo"),
    ("anakin", "brax_inverted_pendulum_ppo"),
    ("sebulba", "brax_inverted_pendulum_ppo"),
    ("anakin", "brax_hopper_ppo"),
    ("anakin", "craftax_classic_ppo_rnn"),
    ("anakin", "doorkey_ppo_rnn"),
    ("sebulba", "doorkey_ppo_rnn"),
    ("anakin", "snake_ppo"),
    ("anakin", "playground_cartpole_balance_ppo"),
    ("anakin", "cartpole_pqn"),
    ("sebulba", "cartpole_pqn"),
    ("anakin", "minatar_breakout_pqn"),
    ("sebulba", "minatar_breakout_pqn"),
    ("sebulba", "atari_pqn"),
    ("sebulba", "atari_pqn_2core"),
])
def test_shipped_configs_validate(mode, name):
    config = importlib.import_module(f"configs.{name}").get_config()
    validate_distributed(config)
    validate(config, MODES[mode], COUNTS)


def test_every_runnable_config_is_listed():
    """A new config file must be added to ``test_shipped_configs_validate``."""
    listed = {"base", "atari_base", "cartpole_ppo", "cartpole_impala", "minatar_breakout_ppo",
              "minatar_breakout_impala", "cartpole_ppo_sebulba", "cartpole_impala_sebulba",
              "atari_ppo", "atari_impala", "atari_ppo_2core", "atari_ppo_1gpu", "memory_ppo",
              "masked_cartpole_ppo", "pendulum_ppo", "halfcheetah_ppo",
              "brax_inverted_pendulum_ppo", "brax_hopper_ppo", "craftax_classic_ppo_rnn",
              "doorkey_ppo_rnn", "snake_ppo", "playground_cartpole_balance_ppo",
              "cartpole_pqn", "minatar_breakout_pqn", "atari_pqn", "atari_pqn_2core",
              "cartpole_dqn"}
    found = {p.stem for p in (ROOT / "configs").glob("*.py") if p.stem != "__init__"}
    assert found == listed


@pytest.mark.parametrize("name, num_shards, expected", [
    # 4 envs x 128 steps = 512; 500_000 // 512 = 976 (499_712 steps); 976 x 4 x 4; 4 / 4.
    ("cartpole_ppo", 1, dict(num_updates=976, steps_per_update=512, envs_per_shard=4,
                             optimizer_steps=15_616, gradient_steps=16, envs_per_minibatch=1)),
    # 24 x 32 = 768; 250_000 // 768 = 325 (249_600); 24 / 3 = 8; 325 x 4 x 4; 8 / 4.
    ("cartpole_ppo_sebulba", 3, dict(num_updates=325, steps_per_update=768, envs_per_shard=8,
                                     optimizer_steps=5_200, gradient_steps=16,
                                     envs_per_minibatch=2)),
    # 16 x 32 = 512; 976; 1 epoch x 4 minibatches.
    ("cartpole_impala", 1, dict(num_updates=976, steps_per_update=512, envs_per_shard=16,
                                optimizer_steps=3_904)),
    # 128 x 20 = 2560; 50_000_000 // 2560 = 19_531 (49_999_360); 128 / 2 = 64; x 1 x 4.
    ("atari_impala", 2, dict(num_updates=19_531, steps_per_update=2_560, envs_per_shard=64,
                             optimizer_steps=78_124)),
])
def test_derive_sizes(name, num_shards, expected):
    config = importlib.import_module(f"configs.{name}").get_config()
    before = config.to_json()
    derived = derive(config, num_shards)
    assert {k: getattr(derived, k) for k in expected} == expected
    assert config.to_json() == before  # nothing written back


def test_derive_default_is_one_shard():
    config = cartpole_ppo.get_config()
    assert derive(config) == derive(config, 1)


@pytest.mark.parametrize("registry, field, new_name", [
    (optim.OPTIMIZERS, "optimizer", "lion"),
    (networks.NETWORKS, "network", "tiny_mlp"),
    (algorithms.REGISTRY, "algorithm", "a2c"),
])
def test_choices_come_from_the_registries(monkeypatch, registry, field, new_name):
    config = cartpole_ppo.get_config()
    config[field] = new_name
    with pytest.raises(ConfigError, match=rf"^{field}: must be one of .*, got '{new_name}'"):
        validate(config, anakin_train.MODE, COUNTS)

    # An algorithm is a class that validation checks (here IMPALA's under a new name); the
    # others are names.
    entry = dataclasses.dataclass(frozen=True)(type(new_name, (algorithms.Impala,), {}))
    monkeypatch.setitem(registry, new_name, entry if field == "algorithm" else object())
    validate(config, anakin_train.MODE, COUNTS)  # now a choice

    config[field] = "nonesuch"
    with pytest.raises(ConfigError, match=rf"^{field}: must be one of .*\b{new_name}\b"):
        validate(config, anakin_train.MODE, COUNTS)


