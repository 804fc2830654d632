"""An algorithm's own hyperparameters in a config: the ``algo`` sub-config.

The algorithm of ``config.algorithm`` (``rlcore.algorithms.algorithm_class``: a built-in
name or an import path) says which it has and their defaults
(``rlcore.algorithms.base.own_hyperparameters``; the built-in ones have none). A config
holds them as ``algo.NAME``; its ``sweep`` sub-config holds ``sweep.algo.NAME`` for each
float one (the sweepable ones). See docs/extending.md, "Your own algorithm".

- ``command_line_own`` takes ``--config.algo.NAME=VALUE`` and ``--config.sweep.algo.NAME=
  a,b`` out of a command line (ml_collections cannot set keys a config file does not
  have); ``set_own`` sets them once the config is loaded, by the default's type;
- ``fill_own`` writes every own hyperparameter's default where unset, so that
  ``config.json`` says what the run used;
- ``check_own`` is validation's check of the sub-config;
- ``sweepable_names`` names the float ones as a sweep variant and population-based training
  do (``algo.NAME``).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from typing import Any

import ml_collections

from rlcore.algorithms import algorithm_class
from rlcore.algorithms.base import own_hyperparameters, sweepable_own
from rlcore.errors import ConfigError
from rlcore.imports import short_repr
from runtime.config import env_args
from runtime.config.fields import ALGO

# The sub-configs whose keys are names the user gives (ml_collections cannot take them from
# a command line): the algorithm's own hyperparameters and the env's own arguments
# (``runtime.config.env_args``), each also under ``sweep.``.
OWN_FLAG = re.compile(r"^--?config\.((?:sweep\.)?(?:algo|env_kwargs)\.[A-Za-z_]\w*)=(.*)$")


def command_line_own(argv: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """``(argv without the own-hyperparameter and env-argument overrides, [(path, text)])``:
    ``path`` is ``algo.NAME``, ``env_kwargs.NAME`` or either under ``sweep.``."""
    rest, own = [], []
    for arg in argv:
        found = OWN_FLAG.match(arg)
        if found:
            own.append((found.group(1), found.group(2)))
        else:
            rest.append(arg)
    return rest, own


def set_own(config, own: list[tuple[str, str]]) -> None:
    """Sets each ``(path, text)`` of ``command_line_own`` in ``config``, parsed by the
    hyperparameter's default's type (a sweep's as a comma-separated tuple of floats); the
    env's arguments by ``runtime.config.env_args.set_given``.

    Raises:
      ConfigError: an unknown name or a value that does not parse, naming ``path``.
    """
    env = [(p, t) for p, t in own if p.split(".")[-2] == env_args.FIELD]
    own = [(p, t) for p, t in own if p.split(".")[-2] != env_args.FIELD]
    if env:
        with _unlocked(config):
            env_args.set_given(_node(config, (env_args.FIELD,)),
                               lambda: _node(config, ("sweep", env_args.FIELD)), env)
    if not own:
        return
    algorithm = algorithm_class(config.algorithm)
    defaults = own_hyperparameters(algorithm)
    with _unlocked(config):
        for path, text in own:
            name = path.rsplit(".", 1)[1]
            _known(config.algorithm, name, defaults, path)
            if path.startswith("sweep."):
                _sweepable(path, name, algorithm, defaults)
                values = tuple(_parsed(path, item, 0.0) for item in text.split(",") if item)
                _node(config, ("sweep", "algo"))[name] = values
            else:
                _node(config, ("algo",))[name] = _parsed(path, text, defaults[name])


def fill_own(config) -> None:
    """Writes each own hyperparameter of ``config.algorithm`` that ``config.algo`` lacks at
    its default, and ``sweep.algo.NAME`` (not swept) for each float one the sweep lacks;
    nothing for an algorithm that does not load (validation says why)."""
    try:
        algorithm = algorithm_class(config.algorithm)
    except (ConfigError, TypeError):
        return
    defaults = own_hyperparameters(algorithm)
    if not defaults:
        return
    with _unlocked(config):
        algo = _node(config, ("algo",))
        for name, default in defaults.items():
            if name not in algo:
                algo[name] = default
        if "sweep" in config:
            sweep = _node(config, ("sweep", "algo"))
            for name in sweepable_own(algorithm):
                if name not in sweep:
                    sweep[name] = ()


def check_own(config) -> None:
    """``config.algo`` holds only own hyperparameters of ``config.algorithm``, each of its
    default's type (an int where a float is due is taken), and ``sweep.algo`` only the
    float ones.

    Raises:
      ConfigError: ``algorithm: ...`` (it does not load), ``algo.NAME: ...`` or
        ``sweep.algo.NAME: ...``.
    """
    algorithm = algorithm_class(config.algorithm)
    defaults = own_hyperparameters(algorithm)
    algo = config.get("algo", {})
    if not isinstance(algo, (ml_collections.ConfigDict, Mapping)):
        raise ConfigError(f"algo: must be a sub-config of the algorithm's own "
                          f"hyperparameters, got {short_repr(algo)}")
    for name, value in algo.items():
        _known(config.algorithm, name, defaults, f"algo.{name}")
        _typed(f"algo.{name}", value, defaults[name])
    sweep = (config.get("sweep") or {}).get("algo") or {}
    for name in sweep:
        _known(config.algorithm, name, defaults, f"sweep.algo.{name}")
        if sweep[name]:
            _sweepable(f"sweep.algo.{name}", name, algorithm, defaults)


def check_own_values(config, hparams) -> None:
    """The algorithm's own check of its values (``Algorithm.check``) on ``hparams`` (the
    config's ``HParams``), then on each swept value of an own hyperparameter in turn.

    Raises:
      ConfigError: the algorithm's one line (``algo.NAME: ...``), ``sweep.`` before it for
        a swept value.
    """
    algorithm = algorithm_class(config.algorithm)
    algorithm.from_hparams(hparams).check()
    for name, values in ((config.get("sweep") or {}).get("algo") or {}).items():
        for value in values:
            try:
                algorithm.from_hparams(hparams.replace(
                    algo={**hparams.algo, name: value})).check()
            except ConfigError as e:
                raise ConfigError(f"sweep.{e}") from None


def sweepable_names(config) -> tuple[str, ...]:
    """``algo.NAME`` of each float own hyperparameter of ``config.algorithm`` (what a sweep
    or ``pbt.explore`` may vary); none for an algorithm that does not load (validation says
    why)."""
    try:
        algorithm = algorithm_class(config.algorithm)
    except (ConfigError, TypeError):
        return ()
    return tuple(ALGO + name for name in sweepable_own(algorithm))


def _sweepable(path: str, name: str, algorithm: type, defaults: dict) -> None:
    if name not in sweepable_own(algorithm):
        raise ConfigError(f"{path}: only float hyperparameters are swept (it is a "
                          f"{type(defaults[name]).__name__})")


def _known(algorithm: str, name: str, defaults: dict, path: str) -> None:
    if name not in defaults:
        own = ", ".join(defaults) or "none"
        raise ConfigError(f"{path}: {algorithm} has no hyperparameter {name!r} of its own "
                          f"(its own: {own})")


def _typed(path: str, value: Any, default: Any) -> None:
    kind = type(default)
    ok = type(value) is kind or (kind is float and type(value) is int)
    if not ok:
        raise ConfigError(f"{path}: must be a {kind.__name__} (its default is {default!r}), "
                          f"got {value!r}")


def _parsed(path: str, text: str, default: Any) -> Any:
    """``text`` as the type of ``default``."""
    kind = type(default)
    try:
        if kind is bool:
            if text.lower() not in ("true", "false", "1", "0"):
                raise ValueError(text)
            return text.lower() in ("true", "1")
        return kind(text)
    except ValueError:
        raise ConfigError(f"{path}: must be a {kind.__name__}, got {text!r}") from None


def _unlocked(config):
    """``config.unlocked()`` (a loaded config file's is locked), for keys it lacks."""
    return config.unlocked() if hasattr(config, "unlocked") else contextlib.nullcontext()


def _node(config, path: tuple[str, ...]):
    """The sub-config at ``path`` of ``config``, made (empty) where missing."""
    node = config
    for part in path:
        if part not in node or node[part] is None:
            node[part] = ml_collections.ConfigDict()
        node = node[part]
    return node
