"""The names of what a run writes into its directory, spelled here only.

``--workdir`` holds ``config.json`` (the run's config), ``metrics.jsonl`` (one JSON object a
log step), ``timing.json`` (stage times of the run), ``checkpoints/`` (orbax steps),
``log_state/<update>.json`` (the open log window of each checkpoint), TensorBoard event files
(``events.out.tfevents.*``; with several agents ``tb/<agent>/``, one TensorBoard run each),
``curve.png`` (the learning curve, drawn as the run closes), ``pbt.jsonl`` (a population's
history), ``wandb/`` (when W&B logs) and
``run.lock`` (held by the run that owns the directory: ``runtime.run.lock``; not moved
by ``--fresh``). This module also writes
files whole (``write_atomically``) and ``timing.json`` (``RunTiming``: the first call and
the whole training time, so that a reader can tell compile time from steady-state time).
It imports nothing, so the entry points can check a workdir before any library loads.
"""

from __future__ import annotations

import json
import os
import time

CONFIG = "config.json"
METRICS = "metrics.jsonl"
TIMING = "timing.json"
CHECKPOINTS = "checkpoints"
LOG_STATE = "log_state"
WANDB = "wandb"
TENSORBOARD_GLOB = "events.out.tfevents.*"
TENSORBOARD_AGENTS = "tb"  # one TensorBoard run directory per agent of a many-agent run
CURVE = "curve.png"
LOCK = "run.lock"
PBT_HISTORY = "pbt.jsonl"  # population-based training's history (``runtime.run.population``)

# Everything a run writes (``--fresh`` moves these aside, nothing else).
RUN_ENTRIES = (CHECKPOINTS, LOG_STATE, METRICS, CONFIG, TIMING, WANDB, TENSORBOARD_GLOB,
               TENSORBOARD_AGENTS, CURVE, PBT_HISTORY)


EMPTY_LEFT_OUT = ("errors*.log", TENSORBOARD_GLOB)  # removed from a finished run when empty


def remove_empty(workdir: str) -> list[str]:
    """Removes the files of ``EMPTY_LEFT_OUT`` that hold nothing, in ``workdir`` and in each
    agent's TensorBoard directory (a finished run keeps only files with something in them);
    returns their paths."""
    import glob

    folders = [workdir, *glob.glob(os.path.join(workdir, TENSORBOARD_AGENTS, "*"))]
    removed = []
    for folder in folders:
        for pattern in EMPTY_LEFT_OUT:
            for path in glob.glob(os.path.join(folder, pattern)):
                if os.path.isfile(path) and os.path.getsize(path) == 0:
                    os.remove(path)
                    removed.append(path)
    return removed


def pbt_path(workdir: str) -> str:
    """``workdir/pbt.jsonl``."""
    return os.path.join(workdir, PBT_HISTORY)


def config_path(workdir: str) -> str:
    """``workdir/config.json``."""
    return os.path.join(workdir, CONFIG)


def lock_path(workdir: str) -> str:
    """``workdir/run.lock``."""
    return os.path.join(workdir, LOCK)


def metrics_path(workdir: str) -> str:
    """``workdir/metrics.jsonl``."""
    return os.path.join(workdir, METRICS)


def read_metrics(workdir: str) -> list[dict]:
    """The rows of ``workdir``'s ``metrics.jsonl``, in order; blank lines and a torn line
    (a process killed mid-write) skipped; none where the file is missing or unreadable."""
    rows = []
    try:
        with open(metrics_path(workdir)) as f:
            for line in f:
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    continue
    except OSError:
        return []
    return rows


def timing_path(workdir: str) -> str:
    """``workdir/timing.json``."""
    return os.path.join(workdir, TIMING)


def checkpoints_dir(workdir: str) -> str:
    """The absolute ``workdir/checkpoints`` (orbax wants absolute paths)."""
    return os.path.join(os.path.abspath(workdir), CHECKPOINTS)


def log_state_path(workdir: str, update: int | None = None) -> str:
    """``workdir/log_state`` or, with ``update``, ``workdir/log_state/<update>.json``."""
    directory = os.path.join(workdir, LOG_STATE)
    return directory if update is None else os.path.join(directory, f"{update}.json")


def curve_path(workdir: str) -> str:
    """``workdir/curve.png``."""
    return os.path.join(workdir, CURVE)


def write_atomically(path: str, text: str) -> None:
    """Writes ``text`` to ``path`` through a temporary file and a rename: a reader (or a
    resume after a kill) sees the old file or the new one, never half of one."""
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:  # e.g. a full disk: no half-written temporary file stays
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


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
        (``runtime.run.metrics.MetricsLogger``) opened (``train_s``), over updates
        ``start_update .. end_update``; nothing before a first call or a logged line."""
        if not (self.first_call and logger.history):
            return
        timing = dict(self.first_call, start_update=logger.start_update,
                      end_update=logger.history[-1]["update"],
                      train_s=time.perf_counter() - logger.start)
        write_atomically(timing_path(workdir), json.dumps(timing))
