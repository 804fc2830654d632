"""A gridworld written to the step-env protocol (docs/extending.md, "Your own env").

An ``size x size`` grid. The agent starts in the top-left cell; the goal is drawn uniformly
from the other cells at each reset. Actions 0..3 move up, right, down, left (a move into a
wall stays). Reaching the goal ends the episode (terminated) with reward 1; every other
step costs ``STEP_COST``; an episode is cut at ``max_steps_in_episode`` (truncated). The
observation is two planes, agent and goal, ``[size, size, 2]`` float32 ones and zeros.

On the default 5x5 grid the goal is 4.17 moves away on average, so a policy that walks
straight there scores 1 - 0.02 x 3.17 = 0.937 on average; every extra move costs 0.02.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from rlcore.types import EnvSpec

STEP_COST = 0.02  # what a move that does not reach the goal costs
CELL_PIXELS = 16  # a video frame's cell side (obs_frame)
MOVES = jnp.array([[-1, 0], [0, 1], [1, 0], [0, -1]], jnp.int32)  # up, right, down, left


@struct.dataclass
class GridState:
    """``agent`` and ``goal``: ``[2]`` int32 (row, column); ``time``: ``[]`` int32."""

    agent: jax.Array
    goal: jax.Array
    time: jax.Array


class GridWorld:
    """The gridworld: ``spec``, ``reset(key)`` and ``step(state, action, key)``."""

    def __init__(self, size: int = 5, max_steps_in_episode: int = 30):
        self.size = size
        self.max_steps = max_steps_in_episode
        self.spec = EnvSpec(obs_shape=(size, size, 2), obs_dtype="float32", num_actions=4)

    def observe(self, state: GridState) -> jax.Array:
        """``[size, size, 2]``: the agent's cell in plane 0, the goal's in plane 1."""
        cells = jnp.zeros((self.size, self.size, 2), jnp.float32)
        cells = cells.at[state.agent[0], state.agent[1], 0].set(1.0)
        return cells.at[state.goal[0], state.goal[1], 1].set(1.0)

    def reset(self, key: jax.Array) -> tuple[jax.Array, GridState]:
        cell = jax.random.randint(key, (), 1, self.size * self.size)  # never the start
        goal = jnp.stack([cell // self.size, cell % self.size]).astype(jnp.int32)
        state = GridState(agent=jnp.zeros(2, jnp.int32), goal=goal, time=jnp.int32(0))
        return self.observe(state), state

    def step(self, state: GridState, action: jax.Array, key: jax.Array):
        del key  # the moves are deterministic
        agent = jnp.clip(state.agent + MOVES[action], 0, self.size - 1)
        state = GridState(agent=agent, goal=state.goal, time=state.time + 1)
        reached = jnp.all(agent == state.goal)
        truncated = state.time >= self.max_steps
        reward = jnp.where(reached, 1.0, -STEP_COST)
        return self.observe(state), state, reward, reached, truncated

    def obs_frame(self, obs) -> np.ndarray:
        """The video frame of one observation (docs/extending.md, "Your own env"): the grid,
        ``CELL_PIXELS`` a cell, the agent blue and the goal green (cyan where they meet),
        uint8 ``[size * CELL_PIXELS, size * CELL_PIXELS, 3]``."""
        planes = np.asarray(obs) > 0.5
        rgb = np.zeros((self.size, self.size, 3), np.uint8)
        rgb[..., 2] = 255 * planes[..., 0]
        rgb[..., 1] = 255 * planes[..., 1]
        return np.repeat(np.repeat(rgb, CELL_PIXELS, axis=0), CELL_PIXELS, axis=1)
