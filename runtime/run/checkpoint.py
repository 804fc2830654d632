"""Orbax checkpoints of a whole train state.

A save is atomic: orbax writes ``<step>.orbax-checkpoint-tmp`` and renames it to ``<step>``
once every file is written, and lists only names that are plain step numbers, so a process
killed mid-save (even by SIGKILL) leaves the previous checkpoints as they were and the
half-written one is never taken as a step. A trainer's ``Checkpointer`` removes such
leftovers when it opens the directory (``cleanup_tmp``).

A checkpoint damaged later (a truncated array file, missing metadata) fails to restore:
``restore_checked`` reports it as a ``DamagedCheckpoint`` naming its path, and
``set_aside`` moves it to ``checkpoints/damaged-<step>`` so that the steps list no longer
holds it.

A resume takes the newest checkpoint that restores (``restore_newest_good``): a damaged
newer one is reported in one line naming its path and moved aside; when none restores the
run stops (``CheckpointError``) and leaves them all in place. See docs/design.md, "Signals
and checkpoints".
"""

from __future__ import annotations

import logging
import os
import re
import sys

import jax
import orbax.checkpoint as ocp
from etils import epath

from runtime import distributed
from runtime.run import files as run_files
from runtime.run import older_state
from runtime.run.lines import damaged_line

REASON_CHARS = 200


class CheckpointError(RuntimeError):
    """A run cannot resume from its checkpoints; the message is one line naming the path."""


# The config fields that may name the user's own code by import path (docs/design.md,
# "Your own code").
OWN_CODE_FIELDS = ("env_id", "network", "algorithm")


def own_code(config) -> tuple[str, ...]:
    """``FIELD=PACKAGE.MODULE:NAME`` of each field of ``config`` that names the user's own
    code (an env, network or algorithm of theirs), in ``OWN_CODE_FIELDS``' order."""
    from rlcore.imports import is_import_path

    return tuple(f"{f}={config.get(f)}" for f in OWN_CODE_FIELDS
                 if is_import_path(config.get(f)))


def unfit_cause(code: tuple[str, ...]) -> str:
    """Why a readable checkpoint does not fit a run that names the user's ``code``
    (``own_code``): that code changed since it was written; "" for a run of built-in code
    only."""
    if not code:
        return ""
    return (f"your own code ({', '.join(code)}) changed since it was written: its params' or "
            "state's shapes no longer fit")


class IncompatibleCheckpoint(CheckpointError):
    """Checkpoint ``step`` at ``path`` is readable but holds a train state this run cannot
    continue, for ``reason`` (``runtime.run.older_state``): never moved aside. ``code``:
    the user's code the run names (``own_code``); the line then blames its change, not the
    version (docs/design.md, "Runs outlive upgrades")."""

    def __init__(self, step: int, path: str, reason: str, code: tuple[str, ...] = ()):
        cause = unfit_cause(code)
        super().__init__(
            f"{path} holds a train state that does not fit this run ({reason}): {cause}; "
            "restore that code to continue or evaluate it, or pass --fresh to start over"
            if cause else
            f"{path} holds a train state this version cannot continue ({reason}); continue "
            "or evaluate it with the version that wrote it, or pass --fresh to start over")
        self.step, self.path, self.reason, self.code = step, path, reason, code


class DamagedCheckpoint(CheckpointError):
    """Checkpoint ``step`` at ``path`` did not restore, for ``reason`` (one short line)."""

    def __init__(self, step: int, path: str, reason: str):
        super().__init__(f"{path} is damaged ({reason})")
        self.step, self.path, self.reason = step, path, reason


def short_reason(error: BaseException, root: str | None = None) -> str:
    """One line of at most ``REASON_CHARS`` characters saying why a restore failed.

    A tensorstore error (``CODE: Error opening ... driver: ...: <cause> [tensorstore_spec=
    ...]``) becomes ``CODE: <cause> (file <the file it read last>)``; any other error its
    type and first line. Paths under ``root`` are written relative to it.
    """
    lines = [ln for ln in str(error).splitlines() if ln.strip()]
    first = " ".join(lines[0].split()).split(" [tensorstore_spec")[0] if lines else ""
    if root:
        first = first.replace(root.rstrip(os.sep) + os.sep, "")
    status = re.fullmatch(r"([A-Z][A-Z_]+): (.*)", first)
    if status is not None:
        code, rest = status.groups()
        rest = re.sub(r'Error opening "\w+" driver: ', "", rest)  # the driver layers
        files = list(re.finditer(r'local file "([^"]*)": ', rest))
        if files:
            rest = f"{rest[files[-1].end():]} (file {files[-1].group(1)})"
        text = f"{code}: {rest}"
    else:
        text = f"{type(error).__name__}: {first}" if first else type(error).__name__
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 3] + "..."


