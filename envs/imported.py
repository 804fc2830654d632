"""Envs from the user's own package, named by import path: ``env_id=PACKAGE.MODULE:NAME``.

``NAME`` is an env class or a factory function (called with the config's ``env_kwargs``, each
name checked against its signature first: ``envs.kwargs``), or an env object (no
``env_kwargs``). What it gives must be one of (docs/extending.md, "Your own env"):

- a gymnax ``Environment`` (from any package), or ``(env, params)`` as ``gymnax.make``
  returns: run as gymnax's own envs are, through ``envs.gymnax.GymnaxEnv``, its time limit
  from its params (``max_steps_in_episode``, ``is_truncated``);
- a ``StepEnv``: ``spec`` (an ``rlcore.types.EnvSpec``), ``reset(key) -> (obs, state)`` and
  ``step(state, action, key) -> (obs, state, reward, terminated, truncated)``, pure and
  jittable, one env, no auto-reset: ``StepEnvAdapter`` adds the same-step auto-reset, the
  dtypes and the episode statistics (the env's own time limit sets ``truncated``);
- a full ``envs.base.JaxEnv`` (e.g. an ``envs.autoreset.AutoResetJaxEnv`` subclass): as is.

Every check runs when the id is validated, before anything compiles, and fails as one
``env_id:`` line (``rlcore.errors.ConfigError``): a module that does not import, a missing
attribute, an object that is none of the above, a spec that is not an ``EnvSpec``, and a
``reset``/``step`` whose traced shapes disagree with the spec (``check_shapes``, by
``jax.eval_shape``: nothing runs).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Protocol

import jax
import jax.numpy as jnp

from envs.autoreset import AutoResetJaxEnv
from envs.base import JaxEnv, keep_obs_frame
from envs.kwargs import FIELD, check_signature
from rlcore.errors import ConfigError
from rlcore.imports import load_object, refusal, short_repr, user_frame
from rlcore.types import EnvSpec

JAX_ENV_METHODS = ("reset", "step", "draw_reset", "step_drawn", "step_batch_drawn")


class StepEnv(Protocol):
    """The smallest env the platform runs: one env, pure and jittable, no auto-reset."""

    spec: EnvSpec

    def reset(self, key: jax.Array) -> tuple[jax.Array, Any]:
        """``(obs [*obs_shape], state)`` of a new episode."""

    def step(self, state: Any, action: jax.Array,
             key: jax.Array) -> tuple[jax.Array, Any, jax.Array, jax.Array, jax.Array]:
        """``(obs, state, reward [], terminated [] bool, truncated [] bool)``; never resets."""


class StepEnvAdapter(AutoResetJaxEnv):
    """A ``StepEnv`` as a ``JaxEnv``: auto-reset, dtypes and statistics added."""

    def __init__(self, env: StepEnv):
        self.env = env
        self.spec = env.spec
        keep_obs_frame(env, self)

    def _reset_inner(self, key: jax.Array) -> tuple[jax.Array, Any]:
        obs, state = self.env.reset(key)
        return jnp.asarray(obs, jnp.float32), state

    def _step_inner(self, inner, action, key):
        obs, state, reward, terminated, truncated = self.env.step(inner, action, key)
        terminated = jnp.asarray(terminated, jnp.bool_)
        return (jnp.asarray(obs, jnp.float32), state, jnp.asarray(reward, jnp.float32),
                terminated, jnp.asarray(truncated, jnp.bool_) & ~terminated)


def make_imported_env(path: str, **overrides: Any) -> JaxEnv:
    """The JaxEnv of import path ``path``; ``overrides`` (``env_kwargs``) go to a class or
    factory (a gymnax env's: its ``EnvParams`` fields), refused by name where its signature
    does not take them.

    Raises:
      ConfigError: ``load_object``'s, or what ``path`` names is not an env (module docstring).
    """
    target = load_object(path, "env_id")
    if inspect.isclass(target) or inspect.isroutine(target) or isinstance(
            target, functools.partial):
        gymnax_class = _gymnax_class(target)
        if not gymnax_class:
            check_signature(path, target, overrides)
        target = _built(path, target, gymnax_class, overrides)
        overrides = overrides if gymnax_class else {}
    env = _as_jax_env(path, target, overrides)
    check_shapes(path, env)
    return env


def _built(path: str, factory: Any, gymnax_class: bool, overrides: dict) -> Any:
    """``factory()`` (a gymnax class: without the overrides, which are its params')."""
    try:
        return factory() if gymnax_class else factory(**overrides)
    except TypeError as e:
        if user_frame(e) is not None:  # raised inside the user's code, not by the call
            raise refusal(f"env_id: building '{path}' with "
                          f"{_arguments(overrides, gymnax_class)} raised", e) from None
        raise ConfigError(f"env_id: '{path}' could not be built with "
                          f"{_arguments(overrides, gymnax_class)}: {e}") from None
    except Exception as e:  # noqa: BLE001 - the user's code may raise anything
        raise refusal(f"env_id: building '{path}' with "
                      f"{_arguments(overrides, gymnax_class)} raised", e) from None


def _arguments(overrides: dict, gymnax_class: bool) -> str:
    if gymnax_class or not overrides:
        return "no arguments"
    return ", ".join(f"{k}={short_repr(v)}" for k, v in overrides.items())


def _gymnax_class(target: Any) -> bool:
    from envs.gymnax import is_gymnax_env

    return inspect.isclass(target) and is_gymnax_env(target)


def _as_jax_env(path: str, obj: Any, overrides: dict) -> JaxEnv:
    """``obj`` behind the JaxEnv protocol (gymnax env, ``StepEnv`` or JaxEnv)."""
    from envs.gymnax import GymnaxEnv, is_gymnax_env

    if isinstance(obj, tuple) and len(obj) == 2 and is_gymnax_env(obj[0]):
        return GymnaxEnv(path, env=obj, **overrides)  # gymnax.make's (env, params)
    if is_gymnax_env(obj):
        return GymnaxEnv(path, env=(obj, obj.default_params), **overrides)
    if overrides:
        raise ConfigError(f"{FIELD}.{next(iter(overrides))}: '{path}' is an env object, "
                          "which takes no arguments; name a class or factory that does")
    kind = "JaxEnv" if all(callable(getattr(obj, m, None)) for m in JAX_ENV_METHODS) else None
    if kind is None and not all(callable(getattr(obj, m, None)) for m in ("reset", "step")):
        raise ConfigError(
            f"env_id: '{path}' gives an object of type {type(obj).__name__}, not an env: "
            "name a gymnax "
            "Environment, an env with spec, reset(key) and step(state, action, key), or a "
            "class or factory that builds one (docs/extending.md, \"Your own env\")")
    spec = getattr(obj, "spec", None)
    if not isinstance(spec, EnvSpec):
        raise ConfigError(f"env_id: '{path}' has spec {type(spec).__name__}, not an "
                          "rlcore.types.EnvSpec")
    check_spec(path, spec)
    return obj if kind else StepEnvAdapter(obj)


def check_spec(path: str, spec: EnvSpec) -> None:
    """The spec's sizes can make a policy: ``num_actions`` an integer >= 1 (the action set,
    or a box's vector size) and ``obs_shape`` a tuple of integers >= 1.

    Raises:
      ConfigError: the first size that cannot, in one ``env_id:`` line.
    """
    n = spec.num_actions
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        what = "a box's action size" if spec.action_low is not None else "its action set's size"
        raise ConfigError(f"env_id: '{path}' has spec num_actions={n!r}: must be an integer "
                          f">= 1 ({what}); a policy needs an action to take")
    shape = spec.obs_shape
    if not isinstance(shape, tuple) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape):
        raise ConfigError(f"env_id: '{path}' has spec obs_shape={shape!r}: must be a tuple "
                          "of integers >= 1")


def check_shapes(path: str, env: JaxEnv) -> None:
    """Traces ``env``'s reset and step (``jax.eval_shape``: nothing runs or compiles) and
    checks them against its spec: obs ``spec.obs_shape``, reward and flags ``[]``.

    Raises:
      ConfigError: the first disagreement, or the trace's own error, in one line.
    """
    spec = env.spec
    action = jax.ShapeDtypeStruct(spec.action_shape, spec.action_dtype)
    try:
        state, first = jax.eval_shape(env.reset, jax.random.key(0))
        _, step = jax.eval_shape(env.step, state, action, jax.random.key(1))
    except ConfigError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's code may raise anything
        raise refusal(f"env_id: '{path}' does not trace with its spec ({spec.obs_shape} "
                      f"obs, {spec.action_dtype} actions)", e) from None
    for what, got, want in (("reset's obs", first.obs.shape, spec.obs_shape),
                            ("step's obs", step.obs.shape, spec.obs_shape),
                            ("step's reward", step.reward.shape, ()),
                            ("step's terminated", step.terminated.shape, ()),
                            ("step's truncated", step.truncated.shape, ())):
        if tuple(got) != tuple(want):
            raise ConfigError(f"env_id: '{path}': {what} has shape {tuple(got)}, its spec "
                              f"says {tuple(want)}")
