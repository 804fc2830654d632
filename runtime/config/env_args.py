"""The env's own arguments in a config: the ``env_kwargs`` sub-config.

``env_kwargs.NAME`` goes to the env's class or factory, or to its suite's constructor, where
every env of the run is built (``env_kwargs_of``); which names the env takes
is the env's to say (``envs.kwargs``, checked with the env id). See docs/design.md, "The
env's own arguments".

- ``env_kwargs_of`` reads them as the keyword arguments every builder of the run's env
  and spec is given;
- ``set_given`` sets the ``--config.env_kwargs.NAME=VALUE`` overrides that
  ``runtime.config.algo.command_line_own`` took out of a command line, each value read as a
  Python literal (``7``, ``0.5``, ``True``, ``(3, 4)``) or else as the string it is;
- ``check_structure`` is validation's check of the sub-config's form;
- ``SWEEP_REFUSAL``: why a swept argument that does not trace is refused (it sets a shape,
  a length or Python control flow, which the agents of one program share); a numeric one
  that traces is swept, the env built per agent with its value traced
  (``envs.kwargs.check_sweepable``).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

import ml_collections

from rlcore.errors import ConfigError
from rlcore.imports import short_repr

FIELD = "env_kwargs"
PREFIX = FIELD + "."
SWEEP_REFUSAL = ("start one run per value (each with its own --workdir): the agents of one "
                 "program share the env's shapes, lengths and Python control flow")
_VALUES = (bool, int, float, str, type(None))


def env_kwargs_of(config) -> dict[str, Any]:
    """The env's own arguments of a run config (``config.env_kwargs`` as a plain dict; empty
    where the config, e.g. an older run's, has none): what every builder of its env or
    spec is given."""
    given = config.get(FIELD) or {}
    return dict(given.to_dict() if hasattr(given, "to_dict") else given)


def evaluation_kwargs_of(config) -> dict[str, Any]:
    """The env's arguments for evaluation (in training and the evaluate command):
    ``env_kwargs_of``, but an Atari game's ``episodic_life`` off, so that an evaluation
    episode is a whole game, as its score is (docs/evaluation.md)."""
    given = env_kwargs_of(config)
    return {**given, "episodic_life": False} if "episodic_life" in given else given


def set_given(node, sweep_node, given: list[tuple[str, str]]) -> None:
    """Sets each ``(path, text)`` of the command line: ``env_kwargs.NAME`` in ``node``, the
    config's (unlocked) ``env_kwargs``, and ``sweep.env_kwargs.NAME=V1,V2,...`` (a tuple of
    ``parsed`` values) in ``sweep_node()``, its ``sweep.env_kwargs`` (made when first
    needed)."""
    for path, text in given:
        name = path.rsplit(".", 1)[1]
        if path.startswith(PREFIX):
            node[name] = parsed(text)
        else:
            sweep_node()[name] = tuple(parsed(item) for item in text.split(",") if item)


def parsed(text: str) -> Any:
    """A command line's value: a Python literal, ``true``/``false`` as booleans, else the
    string itself."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return value if _plain(value) else text


def check_structure(config) -> None:
    """``env_kwargs`` is a sub-config of identifier names to plain values (numbers,
    strings, booleans, None, or tuples of them), which ``config.json`` records as given.

    Raises:
      ConfigError: ``env_kwargs: ...`` or ``env_kwargs.NAME: ...``, one line.
    """
    given = config.get(FIELD, {})
    if not isinstance(given, (ml_collections.ConfigDict, Mapping)):
        raise ConfigError(f"{FIELD}: must be a sub-config of the env's arguments "
                          f"(env_kwargs.NAME = value), got {short_repr(given)}")
    for name, value in given.items():
        if not _plain(value):
            raise ConfigError(f"{PREFIX}{name}: must be a number, string, boolean, None or "
                              f"a tuple of them, got {short_repr(value)}")


def _plain(value: Any) -> bool:
    """Whether ``value`` is one ``config.json`` records as given (and reads back equal)."""
    if isinstance(value, (tuple, list)):
        return all(isinstance(v, _VALUES) for v in value)
    return isinstance(value, _VALUES)
