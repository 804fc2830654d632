"""JaxEnv adapters (GymnaxEnv, CatchEnv): shapes, same-step auto-reset, flags, statistics."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs.base import step_batch
from envs.catch import CatchEnv
from envs.gymnax import GymnaxEnv

NUM_ENVS = 8
NUM_STEPS = 600


def _cartpole_is_reset_obs(obs: np.ndarray) -> bool:
    """gymnax CartPole starts every state variable uniformly in [-0.05, 0.05]."""
    return bool(np.all(np.abs(obs) <= 0.05))


def _catch_is_reset_obs(obs: np.ndarray) -> bool:
    """Catch starts with the ball in the top row and the paddle mid-bottom (10 x 5)."""
    board = obs.reshape(10, 5)
    return bool(board.sum() == 2 and board[0].sum() == 1 and board[9, 2] == 1)


def _make_cartpole(limit: int | None = None) -> GymnaxEnv:
    overrides = {} if limit is None else {"max_steps_in_episode": limit}
    return GymnaxEnv("CartPole-v1", **overrides)


def _make_catch(limit: int | None = None) -> CatchEnv:
    return CatchEnv() if limit is None else CatchEnv(max_steps=limit)


ENVS = {
    "gymnax-cartpole": (_make_cartpole, (4,), _cartpole_is_reset_obs),
    "own-catch": (_make_catch, (50,), _catch_is_reset_obs),
}


@functools.cache
def _rollout(name: str, limit: int | None, num_steps: int, seed: int = 0):
    """Runs NUM_ENVS envs for ``num_steps`` random steps under jit(vmap) and lax.scan.

    Returns:
      (env, first TimeStep [B], TimeSteps [T, B], EpisodeStats after each step [T, B]) as numpy.
    """
    env = ENVS[name][0](limit)
    reset_key, run_key = jax.random.split(jax.random.key(seed))
    state, first = jax.jit(jax.vmap(env.reset))(jax.random.split(reset_key, NUM_ENVS))

    def body(state, key):
        action_key, step_key = jax.random.split(key)
        actions = jax.random.randint(action_key, (NUM_ENVS,), 0, env.spec.num_actions)
        state, timestep = jax.vmap(env.step)(state, actions, jax.random.split(step_key, NUM_ENVS))
        return state, (timestep, state.stats)

    run = jax.jit(lambda s, k: jax.lax.scan(body, s, jax.random.split(k, num_steps)))
    _, (timesteps, stats) = run(state, run_key)
    to_np = lambda tree: jax.tree.map(np.asarray, tree)
    return env, to_np(first), to_np(timesteps), to_np(stats)


@pytest.mark.parametrize("name", sorted(ENVS))
def test_shapes_and_dtypes(name):
    env, first, ts, stats = _rollout(name, None, NUM_STEPS)
    obs_shape = ENVS[name][1]
    assert env.spec.obs_shape == obs_shape and env.spec.obs_dtype == "float32"
    assert first.obs.shape == (NUM_ENVS, *obs_shape) and first.obs.dtype == np.float32
    assert first.reward.dtype == np.float32 and not first.reward.any()
    assert first.terminated.dtype == bool and not first.terminated.any()
    assert first.truncated.dtype == bool and not first.truncated.any()
    assert ts.obs.shape == (NUM_STEPS, NUM_ENVS, *obs_shape) and ts.obs.dtype == np.float32
    assert ts.reward.shape == (NUM_STEPS, NUM_ENVS) and ts.reward.dtype == np.float32
    assert ts.terminated.dtype == bool and ts.truncated.dtype == bool
    assert stats.running_return.dtype == np.float32
    assert stats.running_length.dtype == np.int32
    assert stats.completed_return.shape == (NUM_STEPS, NUM_ENVS)


@pytest.mark.parametrize("name", sorted(ENVS))
def test_flags_and_auto_reset(name):
    _, first, ts, _ = _rollout(name, None, NUM_STEPS)
    is_reset_obs = ENVS[name][2]
    assert not (ts.terminated & ts.truncated).any()
    done = ts.terminated | ts.truncated
    assert done.sum() > 20, "random policy should end many episodes"
    assert all(is_reset_obs(o) for o in first.obs)
    for t, b in zip(*np.nonzero(done), strict=True):
        assert is_reset_obs(ts.obs[t, b]), (t, b)


def _check_stats_against_rewards(ts, stats):
    """Recomputes every env's episode returns and lengths from the reward stream."""
    num_steps, num_envs = ts.reward.shape
    done = ts.terminated | ts.truncated
    for b in range(num_envs):
        ret, length, completed = 0.0, 0, (0.0, 0)
        for t in range(num_steps):
            ret, length = ret + float(ts.reward[t, b]), length + 1
            if done[t, b]:
                completed, ret, length = (ret, length), 0.0, 0
            np.testing.assert_allclose(stats.completed_return[t, b], completed[0], rtol=1e-6)
            assert stats.completed_length[t, b] == completed[1]
            np.testing.assert_allclose(stats.running_return[t, b], ret, rtol=1e-6)
            assert stats.running_length[t, b] == length


@pytest.mark.parametrize("name", sorted(ENVS))
def test_episode_stats_match_reward_stream(name):
    _, _, ts, stats = _rollout(name, None, NUM_STEPS)
    _check_stats_against_rewards(ts, stats)


