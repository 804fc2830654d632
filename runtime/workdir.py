"""A run directory before a run starts: ``--fresh`` moves the previous run aside.

``set_aside_previous_run`` moves the previous run's files to ``previous-<time>/`` instead of
resuming them; nothing is deleted.
"""

from __future__ import annotations

import datetime
import glob
import os

from runtime import run_files


def set_aside_previous_run(workdir: str) -> str | None:
    """``--fresh``: moves what a run wrote in ``workdir`` (``run_files.RUN_ENTRIES``: checkpoints,
    metrics, config, log windows, event files) into ``workdir/previous-<UTC time>/``;
    returns that folder, or None when there was nothing to move. Nothing is deleted."""
    entries = sorted({p for pattern in run_files.RUN_ENTRIES
                      for p in glob.glob(os.path.join(glob.escape(workdir), pattern))})
    if not entries:
        return None
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target, n = os.path.join(workdir, f"previous-{stamp}"), 1
    while os.path.exists(target):
        n += 1
        target = os.path.join(workdir, f"previous-{stamp}-{n}")
    os.makedirs(target)
    for entry in entries:
        os.rename(entry, os.path.join(target, os.path.basename(entry)))
    return target
