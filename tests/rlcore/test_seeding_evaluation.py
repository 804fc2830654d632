"""rlcore.seeding's evaluation streams: the evaluate commands' keys and host seeds are
neither training's nor in-training evaluation's."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlcore.seeding import (
    HOST_EVAL_SEED_BASE,
    HOST_EVAL_SEED_SPAN,
    HOST_EVALUATE_SEED_BASE,
    MAX_EVAL_ENVS,
    EvaluateRoots,
    Roots,
    evaluate_host_seed,
    host_env_seed,
    per_env_keys,
    train_eval_host_seed,
)


def _key_set(keys) -> set[tuple[int, ...]]:
    data = np.asarray(jax.random.key_data(keys)).reshape(-1, 2)
    return {tuple(int(v) for v in row) for row in data}


@pytest.mark.parametrize("seed", [0, 7])
def test_eval_keys_are_not_training_keys(seed):
    """The eval roots and the per-env keys of resets, steps and actions share no key with
    training's roots (of this seed and the next ones: ``num_seeds`` agents) or with the
    per-env keys training derives from them."""
    ids = jnp.arange(16, dtype=jnp.int32)
    training = set()
    for s in range(seed, seed + 4):  # agents seed .. seed+3 of a num_seeds run
        base = jax.random.key(s)
        folds = jax.vmap(lambda j, b=base: jax.random.fold_in(b, j))(jnp.arange(8))
        training |= _key_set(folds)  # the roots (0..3), host-env stream and spare folds
        roots = Roots.from_seed(s)
        for root in (roots.init, roots.action, roots.env, roots.update):
            training |= _key_set(per_env_keys(root, ids))  # resets
            for u in range(3):
                for t in range(3):
                    training |= _key_set(per_env_keys(root, ids, u, t))
    eval_roots = EvaluateRoots.from_seed(seed)
    evaluation = _key_set(jnp.stack([eval_roots.reset, eval_roots.env, eval_roots.action]))
    evaluation |= _key_set(per_env_keys(eval_roots.reset, ids))
    for t in range(3):
        for root in (eval_roots.env, eval_roots.action):
            evaluation |= _key_set(per_env_keys(root, ids, t))
    assert len(evaluation) == 3 + 16 * 7
    assert not evaluation & training


def test_eval_resets_differ_from_training_resets():
    """CartPole's first observations: evaluation's envs do not start where training's do."""
    from envs import registry

    env = registry.make_jax_env("CartPole-v1")
    ids = jnp.arange(8, dtype=jnp.int32)
    _, train_ts = jax.vmap(env.reset)(per_env_keys(Roots.from_seed(0).env, ids))
    _, eval_ts = jax.vmap(env.reset)(per_env_keys(EvaluateRoots.from_seed(0).reset, ids))
    train_obs, eval_obs = np.asarray(train_ts.obs), np.asarray(eval_ts.obs)
    assert not np.any(np.all(train_obs[:, None] == eval_obs[None], axis=-1))


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**30 - 1])
def test_host_eval_seeds_are_outside_training_seeds(seed):
    """Training's host seeds (fresh: seed + i; resumed: host_env_seed(seed, u) + i) stay
    below the eval base for up to 2**23 envs; eval seeds stay int32 for MAX_EVAL_ENVS."""
    num_envs = 2**23
    for u in [0, 1, 7, 999, 10**6, 2**31 - 1]:
        assert host_env_seed(seed, u) + num_envs - 1 < HOST_EVAL_SEED_BASE
    base = evaluate_host_seed(seed)
    assert HOST_EVAL_SEED_BASE <= base
    assert base + MAX_EVAL_ENVS - 1 < 2**31
    assert evaluate_host_seed(seed) != evaluate_host_seed(seed + 1)
    # ... and above every seed of in-training evaluation pools (any seed, any pool size).
    assert train_eval_host_seed(2**31 - 1) + MAX_EVAL_ENVS - 1 < HOST_EVALUATE_SEED_BASE <= base
    assert max(train_eval_host_seed(s) for s in range(HOST_EVAL_SEED_SPAN - 3,
                                                 HOST_EVAL_SEED_SPAN + 3)) \
        + MAX_EVAL_ENVS - 1 < HOST_EVALUATE_SEED_BASE
