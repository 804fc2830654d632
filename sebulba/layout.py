"""Where every env and every learner shard of a Sebulba run lives.

Global env index of env ``k`` of thread ``j`` of actor device ``a`` of process ``p``:
``((p * A + a) * J + j) * envs_per_thread + k``. Learner shard ``s`` (device ``s`` of the
learner mesh, ordered by process then local learner id) holds global envs
``[s * envs_per_shard, (s + 1) * envs_per_shard)``; a process's shards cover its own envs,
so no rollout crosses hosts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
from jax.sharding import Mesh

from runtime import distributed


@dataclasses.dataclass(frozen=True)
class ShardSlice:
    """The part of one actor thread's envs that one learner shard holds.

    Attributes:
      shard: learner shard index (over all processes).
      device: that shard's learner device.
      first_env: global index of the slice's first env.
      lo, hi: the slice as thread-local env indices ``lo .. hi - 1``.
    """

    shard: int
    device: Any
    first_env: int
    lo: int
    hi: int


@dataclasses.dataclass(frozen=True)
class Layout:
    """The env and device layout of this process (see the module docstring).

    Attributes:
      num_envs: envs over all processes.
      num_processes: processes of the run.
      process_index: this process.
      actor_devices: this process's actor devices.
      num_threads: actor threads per actor device.
      learner_mesh: 1-D mesh of every process's learner devices.
    """

    num_envs: int
    num_processes: int
    process_index: int
    actor_devices: tuple
    num_threads: int
    learner_mesh: Mesh

    @property
    def envs_per_thread(self) -> int:
        return self.num_envs // (self.num_processes * len(self.actor_devices) * self.num_threads)

    @property
    def envs_per_shard(self) -> int:
        return self.num_envs // self.learner_mesh.devices.size

    def describe(self) -> str:
        """This process's actors in words: ``"1 actor device x 2 threads x 64 envs"``."""
        a, t = len(self.actor_devices), self.num_threads
        return (f"{a} actor device{'s' * (a > 1)} x {t} thread{'s' * (t > 1)} x "
                f"{self.envs_per_thread} envs")

    def thread_offset(self, actor: int, thread: int) -> int:
        """Global index of the first env of thread ``thread`` on local actor device ``actor``."""
        a = len(self.actor_devices)
        return ((self.process_index * a + actor) * self.num_threads + thread) * self.envs_per_thread

    def local_shards(self) -> list[tuple[int, Any, int, int]]:
        """``(shard index, device, first env, end env)`` of this process's learner shards."""
        n = self.envs_per_shard
        return [
            (s, d, s * n, (s + 1) * n)
            for s, d in enumerate(self.learner_mesh.devices.flat)
            if d.process_index == self.process_index
        ]

    def thread_slices(self, actor: int, thread: int) -> tuple[ShardSlice, ...]:
        """How the envs of thread ``thread`` on actor device ``actor`` split over the local
        learner shards, in shard order."""
        lo_t = self.thread_offset(actor, thread)
        hi_t = lo_t + self.envs_per_thread
        slices = []
        for s, device, lo_s, hi_s in self.local_shards():
            lo, hi = max(lo_t, lo_s), min(hi_t, hi_s)
            if lo < hi:
                slices.append(ShardSlice(shard=s, device=device, first_env=lo,
                                         lo=lo - lo_t, hi=hi - lo_t))
        return tuple(slices)


def learner_devices(learner_ids, num_processes: int) -> list:
    """Learner devices of every process, ordered by process then local id."""
    return [jax.local_devices(process_index=p)[i] for p in range(num_processes)
            for i in learner_ids]


def make_layout(config) -> Layout:
    """The Layout of this process for ``config``'s device ids and thread count."""
    local = jax.local_devices()
    mesh = distributed.data_mesh(learner_devices(config.learner_device_ids,
                                                 jax.process_count()))
    return Layout(
        num_envs=config.num_envs,
        num_processes=jax.process_count(),
        process_index=jax.process_index(),
        actor_devices=tuple(local[i] for i in config.actor_device_ids),
        num_threads=config.num_actor_threads,
        learner_mesh=mesh,
    )
