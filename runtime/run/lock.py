"""One run per workdir: an advisory lock that the training run's process 0 holds.

``hold(workdir)`` takes an exclusive ``fcntl.flock`` on ``workdir/run.lock`` without
waiting and keeps the file open until the process ends, so the kernel releases it however
the process ends (a ``kill -9`` leaves no stale lock); a run that ends cleanly removes the
file (``release(workdir, remove=True)``). The file holds the holder's host,
pid and start time, which the refusal of a second run names; a multi-process run's
process 0 adds the run's coordinator address (``run_tag``). The other processes of such a
run write nothing there: ``check_free`` refuses them when a run other than theirs holds
the lock (the launcher checks it too, before it starts any process). Imports no library,
so a second run is refused before JAX loads its backends. See docs/design.md, "Run
directory".
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os
import socket
import time

from rlcore.errors import ConfigError
from runtime.run import files

# How long a refusal waits for a lock held only for a moment: another process's
# ``check_free`` holds it shared for microseconds, and a holder writes its text just after
# taking it.
SETTLE_S = 1.0
_POLL_S = 0.02

_held: dict[str, int] = {}  # absolute workdir -> the open, locked descriptor


def run_tag(num_processes: int, coordinator_address: str) -> str:
    """What the lock file of a multi-process run names it by (``"coordinator
    host:port"``; its processes read it to know the lock is their run's); ``""`` for a
    single-process run."""
    return f"coordinator {coordinator_address}" if num_processes > 1 else ""


def holder_text(run: str = "") -> str:
    """``"host <name>, pid <pid>, since <UTC time>"`` of this process, then ``", <run>"``
    where ``run`` (``run_tag``) is given."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    text = f"host {socket.gethostname()}, pid {os.getpid()}, since {now}"
    return f"{text}, {run}" if run else text


def refusal(workdir: str, holder: str) -> ConfigError:
    """The one-line refusal of a workdir that ``holder`` (its lock file's text) holds."""
    return ConfigError(f"--workdir: {workdir} is in use by another run "
                       f"({holder or 'holder unknown'}); wait for it to end or stop it, or "
                       "pass another --workdir")


def hold(workdir: str, run: str = "") -> None:
    """Takes the lock of ``workdir`` (an existing, writable directory) for the rest of this
    process, writing ``holder_text(run)`` into it; a no-op when this process holds it
    already.

    Raises:
      ConfigError: ``"--workdir: <path> is in use by another run (host ..., pid ...,
      since ...); ..."`` when another process holds it.
    """
    key = os.path.abspath(workdir)
    if key in _held:
        return
    fd = os.open(files.lock_path(workdir), os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + SETTLE_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                holder = _read(fd)
                os.close(fd)
                raise refusal(workdir, holder) from None
            time.sleep(_POLL_S)
    os.ftruncate(fd, 0)
    os.write(fd, (holder_text(run) + "\n").encode())
    _held[key] = fd


def check_free(workdir: str, run: str = "") -> None:
    """Refuses when a run other than ``run`` (``run_tag``; ``""``: any run) holds the lock
    of ``workdir``; writes and creates nothing. For the processes of a multi-process run
    other than process 0, and for the launcher before it starts them.

    Raises:
      ConfigError: ``refusal``'s line.
    """
    path = files.lock_path(workdir)
    deadline = time.monotonic() + SETTLE_S
    while True:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:  # no lock file (never held), or none readable: nothing to check
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return  # nobody holds it (closing the file lets it go at once)
        except BlockingIOError:
            holder = _read(fd)
        finally:
            os.close(fd)
        if run and holder.endswith(f", {run}"):
            return  # this run's process 0
        if time.monotonic() > deadline:
            raise refusal(workdir, holder)
        time.sleep(_POLL_S)


def _read(fd: int) -> str:
    """The holder text of an open lock file."""
    os.lseek(fd, 0, os.SEEK_SET)
    return os.read(fd, 512).decode(errors="replace").strip()


def release(workdir: str, remove: bool = False) -> None:
    """Gives the lock of ``workdir`` back, and with ``remove`` deletes its file (a run that
    ended cleanly: a finished run directory holds no ``run.lock``)."""
    fd = _held.pop(os.path.abspath(workdir), None)
    if fd is None:
        return
    if remove:
        with contextlib.suppress(OSError):
            os.unlink(files.lock_path(workdir))
    os.close(fd)
