"""``python -m runtime.commands.launch``: N local processes of one run, prefixed output, the first
failure wins, signals reach every process, nothing outlives the launcher; and
``runtime.distributed.detected_cluster`` (the runtime JAX's cluster detection finds).

Every launcher runs under a subprocess timeout, and every process it reports is checked
dead (and killed if not) when its test ends.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

import jax
import psutil
import pytest
from ml_collections import ConfigDict

from runtime import distributed
from runtime.commands.launch import free_port
from runtime.distributed import data_mesh
from tests.helpers import (
    REPO,
    assert_rows_close,
    checkpoint_steps,
    entry_env,
    lock_holder,
    read_metrics,
    xla_flags,
)
from tests.multiprocess_worker import config_for

CONFIG_FILES = {"anakin": "configs/cartpole_ppo.py", "sebulba": "configs/cartpole_ppo_sebulba.py"}
COMPARED_UPDATES = 5

# A child that writes ``ready<i>`` once its handlers are set, then acts on ``MODE``:
# ``fail``: process 1 waits for process 0 to be ready and exits 3, process 0 sleeps
# (``fail-stubborn``: and ignores SIGTERM); ``deaf``: ignores SIGTERM and sleeps;
# ``term``: a SIGINT/SIGTERM writes ``term<i>`` and exits 130/143 (``slow-term``: process 0
# first takes 3 s, like a checkpoint); ``sleep``: sleeps.
CHILD = """
import os, signal, sys, time
mode, tmp = sys.argv[1], sys.argv[2]
i = int(sys.argv[-1].split("=")[1])
def touch(name):
    open(os.path.join(tmp, name), "w").close()
def on_signal(signum, frame):
    if mode == "slow-term" and i == 0:
        time.sleep(3)
    touch(f"term{i}")
    sys.exit(128 + signum)
if mode in ("term", "slow-term"):
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
if mode == "fail-stubborn" and i == 0 or mode == "deaf":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
touch(f"ready{i}")
if mode.startswith("fail") and i == 1:
    deadline = time.time() + 20
    while not os.path.exists(os.path.join(tmp, "ready0")) and time.time() < deadline:
        time.sleep(0.01)
    sys.exit(3)
time.sleep(60)
"""

# A child that shows what it was given: its arguments and device flags on stdout, a line on
# stderr, and a last stdout line without a newline.
ECHO = """
import os, sys
print("args", " ".join(sys.argv[1:]))
print("env", os.environ["JAX_PLATFORMS"], os.environ["XLA_FLAGS"])
print("to stderr", file=sys.stderr)
print("[Gloo] Rank 1 is connected to 3 peer ranks. Expected number of connected peer ranks "
      "is : 3", file=sys.stderr)
print("[Gloo] Rank [Gloo] Rank 2 is connected to 3 peer ranks. Expected number of connected "
      "peer ranks is : 3", file=sys.stderr)  # two threads' pieces on one line
print("0 is connected to 3 peer ranks. Expected number of connected peer ranks is : 3",
      file=sys.stderr)  # and the rest of the first on the next