@pytest.mark.parametrize("name", sorted(ENVS))
def test_truncation_at_time_limit(name):
    limit = 3
    _, _, ts, stats = _rollout(name, limit, 30)
    # Neither CartPole (starts within 0.05 of upright) nor Catch (ends on step 9) can
    # terminate within 3 steps: every episode is cut by the limit.
    assert not ts.terminated.any()
    expected = np.zeros(30, bool)
    expected[limit - 1 :: limit] = True
    np.testing.assert_array_equal(ts.truncated, np.repeat(expected[:, None], NUM_ENVS, 1))
    assert (stats.completed_length[limit - 1 :] == limit).all()
    _check_stats_against_rewards(ts, stats)
    # final_obs: the stepped observation before the reset, obs itself elsewhere.
    np.testing.assert_array_equal(ts.final_obs[~ts.truncated], ts.obs[~ts.truncated])
    assert all(not np.array_equal(f, o) for f, o in zip(ts.final_obs[ts.truncated],
                                                          ts.obs[ts.truncated], strict=True))


def test_gymnax_cartpole_default_time_limit_is_500():
    assert GymnaxEnv("CartPole-v1").params.max_steps_in_episode == 500


def test_gymnax_minatar_obs_is_float32():
    env = GymnaxEnv("Breakout-MinAtar")
    assert env.spec.obs_shape == (10, 10, 4) and env.spec.num_actions == 3
    state, ts = env.reset(jax.random.key(0))
    state, ts = jax.jit(env.step)(state, jnp.int32(1), jax.random.key(1))
    assert ts.obs.dtype == jnp.float32 and ts.obs.shape == (10, 10, 4)


def test_gymnax_unknown_param_is_config_error():
    from rlcore.errors import ConfigError

    with pytest.raises(ConfigError, match="max_step"):
        GymnaxEnv("CartPole-v1", max_step=3)


def _lazy(env, chunk: int):
    env.lazy_reset_chunk = chunk
    return env


@pytest.mark.parametrize("make_env", [
    lambda: GymnaxEnv("CartPole-v1"), lambda: CatchEnv(),
    # Lazy resets, 3 per pass of 8 envs; a 12-step limit ends up to all 8 in one step.
    lambda: _lazy(GymnaxEnv("CartPole-v1", max_steps_in_episode=12), 3),
    lambda: _lazy(CatchEnv(), 1)], ids=["gymnax-cartpole", "catch", "lazy-cartpole", "lazy-catch"])
def test_step_drawn_equals_step(make_env):
    """A reset drawn ahead (``draw_reset``) and ``step_drawn``, and the batch step
    (``envs.base.step_batch``, lazy resets included), give ``vmap(step)``'s result, bit for
    bit, over many episode ends."""
    env = make_env()
    n = 8
    state, _ = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), n))

    @jax.jit
    def three_ways(state, t):
        keys = jax.random.split(jax.random.fold_in(jax.random.key(1), t), n)
        action = jax.random.randint(jax.random.fold_in(jax.random.key(2), t), (n,), 0,
                                    env.spec.num_actions)
        key_step, reset = jax.vmap(env.draw_reset)(keys)
        return (jax.vmap(env.step)(state, action, keys),
                jax.vmap(env.step_drawn)(state, action, key_step, reset),
                step_batch(env, state, action, keys))

    ends, most = 0, 0
    for t in range(60):
        stepped, drawn, batch = three_ways(state, t)
        jax.tree.map(np.testing.assert_array_equal, stepped, drawn)
        jax.tree.map(np.testing.assert_array_equal, stepped, batch)
        state, ts = stepped
        ended = int(np.sum(ts.terminated | ts.truncated))
        ends, most = ends + ended, max(most, ended)
    assert ends > 0 and most > env.lazy_reset_chunk


@pytest.mark.parametrize("env_id,high", [("Pendulum-v1", 2.0), ("MountainCarContinuous-v0", 1.0)])
def test_gymnax_box_spec_and_clipped_actions(env_id, high):
    """A gymnax Box env: its spec carries the bounds, and an action beyond them steps (obs,
    reward, state) exactly as the bound itself (the adapter clips)."""
    env = GymnaxEnv(env_id)
    assert env.spec.action_shape == (1,) and env.spec.action_dtype == "float32"
    assert env.spec.action_low == (-high,) and env.spec.action_high == (high,)
    state, _ = env.reset(jax.random.key(0))
    step = jax.jit(env.step)
    wild = step(state, jnp.array([5.0 * high]), jax.random.key(1))
    tame = step(state, jnp.array([high]), jax.random.key(1))
    jax.tree.map(np.testing.assert_array_equal, wild, tame)
    assert wild[1].reward.shape == ()


def test_gymnax_render_only_imports_wait_until_used(tmp_path):
    """Importing the adapter leaves seaborn (and scipy.stats with it) unimported; pyplot and
    seaborn still work when used, through gymnax's names and ours (a fresh interpreter)."""
    import os
    import subprocess
    import sys

    from tests.helpers import REPO

    png = tmp_path / "plot.png"
    script = f"""
import sys
from envs.gymnax import GymnaxEnv
GymnaxEnv("CartPole-v1")
assert "scipy.stats" not in sys.modules and "seaborn.palettes" not in sys.modules
from gymnax.environments.misc import pong
assert len(pong.sns.color_palette("cubehelix", 3)) == 3 and "seaborn.palettes" in sys.modules
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, ax = plt.subplots()
ax.plot([0, 1], [1, 0])
fig.savefig({str(png)!r})
assert pong.plt.figure is plt.figure is sys.modules["matplotlib.pyplot"].figure
"""
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert proc.returncode == 0, proc.stderr
    assert png.stat().st_size > 1000
