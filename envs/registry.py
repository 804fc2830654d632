"""Env ids to env adapters.

Two kinds of id:

- JaxEnv ids (Anakin): every discrete-action id of ``gymnax.registered_envs``
  (``CartPole-v1``, ``Breakout-MinAtar``, ``Catch-bsuite``, ...) and our own jittable envs
  (``OWN_ENVS``: ``Catch-own``).
- HostEnv ids (Sebulba): EnvPool's Atari ``-v5`` ids and ``CartPole-v1``, ``Acrobot-v1``.

``CartPole-v1`` and ``Acrobot-v1`` are both. An id of neither kind raises
``rlcore.errors.ConfigError`` listing close matches over all known ids. The env libraries are
imported on first use, so resolving a JaxEnv id never imports EnvPool and vice versa.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable
from typing import Any

from envs.base import HostEnv, JaxEnv
from rlcore.errors import ConfigError
from rlcore.types import EnvSpec


def _make_catch(**overrides: Any) -> JaxEnv:
    from envs.catch import CatchEnv

    return CatchEnv(**overrides)


# Our own jittable envs: id -> factory(**overrides).
OWN_ENVS: dict[str, Callable[..., JaxEnv]] = {"Catch-own": _make_catch}



@functools.cache
def jax_env_ids() -> tuple[str, ...]:
    """Ids ``make_jax_env`` accepts: discrete gymnax ids, then our own."""
    from envs.gymnax import discrete_gymnax_ids

    return (*discrete_gymnax_ids(), *OWN_ENVS)


@functools.cache
def host_env_ids() -> tuple[str, ...]:
    """Ids ``make_host_env`` accepts (EnvPool); empty where EnvPool is not installed."""
    try:
        from envs import envpool as envpool_adapter
    except ImportError:
        return ()
    return tuple(envpool_adapter.host_env_ids())


def is_jax_env(env_id: str) -> bool:
    """Whether ``env_id`` names a jittable env (Anakin)."""
    return env_id in jax_env_ids()


def is_host_env(env_id: str) -> bool:
    """Whether ``env_id`` names an EnvPool env (Sebulba)."""
    return env_id in host_env_ids()


def check_jax_env_id(env_id: str) -> None:
    """Raises ConfigError (with close matches) unless ``env_id`` is a jittable env id."""
    if not is_jax_env(env_id):
        raise _unknown(env_id, "jittable (Anakin)", tuple(jax_env_ids()))


def check_host_env_id(env_id: str) -> None:
    """Raises ConfigError (with close matches) unless ``env_id`` is an EnvPool env id."""
    if not is_host_env(env_id):
        raise _unknown(env_id, "host (EnvPool, Sebulba)", tuple(host_env_ids()))


def jax_env_spec(env_id: str) -> EnvSpec:
    """The EnvSpec of the jittable env ``env_id``; compiles nothing."""
    return make_jax_env(env_id).spec


def host_env_spec(env_id: str) -> EnvSpec:
    """The EnvSpec of the EnvPool env ``env_id`` (from a 1-env probe)."""
    env = make_host_env(env_id, 1, seed=0)
    try:
        return env.spec
    finally:
        env.close()


def _unknown(env_id: str, kind: str, kind_ids: tuple[str, ...]) -> Exception:
    """ConfigError for an id that is not of ``kind``, with close matches over all ids."""
    from envs.gymnax import CONTINUOUS_GYMNAX_IDS

    if env_id in CONTINUOUS_GYMNAX_IDS:
        return ConfigError(f"env_id: '{env_id}' has continuous actions; need discrete")
    all_ids = list(dict.fromkeys((*jax_env_ids(), *host_env_ids())))
    if env_id in all_ids:
        hint = f"close matches of this kind: {', '.join(_close(env_id, kind_ids)) or 'none'}"
        return ConfigError(f"env_id: '{env_id}' is not a {kind} env; {hint}")
    matches = ", ".join(_close(env_id, all_ids)) or "none"
    return ConfigError(f"env_id: unknown env '{env_id}'; close matches: {matches}")


def _close(env_id: str, ids: Any) -> list[str]:
    return difflib.get_close_matches(env_id, list(ids), n=5, cutoff=0.6)


def make_jax_env(env_id: str, **overrides: Any) -> JaxEnv:
    """Makes a jittable single env (``vmap`` it for a batch).

    Args:
      env_id: one of ``jax_env_ids()``.
      **overrides: gymnax ``EnvParams`` fields (e.g. ``max_steps_in_episode``), or the own
        env's constructor arguments (e.g. ``max_steps`` for ``Catch-own``).

    Returns:
      A JaxEnv.

    Raises:
      ConfigError: ``env_id`` is not a JaxEnv id.
    """
    if env_id in OWN_ENVS:
        return OWN_ENVS[env_id](**overrides)
    if not is_jax_env(env_id):
        raise _unknown(env_id, "jittable (Anakin)", jax_env_ids())
    from envs.gymnax import GymnaxEnv

    return GymnaxEnv(env_id, **overrides)


def make_host_env(
    env_id: str,
    num_envs: int,
    *,
    seed: int,
    first_env_index: int = 0,
    num_threads: int = 0,
    **overrides: Any,
) -> HostEnv:
    """Makes a synchronous EnvPool batch; env ``i`` is seeded ``seed + first_env_index + i``.

    Args:
      env_id: one of ``host_env_ids()``.
      num_envs: envs in this pool.
      seed: run seed.
      first_env_index: global index of this pool's env 0.
      num_threads: EnvPool worker threads (0: EnvPool's default).
      **overrides: EnvPool options (replace the Atari defaults).

    Returns:
      A HostEnv (``envs.envpool.EnvPoolEnv``).

    Raises:
      ConfigError: ``env_id`` is not a HostEnv id.
    """
    if not is_host_env(env_id):
        raise _unknown(env_id, "host (EnvPool, Sebulba)", host_env_ids())
    from envs.envpool import EnvPoolEnv

    return EnvPoolEnv(
        env_id,
        num_envs,
        seed=seed,
        first_env_index=first_env_index,
        num_threads=num_threads,
        **overrides,
    )
