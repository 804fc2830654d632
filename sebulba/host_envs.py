"""The host envs of a Sebulba run: ``envs.registry.make_host_env`` with the run's seeding.

One place builds every host env pool of Sebulba (the actors' pools, the in-training
evaluation pool, the evaluate command's pool), so the key rule of a host-served jittable
env (``envs.jax_host``) comes from ``rlcore.seeding`` like every other stream: the pool of
integer seed ``s`` derives its env keys from ``rlcore.seeding.host_env_root(s)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envs import registry
from envs.base import HostEnv
from rlcore.seeding import host_env_root


def make_host_env(env_id: str, num_envs: int, *, seed: int, first_env_index: int = 0,
                  num_threads: int = 0, **overrides: Any) -> HostEnv:
    """A synchronous pool of ``num_envs`` host envs of ``env_id`` (resolved as in Sebulba).

    Args:
      env_id: the config's env id.
      num_envs: envs in this pool.
      seed: the pool's integer seed (EnvPool: env ``i`` gets ``seed + first_env_index + i``;
        a jittable env: keys from ``host_env_root(seed)`` and the global index).
      first_env_index: global index of this pool's env 0.
      num_threads: EnvPool worker threads (0: EnvPool's default).
      **overrides: env options (``envs.registry.make_host_env``).

    Returns:
      A HostEnv.
    """
    jittable = registry.resolve(env_id, registry.SEBULBA).library in registry.JITTABLE
    key_root = host_env_root(np.int32(seed)) if jittable else None
    return registry.make_host_env(env_id, num_envs, seed=seed, first_env_index=first_env_index,
                                  num_threads=num_threads, key_root=key_root, **overrides)
