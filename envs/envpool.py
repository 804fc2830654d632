"""HostEnv adapter over one synchronous EnvPool instance (Sebulba's actor envs).

Seeding: the pool is made with ``seed = seed + first_env_index``; EnvPool gives its env ``i``
the seed ``pool seed + i``, so env ``i`` of this pool gets ``seed + first_env_index + i``: the
seed of an env depends only on its *global* index. Pools covering disjoint index ranges
(``first_env_index`` = the global index of their env 0) never share a seed, and the envs a run
sees do not depend on how they are split over actor threads, devices and processes.

Synchronous: ``batch_size == num_envs``, so every ``step`` returns all envs, in env-id order.

Auto-reset (same step, as the JaxEnv): after ``step`` the envs that ended
(``terminated | truncated``) are reset at once with ``reset(env_ids)`` and their rows of the
returned obs replaced by the first obs of the next episode. EnvPool's own delayed auto-reset,
which would spend the next ``step`` on a reset, is therefore never triggered.

Final observation: EnvPool 1.2's own auto-reset is delayed (the step after an episode's end
is a reset step), so the obs its ``step`` returns at the end of an episode is that episode's
last observation; the adapter keeps it as ``TimeStep.final_obs`` before replacing the rows
with the reset's.

Truncation: ``truncated = (envpool's truncated | elapsed_step >= max_episode_steps) &
~terminated`` with ``max_episode_steps`` read from the pool's config (500 for CartPole-v1 and
Acrobot-v1, 27000 agent steps for Atari).

Continuous control (MuJoCo ``-v4`` ids: ``HalfCheetah-v4``, ``Hopper-v4``, ``Ant-v4``, ...):
the spec carries the action size and bounds, every action is clipped to the bounds before
the step (the policy's Gaussian samples are unbounded; CleanRL's continuous PPO clips the
same way), and EnvPool's float64 observations are cast to float32. Rendering MuJoCo needs an
OpenGL context: on a host without one (this project's CPU host) EnvPool aborts the process
in ``render``, so there is no MuJoCo video here.

Atari ``-v5`` defaults follow the Cleanba paper (``ATARI_DEFAULTS``; any can be overridden).
Rewards are clipped to {-1, 0, 1} for training (``reward_clip=True``), but the episode
statistics sum EnvPool's ``info["reward"]``, the unclipped game score.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import envpool as _envpool
import numpy as np
from envpool.registration import registry as _envpool_registry

from envs.autoreset import host_initial_stats, update_episode_stats
from envs.base import EpisodeStats, TimeStep
from envs.kwargs import FIELD
from rlcore.types import EnvSpec

ATARI_DEFAULTS: dict[str, Any] = dict(
    episodic_life=False,
    repeat_action_probability=0.25,
    noop_max=1,
    full_action_space=True,
    max_episode_steps=27000,
    reward_clip=True,
    img_height=84,
    img_width=84,
    gray_scale=True,
    stack_num=4,
)

CLASSIC_CONTROL_IDS = ("CartPole-v1", "Acrobot-v1")
MUJOCO_IDS = ("HalfCheetah-v4", "Hopper-v4", "Walker2d-v4", "Ant-v4", "Humanoid-v4",
              "Swimmer-v4", "InvertedPendulum-v4", "InvertedDoublePendulum-v4", "Reacher-v4")


def is_atari(env_id: str) -> bool:
    """Whether ``env_id`` is one of EnvPool's Atari ids (``Breakout-v5``, ...)."""
    spec = _envpool_registry.specs.get(env_id)
    return spec is not None and spec[0] == "envpool.atari"


# EnvPool options a Sebulba run sets itself (the pool's size, threads and seeds), which a
# config's ``env_kwargs`` may not name.
RESERVED_OPTIONS = ("num_envs", "batch_size", "num_threads", "max_num_players",
                    "thread_affinity_offset", "base_path", "seed", "env_seed",
                    "gym_reset_return_info")


def check_options(env_id: str, given: dict[str, Any]) -> None:
    """Raises ConfigError (``env_kwargs.NAME: ...``, one line) for the first option of
    ``given`` (``{name: value}``) that EnvPool's ``env_id`` does not have, that Sebulba sets
    itself (``RESERVED_OPTIONS``), or whose value EnvPool cannot take: another type than its
    default's, below 1 where its default is a count of 1 or more (EnvPool crashes on a 0
    ``noop_max``, ``stack_num`` or ``img_height``), a probability outside [0, 1]."""
    from rlcore.errors import ConfigError

    spec = _envpool.make_spec(env_id).config
    defaults = {k: v for k, v in zip(spec._fields, spec) if k not in RESERVED_OPTIONS}
    for name, value in given.items():
        if name in RESERVED_OPTIONS:
            raise ConfigError(f"{FIELD}.{name}: Sebulba sets EnvPool's {name} itself")
        if name not in defaults:
            raise ConfigError(f"{FIELD}.{name}: EnvPool's {env_id} has no option {name!r} "
                              f"(its options: {', '.join(defaults)})")
        problem = _option_problem(defaults[name], value)
        if problem:
            raise ConfigError(f"{FIELD}.{name}: {problem}, got {value!r}")


