"""Whether a run directory's previous run may be resumed with this config.

A resume may change only the fields of ``runtime.config.fields.RESUMABLE_CHANGES``, and
``total_env_steps`` to extend the run (never below its newest checkpoint); a run already at
its last update has nothing to train (``RunComplete``). The config check reads only
``config.json`` and the names of the checkpoints, so the training commands run it
(``check_files``) before the trainer's imports, the runtime's start and any restore; the
run directory runs it again when it resumes. See docs/design.md, "Validation".
"""

from __future__ import annotations

import json
import os

from rlcore.errors import ConfigError
from runtime.config.fields import ALGO, ENV_KWARGS, RESUMABLE_CHANGES
from runtime.config.saved import check_version, upgrade_saved, version_of
from runtime.config.validation import derive
from runtime.run import files as run_files


class RunComplete(Exception):  # noqa: N818 - not an error: the command exits 0
    """A run resumed at or past its last update: nothing to train (one line, exit 0)."""


def check_not_complete(workdir: str, start: int, total: int, steps_per_update: int) -> None:
    """Raises ``RunComplete`` when the checkpoint restored, ``start``, is at or past the
    run's last update ``total``."""
    if start >= total:
        raise RunComplete(
            f"{workdir} is already complete at update {start} "
            f"({start * steps_per_update:,} env steps); raise "
            f"--config.total_env_steps to continue it, or pass --fresh to start over")


def check_same_config(workdir: str, config, total: int, steps_per_update: int,
                      newest_step: int) -> int | None:
    """Checks ``config`` against the run's ``config.json``: only the fields a resume may
    change differ, and ``total_env_steps`` (it extends a run; ``total`` updates of
    ``steps_per_update`` env steps) still covers the newest checkpoint, ``newest_step``.
    Returns the saved ``total_env_steps`` when it changed, else None.

    Raises:
      ConfigError: a field changed that changes the data or the math, or the budget
        ends before the newest checkpoint; the line names the field, ``--fresh`` and a
        new ``--workdir``. Or ``config.json`` was written by a newer version.
    """
    path = run_files.config_path(workdir)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        saved = json.load(f)
    check_version(saved, path)
    version = version_of(saved)
    saved = upgrade_saved(saved)  # an older run's config under today's fields
    now = json.loads(config.to_json_best_effort())
    changed = changed_fields(saved, now, RESUMABLE_CHANGES | {"total_env_steps"})
    if changed:
        raise refusal(workdir, version, *changed[0])
    old_total = saved.get("total_env_steps")
    if old_total is None or old_total == now.get("total_env_steps"):
        return None
    if total < newest_step:
        raise ConfigError(
            f"total_env_steps: {now.get('total_env_steps')} is {total} updates, but "
            f"the checkpoint in {workdir} is at update {newest_step} "
            f"({newest_step * steps_per_update:,} env steps); give at least that "
            f"many to continue it, or pass --fresh to start over")
    return int(old_total)


ABSENT = object()  # a field one of the two configs lacks
SHOWN_CHARS = 60  # of a value in a refusal's line


def changed_fields(saved: dict, now: dict, may_change=frozenset(),
                   prefix: str = "") -> list[tuple[str, object, object]]:
    """``[(dotted field, saved value, value now)]`` of the fields that differ between two
    configs as JSON, sorted; a sub-config's by its own fields (``algo.dpo_alpha``,
    ``pbt.interval``), not as a whole. ``may_change``: top-level fields left out."""
    out = []
    for k in sorted(set(saved) | set(now)):
        was, given = saved.get(k, ABSENT), now.get(k, ABSENT)
        if k in may_change or was == given:
            continue
        if isinstance(was, dict) and isinstance(given, dict):
            out += changed_fields(was, given, prefix=f"{prefix}{k}.")
        else:
            out.append((prefix + k, was, given))
    return out


def refusal(workdir: str, version: int, field: str, was, given) -> ConfigError:
    """The one line of a resume refused for ``field`` (``changed_fields``' first), saved
    as ``was``, now ``given``, in a run of format ``version``: a field one side lacks (but
    an algorithm's own or an env argument) is the version's doing, which no value given can
    mend."""
    fresh = "or pass --fresh to move the previous run aside and start over"
    named = field.startswith((ALGO, ENV_KWARGS))  # a name the user gives, not a field
    if not named and given is ABSENT:
        return ConfigError(
            f"{field}: {workdir} was written by another podracer-rl (run format {version}) "
            f"with a field this version does not have ({field}={_shown(was)}), so this "
            f"version cannot continue it; continue it with that version, {fresh}")
    if not named and was is ABSENT:
        return ConfigError(
            f"{field}: {workdir} was written by an older podracer-rl (run format {version}) "
            f"without this field, and this version has no value that continues it; continue "
            f"it with that version, {fresh}")
    return ConfigError(
        f"{field}: the checkpoint in {workdir} was made with {_shown(was)}, not "
        f"{_shown(given)}; resume with the same value, use a new --workdir, {fresh}")


def _shown(value) -> str:
    """A value of a refused resume's line: its repr, cut to ``SHOWN_CHARS``; ``no value``
    for a field the config lacks."""
    if value is ABSENT:
        return "no value"
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."


def check_files(workdir: str, config) -> None:
    """``check_same_config`` from the files alone: the newest checkpoint is the newest
    finished step's name (none: nothing to check, the run starts over), the sizes are
    ``runtime.config.validation.derive``'s. For a config whose fields passed
    ``runtime.config.validation.validate_fields``.

    Raises:
      ConfigError: ``check_same_config``'s line.
    """
    from runtime.run.checkpoint import Checkpointer  # orbax's rule of a finished step's name

    steps = Checkpointer.finished_steps(workdir)
    if steps:
        sizes = derive(config)
        check_same_config(workdir, config, sizes.num_updates, sizes.steps_per_update,
                          steps[-1])