sys.stdout.write("no newline")
"""


def _launcher(args: list[str], env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "runtime.commands.launch", *args], cwd=REPO,
                            env=env or entry_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _pids(stderr: str) -> list[int]:
    """The process ids the launcher reports (``launch: ... pids 12 13``)."""
    found = re.search(r"^launch: .* pids ([\d ]+)$", stderr, re.MULTILINE)
    return [int(p) for p in found.group(1).split()] if found else []


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _kill_alive(pids: list[int]) -> list[int]:
    """SIGKILLs those of ``pids`` that are alive; returns them."""
    alive = [p for p in pids if _alive(p)]
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    return alive


def _abandon(proc: subprocess.Popen) -> None:
    """SIGKILLs the launcher (its processes die with it) and any process it reported."""
    proc.kill()
    _, err = proc.communicate(timeout=10)
    _kill_alive(_pids(err))


def _finish(proc: subprocess.Popen, timeout_s: float) -> tuple[int, str, str, list[int]]:
    """Waits for the launcher (at most ``timeout_s``); returns its exit code, output and
    the pids of its processes, none of which may be alive. Whatever happens, the launcher
    and every process it reported end."""
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except BaseException:
        _abandon(proc)
        raise
    pids = _pids(err)
    assert not _kill_alive(pids), f"processes outlived the launcher\n{err[-3000:]}"
    return proc.returncode, out, err, pids


def _run(args: list[str], timeout_s: float = 60, env: dict | None = None):
    """``python -m runtime.commands.launch *args`` to the end: ``(code, stdout, stderr, pids)``."""
    return _finish(_launcher(args, env), timeout_s)


def _child(mode: str, tmp_path) -> list[str]:
    return ["--", sys.executable, "-c", CHILD, mode, str(tmp_path)]


# --- the trainers: 2 processes x 2 devices against 1 process x 4 devices -------------------


def _flag_value(value) -> str:
    return str(value).replace(" ", "") if isinstance(value, tuple) else str(value)


def _config_flags(mode: str, **overrides) -> list[str]:
    """``tests.multiprocess_worker.config_for(mode)`` (with its per-process Sebulba device
    split) and ``overrides`` as ``--config.field=value`` overrides of the mode's config
    file."""
    from configs import cartpole_ppo, cartpole_ppo_sebulba

    base = (cartpole_ppo if mode == "anakin" else cartpole_ppo_sebulba).get_config()
    config = config_for(mode)
    config.update(overrides)
    if mode == "sebulba":
        config.actor_device_ids, config.learner_device_ids = (0,), (1,)
    return [f"--config.{key}={_flag_value(value)}" for key, value in config.items()
            if not isinstance(value, ConfigDict) and value != base[key]]


def _one_process(mode: str, **overrides) -> list[dict]:
    """The rows of ``config_for(mode)`` (Sebulba: with ``overrides``) in this process on 4
    devices, laid out as the two processes lay them out."""
    if mode == "anakin":
        from anakin.train import train

        return train(config_for("anakin"), None, mesh=data_mesh(jax.devices()[:4]))
    from sebulba.train import prepare, train

    config = config_for("sebulba")
    config.update(overrides)
    config.actor_device_ids, config.learner_device_ids = (0, 2), (1, 3)
    prepare(config)
    return train(config, None)


@pytest.mark.slow
def test_two_sebulba_processes_take_the_clock_checkpoints_together(tmp_path):
    """A wall-clock cadence shorter than an update: process 0's clock decides each
    checkpoint and every process saves the same updates (``distributed.ClockBoard``; orbax
    saves are collective, so a disagreement would hang until the launcher's timeout). With
    ``checkpoint_every=0`` only the clock saves before the end. Process 0 posts update
    ``u + 1`` after update ``u`` and every process saves it there; the next post comes
    after the next update, so a cadence shorter than an update saves every second one."""
    config = config_for("sebulba")
    total = config.total_env_steps // (config.num_envs * config.num_steps)
    proc = _launcher(["--num_processes=2", "--devices_per_process=2", "--timeout_s=150", "--",
                      sys.executable, "-m", "sebulba.main", f"--config={CONFIG_FILES['sebulba']}",
                      f"--workdir={tmp_path}", *_config_flags("sebulba"),
                      "--config.checkpoint_every=0", "--config.checkpoint_every_minutes=1e-5"])
    code, out, err, pids = _finish(proc, timeout_s=180)
    assert code == 0, err[-3000:]
    assert len(pids) == 2
    assert checkpoint_steps(tmp_path) == [total - 4, total - 2, total], err[-3000:]


@pytest.mark.skipif(jax.device_count() < 4, reason="needs 4 (fake) devices")
@pytest.mark.parametrize("mode", ["anakin", pytest.param("sebulba", marks=pytest.mark.slow)])
def test_two_processes_match_one(mode, tmp_path):
    proc = _launcher(["--num_processes=2", "--devices_per_process=2", "--timeout_s=150", "--",
                      sys.executable, "-m", f"{mode}.main", f"--config={CONFIG_FILES[mode]}",
                      f"--workdir={tmp_path}", *_config_flags(mode)])
    try:  # the one-process twin trains here while the launched processes compile
        single = _one_process(mode)
    except BaseException:
        _abandon(proc)
        raise
    code, out, err, pids = _finish(proc, timeout_s=180)
    assert code == 0, err[-3000:]
    assert len(pids) == 2
    lines = [ln for ln in (out + err).splitlines() if not ln.startswith("launch: ")]
    assert all(ln.startswith(("[p0] ", "[p1] ")) for ln in lines), lines[:5]
    # One console for the run: process 0 prints the progress lines and the summary.
    assert any(ln.startswith("[p0] update ") for ln in err.splitlines())
    assert any(ln.startswith("[p0] learning curve") for ln in out.splitlines())
    assert not [ln for ln in lines if ln.startswith("[p1] ") and
                ("update " in ln or "learning curve" in ln or "first call" in ln)], lines
    two = read_metrics(tmp_path)
    assert len(two) >= COMPARED_UPDATES
    assert_rows_close(single[:COMPARED_UPDATES], two[:COMPARED_UPDATES], tol=1e-4)


@pytest.mark.slow
@pytest.mark.skipif(jax.device_count() < 4, reason="needs 4 (fake) devices")
def test_two_sebulba_processes_match_one_at_lag_4(tmp_path):
    """policy_lag 4 over 9 updates (rollouts 5 .. 8 act with versions 1 .. 4): each
    process's actors wait for the same versions as the one process's."""
    lag = dict(policy_lag=4, total_env_steps=16 * 16 * 9)
    proc = _launcher(["--num_processes=2", "--devices_per_process=2", "--timeout_s=150", "--",
                      sys.executable, "-m", "sebulba.main",
                      f"--config={CONFIG_FILES['sebulba']}", f"--workdir={tmp_path}",
                      *_config_flags("sebulba", **lag)])
    try:
        single = _one_process("sebulba", **lag)
    except BaseException:
        _abandon(proc)
        raise
    code, out, err, pids = _finish(proc, timeout_s=180)
    assert code == 0, err[-3000:]
    two = read_metrics(tmp_path)
    assert [r["params_lag"] for r in two] == [0.0, 1.0, 2.0, 3.0] + [4.0] * 5
    assert_rows_close(single, two, tol=1e-4)


def test_wandb_refused_on_process_0_stops_every_process_with_exit_2(tmp_path):
    """Only process 0 starts W&B; when it refuses (no API key), every process says so and
    exits 2 at once, instead of waiting for process 0 in a collective."""
    pytest.importorskip("wandb")
    env = {k: v for k, v in entry_env().items() if not k.startswith("WANDB_")}
    env.update(HOME=str(tmp_path), WANDB_CONFIG_DIR=str(tmp_path / "wandb-config"),
               WANDB_SILENT="true")
    env.pop("NETRC", None)
    t0 = time.monotonic()
    code, _, err, _ = _run(["--num_processes=2", "--devices_per_process=1", "--timeout_s=100",
                            "--", sys.executable, "-m", "anakin.main",
                            "--config=configs/cartpole_ppo.py", f"--workdir={tmp_path}/run",
                            "--config.wandb_project=podracer-test",
                            "--config.num_devices=0", "--config.num_envs=8",
                            "--config.wandb_mode=online"],
                           timeout_s=120, env=env)
    assert code == 2, err[-3000:]
    assert "[p0] config error: wandb_mode: W&B could not start a run in mode 'online'" in err
    assert "[p1] config error: wandb_mode: W&B could not start a run on process 0" in err
    assert time.monotonic() - t0 < 60, err[-3000:]


def test_launch_onto_a_locked_workdir_is_refused_in_one_line(tmp_path):
    """A launch onto a workdir another run holds: the launcher refuses it in one line, exit
    2, before it starts any process."""
    holder = lock_holder(tmp_path)
    try:
        code, out, err, pids = _run(["--num_processes=2", "--", sys.executable, "-m",
                                     "anakin.main", "--config=configs/cartpole_ppo.py",
                                     f"--workdir={tmp_path}"], timeout_s=60)
    finally:
        holder.kill()
        holder.wait()
    assert code == 2 and out == "" and pids == [], err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"config error: --workdir: {tmp_path} is in use by another run (host "), err
    assert f"pid {holder.pid}," in lines[0]


@pytest.mark.parametrize("process", [0, 1])
def test_every_process_checks_the_workdir_lock_before_joining(process, tmp_path):
    """Process 0 or 1 of a 2-process run, started alone onto a workdir another run holds:
    one line and exit 2 within seconds (no wait for its peer, no coordination error)."""
    holder = lock_holder(tmp_path)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "anakin.main", "--config=configs/cartpole_ppo.py",
             f"--workdir={tmp_path}", f"--config.coordinator_address=127.0.0.1:{free_port()}",
             "--config.num_processes=2", f"--config.process_id={process}"],
            cwd=REPO, env=entry_env(), capture_output=True, text=True, timeout=60)
    finally:
        holder.kill()
        holder.wait()
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith(f"config error: --workdir: {tmp_path} is in use by another "
                               f"run (host "), lines


@pytest.mark.parametrize("process", [0, 1])
def test_actor_threads_from_the_machine_are_refused_before_joining(process, tmp_path):
    """Process 0 or 1 of a 2-process Sebulba run with ``num_actor_threads=0``, started
    alone: one line and exit 2 within seconds, as the launcher's run gives (no wait for
    its peer)."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "sebulba.main", "--config=configs/cartpole_ppo_sebulba.py",
         f"--workdir={tmp_path / 'run'}", "--config.num_actor_threads=0",
         f"--config.coordinator_address=127.0.0.1:{free_port()}", "--config.num_processes=2",
         f"--config.process_id={process}"],
        cwd=REPO, env=entry_env(), capture_output=True, text=True, timeout=60)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and lines == [
        "config error: num_actor_threads: 0 (from the machine) needs one process, got 2: "
        "name the count, the same in every process"], proc.stderr[-3000:]
    assert time.monotonic() - started < 30


