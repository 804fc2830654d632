"""Env id resolution: library prefixes, each mode's native library, close matches."""

from __future__ import annotations

import numpy as np
import pytest

from envs import registry
from envs.catch import CatchEnv
from envs.envpool import EnvPoolEnv
from envs.gymnax import GymnaxEnv
from envs.jax_host import JaxHostEnv
from rlcore.errors import ConfigError
from rlcore.seeding import host_env_root


def accepts(mode: str, env_id: str) -> bool:
    """Whether ``mode`` runs ``env_id`` (it resolves there)."""
    try:
        registry.resolve(env_id, mode)
    except ConfigError:
        return False
    return True


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
    with pytest.raises(ConfigError, match="continuous gymnax env not supported"):
        registry.make_jax_env("Reacher-misc")
    with pytest.raises(ConfigError, match="continuous gymnax env not supported"):
        registry.make_host_env("gymnax:Swimmer-misc", 2, seed=0)


@pytest.mark.parametrize("env_id, anakin, sebulba", [
    ("CartPole-v1", ("gymnax", "CartPole-v1"), ("envpool", "CartPole-v1")),
    ("gymnax:CartPole-v1", ("gymnax", "CartPole-v1"), ("gymnax", "CartPole-v1")),
    ("envpool:CartPole-v1", None, ("envpool", "CartPole-v1")),
    ("Breakout-MinAtar", ("gymnax", "Breakout-MinAtar"), ("gymnax", "Breakout-MinAtar")),
    ("Breakout-v5", None, ("envpool", "Breakout-v5")),
    ("envpool:Pong-v5", None, ("envpool", "Pong-v5")),
    ("Catch-own", ("own", "Catch"), ("own", "Catch")),
    ("own:Catch", ("own", "Catch"), ("own", "Catch")),
    ("Catch-bsuite", ("gymnax", "Catch-bsuite"), ("gymnax", "Catch-bsuite")),
])
def test_resolution_rule(env_id, anakin, sebulba):
    """A prefix names the library; a bare id goes to the mode's native one (Sebulba:
    EnvPool where it has the id, else jittable); Anakin refuses EnvPool."""
    assert registry.resolve(env_id, "sebulba") == sebulba
    assert accepts(registry.SEBULBA, env_id)
    if anakin is None:
        with pytest.raises(ConfigError, match=r"not a jittable \(Anakin\) env: it is EnvPool's"):
            registry.resolve(env_id, "anakin")
        with pytest.raises(ConfigError, match="not a jittable"):
            registry.check_jax_env_id(env_id)
        assert not accepts(registry.ANAKIN, env_id)
    else:
        assert registry.resolve(env_id, "anakin") == anakin
        registry.check_jax_env_id(env_id)
        assert accepts(registry.ANAKIN, env_id)
    registry.check_host_env_id(env_id)


def test_envpool_prefix_in_anakin_suggests_the_jittable_twin():
    with pytest.raises(ConfigError, match=r"'envpool:CartPole-v1' is not a jittable.*"
                                          r"close matches: .*gymnax:CartPole-v1"):
        registry.make_jax_env("envpool:CartPole-v1")


@pytest.mark.parametrize("env_id, mode, expected", [
    ("gymnax:CartPol-v1", "anakin", "gymnax:CartPole-v1"),
    ("gymnax:CartPol-v1", "sebulba", "gymnax:CartPole-v1"),
    ("own:Cach", "sebulba", "own:Catch"),
    ("own:Catch-own", "anakin", "own:Catch"),
    ("gym:CartPole-v1", "anakin", "gymnax:CartPole-v1"),
    ("envpool:Breakout-v4", "sebulba", "envpool:Breakout-v5"),
    ("CartPol-v1", "sebulba", "envpool:CartPole-v1"),
])
def test_unknown_prefixed_id_lists_prefixed_close_matches(env_id, mode, expected):
    with pytest.raises(ConfigError, match=r"env_id: unknown env '.*'; close matches: ") as e:
        registry.resolve(env_id, mode)
    matches = str(e.value).split("close matches: ")[1].split(", ")
    assert expected in matches, matches
    if mode == "anakin":
        assert not any(m.startswith("envpool:") for m in matches)


def test_anakin_close_matches_never_suggest_envpool():
    with pytest.raises(ConfigError) as e:
        registry.resolve("envpool:CartPole-v2", "anakin")
    assert "envpool:" not in str(e.value).split("close matches: ")[1]


def test_bad_mode_is_a_value_error():
    with pytest.raises(ValueError, match="mode"):
        registry.resolve("CartPole-v1", "podracer")


def test_known_ids_resolve():
    assert isinstance(registry.make_jax_env("CartPole-v1"), GymnaxEnv)
    assert isinstance(registry.make_jax_env("gymnax:CartPole-v1"), GymnaxEnv)
    catch = registry.make_jax_env("Catch-own", max_steps=7)
    assert isinstance(catch, CatchEnv) and catch.max_steps == 7
    assert isinstance(registry.make_jax_env("own:Catch"), CatchEnv)
    assert registry.make_jax_env("Breakout-MinAtar").spec.obs_shape == (10, 10, 4)
    for env_id in ("CartPole-v1", "Acrobot-v1", "Breakout-MinAtar", "Catch-bsuite", "Catch-own",
                   "own:Catch", "gymnax:Acrobot-v1"):
        assert accepts(registry.ANAKIN, env_id), env_id
    for env_id in ("CartPole-v1", "Acrobot-v1", "Breakout-v5", "Pong-v5", "Breakout-MinAtar",
                   "Catch-own", "own:Catch", "gymnax:CartPole-v1", "envpool:Acrobot-v1"):
        assert accepts(registry.SEBULBA, env_id), env_id
    assert not accepts(registry.ANAKIN, "Breakout-v5")
    assert not accepts(registry.ANAKIN, "envpool:CartPole-v1")
    assert not accepts(registry.SEBULBA, "HalfCheetah-v5")  # a MuJoCo -v5 id is not Atari
    for env_id in ("Pendulum-v1", "gymnax:MountainCarContinuous-v0"):  # box actions
        assert accepts(registry.ANAKIN, env_id), env_id
    for env_id in ("HalfCheetah-v4", "Hopper-v4", "Ant-v4", "gymnax:Pendulum-v1"):
        assert accepts(registry.SEBULBA, env_id), env_id
    assert not accepts(registry.ANAKIN, "Reacher-misc")  # a box gymnax id not run here


