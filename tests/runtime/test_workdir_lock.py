"""One run per workdir (``runtime.workdir_lock``): a second holder is refused with one line
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
from runtime import run_files, workdir_lock
from tests.helpers import REPO, entry_env, read_metrics

HOLD = ("import sys, time; from runtime import workdir_lock; "
        "workdir_lock.hold(sys.argv[1]); print('held', flush=True); time.sleep(60)")


def _holder(workdir) -> subprocess.Popen:
    """A process that takes the lock of ``workdir`` and sleeps; returns once it holds it."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(workdir)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


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
