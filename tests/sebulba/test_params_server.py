"""Sebulba plumbing units: ParamsServer versions, drops, waits, timeouts and stops;
StopControl; params_version and the lag's memory bounds; the rollout-queue helpers. Each
test is well under a second."""

from __future__ import annotations

import queue
import threading
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from sebulba.mode import MODE
from sebulba.pipeline import (
    ParamsServer,
    PipelineStopped,
    StopControl,
    get,
    params_version,
    put,
    queue_capacity,
    versions_kept,
)

TIMEOUT_S = 0.3
JOIN_S = 2.0

needs_2 = pytest.mark.skipif(jax.device_count() < 2, reason="needs 2 (fake) devices")


@pytest.fixture(autouse=True)
def no_thread_outlives_a_test():
    before = set(threading.enumerate())
    yield
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert left == []


def devices():
    return jax.devices()[:2]


def make_params(v: int, device=None):
    params = {"w": jnp.full((3, 2), float(v)), "b": jnp.arange(4.0) + v}
    return jax.device_put(params, device or jax.devices()[0])


def assert_params(params, v: int, device) -> None:
    np.testing.assert_array_equal(np.asarray(params["w"]), np.full((3, 2), float(v)))
    np.testing.assert_array_equal(np.asarray(params["b"]), np.arange(4.0) + v)
    for leaf in jax.tree.leaves(params):
        assert leaf.devices() == {device}


class Call:
    """Runs ``fn`` in a thread; keeps its result or exception and when it ended."""

    def __init__(self, fn):
        self.result = self.error = self.ended = None
        self.thread = threading.Thread(target=self._run, args=(fn,), name="test-call")
        self.thread.start()

    def _run(self, fn):
        try:
            self.result = fn()
        except BaseException as e:  # kept for the test to check
            self.error = e
        self.ended = time.perf_counter()

    def join(self):
        self.thread.join(JOIN_S)
        assert not self.thread.is_alive(), "helper thread still running"


# --- versions ------------------------------------------------------------------------------

@needs_2
def test_get_returns_the_published_version_on_each_device():
    d0, d1 = devices()
    server = ParamsServer([d0, d1], keep=3)
    stop = StopControl()
    for v in range(3):
        server.publish(v, make_params(v))
    for v in range(3):
        for d in (d0, d1):
            got_v, params, waited = server.get(v, d, stop, TIMEOUT_S)
            assert got_v == v
            assert waited >= 0
            assert_params(params, v, d)
    # Each device has its own copy, not a shared one.
    p0 = server.get(1, d0, stop, TIMEOUT_S)[1]
    p1 = server.get(1, d1, stop, TIMEOUT_S)[1]
    assert p0["w"].unsafe_buffer_pointer() != p1["w"].unsafe_buffer_pointer()


@needs_2
def test_get_none_returns_the_newest_version():
    d0, d1 = devices()
    server = ParamsServer([d0, d1], keep=3)
    stop = StopControl()
    server.publish(0, make_params(0))
    assert server.get(None, d1, stop, TIMEOUT_S)[0] == 0
    server.publish(1, make_params(1))
    server.publish(2, make_params(2))
    v, params, _ = server.get(None, d1, stop, TIMEOUT_S)
    assert v == 2
    assert_params(params, 2, d1)


@needs_2
def test_publish_copies_even_on_the_source_device():
    d0, d1 = devices()
    server = ParamsServer([d0, d1], keep=3)
    stop = StopControl()
    src = make_params(7, d0)
    server.publish(7, src)
    served = server.get(7, d0, stop, TIMEOUT_S)[1]
    for a, b in zip(jax.tree.leaves(src), jax.tree.leaves(served)):
        assert a.unsafe_buffer_pointer() != b.unsafe_buffer_pointer()
    # The learner donates its buffers: deleting the source must not break the served copies.
    for leaf in jax.tree.leaves(src):
        leaf.delete()
    assert_params(served, 7, d0)
    assert_params(server.get(7, d1, stop, TIMEOUT_S)[1], 7, d1)


# --- drop ----------------------------------------------------------------------------------

def test_old_versions_are_dropped():
    (d0,) = devices()[:1]
    server = ParamsServer([d0], keep=2)
    stop = StopControl()
    for v in range(3):
        server.publish(v, make_params(v))
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="dropped"):
        server.get(0, d0, stop, TIMEOUT_S)
    assert time.perf_counter() - start < TIMEOUT_S  # fails at once, no wait
    for v in (1, 2):
        got_v, params, _ = server.get(v, d0, stop, TIMEOUT_S)
        assert got_v == v
        assert_params(params, v, d0)