def test_make_host_env_delegates_to_envpool():
    for env_id in ("CartPole-v1", "envpool:CartPole-v1"):
        env = registry.make_host_env(env_id, 2, seed=3, first_env_index=4)
        try:
            assert isinstance(env, EnvPoolEnv), env_id
            assert env.num_envs == 2 and env.spec.num_actions == 2
            assert env.reset().obs.shape == (2, 4)
        finally:
            env.close()


@pytest.mark.parametrize("env_id, overrides, obs_shape, num_actions", [
    ("gymnax:CartPole-v1", {"max_steps_in_episode": 20}, (4,), 2),
    ("Breakout-MinAtar", {}, (10, 10, 4), 3),
    ("Catch-own", {"max_steps": 5}, (50,), 3),
    ("own:Catch", {}, (50,), 3),
])
def test_make_host_env_serves_jittable_envs(env_id, overrides, obs_shape, num_actions):
    env = registry.make_host_env(env_id, 3, seed=0, first_env_index=2, num_threads=4,
                                 key_root=host_env_root(0), **overrides)
    try:
        assert isinstance(env, JaxHostEnv) and env.num_envs == 3 and env.first_env_index == 2
        assert env.spec == registry.host_env_spec(env_id) == registry.jax_env_spec(env_id)
        assert env.spec.obs_shape == obs_shape and env.spec.num_actions == num_actions
        ts = env.reset()
        assert ts.obs.shape == (3, *obs_shape)
        ts = env.step(np.zeros(3, np.int32))
        assert ts.reward.shape == (3,) and ts.reward.dtype == np.float32
    finally:
        env.close()


def test_host_overrides_reach_the_jittable_env():
    env = registry.make_host_env("gymnax:CartPole-v1", 2, seed=0, key_root=host_env_root(0),
                                 max_steps_in_episode=3)
    try:
        env.reset()
        flags = [env.step(np.array([0, 1])).truncated.all() for _ in range(3)]
        assert flags == [False, False, True]
    finally:
        env.close()
    with pytest.raises(ConfigError, match="takes no argument .max_steps."):
        registry.make_host_env("gymnax:CartPole-v1", 2, seed=0, key_root=host_env_root(0),
                               max_steps=3)


def test_time_limit_overrides():
    assert registry.time_limit_overrides("envpool", 0) == {}
    assert registry.time_limit_overrides("envpool", 64) == {"max_episode_steps": 64}
    assert registry.time_limit_overrides("gymnax", 9) == {"max_steps_in_episode": 9}


def test_frame_rules_come_from_the_registry():
    """CartPole's drawing, a board env's grid, and which host envs render themselves."""
    from envs.render import CARTPOLE_FRAME

    env = registry.make_jax_env("CartPole-v1")
    frame = registry.obs_frame_fn("CartPole-v1", registry.ANAKIN, env)(np.zeros(4, np.float32))
    assert frame.shape == CARTPOLE_FRAME + (3,)
    board = registry.make_jax_env("Catch-own")
    frame = registry.obs_frame_fn("Catch-own", registry.ANAKIN, board)(np.ones(50, np.float32))
    assert frame.shape == (320, 160, 3)
    assert registry.render_overrides("gymnax:CartPole-v1", registry.SEBULBA) == {}
    if registry.host_env_ids():
        assert registry.render_overrides("CartPole-v1", registry.SEBULBA) == {
            "render_mode": "rgb_array"}


def test_written_gymnax_ids_are_gymnax_s_own():
    """envs/gymnax_ids.py lists gymnax's registered ids (so checking an id never imports
    gymnax); a gymnax that adds or drops one fails here."""
    import gymnax

    from envs import gymnax_ids

    assert gymnax_ids.REGISTERED_IDS == tuple(gymnax.registered_envs)
    assert gymnax_ids.CONTINUOUS_GYMNAX_IDS <= set(gymnax.registered_envs)


def test_refusing_a_bad_config_does_not_import_gymnax():
    """The id check and a field error reach their line without importing gymnax."""
    import subprocess
    import sys

    from tests.helpers import REPO, entry_env

    code = ("import sys\n"
            "from envs import registry\n"
            "registry.resolve('CartPole-v1', 'anakin')\n"
            "try:\n"
            "    registry.resolve('CartPol-v1', 'anakin')\n"
            "except Exception as e:\n"
            "    print(e)\n"
            "print('gymnax' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=entry_env(),
                         capture_output=True, text=True, timeout=120).stdout.splitlines()
    assert out[0].startswith("env_id: unknown env 'CartPol-v1'; close matches: CartPole-v1")
    assert out[-1] == "False"
