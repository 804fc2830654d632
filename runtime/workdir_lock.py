"""One run per workdir: an advisory lock that the training run's process 0 holds.

``hold(workdir)`` takes an exclusive ``fcntl.flock`` on ``workdir/run.lock`` without
waiting and keeps the file open until the process ends, so the kernel releases it however
the process ends (a ``kill -9`` leaves no stale lock). The file holds the holder's host,
pid and start time, which the refusal of a second run names. Only process 0 of a
multi-process run takes it (the others write nothing of their own there). Imports no
library, so a second run is refused before JAX loads its backends.
"""

from __future__ import annotations

import datetime
import fcntl
import os
import socket

from rlcore.errors import ConfigError
from runtime import run_files

_held: dict[str, int] = {}  # absolute workdir -> the open, locked descriptor


def holder_text() -> str:
    """``"host <name>, pid <pid>, since <UTC time>"`` of this process."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    return f"host {socket.gethostname()}, pid {os.getpid()}, since {now}"


def hold(workdir: str) -> None:
    """Takes the lock of ``workdir`` (an existing, writable directory) for the rest of this
    process; a no-op when this process holds it already.

    Raises:
      ConfigError: ``"--workdir: <path> is in use by another run (host ..., pid ...,
      since ...); ..."`` when another process holds it.
    """
    key = os.path.abspath(workdir)
    if key in _held:
        return
    fd = os.open(run_files.lock_path(workdir), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 512).decode(errors="replace").strip() or "holder unknown"
        os.close(fd)
        raise ConfigError(f"--workdir: {workdir} is in use by another run ({holder}); wait "
                          "for it to end or stop it, or pass another --workdir") from None
    os.ftruncate(fd, 0)
    os.write(fd, (holder_text() + "\n").encode())
    _held[key] = fd


def release(workdir: str) -> None:
    """Gives the lock of ``workdir`` back (tests; a run keeps it until it exits)."""
    fd = _held.pop(os.path.abspath(workdir), None)
    if fd is not None:
        os.close(fd)