def drop_late_read_errors() -> None:
    """From now on, drops the ``RuntimeError('Event loop is closed')`` that tensorstore's
    reads still pending when a restore failed raise as they complete (orbax has closed the
    restore's event loop by then): through ``sys.unraisablehook`` each would print a
    traceback, dozens per failed restore. Any other unraisable error goes to the previous
    hook. Installed once per process."""
    previous = sys.unraisablehook
    if getattr(previous, "drops_closed_loop_errors", False):
        return

    def hook(unraisable):
        error = unraisable.exc_value
        if not (isinstance(error, RuntimeError) and str(error) == "Event loop is closed"):
            previous(unraisable)

    hook.drops_closed_loop_errors = True
    sys.unraisablehook = hook
    # The other reads of a failed restore end as futures nobody awaits; asyncio logs each
    # ("Task exception was never retrieved") with its traceback. Only orbax's are dropped.
    logging.getLogger("asyncio").addFilter(_drop_orbax_task_errors)


def _drop_orbax_task_errors(record: logging.LogRecord) -> bool:
    """Logging filter: False for asyncio's report of an unawaited failed orbax read."""
    message = record.getMessage()
    return not (message.startswith("Task exception was never retrieved")
                and "orbax" in message)


def step_dir(directory: str, step: int) -> str:
    """The directory of checkpoint ``step`` in ``directory`` (orbax's standard name: the
    bare number)."""
    return os.path.join(directory, str(step))


