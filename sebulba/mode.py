"""What validation and the memory check need of Sebulba (``runtime.config.validation.
ModeChecks``): its own fields' checks, the env ids it runs, its devices, its policy lag
and its host buffers, the rollout queues (docs/design.md, "Validation")."""

from __future__ import annotations

from envs import registry
from runtime.config import plan
from runtime.config import validation as v
from runtime.config.sweep import swept
from sebulba import machine, pipeline


def check_fields(config, counts: v.DeviceCounts) -> int:
    """Checks the Sebulba fields; returns the number of learner shards over all processes."""
    n_local = counts.local_devices
    for field in ("actor_device_ids", "learner_device_ids"):
        ids = config[field]
        v.require(isinstance(ids, tuple) and len(ids) > 0 and all(v.is_int(i) for i in ids),
                  field, f"must be a non-empty tuple of ints, got {ids!r}")
        v.require(all(0 <= i < n_local for i in ids), field,
                  f"{ids} out of range: this process has {n_local} devices (0..{n_local - 1})")
        v.require(len(set(ids)) == len(ids), field, f"repeats a device: {ids}")
    v.check_field(config, "num_actor_threads")
    v.require(config.num_seeds == 1, "num_seeds",
              f"Sebulba trains one agent per run, got {config.num_seeds!r} (Anakin runs many)")
    v.require(not swept(config), "sweep",
              f"Sebulba trains one agent per run, got a sweep of {', '.join(swept(config))} "
            "(Anakin sweeps in one program)")
    v.check_field(config, "pbt.interval")
    v.require(config.pbt.interval == 0, "pbt.interval",
              f"population-based training is Anakin's (its agents train in one program); "
              f"Sebulba trains one agent per run, got {config.pbt.interval} (0: off)")
    v.choice(config, "pipeline", pipeline.PIPELINES)
    v.require(config.pipeline != "async" or config.policy_lag < 0, "policy_lag",
              f"the async pipeline has no fixed lag, got policy_lag={config.policy_lag} "
            "(use sync or cleanba with it)")
    v.require(config.pipeline != "async" or config.staleness_correction != "lr_scale",
              "staleness_correction", "lr_scale scales by the policy lag, and the async "
            "pipeline has none fixed (use sync, cleanba or a policy_lag with it)")
    v.check_field(config, "env_threads")
    v.check_field(config, "queue_timeout_s")
    jitter = config.debug.actor_jitter_ms
    v.require(v.is_int(jitter) and jitter >= 0, "debug.actor_jitter_ms",
              f"must be an integer >= 0, got {v.shown(jitter)}")
    v.int_at_most("debug.actor_jitter_ms", jitter)  # time.sleep overflows on huge ones
    v.positive_int(config, "num_envs")
    check_threads_per_process(config, counts.processes)
    threads = machine.actor_threads(config, counts.processes)  # 0: from the machine
    actors = counts.processes * len(config.actor_device_ids) * threads
    v.require(config.num_envs % actors == 0, "num_envs",
              f"{config.num_envs} envs do not split over {counts.processes} processes x "
              f"{len(config.actor_device_ids)} actor devices x {threads} threads")
    return counts.processes * len(config.learner_device_ids)


def check_threads_per_process(config, processes: int) -> None:
    """``num_actor_threads=0`` (from the machine) only with one process: the layout needs
    one count in every process. Checked before the join with ``num_processes`` and after
    it with the processes the runtime found (a cluster JAX detects)."""
    v.check_field(config, "num_actor_threads")
    v.require(config.num_actor_threads != 0 or processes == 1, "num_actor_threads",
              f"0 (from the machine) needs one process, got {processes}: name the "
              "count, the same in every process")


def queue_depth(config) -> int:
    """Rollouts per actor thread alive at once: queued (``pipeline.queue_capacity``), being
    filled, held by the learner; 3 up to lag 1, ``lag + 2`` above."""
    return pipeline.queue_capacity(MODE.policy_lag(config)) + 2


def host_bytes(config, spec, num_processes: int = 1) -> int:
    """Host bytes of this process's rollouts: ``queue_depth`` rollouts per actor thread plus
    the learner's assembled batch (one rollout of every local env); a rollout is its
    ``Trajectory``'s exact bytes (``rollout_bytes``)."""
    threads = len(config.actor_device_ids) * machine.actor_threads(config, num_processes)
    local_envs = config.num_envs // num_processes
    return (queue_depth(config) * threads * rollout_bytes(config, spec, local_envs // threads)
            + rollout_bytes(config, spec, local_envs))


def rollout_bytes(config, spec, n: int) -> int:
    """Bytes of one rollout of ``n`` envs as the actors ship it: the fields of
    ``runtime.config.plan.trajectory_shapes`` (no values; the final values and discounted
    returns where the config has them), a recurrent agent's core states and episode starts
    left out."""
    traj = plan.trajectory_shapes(spec, config.num_steps, n, with_value=False,
                                  final_value=bool(config.bootstrap_time_limits),
                                  discounted_return=bool(config.normalize_reward))
    return plan.tree_bytes(traj)


def devices_used(config, num_shards: int, num_processes: int) -> int:
    """Local actor and learner devices (those that share the host's RAM on CPU)."""
    del num_shards, num_processes
    return len(set(config.actor_device_ids) | set(config.learner_device_ids))


# What validation and the memory check need of Sebulba: its fields, the ids it runs
# (EnvPool ones and jittable ones through JaxHostEnv, see envs.registry) and their specs;
# one agent; the actors' params may be older than the learner's (by its pipeline's lag
# where policy_lag is -1), so they ship no values;
# the rollout queues live in host memory.
MODE = v.ModeChecks(
    name="sebulba", check_fields=check_fields, check_env_id=registry.check_host_env_id,
    env_spec=registry.host_env_spec, num_agents=lambda config: 1, rollout_values=False,
    check_before_join=lambda config: check_threads_per_process(config, config.num_processes),
    devices_used=devices_used, default_lag=lambda config: pipeline.PIPELINES[config.pipeline],
    actor_threads=machine.actor_threads,
    host_memory=v.HostMemory(bytes=host_bytes, what="the actors' rollouts",
                             detail="3 per actor thread (policy_lag + 2 above lag 1) and the "
                             "learner's batch",
                             fields="num_envs, num_steps, num_actor_threads or policy_lag"))
