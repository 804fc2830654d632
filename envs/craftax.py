"""JaxEnv adapter over Craftax (``craftax:Craftax-Classic-Symbolic-v1``,
``craftax:Craftax-Symbolic-v1``): the ``craftax`` extra, ``pip install -e '.[craftax]'``.

We wrap Craftax's *NoAutoReset* envs (``make_craftax_env_from_name(name, auto_reset=False)``)
and call ``reset_env`` and ``step_env``; the same-step auto-reset and the episode statistics
are ``envs.autoreset.AutoResetJaxEnv``'s. Craftax's ``done`` mixes the time limit into the
game's end (``is_game_over``: ``timestep >= max_timesteps``, death, lava, the boss beaten),
so the adapter splits it::

    terminated = is_terminal(state) with the time limit lifted (death, lava, boss)
    truncated  = timestep >= max_timesteps & ~terminated

Per-episode values (``EnvSpec.episode_info``, docs/design.md, "Episode info"), read from the
episode's last state: ``achievement/<name>`` is 100 where the episode unlocked the
achievement, else 0 (its mean over episodes is the success rate in percent, the Craftax and
Crafter papers' per-achievement figure), and ``score_percent`` is the achievements' reward
as a percentage of the most they can pay (Classic: 22 achievements of reward 1; Craftax: 67
of reward 1, 3, 5 or 8, 226 in all), the Craftax paper's "% of max reward" without the
health term of the reward.

Video: ``render_frames`` draws Craftax's own pixel renderer (textures, no OpenGL) from the
states; ``obs_frame`` draws the symbolic observation's local map (its object planes).

Craftax is imported on first use (about 1.7 s), so resolving a ``craftax:`` id never does.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from envs import vma
from envs.autoreset import AutoResetJaxEnv, keys_as_data
from envs.kwargs import refuse_unknown
from rlcore.errors import ConfigError
from rlcore.types import EnvSpec

CLASSIC, FULL = "Craftax-Classic-Symbolic-v1", "Craftax-Symbolic-v1"
CRAFTAX_IDS = (CLASSIC, FULL)
SCORE = "score_percent"
NO_LIMIT = 2**30  # max_timesteps that never ends an episode: what lifts the time limit
# name -> (its constants module, its renderer module)
_MODULES = {CLASSIC: ("craftax.craftax_classic.constants", "craftax.craftax_classic.renderer"),
            FULL: ("craftax.craftax.constants", "craftax.craftax.renderer")}


def achievement_weights(name: str) -> tuple[tuple[str, ...], np.ndarray]:
    """``(achievement names, reward of each)`` of Craftax env ``name``: Classic's all 1,
    Craftax's ``ACHIEVEMENT_REWARD_MAP`` (1, 3, 5 or 8)."""
    constants = importlib.import_module(_MODULES[name][0])
    names = tuple(a.name.lower() for a in constants.Achievement)
    weights = (np.ones(len(names), np.float32) if name == CLASSIC
               else np.asarray(constants.ACHIEVEMENT_REWARD_MAP, np.float32))
    return names, weights


def episode_values(achievements: jax.Array, weights: jax.Array,
                   names: tuple[str, ...]) -> dict[str, jax.Array]:
    """The per-episode values of a state's ``achievements [A]`` bool: ``achievement/<name>``
    100 or 0, and ``score_percent`` = ``100 * sum(weights * achievements) / sum(weights)``;
    float32 ``[]`` each."""
    got = achievements.astype(jnp.float32)
    values = {f"achievement/{n}": 100.0 * got[i] for i, n in enumerate(names)}
    values[SCORE] = 100.0 * jnp.sum(weights * got) / jnp.sum(weights)
    return values


