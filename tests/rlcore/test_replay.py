"""The replay ring and DQN's targets against NumPy references (docs/design.md, "Replay";
docs/algorithms.md, "DQN"): n-step windows that end at terminal and truncated steps and wrap
around the ring, the ring's writes, window draws that stay inside what the ring holds and
are the same on one and four devices, and the TD loss of one-step, n-step and Double DQN."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlcore import replay
from rlcore.algorithms.dqn import DQN, DQNBatch
from rlcore.distributions import Categorical
from rlcore.replay import ReplaySettings, Transitions
from rlcore.types import EnvSpec


def _ring_data(rng: np.random.Generator, rows: int, envs: int, p_end: float) -> Transitions:
    """Random transitions ``[rows, envs]`` with obs ``[.., 2]`` that name their (row, env)."""
    obs = np.stack(np.meshgrid(np.arange(rows), np.arange(envs), indexing="ij"), -1)
    terminal = rng.random((rows, envs)) < p_end
    truncated = (rng.random((rows, envs)) < p_end) & ~terminal
    return Transitions(obs=jnp.asarray(obs, jnp.float32),
                       action=jnp.asarray(rng.integers(0, 3, (rows, envs)), jnp.int32),
                       reward=jnp.asarray(rng.normal(size=(rows, envs)), jnp.float32),
                       terminal=jnp.asarray(terminal, jnp.float32),
                       truncated=jnp.asarray(truncated, jnp.float32),
                       next_obs=jnp.asarray(obs + 1000, jnp.float32))


def _reference_window(d: Transitions, row: int, env: int, n: int, gamma: float):
    """``(returns, discount, bootstrap row, valid)`` of the window at ``row``, by a loop."""
    rows = d.reward.shape[0]
    g, k = 0.0, 0
    for k in range(n):
        r = (row + k) % rows
        g += gamma ** k * float(d.reward[r, env])
        if d.terminal[r, env]:
            return g, 0.0, r, 1.0
        if d.truncated[r, env]:
            return g, gamma ** (k + 1), r, 0.0
    return g, gamma ** n, (row + n - 1) % rows, 1.0


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 5), gamma=st.floats(0.5, 1.0), p_end=st.sampled_from([0.0, 0.2, 0.5]),
       seed=st.integers(0, 10_000))
def test_n_step_windows_equal_the_loop_reference(n, gamma, p_end, seed):
    """Every window's return, discount, bootstrap observation and validity equal a plain
    loop's: summed to the first terminal (no bootstrap) or truncated (not valid) step, and
    across the ring's end."""
    rng = np.random.default_rng(seed)
    d = _ring_data(rng, 12, 3, p_end)
    rows = jnp.asarray(rng.integers(0, 12, (4, 3)), jnp.int32)
    envs = jnp.asarray(np.tile(np.arange(3), (4, 1)), jnp.int32)
    w = replay.n_step(d, rows, envs, n, gamma, 12)
    for i in range(4):
        for j in range(3):
            g, disc, last, valid = _reference_window(d, int(rows[i, j]), j, n, gamma)
            np.testing.assert_allclose(w.returns[i, j], g, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(w.discount[i, j], disc, rtol=1e-5, atol=1e-6)
            assert w.valid[i, j] == valid
            np.testing.assert_array_equal(w.bootstrap_obs[i, j], d.next_obs[last, j])
            np.testing.assert_array_equal(w.obs[i, j], d.obs[int(rows[i, j]), j])


def test_the_ring_writes_rollouts_over_its_oldest_rows():
    """Rollouts of 2 steps into 6 rows: filled grows to 6, the position wraps to 0, and the
    fourth rollout overwrites the first's rows."""
    spec = EnvSpec(obs_shape=(1,), obs_dtype="float32", num_actions=2)
    ring = replay.ring_init(spec, 6, 2)
    for u in range(4):
        t = jnp.full((2, 2), float(u))
        ring = replay.ring_add(ring, Transitions(obs=t[..., None], action=t.astype(jnp.int32),
                                                 reward=t, terminal=t * 0, truncated=t * 0,
                                                 next_obs=t[..., None]))
        assert int(ring.filled) == min(2 * (u + 1), 6) and int(ring.position) == (2 * u + 2) % 6
    np.testing.assert_array_equal(ring.data.data.reward[:, 0], [3, 3, 1, 1, 2, 2])


@pytest.mark.parametrize("filled,position", [(5, 5), (6, 2)])
def test_windows_are_drawn_inside_what_the_ring_holds(filled, position):
    """Windows of 3 steps start where 3 written steps follow in order: before the ring is
    full, rows 0..filled-3; once full, never in the 2 rows before the write position (their
    windows would run into the oldest rows)."""
    spec = EnvSpec(obs_shape=(1,), obs_dtype="float32", num_actions=2)
    ring = replay.ring_init(spec, 6, 4).replace(filled=jnp.int32(filled),
                                                position=jnp.int32(position))
    rows, envs = replay.sample_windows(jax.random.key(0), ring, 3, 50, 8)
    rows = np.asarray(rows)
    assert rows.shape == (50, 8, 4) and envs.shape == (50, 8, 4)
    allowed = ({0, 1, 2} if filled < 6 else {(position + i) % 6 for i in range(4)})
    assert set(rows.ravel().tolist()) == allowed
    np.testing.assert_array_equal(np.asarray(envs)[0, 0], np.arange(4))


def test_window_draws_are_the_same_on_one_and_four_devices():
    """Each env's draws come from its own key: four devices' draws, stacked, are one's."""
    from jax.sharding import PartitionSpec as P

    from runtime.distributed import data_mesh

    if jax.device_count() < 4:
        pytest.skip("needs 4 (fake) devices")
    spec = EnvSpec(obs_shape=(1,), obs_dtype="float32", num_actions=2)
    ring = replay.ring_init(spec, 8, 8).replace(filled=jnp.int32(8), position=jnp.int32(3))
    key = jax.random.key(7)
    one = replay.sample_windows(key, ring, 2, 5, 4)
    mesh = data_mesh(jax.devices()[:4])
    local = replay.ring_init(spec, 8, 2).replace(filled=jnp.int32(8), position=jnp.int32(3))
    four = jax.jit(jax.shard_map(lambda k: replay.sample_windows(k, local, 2, 5, 4, "data"),
                                 mesh=mesh, in_specs=P(), out_specs=P(None, None, "data")))(key)
    np.testing.assert_array_equal(four[0], one[0])
    np.testing.assert_array_equal(np.asarray(four[1]) + np.repeat(2 * np.arange(4), 2), one[1])


def _table_apply(params, obs):
    """A Q-table: ``obs [N, 2]`` names (row, env); ``Q = params[row, env]`` ``[N, A]``."""
    q = params[obs[:, 0].astype(jnp.int32) % params.shape[0], obs[:, 1].astype(jnp.int32)]
    return Categorical(logits=q), jnp.max(q, axis=-1)


@pytest.mark.parametrize("double,n", [(False, 1), (False, 3), (True, 1), (True, 3)])
def test_dqn_loss_equals_numpy_on_a_fixed_batch(double, n):
    """The loss of windows drawn from a ring: ``mean(valid (Q(s, a) - y)^2)`` with ``y = G_n
    + discount Q_target(s', a*)``, ``a*`` the target's argmax or (Double DQN) the online
    net's, against NumPy on the same windows."""
    rng = np.random.default_rng(3)
    d = _ring_data(rng, 12, 3, 0.2)
    d = d.replace(next_obs=d.obs[jnp.asarray((np.arange(12) + 1) % 12)])  # obs[t + 1]
    online = jnp.asarray(rng.normal(size=(12, 3, 3)), jnp.float32)
    target = jnp.asarray(rng.normal(size=(12, 3, 3)), jnp.float32)
    rows = jnp.asarray(rng.integers(0, 12, (5, 3)), jnp.int32)
    envs = jnp.asarray(np.tile(np.arange(3), (5, 1)), jnp.int32)
    w = replay.n_step(d, rows, envs, n, 0.9, 12)
    algo = DQN(gamma=0.9, num_envs=3, num_steps=4, total_env_steps=1200,
               replay=ReplaySettings(capacity=36, warmup=0, ratio=0.25, batch_size=15),
               anneal_lr=False, n_step=n, double=double)
    loss, _ = algo.loss(online, _table_apply, DQNBatch(data=w, target=target), None)
    o, t = np.asarray(online), np.asarray(target)
    expected = []
    for i in range(5):
        for j in range(3):
            g, disc, last, valid = _reference_window(d, int(rows[i, j]), j, n, 0.9)
            s_next = (last + 1) % 12
            a_star = np.argmax(o[s_next, j]) if double else np.argmax(t[s_next, j])
            y = g + disc * t[s_next, j, a_star]
            q = o[int(rows[i, j]), j, int(d.action[int(rows[i, j]), j])]
            expected.append(valid * (q - y) ** 2)
    np.testing.assert_allclose(float(loss), np.mean(expected), rtol=1e-5)
