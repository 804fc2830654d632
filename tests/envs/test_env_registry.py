"""Env id resolution."""

from __future__ import annotations

import pytest

from envs import registry
from envs.catch import CatchEnv
from envs.gymnax import GymnaxEnv
from rlcore.errors import ConfigError


def test_unknown_id_lists_close_match():
    with pytest.raises(
        ConfigError,
        match=r"env_id: unknown env 'CartPol-v1'; close matches: "
        r"CartPole-v1",
    ):
        registry.make_jax_env("CartPol-v1")
    with pytest.raises(ConfigError, match="Breakout-v5"):
        registry.make_host_env("Breakout-v4x", 2, seed=0)


def test_wrong_kind_is_config_error():
    with pytest.raises(ConfigError, match="not a jittable.*Breakout-MinAtar"):
        registry.make_jax_env("Breakout-v5")
    with pytest.raises(ConfigError, match="not a host"):
        registry.make_host_env("Catch-own", 2, seed=0)
    with pytest.raises(ConfigError, match="continuous"):
        registry.make_jax_env("Pendulum-v1")


def test_known_ids_resolve():
    assert isinstance(registry.make_jax_env("CartPole-v1"), GymnaxEnv)
    catch = registry.make_jax_env("Catch-own", max_steps=7)
    assert isinstance(catch, CatchEnv) and catch.max_steps == 7
    assert registry.make_jax_env("Breakout-MinAtar").spec.obs_shape == (10, 10, 4)
    for env_id in ("CartPole-v1", "Acrobot-v1", "Breakout-MinAtar", "Catch-bsuite", "Catch-own"):
        assert registry.is_jax_env(env_id), env_id
    for env_id in ("CartPole-v1", "Acrobot-v1", "Breakout-v5", "Pong-v5"):
        assert registry.is_host_env(env_id), env_id
    assert not registry.is_jax_env("Breakout-v5")
    assert not registry.is_host_env("Breakout-MinAtar")
    assert not registry.is_host_env("HalfCheetah-v5")  # a MuJoCo -v5 id is not Atari
    assert not registry.is_jax_env("Pendulum-v1")


def test_make_host_env_delegates_to_envpool():
    env = registry.make_host_env("CartPole-v1", 2, seed=3, first_env_index=4)
    try:
        assert env.num_envs == 2 and env.spec.num_actions == 2
        assert env.reset().obs.shape == (2, 4)
    finally:
        env.close()
