"""The run directory both trainers share: config.json, metrics (window means), checkpoints.

``RunDir`` owns the cadence rules: a log line every ``log_every`` updates (and at the end)
with the means of the per-update scalars since the previous line; a checkpoint whenever a
multiple of ``checkpoint_every`` is reached or passed (and at the end); a checkpoint before
exiting on a signal.
"""

from __future__ import annotations

import math
import sys
from typing import Mapping

import numpy as np

from rlcore import distributed
from rlcore.checkpoint import Checkpointer
from rlcore.metrics import MetricsLogger, write_config


class RunDir:
    """One run's directory (or none: ``workdir=None`` logs to the console only).

    Args:
      config: the run config (``log_every``, ``checkpoint_every``).
      workdir: run directory or None.
      total_updates: updates in the run.
      steps_per_update: env steps per update over all envs.
    """

    def __init__(self, config, workdir: str | None, total_updates: int, steps_per_update: int):
        self.config = config
        self.total = total_updates
        self.steps_per_update = steps_per_update
        main = distributed.is_main_process()
        if workdir and main:
            write_config(workdir, config)
        self.ckpt = Checkpointer(workdir) if workdir else None
        self.logger = MetricsLogger(workdir, total_updates, write=main)
        self._window: list[Mapping[str, float]] = []

    def restore_or(self, fresh_state):
        """The latest checkpoint restored into ``fresh_state``'s structure, or ``fresh_state``."""
        if self.ckpt is None or self.ckpt.latest_step() is None:
            return fresh_state
        print(f"resumed from update {self.ckpt.latest_step()}", file=sys.stderr)
        return self.ckpt.restore(fresh_state)

    def record(self, update: int, scalars: Mapping[str, float], episodes,
               sps: float | None = None) -> None:
        """Adds update ``update``'s scalars and ``episodes = (return sum, length sum, count)``;
        writes a log line when one is due.

        Raises:
          FloatingPointError: the update's ``loss/total`` is not finite.
        """
        total_loss = scalars.get("loss/total", 0.0)
        if not math.isfinite(total_loss):
            raise FloatingPointError(f"non-finite loss ({total_loss}) in update {update}")
        self.logger.episodes.add(*episodes)
        self._window.append(scalars)
        if update % self.config.log_every == 0 or update == self.total:
            means = {k: float(np.mean([w[k] for w in self._window])) for k in self._window[0]}
            self._window.clear()
            self.logger.log(update, update * self.steps_per_update, means, sps=sps)

    def checkpoint_due(self, update: int, previous: int) -> bool:
        """Whether the updates ``previous + 1 .. update`` reached a checkpoint point."""
        every = self.config.checkpoint_every
        return update == self.total or (every > 0 and update // every > previous // every)

    def save(self, update: int, state) -> None:
        if self.ckpt is not None:
            self.ckpt.save(update, state)

    @property
    def history(self) -> list[dict]:
        return self.logger.history

    def close(self) -> None:
        self.logger.close()
        if self.ckpt is not None:
            self.ckpt.close()