class CraftaxEnv(AutoResetJaxEnv):
    """One Craftax symbolic env behind the JaxEnv protocol (pure, jittable; ``vmap``).

    Args:
      name: ``"Craftax-Classic-Symbolic-v1"`` or ``"Craftax-Symbolic-v1"``.
      **param_overrides: fields of Craftax's ``EnvParams`` (e.g. ``max_timesteps``).

    Attributes:
      spec: float32 ``[1345]`` (Classic) or ``[8268]`` observations, 17 or 43 actions,
        ``episode_info``: every ``achievement/<name>``, then ``score_percent``.
      lazy_reset_chunk: 1, a world generation costs a few hundred steps: a batch's step
        generates the worlds of the envs that ended only, one per pass
        (``envs.autoreset.reset_ended``; docs/design.md, "Same-step auto-reset").
    """

    lazy_reset_chunk = 1

    def __init__(self, name: str, **param_overrides: Any):
        if name not in CRAFTAX_IDS:
            raise ConfigError(f"env_id: Craftax has no env {name!r}; its envs: "
                              f"{', '.join(CRAFTAX_IDS)}")
        from craftax.craftax_env import make_craftax_env_from_name

        env = make_craftax_env_from_name(name, auto_reset=False)
        vma.patch_modules("craftax")  # its loops inside Anakin's shard_map (envs/vma.py)
        params = env.default_params
        refuse_unknown(f"craftax:{name}", param_overrides, params.__dataclass_fields__)
        self._params = params.replace(**param_overrides)
        self._env, self.name = env, name
        self.env_id = f"craftax:{name}"
        self._names, weights = achievement_weights(name)
        self._weights = jnp.asarray(weights)
        obs_size = int(np.prod(env.observation_space(self._params).shape))
        self.spec = EnvSpec(obs_shape=(obs_size,), obs_dtype="float32",
                            num_actions=int(env.action_space(self._params).n),
                            episode_info=(*(f"achievement/{n}" for n in self._names), SCORE))

    @property
    def params(self) -> Any:
        """Craftax's EnvParams in use (after overrides)."""
        return self._params

    def _reset_inner(self, key: jax.Array) -> tuple[jax.Array, Any]:
        obs, state = self._env.reset_env(key, self._params)
        return jnp.asarray(obs, jnp.float32).reshape(-1), state

    def _step_inner(
        self, inner: Any, action: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, Any, jax.Array, jax.Array, jax.Array]:
        obs, state, reward, _, _ = self._env.step_env(key, inner, action, self._params)
        terminated = self._env.is_terminal(state, self._params.replace(max_timesteps=NO_LIMIT))
        truncated = (state.timestep >= self._params.max_timesteps) & ~terminated
        return jnp.asarray(obs, jnp.float32).reshape(-1), state, reward, terminated, truncated

    def _episode_info(self, inner: Any) -> dict[str, jax.Array]:
        return episode_values(inner.achievements, self._weights, self._names)

    # ------------------------------------------------------------------ video

    def frame_state(self, state) -> Any:
        """One env's Craftax state (of its JaxEnvState): what ``render_frames`` draws."""
        return keys_as_data(state.inner)  # its keys as data: numpy copies it

    def render_problem(self) -> str | None:
        """Craftax's renderer draws with textures on any host: never a problem."""
        return None

    def render_frames(self, frame_states, size: tuple[int, int] | None = None) -> list:
        """Craftax's own pixel pictures of ``frame_states`` (states with leaves ``[L, ...]``),
        uint8 ``[H, W, 3]`` each (``size`` is Craftax's: 16-pixel blocks)."""
        del size
        render = _pixel_renderer(self.name)
        frames = []
        for i in range(len(frame_states.timestep)):
            one = jax.tree.map(lambda x, i=i: x[i], frame_states)
            frames.append(np.clip(np.asarray(render(one)), 0, 255).astype(np.uint8))
        return frames

    def obs_frame(self, obs) -> np.ndarray:
        """The local map of a symbolic observation (its object planes), uint8 ``[H, W, 3]``:
        the frames of ``registry.obs_frame_fn`` (Sebulba's videos)."""
        from envs.render import planes_frame, scale_nearest

        rows, cols, planes = _map_obs_shape(self.name)
        board = np.asarray(obs, np.float64).reshape(-1)[:rows * cols * planes]
        return scale_nearest(planes_frame(board.reshape(rows, cols, planes)))


@functools.cache
def _pixel_renderer(name: str):
    """Craftax's pixel renderer of ``name``, jitted (16-pixel blocks)."""
    constants = importlib.import_module(_MODULES[name][0])
    renderer = importlib.import_module(_MODULES[name][1])
    return jax.jit(renderer.make_craftax_pixel_renderer(constants.BLOCK_PIXEL_SIZE_IMG))


@functools.cache
def _map_obs_shape(name: str) -> tuple[int, int, int]:
    """``(rows, cols, planes)`` of the local map at the front of the symbolic obs."""
    module = ("craftax.craftax_classic.envs.craftax_symbolic_env" if name == CLASSIC
              else "craftax.craftax.envs.craftax_symbolic_env")
    return tuple(int(x) for x in importlib.import_module(module).get_map_obs_shape())
