"""Sebulba plumbing: the params server, rollout queues, stop control.

Staleness (which params version an actor uses for rollout ``r``; version ``v`` is the params
after ``v`` updates, version ``start`` the initial or restored params). A policy lag ``S``
(0 .. 8, the ``policy_lag`` field; resolved by ``ModeChecks.policy_lag``) fixes version
``max(r - S, start)``, whatever the timing: while the learner trains on rollout
``r - S`` .. ``r - 1`` the actors collect rollout ``r``; the first ``S + 1`` rollouts after
``start`` use the initial params. The ``pipeline`` names stay as names of lags:

- ``sync``: lag 0, version ``r``; the actor waits for the learner to finish update
  ``r - 1`` (act, learn, act).
- ``cleanba`` (default): lag 1, version ``max(r - 1, start)``; the first hand-off is
  skipped (rollouts ``start`` and ``start + 1`` both use the initial params), as in Cleanba
  (arXiv 2310.00036). Curves are identical run to run.
- ``async``: the newest version published when the rollout starts (lag depends on
  hardware; for ablations only; no ``policy_lag``).

Live memory at lag ``S`` (``queue_capacity``, ``versions_kept``): each actor thread's queue
holds ``max(S, 1)`` rollouts, so it can run ``S`` rollouts ahead of the learner, and one more
is being filled and one held by the learner; each actor device holds ``max(S, 1) + 2``
params versions (rollout ``r`` needs version ``r - S`` while the learner may have published
up to ``r``; one spare for the evaluation's newest).

Every blocking wait here polls a stop event with a short timeout and gives up after
``timeout_s``; an error in any thread is recorded and stops all of them. The actors' waits
(for params, for room in the queue) count ``timeout_s`` from the end of the learner's last
busy spell (``StopControl.learner_busy``: its step, first compile included, evaluation,
logging and checkpoint), so a long compile or evaluation is not taken for a stall.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from typing import Any

import jax

POLL_S = 0.05


class PipelineStopped(Exception):
    """A wait ended because the run is stopping (another thread failed or a signal came)."""


class Interrupted(Exception):  # noqa: N818 - not an error: the run stops on a signal
    """The learner's wait for rollouts ended because a signal came (``get``'s
    ``interrupted``)."""


class RolloutQueue(queue.Queue):
    """An actor thread's rollout queue (``maxsize`` items at most: ``queue_capacity``), which
    the learner's progress lines may look into without taking an item."""

    def __init__(self, maxsize: int = 1):
        super().__init__(maxsize=maxsize)

    def peek(self):
        """The oldest item waiting in the queue, or None (it stays there)."""
        with self.mutex:
            return self.queue[0] if self.queue else None


class StopControl:
    """A stop event, the first error raised in any thread, and whether the learner thread
    is busy (between two rollout collections)."""

    def __init__(self):
        self.event = threading.Event()
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._busy = 0
        self._idle_since = 0.0  # when the last busy spell ended

    @contextlib.contextmanager
    def learner_busy(self):
        """Marks the learner's work between two collections; waits on the learner do not
        time out while it lasts (``stall_start``)."""
        with self._lock:
            self._busy += 1
        try:
            yield
        finally:
            with self._lock:
                self._busy -= 1
                if not self._busy:
                    self._idle_since = time.perf_counter()

    def stall_start(self, since: float) -> float:
        """Since when a wait that began at ``since`` has waited on a learner that is not
        busy: now while it is busy, else the later of ``since`` and the end of the last busy
        spell (``time.perf_counter`` seconds)."""
        with self._lock:
            return time.perf_counter() if self._busy else max(since, self._idle_since)

    def fail(self, error: BaseException) -> None:
        with self._lock:
            if self.error is None:
                self.error = error
        self.event.set()

    def stop(self) -> None:
        self.event.set()

    @property
    def stopped(self) -> bool:
        return self.event.is_set()

    def raise_if_failed(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"a Sebulba thread failed: {self.error!r}") from self.error