# --- the launcher itself, with small Python children ---------------------------------------


def test_fields_devices_and_prefixes():
    env = dict(entry_env(), XLA_FLAGS="--xla_cpu_multi_thread_eigen=false "
                                      "--xla_force_host_platform_device_count=7")
    code, out, err, _ = _run(["--num_processes=2", "--devices_per_process=3", "--port=12345",
                              "--", sys.executable, "-c", ECHO, "--config.seed=1"], env=env)
    assert code == 0, err
    for i in range(2):
        assert (f"[p{i}] args --config.seed=1 --config.coordinator_address=127.0.0.1:12345 "
                f"--config.num_processes=2 --config.process_id={i}") in out.splitlines()
        assert (f"[p{i}] env cpu --xla_cpu_multi_thread_eigen=false "
                "--xla_force_host_platform_device_count=3") in out.splitlines()
        assert f"[p{i}] no newline" in out.splitlines()
        assert f"[p{i}] to stderr" in err.splitlines()
    assert "to stderr" not in out
    assert "Gloo" not in err and "peer ranks" not in err  # the collectives' chatter, garbled too


@pytest.mark.parametrize("mode, grace", [("fail", 10), ("fail-stubborn", 1)])
def test_first_failure_wins_and_stops_the_others(mode, grace, tmp_path):
    start = time.monotonic()
    code, _, err, pids = _run(["--num_processes=2", f"--grace_s={grace}",
                               *_child(mode, tmp_path)], timeout_s=60)
    assert code == 3, err
    assert time.monotonic() - start < 8 + (grace if mode == "fail-stubborn" else 0)
    assert "launch: p1 exited with 3; stopping the others" in err
    assert len(pids) == 2  # and none alive: checked by _finish


