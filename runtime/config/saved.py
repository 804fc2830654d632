"""A run's saved config (``config.json``) read under today's fields: the compatibility rule.

A run directory written by an earlier version resumes, extends and evaluates with this one
(docs/design.md, "Runs outlive upgrades"):

- ``config.json`` records ``format_version``, the version of this rule it was written
  under (``FORMAT_VERSION``); a file without one is version 1 (every run before the key);
- a field renamed since reads under its new name (``runtime.config.fields.RENAMED``);
- a field added since (``ADDED``) reads as the value that reproduces what the older code
  did, where the file's version predates the field; the ``sweep`` sub-config, which holds a
  key per number field, reads every number field it lacks as not swept;
- a file written by a newer version than this one is refused in one line
  (``check_version``): its run may hold what this version cannot read.

The train state's side of the rule (a part of the state an older checkpoint lacks is built
from its initial value) is ``runtime.run.checkpoint``'s.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Mapping

from rlcore.errors import ConfigError
from runtime.config.fields import BY_NAME, FIELDS, PBT_FIELDS, RENAMED, REPLAY_FIELDS
from runtime.config.sweep import is_number

# The version of this rule that config.json is written under; a file without the key is 1.
FORMAT_VERSION = 7
VERSION_KEY = "format_version"


@dataclasses.dataclass(frozen=True)
class Added:
    """A field added after runs were first saved.

    Attributes:
      value: the value that reproduces what the code did before the field existed (what an
        older run ran at).
      since: the first format version whose ``config.json`` always holds the field.
    """

    value: Any
    since: int


ADDED = {
    "policy_lag": Added(-1, 2),               # each architecture's own lag (Anakin 0, Sebulba 1)
    "staleness_correction": Added("none", 2),  # no correction: the plain losses
    "decoupled_max_weight": Added(1.0, 2),     # read only by staleness_correction=decoupled
    "filter_threshold": Added(0.2, 2),         # read only by staleness_correction=filter
    "memory_check": Added(True, 2),            # not the math: the check before the first call
    "device_memory_gib": Added(0.0, 2),        # the device's own memory
    "algo": Added({}, 3),                      # no own hyperparameters (the built-ins')
    "env_kwargs": Added({}, 5),                # the env built with no arguments of its own
    "layer_norm": Added(False, 6),             # no LayerNorm in the built-in networks
    # No algorithm of an older run reads a replay buffer: the fields at their defaults.
    "replay": Added({k: BY_NAME["replay." + k].default for k in REPLAY_FIELDS}, 7),
    # No population-based training (interval 0), the other pbt fields at their defaults.
    "pbt": Added({k: list(v) if isinstance(v := BY_NAME["pbt." + k].default, tuple) else v
                  for k in PBT_FIELDS}, 4),
}


def version_of(saved: Mapping[str, Any]) -> int:
    """The format version ``saved`` (config.json's object) was written under."""
    return int(saved.get(VERSION_KEY, 1))


def check_version(saved: Mapping[str, Any], path: str) -> None:
    """Raises ConfigError (one line) where ``saved``, read from ``path``, was written by a
    newer version than this one."""
    version = version_of(saved)
    if version > FORMAT_VERSION:
        raise ConfigError(
            f"{VERSION_KEY}: {path} was written by a newer podracer-rl (run format "
            f"{version}; this one reads up to {FORMAT_VERSION}); resume or evaluate it with "
            f"that version, or pass --fresh to move it aside and start over")


def upgrade_saved(saved: Mapping[str, Any]) -> dict[str, Any]:
    """``saved`` (config.json's top-level object) as today's fields: a former name's value
    under its new name (where that is not saved too), an added field at its ``Added.value``
    where the file predates it, and every number field its ``sweep`` lacks as not swept
    (a field added since, of ``ADDED`` or one a resume may change); without
    ``format_version``. For a file ``check_version`` passed."""
    out = dict(saved)
    version = version_of(out)
    out.pop(VERSION_KEY, None)
    for old, new in RENAMED.items():
        if old in out:
            value = out.pop(old)
            out.setdefault(new, value)
    for name, added in ADDED.items():
        if version < added.since:
            out.setdefault(name, copy.deepcopy(added.value))
    if isinstance(out.get("sweep"), Mapping):
        out["sweep"] = {**{name: [] for name in SWEEP_KEYS}, **out["sweep"]}
    return out


# The keys of ``sweep``: one per top-level number field (``runtime.config.sweep.sweep_fields``).
# A saved sweep without one of them is from a version without that field, which swept none.
SWEEP_KEYS = tuple(f.name for f in FIELDS if "." not in f.name and is_number(f.default))


def with_version(config_json: Mapping[str, Any]) -> dict[str, Any]:
    """A config's JSON object as config.json holds it: with ``format_version``."""
    return {**config_json, VERSION_KEY: FORMAT_VERSION}

