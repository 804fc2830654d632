"""The one seeding rule of the project.

Every key derives from ``config.seed`` and a path of integers; per-env keys end with the
*global* env index, so the data a run sees do not depend on how envs are spread over
threads, devices and processes:

- action of env ``i`` at step ``t`` of update ``u``: ``per_env_keys(roots.action, i, u, t)``;
- jittable env step / reset of env ``i``: ``per_env_keys(roots.env, i, u, t)``;
- learner update ``u``: ``fold_in(roots.update, u)``;
- host env ``i`` (EnvPool): integer seed ``host_env_seed(seed, start_update) + i``;
- evaluation during training (``eval_every``; "train eval"): jittable eval env ``i`` at
  the evaluation after update ``u``: ``per_env_keys(roots.train_eval, i, u)`` (its own stream,
  ``TRAIN_EVAL_STREAM``); host eval pools (Sebulba) get the integer seed
  ``train_eval_host_seed(seed) + i``, outside every training env seed;
- the offline evaluate commands (``python -m anakin.evaluate`` / ``sebulba.evaluate``;
  "evaluate"): keys of ``EvaluateRoots.from_seed(seed)`` (``fold_in(key(seed),
  EVALUATE_STREAM)``), host pools seeded ``evaluate_host_seed(seed) + i`` (outside training's
  and in-training evaluation's seeds);
- host-served jittable env ``i`` (``envs.jax_host``, a jittable env in Sebulba): keys
  ``fold_in(host_env_root(s), i)`` with ``s = host_env_seed(seed, start_update)`` (or the
  eval pools' integer seed), the stream ``HOST_ENV_STREAM``; see that module, so the same
  rule of global indices holds there;
- population-based training's step after update ``u``: ``pbt_key(seed, u)``
  (``fold_in(fold_in(key(seed), PBT_STREAM), u)``; the run's seed, not an agent's).

The streams folded into ``key(seed)``: 0..3 the training ``Roots``, ``HOST_ENV_STREAM`` (4),
``TRAIN_EVAL_STREAM`` (5), ``PBT_STREAM`` (6) and ``EVALUATE_STREAM`` (1_000_003); all of
them are allocated here.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from rlcore import threefry_cpu
from rlcore.types import Array, PRNGKey

# Every draw of the project goes through keys made here: CPU compiles its hash unrolled.
threefry_cpu.use_unrolled_cpu_lowering()


@struct.dataclass
class Roots:
    """PRNG roots derived from the seed: network init, actions, env steps, learner updates.

    A pytree: ``jax.vmap(Roots.from_seed)(seeds)`` gives the roots of many agents (leaves
    ``[A]``), each equal to ``Roots.from_seed(seed)`` of its own seed.
    """

    init: PRNGKey
    action: PRNGKey
    env: PRNGKey
    update: PRNGKey
    train_eval: PRNGKey

    @classmethod
    def from_seed(cls, seed: int | Array) -> "Roots":
        """The roots of ``seed`` (an int, or a traced ``[]`` int under ``vmap``):
        ``fold_in(key(seed), i)`` for i = 0..3 and ``TRAIN_EVAL_STREAM``."""
        base = jax.random.key(seed)
        return cls(*(jax.random.fold_in(base, i) for i in range(4)),
                   train_eval=jax.random.fold_in(base, TRAIN_EVAL_STREAM))


# Fold of ``key(seed)`` for host-served jittable envs (``envs.jax_host``; Roots use 0..3).
HOST_ENV_STREAM = 4
# Fold of ``key(seed)`` for in-training evaluation envs (``Roots.train_eval``).
TRAIN_EVAL_STREAM = 5
# Fold of ``key(seed)`` for population-based training's steps (``pbt_key``).
PBT_STREAM = 6
# Fold of ``key(seed)`` for the offline evaluate commands (``EvaluateRoots``).
EVALUATE_STREAM = 1_000_003


@struct.dataclass
class EvaluateRoots:
    """PRNG roots of an offline evaluation (the evaluate commands): env resets, env steps,
    actions.

    Env ``i`` is reset with ``per_env_keys(reset, i)``; step ``t`` draws its env key from
    ``per_env_keys(env, i, t)`` and its action key from ``per_env_keys(action, i, t)``.
    """

    reset: PRNGKey
    env: PRNGKey
    action: PRNGKey

    @classmethod
    def from_seed(cls, seed: int) -> "EvaluateRoots":
        """``fold_in(fold_in(key(seed), EVALUATE_STREAM), j)`` for j = 0, 1, 2."""
        base = jax.random.fold_in(jax.random.key(seed), EVALUATE_STREAM)
        return cls(*(jax.random.fold_in(base, j) for j in range(3)))


def pbt_root(seed: int) -> PRNGKey:
    """``fold_in(key(seed), PBT_STREAM)``: the root of a run's population-based training
    (``seed``: the run's ``config.seed``)."""
    return jax.random.fold_in(jax.random.key(seed), PBT_STREAM)


def pbt_key(root: PRNGKey, update: int | Array) -> PRNGKey:
    """The key of the exploit and explore step after ``update`` (``rlcore.pbt``):
    ``fold_in(pbt_root(seed), update)``; ``[]`` key."""
    return jax.random.fold_in(root, update)


def host_env_root(seed: int | Array) -> PRNGKey:
    """``fold_in(key(seed), HOST_ENV_STREAM)``: the root of a host-served jittable env pool
    of integer seed ``seed`` (``envs.jax_host``: env ``g`` derives from ``fold_in(root, g)``).

    Args:
      seed: ``[]`` int (an int32 value), the pool's integer seed.

    Returns:
      ``[]`` PRNG key.
    """
    return jax.random.fold_in(jax.random.key(seed), HOST_ENV_STREAM)


# Host evaluation pools (both kinds) are seeded in [2**31 - 2**23, 2**31): training's host env
# seeds stay below 2**31 - 2**24 + num_envs (``host_env_seed`` is taken modulo 2**31 - 2**24;
# a fresh run uses ``seed + i`` with seed < 2**30), so the two never meet below 2**23
# training envs; up to ``MAX_EVAL_ENVS`` eval envs keep the seeds int32.
HOST_EVAL_SEED_BASE = 2**31 - 2**23
HOST_EVAL_SEED_SPAN = 2**21  # seed % span offsets the base: runs of other seeds differ
MAX_EVAL_ENVS = 2**21
# In-training evaluation pools take [base, base + 2**22), the evaluate commands' pools the
# rest: a checkpoint chosen by its in-training score is then scored on other episodes.
HOST_EVALUATE_SEED_BASE = HOST_EVAL_SEED_BASE + 2**22


def per_env_keys(root: PRNGKey, env_ids: Array, *path: int | Array) -> PRNGKey:
    """Keys ``fold_in(fold_in(root, *path), env_id)`` for ``env_ids [B]``; returns ``[B]`` keys."""
    key = root
    for p in path:
        key = jax.random.fold_in(key, p)
    return jax.vmap(lambda i: jax.random.fold_in(key, i))(env_ids)


def rollout_keys(root: PRNGKey, env_ids: Array, update: int | Array,
                 num_steps: int) -> PRNGKey:
    """``per_env_keys(root, env_ids, update, t)`` for every step ``t < num_steps`` at once.

    The same keys, derived in a few batched hashes before a rollout instead of a chain of
    ``fold_in`` calls inside every step (which costs per-op overhead at small batches).

    Returns:
      ``[num_steps, B]`` keys.
    """
    key_u = jax.random.fold_in(root, update)
    step_keys = jax.vmap(lambda t: jax.random.fold_in(key_u, t))(jnp.arange(num_steps))
    return jax.vmap(lambda k: jax.vmap(lambda i: jax.random.fold_in(k, i))(env_ids))(step_keys)


def map_keys(fn: Callable[[PRNGKey], Any], keys: PRNGKey) -> Any:
    """``fn`` of every key of ``keys [*K]``: one ``vmap`` over the flattened keys, the
    outputs' leaves reshaped to ``[*K, ...]``; the same values as ``vmap`` nested once per
    axis of ``K``.

    Why flat: XLA on CPU ran the nested form of a rollout's draws (``[T, B]`` keys of an
    env's step and reset) about 10x slower than the flat one (3.2 ms against 0.3 ms at
    128 x 64; docs/design.md, "Seeding").
    """
    out = jax.vmap(fn)(keys.reshape(-1))
    return jax.tree.map(lambda x: x.reshape(keys.shape + x.shape[1:]), out)


# ``jax.random.permutation`` shuffles by sorting random 32-bit keys, in as many rounds as
# ``ceil(3 ln n / ln(2**32 - 1))`` (its ``_shuffle``): one round up to this many items.
ONE_ROUND_MAX = int(np.floor(np.exp(np.log(np.iinfo(np.uint32).max) / 3)))


def permutation(key: PRNGKey, n: int) -> Array:
    """``jax.random.permutation(key, n)``, the same bits, computed faster where it sorts
    once (``n <= ONE_ROUND_MAX``): its one round is a stable sort of ``arange(n)`` by the
    random keys ``bits(split(key)[1], (n,))``, done here by ``stable_argsort``.

    Returns:
      int32 ``[n]``.
    """
    if n > ONE_ROUND_MAX:
        return jax.random.permutation(key, n).astype(jnp.int32)
    _, subkey = jax.random.split(key)
    return stable_argsort(jax.random.bits(subkey, (n,), jnp.uint32))


def stable_argsort(x: Array) -> Array:
    """The indices that sort ``x [n]`` (uint32, ``n <= 2**16``), equal values in index order:
    ``lax.sort_key_val(x, arange(n))[1]``.

    Two sorts of one operand instead of one of two: XLA on CPU sorted ``u32[4, 16, 512]`` in
    0.6 ms alone and in 4.0 ms with its indices. The first sort ranks each value (the first
    position of its value in sorted ``x``), the second sorts ``rank << b | index`` (``b``
    bits per index), which orders by value, then by index.

    Returns:
      int32 ``[n]``.
    """
    n = x.shape[-1]
    bits = max(1, (n - 1).bit_length())
    if 2 * bits > 32:
        raise ValueError(f"stable_argsort: {n} items need more than 32 bits of rank and index")
    rank = jnp.searchsorted(jnp.sort(x), x, side="left", method="scan_unrolled")
    index = jnp.arange(n, dtype=jnp.uint32)
    packed = (rank.astype(jnp.uint32) << bits) | index
    return (jnp.sort(packed) & ((1 << bits) - 1)).astype(jnp.int32)


def host_env_seed(seed: int, start_update: int = 0) -> int:
    """Base integer seed of host envs; env ``i`` gets ``base + i``.

    A run resumed at ``start_update`` re-seeds its envs from (seed, update), since EnvPool
    states cannot be saved; two resumes from one checkpoint agree.
    """
    if start_update == 0:
        return seed
    return (seed * 1_000_003 + start_update * 7_919_111) % (2**31 - 2**24)


def train_eval_host_seed(seed: int) -> int:
    """Base integer seed of an in-training host evaluation pool (env ``i`` gets
    ``base + i``), never a training env's seed: ``HOST_EVAL_SEED_BASE + seed %
    HOST_EVAL_SEED_SPAN``."""
    return HOST_EVAL_SEED_BASE + int(seed) % HOST_EVAL_SEED_SPAN


def evaluate_host_seed(seed: int) -> int:
    """Base integer seed of the evaluate commands' host pool: ``HOST_EVALUATE_SEED_BASE +
    seed % HOST_EVAL_SEED_SPAN``, never a training or an in-training evaluation seed."""
    return HOST_EVALUATE_SEED_BASE + int(seed) % HOST_EVAL_SEED_SPAN
