"""Recall, a jittable memory task of our own: a cue at the first step, recalled at the last.

An episode has ``length`` steps (default 6). The first observation shows a cue, one of
``num_cues`` (default 2) drawn uniformly at reset, one-hot; the next ``length - 2``
observations are blank (a corridor); the last one shows only a query flag. The action taken
on the query observation is the answer: reward +1 if it names the cue, -1 otherwise, and the
episode terminates. Actions on the other steps do nothing and give 0.

A feed-forward policy sees the query without the cue, so the best it can do is guess:
expected return ``(2 - num_cues) / num_cues`` (0 for 2 cues). An agent with memory carries
the cue through the corridor and gets +1.

Observation: ``[num_cues + 1]`` float32: the cue one-hot (first step only), then the query
flag (last step only). Actions: ``num_cues``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from envs.autoreset import AutoResetJaxEnv
from rlcore.types import EnvSpec


@struct.dataclass
class RecallState:
    """State of one Recall env.

    Attributes:
      cue: ``[]`` int32, the cue of this episode.
      time: ``[]`` int32, steps taken in this episode.
    """

    cue: jax.Array
    time: jax.Array


def recall_observe(state: RecallState, length: int, num_cues: int) -> jax.Array:
    """The observation at ``state.time``: the cue one-hot at time 0, the query flag at time
    ``length - 1``, zeros between. Returns ``[num_cues + 1]`` float32."""
    cue = jax.nn.one_hot(state.cue, num_cues, dtype=jnp.float32) * (state.time == 0)
    query = (state.time == length - 1).astype(jnp.float32)[None]
    return jnp.concatenate([cue, query])


class RecallEnv(AutoResetJaxEnv):
    """Recall behind the JaxEnv protocol (pure, jittable; ``vmap`` for a batch).

    Args:
      length: steps per episode, cue and query included (>= 2).
      num_cues: cues (and actions), >= 2.
      max_steps: time limit (the own envs' common argument); a step with ``time >=
        max_steps`` that does not terminate is truncated (never, by default).
    """

    def __init__(self, length: int = 6, num_cues: int = 2, max_steps: int = 100):
        if length < 2 or num_cues < 2 or max_steps < 1:
            raise ValueError(f"Recall needs length >= 2, num_cues >= 2, max_steps >= 1: got "
                             f"{length}, {num_cues}, {max_steps}")
        self.length = length
        self.num_cues = num_cues
        self.max_steps = max_steps
        self.spec = EnvSpec(obs_shape=(num_cues + 1,), obs_dtype="float32", num_actions=num_cues)

    def _reset_inner(self, key: jax.Array) -> tuple[jax.Array, RecallState]:
        inner = RecallState(cue=jax.random.randint(key, (), 0, self.num_cues, dtype=jnp.int32),
                            time=jnp.zeros((), jnp.int32))
        return recall_observe(inner, self.length, self.num_cues), inner

    def _step_inner(
        self, inner: RecallState, action: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, Any, jax.Array, jax.Array, jax.Array]:
        del key  # deterministic after the reset
        terminated = inner.time == self.length - 1
        correct = jnp.asarray(action, jnp.int32) == inner.cue
        reward = jnp.where(terminated, jnp.where(correct, 1.0, -1.0), 0.0).astype(jnp.float32)
        inner = inner.replace(time=(inner.time + 1).astype(jnp.int32))
        truncated = (inner.time >= self.max_steps) & ~terminated
        obs = recall_observe(inner, self.length, self.num_cues)
        return obs, inner, reward, terminated, truncated
