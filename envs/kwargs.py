"""The env's own arguments (a config's ``env_kwargs``) checked against what its builder takes.

``env_kwargs.NAME=VALUE`` goes to the env's class or factory, or to a suite's constructor
(gymnax's env params, Brax's and Jumanji's ``make`` arguments, ...; docs/design.md, "The
env's own arguments"). A name the builder does not take is refused in one line naming
``env_kwargs.NAME`` before anything compiles: by the builder's signature where it has no
``**kwargs`` (``check_signature``), by a suite's list of parameters (``refuse_unknown``), or
by the ``TypeError`` of the call (``refused_call``). A swept argument must trace
(``check_sweepable``): each agent of a sweep builds its env with its value traced.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

import jax
import jax.numpy as jnp

from rlcore.errors import ConfigError

FIELD = "env_kwargs"


def refuse_unknown(env_id: str, given: Iterable[str], accepted: Iterable[str]) -> None:
    """Raises ``ConfigError`` naming ``env_kwargs.NAME`` for the first name of ``given``
    that ``accepted`` lacks."""
    accepted = tuple(accepted)
    for name in given:
        if name not in accepted:
            takes = ", ".join(accepted) or "none"
            raise ConfigError(f"{FIELD}.{name}: {env_id} takes no argument {name!r} (it "
                              f"takes: {takes})")


def check_signature(env_id: str, builder: Callable[..., Any], given: Iterable[str]) -> None:
    """``refuse_unknown`` by ``builder``'s keyword parameters, where its signature can tell
    (none where it takes ``**kwargs`` or has no signature)."""
    try:
        parameters = inspect.signature(builder).parameters.values()
    except (TypeError, ValueError):
        return
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return
    refuse_unknown(env_id, given, (p.name for p in parameters
                                   if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)))


def refused_call(env_id: str, given: Iterable[str], error: TypeError) -> ConfigError:
    """The one line of a suite's constructor that raised ``error`` for the arguments
    ``given`` (its signature takes ``**kwargs``, so only the call can tell)."""
    names = ", ".join(f"{FIELD}.{name}" for name in given)
    return ConfigError(f"{names}: {env_id} does not take them: {error}")


def check_sweepable(env_id: str, make: Callable[..., Any], given: dict[str, Any],
                    swept: dict[str, tuple], dtypes: dict[str, Any], refusal: str) -> None:
    """Builds the env with each swept argument traced (``jax.eval_shape``: nothing runs or
    compiles), resets and steps it, and checks its spec against the build with the first
    values: what a sweep's program does per agent.

    Args:
      env_id: the env's id, for messages.
      make: ``(env_id, **kwargs) -> JaxEnv``, the mode's builder.
      given: the config's ``env_kwargs``.
      swept: ``{NAME: values}`` of ``sweep.env_kwargs``.
      dtypes: ``{NAME: dtype}``, each traced value's, as the program passes it.
      refusal: what to do instead, the end of a refusal's line.

    Raises:
      ConfigError: ``sweep.env_kwargs.NAME: ...`` in one line, for an argument that does
        not trace or that changes the spec.
    """
    base = {**given, **{k: v[0] for k, v in swept.items()}}
    spec = make(env_id, **base).spec
    for name in swept:
        def traced(value, name=name):
            env = make(env_id, **{**base, name: value})
            if env.spec != spec:
                raise ConfigError(f"its spec changes with it ({env.spec} against {spec})")
            action = jnp.zeros(env.spec.action_shape, env.spec.action_dtype)
            state, _ = env.reset(jax.random.key(0))
            return env.step(state, action, jax.random.key(1))

        try:
            jax.eval_shape(traced, jax.ShapeDtypeStruct((), dtypes[name]))
        except Exception as e:  # noqa: BLE001 - the env's own code may raise anything
            why = str(e).strip().splitlines()[0][:160] if isinstance(e, ConfigError) else (
                type(e).__name__)
            raise ConfigError(f"sweep.{FIELD}.{name}: {env_id} does not build with a traced "
                              f"{name}, as each agent of a sweep builds it ({why}); "
                              f"{refusal}") from None
