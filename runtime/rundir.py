"""The run directory both trainers share: config.json, metrics (window means), checkpoints.

``RunDir`` owns the cadence rules: a log line every ``log_every`` updates (and at the end)
with the means of the per-update scalars since the previous line; a checkpoint whenever a
multiple of ``checkpoint_every`` is reached or passed (and at the end); a checkpoint before
exiting on a signal. With each checkpoint it keeps the open log window (``log_state/``), and
a resume drops metrics lines past the checkpoint, so a resumed run's ``metrics.jsonl`` equals
an uninterrupted run's except for clock keys. ``train_eval_due`` is the cadence of
in-training evaluation, which both trainers ask (Anakin inside its compiled step, Sebulba in
its learner loop).

A resume takes the newest checkpoint that restores: a damaged newer one is reported in one
line naming its path and moved aside to ``checkpoints/damaged-<step>``; when none restores
the run stops (``CheckpointError``) and leaves them all in place. ``set_aside_previous_run``
is ``--fresh``: the previous run's files go to ``previous-<time>/`` instead of being resumed.

Signals are the trainers' business: each loop agrees on them across processes
(``distributed.agree_on_exit_code``) and hands the result to ``checkpoint_or_exit``.
"""

from __future__ import annotations

import datetime
import glob
import json
import math
import os
import signal
import sys
import time
from typing import Mapping

import numpy as np

from rlcore.errors import ConfigError
from rlcore.types import EpisodeSummary
from runtime import distributed, failure, run_files, signals
from runtime.checkpoint import Checkpointer, CheckpointError, DamagedCheckpoint
from runtime.fields import RESUMABLE_CHANGES, upgrade_saved  # fields a resume may change
from runtime.metrics import MetricsLogger, wandb_settings, write_config


def train_eval_due(update, eval_every: int):
    """Whether in-training evaluation runs after ``update``: every ``eval_every`` updates
    (0: never).

    Args:
      update: the update just done, a Python int or a traced ``[]`` int (Anakin).
      eval_every: the config's ``eval_every`` (a Python int).

    Returns:
      A bool (False when ``eval_every`` is 0), or a traced ``[]`` bool.
    """
    return eval_every > 0 and update % eval_every == 0


def window_means(window: list[Mapping[str, float]]) -> dict[str, float]:
    """Per key, the mean over the updates of a log window that have it (evaluation keys
    come only from the updates that evaluated)."""
    keys = list(dict.fromkeys(k for w in window for k in w))
    return {k: float(np.mean([w[k] for w in window if k in w])) for k in keys}


