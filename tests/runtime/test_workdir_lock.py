"""One run per workdir (``runtime.run.lock``): a second holder is refused with one line
naming the workdir and the holder; a killed holder leaves no stale lock; two training runs
started together on one workdir: one trains, the other exits 2 at once, in both orders."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from rlcore.errors import ConfigError
from runtime.run import files as run_files
from runtime.run import lock as workdir_lock
from tests.helpers import REPO, entry_env, lock_holder, read_metrics

_holder = lock_holder


def test_check_free_refuses_other_runs_only(tmp_path):
    """``check_free``: a lock file nobody holds, or held by this run's process 0 (its tag),
    passes; a lock held by another run (another tag, or none) is refused naming the holder;
    nothing is created in a workdir without a lock file."""
    workdir_lock.check_free(str(tmp_path))
    assert os.listdir(tmp_path) == []
    ours = workdir_lock.run_tag(2, "127.0.0.1:1234")
    proc = _holder(tmp_path, ours)
    try:
        workdir_lock.check_free(str(tmp_path), ours)
        for other in ("", workdir_lock.run_tag(2, "127.0.0.1:999")):
            with pytest.raises(ConfigError, match=rf"^--workdir: {tmp_path} is in use by "
                               rf"another run \(host \S+, pid {proc.pid}, since .*, "
                               r"coordinator 127.0.0.1:1234\); wait"):
                workdir_lock.check_free(str(tmp_path), other)
    finally:
        proc.kill()
        proc.wait()
    workdir_lock.check_free(str(tmp_path))  # the holder is gone


def test_second_holder_refused_with_the_holder_named(tmp_path):
    proc = _holder(tmp_path)
    try:
        with pytest.raises(ConfigError, match=rf"^--workdir: {tmp_path} is in use by another "
                           rf"run \(host \S+, pid {proc.pid}, since [\d-]+ [\d:]+Z\); wait"):
            workdir_lock.hold(str(tmp_path))
    finally:
        proc.kill()
        proc.wait()


def test_killed_holder_leaves_no_stale_lock(tmp_path):
    proc = _holder(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert os.path.exists(run_files.lock_path(str(tmp_path)))  # the file stays; the lock not
    try:
        workdir_lock.hold(str(tmp_path))
        workdir_lock.hold(str(tmp_path))  # again in the same process: a no-op
        with open(run_files.lock_path(str(tmp_path))) as f:
            assert f"pid {os.getpid()}," in f.read()
    finally:
        workdir_lock.release(str(tmp_path))


def _train(workdir, seed: int) -> subprocess.Popen:
    # 8 envs x 16 steps, 300 updates: some seconds of training after the compile.
    args = ["--config=configs/cartpole_ppo.py", f"--workdir={workdir}", "--config.num_envs=8",
            "--config.num_steps=16", f"--config.total_env_steps={8 * 16 * 300}",
            "--config.log_every=50", f"--config.seed={seed}"]
    return subprocess.Popen([sys.executable, "-m", "anakin.main", *args], cwd=REPO,
                            env=entry_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


@pytest.mark.parametrize("first", [0, 1])
def test_two_runs_on_one_workdir_one_trains_the_other_exits_2(tmp_path, first):
    """Started 0.2 s apart (``first`` says which seed starts first): exactly one trains to
    the end with its own config and metrics; the other exits 2 with one line naming the
    workdir and the holder's pid, without a traceback."""
    procs = {}
    for seed in (first, 1 - first):
        procs[seed] = _train(tmp_path, seed)
        time.sleep(0.2)
    out = {seed: p.communicate(timeout=300) for seed, p in procs.items()}
    codes = {seed: p.returncode for seed, p in procs.items()}
    assert sorted(codes.values()) == [0, 2], (codes, out)
    winner = next(s for s, c in codes.items() if c == 0)
    loser = 1 - winner
    err = out[loser][1]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"config error: --workdir: {tmp_path} is in use by another "
                               f"run (host ")
    assert f"pid {procs[winner].pid}," in lines[0]
    rows = read_metrics(str(tmp_path))
    assert rows[-1]["update"] == 300 and [r["update"] for r in rows] == list(range(50, 301, 50))
    with open(run_files.config_path(str(tmp_path))) as f:
        assert f'"seed": {winner}' in f.read()


def _tree(workdir) -> dict[str, tuple[int, int]]:
    """``{relative path: (size, mtime_ns)}`` of every file under ``workdir``."""
    out = {}
    for d, _, files in os.walk(workdir):
        for name in files:
            st = os.stat(os.path.join(d, name))
            out[os.path.relpath(os.path.join(d, name), workdir)] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.mark.slow
def test_evaluate_reads_a_live_run_and_never_writes_there(tmp_path):
    """``anakin.evaluate`` on a workdir whose run checkpoints every update (keeping three;
    each update held 0.1 s, so that the trainer does not take a core from the evaluations):
    three evaluations in a row each restore a finished checkpoint and exit 0; after the run,
    an evaluation leaves every file of the workdir as it was (names, sizes, times)."""
    args = ["--config=configs/cartpole_ppo.py", f"--workdir={tmp_path}", "--config.num_envs=8",
            "--config.num_steps=16", f"--config.total_env_steps={8 * 16 * 100_000}",
            "--config.log_every=10", "--config.checkpoint_every=1",
            "--config.updates_per_call=1", "--config.debug.learner_delay_ms=100"]
    trainer = subprocess.Popen([sys.executable, "-m", "anakin.main", *args], cwd=REPO,
                               env=entry_env(), stderr=subprocess.PIPE, text=True)
    evaluate = [sys.executable, "-m", "anakin.evaluate", f"--workdir={tmp_path}",
                "--episodes=2"]
    try:
        for line in trainer.stderr:
            if line.startswith("update "):
                break
        for _ in range(3):
            proc = subprocess.run(evaluate, cwd=REPO, env=entry_env(), capture_output=True,
                                  text=True, timeout=120)
            other = [ln for ln in proc.stderr.splitlines()
                     if not ln.startswith("library messages: ")]  # (those in a temp file)
            assert proc.returncode == 0 and not other, proc.stderr
            assert "2 episodes" in proc.stdout, proc.stdout
        assert trainer.poll() is None  # it was training all along
    finally:
        trainer.send_signal(signal.SIGTERM)
        trainer.wait(timeout=60)
    assert trainer.returncode == 143
    before = _tree(tmp_path)
    proc = subprocess.run(evaluate, cwd=REPO, env=entry_env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert _tree(tmp_path) == before
