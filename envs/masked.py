"""Partially observed envs: a jittable env whose observations keep only some entries.

``MaskedCartPole`` is gymnax's CartPole-v1 without the velocities: of ``[x, x_dot, theta,
theta_dot]`` the agent sees ``[x, theta]``. One observation no longer tells where the pole
is going; a policy has to infer the velocities from the observations before, which an agent
with memory can and a feed-forward one cannot.
"""

from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp

from envs.base import JaxEnv, JaxEnvState, TimeStep
from rlcore.types import EnvSpec


class MaskedObsEnv:
    """A JaxEnv whose observations ``[D]`` keep only the entries ``keep`` (``[len(keep)]``);
    states, rewards, flags and episode statistics are the wrapped env's.

    Args:
      env: the wrapped JaxEnv (flat observations).
      keep: indices of the observation entries to keep.
    """

    def __init__(self, env: JaxEnv, keep: Sequence[int]):
        self.env = env
        self.keep = jnp.asarray(tuple(keep), jnp.int32)
        spec = env.spec
        self.spec = EnvSpec(obs_shape=(len(keep),), obs_dtype=spec.obs_dtype,
                            num_actions=spec.num_actions)

    def _mask(self, ts: TimeStep) -> TimeStep:
        return ts.replace(obs=jnp.take(ts.obs, self.keep, axis=-1),
                          final_obs=jnp.take(ts.final_obs, self.keep, axis=-1))

    def reset(self, key: jax.Array) -> tuple[JaxEnvState, TimeStep]:
        state, ts = self.env.reset(key)
        return state, self._mask(ts)

    def step(self, state: JaxEnvState, action: jax.Array, key: jax.Array):
        state, ts = self.env.step(state, action, key)
        return state, self._mask(ts)

    def draw_reset(self, key: jax.Array) -> tuple[jax.Array, Any]:
        return self.env.draw_reset(key)

    def step_drawn(self, state: JaxEnvState, action: jax.Array, key_step: jax.Array,
                   reset: Any):
        state, ts = self.env.step_drawn(state, action, key_step, reset)
        return state, self._mask(ts)

    def step_batch_drawn(self, state: JaxEnvState, action: jax.Array, key_step: jax.Array,
                         reset: Any):
        state, ts = self.env.step_batch_drawn(state, action, key_step, reset)
        return state, self._mask(ts)


def masked_cartpole(max_steps: int = 0, **overrides: Any) -> MaskedObsEnv:
    """gymnax CartPole-v1 seeing ``[x, theta]`` only.

    Args:
      max_steps: time limit (the own envs' common argument); 0 keeps CartPole's 500.
      **overrides: gymnax ``EnvParams`` fields.
    """
    from envs.gymnax import GymnaxEnv

    if max_steps:
        overrides["max_steps_in_episode"] = max_steps
    return MaskedObsEnv(GymnaxEnv("CartPole-v1", **overrides), keep=(0, 2))
