"""rlcore.distributions against reference math (scipy, NumPy), their sampling rules, and the
policy heads that build them from an env's action space."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from rlcore import networks
from rlcore.distributions import Categorical, DiagGaussian, distribution_for
from rlcore.seeding import rollout_keys
from rlcore.types import EnvSpec

BOX = EnvSpec(obs_shape=(3,), obs_dtype="float32", num_actions=2, action_low=(-2.0, -1.0),
              action_high=(2.0, 1.0))
DISCRETE = EnvSpec(obs_shape=(3,), obs_dtype="float32", num_actions=3)


def _gaussian(seed=0, shape=(4, 3)):
    rng = np.random.default_rng(seed)
    return DiagGaussian(jnp.asarray(rng.normal(size=shape), jnp.float32),
                        jnp.asarray(rng.normal(scale=0.5, size=shape), jnp.float32))


def test_gaussian_log_prob_and_entropy_are_scipy_s():
    dist = _gaussian()
    action = np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32)
    mean, std = np.asarray(dist.mean, np.float64), np.exp(np.asarray(dist.log_std, np.float64))
    np.testing.assert_allclose(dist.log_prob(action),
                               stats.norm.logpdf(action, mean, std).sum(-1), rtol=1e-5)
    np.testing.assert_allclose(dist.entropy(), stats.norm.entropy(mean, std).sum(-1),
                               rtol=1e-5)
    log_p, ent = dist.log_prob_entropy(action)
    np.testing.assert_array_equal(log_p, dist.log_prob(action))
    np.testing.assert_array_equal(ent, dist.entropy())
    np.testing.assert_array_equal(dist.mode(), dist.mean)


def test_categorical_log_prob_entropy_and_mode():
    logits = np.random.default_rng(2).normal(size=(5, 4)).astype(np.float32)
    dist = Categorical(jnp.asarray(logits))
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    action = np.array([0, 3, 1, 2, 3], np.int32)
    np.testing.assert_allclose(dist.log_prob(action), np.log(p[np.arange(5), action]),
                               rtol=1e-5)
    np.testing.assert_allclose(dist.entropy(), stats.entropy(p, axis=-1), rtol=1e-5)
    np.testing.assert_array_equal(dist.mode(), p.argmax(-1))
    assert dist.mode().dtype == jnp.int32


@pytest.mark.parametrize("family", ["categorical", "gaussian"])
def test_params_round_trip(family):
    """``from_params(params())`` is the same distribution, bit for bit; the categorical's
    parameters are its logits (what the Trajectory stored before distributions existed)."""
    dist = _gaussian() if family == "gaussian" else Categorical(_gaussian().mean)
    back = type(dist).from_params(dist.params())
    jax.tree.map(np.testing.assert_array_equal, back, dist)
    if family == "categorical":
        np.testing.assert_array_equal(dist.params(), dist.logits)
    else:
        assert dist.params().shape == (4, 6)


@pytest.mark.parametrize("family,spec", [(Categorical, DISCRETE), (DiagGaussian, BOX)])
def test_noise_samples_equal_keyed_samples(family, spec):
    """A rollout's pre-drawn noise (Anakin) gives the samples ``sample_rows`` draws with the
    same keys (Sebulba's actors and the evaluations), bit for bit."""
    keys = rollout_keys(jax.random.key(0), jnp.arange(16), 0, 20)  # [T, B]
    p = jax.random.normal(jax.random.key(1), (20, 16, family.param_size(spec)))
    noise = family.noise(keys, spec)
    assert noise.shape == (20, 16, spec.num_actions)
    for t in range(20):
        dist = family.from_params(p[t])
        np.testing.assert_array_equal(dist.sample_rows(keys[t]),
                                      dist.sample_from_noise(noise[t]))


def test_categorical_samples_are_jax_random_categorical():
    """The actors' samples are unchanged: ``jax.random.categorical`` per row."""
    keys = jax.random.split(jax.random.key(3), 64)
    logits = jax.random.normal(jax.random.key(4), (64, 5))
    want = jax.vmap(jax.random.categorical)(keys, logits).astype(jnp.int32)
    np.testing.assert_array_equal(Categorical(logits).sample_rows(keys), want)


def test_gaussian_sample_statistics():
    """20k samples of one row: per-dimension mean and std within 4 standard errors, and the
    dimensions independent."""
    mean, log_std = jnp.asarray([1.5, -0.5]), jnp.asarray([0.3, -1.2])
    n = 20_000
    dist = DiagGaussian(jnp.broadcast_to(mean, (n, 2)), jnp.broadcast_to(log_std, (n, 2)))
    x = np.asarray(dist.sample_rows(jax.random.split(jax.random.key(5), n)), np.float64)
    std = np.exp(np.asarray(log_std, np.float64))
    np.testing.assert_array_less(np.abs(x.mean(0) - np.asarray(mean)), 4 * std / np.sqrt(n))
    np.testing.assert_array_less(np.abs(x.std(0) / std - 1.0), 4 / np.sqrt(2 * n))
    assert abs(np.corrcoef(x.T)[0, 1]) < 4 / np.sqrt(n)


def test_distribution_chosen_from_the_action_space():
    assert distribution_for(DISCRETE) is Categorical
    assert distribution_for(BOX) is DiagGaussian
    assert BOX.action_shape == (2,) and BOX.action_dtype == "float32"
    assert DISCRETE.action_shape == () and DISCRETE.action_dtype == "int32"


@pytest.mark.parametrize("recurrent", ["none", "lstm"])
def test_gaussian_policy_head(recurrent):
    """A box env's network returns a DiagGaussian: means near 0 (policy head init 0.01) and
    the state-independent log-std, one learned vector initialised to 0 (CleanRL), the same for
    every row."""
    net = networks.make_network("mlp", BOX, recurrent, hidden_size=8)
    params = networks.init_params(net, jax.random.key(0), BOX)
    leaves = params["params"] if recurrent == "none" else params["params"]["heads"]
    np.testing.assert_array_equal(leaves["log_std"], np.zeros(2))
    obs = jax.random.normal(jax.random.key(1), (5, 4, 3))  # [T, N, obs]
    core = networks.initial_core(net, 4)
    first = jnp.ones((5, 4), bool)
    dist, value = networks.unroll_network(net.apply, params, obs, core,
                                          None if core is None else first)
    assert isinstance(dist, DiagGaussian) and value.shape == (5, 4)
    assert dist.mean.shape == dist.log_std.shape == (5, 4, 2)
    assert np.abs(np.asarray(dist.mean)).max() < 0.1
    np.testing.assert_array_equal(dist.log_std, 0.0)
