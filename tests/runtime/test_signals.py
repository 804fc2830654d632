"""SIGINT/SIGTERM honoured at every stage (``runtime.signals``): before the training loop
the run exits at once; in a loop stuck inside a long call (a compile, a long first call) the
watcher ends it within ``GRACE_S`` with one line; a loop that acts (checkpoints) is let
finish; a second signal ends the process at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from runtime import run_files
from runtime.signals import GRACE_S
from tests.helpers import REPO, entry_env

# A process that installs the handlers, enters ``PHASE`` and blocks in a system call (a read
# of a pipe nobody writes: the call resumes after each Python handler, as a compile would
# hold the main thread); "acting" calls ``acting()`` first and then blocks 3 s past the grace.
SCRIPT = textwrap.dedent("""
    import os, sys, time
    from runtime import signals
    s, _ = signals.start()
    phase = sys.argv[1]
    if phase != "start-up":
        s.loop()
    if phase == "acting":
        s.acting()
    print("ready", flush=True)
    if phase == "acting":
        t = time.monotonic()
        while time.monotonic() - t < signals.GRACE_S + 3:
            time.sleep(0.1)
        raise SystemExit(s.exit_code)
    r, w = os.pipe()
    os.read(r, 1)
""")


def _start(phase: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, phase], cwd=REPO, env=entry_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _signal_and_wait(proc, sig, timeout_s: float) -> tuple[int, str, float]:
    t0 = time.monotonic()
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=timeout_s)
    finally:
        proc.kill()
    return proc.returncode, err, time.monotonic() - t0


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_before_the_loop_a_signal_exits_at_once(sig, code):
    returncode, err, took = _signal_and_wait(_start("start-up"), sig, 5)
    assert returncode == code and took < 2 and "Traceback" not in err, err


def test_a_loop_stuck_in_a_call_is_ended_within_the_grace_with_one_line():
    returncode, err, took = _signal_and_wait(_start("training"), signal.SIGTERM, GRACE_S + 5)
    assert returncode == 143, err
    assert GRACE_S - 0.5 < took < GRACE_S + 2
    assert err.strip().splitlines() == [
        f"SIGTERM during training: stopped without a new checkpoint (the run reached no "
        f"point to save within {GRACE_S:g} s)"]


def test_a_second_signal_ends_the_process_at_once():
    proc = _start("training")
    proc.send_signal(signal.SIGTERM)
    time.sleep(1)
    returncode, err, took = _signal_and_wait(proc, signal.SIGINT, 5)
    assert returncode == 143 and took < 1.5, err  # the first signal's code
    assert err.strip().splitlines() == ["SIGINT again: stopped at once, without a new "
                                        "checkpoint"]


def test_one_signal_delivered_twice_at_once_is_one_signal():
    """``timeout`` sends SIGTERM to its command and then to the command's process group: two
    copies close together are the first signal, not a second one (which would end the run
    at once without its checkpoint: a `timeout 180 python -m sebulba.main ...` did), so the
    loop gets its grace. The copies 50 ms apart, so that both are delivered (the kernel
    merges a signal still pending)."""
    proc = _start("training")
    t0 = time.monotonic()
    os.kill(proc.pid, signal.SIGTERM)
    time.sleep(0.05)
    os.kill(proc.pid, signal.SIGTERM)
    returncode, err, _ = _signal_and_wait(proc, 0, GRACE_S + 5)  # signal 0: sends nothing
    took = time.monotonic() - t0
    assert returncode == 143 and GRACE_S - 0.5 < took < GRACE_S + 2, (took, err)
    assert err.strip().splitlines() == [
        f"SIGTERM during training: stopped without a new checkpoint (the run reached no "
        f"point to save within {GRACE_S:g} s)"]


def test_a_loop_that_acts_is_let_finish():
    returncode, err, took = _signal_and_wait(_start("acting"), signal.SIGTERM, GRACE_S + 10)
    assert returncode == 143 and took > GRACE_S + 2 and err == "", err


def test_sigterm_in_a_long_first_call_exits_within_10_s(tmp_path):
    """A real run whose first compiled call takes long (MinAtar PPO, 60 updates of 8,192
    env steps in one call, over a minute here): SIGTERM once the loop has started exits 143
    within 10 s, one line, no checkpoint written (there was none)."""
    args = ["-m", "anakin.main", "--config=configs/minatar_breakout_ppo.py",
            f"--workdir={tmp_path}", "--config.updates_per_call=60",
            f"--config.total_env_steps={64 * 128 * 60}", "--config.log_every=60"]
    proc = subprocess.Popen([sys.executable, *args], cwd=REPO, env=entry_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not os.path.exists(run_files.metrics_path(str(tmp_path))):  # RunDir opened: in train
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    time.sleep(1)
    returncode, err, took = _signal_and_wait(proc, signal.SIGTERM, 30)
    assert returncode == 143 and took < 10, (took, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines == [f"SIGTERM during training: stopped without a new checkpoint (the run "
                     f"reached no point to save within {GRACE_S:g} s)"], err
    assert not [d for d in os.listdir(run_files.checkpoints_dir(str(tmp_path))) if d.isdigit()]
