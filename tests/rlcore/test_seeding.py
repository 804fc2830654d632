"""The seeding rule: rollout-wide key draws equal the per-step derivation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from rlcore.seeding import (
    action_noise,
    actions_from_noise,
    per_env_keys,
    rollout_keys,
    sample_actions,
)


def test_rollout_keys_equal_per_step_keys():
    root, env_ids = jax.random.key(3), jnp.arange(5, 9)
    keys = rollout_keys(root, env_ids, 7, 6)
    assert keys.shape == (6, 4)
    for t in range(6):
        np.testing.assert_array_equal(jax.random.key_data(keys[t]),
                                      jax.random.key_data(per_env_keys(root, env_ids, 7, t)))
    other = rollout_keys(root, env_ids, 8, 6)
    assert not np.array_equal(jax.random.key_data(keys), jax.random.key_data(other))


def test_noise_samples_the_same_actions_as_categorical():
    keys = rollout_keys(jax.random.key(0), jnp.arange(16), 0, 50)
    logits = jax.random.normal(jax.random.key(1), (50, 16, 3))
    noise = action_noise(keys, 3)
    for t in range(50):
        np.testing.assert_array_equal(sample_actions(keys[t], logits[t]),
                                      actions_from_noise(noise[t], logits[t]))
