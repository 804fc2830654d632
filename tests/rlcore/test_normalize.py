"""Normalisation statistics against NumPy (CleanRL's running mean/var), global over four
devices, reward scaling against a loop, and the optimizer leaving the statistics alone."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import PartitionSpec as P

from rlcore import normalize
from rlcore.networks import make_network
from rlcore.types import EnvSpec
from runtime.distributed import data_mesh


def _np_running(batches, shape):
    """CleanRL's RunningMeanStd (``update_mean_var_count_from_moments``) in NumPy float64."""
    mean, var, count = np.zeros(shape), np.ones(shape), 1e-4
    for x in batches:
        x = x.reshape((-1,) + shape).astype(np.float64)
        b_mean, b_var, b_count = x.mean(0), x.var(0), x.shape[0]
        delta, total = b_mean - mean, count + b_count
        m2 = var * count + b_var * b_count + delta ** 2 * count * b_count / total
        mean, var, count = mean + delta * b_count / total, m2 / total, total
    return mean, var, count


def _batches(seed=0, n=3, shape=(8, 16, 3)):
    rng = np.random.default_rng(seed)
    return [(rng.normal(size=shape) * [1.0, 5.0, 0.1] + [0.0, 3.0, -2.0]).astype(np.float32)
            for _ in range(n)]


def test_update_stats_matches_cleanrl_running_mean_std():
    batches = _batches()
    stats = normalize.RunningStats.zero((3,))
    for x in batches:
        stats = normalize.update_stats(stats, x, None, 2)
    mean, var, count = _np_running(batches, (3,))
    np.testing.assert_allclose(stats.mean, mean, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(stats.var, var, rtol=1e-5)
    np.testing.assert_allclose(stats.count, count, rtol=1e-6)
    data = np.concatenate([x.reshape(-1, 3) for x in batches])  # ~ the plain moments
    np.testing.assert_allclose(stats.mean, data.mean(0), atol=1e-4)
    np.testing.assert_allclose(stats.var, data.var(0), rtol=1e-3)


def test_update_stats_over_four_devices_equals_one():
    if jax.device_count() < 4:
        pytest.skip("needs 4 (fake) devices")
    x = _batches(seed=1, n=1)[0]  # [T=8, B=16, 3], envs split over the devices
    stats = normalize.RunningStats.zero((3,)).replace(mean=jnp.full((3,), 0.5))
    one = normalize.update_stats(stats, x, None, 2)
    mesh = data_mesh(jax.devices()[:4])
    four = jax.jit(jax.shard_map(functools.partial(normalize.update_stats, axis_name="data",
                                                   batch_dims=2),
                                 mesh=mesh, in_specs=(P(), P(None, "data")), out_specs=P()))(
        stats, x)
    for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(four), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_scale_rewards_follows_the_discounted_return():
    rng = np.random.default_rng(2)
    t_len, b = 12, 5
    reward = rng.normal(size=(t_len, b)).astype(np.float32) * 3
    done = rng.random((t_len, b)) < 0.2
    stats = normalize.RunningStats(mean=np.float32(0), var=np.float32(4.0), count=np.float32(9))
    gamma, clip = 0.9, 1.0
    acc_np = np.zeros(b, np.float32)
    acc_j = jnp.zeros(b, jnp.float32)
    ref = np.zeros(b)
    for t in range(t_len):
        ref = gamma * ref + reward[t]
        scaled, g, acc_np = normalize.scale_rewards(reward[t], acc_np, done[t], stats, gamma,
                                                    clip, xp=np)
        scaled_j, g_j, acc_j = normalize.scale_rewards(reward[t], acc_j, done[t], stats, gamma,
                                                       clip)
        np.testing.assert_allclose(g, ref, rtol=1e-5)
        np.testing.assert_allclose(scaled, np.clip(reward[t] / np.sqrt(4.0 + 1e-8), -1, 1),
                                   rtol=1e-6)
        np.testing.assert_allclose(scaled_j, scaled, rtol=1e-6)
        np.testing.assert_allclose(g_j, g, rtol=1e-6)
        ref = np.where(done[t], 0.0, ref)


def test_optimizer_leaves_the_statistics_alone():
    """The loss's gradient w.r.t. the statistics is 0, so Adam moves them by exactly 0;
    the normalised network sees ``clip((obs - mean) / std)``."""
    spec = EnvSpec(obs_shape=(3,), obs_dtype="float32", num_actions=2)
    net = normalize.Normalized(make_network("mlp", spec), (3,), True, True, obs_clip=2.0)
    params = net.init(jax.random.key(0), jnp.zeros((1, 3)))
    stats = normalize.RunningStats(mean=jnp.asarray([1.0, -1.0, 0.0]),
                                   var=jnp.asarray([4.0, 1.0, 0.25]), count=jnp.float32(10))
    params = params.replace(obs=stats)
    obs = jnp.asarray(_batches(seed=3, n=1, shape=(32, 3))[0])
    want = net.net.apply(params.net, jnp.clip(
        (obs - stats.mean[None]) / jnp.sqrt(stats.var[None] + 1e-8), -2.0, 2.0))
    (dist, value), (want_dist, want_value) = net.apply(params, obs), want
    np.testing.assert_allclose(value, want_value, rtol=1e-6)
    np.testing.assert_allclose(dist.params(), want_dist.params(), rtol=1e-6)
    opt = optax.adam(1e-2)
    opt_state = opt.init(params)
    loss = lambda p: jnp.sum(net.apply(p, obs)[1] ** 2) + jnp.sum(net.apply(p, obs)[0].params())

    @jax.jit
    def step(params, opt_state):
        updates, opt_state = opt.update(jax.grad(loss)(params), opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    for _ in range(3):
        params, opt_state = step(params, opt_state)
    for a, b in zip(jax.tree.leaves((params.obs, params.ret)),
                    jax.tree.leaves((stats, normalize.RunningStats.zero())), strict=True):
        np.testing.assert_array_equal(a, b)
