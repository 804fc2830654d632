"""Checkpoints under faults: SIGKILL at random moments of a loop of saves leaves the latest
reported step restorable (half-written ones are never listed); a damaged latest checkpoint
is reported in one line naming its path, moved aside, and the resume falls back to the
newest good one; when none is good nothing is moved and the error is one line.

Checkpoints are real orbax checkpoints; the damage is done to their files on disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import base
from rlcore.types import EpisodeSummary
from runtime.run.checkpoint import Checkpointer, CheckpointError, short_reason
from runtime.run.directory import RunDir
from runtime.run.workdir import set_aside_previous_run
from tests.helpers import REPO, checkpoint_steps, entry_env

TMP_SUFFIX = ".orbax-checkpoint-tmp"

# Saves steps latest+1, latest+2, ... of a ~4 MB state derived from the step, printing
# "saved <step> <seconds>" after each one is on disk; runs until killed.
SAVER = """
import sys, time
import jax.numpy as jnp
from runtime.run.checkpoint import Checkpointer

def state(step):
    return {"params": {"w": jnp.arange(2 ** 19, dtype=jnp.float32) + step,
                       "b": jnp.full((256, 512), -step, jnp.float32)},
            "opt": [jnp.arange(2 ** 18, dtype=jnp.float32) * step],
            "update": jnp.asarray(step, jnp.int32)}

ckpt = Checkpointer(sys.argv[1], max_to_keep=3, cleanup_tmp=True)
step = (ckpt.latest_step() or 0) + 1
while True:
    t = time.perf_counter()
    ckpt.save(step, state(step))
    print(f"saved {step} {time.perf_counter() - t:.4f}", flush=True)
    step += 1
"""


def _saver_state(step: int) -> dict:
    """The state SAVER writes as ``step`` (kept in step with it)."""
    return {"params": {"w": jnp.arange(2 ** 19, dtype=jnp.float32) + step,
                       "b": jnp.full((256, 512), -step, jnp.float32)},
            "opt": [jnp.arange(2 ** 18, dtype=jnp.float32) * step],
            "update": jnp.asarray(step, jnp.int32)}


def _leaves(tree) -> list[np.ndarray]:
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


def _save_until_killed(workdir, rng, timeout_s: float = 60) -> tuple[int, float]:
    """Starts SAVER on ``workdir``, waits for two saves on disk (the first may be slower),
    SIGKILLs it at a random moment of the next save's duration; returns (last step
    reported saved, the save's duration)."""
    proc = subprocess.Popen([sys.executable, "-c", SAVER, str(workdir)], cwd=REPO,
                            env=entry_env(), stdout=subprocess.PIPE, text=True)
    watchdog = threading.Timer(timeout_s, proc.kill)  # a hung saver ends the readline
    watchdog.start()
    try:
        saved = []
        while len(saved) < 2:
            line = proc.stdout.readline()
            assert line, f"saver ended (exit code {proc.poll()}) before two saves"
            saved.append(line.split())
        seconds = float(saved[-1][2])
        time.sleep(rng.uniform(0.0, 1.2 * seconds))
    finally:
        watchdog.cancel()
        proc.kill()  # SIGKILL
        proc.wait(timeout=30)
    return int(saved[-1][1]), seconds


@pytest.mark.slow  # 15-25 s (the default tier's 12 minutes)
@pytest.mark.optimized
def test_sigkill_during_saves_leaves_the_latest_step_restorable(tmp_path):
    rng = np.random.default_rng(0)
    mid_save = 0
    for _ in range(6):
        reported, _ = _save_until_killed(tmp_path, rng)
        names = os.listdir(tmp_path / "checkpoints")
        tmp_steps = [int(n.split(".")[0]) for n in names if TMP_SUFFIX in n]
        mid_save += bool(tmp_steps)
        ckpt = Checkpointer(str(tmp_path))  # a reader: leaves the tmp directory alone
        try:
            latest = ckpt.latest_step()
            restored = ckpt.restore(_saver_state(0), latest)
        finally:
            ckpt.close()
        assert latest is not None and latest >= reported, (latest, reported, names)
        # Only the save in progress is half-written: the saver removed earlier leftovers.
        assert len(tmp_steps) <= 1 and all(s > latest for s in tmp_steps), (latest, names)
        expected = _saver_state(latest)
        for got, want in zip(_leaves(restored), _leaves(expected), strict=True):
            np.testing.assert_array_equal(got, want)
    assert mid_save >= 1  # at least one kill landed inside a save


# ------------------------------------------------------------------- damaged checkpoints

STEPS_PER_UPDATE = 512


def _config():
    config = base.get_config()
    config.log_every = 2
    config.checkpoint_every = 2
    return config


def _state(update: int) -> dict:
    return {"w": jnp.arange(1000.0) + update, "update": jnp.asarray(update, jnp.int32)}


def _train(workdir, updates, total: int = 10) -> RunDir:
    """Records and checkpoints ``updates`` (every 2) in a RunDir on ``workdir``; returns
    the closed RunDir (its history)."""
    rundir = RunDir(_config(), str(workdir), total, STEPS_PER_UPDATE)
    try:
        rundir.restore_or(_state(0))
        for u in updates:
            rundir.record(u, {"loss/total": float(u)}, EpisodeSummary(0.0, 0.0, 0))
            rundir.checkpoint_or_exit(u, u - 1, _state(u), None)
    finally:
        rundir.close()
    return rundir


def _files(step_dir) -> list[str]:
    return [os.path.join(d, f) for d, _, fs in os.walk(step_dir) for f in fs]


