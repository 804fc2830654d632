"""When a run logs, checkpoints and evaluates: the cadence rules both trainers follow.

A log line every ``log_every`` updates and at the end; a checkpoint whenever a multiple of
``checkpoint_every`` is reached or passed (and at the end), and after the first update or
call that ends ``checkpoint_every_minutes`` after the last checkpoint (or the run's start;
a decision every process of a run takes together, see docs/design.md, "Signals and
checkpoints"); in-training evaluation every
``eval_every`` updates, which both trainers ask (Anakin inside its compiled step, Sebulba
in its learner loop). Imports nothing.
"""

from __future__ import annotations


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


def log_due(update: int, log_every: int, total: int) -> bool:
    """Whether update ``update`` (1-based) of ``total`` ends a log window."""
    return update % log_every == 0 or update == total


def checkpoint_due(update: int, previous: int, every: int, total: int) -> bool:
    """Whether the updates ``previous + 1 .. update`` of ``total`` reached a checkpoint
    point (a multiple of ``every``, 0: none, or the last update)."""
    return update == total or (every > 0 and update // every > previous // every)


def clock_due(since_s: float, now_s: float, every_minutes: float) -> bool:
    """Whether a wall-clock checkpoint is due: ``every_minutes`` (0: never) have passed
    from ``since_s`` (the last checkpoint, or the start) to ``now_s`` (seconds, one clock)."""
    return every_minutes > 0 and now_s - since_s >= every_minutes * 60
