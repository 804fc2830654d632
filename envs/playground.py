"""JaxEnv adapter over MuJoCo Playground's DeepMind Control Suite tasks
(``playground:CartpoleBalance``, ``playground:CheetahRun``, ...): the ``playground`` extra,
``pip install -e '.[playground]'``.

Playground's ``MjxEnv`` has no time limit and no auto-reset of its own (its training
wrappers add them); as for Brax (``envs.brax``) the adapter counts the steps and leaves the
auto-reset to ``envs.autoreset.AutoResetJaxEnv``::

    terminated = the env's ``done`` (DMC tasks: only a state gone non-finite)
    truncated  = step count reached ``episode_length`` (Playground's config: 1000) & ~terminated

Physics: MJX's JAX implementation (``impl="jax"``, Playground's default is MuJoCo Warp, whose
kernels run outside XLA), so the step is an ordinary jittable function that Anakin vmaps and
shards. Actions are clipped to the actuators' control range (the spec's bounds).

Playground is imported on first use (about 10 s: MuJoCo Warp loads with it); its notices are
kept off the console. Video: the observation as bars (MuJoCo's renderer needs OpenGL).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from envs import vma
from envs.autoreset import AutoResetJaxEnv
from envs.brax import quiet
from envs.kwargs import refuse_unknown
from rlcore.errors import ConfigError
from rlcore.types import EnvSpec

# Playground's DM Control Suite tasks (``mujoco_playground.dm_control_suite.ALL_ENVS``,
# playground 0.2.0) written out, so that checking an id never imports it;
# tests/envs/test_suite_envs.py compares.
PLAYGROUND_IDS = (
    "AcrobotSwingup", "AcrobotSwingupSparse", "BallInCup", "CartpoleBalance",
    "CartpoleBalanceSparse", "CartpoleSwingup", "CartpoleSwingupSparse", "CheetahRun",
    "FingerSpin", "FingerTurnEasy", "FingerTurnHard", "FishSwim", "HopperHop", "HopperStand",
    "HumanoidStand", "HumanoidWalk", "HumanoidRun", "PendulumSwingup", "PointMass",
    "ReacherEasy", "ReacherHard", "SwimmerSwimmer6", "WalkerRun", "WalkerStand", "WalkerWalk")
IMPL = "jax"  # MJX's JAX implementation


class PlaygroundEnv(AutoResetJaxEnv):
    """One Playground DM Control Suite task behind the JaxEnv protocol (pure, jittable).

    Args:
      name: a task of ``PLAYGROUND_IDS``, e.g. ``"CartpoleBalance"``.
      episode_length: the time limit in steps (default: the task's config, 1000).
      **config_overrides: fields of the task's config (e.g. ``ctrl_dt``).

    Attributes:
      spec: float32 ``[observation_size]`` observations, ``action_size`` actions within the
        actuators' control range.
    """

    def __init__(self, name: str, episode_length: int = 0, **config_overrides: Any):
        if name not in PLAYGROUND_IDS:
            raise ConfigError(f"env_id: MuJoCo Playground has no DM Control Suite task "
                              f"{name!r}; its tasks: {', '.join(PLAYGROUND_IDS)}")
        with quiet(), jax.numpy_rank_promotion("allow"):  # MJX broadcasts ranks
            from mujoco_playground import registry as playground_registry

            config = playground_registry.get_default_config(name)
            refuse_unknown(f"playground:{name}", config_overrides, config)
            env = playground_registry.load(name, config_overrides={**config_overrides,
                                                                   "impl": IMPL})
            obs_size, action_size = env.observation_size, env.action_size  # a traced reset
        vma.patch_modules("mujoco.mjx")  # its loops inside Anakin's shard_map (envs/vma.py)
        vma.patch_modules("mujoco_playground")
        with jax.numpy_rank_promotion("allow"):
            shapes = jax.eval_shape(env.reset, jax.random.key(0))
        self._layout = state_layout(shapes)
        ctrl = np.asarray(env.mj_model.actuator_ctrlrange, np.float32).reshape(-1, 2)
        self.env_id = f"playground:{name}"
        self.episode_length = int(episode_length or config.episode_length)
        self._env = env
        self._bounds = (jnp.asarray(ctrl[:, 0]), jnp.asarray(ctrl[:, 1]))
        if not isinstance(obs_size, int):
            raise ConfigError(f"env_id: playground:{name} has dict observations, not run here")
        self.spec = EnvSpec(obs_shape=(obs_size,), obs_dtype="float32",
                            num_actions=int(action_size),
                            action_low=tuple(float(x) for x in ctrl[:, 0]),
                            action_high=tuple(float(x) for x in ctrl[:, 1]))

    def _reset_inner(self, key: jax.Array) -> tuple[jax.Array, Any]:
        with jax.numpy_rank_promotion("allow"):
            state = self._env.reset(key)
        inner = (pack(state, self._layout), jnp.int32(0))
        return jnp.asarray(state.obs, jnp.float32), vma.varying(inner)

    def _step_inner(
        self, inner: Any, action: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, Any, jax.Array, jax.Array, jax.Array]:
        del key  # the env's own key is in its state
        packed, t = inner
        with jax.numpy_rank_promotion("allow"):
            state = self._env.step(unpack(packed, self._layout),
                                   jnp.clip(action, *self._bounds))
        t = t + 1
        terminated = state.done > 0.5
        truncated = (t >= self.episode_length) & ~terminated
        # varying: MJX passes some model arrays through as constants (envs/vma.py)
        return (jnp.asarray(state.obs, jnp.float32),
                vma.varying((pack(state, self._layout), t)), state.reward, terminated, truncated)


class StateLayout(NamedTuple):
    """Where a Playground state's empty arrays are: its tree structure and, per leaf, the
    ``ShapeDtypeStruct`` of an empty leaf (None for the others)."""

    treedef: Any
    empty: tuple[Any, ...]


def state_layout(shapes: Any) -> StateLayout:
    """The ``StateLayout`` of a state's shapes (``jax.eval_shape`` of its reset)."""
    leaves, treedef = jax.tree.flatten(shapes)
    return StateLayout(treedef, tuple(x if math.prod(x.shape) == 0 else None for x in leaves))


def pack(state: Any, layout: StateLayout) -> tuple[jax.Array, ...]:
    """A state's non-empty leaves, in order: what the env state keeps (Orbax, which saves
    Anakin's env states in its checkpoints, refuses arrays of zero size, and MJX's data has
    several: no actuator activations, no mocap bodies, ...)."""
    leaves, treedef = jax.tree.flatten(state)
    if treedef != layout.treedef:
        raise ValueError(f"playground: the state's structure changed: {treedef}")
    return tuple(x for x, e in zip(leaves, layout.empty, strict=True) if e is None)


def unpack(packed: tuple[jax.Array, ...], layout: StateLayout) -> Any:
    """The state of ``pack``'s leaves, its empty arrays made anew."""
    rest = iter(packed)
    leaves = [next(rest) if e is None else jnp.zeros(e.shape, e.dtype) for e in layout.empty]
    return jax.tree.unflatten(layout.treedef, leaves)
