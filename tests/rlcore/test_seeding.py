"""The seeding rule: rollout-wide key draws equal the per-step derivation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from rlcore.seeding import per_env_keys, rollout_keys


def test_rollout_keys_equal_per_step_keys():
    root, env_ids = jax.random.key(3), jnp.arange(5, 9)
    keys = rollout_keys(root, env_ids, 7, 6)
    assert keys.shape == (6, 4)
    for t in range(6):
        np.testing.assert_array_equal(jax.random.key_data(keys[t]),
                                      jax.random.key_data(per_env_keys(root, env_ids, 7, t)))
    other = rollout_keys(root, env_ids, 8, 6)
    assert not np.array_equal(jax.random.key_data(keys), jax.random.key_data(other))