# --- waiting, timeout, stop ----------------------------------------------------------------

def test_get_waits_for_a_later_publish():
    (d0,) = devices()[:1]
    server = ParamsServer([d0], keep=3)
    stop = StopControl()
    server.publish(4, make_params(4))
    call = Call(lambda: server.get(5, d0, stop, 5.0))
    time.sleep(0.1)
    assert call.thread.is_alive()  # still waiting for version 5
    server.publish(5, make_params(5))
    call.join()
    assert call.error is None
    v, params, waited = call.result
    assert v == 5
    assert waited > 0
    assert_params(params, 5, d0)


def test_get_of_a_version_never_published_times_out():
    (d0,) = devices()[:1]
    server = ParamsServer([d0], keep=3)
    stop = StopControl()
    server.publish(0, make_params(0))
    start = time.perf_counter()
    with pytest.raises(TimeoutError):
        server.get(3, d0, stop, TIMEOUT_S)
    elapsed = time.perf_counter() - start
    assert TIMEOUT_S <= elapsed < TIMEOUT_S + 1
    # Nothing published at all: get(None) times out too.
    empty = ParamsServer([d0])
    start = time.perf_counter()
    with pytest.raises(TimeoutError):
        empty.get(None, d0, stop, TIMEOUT_S)
    assert TIMEOUT_S <= time.perf_counter() - start < TIMEOUT_S + 1


def test_stop_ends_a_blocked_get():
    (d0,) = devices()[:1]
    server = ParamsServer([d0], keep=3)
    stop = StopControl()
    call = Call(lambda: server.get(1, d0, stop, 30.0))
    time.sleep(0.1)
    assert call.thread.is_alive()
    stopped_at = time.perf_counter()
    stop.stop()
    call.join()
    assert isinstance(call.error, PipelineStopped)
    assert call.ended - stopped_at < 1.0
    assert stop.stopped
    # Once stopped, even a published version is not served.
    server.publish(1, make_params(1))
    with pytest.raises(PipelineStopped):
        server.get(1, d0, stop, TIMEOUT_S)


def test_stop_control_records_the_first_error():
    stop = StopControl()
    assert not stop.stopped
    stop.raise_if_failed()  # no error: nothing raised
    stop.stop()
    assert stop.stopped
    stop.raise_if_failed()  # a plain stop is not a failure

    stop = StopControl()
    first, second = ValueError("first"), KeyError("second")
    stop.fail(first)
    assert stop.stopped
    stop.fail(second)
    assert stop.error is first
    with pytest.raises(RuntimeError) as info:
        stop.raise_if_failed()
    assert info.value.__cause__ is first
    assert "first" in str(info.value)


# --- params_version ------------------------------------------------------------------------

def _lag(pipeline: str, policy_lag: int = -1) -> int | None:
    return MODE.policy_lag(
        ml_collections.ConfigDict(dict(pipeline=pipeline, policy_lag=policy_lag)))


@pytest.mark.parametrize("start", [0, 5])
def test_params_version(start):
    sync, cleanba, lag_async = _lag("sync"), _lag("cleanba"), _lag("async")
    assert (sync, cleanba, lag_async) == (0, 1, None)
    for r in range(start, start + 5):
        assert params_version(sync, r, start) == r
        assert params_version(lag_async, r, start) is None
    versions = [params_version(cleanba, r, start) for r in range(start, start + 5)]
    # Rollouts start and start + 1 both use the initial params, then one update behind.
    assert versions == [start, start, start + 1, start + 2, start + 3]
    # Lag 4 (set over either pipeline): rollouts start .. start + 4 use the initial params.
    assert _lag("sync", 4) == _lag("cleanba", 4) == 4
    lag4 = [params_version(4, r, start) for r in range(start, start + 8)]
    assert lag4 == [start] * 5 + [start + 1, start + 2, start + 3]


@pytest.mark.parametrize("lag, capacity, kept", [
    (None, 1, 3), (0, 1, 3), (1, 1, 3), (2, 2, 4), (4, 4, 6), (8, 8, 10)])
