"""Actor threads from the machine: what ``num_actor_threads = 0`` resolves to
(docs/design.md, "Actor threads from the machine").

A Sebulba actor thread alternates between stepping its EnvPool (host cores) and running the
policy on its actor device; a second thread on the same device runs the policy while the
first steps its envs. On an accelerator the policy call is latency, not compute (about 9 ms
an inference step at batch 64 on one H200), so threads overlap there; on a CPU actor device
the policy and the learner share the host's cores, and a second thread only splits them
(2-core host: 294 SPS with one thread, 276 with two; docs/performance.md). The thread count
never changes a result: every env keeps its global index and seed whatever thread steps it
(``sebulba.layout``), so ``num_actor_threads`` is free to follow the machine.
"""

from __future__ import annotations

import os

import jax

CORES_PER_THREAD = 4  # an accelerator's actor thread per 4 host cores (Cleanba: 2 on 10)
MAX_THREADS = 4       # per actor device


def usable_cores() -> int:
    """The CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def auto_actor_threads(envs_per_device: int, cores_per_device: int, accelerator: bool) -> int:
    """Actor threads per actor device for ``num_actor_threads = 0``.

    On an accelerator, one thread per ``CORES_PER_THREAD`` host cores of the device, at
    most ``MAX_THREADS``; on a CPU device, one. Then the largest count up to that which
    divides the device's envs (every thread steps as many).

    Args:
      envs_per_device: envs of one actor device (``num_envs / (processes x devices)``).
      cores_per_device: the process's host cores over its actor devices.
      accelerator: whether the actor device is a GPU or TPU.

    Returns:
      A thread count >= 1 that divides ``envs_per_device``.
    """
    target = 1
    if accelerator:
        target = max(1, min(MAX_THREADS, cores_per_device // CORES_PER_THREAD))
    return next(t for t in range(target, 0, -1) if envs_per_device % t == 0)


def actor_threads(config, processes: int) -> int:
    """``config.num_actor_threads``, or where it is 0 the machine's count
    (``auto_actor_threads`` on this process's cores and first actor device); the config is
    not written (``runtime.config.resolved.recorded`` records it for the run).

    Call with ``num_envs``, ``actor_device_ids`` and the process count already checked.
    """
    if config.num_actor_threads != 0:
        return config.num_actor_threads
    devices = config.actor_device_ids
    platform = jax.local_devices()[devices[0]].platform
    return auto_actor_threads(max(1, config.num_envs // (processes * len(devices))),
                              max(1, usable_cores() // len(devices)), platform != "cpu")
