"""JaxEnv adapter over XLand-MiniGrid (``xminigrid:MiniGrid-DoorKey-5x5``,
``xminigrid:MiniGrid-MemoryS8``, ...): the ``xminigrid`` extra, ``pip install -e
'.[xminigrid]'``.

XLand-MiniGrid's ``env.step(params, timestep, action)`` does not reset (its auto-reset is a
wrapper we do not use); the adapter keeps its ``TimeStep`` as the inner state, and the
same-step auto-reset and episode statistics are ``envs.autoreset.AutoResetJaxEnv``'s. Its
step marks the time limit apart from the goal::

    terminated = the goal reached (its discount 0)
    truncated  = its last step (``step_num == max_steps``) & ~terminated

The reward is XLand-MiniGrid's: ``1 - 0.9 * step_num / max_steps`` at the goal, else 0.
Observations: the agent's ``view_size x view_size`` view of (tile, colour) ids, cast to
float32 ``[V, V, 2]``. The env draws its own randomness from the key in its state (set at
reset), so a step's key is unused.

Video: ``render_frames`` draws XLand-MiniGrid's own RGB pictures of the grid.
XLand-MiniGrid is imported on first use (about 1 s).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from envs import vma
from envs.autoreset import AutoResetJaxEnv, keys_as_data
from envs.kwargs import refuse_unknown
from rlcore.errors import ConfigError
from rlcore.types import EnvSpec

# The MiniGrid tasks of XLand-MiniGrid (``xminigrid.registered_environments()``, 0.9.3)
# written out, so that checking an id never imports it; tests/envs/test_suite_envs.py
# compares. (Its XLand-MiniGrid-R* meta-RL tasks need a benchmark's rulesets: not listed.)
XMINIGRID_IDS = (
    "MiniGrid-BlockedUnlockPickUp", "MiniGrid-DoorKey-5x5", "MiniGrid-DoorKey-6x6",
    "MiniGrid-DoorKey-8x8", "MiniGrid-DoorKey-16x16", "MiniGrid-Empty-5x5",
    "MiniGrid-Empty-6x6", "MiniGrid-Empty-8x8", "MiniGrid-Empty-16x16",
    "MiniGrid-EmptyRandom-5x5", "MiniGrid-EmptyRandom-6x6", "MiniGrid-EmptyRandom-8x8",
    "MiniGrid-EmptyRandom-16x16", "MiniGrid-FourRooms", "MiniGrid-LockedRoom",
    "MiniGrid-MemoryS8", "MiniGrid-MemoryS16", "MiniGrid-MemoryS32", "MiniGrid-MemoryS64",
    "MiniGrid-MemoryS128", "MiniGrid-Playground", "MiniGrid-Unlock", "MiniGrid-UnlockPickUp",
)


class XMiniGridEnv(AutoResetJaxEnv):
    """One XLand-MiniGrid task behind the JaxEnv protocol (pure, jittable; ``vmap``).

    Args:
      name: a task of ``XMINIGRID_IDS``, e.g. ``"MiniGrid-DoorKey-5x5"``.
      **param_overrides: fields of its ``EnvParams`` (e.g. ``max_steps``, ``view_size``).

    Attributes:
      spec: float32 ``[V, V, 2]`` observations, 6 actions.
    """

    def __init__(self, name: str, **param_overrides: Any):
        if name not in XMINIGRID_IDS:
            raise ConfigError(f"env_id: XLand-MiniGrid has no task {name!r}; its tasks: "
                              f"{', '.join(XMINIGRID_IDS)}")
        import xminigrid

        env, params = xminigrid.make(name)
        vma.patch_modules("xminigrid")  # its loops inside Anakin's shard_map (envs/vma.py)
        refuse_unknown(f"xminigrid:{name}", param_overrides, params.__dataclass_fields__)
        self._env, self._params = env, params.replace(**param_overrides)
        self.env_id = f"xminigrid:{name}"
        self.spec = EnvSpec(obs_shape=tuple(int(d) for d in env.observation_shape(self._params)),
                            obs_dtype="float32", num_actions=int(env.num_actions(self._params)))

    @property
    def params(self) -> Any:
        """XLand-MiniGrid's EnvParams in use (after overrides)."""
        return self._params

    def _reset_inner(self, key: jax.Array) -> tuple[jax.Array, Any]:
        ts = self._env.reset(self._params, key)
        return jnp.asarray(ts.observation, jnp.float32), ts

    def _step_inner(
        self, inner: Any, action: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, Any, jax.Array, jax.Array, jax.Array]:
        del key  # the env's own key is in its state
        ts = self._env.step(self._params, inner, action)
        last = ts.step_type == 2  # xminigrid.types.StepType.LAST
        terminated = last & (ts.discount == 0.0)
        return (jnp.asarray(ts.observation, jnp.float32), ts, ts.reward, terminated,
                last & ~terminated)

    # ------------------------------------------------------------------ video

    def frame_state(self, state) -> Any:
        """One env's XLand-MiniGrid TimeStep (of its JaxEnvState): what ``render_frames``
        draws."""
        return keys_as_data(state.inner)  # its keys as data: numpy copies it

    def render_problem(self) -> str | None:
        """XLand-MiniGrid draws with numpy on any host: never a problem."""
        return None

    def render_frames(self, frame_states, size: tuple[int, int] | None = None) -> list:
        """XLand-MiniGrid's own RGB pictures of ``frame_states`` (TimeSteps with leaves
        ``[L, ...]``), uint8 ``[H, W, 3]`` each."""
        del size
        params = self._params.replace(render_mode="rgb_array")
        frames = []
        for i in range(len(frame_states.step_type)):
            one = jax.tree.map(lambda x, i=i: x[i], frame_states)
            frames.append(np.asarray(self._env.render(params, one), np.uint8))
        return frames
