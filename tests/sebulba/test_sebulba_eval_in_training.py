"""Sebulba evaluation during training: greedy episodes on an env pool of their own leave
the training metrics identical; their seeds are not training's."""

from __future__ import annotations

import numpy as np

from configs import cartpole_ppo_sebulba
from envs import registry
from rlcore.seeding import host_env_seed, train_eval_host_seed
from sebulba.episodes import play_first_episodes
from sebulba.train import prepare, train
from tests.helpers import training_part


def _config(**overrides):
    c = cartpole_ppo_sebulba.get_config()
    c.total_env_steps = 24 * 32 * 8
    c.log_every = 2
    c.eval_episodes = 4
    c.update_from_flattened_dict(overrides)
    return c



def test_evaluation_leaves_training_identical():
    plain = train(_config(), None)
    config = _config(eval_every=3)
    prepare(config)
    evald = train(config, None)
    assert training_part(evald) == training_part(plain)
    # Lines at 2, 4, 6, 8; evaluations after updates 3 and 6.
    assert [r["update"] for r in evald if "eval/episode_return" in r] == [4, 6]
    for r in evald:
        if "eval/episode_return" in r:
            assert r["eval/episode_return"] == r["eval/episode_length"] >= 8


def test_eval_pool_seeds_are_not_training_seeds():
    assert train_eval_host_seed(0) > host_env_seed(2**30 - 1, 0) + 10_000
    assert all(train_eval_host_seed(s) > host_env_seed(s, u) for s in (0, 7, 2**30 - 1)
               for u in (1, 5, 10**6))


def test_play_first_episodes_counts_each_env_once():
    env = registry.make_host_env("CartPole-v1", 3, seed=train_eval_host_seed(0))
    try:
        out = play_first_episodes(env, lambda obs, t, first: np.zeros(len(obs), np.int64),
                                  max_steps=2000).summary()
        assert out.count == 3 and out.return_sum == out.length_sum < 3 * 100
        capped = play_first_episodes(env, lambda obs, t, first: np.zeros(len(obs), np.int64),
                                     max_steps=2).summary()
        assert capped.count == 0
    finally:
        env.close()


def test_play_first_episodes_stops_when_asked():
    env = registry.make_host_env("CartPole-v1", 3, seed=train_eval_host_seed(0))
    calls = []
    try:
        out = play_first_episodes(env, lambda obs, t, first: np.zeros(len(obs), np.int64),
                                  max_steps=2000,
                                  should_stop=lambda: calls.append(1) or len(calls) > 4)
        assert out is None and len(calls) == 5  # checked before every step
    finally:
        env.close()