def _option_problem(default: Any, value: Any) -> str | None:
    """What is wrong with ``value`` for an EnvPool option of ``default``, or None."""
    kind = type(default)
    if kind is float and type(value) in (int, float):
        return None if 0.0 <= value <= 1.0 or default > 1.0 else "must be in [0, 1]"
    if type(value) is not kind:
        return f"must be of type {kind.__name__}, as EnvPool's default {default!r}"
    if kind is int and default >= 1 and value < 1:
        return "must be an integer >= 1"
    return None


def host_env_ids() -> list[str]:
    """EnvPool ids this adapter accepts: the discrete classic-control ids, Atari ``-v5`` and
    the MuJoCo ``-v4`` ids (continuous)."""
    all_ids = _envpool.list_all_envs()
    atari = [i for i in all_ids if i.endswith("-v5") and is_atari(i)]
    return ([i for i in CLASSIC_CONTROL_IDS if i in all_ids] + atari
            + [i for i in MUJOCO_IDS if i in all_ids])


def _by_env_id(rows: np.ndarray, env_id: np.ndarray, num_envs: int) -> np.ndarray:
    """Reorders a batch ``[k, ...]`` returned for ``env_id`` ``[k]`` into id order."""
    if np.array_equal(env_id, np.arange(num_envs)):
        return rows
    out = np.empty((num_envs, *rows.shape[1:]), rows.dtype)
    out[env_id] = rows
    return out


