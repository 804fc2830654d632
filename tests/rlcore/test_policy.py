"""rlcore.policy: greedy and sampled actions."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from rlcore.distributions import Categorical, DiagGaussian
from rlcore.policy import select_actions


def test_select_actions_greedy_and_sampled():
    dist = Categorical(jnp.asarray([[0.0, 5.0, 1.0], [3.0, 0.0, 0.0]]))
    keys = jax.random.split(jax.random.key(0), 2)
    np.testing.assert_array_equal(select_actions(dist, keys, greedy=True), [1, 0])
    many = Categorical(jnp.tile(jnp.asarray([[0.0, 0.0]]), (2000, 1)))
    sampled = select_actions(many, jax.random.split(jax.random.key(1), 2000), greedy=False)
    assert sampled.dtype == jnp.int32 and 0.4 < float(jnp.mean(sampled)) < 0.6


def test_select_actions_gaussian_greedy_is_the_mean():
    mean = jnp.asarray([[0.5, -1.0], [2.0, 0.0]])
    dist = DiagGaussian(mean, jnp.full_like(mean, -1.0))
    keys = jax.random.split(jax.random.key(0), 2)
    np.testing.assert_array_equal(select_actions(dist, keys, greedy=True), mean)
    sampled = select_actions(dist, keys, greedy=False)
    assert sampled.shape == (2, 2) and not np.array_equal(sampled, mean)
