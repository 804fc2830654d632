"""Catch, written from scratch as a jittable env (bsuite's Catch, Osband et al. 2020).

A ``rows x cols`` board. A ball starts in the top row at a uniformly random column and falls
one row per step; a paddle in the bottom row starts in the middle column and moves left, stays
or moves right (actions 0, 1, 2), clipped at the walls. When the ball reaches the bottom row the
episode terminates with reward +1 if the paddle is under it, else -1; every other step gives 0.
With the default 10 rows, every episode terminates on its 9th step. A time limit
``max_steps`` (default 100, never reached by default) truncates longer episodes, for testing.

Observation: the board flattened row-major, ``[rows * cols]`` float32, 1 at the ball and at the
paddle, 0 elsewhere.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from envs.autoreset import AutoResetJaxEnv
from rlcore.types import EnvSpec

NUM_ACTIONS = 3  # 0: left, 1: stay, 2: right


@struct.dataclass
class CatchState:
    """State of one Catch env.

    Attributes:
      ball_row: ``[]`` int32, 0 at the top.
      ball_col: ``[]`` int32.
      paddle_col: ``[]`` int32 (the paddle is always in the bottom row).
      time: ``[]`` int32, steps taken in this episode.
    """

    ball_row: jax.Array
    ball_col: jax.Array
    paddle_col: jax.Array
    time: jax.Array


def catch_reset(key: jax.Array, cols: int) -> CatchState:
    """A new episode: ball in the top row at a random column, paddle in the middle.

    Args:
      key: PRNG key.
      cols: board width.

    Returns:
      CatchState with ``[]`` int32 leaves.
    """
    return CatchState(
        ball_row=jnp.zeros((), jnp.int32),
        ball_col=jax.random.randint(key, (), 0, cols, dtype=jnp.int32),
        paddle_col=jnp.asarray(cols // 2, jnp.int32),
        time=jnp.zeros((), jnp.int32),
    )


def catch_step(
    state: CatchState, action: jax.Array, rows: int, cols: int
) -> tuple[CatchState, jax.Array, jax.Array]:
    """Moves the paddle by ``action - 1`` and the ball one row down (no reset).

    Args:
      state: CatchState.
      action: ``[]`` int in ``{0, 1, 2}``.
      rows: board height.
      cols: board width.

    Returns:
      ``(state, reward [] float32, terminated [] bool)``; terminated when the ball reaches
      the bottom row, reward +1 / -1 there (caught / missed), 0 before.
    """
    paddle_col = jnp.clip(state.paddle_col + jnp.asarray(action, jnp.int32) - 1, 0, cols - 1)
    ball_row = state.ball_row + 1
    terminated = ball_row >= rows - 1
    caught = state.ball_col == paddle_col
    reward = jnp.where(terminated, jnp.where(caught, 1.0, -1.0), 0.0).astype(jnp.float32)
    new_state = CatchState(
        ball_row=ball_row.astype(jnp.int32),
        ball_col=state.ball_col,
        paddle_col=paddle_col.astype(jnp.int32),
        time=(state.time + 1).astype(jnp.int32),
    )
    return new_state, reward, terminated


def catch_observe(state: CatchState, rows: int, cols: int) -> jax.Array:
    """The board with 1 at the ball and the paddle, flattened row-major.

    Returns:
      ``[rows * cols]`` float32.
    """
    board = jnp.zeros((rows, cols), jnp.float32)
    board = board.at[state.ball_row, state.ball_col].set(1.0)
    board = board.at[rows - 1, state.paddle_col].set(1.0)
    return board.reshape(rows * cols)


class CatchEnv(AutoResetJaxEnv):
    """Catch behind the JaxEnv protocol (pure, jittable; ``vmap`` for a batch).

    Args:
      rows: board height (>= 2).
      cols: board width (>= 1).
      max_steps: time limit; a step with ``time >= max_steps`` that does not terminate is
        truncated.
    """

    def __init__(self, rows: int = 10, cols: int = 5, max_steps: int = 100):
        if rows < 2 or cols < 1 or max_steps < 1:
            raise ValueError(
                f"Catch needs rows >= 2, cols >= 1, max_steps >= 1: got {rows}, {cols}, {max_steps}"
            )
        self.rows = rows
        self.cols = cols
        self.max_steps = max_steps
        self.spec = EnvSpec(obs_shape=(rows * cols,), obs_dtype="float32", num_actions=NUM_ACTIONS)

    def _reset_inner(self, key: jax.Array) -> tuple[jax.Array, CatchState]:
        inner = catch_reset(key, self.cols)
        return catch_observe(inner, self.rows, self.cols), inner

    def _step_inner(
        self, inner: CatchState, action: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, Any, jax.Array, jax.Array, jax.Array]:
        del key  # Catch is deterministic after the reset
        inner, reward, terminated = catch_step(inner, action, self.rows, self.cols)
        truncated = (inner.time >= self.max_steps) & ~terminated
        return catch_observe(inner, self.rows, self.cols), inner, reward, terminated, truncated
