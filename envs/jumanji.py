"""JaxEnv adapter over Jumanji (``jumanji:Snake-v1``, ``jumanji:Game2048-v1``, ...): the
``jumanji`` extra, ``pip install -e '.[jumanji]'``.

Jumanji's ``env.step(state, action)`` does not reset (the env keeps its key in its state);
the adapter keeps ``(state, timestep)`` as the inner state, and the same-step auto-reset and
episode statistics are ``envs.autoreset.AutoResetJaxEnv``'s. Jumanji marks a time-limit cut
with a discount of 1 on the last step::

    terminated = its last step with discount 0
    truncated  = its last step with discount 1

Observations: Jumanji's are named tuples (Snake: a 12x12x5 grid, the step count and an
action mask); the adapter concatenates every field, flattened and cast to float32, in the
tuple's order, into one vector ``[N]`` (Snake: 720 + 1 + 4 = 725). The action masks are in
the observation, not applied to the policy. Only the envs with one discrete action are
listed (``JUMANJI_IDS``: the others take several at once); Sokoban is left out (its levels
download at construction).

Video: ``obs_frame`` draws the observation's first field where it is a board (Snake's grid
planes, 2048's tiles, the maze). Jumanji is imported on first use (about 4.7 s).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from envs import vma
from envs.autoreset import AutoResetJaxEnv
from envs.kwargs import refused_call
from rlcore.errors import ConfigError
from rlcore.types import EnvSpec

# Jumanji 1.1.2's envs with one discrete action (``jumanji.registered_environments()``
# whose ``action_spec`` is a scalar ``DiscreteArray``), written out so that checking an id
# never imports Jumanji; tests/envs/test_suite_envs.py compares.
JUMANJI_IDS = ("CVRP-v1", "Game2048-v1", "GraphColoring-v1", "Knapsack-v1", "Maze-v0",
               "PacMan-v1", "SlidingTilePuzzle-v0", "Snake-v1", "TSP-v1")
LAST = 2  # jumanji.types.StepType.LAST


def flat_obs(observation: Any) -> jax.Array:
    """Every field of a Jumanji observation, flattened, float32, concatenated: ``[N]``."""
    return jnp.concatenate([jnp.asarray(x, jnp.float32).reshape(-1)
                            for x in jax.tree.leaves(observation)])


class JumanjiEnv(AutoResetJaxEnv):
    """One Jumanji env behind the JaxEnv protocol (pure, jittable; ``vmap``).

    Args:
      name: an env of ``JUMANJI_IDS``, e.g. ``"Snake-v1"``.
      **kwargs: the env's constructor arguments (e.g. ``time_limit`` for Snake).

    Attributes:
      spec: float32 ``[N]`` observations (``flat_obs``), the env's number of actions.
    """

    def __init__(self, name: str, **kwargs: Any):
        if name not in JUMANJI_IDS:
            raise ConfigError(f"env_id: Jumanji has no env {name!r} with one discrete "
                              f"action; its envs: {', '.join(JUMANJI_IDS)}")
        import jumanji

        try:
            env = jumanji.make(name, **kwargs)
        except TypeError as e:  # an argument the env does not take
            raise refused_call(f"jumanji:{name}", kwargs, e) from e
        vma.patch_modules("jumanji")  # its loops inside Anakin's shard_map (envs/vma.py)
        self._env, self.env_id = env, f"jumanji:{name}"
        obs = jax.eval_shape(lambda k: env.reset(k)[1].observation, jax.random.key(0))
        self._first_shape = tuple(jax.tree.leaves(obs)[0].shape)
        size = sum(math.prod(x.shape) for x in jax.tree.leaves(obs))
        self.spec = EnvSpec(obs_shape=(int(size),), obs_dtype="float32",
                            num_actions=int(env.action_spec.num_values))

    def _reset_inner(self, key: jax.Array) -> tuple[jax.Array, Any]:
        state, ts = self._env.reset(key)
        return flat_obs(ts.observation), (state, ts.step_type, ts.discount)

    def _step_inner(
        self, inner: Any, action: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, Any, jax.Array, jax.Array, jax.Array]:
        del key  # the env's own key is in its state
        state, ts = self._env.step(inner[0], action)
        last = ts.step_type == LAST
        terminated = last & (ts.discount == 0.0)
        return (flat_obs(ts.observation), (state, ts.step_type, ts.discount),
                jnp.asarray(ts.reward, jnp.float32), terminated, last & ~terminated)

    def obs_frame(self, obs) -> np.ndarray:
        """The observation's first field as a picture where it is a board (``[H, W, C]``
        planes or ``[H, W]``), else labelled bars of the whole vector; uint8 ``[H, W, 3]``."""
        from envs.render import gray_frame, labelled_bars_frame, planes_frame, scale_nearest

        shape = self._first_shape
        head = np.asarray(obs, np.float64).reshape(-1)[:math.prod(shape)].reshape(shape)
        if len(shape) == 3:
            return scale_nearest(planes_frame(head))
        if len(shape) == 2:
            return scale_nearest(gray_frame(head))
        return labelled_bars_frame(obs)
