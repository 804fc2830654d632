"""The run directory both trainers share: config.json, metrics (window means), checkpoints.

``RunDir`` owns the cadence rules: a log line every ``log_every`` updates (and at the end)
with the means of the per-update scalars since the previous line; a checkpoint whenever a
multiple of ``checkpoint_every`` is reached or passed (and at the end); a checkpoint before
exiting on a signal. With each checkpoint it keeps the open log window (``log_state/``), and
a resume drops metrics lines past the checkpoint, so a resumed run's ``metrics.jsonl`` equals
an uninterrupted run's except for clock keys.

Signals are the trainers' business: each loop agrees on them across processes
(``distributed.agree_on_exit_code``) and hands the result to ``checkpoint_or_exit``.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Mapping

import numpy as np

from rlcore import distributed
from rlcore.checkpoint import Checkpointer
from rlcore.errors import ConfigError
from rlcore.metrics import MetricsLogger, wandb_settings, write_config
from rlcore.types import EpisodeSummary

# Fields a resumed run may change: they alter neither the data nor the math.
RESUMABLE_CHANGES = frozenset({
    "log_every", "checkpoint_every", "queue_timeout_s", "debug", "coordinator_address",
    "process_id", "env_threads", "updates_per_call", "num_devices", "actor_device_ids",
    "learner_device_ids", "num_actor_threads", "eval_every", "eval_episodes", "eval_max_steps",
    "wandb_project", "wandb_mode",
})


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
        self.ckpt = Checkpointer(workdir) if workdir else None
        self.logger: MetricsLogger | None = None
        self._tags = agent_tags or [{}]
        # Per agent: the open window's per-update scalars and its ended episodes.
        self._windows: list[list[Mapping[str, float]]] = [[] for _ in self._tags]
        self._episodes = [EpisodeSummary.zero() for _ in self._tags]
        self._timing: dict = {}

    def restore_or(self, fresh_state):
        """The latest checkpoint restored into ``fresh_state``'s structure, or ``fresh_state``;
        opens the metrics sinks.

        Raises:
          ConfigError: resuming with a config that changes the data or the math.
        """
        step = self.ckpt.latest_step() if self.ckpt is not None else None
        state, start = fresh_state, 0
        if step is None:
            if self.workdir and self.main:
                write_config(self.workdir, self.config)
        else:
            self._check_same_config()
            print(f"resuming from update {step}", file=sys.stderr)
            state, start = self.ckpt.restore(fresh_state, step), step
            if self.main:
                self._truncate_metrics(step)
        self.logger = MetricsLogger(self.workdir, self.total, write=self.main,
                                    wandb=wandb_settings(self.config, self.workdir),
                                    start=(start, start * self.steps_per_update))
        if start:
            self._load_log_state(start)
        return state

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
                           exit_code: int | None) -> None:
        """After updates ``previous + 1 .. update``: checkpoints when due or when the run
        stops on a signal (``exit_code`` 130/143, agreed by every process), then stops.

        Raises:
          SystemExit: ``exit_code``, once the checkpoint is written.
        """
        if self.checkpoint_due(update, previous) or exit_code is not None:
            self.save(update, state)
        if exit_code is not None:
            raise SystemExit(exit_code)

    def save(self, update: int, state) -> None:
        """Checkpoints ``state`` as ``update``, with the open log window beside it."""
        if self.ckpt is None:
            return
        self.ckpt.save(update, state)
        if self.main:
            os.makedirs(self._log_state_dir(), exist_ok=True)
            agents = [{"window": w, "episodes": e.as_list()}
                      for w, e in zip(self._windows, self._episodes)]
            with open(self._log_state_path(update), "w") as f:
                json.dump(agents[0] if len(agents) == 1 else {"agents": agents}, f)

    def first_call_done(self, updates: int, seconds: float) -> None:
        """Reports the run's first call (``updates`` updates, compile included) on the console
        and keeps it for ``timing.json``."""
        noun = "update" if updates == 1 else "updates"
        print(f"first call ({updates} {noun}, incl. compile) done after {seconds:.1f} s",
              file=sys.stderr)
        self._timing = {"first_call_updates": int(updates), "first_call_s": float(seconds)}

    def _write_timing(self) -> None:
        """``timing.json``: the first call and the whole training time since the sinks
        opened (``train_s``), over updates ``start_update .. end_update``, so that a reader
        can tell compile time from steady-state time."""
        if not (self.workdir and self.main and self._timing and self.history):
            return
        timing = dict(self._timing, start_update=self.logger.start_update,
                      end_update=self.history[-1]["update"],
                      train_s=time.perf_counter() - self.logger.start)
        with open(os.path.join(self.workdir, "timing.json"), "w") as f:
            json.dump(timing, f)

    @property
    def history(self) -> list[dict]:
        return self.logger.history if self.logger is not None else []

    def close(self) -> None:
        if self.logger is not None:
            self._write_timing()
            self.logger.close()
        if self.ckpt is not None:
            self.ckpt.close()

    def _log_state_dir(self) -> str:
        return os.path.join(self.workdir, "log_state")

    def _log_state_path(self, update: int) -> str:
        return os.path.join(self._log_state_dir(), f"{update}.json")

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
        """Drops metrics.jsonl lines past ``update`` (logged after the last checkpoint)."""
        path = os.path.join(self.workdir, "metrics.jsonl")
        if not os.path.exists(path):
            return
        with open(path) as f:
            lines = [ln for ln in f if ln.strip() and json.loads(ln)["update"] <= update]
        with open(path, "w") as f:
            f.writelines(lines)

    def _check_same_config(self) -> None:
        path = os.path.join(self.workdir, "config.json")
        if not os.path.exists(path):
            return
        with open(path) as f:
            saved = json.load(f)
        now = json.loads(self.config.to_json_best_effort())
        changed = sorted(k for k in set(saved) | set(now)
                         if k not in RESUMABLE_CHANGES and saved.get(k) != now.get(k))
        if changed:
            k = changed[0]
            raise ConfigError(
                f"{k}: the checkpoint in {self.workdir} was made with {saved.get(k)!r}, not "
                f"{now.get(k)!r}; resume with the same value or use a new --workdir")