def test_queue_capacity_and_versions_kept(lag, capacity, kept):
    """An actor runs ``lag`` rollouts ahead; the server keeps versions ``r - lag .. r`` and a
    spare: 3 up to lag 1, as before the lag was a dial."""
    assert (queue_capacity(lag), versions_kept(lag)) == (capacity, kept)


def test_lagged_actor_never_sees_a_dropped_version():
    """The schedule of a lag-4 pipeline, serially: the actor takes version ``r - 4`` when the
    learner has published up to ``r`` (the furthest it can be: it has taken rollouts up to
    ``r - 1``); with ``versions_kept(4)`` versions the server still holds it."""
    lag, dev = 4, devices()[0]
    server, stop = ParamsServer([dev], keep=versions_kept(lag)), StopControl()
    server.publish(0, jnp.zeros(()))
    for r in range(12):
        server.publish(r, jnp.full((), r, jnp.float32))  # the learner as far as it may be
        version, params, _ = server.get(params_version(lag, r, 0), dev, stop, TIMEOUT_S)
        assert version == max(r - lag, 0) and float(params) == version


# --- queue helpers -------------------------------------------------------------------------

def test_queue_get_times_out_and_stops():
    q = queue.Queue()
    stop = StopControl()
    start = time.perf_counter()
    with pytest.raises(TimeoutError):
        get(q, stop, TIMEOUT_S)
    assert TIMEOUT_S <= time.perf_counter() - start < TIMEOUT_S + 1

    q.put("x")
    item, waited = get(q, stop, TIMEOUT_S)
    assert item == "x" and waited >= 0

    call = Call(lambda: get(q, stop, 30.0))
    time.sleep(0.1)
    stopped_at = time.perf_counter()
    stop.stop()
    call.join()
    assert isinstance(call.error, PipelineStopped)
    assert call.ended - stopped_at < 1.0
    q.put("y")
    with pytest.raises(PipelineStopped):
        get(q, stop, TIMEOUT_S)


def test_queue_put_times_out_and_stops():
    q = queue.Queue(maxsize=1)
    stop = StopControl()
    assert put(q, "a", stop, TIMEOUT_S) >= 0
    start = time.perf_counter()
    with pytest.raises(TimeoutError):
        put(q, "b", stop, TIMEOUT_S)
    assert TIMEOUT_S <= time.perf_counter() - start < TIMEOUT_S + 1
    assert q.qsize() == 1 and q.get_nowait() == "a"

    q.put("a")
    call = Call(lambda: put(q, "b", stop, 30.0))
    time.sleep(0.1)
    stopped_at = time.perf_counter()
    stop.stop()
    call.join()
    assert isinstance(call.error, PipelineStopped)
    assert call.ended - stopped_at < 1.0
    q.get_nowait()
    with pytest.raises(PipelineStopped):
        put(q, "c", stop, TIMEOUT_S)


def test_queue_put_waits_for_room():
    q = queue.Queue(maxsize=1)
    stop = StopControl()
    q.put("a")
    call = Call(lambda: put(q, "b", stop, 5.0))
    time.sleep(0.1)
    assert call.thread.is_alive()
    assert q.get_nowait() == "a"
    call.join()
    assert call.error is None and call.result > 0
    assert q.get_nowait() == "b"


# --- a busy learner is not a stalled one ---------------------------------------------------


def test_waits_on_a_busy_learner_do_not_time_out():
    """While the learner is busy (its step or first compile, an evaluation, a checkpoint)
    the actors' waits for params and for room do not count towards ``timeout_s``; they do
    from the end of the busy spell."""
    (d0,) = devices()[:1]
    server, stop = ParamsServer([d0], keep=3), StopControl()
    server.publish(0, make_params(0))
    q = queue.Queue(maxsize=1)
    q.put("full")
    busy_s = 3 * TIMEOUT_S
    with stop.learner_busy():
        got = Call(lambda: server.get(1, d0, stop, TIMEOUT_S))
        room = Call(lambda: put(q, "b", stop, TIMEOUT_S))
        time.sleep(busy_s)
        assert got.thread.is_alive() and room.thread.is_alive()  # a plain wait timed out
        server.publish(1, make_params(1))
    idle_since = time.perf_counter()  # not busy now: the put times out TIMEOUT_S later
    got.join()
    assert got.error is None and got.result[0] == 1 and got.result[2] >= busy_s
    room.join()
    assert isinstance(room.error, TimeoutError)
    assert TIMEOUT_S - 0.01 <= room.ended - idle_since < TIMEOUT_S + 1
