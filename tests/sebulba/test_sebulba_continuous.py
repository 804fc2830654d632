"""Sebulba with continuous actions: an EnvPool MuJoCo smoke run (Gaussian policy, box
actions in the batches, finite losses) and a gymnax box env through the jittable-env host
adapter."""

from __future__ import annotations

import threading

import jax
import numpy as np
import pytest

from configs import halfcheetah_ppo
from sebulba.train import prepare, train


@pytest.fixture(autouse=True)
def no_thread_outlives_a_test():
    yield
    assert [t for t in threading.enumerate() if t.name.startswith("actor-")] == []


def _tiny(env_id: str):
    """configs/halfcheetah_ppo.py at a tiny size: 4 envs x 8 steps, 3 updates."""
    config = halfcheetah_ppo.get_config()
    config.env_id = env_id
    config.num_envs = 4
    config.num_steps = 8
    config.num_epochs = 2
    config.num_minibatches = 2
    config.update_unroll = 1          # tiny batch: compile time matters more than speed
    config.total_env_steps = 4 * 8 * 3
    config.log_every = 1
    prepare(config)
    return config


@pytest.mark.parametrize("env_id,dim,bound", [("HalfCheetah-v4", 6, 1.0),
                                              ("gymnax:Pendulum-v1", 1, 2.0)],
                         ids=["envpool_mujoco", "gymnax_host"])
def test_continuous_smoke_three_updates(env_id, dim, bound):
    """Three updates: finite losses; the learner's batches hold float box actions ``[T, b,
    D]`` (the unclipped Gaussian samples, some beyond the bounds: the env adapters clip what
    they step with) and the behaviour Gaussian's mean and log-std ``[T, b, 2 D]``, the
    log-std 0 at the start (CleanRL's init) and the samples' spread about the means near 1."""
    seen = {}
    rows = train(_tiny(env_id), None,
                 on_batch=lambda u, batch: seen.setdefault(u, jax.tree.map(np.asarray, batch)))
    assert [r["update"] for r in rows] == [1, 2, 3]
    for r in rows:
        losses = [v for k, v in r.items() if k.startswith("loss/")]
        assert losses and np.all(np.isfinite(losses)), r
    traj = seen[0]
    assert traj.action.shape == (8, 4, dim) and traj.action.dtype == np.float32
    assert traj.behaviour_logits.shape == (8, 4, 2 * dim)
    mean, log_std = np.split(np.asarray(traj.behaviour_logits), 2, axis=-1)
    np.testing.assert_array_equal(log_std, 0.0)
    z = np.asarray(traj.action) - mean
    assert 0.6 < z.std() < 1.5, z.std()
    if bound == 1.0:
        assert np.abs(traj.action).max() > bound  # unclipped samples are stored
