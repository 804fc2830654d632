"""SIGINT/SIGTERM honoured at every stage (``runtime.process.signals``): before the training loop
and during a compile the run exits at once with one line; in a loop stuck between points to
save the watcher ends it within ``GRACE_S`` with one line; a call in flight is let finish
within its bound (and saved: a real run's call longer than the grace checkpoints its last
update and resumes bit for bit); a loop that acts (checkpoints) is let finish; a second
signal ends the process at once. Every line says what is kept and how to go on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from runtime.process.signals import GRACE_S
from tests.helpers import REPO, checkpoint_steps, entry_env, read_metrics, reproducible_part

# What a run that has not yet looked at its workdir keeps (``Signals.kept``).
UNKNOWN = ("the workdir keeps what it held (its checkpoints, if any); run the same command "
           "to resume or start again")

# A process that installs the handlers, enters ``PHASE`` and blocks in a system call (a read
# of a pipe nobody writes: the call resumes after each Python handler, as a compile would
# hold the main thread); "acting" calls ``acting()`` first and then blocks 3 s past the grace.
SCRIPT = textwrap.dedent("""
    import os, sys, time
    from runtime.process import signals
    s, _ = signals.start()
    phase = sys.argv[1]
    if phase != "start-up":
        s.loop()
    if phase == "acting":
        s.acting()
    if phase == "compiling":
        s.compiling()
    if phase == "call":  # a call of updates 41-80 bounded to 1 s, which hangs
        s.note_checkpoint(40)
        s.call_started(41, 80, 1.0)
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
    assert returncode == code and took < 2, err
    assert err.strip().splitlines() == [
        f"{sig.name} while starting: stopped before training; {UNKNOWN}"]


def test_during_a_compile_a_signal_exits_at_once_with_one_line():
    returncode, err, took = _signal_and_wait(_start("compiling"), signal.SIGTERM, 5)
    assert returncode == 143 and took < 2, err
    assert err.strip().splitlines() == [
        f"SIGTERM during compile: stopped (nothing new to save yet); {UNKNOWN}"]


def test_a_call_in_flight_is_announced_at_once_and_a_hung_one_ended_after_its_bound():
    """The call, bounded to 1 s, never returns (hung): the watcher waits its bound and the
    grace after it (about ``GRACE_S + 1`` s from the call's start), then ends the run, the
    checkpoint kept."""
    proc = _start("call")
    returncode, err, took = _signal_and_wait(proc, signal.SIGTERM, GRACE_S + 6)
    assert returncode == 143 and GRACE_S - 0.5 < took < GRACE_S + 3, (took, err)
    assert err.strip().splitlines() == [
        "SIGTERM: finishing the call in flight (updates 41-80), then saving a checkpoint at "
        "update 80; run the same command to resume",
        f"SIGTERM during training: stopped without a new checkpoint (the run reached no "
        f"point to save within {GRACE_S + 1:g} s); the checkpoint at update 40 is kept; run the "
        f"same command to resume from it"]


def test_a_loop_stuck_in_a_call_is_ended_within_the_grace_with_one_line():
    returncode, err, took = _signal_and_wait(_start("training"), signal.SIGTERM, GRACE_S + 5)
    assert returncode == 143, err
    assert GRACE_S - 0.5 < took < GRACE_S + 2
    assert err.strip().splitlines() == [
        f"SIGTERM during training: stopped without a new checkpoint (the run reached no "
        f"point to save within {GRACE_S:g} s); {UNKNOWN}"]


def test_a_second_signal_ends_the_process_at_once():
    proc = _start("training")
    proc.send_signal(signal.SIGTERM)
    time.sleep(1)
    returncode, err, took = _signal_and_wait(proc, signal.SIGINT, 5)
    assert returncode == 143 and took < 1.5, err  # the first signal's code
    assert err.strip().splitlines() == [f"SIGINT again: stopped at once, without a new "
                                        f"checkpoint; {UNKNOWN}"]


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
        f"point to save within {GRACE_S:g} s); {UNKNOWN}"]


def test_a_loop_that_acts_is_let_finish():
    returncode, err, took = _signal_and_wait(_start("acting"), signal.SIGTERM, GRACE_S + 10)
    assert returncode == 143 and took > GRACE_S + 2 and err == "", err


