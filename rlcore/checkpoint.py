"""Orbax checkpoints of a whole train state, and signal handling that checkpoints first."""

from __future__ import annotations

import os
import signal
import threading

import jax
import orbax.checkpoint as ocp


class Checkpointer:
    """Saves and restores a train-state pytree under ``<workdir>/checkpoints``.

    Args:
      workdir: run directory.
      max_to_keep: checkpoints kept on disk.
    """

    def __init__(self, workdir: str, max_to_keep: int = 3):
        self.directory = os.path.join(os.path.abspath(workdir), "checkpoints")
        self._manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True),
        )

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def save(self, step: int, state) -> None:
        """Writes ``state`` as checkpoint ``step`` and waits until it is on disk."""
        if step in self._manager.all_steps():
            return
        self._manager.save(step, args=ocp.args.StandardSave(state))
        self._manager.wait_until_finished()

    def restore(self, like, step: int | None = None):
        """Restores checkpoint ``step`` (default latest) into the structure and shardings of
        ``like``."""
        step = self.latest_step() if step is None else step
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, like)
        return self._manager.restore(step, args=ocp.args.StandardRestore(abstract))

    def close(self) -> None:
        self._manager.close()


class SignalFlag:
    """Records SIGINT/SIGTERM instead of dying, so the loop can checkpoint and exit.

    ``exit_code`` is 130 after SIGINT and 143 after SIGTERM (``None`` when no signal came).
    Use as a context manager; the previous handlers come back on exit. Only the main
    thread can install handlers; elsewhere it is a no-op.
    """

    CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}

    def __init__(self):
        self.exit_code: int | None = None
        self._previous = {}

    def _handle(self, signum, frame):
        self.exit_code = self.CODES[signum]

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in self.CODES:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        return False
