"""The run directory both trainers hold: one ``RunDir`` over the parts that do each job.

- when to log, checkpoint and evaluate: ``runtime.run.cadence``;
- the open log windows (the means a metrics line holds, saved with each checkpoint as
  ``log_state/``, and the metrics lines past a checkpoint dropped on resume):
  ``runtime.run.windows``; the metrics sinks: ``runtime.run.metrics``;
- whether a resume may go on with this config (``config.json``): ``runtime.run.resume``;
- which checkpoint a resume takes (the newest that restores; damaged ones moved aside):
  ``runtime.run.checkpoint``;
- ``timing.json``: ``runtime.run.files``; the console lines: ``runtime.run.lines``;
- ``curve.png``, drawn from ``metrics.jsonl`` as the run closes: ``runtime.run.curves``.

A resumed run's ``metrics.jsonl`` equals an uninterrupted run's except for clock keys.
Signals and the wall-clock cadence are the trainers' business: each loop agrees on them
across processes (``distributed.agree_after_call``, ``StopBoard``, ``ClockBoard``) and hands
the result to ``checkpoint_or_exit``, which checkpoints before the run exits. See
docs/design.md, "Run directory", and docs/design.md, "Signals and checkpoints".
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable

from rlcore.errors import ConfigError
from runtime import distributed
from runtime.process import failure, signals
from runtime.run import cadence, resume
from runtime.run.checkpoint import Checkpointer, own_code, restore_newest_good
from runtime.run.console import Ticker
from runtime.run.curves import CURVE, RETURN_LABEL, write_run_curve
from runtime.run.files import RunTiming
from runtime.run.lines import (
    asked_stop_line,
    compiling_line,
    extension_line,
    first_call_line,
    first_rollout_line,
    resuming_line,
    still_compiling_line,
    stopping_line,
)
from runtime.run.metrics import MetricsLogger, wandb_settings, write_config
from runtime.run.population import append_history, truncate_history
from runtime.run.summary import whole_run
from runtime.run.windows import LogWindows, truncate_metrics

COMPILE_EVERY_S = 30.0  # a line this often while a compile lasts


class RunDir:
    """One run's directory (or none: ``workdir=None`` logs to the console only).

    Args:
      config: the run config (``log_every``, ``checkpoint_every``).
      workdir: run directory or None.
      total_updates: updates in the run.
      steps_per_update: env steps per update over all envs (of one agent).
      agent_tags: one dict per agent that goes into its metrics lines (e.g. ``{"seed": 3}``)
        when a run trains several agents; None: one agent, lines without tags.
      return_label: ``curve.png``'s y axis.
      on_row: called with a copy of each ``metrics.jsonl`` row as it is logged (the Python
        entry points' progress callback), or None. A row for which it returns ``False``
        stops the run after that update (``stopped``; docs/design.md, "From Python").

    Attributes:
      stopped: the update whose row ``on_row`` returned ``False`` for, or None: the
        trainer's loop ends after it, once ``checkpoint_or_exit`` has saved it.
    """

    def __init__(self, config, workdir: str | None, total_updates: int, steps_per_update: int,
                 agent_tags: list[dict] | None = None, return_label: str = RETURN_LABEL,
                 on_row: Callable[[dict], None] | None = None):
        self.config = config
        self.on_row = on_row
        self.stopped: int | None = None
        self.return_label = return_label  # curve.png's y axis (the env's)
        self.workdir = workdir
        self.total = total_updates
        self.steps_per_update = steps_per_update
        self.main = distributed.is_main_process()
        self.ckpt = Checkpointer(workdir, cleanup_tmp=True) if workdir else None
        self.logger: MetricsLogger | None = None
        self.agent_tags = agent_tags or [{}]
        self.windows = LogWindows(self.agent_tags)
        self.timing = RunTiming()
        self.saved_at = time.monotonic()  # the last checkpoint's time, or the start's
        self.opened = time.perf_counter()  # wall_time counts from here (compile included)
        self._note_checkpoint(None)

    def resumes(self) -> bool:
        """Whether the workdir holds checkpoints, so that ``restore_or`` resumes from one."""
        return bool(self.ckpt is not None and self.ckpt.steps())

    def restore_or(self, fresh_state):
        """The newest checkpoint that restores, in ``fresh_state``'s structure, or
        ``fresh_state`` when there is none; opens the metrics sinks.

        Raises:
          ConfigError: resuming with a config that changes the data or the math.
          CheckpointError: there are checkpoints, but none restores.
          RunComplete: the run is already at its last update.
        """
        steps = self.ckpt.steps() if self.ckpt is not None else []
        state, start = fresh_state, 0
        if not steps:
            if self.workdir and self.main:
                write_config(self.workdir, self.config)
                # A run that died before its first checkpoint starts over: its lines go.
                truncate_metrics(self.workdir, 0)
                truncate_history(self.workdir, 0)
        else:
            state, start = self._resume(fresh_state, steps)
        self._open_logger(start)
        if start:
            self.windows.load(self.workdir, start)
            if self.main:  # the last known return of the lines before the checkpoint
                self.logger.recall(whole_run(self.workdir, []))
        self._note_checkpoint(start)
        self.saved_at = time.monotonic()
        return state

    def _note_checkpoint(self, update: int | None) -> None:
        """Tells the signal handlers the last checkpoint on disk (None: not known yet), for
        their lines (``runtime.process.signals.Signals.kept``), and whether they print them."""
        handlers = signals.current()
        if handlers is not None:
            handlers.console = self.main
            handlers.note_checkpoint(update, workdir=self.ckpt is not None)

    def _resume(self, fresh_state, steps: list[int]):
        """``(state, update)`` of the newest of ``steps`` that restores, once the config
        may resume it; process 0 says so and drops the metrics lines past it."""
        extended_from = resume.check_same_config(self.workdir, self.config, self.total,
                                                 self.steps_per_update, steps[-1])
        state, start = restore_newest_good(self.ckpt, fresh_state, steps, self.main,
                                           own_code(self.config))
        resume.check_not_complete(self.workdir, start, self.total, self.steps_per_update)
        if self.main:
            print(resuming_line(start), file=sys.stderr)
            if extended_from is not None:
                print(extension_line(extended_from, self.config, self.total),
                      file=sys.stderr)
                write_config(self.workdir, self.config)  # the next resume compares to it
            truncate_metrics(self.workdir, start)
            truncate_history(self.workdir, start)
        return state, start

    def _open_logger(self, start: int) -> None:
        """Opens the metrics sinks at update ``start``; only process 0 writes and prints
        (one progress line per log step for the run)."""
        wandb = wandb_settings(self.config, self.workdir)
        failed = None
        try:
            self.logger = MetricsLogger(self.workdir, self.total, write=self.main,
                                        console=self.main, wandb=wandb,
                                        start=(start, start * self.steps_per_update),
                                        agents=self.agent_tags, opened=self.opened)
        except ConfigError as e:  # W&B would not start (process 0 only starts it)
            failed = e
        if wandb and not distributed.all_processes_agree(failed is None):
            # Every process stops here, not only process 0 (the others would wait for it in
            # their first collective until the heartbeat timeout).
            raise failed or ConfigError("wandb_mode: W&B could not start a run on process 0 "
                                        "(its error says why)")
        if failed is not None:
            raise failed

    def record(self, update: int, scalars, episodes, sps: float | None = None,
               at: float | None = None) -> None:
        """Adds update ``update``'s scalars and the episodes that ended in it; writes a log
        line (window means) per agent when one is due.

        Args:
          update: the update just done (1-based).
          scalars: ``{name: float}``, or a list of them, one per agent.
          episodes: EpisodeSummary, or a list of them, one per agent.
          sps: per-agent env steps per second (default: measured between log lines).
          at: ``time.perf_counter()`` when the update finished (default: now); a trainer
            that runs several updates per call spreads them over the call.

        Raises:
          FloatingPointError: an agent's ``loss/total`` is not finite.
        """
        self.windows.add(update, scalars, episodes)
        if cadence.log_due(update, self.config.log_every, self.total):
            rows = self.logger.log_agents(update, update * self.steps_per_update,
                                          self.windows.take(), sps=sps, at=at)
            for row in rows if self.on_row is not None else ():
                if self.on_row(dict(row)) is False and self.stopped is None:
                    self.stopped = update

    def record_population(self, lines: list[dict]) -> None:
        """Appends a population's history lines (``runtime.run.population``) to
        ``pbt.jsonl`` (process 0 of a run with a workdir)."""
        if self.workdir and self.main:
            append_history(self.workdir, lines)

    def checkpoint_due(self, update: int, previous: int) -> bool:
        """Whether the updates ``previous + 1 .. update`` reached a checkpoint point."""
        return cadence.checkpoint_due(update, previous, self.config.checkpoint_every,
                                      self.total)

    def clock_due(self) -> bool:
        """Whether ``checkpoint_every_minutes`` have passed since the last checkpoint (or
        the start) on this process's clock; the trainers agree on it across processes
        before they pass it to ``checkpoint_or_exit``."""
        return self.ckpt is not None and cadence.clock_due(
            self.saved_at, time.monotonic(), self.config.checkpoint_every_minutes)

    def checkpoint_or_exit(self, update: int, previous: int, state,
                           exit_code: int | None, in_flight: int | None = None,
                           clock: bool = False) -> None:
        """After updates ``previous + 1 .. update``: checkpoints when due (by updates, or
        by the clock: ``clock``, agreed by every process) or when the run stops, on a signal
        (``exit_code`` 130/143, agreed by every process; then exits) or because ``on_row``
        asked (``stopped``; the trainer's loop then ends after this update).

        Args:
          in_flight: the update a signal abandoned while it ran (Sebulba), for the line;
            ``state`` is then the one before it, ``update``'s.
          clock: a wall-clock checkpoint is due (``clock_due`` of process 0).

        Raises:
          SystemExit: ``exit_code``, once the checkpoint is written (none at update 0: a
            rerun starts over the same way).
        """
        handlers = signals.current()
        if exit_code is not None and handlers is not None:
            handlers.acting()  # the watcher lets this checkpoint finish
        if exit_code is not None and self.main and not (handlers and handlers.announced):
            print(stopping_line(exit_code, update, self.ckpt is not None, in_flight),
                  file=sys.stderr, flush=True)
        stops = exit_code is not None or self.stopped is not None
        if (self.checkpoint_due(update, previous) or (clock and update > previous)
                or (stops and update > 0)):
            self.save(update, state)
        if self.stopped is not None and exit_code is None and self.main:
            print(asked_stop_line(self.stopped, update, self.ckpt is not None),
                  file=sys.stderr, flush=True)
        if exit_code is not None:
            raise SystemExit(exit_code)

    def save(self, update: int, state) -> None:
        """Checkpoints ``state`` as ``update``, with the open log window beside it.

        The window is written first, atomically, so that every checkpoint has its window
        whenever the process dies (a window without its checkpoint is harmless).
        """
        if self.ckpt is None:
            return
        if self.main:
            self.windows.save(self.workdir, update)
        with failure.doing(f"saving checkpoint {update} in {self.ckpt.directory}"):
            self.ckpt.save(update, state)
        self.saved_at = time.monotonic()
        self._note_checkpoint(update)

    @contextlib.contextmanager
    def compiling(self, updates: int):
        """While Anakin compiles its training call of ``updates`` updates: one line that
        says so, then one every ``COMPILE_EVERY_S`` while it lasts, with the time so far
        (process 0). Meanwhile XLA's native output (its slow-compile banner) goes to the
        errors file, not the console (``failure.NativeOutput``)."""
        if self.main:
            print(compiling_line(updates), file=sys.stderr, flush=True)
        start = time.perf_counter()
        ticker = Ticker(lambda now: still_compiling_line(now - start),
                        first_s=COMPILE_EVERY_S, every_s=COMPILE_EVERY_S, enabled=self.main)
        with failure.NativeOutput(failure.captured()), ticker:
            yield

    def first_rollout(self, seconds: float, actors: str = "") -> None:
        """Reports on the console that the learner got its first rollout (Sebulba: the
        actors compiled their policy and stepped their envs), ``seconds`` after the start,
        from ``actors`` (``runtime.run.lines.first_rollout_line``)."""
        if self.main:
            print(first_rollout_line(seconds, actors), file=sys.stderr, flush=True)

    def first_call_done(self, updates: int, seconds: float, *, compile_s: float | None = None,
                        steady_from: tuple[int, float] | None = None,
                        from_cache: bool = False) -> None:
        """Reports the run's first call on the console and keeps it for ``timing.json``.

        Args:
          updates: updates the call ran.
          seconds: its time: compile included, unless ``compile_s`` is given (compiled
            ahead of time, Anakin), then the call's own.
          compile_s: the ahead-of-time compile's seconds, or None.
          steady_from: ``(update, perf_counter time)`` from which the run's time per update
            is steady (no compile in it), for the ETA and SPS; None: from now on.
          from_cache: the persistent compile cache served the compile.
        """
        if self.main:
            print(first_call_line(updates, seconds, compile_s, from_cache), file=sys.stderr)
        self.timing.first_call_done(updates, seconds, compile_s)
        if self.logger is not None:
            update, at = steady_from or (self.logger.start_update + updates,
                                         time.perf_counter())
            self.logger.steady_from(update, at, update * self.steps_per_update)

    @property
    def history(self) -> list[dict]:
        return self.logger.history if self.logger is not None else []

    def close(self) -> None:
        """Writes timing.json and closes the metrics sinks and the checkpoint manager (each
        even after another failed: their threads stop), then raises the first failure."""
        closers = []
        if self.logger is not None:
            closers += [self._write_timing, self.logger.close, self._write_curve]
        if self.ckpt is not None:
            closers.append(self.ckpt.close)
        failure.close_all(*closers)

    def _write_curve(self) -> None:
        """``curve.png`` from the whole ``metrics.jsonl`` (``runtime.run.curves``), by process 0
        of a run with a workdir; a plot that fails is one console line, never the run's
        failure (while the run fails, the line goes to the errors file: the run's failure
        is its one console line)."""
        if not (self.workdir and self.main):
            return
        failing = sys.exc_info()[0]  # closing in a ``finally``: what the run fails with
        try:
            write_run_curve(self.workdir, self.return_label)
        except Exception as e:  # noqa: BLE001 - the plot is a convenience
            line = f"{CURVE}: not written ({type(e).__name__}: {e})"
            if failing is None or issubclass(failing, (SystemExit, KeyboardInterrupt)):
                print(line, file=sys.stderr)
            else:  # the run's own failure is its one console line
                logging.getLogger(__name__).warning(line)

    def _write_timing(self) -> None:
        """``timing.json`` (``runtime.run.files``), by process 0 of a run with a workdir."""
        if self.workdir and self.main:
            self.timing.write(self.workdir, self.logger)
