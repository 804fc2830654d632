"""Console lines while the Sebulba learner stays long in one stage of an update.

A run whose updates are short prints only its log lines. When the learner spends more than
``FIRST_S`` in one stage of an update (waiting for the actors' rollouts, compiling its step,
training, evaluating), a thread (``runtime.run.console``) prints one line on stderr, then
one every ``EVERY_S`` while the stage lasts, saying what the learner does and what the actors
have done meanwhile::

    learner: update 14/100 training for 0:02:30; actors: rollout for update 15 ready
    (2/2 threads, 2,345 env steps/s while stepping)

(one line). The actors' rate is that of the rollouts waiting in their queues: env steps over
the seconds their threads spent in inference and env steps (not waiting for params or for
room in the queue). Only process 0 prints (``enabled``).
"""

from __future__ import annotations

import threading
import time

from runtime.run.console import Ticker, clock
from sebulba.timers import STEPPING

FIRST_S = 30.0  # a stage this long gets its first line
EVERY_S = 60.0  # then one line this often while it lasts
TICK_S = 1.0  # how often the thread looks
# The learner's stages of an update (``Progress.stage``).
WAITING, COMPILING, TRAINING, EVALUATING = "waiting", "compiling", "training", "evaluating"


class Progress:
    """Says on the console what the learner does when a stage of an update lasts long.

    Args:
      queues: the actors' ``pipeline.RolloutQueue`` queues, in the learner's order.
      total: updates in the run.
      env_steps_per_item: env steps in one thread's rollout (``num_steps`` x its envs).
      enabled: print (process 0); otherwise nothing runs.
    """

    def __init__(self, queues, total: int, env_steps_per_item: int, *, enabled: bool):
        self._queues = list(queues)
        self._total = total
        self._steps = env_steps_per_item
        self._lock = threading.Lock()
        self._stage: tuple[int, str, float] | None = None  # (update index, name, since)
        self._note = ""
        self._ticker = Ticker(self.line, first_s=FIRST_S, every_s=EVERY_S, tick_s=TICK_S,
                              enabled=enabled)

    def stage(self, update: int, name: str | None) -> None:
        """The learner begins stage ``name`` of update ``update + 1`` (``update``: the
        0-based index of its rollout): ``WAITING`` (for that rollout), ``COMPILING``,
        ``TRAINING``, ``EVALUATING``; None: a short stage, nothing to say."""
        now = time.perf_counter()
        with self._lock:
            previous = self._stage
            self._note = ""
            if (previous is not None and name == TRAINING and previous[1] == COMPILING
                    and previous[0] == update):
                self._note = f" (after compiling for {clock(now - previous[2])})"
            self._stage = None if name is None else (update, name, now)
        self._ticker.restart(now)

    def line(self, now: float) -> str | None:
        """The line for the current stage at ``now``, or None when there is none."""
        with self._lock:
            if self._stage is None:
                return None
            update, name, since = self._stage
            note = self._note
        head = f"learner: update {update + 1}/{self._total} {name} for {clock(now - since)}{note}"
        return f"{head}; actors: {self._actors(update if name == WAITING else update + 1)}"

    def _actors(self, rollout: int) -> str:
        """What the actors have done towards rollout ``rollout`` (0-based)."""
        if rollout >= self._total:
            return "done (no rollout left to collect)"
        items = [q.peek() for q in self._queues]
        ready = [it for it in items if it is not None and it.update == rollout]
        n = len(self._queues)
        what = "ready" if len(ready) == n else "being collected"
        text = f"rollout for update {rollout + 1} {what} ({len(ready)}/{n} threads done"
        if ready:
            rate = sum(self._steps / max(sum(it.timers.get(k, 0.0) for k in STEPPING), 1e-9)
                       for it in ready)
            text += f", {rate:,.0f} env steps/s while stepping"
        return text + ")"

    def close(self) -> None:
        """Stops the thread."""
        self._ticker.close()
