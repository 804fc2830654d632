"""The ablation suites: which runs each one is made of (``benchmarks.ablate`` runs them).

A suite is a list of ``Cell``\\ s; a cell is one program, ``python -m <mode>.main`` with a
config file and overrides, training one or (Anakin, ``num_seeds``) several seeds. Every size
that costs time is written here once, so that ``--budget_scale`` can shrink a whole suite for
tests and notebooks.

- ``architectures``: Anakin against Sebulba, PPO and IMPALA, on CartPole-v1 (gymnax's in both
  modes, ``gymnax:CartPole-v1``) and Breakout-MinAtar, and PPO on the continuous Pendulum-v1
  (gymnax's, a Gaussian policy), with matched hyperparameters (the same envs, rollout length
  and so global batch, epochs, minibatches, learning rate and budget).
  Anakin trains all seeds as one program (``num_seeds``), Sebulba one program per seed.
- ``pipelines``: Sebulba PPO on EnvPool CartPole-v1, ``sync`` / ``cleanba`` / ``async`` x actor
  jitter 0, 10, 50 ms x 1 and 2 actor threads.
- ``devices``: Sebulba PPO on EnvPool CartPole-v1 with actor+learner device splits 1+1, 1+3
  and 2+2 on 4 fake CPU devices.
- ``atari-smoke``: Sebulba PPO and IMPALA on Breakout-v5 with a small budget (SPS and stage
  times only).
- ``staleness``: the policy lag (``policy_lag`` 0, 1, 2, 4, 8) x the stale-rollout
  correction (``staleness_correction``; IMPALA: none and lr_scale; PQN: none), returns in
  Anakin (all seeds in one program) for PPO on CartPole-v1 and Breakout-MinAtar and IMPALA
  on Breakout-MinAtar at the ``architectures`` suite's sizes and budgets, and PQN on
  Breakout-MinAtar at its config's sizes and their budget; and the throughput
  each lag buys in Sebulba (PPO, EnvPool CartPole-v1, actors jittered by
  ``STALE_JITTER_MS``). See docs/design.md, "Pipelines and staleness".
"""

from __future__ import annotations

import dataclasses
from typing import Any

# Return thresholds of the "env steps / wall-clock to threshold" columns.
THRESHOLDS = {"CartPole-v1": 475.0, "Breakout-MinAtar": 10.0, "Pendulum-v1": -400.0}


@dataclasses.dataclass(frozen=True)
class Cell:
    """One program of a suite.

    Attributes:
      suite: the suite's name.
      name: unique, file-safe id; the run directory is ``<out>/runs/<name>``.
      mode: ``anakin`` or ``sebulba``.
      config: config file under ``configs/``.
      overrides: ``(field, value)`` pairs given as ``--config.<field>=<value>``.
      fields: ``(column, value)`` pairs that tell this cell apart in the tables and the CSV.
      seeds: the seeds the program trains (several only for Anakin, via ``num_seeds``).
      threshold: return threshold for the "to threshold" columns (None: not reported).
      fake_devices: run on this many fake CPU devices (0: the platform's own devices).
    """

    suite: str
    name: str
    mode: str
    config: str
    overrides: tuple[tuple[str, Any], ...]
    fields: tuple[tuple[str, Any], ...]
    seeds: tuple[int, ...]
    threshold: float | None = None
    fake_devices: int = 0

    def field(self, key: str, default: Any = None) -> Any:
        return dict(self.fields).get(key, default)


@dataclasses.dataclass(frozen=True)
class Setting:
    """Matched hyperparameters of one (env, algorithm) pair of the architectures suite."""

    env: str
    algorithm: str
    anakin_config: str
    sebulba_config: str
    sebulba_env_id: str
    sizes: tuple[tuple[str, Any], ...]
    budget: int


