"""EnvPool HostEnv adapter: shapes, same-step auto-reset, truncation, global-index seeding."""

from __future__ import annotations

import types

import numpy as np
import pytest

import envs.envpool as envpool_adapter
from envs.envpool import EnvPoolEnv

pytestmark = pytest.mark.smoke  # the newest stack's subset (make test-newest)


@pytest.fixture
def make_pool():
    pools = []

    def make(*args, **kwargs):
        pools.append(EnvPoolEnv(*args, **kwargs))
        return pools[-1]

    yield make
    for pool in pools:
        pool.close()


def test_cartpole_shapes_and_dtypes(make_pool):
    env = make_pool("CartPole-v1", 4, seed=0)
    assert env.spec.obs_shape == (4,) and env.spec.obs_dtype == "float32"
    assert env.spec.num_actions == 2 and env.max_episode_steps == 500
    ts = env.reset()
    assert ts.obs.shape == (4, 4) and ts.obs.dtype == np.float32
    assert ts.reward.dtype == np.float32 and not ts.reward.any()
    assert ts.terminated.dtype == bool and ts.truncated.dtype == bool
    ts = env.step(np.zeros(4, np.int64))
    assert ts.obs.shape == (4, 4) and ts.reward.shape == (4,) and ts.reward.dtype == np.float32
    assert ts.terminated.shape == (4,) and ts.terminated.dtype == bool
    assert env.stats.running_length.tolist() == [1, 1, 1, 1]
    with pytest.raises(ValueError, match="actions"):
        env.step(np.zeros(3, np.int32))


def test_cartpole_same_step_auto_reset_and_stats(make_pool):
    env = make_pool("CartPole-v1", 4, seed=1)
    env.reset()
    rng = np.random.default_rng(0)
    length, ret, episodes = np.zeros(4, int), np.zeros(4), 0
    for _ in range(200):
        ts = env.step(rng.integers(0, 2, 4))
        assert not (ts.terminated & ts.truncated).any()
        length, ret = length + 1, ret + ts.reward
        done = ts.terminated | ts.truncated
        for b in np.flatnonzero(done):
            episodes += 1
            # Episode length and return counted here match the adapter's statistics, so
            # there was no extra "reset step" that EnvPool's own auto-reset would insert.
            assert env.stats.completed_length[b] == length[b]
            assert env.stats.completed_return[b] == pytest.approx(ret[b])
            assert np.all(np.abs(ts.obs[b]) <= 0.05), "obs must be the next episode's first"
        length[done], ret[done] = 0, 0.0
        np.testing.assert_array_equal(env.stats.running_length, length)
        # Every CartPole step rewards 1, including the first after a reset.
        assert (ts.reward == 1.0).all()
    assert episodes >= 10


def test_cartpole_truncation_at_max_episode_steps(make_pool):
    env = make_pool("CartPole-v1", 4, seed=0, max_episode_steps=10)
    assert env.max_episode_steps == 10
    prev = env.reset().obs
    for t in range(1, 31):
        ts = env.step(np.full(4, t % 2))  # alternating actions keep the pole up
        assert not ts.terminated.any()
        assert ts.truncated.all() == (t % 10 == 0) and ts.truncated.any() == (t % 10 == 0)
        if t % 10 == 0:
            assert (env.stats.completed_length == 10).all()
            assert (env.stats.completed_return == 10.0).all()
            assert np.all(np.abs(ts.obs) <= 0.05)
            # The final observation is the episode's 10th, one physics step from the 9th.
            assert not np.array_equal(ts.final_obs, ts.obs)
            assert np.all(np.abs(ts.final_obs - prev) < 0.5)
        else:
            np.testing.assert_array_equal(ts.final_obs, ts.obs)
        prev = ts.obs


def test_seeds_derive_from_global_env_index(make_pool):
    whole = make_pool("CartPole-v1", 4, seed=0, first_env_index=0)
    part = make_pool("CartPole-v1", 2, seed=0, first_env_index=2)
    other = make_pool("CartPole-v1", 2, seed=0, first_env_index=0)
    obs_whole, obs_part = whole.reset().obs, part.reset().obs
    np.testing.assert_array_equal(obs_whole[2:], obs_part)
    assert not np.allclose(obs_part, other.reset().obs)  # different global index, other seed
    actions = np.array([0, 1, 1, 0])
    for _ in range(5):
        np.testing.assert_array_equal(whole.step(actions).obs[2:], part.step(actions[2:]).obs)


def test_atari_breakout(make_pool):
    env = make_pool("Breakout-v5", 2, seed=0)
    assert env.spec.obs_shape == (4, 84, 84) and env.spec.obs_dtype == "uint8"
    assert env.spec.num_actions == 18 and env.max_episode_steps == 27000
    ts = env.reset()
    assert ts.obs.shape == (2, 4, 84, 84) and ts.obs.dtype == np.uint8
    for t in range(20):
        ts = env.step(np.array([t % 18, 1]))
    assert ts.obs.shape == (2, 4, 84, 84) and ts.obs.dtype == np.uint8
    assert ts.reward.dtype == np.float32 and env.stats.running_length.tolist() == [20, 20]