class RunDir:
    """One run's directory (or none: ``workdir=None`` logs to the console only).

    Args:
      config: the run config (``log_every``, ``checkpoint_every``).
      workdir: run directory or None.
      total_updates: updates in the run.
      steps_per_update: env steps per update over all envs (of one agent).
      agent_tags: one dict per agent that goes into its metrics lines (e.g. ``{"seed": 3}``)
        when a run trains several agents; None: one agent, lines without tags.
    """

    def __init__(self, config, workdir: str | None, total_updates: int, steps_per_update: int,
                 agent_tags: list[dict] | None = None):
        self.config = config
        self.workdir = workdir
        self.total = total_updates
        self.steps_per_update = steps_per_update
        self.main = distributed.is_main_process()
        self.ckpt = Checkpointer(workdir, cleanup_tmp=True) if workdir else None
        self.logger: MetricsLogger | None = None
        self._tags = agent_tags or [{}]
        # Per agent: the open window's per-update scalars and its ended episodes.
        self._windows: list[list[Mapping[str, float]]] = [[] for _ in self._tags]
        self._episodes = [EpisodeSummary.zero() for _ in self._tags]
        self._timing: dict = {}

    def restore_or(self, fresh_state):
        """The newest checkpoint that restores, in ``fresh_state``'s structure, or
        ``fresh_state`` when there is none; opens the metrics sinks.

        Raises:
          ConfigError: resuming with a config that changes the data or the math.
          CheckpointError: there are checkpoints, but none restores.
        """
        steps = self.ckpt.steps() if self.ckpt is not None else []
        state, start = fresh_state, 0
        if not steps:
            if self.workdir and self.main:
                write_config(self.workdir, self.config)
                # A run that died before its first checkpoint starts over: its lines go.
                self._truncate_metrics(0)
        else:
            extended_from = self._check_same_config(steps[-1])
            state, start = self._restore_newest_good(fresh_state, steps)
            if start >= self.total:
                raise RunComplete(
                    f"{self.workdir} is already complete at update {start} "
                    f"({start * self.steps_per_update:,} env steps); raise "
                    f"--config.total_env_steps to continue it, or pass --fresh to start over")
            if self.main:
                print(f"resuming from update {start}", file=sys.stderr)
                if extended_from is not None:
                    print(extension_line(extended_from, self.config, self.total),
                          file=sys.stderr)
                    write_config(self.workdir, self.config)  # the next resume compares to it
                self._truncate_metrics(start)
        # Only process 0 writes and prints: one progress line per log step for the run.
        wandb = wandb_settings(self.config, self.workdir)
        failed = None
        try:
            self.logger = MetricsLogger(self.workdir, self.total, write=self.main,
                                        console=self.main, wandb=wandb,
                                        start=(start, start * self.steps_per_update))
        except ConfigError as e:  # W&B would not start (process 0 only starts it)
            failed = e
        if wandb and not distributed.all_processes_agree(failed is None):
            # Every process stops here, not only process 0 (the others would wait for it in
            # their first collective until the heartbeat timeout).
            raise failed or ConfigError("wandb_mode: W&B could not start a run on process 0 "
                                        "(its error says why)")
        if failed is not None:
            raise failed
        if start:
            self._load_log_state(start)
        return state

    def _restore_newest_good(self, fresh_state, steps: list[int]):
        """The newest of ``steps`` (oldest first) that restores, as ``(state, step)``.

        Each newer one that did not restore is reported in one line and moved aside, only
        once an older one restored: a failure they all share moves nothing.

        Raises:
          CheckpointError: none restores (all left in place).
        """
        damaged: list[DamagedCheckpoint] = []
        for step in reversed(steps):
            try:
                state = self.ckpt.restore_checked(fresh_state, step)
            except DamagedCheckpoint as e:
                damaged.append(e)
                continue
            if damaged:
                self._set_aside_damaged(damaged, step)
            return state, step
        older = ", ".join(str(d.step) for d in damaged[1:])
        tail = f"no older one restores either (tried {older})" if older else "no older one"
        raise CheckpointError(
            f"{damaged[0]}; {tail}; left in place: move {self.ckpt.directory} aside, or rerun "
            f"with --fresh to start over")

    def _set_aside_damaged(self, damaged: list[DamagedCheckpoint], good_step: int) -> None:
        """Moves the ``damaged`` checkpoints aside, each said in one line (main process);
        the other processes wait for it and reread the steps, so that all of them save
        those steps anew."""
        if self.main:
            for bad in damaged:
                moved = self.ckpt.set_aside(bad.step)
                print(f"checkpoint: {bad}; moved it to {moved}; resuming from step "
                      f"{good_step} instead", file=sys.stderr)
        if distributed.device_counts().processes > 1:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices("damaged checkpoints set aside")
            self.ckpt.reload()

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
        if isinstance(episodes, EpisodeSummary):
            scalars, episodes = [scalars], [episodes]
        for a, (sc, ep) in enumerate(zip(scalars, episodes, strict=True)):
            total_loss = sc.get("loss/total", 0.0)
            if not math.isfinite(total_loss):
                agent = f" of agent {self._tags[a]}" if self._tags[a] else ""
                raise FloatingPointError(
                    f"non-finite loss ({total_loss}) in update {update}{agent}")
            self._episodes[a] = self._episodes[a] + ep
            self._windows[a].append(dict(sc))
        if update % self.config.log_every == 0 or update == self.total:
            agents = []
            for window, ep, tags in zip(self._windows, self._episodes, self._tags):
                means = window_means(window)
                agents.append((means, ep, tags))
            self.logger.log_agents(update, update * self.steps_per_update, agents, sps=sps,
                                   at=at)
            self._windows = [[] for _ in self._tags]
            self._episodes = [EpisodeSummary.zero() for _ in self._tags]

    def checkpoint_due(self, update: int, previous: int) -> bool:
        """Whether the updates ``previous + 1 .. update`` reached a checkpoint point."""
        every = self.config.checkpoint_every
        return update == self.total or (every > 0 and update // every > previous // every)

    def checkpoint_or_exit(self, update: int, previous: int, state,
                           exit_code: int | None, in_flight: int | None = None) -> None:
        """After updates ``previous + 1 .. update``: checkpoints when due or when the run
        stops on a signal (``exit_code`` 130/143, agreed by every process), then stops.

        Args:
          in_flight: the update a signal abandoned while it ran (Sebulba), for the line;
            ``state`` is then the one before it, ``update``'s.

        Raises:
          SystemExit: ``exit_code``, once the checkpoint is written (none at update 0: a
            rerun starts over the same way).
        """
        if exit_code is not None and signals.current() is not None:
            signals.current().acting()  # the watcher lets this checkpoint finish
        if exit_code is not None and self.main:
            print(stopping_line(exit_code, update, self.ckpt is not None, in_flight),
                  file=sys.stderr, flush=True)
        if self.checkpoint_due(update, previous) or (exit_code is not None and update > 0):
            self.save(update, state)
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
            agents = [{"window": w, "episodes": e.as_list()}
                      for w, e in zip(self._windows, self._episodes)]
            saved = agents[0] if len(agents) == 1 else {"agents": agents}
            with failure.doing(f"saving the log window of update {update}"):
                os.makedirs(self._log_state_dir(), exist_ok=True)
                _write_atomically(self._log_state_path(update), json.dumps(saved))
        with failure.doing(f"saving checkpoint {update} in {self.ckpt.directory}"):
            self.ckpt.save(update, state)

    def first_rollout(self, seconds: float) -> None:
        """Reports on the console that the learner got its first rollout (Sebulba: the
        actors compiled their policy and stepped their envs), ``seconds`` after the start."""
        if self.main:
            print(f"first rollout after {seconds:.1f} s; compiling the learner step",
                  file=sys.stderr, flush=True)

    def first_call_done(self, updates: int, seconds: float, *, compile_s: float | None = None,
                        steady_from: tuple[int, float] | None = None) -> None:
        """Reports the run's first call on the console and keeps it for ``timing.json``.

        Args:
          updates: updates the call ran.
          seconds: its time: compile included, unless ``compile_s`` is given (compiled
            ahead of time, Anakin), then the call's own.
          compile_s: the ahead-of-time compile's seconds, or None.
          steady_from: ``(update, perf_counter time)`` from which the run's time per update
            is steady (no compile in it), for the ETA; None: from now on.
        """
        noun = "update" if updates == 1 else "updates"
        if self.main:
            if compile_s is None:
                line = f"first call ({updates} {noun}, incl. compile) done after {seconds:.1f} s"
            else:
                line = (f"first call ({updates} {noun}) ran in {seconds:.1f} s, after a "
                        f"compile of {compile_s:.1f} s")
            print(line, file=sys.stderr)
        total_s = seconds + (compile_s or 0.0)
        self._timing = {"first_call_updates": int(updates), "first_call_s": float(total_s)}
        if compile_s is not None:
            self._timing["compile_s"] = float(compile_s)
        if self.logger is not None:
            self.logger.steady_from(*(steady_from or (self.logger.start_update + updates,
                                                      time.perf_counter())))

    def _write_timing(self) -> None:
        """``timing.json``: the first call and the whole training time since the sinks
        opened (``train_s``), over updates ``start_update .. end_update``, so that a reader
        can tell compile time from steady-state time."""
        if not (self.workdir and self.main and self._timing and self.history):
            return
        timing = dict(self._timing, start_update=self.logger.start_update,
                      end_update=self.history[-1]["update"],
                      train_s=time.perf_counter() - self.logger.start)
        _write_atomically(run_files.timing_path(self.workdir), json.dumps(timing))

    @property
    def history(self) -> list[dict]:
        return self.logger.history if self.logger is not None else []

    def close(self) -> None:
        """Writes timing.json and closes the metrics sinks and the checkpoint manager (each
        even after another failed: their threads stop), then raises the first failure."""
        closers = []
        if self.logger is not None:
            closers += [self._write_timing, self.logger.close]
        if self.ckpt is not None:
            closers.append(self.ckpt.close)
        failure.close_all(*closers)

    def _log_state_dir(self) -> str:
        return run_files.log_state_path(self.workdir)

    def _log_state_path(self, update: int) -> str:
        return run_files.log_state_path(self.workdir, update)

    def _load_log_state(self, update: int) -> None:
        path = self._log_state_path(update)
        if not os.path.exists(path):
            return
        with open(path) as f:
            saved = json.load(f)
        agents = saved.get("agents", [saved])
        self._windows = [a["window"] for a in agents]
        self._episodes = [EpisodeSummary(*a["episodes"]) for a in agents]

    def _truncate_metrics(self, update: int) -> None:
        """Drops metrics.jsonl lines past ``update`` (logged after the restored checkpoint),
        and a last line torn by a killed process; rewrites the file atomically."""
        path = run_files.metrics_path(self.workdir)
        if not os.path.exists(path):
            return
        with open(path) as f:
            lines = [ln.rstrip("\n") + "\n" for ln in f
                     if (u := _update_of(ln)) is not None and u <= update]
        _write_atomically(path, "".join(lines))

    def _check_same_config(self, newest_step: int) -> int | None:
        """Checks the config against the run's ``config.json``: only the fields a resume may
        change differ, and ``total_env_steps`` (it extends a run) still covers the newest
        checkpoint, ``newest_step``. Returns the saved ``total_env_steps`` when it changed,
        else None.

        Raises:
          ConfigError: a field changed that changes the data or the math, or the budget
            ends before the newest checkpoint; the line names the field, ``--fresh`` and a
            new ``--workdir``.
        """
        path = run_files.config_path(self.workdir)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            saved = upgrade_saved(json.load(f))  # an older run's former field names
        now = json.loads(self.config.to_json_best_effort())
        changed = sorted(k for k in set(saved) | set(now)
                         if k not in RESUMABLE_CHANGES | {"total_env_steps"}
                         and saved.get(k) != now.get(k))
        if changed:
            k = changed[0]
            raise ConfigError(
                f"{k}: the checkpoint in {self.workdir} was made with {saved.get(k)!r}, not "
                f"{now.get(k)!r}; resume with the same value, use a new --workdir, or pass "
                f"--fresh to move the previous run aside and start over")
        old_total = saved.get("total_env_steps")
        if old_total is None or old_total == now.get("total_env_steps"):
            return None
        if self.total < newest_step:
            raise ConfigError(
                f"total_env_steps: {now.get('total_env_steps')} is {self.total} updates, but "
                f"the checkpoint in {self.workdir} is at update {newest_step} "
                f"({newest_step * self.steps_per_update:,} env steps); give at least that "
                f"many to continue it, or pass --fresh to start over")
        return int(old_total)


def stopping_line(exit_code: int, update: int, saving: bool,
                  in_flight: int | None = None) -> str:
    """The console line of a run stopping on a signal after ``update`` updates (abandoning
    update ``in_flight`` where one was running): what it does, how to go on."""
    name = "SIGINT" if exit_code == signals.CODES[signal.SIGINT] else "SIGTERM"
    abandoning = "" if in_flight is None else f"abandoning update {in_flight} in flight, "
    if not saving:
        return (f"{name}: {abandoning}stopping after update {update} (no --workdir: nothing "
                f"is saved)")
    if update == 0:
        return (f"{name}: {abandoning}stopping before the first update completed (nothing "
                f"to save); run the same command to start again")
    return (f"{name}: {abandoning}saving a checkpoint at update {update}, then exiting; run "
            f"the same command to resume (a second {name} exits at once, keeping the last "
            f"checkpoint)")


def extension_line(old_total: int, config, total_updates: int) -> str:
    """The console line of a run extended by a larger ``total_env_steps``; says what
    happens to the learning rate's annealing."""
    line = (f"extending the run: total_env_steps {old_total:,} -> "
            f"{config.total_env_steps:,} ({total_updates} updates)")
    if config.get("anneal_lr"):
        line += ("; the learning rate anneals to 0 over the new total from here on (from "
                 "this update on as if the run had been planned this long)")
    return line


class RunComplete(Exception):  # noqa: N818 - not an error: the command exits 0
    """A run resumed at or past its last update: nothing to train (one line, exit 0)."""


def _update_of(line: str) -> int | None:
    """The ``update`` of a metrics.jsonl line; None for a blank or torn line."""
    try:
        return int(json.loads(line)["update"])
    except (ValueError, KeyError, TypeError):
        return None


def _write_atomically(path: str, text: str) -> None:
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