# A small CartPole run whose calls (2 updates) each sleep longer than the grace inside the
# compiled program (``debug.call_delay_ms``): the main thread cannot act while one runs.
LONG_CALLS = ["-m", "anakin.main", "--config=configs/cartpole_ppo.py",
              f"--config.total_env_steps={16 * 32 * 8}", "--config.num_envs=16",
              "--config.num_steps=32", "--config.log_every=2", "--config.updates_per_call=2",
              "--config.num_devices=1"]


@pytest.mark.slow  # 25-50 s (the default tier's 12 minutes)
def test_a_signal_during_a_call_longer_than_the_grace_saves_it_and_resumes_exactly(tmp_path):
    """SIGTERM 2 s into the second call (updates 3-4, 12 s long, past ``GRACE_S``): the
    call finishes, update 4 is checkpointed, exit 143 with one line saying so; the same
    command resumes from 4, and the metrics equal an uninterrupted run's."""
    delay = f"--config.debug.call_delay_ms={int((GRACE_S + 4) * 1000)}"
    proc = subprocess.Popen([sys.executable, *LONG_CALLS, f"--workdir={tmp_path / 'cut'}",
                             delay], cwd=REPO, env=entry_env(), stderr=subprocess.PIPE,
                            text=True)
    for line in proc.stderr:  # the first call's line: the second call begins
        if line.startswith("first call"):
            break
    time.sleep(2)
    returncode, err, took = _signal_and_wait(proc, signal.SIGTERM, 60)
    assert returncode == 143 and took > GRACE_S, (took, err)
    assert [ln for ln in err.splitlines() if "SIGTERM" in ln] == [
        "SIGTERM: finishing the call in flight (updates 3-4), then saving a checkpoint at "
        "update 4; run the same command to resume"], err
    assert checkpoint_steps(tmp_path / "cut") == [4]
    rerun = subprocess.run([sys.executable, *LONG_CALLS, f"--workdir={tmp_path / 'cut'}"],
                           cwd=REPO, env=entry_env(), capture_output=True, text=True,
                           timeout=300)
    assert rerun.returncode == 0 and "resuming from update 4" in rerun.stderr, rerun.stderr
    full = subprocess.run([sys.executable, *LONG_CALLS, f"--workdir={tmp_path / 'full'}"],
                          cwd=REPO, env=entry_env(), capture_output=True, text=True,
                          timeout=300)
    assert full.returncode == 0, full.stderr
    assert (reproducible_part(read_metrics(tmp_path / "cut"))
            == reproducible_part(read_metrics(tmp_path / "full")))


def _sigterm_brax_at(delay_s: float, workdir) -> tuple[int, str]:
    """SIGTERM ``delay_s`` after starting the Brax config (importing Brax and MuJoCo,
    building or compiling: before its first update); its exit code and stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "anakin.main",
                             "--config=configs/brax_inverted_pendulum_ppo.py",
                             f"--workdir={workdir}"], cwd=REPO, env=entry_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(delay_s)
    returncode, err, _ = _signal_and_wait(proc, signal.SIGTERM, 60)
    return returncode, err


# Progress lines a try may print around its one signal line: the compile's, and, where the
# host compiled faster than the delay (a warm compilation cache), the first call's.
PROGRESS = ("compiling the training call (", "still compiling (", "first call (", "update ")


def _assert_brax_stops_cleanly(delays: list[float], tmp_path) -> None:
    """Every try exits 143 with its one line among any progress lines (a crash was exit 139:
    the interpreter's exit raced the native threads of the libraries mid-import or
    mid-compile)."""
    for i, delay in enumerate(delays):
        returncode, err = _sigterm_brax_at(delay, tmp_path / str(i))
        lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(PROGRESS)]
        assert returncode == 143 and len(lines) == 1 and lines[0].startswith("SIGTERM"), (
            delay, returncode, err)


@pytest.mark.slow  # 15-25 s (the default tier's 12 minutes)
def test_sigterm_before_a_brax_runs_first_update_exits_143(tmp_path):
    _assert_brax_stops_cleanly([2.0, 12.0], tmp_path)


@pytest.mark.slow
def test_sigterm_before_a_brax_runs_first_update_exits_143_ten_times(tmp_path):
    _assert_brax_stops_cleanly([2.0 + 1.5 * i for i in range(10)], tmp_path)
