"""Sebulba on jittable envs served through JaxHostEnv: gymnax CartPole to the threshold,
MinAtar and own-Catch smoke runs, and learner data independent of the actor layout."""

from __future__ import annotations

import threading

import jax
import numpy as np
import pytest

import sebulba.train as sebulba_trainer
from configs import cartpole_ppo_sebulba
from sebulba.train import prepare, train
from tests.helpers import best_return, sebulba_batches
from tests.threshold import train_to_return

SOLVED = 475.0

needs_4 = pytest.mark.skipif(jax.device_count() < 4, reason="needs 4 (fake) devices")


@pytest.fixture(autouse=True)
def no_thread_outlives_a_test():
    yield
    assert [t for t in threading.enumerate() if t.name.startswith("actor-")] == []


def _config(env_id, **overrides):
    config = cartpole_ppo_sebulba.get_config()
    config.env_id = env_id
    config.actor_device_ids = (0,)
    config.learner_device_ids = (1, 2, 3) if jax.device_count() >= 4 else (0,)
    for k, v in overrides.items():
        config[k] = v
    prepare(config)
    return config


def _smoke(env_id, **overrides):
    """A few small updates: 12 envs over 2 actor threads, 16 steps, log every update."""
    sizes = dict(num_envs=12, num_actor_threads=2, num_steps=16, num_minibatches=2,
                 total_env_steps=12 * 16 * 3, log_every=1, update_unroll=1)
    return _config(env_id, **{**sizes, **overrides})


def _assert_finite_losses(rows, updates):
    assert [r["update"] for r in rows] == list(range(1, updates + 1))
    for r in rows:
        losses = [v for k, v in r.items() if k.startswith("loss/")]
        assert losses and np.all(np.isfinite(losses)), r


@pytest.mark.slow
def test_gymnax_cartpole_reaches_threshold():
    """The EnvPool CartPole config, unchanged but for the env id, solves the gymnax one."""
    # Stopped at the first line at SOLVED (tests/threshold.py).
    rows = train_to_return(sebulba_trainer, SOLVED, _config("gymnax:CartPole-v1"), None)
    assert best_return(rows) >= SOLVED, [r["episode_return"] for r in rows]


def test_minatar_breakout_smoke():
    rows = train(_smoke("Breakout-MinAtar", network="minatar_cnn"), None)
    _assert_finite_losses(rows, 3)


def test_own_catch_smoke():
    rows = train(_smoke("Catch-own"), None)
    _assert_finite_losses(rows, 3)
    # Catch ends every 9th step with return +1 or -1: episodes end in every rollout.
    returns = [r["episode_return"] for r in rows]
    assert all(ret is not None and -1.0 <= ret <= 1.0 for ret in returns), returns


@needs_4
def test_learner_data_independent_of_actor_threads():
    """Envs are seeded by global index and the actors compute every env's row the same way
    whatever their batch (``rlcore.networks.row_stable``), so 1 thread of 24 envs, 2 of 12
    and 3 of 8 give the learner the same data, the actors' logits bit for bit (the sync
    pipeline fixes the params of each rollout). Without ``row_stable``, 12-row batches gave
    logits up to 1e-7 away from the 24-row batch's."""
    batches = [sebulba_batches(_smoke("own:Catch", pipeline="sync", num_envs=24,
                                      total_env_steps=24 * 16 * 3,
                                      num_actor_threads=threads), 3) for threads in (1, 2, 3)]
    one = batches[0]
    for other in batches[1:]:
        for u in one:
            for name in ("obs", "action", "reward", "terminated", "truncated",
                         "bootstrap_obs", "behaviour_dist_params"):
                np.testing.assert_array_equal(getattr(one[u], name), getattr(other[u], name),
                                              err_msg=f"{name} at update {u}")