def put(q: queue.Queue, item, stop: StopControl, timeout_s: float) -> float:
    """Puts ``item`` on ``q``, waiting for room (``timeout_s`` of a learner not busy);
    returns seconds waited."""
    start = stalled = time.perf_counter()
    while True:
        if stop.stopped:
            raise PipelineStopped()
        try:
            q.put(item, timeout=POLL_S)
            return time.perf_counter() - start
        except queue.Full:
            stalled = stop.stall_start(stalled)
            if time.perf_counter() - stalled > timeout_s:
                raise TimeoutError(
                    f"rollout queue full for {timeout_s} s (learner stalled?)") from None


def get(q: queue.Queue, stop: StopControl, timeout_s: float, interrupted=None):
    """Takes an item from ``q``; returns ``(item, seconds waited)``.

    Raises:
      Interrupted: ``interrupted()`` (polled with the queue; None: never) became true.
    """
    start = time.perf_counter()
    while True:
        if stop.stopped:
            raise PipelineStopped()
        if interrupted is not None and interrupted():
            raise Interrupted()
        try:
            return q.get(timeout=POLL_S), time.perf_counter() - start
        except queue.Empty:
            if time.perf_counter() - start > timeout_s:
                raise TimeoutError(f"no rollout for {timeout_s} s (actors stalled?)") from None


# pipeline name -> its policy lag (None: the newest published version); the config's
# ``pipeline`` choices. See the module docstring.
PIPELINES = {"sync": 0, "cleanba": 1, "async": None}


def params_version(lag: int | None, rollout: int, start: int) -> int | None:
    """Params version rollout ``rollout`` must use: ``max(rollout - lag, start)``; ``None``
    (lag None: async) means the newest."""
    return None if lag is None else max(rollout - lag, start)


def queue_capacity(lag: int | None) -> int:
    """Rollouts an actor thread's queue holds: ``lag`` (at least 1), so that its actor runs
    ``lag`` rollouts ahead of the learner."""
    return max(lag or 0, 1)


def versions_kept(lag: int | None) -> int:
    """Params versions the server keeps per actor device: ``queue_capacity + 2``, 3 for
    sync, cleanba and async (see the module docstring)."""
    return queue_capacity(lag) + 2


class ParamsServer:
    """Hands params from the learner to the actor devices, by version.

    Args:
      devices: actor devices; each gets its own copy of every published version.
      keep: versions kept (older ones are dropped).
    """

    def __init__(self, devices, keep: int = 3):
        self._devices = list(devices)
        self._keep = keep
        self._versions: dict[int, dict[Any, Any]] = {}
        self._cond = threading.Condition()

    def publish(self, version: int, params) -> None:
        """Copies ``params`` (single-device or replicated arrays) to every actor device."""
        local = jax.tree.map(lambda x: x.addressable_data(0), params)
        # A copy even on a shared device: the actors' params never alias the learner's.
        copies = {d: jax.device_put(local, d, may_alias=False) for d in self._devices}
        with self._cond:
            self._versions[version] = copies
            for old in sorted(self._versions)[: -self._keep]:
                del self._versions[old]
            self._cond.notify_all()

    def get(self, version: int | None, device, stop: StopControl, timeout_s: float):
        """Params of ``version`` (``None``: the newest) on ``device``, waiting at most
        ``timeout_s`` of a learner not busy; returns ``(version, params, seconds waited)``."""
        start = stalled = time.perf_counter()
        with self._cond:
            while True:
                if stop.stopped:
                    raise PipelineStopped()
                if version is None and self._versions:
                    v = max(self._versions)
                    return v, self._versions[v][device], time.perf_counter() - start
                if version is not None and version in self._versions:
                    return version, self._versions[version][device], time.perf_counter() - start
                if version is not None and self._versions and version < min(self._versions):
                    raise RuntimeError(f"params version {version} was already dropped")
                stalled = stop.stall_start(stalled)
                if time.perf_counter() - stalled > timeout_s:
                    raise TimeoutError(f"no params version {version} for {timeout_s} s")
                self._cond.wait(POLL_S)
