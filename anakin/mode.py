"""What validation and the memory check need of Anakin (``runtime.config.validation.
ModeChecks``): its own fields' checks, the env ids it runs, its agents per program and the
devices it computes on (docs/design.md, "Validation")."""

from __future__ import annotations

from envs import registry
from envs.kwargs import check_sweepable
from runtime.config import env_args, sweep
from runtime.config import validation as v


def check_fields(config, counts: v.DeviceCounts) -> int:
    """Checks the Anakin fields; returns the number of data shards."""
    n = config.num_devices
    v.require(v.is_int(n) and 0 <= n <= counts.devices, "num_devices",
              f"must be 0 (all) or 1..{counts.devices}, got {n!r}")
    v.require(counts.processes == 1 or n in (0, counts.devices), "num_devices",
              "must be 0 (all) in a multi-process run")
    v.check_field(config, "updates_per_call")
    v.check_field(config, "num_seeds")
    seed = config.seed  # checked with the shared fields; here only whether the seeds fit
    if config.num_seeds > 1 and v.is_int(seed):
        v.require(seed + config.num_seeds <= v.MAX_SEED, "num_seeds",
                  f"seeds {seed}..{seed + config.num_seeds - 1} pass {v.MAX_SEED - 1}")
    shards = n or counts.devices
    v.require(not config.eval_every or not v.is_int(config.eval_episodes)
              or config.eval_episodes % shards == 0,
            "eval_episodes", f"{config.eval_episodes} episodes do not split over {shards} "
            "devices")
    return shards


def check_swept_env(config) -> None:
    """Each swept env argument (``sweep.env_kwargs``) builds, resets and steps its env
    traced with the spec of the first values (``envs.kwargs.check_sweepable``), as every
    agent builds its env in the program."""
    given = (config.get("sweep") or {}).get(env_args.FIELD) or {}
    if given:
        check_sweepable(config.env_id, registry.make_jax_env, env_args.env_kwargs_of(config),
                        {k: tuple(v) for k, v in given.items()},
                        {k: sweep.env_value_dtype(v) for k, v in given.items()},
                        env_args.SWEEP_REFUSAL)


def devices_used(config, num_shards: int, num_processes: int) -> int:
    """Local devices of the data mesh (this process's shards)."""
    del config
    return max(num_shards // num_processes, 1)


# What validation and the memory check need of Anakin: its fields, jittable env ids and
# their specs, its agents per program; at lag 0 the rollout ran the learner's params, so the
# trajectory carries their values (above, the train state keeps ``policy_lag`` params to
# act with; its own lag is 0: ``ModeChecks.policy_lag``); no host buffers.
MODE = v.ModeChecks(name="anakin", check_fields=check_fields,
                    check_env_id=registry.check_jax_env_id, env_spec=registry.jax_env_spec,
                    num_agents=sweep.num_agents, rollout_values=True,
                    devices_used=devices_used, keeps_lagged_params=True,
                    check_swept_env=check_swept_env)
