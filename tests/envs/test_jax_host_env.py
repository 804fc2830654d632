"""JaxHostEnv (a jittable env behind the HostEnv contract): shapes and dtypes, same-step
auto-reset and statistics, truncation, global-index seeding, equality with the JaxEnv."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from envs import registry
from envs.jax_host import JaxHostEnv
from rlcore.seeding import HOST_ENV_STREAM, host_env_root


@pytest.fixture
def make_pool():
    pools = []

    def make(env_id, num_envs, **kwargs):
        overrides = kwargs.pop("overrides", {})
        kwargs["root"] = host_env_root(np.int32(kwargs.pop("seed")))
        pools.append(JaxHostEnv(registry.make_jax_env(env_id, **overrides), num_envs, **kwargs))
        return pools[-1]

    yield make
    for pool in pools:
        pool.close()


def _cartpole_is_reset_obs(obs: np.ndarray) -> bool:
    """gymnax CartPole starts every state variable uniformly in [-0.05, 0.05]."""
    return bool(np.all(np.abs(obs) <= 0.05))


def test_cartpole_shapes_and_dtypes(make_pool):
    env = make_pool("CartPole-v1", 4, seed=0)
    assert env.spec.obs_shape == (4,) and env.spec.obs_dtype == "float32"
    assert env.spec.num_actions == 2 and env.num_envs == 4
    ts = env.reset()
    assert ts.obs.shape == (4, 4) and ts.obs.dtype == np.float32
    assert isinstance(ts.obs, np.ndarray) and isinstance(ts.reward, np.ndarray)
    assert ts.reward.dtype == np.float32 and not ts.reward.any()
    assert ts.terminated.dtype == bool and ts.truncated.dtype == bool
    assert not ts.terminated.any() and not ts.truncated.any()
    ts = env.step(np.zeros(4, np.int64))
    assert ts.obs.shape == (4, 4) and ts.reward.shape == (4,) and ts.reward.dtype == np.float32
    assert ts.terminated.shape == (4,) and ts.terminated.dtype == bool
    assert ts.truncated.shape == (4,) and ts.truncated.dtype == bool
    assert isinstance(env.stats.running_length, np.ndarray)
    assert env.stats.running_length.tolist() == [1, 1, 1, 1]
    assert env.stats.running_return.dtype == np.float32
    assert env.stats.running_length.dtype == np.int32
    with pytest.raises(ValueError, match="actions"):
        env.step(np.zeros(3, np.int32))
    with pytest.raises(ValueError, match="actions"):
        env.step(np.full(4, 2))


def test_minatar_obs_in_env_dtype(make_pool):
    env = make_pool("Breakout-MinAtar", 2, seed=0)
    assert env.spec.obs_shape == (10, 10, 4)
    ts = env.reset()
    assert ts.obs.shape == (2, 10, 10, 4) and ts.obs.dtype == np.dtype(env.spec.obs_dtype)
    ts = env.step(np.array([0, 2]))
    assert ts.obs.shape == (2, 10, 10, 4) and ts.reward.dtype == np.float32


def test_step_before_reset_and_after_close(make_pool):
    env = make_pool("Catch-own", 2, seed=0)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(2, np.int32))
    env.reset()
    env.close()
    with pytest.raises(RuntimeError, match="close"):
        env.step(np.zeros(2, np.int32))


@pytest.mark.parametrize("limit", [None, 30])
def test_cartpole_same_step_auto_reset_and_stats(make_pool, limit):
    overrides = {} if limit is None else {"max_steps_in_episode": limit}
    env = make_pool("CartPole-v1", 4, seed=1, overrides=overrides)
    env.reset()
    rng = np.random.default_rng(0)
    length, ret, episodes, truncations = np.zeros(4, int), np.zeros(4), 0, 0
    for _ in range(200):
        ts = env.step(rng.integers(0, 2, 4))
        assert not (ts.terminated & ts.truncated).any()
        length, ret = length + 1, ret + ts.reward
        done = ts.terminated | ts.truncated
        truncations += int(ts.truncated.sum())
        for b in np.flatnonzero(done):
            episodes += 1
            # Lengths and returns counted here match the adapter's statistics: no extra
            # "reset step" between episodes.
            assert env.stats.completed_length[b] == length[b]
            assert env.stats.completed_return[b] == pytest.approx(ret[b])
            assert _cartpole_is_reset_obs(ts.obs[b]), "obs must be the next episode's first"
        if limit is not None:
            assert (length[ts.truncated] == limit).all()
            assert (length <= limit).all()
        length[done], ret[done] = 0, 0.0
        np.testing.assert_array_equal(env.stats.running_length, length)
        np.testing.assert_allclose(env.stats.running_return, ret)
        assert (ts.reward == 1.0).all()  # every CartPole step rewards 1
    assert episodes >= 10
    assert (truncations > 0) == (limit is not None)


def test_cartpole_truncation_at_time_limit(make_pool):
    env = make_pool("CartPole-v1", 4, seed=0, overrides={"max_steps_in_episode": 10})
    env.reset()
    for t in range(1, 31):
        ts = env.step(np.full(4, t % 2))  # alternating actions keep the pole up
        assert not ts.terminated.any()
        assert ts.truncated.all() == (t % 10 == 0) and ts.truncated.any() == (t % 10 == 0)
        if t % 10 == 0:
            assert (env.stats.completed_length == 10).all()
            assert (env.stats.completed_return == 10.0).all()
            assert _cartpole_is_reset_obs(ts.obs)
    assert (env.stats.running_length == 0).all()


def test_catch_truncation_and_termination(make_pool):
    env = make_pool("own:Catch", 3, seed=0, overrides={"max_steps": 5})
    env.reset()
    for t in range(1, 11):
        ts = env.step(np.ones(3, np.int32))
        assert ts.truncated.all() == (t % 5 == 0) and not ts.terminated.any()
    env = make_pool("Catch-own", 3, seed=0)
    env.reset()
    for t in range(1, 19):
        ts = env.step(np.ones(3, np.int32))
        assert ts.terminated.all() == (t % 9 == 0) and not ts.truncated.any()
        assert ((ts.reward != 0) == (t % 9 == 0)).all()
    assert (env.stats.completed_length == 9).all()


def _rollout(env: JaxHostEnv, actions: np.ndarray) -> list:
    """``[reset TimeStep, then one per row of actions [T, n]]`` with the stats after each."""
    rows = [(env.reset(), env.stats)]
    rows += [(env.step(a), env.stats) for a in actions]
    return rows


def _assert_rows_equal(rows_a, rows_b, sl_a=slice(None), sl_b=slice(None)):
    for (ts_a, st_a), (ts_b, st_b) in zip(rows_a, rows_b, strict=True):
        for leaf_a, leaf_b in zip(jax.tree.leaves((ts_a, st_a)), jax.tree.leaves((ts_b, st_b)),
                                  strict=True):
            np.testing.assert_array_equal(leaf_a[sl_a], leaf_b[sl_b])


@pytest.mark.parametrize("env_id, overrides", [("CartPole-v1", {"max_steps_in_episode": 8}),
                                               ("Catch-own", {})], ids=["cartpole", "catch"])
def test_seeds_derive_from_global_env_index(make_pool, env_id, overrides):
    """Env g behaves the same in any pool of the same seed; other envs / seeds differ.

    30 steps span several auto-resets (CartPole truncates every 8 steps at most, Catch
    ends every 9), so both the reset keys and the per-step counter keys are compared.
    """
    actions = np.random.default_rng(3).integers(0, 2, (30, 4))
    whole = _rollout(make_pool(env_id, 4, seed=0, first_env_index=0, overrides=overrides),
                     actions)
    part = _rollout(make_pool(env_id, 2, seed=0, first_env_index=2, overrides=overrides),
                    actions[:, 2:])
    _assert_rows_equal(whole, part, slice(2, 4), slice(None))
    # Envs 0, 1 (same actions as 2, 3) and another seed's envs 2, 3 see other episodes.
    low = _rollout(make_pool(env_id, 2, seed=0, first_env_index=0, overrides=overrides),
                   actions[:, 2:])
    other = _rollout(make_pool(env_id, 2, seed=1, first_env_index=2, overrides=overrides),
                     actions[:, 2:])
    obs = lambda rows: np.stack([ts.obs for ts, _ in rows])
    assert not np.array_equal(obs(part), obs(low))
    assert not np.array_equal(obs(part), obs(other))
    # No two envs of a pool start alike, and every auto-reset draws a fresh episode.
    first = obs(whole)[0]
    assert len({row.tobytes() for row in first}) == 4
    resets = [ts.obs[b] for ts, _ in whole[1:] for b in np.flatnonzero(ts.terminated
                                                                        | ts.truncated)]
    if env_id == "CartPole-v1":  # continuous starts: every episode's first obs differs
        assert len({r.tobytes() for r in [*first, *resets]}) == 4 + len(resets)


def _reference(env_id, overrides, seed, env_ids, actions):
    """The documented key rule applied to the JaxEnv stepped directly, env by env.

    Call ``c`` (0: reset, then one per step) of global env ``g`` uses key
    ``fold_in(fold_in(fold_in(key(seed), HOST_ENV_STREAM), g), c)``.

    Returns:
      obs ``[T + 1, n, ...]``, reward / terminated / truncated / completed_length ``[T, n]``.
    """
    env = registry.make_jax_env(env_id, **overrides)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    out = {k: [] for k in ("obs", "reward", "terminated", "truncated", "completed_length")}
    per_env = []
    for i, g in enumerate(env_ids):
        root = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), HOST_ENV_STREAM), g)
        state, ts = reset(jax.random.fold_in(root, 0))
        rows = [(ts, state.stats)]
        for c, a in enumerate(actions[:, i], start=1):
            state, ts = step(state, np.asarray(a, env.spec.action_dtype),
                             jax.random.fold_in(root, c))
            rows.append((ts, state.stats))
        per_env.append(jax.device_get(rows))
    for t in range(len(actions) + 1):
        out["obs"].append(np.stack([rows[t][0].obs for rows in per_env]))
        if t:
            for k in ("reward", "terminated", "truncated"):
                out[k].append(np.stack([getattr(rows[t][0], k) for rows in per_env]))
            out["completed_length"].append(
                np.stack([rows[t][1].completed_length for rows in per_env]))
    return {k: np.stack(v) for k, v in out.items()}


# The host adapter's program and the reference's round alike under XLA's defaults only.
@pytest.mark.optimized
@pytest.mark.parametrize("env_id, overrides, num_actions",
                         [("gymnax:CartPole-v1", {"max_steps_in_episode": 12}, 2),
                          ("own:Catch", {}, 3),
                          ("gymnax:Pendulum-v1", {"max_steps_in_episode": 12}, None)],
                         ids=["cartpole", "catch", "pendulum"])
def test_trajectory_equals_jax_env_with_documented_keys(make_pool, env_id, overrides,
                                                        num_actions):
    """``num_actions`` None: box actions ``[n, 1]`` in [-3, 3], beyond Pendulum's bounds of
    +-2 (the JaxEnv clips them)."""
    seed, first, n, steps = 5, 3, 3, 25
    rng = np.random.default_rng(1)
    actions = (rng.integers(0, num_actions, (steps, n)) if num_actions else
               rng.uniform(-3.0, 3.0, (steps, n, 1)).astype(np.float32))
    env = make_pool(env_id, n, seed=seed, first_env_index=first, overrides=overrides)
    rows = _rollout(env, actions)
    ref = _reference(env_id, overrides, seed, range(first, first + n), actions)
    assert ref["terminated"].any() or ref["truncated"].any(), "want auto-resets in the test"
    np.testing.assert_allclose(np.stack([ts.obs for ts, _ in rows]), ref["obs"], atol=1e-6)
    for k in ("reward", "terminated", "truncated"):
        np.testing.assert_array_equal(np.stack([getattr(ts, k) for ts, _ in rows[1:]]),
                                      ref[k], err_msg=k)
    np.testing.assert_array_equal(np.stack([st.completed_length for _, st in rows[1:]]),
                                  ref["completed_length"])


def test_reset_restarts_running_stats_and_keeps_completed(make_pool):
    env = make_pool("Catch-own", 2, seed=0)
    env.reset()
    for _ in range(12):
        env.step(np.ones(2, np.int32))
    completed = env.stats.completed_length.copy()
    assert (completed == 9).all() and (env.stats.running_length == 3).all()
    env.reset()
    assert (env.stats.running_length == 0).all() and (env.stats.running_return == 0).all()
    np.testing.assert_array_equal(env.stats.completed_length, completed)
    env.step(np.ones(2, np.int32))
    np.testing.assert_array_equal(env.stats.completed_length, completed)
    assert (env.stats.running_length == 1).all()