class _FakePool:
    """Scripted stand-in for an EnvPool: 3 envs, answers in the order env 2, 0, 1.

    Step 1 terminates env 0 with a clipped reward 1 and an unclipped score 5.
    """

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.spec = types.SimpleNamespace(config=types.SimpleNamespace(max_episode_steps=100))
        self.observation_space = types.SimpleNamespace(shape=(2,), dtype=np.dtype(np.uint8))
        self.action_space = types.SimpleNamespace(n=3)
        self.reset_calls = []

    def reset(self, env_id=None):
        ids = np.array([2, 0, 1] if env_id is None else env_id, np.int32)
        self.reset_calls.append(ids.tolist())
        return np.full((len(ids), 2), 99, np.uint8), {"env_id": ids}

    def step(self, actions):
        ids = np.array([2, 0, 1], np.int32)
        obs = np.stack([np.full(2, 10 + i, np.uint8) for i in ids])
        obs.setflags(write=False)
        terminated = ids == 0
        reward = np.where(ids == 0, 1.0, 0.0).astype(np.float32)
        info = {"env_id": ids, "elapsed_step": np.ones(3, np.int32), "reward": 5 * reward}
        return obs, reward, terminated, np.zeros(3, bool), info

    def close(self):
        pass


def test_reorders_by_env_id_and_counts_unclipped_score(monkeypatch):
    fake = types.SimpleNamespace(make=lambda env_id, **kwargs: _FakePool(**kwargs))
    monkeypatch.setattr(envpool_adapter, "_envpool", fake)
    env = EnvPoolEnv("Fake-v0", 3, seed=7, first_env_index=5, num_threads=1)
    pool = env._env
    assert pool.kwargs["seed"] == 12 and pool.kwargs["batch_size"] == 3
    assert env.reset().obs.shape == (3, 2)
    ts = env.step(np.zeros(3, np.int32))
    np.testing.assert_array_equal(ts.terminated, [True, False, False])
    np.testing.assert_array_equal(ts.reward, [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(ts.obs[:, 0], [99, 11, 12])  # env 0 reset, rest in id order
    assert pool.reset_calls[-1] == [0]
    assert env.stats.completed_return.tolist() == [5.0, 0.0, 0.0]
    assert env.stats.completed_length.tolist() == [1, 0, 0]


def test_mujoco_box_actions_are_clipped_to_the_bounds(make_pool):
    """HalfCheetah-v4: a box spec (6 actions in [-1, 1]), float32 observations, and actions
    beyond the bounds step exactly as the clipped ones (two pools of one seed)."""
    wild, tame = make_pool("HalfCheetah-v4", 2, seed=3), make_pool("HalfCheetah-v4", 2, seed=3)
    assert wild.spec.action_shape == (6,) and wild.spec.action_dtype == "float32"
    assert wild.spec.action_low == (-1.0,) * 6 and wild.spec.action_high == (1.0,) * 6
    assert wild.spec.obs_shape == (17,) and wild.spec.obs_dtype == "float32"
    obs_w, obs_t = wild.reset().obs, tame.reset().obs
    assert obs_w.dtype == np.float32
    np.testing.assert_array_equal(obs_w, obs_t)
    rng = np.random.default_rng(0)
    for _ in range(5):
        a = rng.normal(scale=3.0, size=(2, 6)).astype(np.float32)
        assert np.abs(a).max() > 1.0
        ts_w, ts_t = wild.step(a), tame.step(np.clip(a, -1.0, 1.0))
        np.testing.assert_array_equal(ts_w.obs, ts_t.obs)
        np.testing.assert_array_equal(ts_w.reward, ts_t.reward)
    with pytest.raises(ValueError, match="expected shape"):
        wild.step(np.zeros(2, np.float32))


def _random_game(env, rng) -> list[int]:
    """Plays env 0 of ``env`` at random until its first game ends; the statistics' running
    length right after each termination (0: the game was reset)."""
    env.reset()
    lengths = []
    for _ in range(5000):
        ts = env.step(rng.integers(0, env.spec.num_actions, size=1))
        if ts.terminated[0]:
            lengths.append(int(env.stats.running_length[0]))
        if env.stats.completed_length[0] > 0:
            return lengths
    raise AssertionError("no game ended in 5000 random steps")


def test_episodic_life_ends_the_learners_episode_at_a_lost_life_and_the_game_goes_on(make_pool):
    """Breakout with ``episodic_life`` (PQN's Atari setting), random play: each of the 5
    lives lost is a termination, but only the last resets the game (the statistics'
    episode, the whole game, runs on across the others); without it only the game's end
    is one."""
    options = dict(repeat_action_probability=0.0, full_action_space=False)
    rng = np.random.default_rng(0)
    lives = _random_game(make_pool("Breakout-v5", 1, seed=0, episodic_life=True, **options), rng)
    assert len(lives) == 5 and all(n > 0 for n in lives[:4]) and lives[4] == 0, lives
    assert lives == sorted(lives[:4]) + [0]  # one game's steps, counting on
    plain = _random_game(make_pool("Breakout-v5", 1, seed=0, **options), rng)
    assert plain == [0], plain