class EnvPoolEnv:
    """A synchronous batch of ``num_envs`` EnvPool envs behind the HostEnv protocol.

    Args:
      env_id: an id of ``host_env_ids()``, e.g. ``"CartPole-v1"`` or ``"Breakout-v5"``.
      num_envs: envs in this pool.
      seed: run seed; env ``i`` gets EnvPool seed ``seed + first_env_index + i``.
      first_env_index: global index of this pool's env 0.
      num_threads: EnvPool worker threads (0: EnvPool's default).
      **overrides: EnvPool options, replacing the Atari defaults, e.g. ``max_episode_steps``.

    Attributes:
      spec: EnvSpec, e.g. ``(4,)`` float32 for CartPole-v1, ``(4, 84, 84)`` uint8 and 18
        actions for Atari.
      num_envs: envs in this pool.
      stats: EpisodeStats of numpy arrays ``[num_envs]``, updated by every ``step``.
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        *,
        seed: int,
        first_env_index: int = 0,
        num_threads: int = 0,
        **overrides: Any,
    ):
        self._atari = is_atari(env_id)
        options = {**(ATARI_DEFAULTS if self._atari else {}), **overrides}
        # A lost life ends the learner's episode, the game goes on (``step``).
        self._episodic_life = self._atari and bool(options.get("episodic_life", False))
        with warnings.catch_warnings():
            # gymnasium warns that EnvPool's float64 Box bounds are cast to float32.
            warnings.filterwarnings("ignore", message=".*precision lowered.*")
            self._env = _envpool.make(
                env_id,
                env_type="gymnasium",
                num_envs=num_envs,
                batch_size=num_envs,
                seed=int(seed) + int(first_env_index),
                num_threads=num_threads,
                **options,
            )
            obs_space = self._env.observation_space
        self.env_id = env_id
        self.num_envs = num_envs
        self.first_env_index = first_env_index
        self.max_episode_steps = int(self._env.spec.config.max_episode_steps)
        action_space = self._env.action_space
        self._obs_dtype = np.dtype(obs_space.dtype)
        if self._obs_dtype == np.float64:  # MuJoCo: float32 is what the networks take
            self._obs_dtype = np.dtype(np.float32)
        self._bounds = None
        if hasattr(action_space, "n"):
            actions: dict[str, Any] = dict(num_actions=int(action_space.n))
        else:  # a Box
            low = np.asarray(action_space.low, np.float32).reshape(-1)
            high = np.asarray(action_space.high, np.float32).reshape(-1)
            self._bounds = (low, high)
            actions = dict(num_actions=low.size, action_low=tuple(map(float, low)),
                           action_high=tuple(map(float, high)))
        self.spec = EnvSpec(obs_shape=tuple(obs_space.shape), obs_dtype=self._obs_dtype.name,
                            **actions)
        self.stats: EpisodeStats = host_initial_stats(num_envs)

    def render(self, env_ids=(0,)) -> np.ndarray:
        """RGB frames ``[k, H, W, 3]`` uint8 of envs ``env_ids`` (the pool must be made with
        ``render_mode="rgb_array"``)."""
        return np.asarray(self._env.render(env_ids=list(env_ids)))

    def reset(self) -> TimeStep:
        """Resets every env and the running episode statistics.

        Returns:
          TimeStep: obs ``[num_envs, *obs_shape]``, reward ``[num_envs]`` float32 zeros,
          terminated and truncated ``[num_envs]`` bool False.
        """
        obs, info = self._env.reset()
        obs = _by_env_id(obs, np.asarray(info["env_id"]), self.num_envs).astype(
            self._obs_dtype, copy=False)
        completed = (self.stats.completed_return, self.stats.completed_length)
        self.stats = host_initial_stats(self.num_envs).replace(
            completed_return=completed[0], completed_length=completed[1]
        )
        false = np.zeros(self.num_envs, bool)
        return TimeStep(
            obs=obs,
            reward=np.zeros(self.num_envs, np.float32),
            terminated=false,
            truncated=false.copy(),
            final_obs=obs,
        )

    def step(self, actions: np.ndarray) -> TimeStep:
        """Steps every env; ended envs are reset in the same step.

        Args:
          actions: ``[num_envs]`` int actions, or ``[num_envs, D]`` float ones (a box; clipped
            to the bounds here).

        Returns:
          TimeStep: obs ``[num_envs, *obs_shape]`` (the next episode's first obs where the
          episode ended), reward ``[num_envs]`` float32 (clipped on Atari by default),
          terminated and truncated ``[num_envs]`` bool, never both true; ``final_obs``
          the obs before the reset (the ended episodes' last observations).
        """
        actions = np.asarray(actions, self.spec.action_dtype)
        expected = (self.num_envs, *self.spec.action_shape)
        if actions.shape != expected:
            raise ValueError(f"actions: expected shape {expected}, got {actions.shape}")
        if self._bounds is not None:
            actions = np.clip(actions, *self._bounds)
        obs, reward, terminated, truncated, info = self._env.step(actions)
        env_id = np.asarray(info["env_id"])
        order = lambda x: _by_env_id(np.asarray(x), env_id, self.num_envs)
        obs = order(obs).astype(self._obs_dtype, copy=False)
        reward = order(reward).astype(np.float32)
        terminated = order(terminated).astype(bool)
        elapsed = order(info["elapsed_step"])
        truncated = order(truncated).astype(bool) | (elapsed >= self.max_episode_steps)
        truncated &= ~terminated
        done = self._game_over(terminated, info, order) | truncated
        score = order(info["reward"]).astype(np.float32) if "reward" in info else reward
        self.stats = update_episode_stats(self.stats, score, done, xp=np)
        final_obs = obs
        if done.any():  # a copy: the reset may reuse EnvPool's output buffer
            final_obs = np.array(obs)
            obs = self._reset_rows(obs, np.flatnonzero(done).astype(np.int32))
        return TimeStep(obs=obs, reward=reward, terminated=terminated, truncated=truncated,
                        final_obs=final_obs)

    def _game_over(self, terminated: np.ndarray, info: dict, order: Callable) -> np.ndarray:
        """``[num_envs]`` bool: the step ended the game. With ``episodic_life`` a lost life
        is ``terminated`` (the learner's episode ends) but the game goes on: EnvPool's own
        reset of that env, on its next step, continues it (that step's action is not
        played, as in EnvPool's auto-reset); only a game over (``info["terminated"]``)
        closes the statistics' episode and is reset here. Elsewhere: ``terminated``."""
        if not self._episodic_life:
            return terminated
        return order(info["terminated"]).astype(bool)

    def _reset_rows(self, obs: np.ndarray, done_ids: np.ndarray) -> np.ndarray:
        """Resets envs ``done_ids`` ``[k]``; returns ``obs`` with their rows replaced."""
        reset_obs, reset_info = self._env.reset(done_ids)
        obs = np.array(obs)  # EnvPool's buffer may be read-only
        obs[np.asarray(reset_info["env_id"])] = reset_obs
        return obs

    def close(self) -> None:
        """Releases the EnvPool threads; the adapter cannot be used afterwards."""
        env, self._env = getattr(self, "_env", None), None
        if env is not None:
            env.close()