class Checkpointer:
    """Saves and restores a train-state pytree under ``<workdir>/checkpoints``.

    Args:
      workdir: run directory.
      max_to_keep: checkpoints kept on disk.
      cleanup_tmp: remove half-written checkpoints a killed process left behind. Only for
        the process that writes checkpoints (a reader, e.g. an evaluation of a live run,
        would delete the trainer's save in progress).
    """

    def __init__(self, workdir: str, max_to_keep: int = 3, *, cleanup_tmp: bool = False):
        self.directory = run_files.checkpoints_dir(workdir)
        self._manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True,
                                                 cleanup_tmp_directories=cleanup_tmp),
        )

    @staticmethod
    def finished_steps(workdir: str) -> list[int]:
        """The finalized steps in ``workdir/checkpoints``, oldest first, read without
        opening a manager (which would create the directory and log about step folders
        without metadata): what a reader such as the evaluate commands checks first; ``[]``
        when there is no checkpoint directory."""
        directory = run_files.checkpoints_dir(workdir)
        if not os.path.isdir(directory):
            return []
        return sorted(ocp.utils.checkpoint_steps(directory))

    def latest_step(self) -> int | None:
        """The newest finalized step (half-written ones are never listed), or None."""
        return self._manager.latest_step()

    def steps(self) -> list[int]:
        """Every finalized step on disk, oldest first."""
        return sorted(self._manager.all_steps())

    def step_path(self, step: int) -> str:
        """The directory of checkpoint ``step`` (``step_dir``)."""
        return step_dir(self.directory, step)

    def save(self, step: int, state) -> None:
        """Writes ``state`` as checkpoint ``step`` and waits until it is on disk."""
        if step in self._manager.all_steps():
            return
        self._manager.save(step, args=ocp.args.StandardSave(state))
        self._manager.wait_until_finished()

    def restore(self, like, step: int | None = None):
        """Restores checkpoint ``step`` (default latest) into the structure and shardings of
        ``like``, a fresh train state; a checkpoint of an earlier version's structure by
        ``runtime.run.older_state``'s rule (parts it lacks keep ``like``'s values).

        Raises:
          older_state.StateMismatch: it holds an array that ``like`` has no place for.
        """
        step = self.latest_step() if step is None else step
        saved = older_state.saved_structure(self.step_path(step))
        changed = older_state.difference(like, saved)

        def restore(item):
            abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, item)
            return self._manager.restore(step, args=ocp.args.StandardRestore(abstract))

        if not (changed.added or changed.dropped):
            return restore(like)
        return older_state.restore_older(restore, like, saved)

    def restore_part(self, like, at: older_state.Path, step: int):
        """The part of checkpoint ``step`` at key path ``at`` (e.g. ``("learner",
        "params")``) restored into the structure, shapes and shardings of ``like``; the rest
        of the checkpoint is not read (orbax's partial restore). What a policy needs of a
        train state: docs/design.md, "Evaluation".

        Raises:
          older_state.StateMismatch: the checkpoint holds no such part, or one of another
            structure or shape than ``like``.
        """
        saved = older_state.saved_structure(self.step_path(step))
        older_state.check_part(like, older_state.subtree(saved, at), at)
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
        for name in reversed(at):
            abstract = {name: abstract}
        args = jax.tree.map(lambda s: ocp.ArrayRestoreArgs(
            sharding=s.sharding, global_shape=s.shape, dtype=s.dtype), abstract)
        restored = ocp.PyTreeCheckpointer().restore(
            epath.Path(self.step_path(step)) / older_state.ITEM,
            args=ocp.args.PyTreeRestore(item=abstract, restore_args=args,
                                        partial_restore=True))
        return older_state.subtree(restored, at)

    def restore_checked(self, like, step: int, at: older_state.Path | None = None,
                        code: tuple[str, ...] = ()):
        """``restore(like, step)`` (``at``: ``restore_part(like, at, step)``), with any
        failure to read it as one line (``code``: the user's code the run names,
        ``own_code``).

        Raises:
          DamagedCheckpoint: the checkpoint did not restore (files truncated, overwritten or
            missing).
          IncompatibleCheckpoint: it is readable but not a state ``like``'s version can
            continue (another architecture's, or one that ``older_state`` cannot upgrade).
        """
        drop_late_read_errors()
        try:
            return self.restore(like, step) if at is None else self.restore_part(like, at, step)
        except older_state.StateMismatch as e:
            raise IncompatibleCheckpoint(step, self.step_path(step), str(e), code) from None
        except Exception as e:  # noqa: BLE001 - tensorstore/orbax raise many types
            path = self.step_path(step)
            raise DamagedCheckpoint(step, path, short_reason(e, path)) from e

    def set_aside(self, step: int) -> str:
        """Moves checkpoint ``step`` to ``damaged-<step>`` (``damaged-<step>-2``, ... when
        taken) beside it, out of the steps list; returns the new path."""
        target = os.path.join(self.directory, f"damaged-{step}")
        n = 1
        while os.path.exists(target):
            n += 1
            target = os.path.join(self.directory, f"damaged-{step}-{n}")
        os.rename(self.step_path(step), target)
        self.reload()
        return target

    def reload(self) -> None:
        """Rereads the steps on disk (after another process changed them)."""
        self._manager.reload()

    def close(self) -> None:
        self._manager.close()


def restore_newest_good(ckpt: Checkpointer, fresh_state, steps: list[int], main: bool,
                        code: tuple[str, ...] = ()):
    """The newest of ``steps`` (oldest first) that restores into ``fresh_state``'s
    structure, as ``(state, step)``.

    Each newer one that did not restore is reported in one line and moved aside, only
    once an older one restored: a failure they all share moves nothing. ``main``: this is
    the process that reports and moves; ``code``: the user's code the run names
    (``own_code``).

    Raises:
      CheckpointError: none restores (all left in place).
    """
    damaged: list[DamagedCheckpoint] = []
    for step in reversed(steps):
        try:
            state = ckpt.restore_checked(fresh_state, step, code=code)
        except DamagedCheckpoint as e:
            damaged.append(e)
            continue
        if damaged:
            set_aside_damaged(ckpt, damaged, step, main)
        return state, step
    older = ", ".join(str(d.step) for d in damaged[1:])
    tail = f"no older one restores either (tried {older})" if older else "no older one"
    raise CheckpointError(
        f"{damaged[0]}; {tail}; left in place: move {ckpt.directory} aside, or rerun "
        f"with --fresh to start over")


def set_aside_damaged(ckpt: Checkpointer, damaged: list[DamagedCheckpoint], good_step: int,
                      main: bool) -> None:
    """Moves the ``damaged`` checkpoints aside, each said in one line (``main`` process);
    the other processes wait for it and reread the steps, so that all of them save
    those steps anew."""
    if main:
        for bad in damaged:
            moved = ckpt.set_aside(bad.step)
            print(damaged_line(bad, moved, good_step), file=sys.stderr)
    if distributed.device_counts().processes > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("damaged checkpoints set aside")
        ckpt.reload()
