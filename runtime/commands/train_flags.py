"""The flags of the training commands (``anakin.main``, ``sebulba.main``): ``--config``,
``--workdir``, ``--fresh``, parsed before JAX starts; a bad config is one ``config error:``
line (``runtime.config.problems``) and exit 2 (``runtime.process.flags``).
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Callable
from typing import Any

import ml_collections
from absl import flags
from ml_collections import config_flags

from runtime.config.algo import command_line_own, fill_own, set_own
from runtime.config.fields import NAME_TUPLES
from runtime.config.problems import config_problem
from runtime.config.xla_flags import apply_xla_cpu_flags
from runtime.process import flags as flag_parser


@dataclasses.dataclass(frozen=True)
class TrainFlags:
    """The flags of a training command (``define_flags``).

    Attributes:
      config, workdir, fresh: absl flag holders of ``--config``, ``--workdir``, ``--fresh``.
      default_config: the config file when the command line names none.
      mode: ``"anakin"`` or ``"sebulba"`` (its automatic CPU thread count, ``cpu_threads_for``).
      locate: maps a ``--config`` value to the file it names (``configs.locate``: a shipped
        config by name, from any directory).
    """

    config: Any
    workdir: Any
    fresh: Any
    default_config: str
    mode: str
    locate: Callable[[str], str] = lambda value: value

    def parse(self, argv):
        """absl flags parser for ``app.run``: ``parse_flags`` of ``argv`` with
        ``--config=<default_config>`` in front when ``argv`` names no config file, and every
        ``--config`` value mapped through ``locate``."""
        if not any(re.match(r"^--?config(=|$)", arg) for arg in argv[1:]):
            argv = [argv[0], f"--config={self.default_config}", *argv[1:]]
        # The algorithm's own hyperparameters and the env's own arguments are set once the
        # config (and so its algorithm) is loaded; ml_collections, which reads its overrides'
        # names from sys.argv, must not see them.
        argv, own = command_line_own(argv)
        sys.argv[:] = command_line_own(sys.argv)[0]
        return parse_flags(located_config(argv, self.locate), self.mode, own)


def located_config(argv, locate: Callable[[str], str]) -> list[str]:
    """``argv`` with the value of ``--config=VALUE`` (or ``--config VALUE``) replaced by
    ``locate(VALUE)``; every other argument, ``--config.<field>`` overrides included, as is."""
    out = list(argv[:1])
    for i, arg in enumerate(argv[1:], start=1):
        found = re.match(r"^(--?config=)(.*)$", arg)
        if found:
            arg = found.group(1) + locate(found.group(2))
        elif re.match(r"^--?config$", argv[i - 1]):
            arg = locate(arg)
        out.append(arg)
    return out


def define_flags(config: str, workdir: str, mode: str,
                 locate: Callable[[str], str] = lambda value: value) -> TrainFlags:
    """Defines ``--config`` (default file ``config``), ``--workdir`` (default ``workdir``)
    and ``--fresh`` (``locate``: ``TrainFlags.locate``); the entry point adopts them as its
    key flags for ``--help`` to list them (``flags.adopt_module_key_flags(
    runtime.commands.train_flags)``) and parses with ``.parse``.

    ``--config`` has no default of its own: ml_collections loads a default file, applying
    the command line's ``--config.<field>`` overrides, when the flag is defined, at import,
    where an unknown field would be a traceback instead of ``parse_flags``' one line.
    """
    holders = (
        config_flags.DEFINE_config_file(
            "config", None, "Config file, a Python file with get_config(); override its "
            "fields with --config.<field>=<value>."),
        flags.DEFINE_string(
            "workdir", workdir, "Run directory (config.json, metrics.jsonl, checkpoints/); a "
            "run there is resumed from its newest checkpoint."),
        flags.DEFINE_bool(
            "fresh", False, "Start over: move the previous run in --workdir beside it (to "
            "<workdir>.old-<time>/) instead of resuming from its checkpoint."),
    )
    flags.FLAGS["config"].default_as_str = repr(config)  # --help: the file .parse puts in
    return TrainFlags(*holders, default_config=config, mode=mode, locate=locate)


def parse_flags(argv, mode: str | None = None, own: list[tuple[str, str]] = ()):
    """absl flags parser for ``app.run``: a bad ``--config`` file or override (wrong type,
    unknown field) becomes one ``config error: <field>: ...`` line and exit code 2. Library
    logging stays at WARNING unless ``--verbosity`` is given. ``mode``: the training
    command's architecture (``apply_xla_cpu_flags``); ``own``: the algorithm's own
    hyperparameters from the command line (``runtime.config.algo.command_line_own``)."""
    return flag_parser.parse_flags(argv, config_problem,
                                   lambda rest: _check_config(mode, list(own)))


def _check_config(mode: str | None, own: list[tuple[str, str]]) -> None:
    """A config that failed to load raises here; the algorithm's own hyperparameters are
    set (``own``) and filled in at their defaults; its XLA CPU flags and thread count go in
    before JAX starts."""
    config = flags.FLAGS["config"].value
    config.to_dict()
    split_name_tuples(config)
    set_own(config, own)
    fill_own(config)
    apply_xla_cpu_flags(config, mode)


def split_name_tuples(config) -> None:
    """Splits each name of a tuple-of-names field (``NAME_TUPLES``: ``pbt.explore``) at its
    commas, as the docs write them (``--config.pbt.explore=learning_rate,``, ``...=a,b``):
    ml_collections reads a tuple override with ``ast.literal_eval``, which gives bare names
    back as one string, commas and all. Blanks around a name and empty names go
    (docs/design.md, "Config fields")."""
    for name in NAME_TUPLES:
        parent, _, key = name.rpartition(".")
        node = config.get(parent) if parent else config
        value = node.get(key) if isinstance(node, ml_collections.ConfigDict) else None
        if isinstance(value, tuple) and all(isinstance(v, str) for v in value):
            node[key] = tuple(p.strip() for v in value for p in v.split(",") if p.strip())
