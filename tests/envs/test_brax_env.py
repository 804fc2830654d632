"""Brax envs behind the JaxEnv protocol (envs/brax.py) and their ids in the registry."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs import registry
from envs.brax import BRAX_IDS, BraxEnv, _get_environment, observation_size, prefer_egl
from rlcore.errors import ConfigError

NUM_ENVS = 4


@pytest.fixture(scope="module")
def pendulum():
    """``inverted_pendulum`` with a 30-step limit, and its jitted, vmapped step."""
    prefer_egl()  # for the renderer's test, where MuJoCo is not loaded yet
    env = BraxEnv("inverted_pendulum", episode_length=30)
    return env, jax.jit(jax.vmap(env.step))


def _run(env_step, env, action: float, steps: int):
    """``steps`` steps of every env with the constant ``action``; the TimeSteps stacked."""
    state, _ = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), NUM_ENVS))
    out = []
    for i in range(steps):
        keys = jax.random.split(jax.random.key(i + 1), NUM_ENVS)
        state, ts = env_step(state, jnp.full((NUM_ENVS, 1), action, jnp.float32), keys)
        out.append(jax.tree.map(np.asarray, ts))
    return state, jax.tree.map(lambda *x: np.stack(x), *out)


def test_ids_are_braxs_own():
    from brax import envs as brax_envs

    assert set(BRAX_IDS) == set(brax_envs._envs) - {"fast"}


def test_specs_give_the_actuators_range():
    spec = BraxEnv("inverted_pendulum").spec
    assert spec.obs_shape == (4,)
    assert (spec.num_actions, spec.action_low, spec.action_high) == (1, (-3.0,), (3.0,))
    spec = registry.make_jax_env("brax:hopper").spec
    assert spec.obs_shape == (11,) and spec.obs_dtype == "float32"
    assert (spec.num_actions, spec.action_low, spec.action_high) == (3, (-1.0,) * 3, (1.0,) * 3)


def test_time_limit_truncates_and_resets(pendulum):
    """Held still, the pole stands: every env is truncated at step 30 (and only there), its
    episode of length 30 and return 30 (1 a step), and the next obs starts a new episode."""
    env, step = pendulum
    state, ts = _run(step, env, 0.0, 35)
    assert not ts.terminated.any()
    np.testing.assert_array_equal(ts.truncated.sum(0), 1)
    assert ts.truncated[29].all()
    np.testing.assert_array_equal(state.stats.completed_length, 30)
    np.testing.assert_array_equal(state.stats.completed_return, 30.0)
    assert ts.reward.dtype == np.float32 and ts.obs.dtype == np.float32
    # final_obs is the stepped obs: the obs itself but where the step reset the env.
    np.testing.assert_array_equal(ts.final_obs[:29], ts.obs[:29])
    assert not np.isclose(ts.final_obs[29], ts.obs[29]).all(axis=-1).any()


def test_falling_pole_terminates_and_actions_are_clipped(pendulum):
    """Pushed hard one way the pole tips over: terminated (not truncated) before the limit;
    a push of 100 steps exactly as the range's end, 3 (the adapter clips)."""
    env, step = pendulum
    _, ts = _run(step, env, 3.0, 25)
    _, clipped = _run(step, env, 100.0, 25)
    first = ts.terminated.argmax(0)
    assert ts.terminated.any(0).all() and (first < 25).all()
    assert not ts.truncated.any()
    np.testing.assert_array_equal(clipped.obs, ts.obs)


@pytest.mark.slow  # 15-25 s (the default tier's 12 minutes)
def test_observation_size_from_a_traced_reset_is_braxs_own():
    """``observation_size`` traces the reset; Brax's property runs it (seconds of one-op
    compiles): the same length."""
    env = _get_environment("walker2d")
    assert observation_size(env) == env.observation_size == 17


def test_registry_resolves_prefixed_brax_ids_only():
    for mode in (registry.ANAKIN, registry.SEBULBA):
        assert registry.resolve("brax:hopper", mode) == ("brax", "hopper")
        with pytest.raises(ConfigError, match="close matches: .*brax:hopper"):
            registry.resolve("hopper", mode)
    assert registry.time_limit_overrides("brax", 20) == {"episode_length": 20}
    with pytest.raises(ConfigError, match="brax:inverted_pendulum does not take"):
        registry.make_jax_env("brax:inverted_pendulum", no_such_argument=1)


def test_brax_renderer_draws_the_states_where_the_host_can(pendulum):
    """Brax's own picture of env 0's states (MuJoCo's renderer, on CPU through EGL), for the
    evaluation videos; a host without an OpenGL context says why (the videos draw bars)."""
    env, _ = pendulum
    problem = env.render_problem()
    if problem is not None:
        pytest.skip(f"no OpenGL context here: {problem}")
    state, _ = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), NUM_ENVS))
    q, qd = env.frame_state(jax.tree.map(lambda x: x[0], state))
    frames = env.render_frames((np.stack([q, q]), np.stack([qd, qd])), size=(60, 80))
    assert len(frames) == 2 and frames[0].shape == (60, 80, 3) and frames[0].dtype == np.uint8
    assert frames[0].min() < frames[0].max()  # a picture, not a blank
