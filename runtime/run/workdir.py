"""A run directory before a run starts: ``--workdir`` must be a writable directory
(``check_workdir``, before anything compiles), and ``--fresh`` moves the previous run's
files beside the workdir, to ``<workdir>.old-<time>/``, instead of resuming them
(``start_fresh``; nothing is deleted). Beside, not inside: TensorBoard pointed at the workdir
or its parent shows the old run as a run of its own, not as part of the new one.
"""

from __future__ import annotations

import datetime
import glob
import os
import shutil
import sys
import tempfile

from rlcore.errors import ConfigError
from runtime import distributed
from runtime.process.paths import file_in_the_way
from runtime.run import files as run_files


def set_aside_previous_run(workdir: str) -> str | None:
    """``--fresh``: moves what a run wrote in ``workdir`` (``run_files.RUN_ENTRIES``:
    checkpoints, metrics, config, log windows, event files) into a new folder beside it,
    ``<workdir>.old-<UTC time>/`` (``workdir`` made absolute first, so that ``.`` or a
    trailing slash still means beside it); returns that folder, or None when there was
    nothing to move. Nothing is deleted; ``run.lock`` and other files stay. Across file
    systems (a workdir that is its own mount point) the files are copied, then removed.

    Raises:
      ConfigError: a move failed; the folder made for it is removed where it is still empty
        and the line says what to do.
    """
    entries = sorted({p for pattern in run_files.RUN_ENTRIES
                      for p in glob.glob(os.path.join(glob.escape(workdir), pattern))})
    if not entries:
        return None
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = f"{os.path.abspath(workdir)}.old-{stamp}"
    target, n = base, 1
    while os.path.exists(target):
        n += 1
        target = f"{base}-{n}"
    try:
        os.makedirs(target)
        for entry in entries:
            shutil.move(entry, os.path.join(target, os.path.basename(entry)))
    except OSError as e:
        if os.path.isdir(target) and not os.listdir(target):
            os.rmdir(target)
        raise ConfigError(
            f"--fresh: could not move the previous run in {workdir} to {target} "
            f"({e.strerror or e}); move its files out by hand, or use a new --workdir") from None
    return target


def check_workdir(workdir: str | None) -> None:
    """Makes sure ``workdir`` (None or empty: no run directory) is a writable directory,
    creating it if needed, before anything compiles.

    Raises:
      ConfigError: ``"--workdir: <path> ...; <what to do>"``.
    """
    if not workdir:
        return
    hint = "pass a --workdir that is a writable directory or can be created"
    blocker = file_in_the_way(workdir)
    if blocker is not None:
        raise ConfigError(f"--workdir: {workdir} cannot be a directory: {blocker} is a file; "
                          f"{hint}")
    try:
        os.makedirs(workdir, exist_ok=True)
        with tempfile.TemporaryFile(dir=workdir):
            pass
    except OSError as e:
        raise ConfigError(f"--workdir: {workdir} is not usable ({e.strerror}); {hint}") from None
    checkpoints = os.path.join(workdir, run_files.CHECKPOINTS)
    if os.path.exists(checkpoints) and not os.path.isdir(checkpoints):
        raise ConfigError(f"--workdir: {checkpoints} is a file, not a directory; move it "
                          f"away or {hint}")


def start_fresh(workdir: str | None) -> None:
    """``--fresh``: the main process moves the previous run in ``workdir`` aside (one line
    says where); every process waits for it before training starts."""
    if workdir and distributed.is_main_process():
        moved = set_aside_previous_run(workdir)
        if moved is not None:
            print(f"fresh start: moved the previous run in {workdir} to {moved}/",
                  file=sys.stderr)
    if distributed.device_counts().processes > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("fresh start")
