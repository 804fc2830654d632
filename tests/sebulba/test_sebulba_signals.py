"""Sebulba on a signal: the update in flight is abandoned and the last completed one saved
within seconds; a second signal during that save exits at once and a checkpoint still
restores; the same command resumes and trains to the end. And the console lines while the
learner stays long in one stage (``sebulba.progress``)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import cartpole_ppo_sebulba
from runtime import distributed
from runtime.run.checkpoint import Checkpointer
from sebulba import pipeline, progress
from sebulba.train import prepare, train
from tests.helpers import REPO, checkpoint_steps, entry_env, read_metrics

HOLD_MS = 8000  # debug.learner_delay_ms: every update but a run's first lasts 8 s more


def _command(workdir, hold_ms: int) -> list[str]:
    """Three updates of 8 envs x 16 steps, a log line each, no periodic checkpoint."""
    return [sys.executable, "-m", "sebulba.main", "--config=configs/cartpole_ppo_sebulba.py",
            f"--workdir={workdir}", "--config.num_envs=8", "--config.num_steps=16",
            f"--config.total_env_steps={8 * 16 * 3}", "--config.log_every=1",
            "--config.checkpoint_every=0", f"--config.debug.learner_delay_ms={hold_ms}"]


def _interrupt_after(workdir, line_prefix: str, *, again_on: str | None = None):
    """Runs the command; 1 s after a stderr line starting with ``line_prefix`` sends SIGINT
    (and a second one as soon as a line starting with ``again_on`` appears); returns
    ``(exit code, stderr, seconds from the first signal to the exit)``."""
    proc = subprocess.Popen(_command(workdir, HOLD_MS), cwd=REPO, env=entry_env(),
                            stderr=subprocess.PIPE, text=True)
    lines, sent = [], None
    deadline = time.monotonic() + 240
    try:
        for line in proc.stderr:
            lines.append(line)
            if sent is None and line.startswith(line_prefix):
                time.sleep(1.0)  # the next update is in flight (held 8 s)
                proc.send_signal(signal.SIGINT)
                sent = time.monotonic()
            elif sent is not None and again_on is not None and line.startswith(again_on):
                proc.send_signal(signal.SIGINT)
            assert time.monotonic() < deadline, "".join(lines)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    assert sent is not None, "".join(lines)
    return proc.returncode, "".join(lines), time.monotonic() - sent


@pytest.mark.slow
def test_sigint_abandons_the_update_in_flight_and_the_same_command_resumes(tmp_path):
    """SIGINT 1 s into update 2 (held 8 s): exit 130 within 4 s, one line naming update 1,
    checkpoint 1 and metrics up to 1. The same command resumes from 1; SIGINT 1 s into its
    update 3 and a second one as soon as it says it saves 2: exit 130 at once, and a
    checkpoint restores (2 if its save was done, else 1). The command, without the hold,
    then trains to the end."""
    code, err, took = _interrupt_after(tmp_path, "update 1/3")
    assert code == 130 and took < 4, (took, err)
    stop_lines = [ln for ln in err.splitlines() if ln.startswith("SIGINT")]
    assert stop_lines == [
        "SIGINT: abandoning update 2 in flight, saving a checkpoint at update 1, then "
        "exiting; run the same command to resume (a second SIGINT exits at once, keeping "
        "the last checkpoint)"], err
    assert "Traceback" not in err and "learner:" not in err, err  # no progress line < 30 s
    assert checkpoint_steps(tmp_path) == [1]
    assert [r["update"] for r in read_metrics(tmp_path)] == [1]
    _sigterm_while_the_resume_compiles(tmp_path)

    code, err, took = _interrupt_after(tmp_path, "update 2/3", again_on="SIGINT: abandoning")
    assert "resuming from update 1" in err and code == 130 and took < 4, (took, err)
    assert "SIGINT: abandoning update 3 in flight, saving a checkpoint at update 2" in err
    saved = checkpoint_steps(tmp_path)
    assert saved in ([1], [1, 2]), saved

    proc = subprocess.run(_command(tmp_path, 0), cwd=REPO, env=entry_env(),
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert f"resuming from update {saved[-1]}" in proc.stderr and "damaged" not in proc.stderr
    assert [r["update"] for r in read_metrics(tmp_path)] == [1, 2, 3]
    assert checkpoint_steps(tmp_path)[-1] == 3


def _sigterm_while_the_resume_compiles(workdir) -> None:
    """SIGTERM 0.3 s after the resumed run's first rollout, while its learner step
    compiles: exit 143 at once, one line naming the checkpoint kept (1) and how to resume
    (or, where the compile was done by then, the update in flight abandoned, 1 saved)."""
    proc = subprocess.Popen(_command(workdir, HOLD_MS), cwd=REPO, env=entry_env(),
                            stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("first rollout after"):
                time.sleep(0.3)
                proc.send_signal(signal.SIGTERM)
                break
        lines += proc.stderr.readlines()
        proc.wait(timeout=60)
    finally:
        proc.kill()
    err = "".join(lines)
    stop_lines = [ln for ln in err.splitlines() if ln.startswith("SIGTERM")]
    assert proc.returncode == 143 and len(stop_lines) == 1, err
    assert stop_lines[0] in (
        "SIGTERM during compile: stopped (nothing new to save yet); the checkpoint at "
        "update 1 is kept; run the same command to resume from it",
        "SIGTERM: abandoning update 2 in flight, saving a checkpoint at update 1, then "
        "exiting; run the same command to resume (a second SIGTERM exits at once, keeping "
        "the last checkpoint)"), err
    assert checkpoint_steps(workdir) == [1]


def _item(update: int, env_step_s: float):
    return types.SimpleNamespace(update=update, timers={"inference": 0.5, "d2h": 0.0,
                                                        "env_step": env_step_s,
                                                        "params_wait": 9.0})


def test_progress_line_says_what_learner_and_actors_do(monkeypatch):
    """The line against hand values: 2 threads of 128 env steps, one rollout queued after
    0.5 + 1.5 s of stepping (64 env steps/s; the params wait not counted)."""
    queues = [pipeline.RolloutQueue(), pipeline.RolloutQueue()]
    p = progress.Progress(queues, total=10, env_steps_per_item=128, enabled=False)
    now = [100.0]
    monkeypatch.setattr(progress.time, "perf_counter", lambda: now[0])
    p.stage(3, "waiting")
    assert p.line(131.0) == ("learner: update 4/10 waiting for 0:00:31; actors: rollout for "
                             "update 4 being collected (0/2 threads done)")
    p.stage(3, "compiling")
    now[0] = 190.0
    p.stage(3, "training")
    queues[0].put(_item(4, 1.5))
    assert queues[0].peek().update == 4 and queues[0].full()  # looked at, not taken
    assert p.line(340.0) == (
        "learner: update 4/10 training for 0:02:30 (after compiling for 0:01:30); actors: "
        "rollout for update 5 being collected (1/2 threads done, 64 env steps/s while "
        "stepping)")
    queues[1].put(_item(4, 0.5))
    assert p.line(340.0).endswith("rollout for update 5 ready (2/2 threads done, 192 env "
                                  "steps/s while stepping)")
    p.stage(9, "training")
    assert p.line(200.0).endswith("actors: done (no rollout left to collect)")
    p.stage(9, None)
    assert p.line(500.0) is None


@pytest.mark.skipif(__import__("jax").device_count() < 2, reason="needs 2 (fake) devices")
def test_progress_lines_during_long_updates_only(monkeypatch, capsys):
    """A run whose updates after the first are held 1.5 s, with lines due after 0.5 s and
    then every 1 s: each held update gets one or two lines naming it; the log lines stay."""
    monkeypatch.setattr(progress, "FIRST_S", 0.5)
    monkeypatch.setattr(progress, "EVERY_S", 1.0)
    monkeypatch.setattr(progress, "TICK_S", 0.05)
    config = cartpole_ppo_sebulba.get_config()
    config.actor_device_ids, config.learner_device_ids = (0,), (1,)
    config.num_actor_threads, config.num_envs, config.num_steps = 1, 8, 16
    config.total_env_steps, config.log_every = 8 * 16 * 3, 1
    config.debug.learner_delay_ms = 1500
    prepare(config)
    train(config, None)
    err = capsys.readouterr().err
    learner = [ln for ln in err.splitlines() if ln.startswith("learner:")]
    for u in (2, 3):
        mine = [ln for ln in learner if ln.startswith(f"learner: update {u}/3 training for ")]
        assert 1 <= len(mine) <= 2, err
    assert any("actors: rollout for update 3 ready (1/1 threads done, " in ln
               for ln in learner if ln.startswith("learner: update 2/3")), err
    assert any(ln.endswith("actors: done (no rollout left to collect)")
               for ln in learner if ln.startswith("learner: update 3/3")), err
    assert [ln.split(" |")[0] for ln in err.splitlines() if ln.startswith("update ")] == [
        "update 1/3", "update 2/3", "update 3/3"]


def test_checkpoint_of_host_copies_does_not_wait_for_an_update_in_flight(tmp_path):
    """What the abandon path relies on: with a long computation still running on the
    learner device, a checkpoint of ``distributed.to_host`` copies of the last completed
    state is written at once (an orbax save of the device arrays queues behind the
    computation, as measured: 7.8 s for a 7.8 s program), and restores into device arrays
    of the state's shardings."""
    mesh = distributed.data_mesh(jax.devices()[:2])  # two learner devices
    state = jax.device_put({"params": jnp.arange(1000.0), "update": jnp.int32(7)},
                           distributed.replicated(mesh))
    x = jax.device_put(jnp.ones((600, 600)), jax.devices()[0])
    long_update = jax.jit(lambda a: jax.lax.fori_loop(0, 2000, lambda i, a: jnp.tanh(a @ a), a))
    long_update.lower(x).compile()
    ckpt = Checkpointer(str(tmp_path))
    try:
        in_flight = long_update(x)
        ckpt.save(7, distributed.to_host(state))
        assert not in_flight.is_ready(), "the save waited for the update in flight"
        restored = ckpt.restore(state, 7)
    finally:
        ckpt.close()
    for got, want in zip(jax.tree.leaves(restored), jax.tree.leaves(state)):
        assert got.sharding == want.sharding and np.array_equal(got, want)
