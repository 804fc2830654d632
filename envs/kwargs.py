"""The env's own arguments (a config's ``env_kwargs``) checked against what its builder takes.

``env_kwargs.NAME=VALUE`` goes to the env's class or factory, or to a suite's constructor
(gymnax's env params, Brax's and Jumanji's ``make`` arguments, ...; docs/design.md, "The
env's own arguments"). A name the builder does not take is refused in one line naming
``env_kwargs.NAME`` before anything compiles: by the builder's signature where it has no
``**kwargs`` (``check_signature``), by a suite's list of parameters (``refuse_unknown``), or
by the ``TypeError`` of the call (``refused_call``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

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