def _damage(step_dir, how: str) -> None:
    """Damages a checkpoint on disk: its array data files truncated to half or overwritten
    with garbage of the same size, or the metadata of its array store (the OCDBT manifest)
    deleted. (Without orbax's tree metadata, ``_METADATA``, a checkpoint still restores
    into a given structure: that is no damage.)"""
    if how == "metadata":
        os.remove(os.path.join(step_dir, "default", "manifest.ocdbt"))
        return
    data = [f for f in _files(step_dir) if f"{os.sep}d{os.sep}" in f]
    assert data, _files(step_dir)
    for path in data:
        size = os.path.getsize(path)
        if how == "truncate":
            os.truncate(path, size // 2)
        else:
            with open(path, "r+b") as f:
                f.write(np.random.default_rng(0).bytes(size))


@pytest.mark.parametrize("how", ["truncate", "overwrite", "metadata"])
def test_damaged_latest_is_reported_moved_aside_and_the_previous_resumed(tmp_path, capsys,
                                                                        how):
    _train(tmp_path, range(1, 7))  # checkpoints 2, 4, 6; metrics lines 2, 4, 6
    _damage(tmp_path / "checkpoints" / "6", how)
    capsys.readouterr()

    rundir = RunDir(_config(), str(tmp_path), 10, STEPS_PER_UPDATE)
    try:
        restored = rundir.restore_or(_state(0))
        steps = rundir.ckpt.steps()
    finally:
        rundir.close()

    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("checkpoint:")]
    path = os.path.join(tmp_path, "checkpoints", "6")
    assert len(lines) == 1, err
    assert lines[0].startswith(f"checkpoint: {path} is damaged (")
    assert lines[0].endswith("; resuming from step 4 instead")
    assert f"moved it to {os.path.join(tmp_path, 'checkpoints', 'damaged-6')};" in lines[0]
    assert "Traceback" not in err and "resuming from update 4" in err
    assert int(restored["update"]) == 4
    np.testing.assert_array_equal(restored["w"], np.arange(1000.0) + 4)
    assert steps == [2, 4] and (tmp_path / "checkpoints" / "damaged-6").is_dir()
    with open(tmp_path / "metrics.jsonl") as f:
        assert [json.loads(ln)["update"] for ln in f] == [2, 4]


def test_resumed_run_saves_the_damaged_step_anew(tmp_path):
    _train(tmp_path, range(1, 7))
    _damage(tmp_path / "checkpoints" / "6", "truncate")
    _train(tmp_path, range(5, 9))  # resumes from 4: saves 6 and 8 again
    ckpt = Checkpointer(str(tmp_path))
    try:
        assert ckpt.steps()[-2:] == [6, 8]
        assert int(ckpt.restore(_state(0), 6)["update"]) == 6
    finally:
        ckpt.close()


def test_resume_drops_a_torn_metrics_line(tmp_path):
    _train(tmp_path, range(1, 5))
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"update": 5, "env_st')  # the process died inside this write
    history = _train(tmp_path, range(5, 7)).history
    assert [row["update"] for row in history] == [6]
    with open(tmp_path / "metrics.jsonl") as f:
        assert [json.loads(ln)["update"] for ln in f] == [2, 4, 6]


def test_no_good_checkpoint_is_one_line_and_moves_nothing(tmp_path, capsys):
    _train(tmp_path, range(1, 5))  # checkpoints 2, 4
    for step in ("2", "4"):
        _damage(tmp_path / "checkpoints" / step, "truncate")
    rundir = RunDir(_config(), str(tmp_path), 10, STEPS_PER_UPDATE)
    try:
        with pytest.raises(CheckpointError) as info:
            rundir.restore_or(_state(0))
    finally:
        rundir.close()
    message = str(info.value)
    assert "\n" not in message and len(message) < 600, message
    assert message.startswith(f"{os.path.join(tmp_path, 'checkpoints', '4')} is damaged (")
    assert "no older one restores either (tried 2)" in message and "--fresh" in message
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["2", "4"]
    assert "checkpoint:" not in capsys.readouterr().err


def test_fresh_moves_the_previous_run_beside_the_workdir(tmp_path):
    workdir = tmp_path / "demo"
    workdir.mkdir()
    _train(workdir, range(1, 5))
    (workdir / "events.out.tfevents.1.host").write_text("x")
    (workdir / "notes.txt").write_text("mine")
    moved = set_aside_previous_run(str(workdir))
    assert os.path.dirname(moved) == str(tmp_path)
    assert os.path.basename(moved).startswith("demo.old-")
    assert {"checkpoints", "config.json", "events.out.tfevents.1.host", "log_state",
            "metrics.jsonl"} <= set(os.listdir(moved))
    assert sorted(os.listdir(workdir)) == ["notes.txt"]
    assert checkpoint_steps(moved) == [2, 4]
    assert set_aside_previous_run(str(workdir)) is None  # nothing left to move


def test_short_reason_keeps_the_status_the_cause_and_the_file():
    root = "/runs/a/checkpoints/6"
    error = ValueError(
        'OUT_OF_RANGE: Error opening "cast" driver: Error opening "zarr" driver: Error reading '
        f'"b/.zarray" in OCDBT database at local file "{root}/default/": Error reading Byte '
        f'range [0, 349) of local file "{root}/default/d/3213": Requested byte range [0, 349) '
        'is not valid for value of size 174 [tensorstore_spec[1]=\'{"driver": "zarr"}\']')
    assert short_reason(error, root) == (
        "OUT_OF_RANGE: Requested byte range [0, 349) is not valid for value of size 174 "
        "(file default/d/3213)")
    assert short_reason(ValueError("first line\nsecond")) == "ValueError: first line"
    assert len(short_reason(ValueError("x" * 1000))) == 200