ARCH_SETTINGS = (
    Setting("CartPole-v1", "ppo", "cartpole_ppo.py", "cartpole_ppo_sebulba.py",
            "gymnax:CartPole-v1",
            (("num_envs", 24), ("num_steps", 32), ("num_epochs", 4), ("num_minibatches", 4),
             ("learning_rate", 1e-3)), 200_000),
    Setting("CartPole-v1", "impala", "cartpole_impala.py", "cartpole_impala_sebulba.py",
            "gymnax:CartPole-v1",
            (("num_envs", 24), ("num_steps", 32), ("num_epochs", 1), ("num_minibatches", 4),
             ("learning_rate", 1e-3)), 300_000),
    Setting("Breakout-MinAtar", "ppo", "minatar_breakout_ppo.py", "cartpole_ppo_sebulba.py",
            "Breakout-MinAtar",
            (("network", "minatar_cnn"), ("num_envs", 64), ("num_steps", 128),
             ("num_epochs", 4), ("num_minibatches", 8), ("learning_rate", 5e-3),
             ("clip_vloss", True)), 1_500_000),
    # IMPALA on MinAtar: configs/minatar_breakout_impala.py in both modes (Sebulba serves
    # the jittable env on a host device); its sizes as the config has them.
    Setting("Breakout-MinAtar", "impala", "minatar_breakout_impala.py",
            "minatar_breakout_impala.py", "Breakout-MinAtar",
            (("num_envs", 128), ("num_steps", 20), ("num_epochs", 1), ("num_minibatches", 4)),
            1_500_000),
    # Continuous control: configs/pendulum_ppo.py in both modes (Sebulba serves gymnax's
    # Pendulum on a host device), a Gaussian policy, CleanRL's normalisation on.
    Setting("Pendulum-v1", "ppo", "pendulum_ppo.py", "pendulum_ppo.py", "gymnax:Pendulum-v1",
            (("num_envs", 16), ("num_steps", 64), ("num_epochs", 10), ("num_minibatches", 8),
             ("normalize_obs", True), ("normalize_reward", True)), 204_800),
)

PIPELINES = ("sync", "cleanba", "async")
JITTERS_MS = (0, 10, 50)
THREADS = (1, 2)
PIPELINE_SIZES = (("num_envs", 24), ("num_steps", 32), ("learning_rate", 1e-3))
PIPELINE_BUDGET = 24 * 32 * 20
SPLITS = {"1+1": ((0,), (1,)), "1+3": ((0,), (1, 2, 3)), "2+2": ((0, 1), (2, 3))}
DEVICES_BUDGET = 24 * 32 * 30
# The Atari configs' own update_unroll (auto: fully unrolled at these sizes, as XLA on CPU
# runs a conv-net step in a rolled loop 10x slower), so the SPS is the learner's real speed.
ATARI_SIZES = (("num_envs", 8), ("num_actor_threads", 2), ("num_steps", 32),
               ("num_minibatches", 2))
ATARI_BUDGET = 8 * 32 * 6

# The staleness suite: lags, the corrections each algorithm takes (runtime.config.validation checks
# the same list), the (env, algorithm) settings of its returns, and its Sebulba throughput part.
STALE_LAGS = (0, 1, 2, 4, 8)
STALE_CORRECTIONS = {"ppo": ("none", "decoupled", "vtrace", "lr_scale", "filter"),
                     "impala": ("none", "lr_scale"), "pqn": ("none",)}
STALE_SETTINGS = (("CartPole-v1", "ppo"), ("Breakout-MinAtar", "ppo"),
                  ("Breakout-MinAtar", "impala"), ("Breakout-MinAtar", "pqn"))
# PQN in the staleness suite only (Anakin): configs/minatar_breakout_pqn.py's sizes (the
# reference's), at the MinAtar PPO and IMPALA budget, its in-training evaluation off as
# theirs is.
STALE_ONLY_SETTINGS = (
    Setting("Breakout-MinAtar", "pqn", "minatar_breakout_pqn.py", "minatar_breakout_pqn.py",
            "Breakout-MinAtar",
            (("num_envs", 128), ("num_steps", 32), ("num_epochs", 2), ("num_minibatches", 32),
             ("eval_every", 0)), 1_500_000),
)
# Uniform 0..4 ms per actor step of 12 envs (mean 2 ms, about an EnvPool Atari batch's step
# time on a CPU core), on top of CartPole's own step.
STALE_JITTER_MS = 4
STALE_THROUGHPUT_BUDGET = 24 * 32 * 40

SUITES = ("architectures", "pipelines", "devices", "atari-smoke", "staleness")


