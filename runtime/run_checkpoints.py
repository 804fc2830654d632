"""A resume's choice of checkpoint: the newest that restores.

A damaged newer one is reported in one line naming its path and moved aside to
``checkpoints/damaged-<step>``; when none restores the run stops (``CheckpointError``) and
leaves them all in place. See docs/design.md, "Signals and checkpoints".
"""

from __future__ import annotations

import sys

from runtime import distributed
from runtime.checkpoint import Checkpointer, CheckpointError, DamagedCheckpoint
from runtime.run_lines import damaged_line


def restore_newest_good(ckpt: Checkpointer, fresh_state, steps: list[int], main: bool):
    """The newest of ``steps`` (oldest first) that restores into ``fresh_state``'s
    structure, as ``(state, step)``.

    Each newer one that did not restore is reported in one line and moved aside, only
    once an older one restored: a failure they all share moves nothing. ``main``: this is
    the process that reports and moves.

    Raises:
      CheckpointError: none restores (all left in place).
    """
    damaged: list[DamagedCheckpoint] = []
    for step in reversed(steps):
        try:
            state = ckpt.restore_checked(fresh_state, step)
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
