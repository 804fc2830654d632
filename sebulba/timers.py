"""Stage timers of Sebulba's actors and learner: the names of the stages, once, and the
context manager that times one (docs/design.md, "Metrics keys").

Each update's metrics line carries ``time/<name>_s`` (``metric_key``) for every stage: the
actors' stages of the update's rollout (``ACTOR``, seconds per thread averaged over the
threads) and the learner's (``LEARNER``). ``sebulba.progress`` counts the actors' stepping
stages (``STEPPING``) in its console lines.
"""

from __future__ import annotations

import contextlib
import time

# An actor thread's stages of one rollout.
PARAMS_WAIT = "params_wait"  # waiting for the params version the rollout uses
INFERENCE = "inference"  # the policy on the actor device, to the actions being ready
D2H = "d2h"  # the actions' copy to the host
ENV_STEP = "env_step"  # the env step (and debug.actor_jitter_ms)
ACTOR_PUT_WAIT = "actor_put_wait"  # handing the previous rollout over (room in the queue)
ROLLOUT = (PARAMS_WAIT, INFERENCE, D2H, ENV_STEP)  # timed while the rollout is collected
ACTOR = (*ROLLOUT, ACTOR_PUT_WAIT)
STEPPING = (INFERENCE, D2H, ENV_STEP)  # the stages that step envs (the others wait)

# The learner's stages of one update.
ROLLOUT_QUEUE_WAIT = "rollout_queue_wait"  # waiting for the actors' rollouts
LEARNER_STEP = "learner_step"  # the update, dispatched to its results on the host
LEARNER = (ROLLOUT_QUEUE_WAIT, LEARNER_STEP)

# The order reports list them in: the actors' stepping stages first, then their waits, then
# the learner's (benchmarks' tables and plots).
ACTOR_REPORT_ORDER = (ENV_STEP, INFERENCE, D2H, PARAMS_WAIT, ACTOR_PUT_WAIT)
REPORT_ORDER = (*ACTOR_REPORT_ORDER, *LEARNER)


def metric_key(name: str) -> str:
    """The metrics key of stage ``name``: ``time/<name>_s``."""
    return f"time/{name}_s"


class Timers(dict):
    """Seconds per stage name (``names`` start at 0); ``time(name)`` adds a stage's."""

    def __init__(self, names=()):
        super().__init__(dict.fromkeys(names, 0.0))

    @contextlib.contextmanager
    def time(self, name: str):
        """Adds the seconds the ``with`` block takes to ``self[name]`` (also when it
        raises)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self[name] = self.get(name, 0.0) + time.perf_counter() - start