def _wait_for(ready, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.mark.parametrize("sig, expected", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_reaches_every_process(sig, expected, tmp_path):
    proc = _launcher(["--num_processes=2", *_child("term", tmp_path)])
    ready = _wait_for(lambda: all((tmp_path / f"ready{i}").exists() for i in range(2)), 30)
    proc.send_signal(sig if ready else signal.SIGKILL)
    code, _, err, _ = _finish(proc, timeout_s=30)
    assert ready, f"the children never got ready\n{err}"
    assert code == expected, err
    assert all((tmp_path / f"term{i}").exists() for i in range(2))


def test_after_a_signal_a_quick_exit_does_not_cut_the_others_short(tmp_path):
    """Process 1 exits at once on SIGINT, process 0 takes 3 s (its checkpoint): the launcher
    waits for it (``--signal_grace_s``), not just ``--grace_s``."""
    proc = _launcher(["--num_processes=2", "--grace_s=1", "--signal_grace_s=60",
                      *_child("slow-term", tmp_path)])
    ready = _wait_for(lambda: all((tmp_path / f"ready{i}").exists() for i in range(2)), 30)
    proc.send_signal(signal.SIGINT if ready else signal.SIGKILL)
    code, _, err, _ = _finish(proc, timeout_s=30)
    assert ready and code == 130, err
    assert (tmp_path / "term0").exists() and (tmp_path / "term1").exists(), err
    assert "SIGKILL" not in err and "stopping the others" not in err, err


def test_processes_that_ignore_a_signal_are_killed_after_its_grace(tmp_path):
    proc = _launcher(["--num_processes=2", "--signal_grace_s=1", *_child("deaf", tmp_path)])
    ready = _wait_for(lambda: all((tmp_path / f"ready{i}").exists() for i in range(2)), 30)
    proc.send_signal(signal.SIGTERM if ready else signal.SIGKILL)
    t0 = time.monotonic()
    code, _, err, _ = _finish(proc, timeout_s=30)  # and no process left: checked there
    assert ready and code == 143 and time.monotonic() - t0 < 10, err
    assert "still running 1 s after the signal" in err


def test_processes_die_with_a_killed_launcher(tmp_path):
    proc = _launcher(["--num_processes=2", *_child("sleep", tmp_path)])
    ready = _wait_for(lambda: all((tmp_path / f"ready{i}").exists() for i in range(2)), 30)
    proc.kill()
    _, err = proc.communicate(timeout=10)
    pids = _pids(err)
    gone = _wait_for(lambda: not any(_alive(p) for p in pids), 10)
    left = _kill_alive(pids)
    assert ready and len(pids) == 2 and gone and not left, err


def test_timeout_kills_everything(tmp_path):
    start = time.monotonic()
    code, _, err, pids = _run(["--num_processes=2", "--timeout_s=1",
                               *_child("sleep", tmp_path)], timeout_s=30)
    assert code == 124, err
    assert time.monotonic() - start < 10
    assert len(pids) == 2 and "launch: timed out after 1 s" in err


@pytest.mark.parametrize("args, message", [
    (["--num_processes=0", "--", "true"], "--num_processes: must be >= 1, got 0"),
    (["--num_processes=2", "--devices_per_process=0", "--", "true"],
     "--devices_per_process: must be >= 1, got 0"),
    (["--num_processes=2"], "no command after --"),
    (["--num_processes=2", "--"], "no command after --"),
    (["--num_processes=x", "--", "true"], "invalid int value"),
])
def test_bad_arguments_exit_2_with_one_line(args, message):
    code, out, err, _ = _run(args, timeout_s=30)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("launch error: ") and message in err


def test_command_that_does_not_start():
    code, _, err, _ = _run(["--num_processes=2", "--", "/nonexistent/command"], timeout_s=30)
    assert code == 127 and "launch: cannot start" in err


# --- runtime.distributed: joining what JAX detects by itself --------------------------------

SLURM = {"SLURM_JOB_ID": "7", "SLURM_STEP_NODELIST": "localhost", "SLURM_PROCID": "0",
         "SLURM_LOCALID": "0"}


@pytest.mark.parametrize("env, expected", [
    ({}, None),
    (dict(SLURM, SLURM_NTASKS="2"), "slurm"),
    (dict(SLURM, SLURM_NTASKS="1"), None),          # srun -n 1: stays single-process
    ({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "2"}, None),  # ssh into an allocation
])
def test_detected_cluster(env, expected, monkeypatch):
    for key in [k for k in os.environ if k.startswith(("SLURM_", "OMPI_"))]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert distributed.detected_cluster() == expected


JOIN = """
import jax
from configs import base
from runtime import distributed
distributed.initialize(base.get_config())  # no process fields given
print(jax.process_count(), jax.device_count(), jax.process_index())
"""


def test_slurm_step_joins_by_itself():
    """Two processes with a 2-task SLURM step's variables and default process fields form
    one 4-device runtime."""
    port = free_port()
    procs = []
    try:
        for i in range(2):
            env = {**entry_env(), **SLURM, "SLURM_NTASKS": "2", "SLURM_PROCID": str(i),
                   "SLURM_LOCALID": str(i), "JAX_COORDINATOR_PORT": str(port),
                   "XLA_FLAGS": xla_flags("--xla_force_host_platform_device_count=2")}
            procs.append(subprocess.Popen([sys.executable, "-c", JOIN], cwd=REPO, env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True, start_new_session=True))
        outputs = [p.communicate(timeout=60)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=10)
    for i, out in enumerate(outputs):
        assert f"2 4 {i}" in out.splitlines(), out[-2000:]



# --- a dead peer ends the run ---------------------------------------------------------------


def _read_lines(stream, lines: list[str], seen: threading.Event, marker: str) -> None:
    for line in stream:
        lines.append(line)
        if marker in line:
            seen.set()


def _signal_process_1(proc, marker: str, sig, settle_s: float = 0.0):
    """Once a line of the launcher's stderr holds ``marker`` (within 150 s), waits
    ``settle_s`` and sends ``sig`` to process 1; returns ``(launcher exit code, seconds from
    the signal to its exit, its stderr)``. Whatever happens, the launcher and its processes
    end, and none may outlive it."""
    lines, running = [], threading.Event()
    reader = threading.Thread(target=_read_lines, args=(proc.stderr, lines, running, marker),
                              daemon=True)
    reader.start()
    try:
        assert running.wait(150), "".join(lines)[-3000:]
        time.sleep(settle_s)
        os.kill(_pids("".join(lines))[1], sig)
        sent = time.monotonic()
        code = proc.wait(timeout=90)
        took = time.monotonic() - sent
        reader.join(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        left = _kill_alive(_pids("".join(lines)))
    assert not left, "processes outlived the launcher"
    return code, took, "".join(lines)


@pytest.mark.parametrize("mode", ["anakin", pytest.param("sebulba", marks=pytest.mark.slow)])
def test_a_dead_peer_ends_the_run_within_60_s(mode, tmp_path):
    """SIGKILL of process 1 mid-run (a checkpoint every update, so it may land in a save, a
    collective or a queue wait): process 0 exits non-zero by itself within 60 s. The
    launcher's grace (120 s) is longer than that, so it is the runtime that ends it: JAX's
    coordination service after ``heartbeat_timeout_s``."""
    flags = _config_flags(mode) + ["--config.total_env_steps=50000000",
                                   "--config.checkpoint_every=1", "--config.log_every=1",
                                   "--config.heartbeat_timeout_s=10"]
    proc = _launcher(["--num_processes=2", "--devices_per_process=2", "--grace_s=120",
                      "--timeout_s=170", "--", sys.executable, "-m", f"{mode}.main",
                      f"--config={CONFIG_FILES[mode]}", f"--workdir={tmp_path / 'run'}",
                      *flags])
    code, elapsed, err = _signal_process_1(proc, "[p0] update ", signal.SIGKILL)
    assert code != 0 and elapsed < 60, (code, elapsed, err[-3000:])
    assert "launch: p1 exited with 137" in err


# --- a signal to one Sebulba process stops both ----------------------------------------------


@pytest.mark.slow
def test_a_signal_to_one_sebulba_process_stops_both_within_seconds(tmp_path):
    """SIGINT to process 1 only, 1 s into update 2 (every update but the first held 10 s):
    it reaches process 0 through the coordination service (``distributed.StopBoard``), both
    abandon update 2 and checkpoint update 1 together (orbax barriers outside the devices),
    and the run exits 130 within 6 s, one stop line from process 0. The same command without
    the hold resumes from 1 and trains to the end on both processes."""
    command = [sys.executable, "-m", "sebulba.main", f"--config={CONFIG_FILES['sebulba']}",
               f"--workdir={tmp_path}", *_config_flags("sebulba"),
               "--config.checkpoint_every=0"]
    proc = _launcher(["--num_processes=2", "--devices_per_process=2", "--grace_s=30",
                      "--timeout_s=170", "--", *command, "--config.debug.learner_delay_ms=10000"])
    # 1 s after update 1's line, update 2 is in flight (held 10 s)
    code, took, err = _signal_process_1(proc, "[p0] update 1/", signal.SIGINT, settle_s=1.0)
    assert code == 130 and took < 6, (took, err[-3000:])
    stop_lines = [ln for ln in err.splitlines() if "SIGINT: " in ln]
    assert len(stop_lines) == 1 and stop_lines[0].startswith(
        "[p0] SIGINT: abandoning update 2 in flight, saving a checkpoint at update 1"), err
    assert "Traceback" not in err, err[-3000:]
    assert checkpoint_steps(tmp_path) == [1]
    assert [r["update"] for r in read_metrics(tmp_path)] == [1]

    code, _, err, _ = _run(["--num_processes=2", "--devices_per_process=2", "--timeout_s=170",
                            "--", *command], timeout_s=180)
    assert code == 0 and "[p0] resuming from update 1" in err, err[-3000:]
    assert [r["update"] for r in read_metrics(tmp_path)] == [1, 2, 3, 4, 5, 6]
