"""Threshold tests that stop training once the threshold is reached.

A test that asserts "the best logged mean return reaches R" learns nothing from the updates
after the first logged line at R or above: the run up to that line is the same as in a run
of the whole budget (same config, same budget, so the same learning-rate schedule and the
same data), and no later line can undo the assertion. ``train_to_return`` runs the trainer
unchanged and stops it right after that line is logged; a run that never reaches R trains
its whole budget, as before, and the test fails on the same rows as before.
"""

from __future__ import annotations

import pytest

from tests.helpers import best_return


class _Reached(Exception):
    """Raised out of the trainer's loop right after the first line at the threshold."""

    def __init__(self, rows: list[dict]):
        super().__init__("threshold reached")
        self.rows = rows


def train_to_return(trainer, threshold: float, config, workdir, **kwargs) -> list[dict]:
    """``trainer.train(config, workdir, **kwargs)`` (``trainer``: the module ``anakin.train``
    or ``sebulba.train``), stopped after the first logged line whose ``episode_return`` is
    at least ``threshold``; returns the rows logged until then (every row when none
    reaches it). The trainer's own cleanup (threads joined, files closed) runs as for any
    exception out of its loop."""

    class StopAtReturn(trainer.RunDir):
        def record(self, *args, **kw):
            super().record(*args, **kw)
            if best_return(self.history) >= threshold:
                raise _Reached(list(self.history))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(trainer, "RunDir", StopAtReturn)
        try:
            return trainer.train(config, workdir, **kwargs)
        except _Reached as reached:
            return reached.rows
