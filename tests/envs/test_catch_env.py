"""Own Catch env: dynamics against hand-worked transitions."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from envs.autoreset import initial_episode_stats
from envs.base import JaxEnvState
from envs.catch import CatchEnv, CatchState

LEFT, STAY, RIGHT = 0, 1, 2


def _board(picture: str) -> np.ndarray:
    """A flattened board from rows of '.' (0) and 'o' (1)."""
    rows = [r.strip() for r in picture.strip().splitlines()]
    return np.array([[c == "o" for c in r] for r in rows], np.float32).reshape(-1)


def _state(ball_row: int, ball_col: int, paddle_col: int, time: int = 0) -> JaxEnvState:
    inner = CatchState(
        ball_row=jnp.int32(ball_row),
        ball_col=jnp.int32(ball_col),
        paddle_col=jnp.int32(paddle_col),
        time=jnp.int32(time),
    )
    return JaxEnvState(inner=inner, stats=initial_episode_stats())


def _run(env, state, actions):
    step = jax.jit(env.step)
    out = []
    for i, a in enumerate(actions):
        state, ts = step(state, jnp.int32(a), jax.random.key(100 + i))
        out.append((state, ts))
    return out


def test_first_step_board():
    env = CatchEnv()
    ((state, ts),) = _run(env, _state(0, 1, 2), [LEFT])
    expected = _board("""
        .....
        .o...
        .....
        .....
        .....
        .....
        .....
        .....
        .....
        .o...
    """)
    np.testing.assert_array_equal(ts.obs, expected)
    assert float(ts.reward) == 0.0 and not ts.terminated and not ts.truncated
    assert int(state.inner.paddle_col) == 1 and int(state.inner.ball_row) == 1


def test_catch_terminates_on_ninth_step_with_plus_one():
    env = CatchEnv()
    out = _run(env, _state(0, 1, 2), [LEFT] + [STAY] * 8)
    for _, ts in out[:8]:
        assert float(ts.reward) == 0.0 and not ts.terminated and not ts.truncated
    _, ts8 = out[7]
    expected = _board("""
        .....
        .....
        .....
        .....
        .....
        .....
        .....
        .....
        .o...
        .o...
    """)
    np.testing.assert_array_equal(ts8.obs, expected)
    state, ts = out[8]
    assert float(ts.reward) == 1.0 and bool(ts.terminated) and not ts.truncated
    # Same-step reset: ball back in the top row, paddle in the middle, fresh running stats.
    board = np.asarray(ts.obs).reshape(10, 5)
    assert board[0].sum() == 1 and board[9, 2] == 1 and board.sum() == 2
    assert int(state.inner.time) == 0 and int(state.inner.ball_row) == 0
    assert float(state.stats.completed_return) == 1.0
    assert int(state.stats.completed_length) == 9
    assert int(state.stats.running_length) == 0


def test_miss_gives_minus_one_and_paddle_clips_at_wall():
    env = CatchEnv()
    out = _run(env, _state(0, 1, 2), [RIGHT] * 9)
    assert [int(s.inner.paddle_col) for s, _ in out[:8]] == [3, 4, 4, 4, 4, 4, 4, 4]
    _, ts = out[8]
    assert float(ts.reward) == -1.0 and bool(ts.terminated)


def test_paddle_clips_at_left_wall():
    env = CatchEnv()
    out = _run(env, _state(0, 0, 2), [LEFT] * 9)
    assert [int(s.inner.paddle_col) for s, _ in out[:8]] == [1, 0, 0, 0, 0, 0, 0, 0]
    assert float(out[8][1].reward) == 1.0


def test_termination_wins_over_time_limit():
    env = CatchEnv(max_steps=9)  # the 9th step both terminates and reaches the limit
    out = _run(env, _state(0, 3, 2), [STAY] * 9)
    _, ts = out[8]
    assert bool(ts.terminated) and not bool(ts.truncated)
    assert float(ts.reward) == -1.0


def test_reset_covers_all_columns():
    env = CatchEnv()
    state, ts = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), 200))
    assert set(np.asarray(state.inner.ball_col).tolist()) == {0, 1, 2, 3, 4}
    assert (np.asarray(state.inner.paddle_col) == 2).all()
    assert ts.obs.shape == (200, 50)
