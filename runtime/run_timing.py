"""``timing.json``: a run's first call and its whole training time, so that a reader can
tell compile time from steady-state time."""

from __future__ import annotations

import json
import time

from runtime import run_files
from runtime.atomic_file import write_atomically


class RunTiming:
    """The first call's figures of a run, kept until ``write``."""

    def __init__(self):
        self.first_call: dict = {}

    def first_call_done(self, updates: int, seconds: float, compile_s: float | None) -> None:
        """Keeps the first call: ``updates`` updates in ``seconds`` (compile included,
        unless ``compile_s``, the ahead-of-time compile's seconds, is given)."""
        total_s = seconds + (compile_s or 0.0)
        self.first_call = {"first_call_updates": int(updates), "first_call_s": float(total_s)}
        if compile_s is not None:
            self.first_call["compile_s"] = float(compile_s)

    def write(self, workdir: str, logger) -> None:
        """Writes ``timing.json``: the first call and the training time since ``logger``
        (``runtime.metrics.MetricsLogger``) opened (``train_s``), over updates
        ``start_update .. end_update``; nothing before a first call or a logged line."""
        if not (self.first_call and logger.history):
            return
        timing = dict(self.first_call, start_update=logger.start_update,
                      end_update=logger.history[-1]["update"],
                      train_s=time.perf_counter() - logger.start)
        write_atomically(run_files.timing_path(workdir), json.dumps(timing))