def _num(overrides, key: str) -> int:
    return int(dict(overrides)[key])


def budget_overrides(sizes, budget: int, scale: float, *, log_points: int = 25):
    """``total_env_steps`` (``budget`` x ``scale``, at least 2 updates) and ``log_every``
    (about ``log_points`` lines) for a run with ``sizes`` (which hold num_envs, num_steps)."""
    per_update = _num(sizes, "num_envs") * _num(sizes, "num_steps")
    updates = max(2, round(budget * scale / per_update))
    return (("total_env_steps", updates * per_update),
            ("log_every", max(1, updates // log_points)))


def calls_overrides(budget: tuple, sizes) -> tuple:
    """Anakin's ``updates_per_call``: at most 40, and at least 4 calls a run, so that the
    steady-state SPS is measured after the first (compiling) call."""
    updates = dict(budget)["total_env_steps"] // (_num(sizes, "num_envs") * _num(sizes,
                                                                                 "num_steps"))
    return (("updates_per_call", max(1, min(40, updates // 4))),)


def _seed_range(seeds) -> str:
    return f"s{seeds[0]}" if len(seeds) == 1 else f"s{seeds[0]}-{seeds[-1]}"


def architectures(num_seeds: int, scale: float) -> list[Cell]:
    cells = []
    for s in ARCH_SETTINGS:
        budget = budget_overrides(s.sizes, s.budget, scale)
        common = s.sizes + budget + (("algorithm", s.algorithm),)
        fields = (("env", s.env), ("algorithm", s.algorithm))
        threshold = THRESHOLDS[s.env]
        seeds = tuple(range(num_seeds))
        cells.append(Cell(
            "architectures", f"anakin-{s.algorithm}-{s.env}-{_seed_range(seeds)}", "anakin",
            s.anakin_config,
            common + calls_overrides(budget, s.sizes)
            + (("env_id", s.env), ("num_seeds", num_seeds), ("seed", 0), ("num_devices", 1)),
            (("arch", "anakin"),) + fields, seeds, threshold))
        for seed in seeds:
            cells.append(Cell(
                "architectures", f"sebulba-{s.algorithm}-{s.env}-s{seed}", "sebulba",
                s.sebulba_config,
                common + (("env_id", s.sebulba_env_id), ("seed", seed),
                          ("actor_device_ids", (0,)), ("learner_device_ids", (0,)),
                          ("num_actor_threads", 2)),
                (("arch", "sebulba"),) + fields, (seed,), threshold))
    return cells


def pipelines(num_seeds: int, scale: float) -> list[Cell]:
    common = PIPELINE_SIZES + budget_overrides(PIPELINE_SIZES, PIPELINE_BUDGET, scale,
                                               log_points=PIPELINE_BUDGET)
    cells = []
    for pipe in PIPELINES:
        for jitter in JITTERS_MS:
            for threads in THREADS:
                for seed in range(num_seeds):
                    cells.append(Cell(
                        "pipelines", f"{pipe}-j{jitter}-t{threads}-s{seed}", "sebulba",
                        "cartpole_ppo_sebulba.py",
                        common + (("env_id", "CartPole-v1"), ("pipeline", pipe),
                                  ("debug.actor_jitter_ms", jitter),
                                  ("num_actor_threads", threads), ("seed", seed)),
                        (("arch", "sebulba"), ("env", "CartPole-v1"), ("algorithm", "ppo"),
                         ("pipeline", pipe), ("jitter_ms", jitter), ("threads", threads)),
                        (seed,), THRESHOLDS["CartPole-v1"]))
    return cells


def devices(num_seeds: int, scale: float) -> list[Cell]:
    common = PIPELINE_SIZES + budget_overrides(PIPELINE_SIZES, DEVICES_BUDGET, scale)
    cells = []
    for split, (actors, learners) in SPLITS.items():
        for seed in range(num_seeds):
            cells.append(Cell(
                "devices", f"split{split.replace('+', 'a')}l-s{seed}", "sebulba",
                "cartpole_ppo_sebulba.py",
                common + (("env_id", "CartPole-v1"), ("actor_device_ids", actors),
                          ("learner_device_ids", learners), ("num_actor_threads", 2),
                          ("seed", seed)),
                (("arch", "sebulba"), ("env", "CartPole-v1"), ("algorithm", "ppo"),
                 ("split", split)),
                (seed,), fake_devices=4))
    return cells


def atari_smoke(num_seeds: int, scale: float) -> list[Cell]:
    cells = []
    for algorithm, config in (("ppo", "atari_ppo.py"), ("impala", "atari_impala.py")):
        for seed in range(num_seeds):
            cells.append(Cell(
                "atari-smoke", f"atari-{algorithm}-s{seed}", "sebulba", config,
                ATARI_SIZES + budget_overrides(ATARI_SIZES, ATARI_BUDGET, scale,
                                               log_points=ATARI_BUDGET)
                + (("seed", seed),),
                (("arch", "sebulba"), ("env", "Breakout-v5"), ("algorithm", algorithm)),
                (seed,)))
    return cells


def _arch_setting(env: str, algorithm: str) -> Setting:
    return next(s for s in ARCH_SETTINGS + STALE_ONLY_SETTINGS
                if (s.env, s.algorithm) == (env, algorithm))


def staleness_returns(num_seeds: int, scale: float) -> list[Cell]:
    """Anakin programs (``num_seeds`` seeds each) over settings x lags x corrections."""
    cells, seeds = [], tuple(range(num_seeds))
    for env, algorithm in STALE_SETTINGS:
        s = _arch_setting(env, algorithm)
        budget = budget_overrides(s.sizes, s.budget, scale)
        common = (s.sizes + budget + calls_overrides(budget, s.sizes)
                  + (("algorithm", algorithm), ("env_id", env), ("num_seeds", num_seeds),
                     ("seed", 0), ("num_devices", 1)))
        for lag in STALE_LAGS:
            for corr in STALE_CORRECTIONS[algorithm]:
                cells.append(Cell(
                    "staleness", f"anakin-{algorithm}-{env}-lag{lag}-{corr}-"
                    f"{_seed_range(seeds)}", "anakin", s.anakin_config,
                    common + (("policy_lag", lag), ("staleness_correction", corr)),
                    (("part", "returns"), ("arch", "anakin"), ("env", env),
                     ("algorithm", algorithm), ("lag", lag), ("correction", corr)),
                    seeds, THRESHOLDS[env]))
    return cells


def staleness_throughput(num_seeds: int, scale: float) -> list[Cell]:
    """Sebulba PPO programs (one seed each) over lags, actors jittered."""
    common = PIPELINE_SIZES + budget_overrides(PIPELINE_SIZES, STALE_THROUGHPUT_BUDGET, scale,
                                               log_points=STALE_THROUGHPUT_BUDGET)
    return [Cell("staleness", f"sebulba-ppo-CartPole-v1-lag{lag}-j{STALE_JITTER_MS}-s{seed}",
                 "sebulba", "cartpole_ppo_sebulba.py",
                 common + (("env_id", "CartPole-v1"), ("policy_lag", lag),
                           ("debug.actor_jitter_ms", STALE_JITTER_MS),
                           ("num_actor_threads", 2), ("seed", seed)),
                 (("part", "throughput"), ("arch", "sebulba"), ("env", "CartPole-v1"),
                  ("algorithm", "ppo"), ("lag", lag), ("correction", "none"),
                  ("jitter_ms", STALE_JITTER_MS)),
                 (seed,), THRESHOLDS["CartPole-v1"])
            for lag in STALE_LAGS for seed in range(num_seeds)]


def staleness(num_seeds: int, scale: float) -> list[Cell]:
    return staleness_returns(num_seeds, scale) + staleness_throughput(num_seeds, scale)


BUILDERS = {"architectures": architectures, "pipelines": pipelines, "devices": devices,
            "atari-smoke": atari_smoke, "staleness": staleness}


def suite_cells(suite: str, num_seeds: int, scale: float = 1.0) -> list[Cell]:
    """The cells of ``suite`` for ``num_seeds`` seeds (0..num_seeds-1), budgets x ``scale``."""
    if suite not in BUILDERS:
        raise ValueError(f"suite: unknown '{suite}' (expected one of {', '.join(SUITES)})")
    return BUILDERS[suite](num_seeds, scale)
