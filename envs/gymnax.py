"""JaxEnv adapter over any gymnax env (CartPole-v1, Breakout-MinAtar, Pendulum-v1, ...).

Discrete action spaces give ``EnvSpec(num_actions=n)``; a ``Box`` gives ``num_actions = D``
and its bounds (``action_low``, ``action_high``), and the adapter clips every action to the
bounds before the env steps (the policy samples unbounded Gaussian actions and learns from
the log-probabilities of the unclipped samples, as CleanRL's continuous PPO).

Truncation and termination (gymnax >= 1.0, checked at construction): ``step_env`` returns the
env's *natural* termination only (``is_terminated``: pole fell, ball lost, ...); the time limit
is ``is_truncated(state) = state.time >= params.max_steps_in_episode``, evaluated on the stepped
state. We call ``step_env`` and ``reset_env`` (not ``step``, which auto-resets with its own key
split) and set::

    terminated = step_env's done
    truncated  = is_truncated(stepped state) & ~terminated

so a step that both reaches the limit and terminates counts as terminated. (Before gymnax 1.0,
``step_env``'s done included the time limit; that version is refused rather than mislabelled.)
The auto-reset and episode statistics come from ``envs.autoreset.AutoResetJaxEnv``.

Not reproduced: DeepSea-bsuite's own ``step`` carries bsuite's cumulative regret metrics across
resets; through this adapter they restart with each episode (they are not used for training).
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import types
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from envs import vma
from envs.autoreset import AutoResetJaxEnv
from envs.kwargs import refuse_unknown
from rlcore.types import EnvSpec

# Modules that gymnax's package import loads for rendering only: ``import gymnax`` imports
# every env module, and five of them import matplotlib's pyplot, Pong seaborn (and with it
# scipy.stats). Measured on a 2-core host: ``import gymnax`` after JAX took 2.68 s with
# them, 0.63 s with them deferred.
RENDER_ONLY_MODULES = ("seaborn", "matplotlib.pyplot")


class _OnFirstUse(types.ModuleType):
    """Stands for a module in ``sys.modules`` until an attribute of it is used: then the real
    module is imported (it replaces this one in ``sys.modules``) and serves every access."""

    def __getattr__(self, attr: str):
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attr)


for _name in RENDER_ONLY_MODULES:
    sys.modules.setdefault(_name, _OnFirstUse(_name))

import gymnax as _gymnax  # noqa: E402  (after the deferral above)

# gymnax's env modules whose loops do not type-check inside Anakin's ``shard_map`` (a
# ``while_loop`` from a constant carry: MinAtar Asterix's entity slots), given envs/vma.py's
# stand-ins at construction. Every other gymnax env steps there as it is (checked, all five
# MinAtar games: tests/envs/test_suite_envs.py), so it keeps JAX's own loops and conds.
SHARD_MAP_PATCHED = ("gymnax.environments.minatar.asterix",)
from gymnax.environments import environment as _gymnax_environment  # noqa: E402
from gymnax.environments import spaces as _gymnax_spaces  # noqa: E402


def is_gymnax_env(obj: Any) -> bool:
    """Whether ``obj`` is a gymnax ``Environment`` or a subclass of it."""
    kind = obj if isinstance(obj, type) else type(obj)
    return issubclass(kind, _gymnax_environment.Environment)


class GymnaxEnv(AutoResetJaxEnv):
    """One gymnax env behind the JaxEnv protocol (pure, jittable; ``vmap`` for a batch).

    Args:
      env_id: an id of ``gymnax.registered_envs``, e.g. ``"CartPole-v1"``; with ``env``,
        the name it goes by (an import path, ``envs.imported``).
      env: ``(environment, params)`` of a gymnax env from elsewhere (None: ``env_id``'s
        from ``gymnax.make``).
      **param_overrides: fields of the env's ``EnvParams`` to replace, e.g.
        ``max_steps_in_episode=10``.

    Attributes:
      spec: EnvSpec with the gymnax obs shape, ``obs_dtype="float32"`` (ints and MinAtar
        boards are cast), and the number of actions (discrete) or the action size and
        bounds (a box).
    """

    def __init__(self, env_id: str, env: tuple[Any, Any] | None = None, **param_overrides: Any):
        if not hasattr(_gymnax_environment.Environment, "is_truncated"):
            raise ImportError(
                "envs.gymnax needs gymnax >= 1.0 (step_env without the time limit in done)"
            )
        env, params = _gymnax.make(env_id) if env is None else env
        if type(env).__module__ in SHARD_MAP_PATCHED:
            vma.patch_modules(type(env).__module__)  # its loops inside shard_map (envs/vma.py)
        if param_overrides:
            refuse_unknown(env_id, param_overrides, (f.name for f in dataclasses.fields(params)))
            params = params.replace(**param_overrides)
        action_space = env.action_space(params)
        obs = jax.eval_shape(lambda k: env.reset_env(k, params)[0], jax.random.key(0))
        self.env_id = env_id
        self._bounds = None
        if isinstance(action_space, _gymnax_spaces.Discrete):
            actions: dict[str, Any] = dict(num_actions=int(action_space.n))
        else:  # a Box
            shape = (int(np.prod(action_space.shape)),)
            low = np.broadcast_to(np.asarray(action_space.low, np.float32), shape)
            high = np.broadcast_to(np.asarray(action_space.high, np.float32), shape)
            self._bounds = (jnp.asarray(low), jnp.asarray(high))
            self._action_shape = tuple(action_space.shape)
            actions = dict(num_actions=shape[0], action_low=tuple(float(x) for x in low),
                           action_high=tuple(float(x) for x in high))
        self.spec = EnvSpec(obs_shape=tuple(obs.shape), obs_dtype="float32", **actions)
        self._env = env
        self._params = params

    @property
    def params(self) -> Any:
        """The gymnax EnvParams in use (after overrides)."""
        return self._params

    def _reset_inner(self, key: jax.Array) -> tuple[jax.Array, Any]:
        obs, inner = self._env.reset_env(key, self._params)
        return jnp.asarray(obs, jnp.float32), inner

    def _step_inner(
        self, inner: Any, action: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, Any, jax.Array, jax.Array, jax.Array]:
        if self._bounds is not None:  # a box: clip the unbounded sample
            action = jnp.clip(action, *self._bounds).reshape(self._action_shape)
        obs, inner, reward, terminated, _ = self._env.step_env(key, inner, action, self._params)
        if self._bounds is not None:  # some boxes return the reward as [1]
            reward = jnp.reshape(reward, ())
        terminated = jnp.asarray(terminated, jnp.bool_)
        truncated = jnp.asarray(self._env.is_truncated(inner, self._params), jnp.bool_)
        return jnp.asarray(obs, jnp.float32), inner, reward, terminated, truncated & ~terminated
