"""A training command's config that does not load, in one ``config error:`` line: a
``--config`` file that cannot be read, an override of a field the config lacks (with the
closest fields), a value of the wrong type."""

from __future__ import annotations

import difflib
import os
import re

from absl import flags
from ml_collections import config_flags

from rlcore.errors import ConfigError
from runtime.config.fields import RENAMED, renamed


def config_problem(e: Exception, argv) -> str:
    """The one ``config error:`` line of a failed parse (any failure is a bad config; a
    ``ConfigError`` of the command's own checks names its field already)."""
    problem = config_file_problem(_config_argument(argv))
    if problem is not None:
        return f"config error: --config: {problem}"
    if isinstance(e, ConfigError):
        return f"config error: {e}"
    if isinstance(e, (AttributeError, KeyError)):  # ml_collections: an unknown field
        unknown = _unknown_override(argv)
        if unknown is not None:
            return f"config error: {unknown}"
    message = " ".join(str(e).split())
    found = re.search(r"--config\.([\w.]+)", message)
    field = found.group(1) if found else "config"
    if isinstance(e, OSError):  # the config file itself did not load
        message = message.split(" Attempted")[0]
    return f"config error: {field}: {message}"


def _unknown_override(argv) -> str | None:
    """``unknown_field``'s line for the first ``--config.<path>`` override in ``argv`` (and
    its flag files) that the config file lacks; None when none does or the file does not
    load.

    The line is found from the command line and the config, not from ml_collections' error:
    that names only the unknown component, and when it has a close match the text is the
    repr of ``KeyError("'lerning_rate'\\nDid you mean ...")`` inside an AttributeError,
    quotes escaped, so the name was lost.
    """
    try:
        config = flags.FLAGS["config"].parser.parse(_config_value(argv))
        argv = flags.FLAGS.read_flags_from_files(list(argv), force_gnu=False)
    except Exception:  # noqa: BLE001 - then the parse error's own text is the message
        return None
    for arg in argv:
        if re.match(r"-{1,2}(no)?config\.", arg):  # ml_collections' own test for overrides
            line = unknown_field(config, arg.split("=", 1)[0].split(".", 1)[1])
            if line is not None:
                return line
    return None


def unknown_field(config, path: str) -> str | None:
    """``"<path>: no such config field (did you mean <close fields>?)"`` when the dotted
    ``path`` of an override (``debug.nope``) is not a field of ``config``; None when it is.

    The path is cut after its first unknown component (``nope`` for ``nope.deeper``); close
    matches come from that component's parent ``ConfigDict`` (``difflib``). A component after
    a value that is not a ``ConfigDict`` is unknown too; a subscript (``a[0]``) ends the check.
    A former field name (``runtime.config.fields.RENAMED``) is ``"<path>: renamed to <new name>"``.
    """
    from ml_collections import ConfigDict
    from ml_collections.config_flags import config_path

    try:
        parts = config_path.split(path)
    except ValueError:
        return None
    node, walked = config, []
    for part in parts:
        if not isinstance(part, str):
            return None
        parent = ".".join(walked)
        walked.append(part)
        if not isinstance(node, ConfigDict):
            kind = "None" if node is None else f"a {type(node).__name__}"
            return (f"{'.'.join(walked)}: no such config field ({parent} is {kind}, not a "
                    "group of fields)")
        if ".".join(walked) in RENAMED:
            return f"{'.'.join(walked)}: {renamed('.'.join(walked))}"
        if part not in node:
            return f"{'.'.join(walked)}: no such config field ({_close_fields(part, node, parent)})"
        node = node[part]
    return None


MAX_LISTED_FIELDS = 10  # a group with no close match lists its fields up to this many


def _close_fields(name: str, group, parent: str) -> str:
    """``"did you mean a, b or c?"``: the fields of ``group`` (a ConfigDict at the dotted
    ``parent``, "" for the top) closest to ``name``; without one, the group's fields (or how
    many there are)."""
    prefix = f"{parent}." if parent else ""
    keys = {k.lower(): k for k in group.keys()}
    close = [f"{prefix}{keys[k]}" for k in difflib.get_close_matches(name.lower(), keys, n=3)]
    if close:
        return f"did you mean {_or_list(close)}?"
    where = parent or "the config"
    if len(keys) <= MAX_LISTED_FIELDS:
        return f"{where} has {_or_list(sorted(keys.values()), 'and')}"
    return f"no close match among the {len(keys)} fields of {where}"


def _or_list(names: list[str], word: str = "or") -> str:
    """``"a, b or c"``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {word} {names[-1]}"


def _config_value(argv) -> str | None:
    """The ``--config`` argument as given (with a ``:args`` suffix): the parsed flag's, else
    the last ``--config=X`` / ``--config X`` in ``argv`` (None without one)."""
    try:
        return config_flags.get_config_filename(flags.FLAGS["config"])
    except Exception:  # noqa: BLE001 - not parsed (the parse failed before it)
        value = None
        for i, arg in enumerate(argv[1:], start=1):
            if (found := re.match(r"^--?config=(.*)$", arg)) is not None:
                value = found.group(1)
            elif re.match(r"^--?config$", arg) and i + 1 < len(argv):
                value = argv[i + 1]
        return value


def _config_argument(argv) -> str | None:
    """The ``--config`` file as given (``_config_value``) without a ``:args`` suffix."""
    value = _config_value(argv)
    return value.split(":", 1)[0] if value else value


def config_file_problem(path: str | None) -> str | None:
    """What keeps ``path`` from being loaded as a config file, in one line naming it and
    what to do; None when it is a readable file (its problem is elsewhere)."""
    hint = ("pass --config=<file>.py or a shipped config's name, e.g. "
            "--config=configs/cartpole_ppo.py or --config=cartpole_ppo")
    if not path:
        return f"no config file given; {hint}"
    if not os.path.exists(path):
        return f"{path} does not exist (from {os.getcwd()}); {hint}"
    if not os.path.isfile(path):
        return f"{path} is not a file; {hint}"
    if not os.access(path, os.R_OK):
        return f"{path} cannot be read (permission denied); {hint}"
    return None
