"""Anakin with recurrent agents: memory is used (Recall: the LSTM agent learns it,
the feed-forward agent of the same size cannot), greedy evaluation carries the core state,
resume is bitwise (core states are in the checkpoint), 1 and 4 devices agree, num_seeds."""

from __future__ import annotations

import os
import shutil

import jax
import numpy as np
import pytest

import anakin.train as anakin_train
from anakin.train import prepare, train
from configs import masked_cartpole_ppo, memory_ppo
from rlcore.errors import ConfigError
from runtime.commands.stats import parse_table
from runtime.distributed import data_mesh
from tests.helpers import (
    assert_rows_close,
    best_return,
    read_metrics,
    read_video,
    reproducible_part,
    run_entry,
)
from tests.threshold import train_to_return


def one_device_mesh():
    return data_mesh(jax.devices()[:1])


def _config(**overrides):
    c = memory_ppo.get_config()
    for k, v in overrides.items():
        c[k] = v
    return c


def _late_mean(rows, key="episode_return"):
    """Mean of ``key`` over the last 20% of the logged rows (at least one)."""
    values = [r[key] for r in rows if r[key] is not None]
    return float(np.mean(values[-max(1, len(values) // 5):]))


@pytest.fixture(scope="module")
def memory_runs(tmp_path_factory):
    """configs/memory_ppo.py (40,960 env steps, log every 5 updates) with the LSTM core
    (greedy evaluation after the last update; its workdir) and without a core."""
    workdir = tmp_path_factory.mktemp("anakin_recall")
    lstm = train(_config(log_every=5, eval_every=80, eval_episodes=64), str(workdir),
                 mesh=one_device_mesh())
    ff = train(_config(recurrent="none", log_every=5), None, mesh=one_device_mesh())
    return lstm, ff, workdir


@pytest.mark.slow
def test_recall_needs_memory(memory_runs):
    """Recall rewards +1 for naming the cue shown 5 steps earlier, -1 otherwise: the LSTM
    agent reaches a mean return of 0.9 over the last 20% of training, the feed-forward
    agent of the same torso stays at chance (0, within 0.3), and greedy evaluation
    episodes (the core carried step to step) all recall the cue."""
    lstm, ff, _ = memory_runs
    assert _late_mean(lstm) >= 0.9, [r["episode_return"] for r in lstm]
    assert abs(_late_mean(ff)) <= 0.3, [r["episode_return"] for r in ff]
    assert lstm[-1]["eval/episode_return"] == 1.0
    assert lstm[-1]["eval/episode_length"] == 6.0


@pytest.mark.slow
def test_masked_cartpole_needs_memory():
    """CartPole seeing only ``[x, theta]`` (configs/masked_cartpole_ppo.py at lr 4e-3, 51,200
    env steps, a line every 5 updates): the LSTM agent's logged mean return reaches 100,
    which the feed-forward agent of the same torso, trained on the whole budget, does not
    approach (below 75; it needs the velocities one observation no longer shows). Measured
    over 6 seeds: the LSTM agents past 100 by 20-31k env steps, the feed-forward agents'
    lines all below 60 (docs/results.md)."""
    def config(recurrent):
        c = masked_cartpole_ppo.get_config()
        c.recurrent, c.learning_rate = recurrent, 4e-3
        c.total_env_steps, c.log_every, c.updates_per_call = 51_200, 5, 5
        return c

    lstm = train_to_return(anakin_train, 100.0, config("lstm"), None, mesh=one_device_mesh())
    ff = train(config("none"), None, mesh=one_device_mesh())
    assert best_return(lstm) >= 100.0, [r["episode_return"] for r in lstm]
    assert len(ff) == 10 and best_return(ff) < 75.0, [r["episode_return"] for r in ff]


@pytest.mark.slow
def test_evaluate_command_carries_the_core(memory_runs, tmp_path):
    """``anakin.evaluate --greedy --video`` restores the LSTM agent and plays 8 Recall
    episodes with the core carried step to step: every one recalls its cue, and the video
    shows the first episode's 6 steps and the frame it ended on (docs/design.md,
    "Evaluation")."""
    video = tmp_path / "recall.gif"
    proc = run_entry("anakin.evaluate", [f"--workdir={memory_runs[2]}", "--episodes=8",
                                         "--greedy", f"--video={video}"])
    assert proc.returncode == 0, proc.stderr
    table = parse_table(proc.stdout)
    assert table["return"]["min"] == 1.0, proc.stdout
    # the writer's count: a gif reader merges the identical blank frames
    assert f"video: {video} (7 frames of " in proc.stdout
    assert read_video(str(video)).shape[0] >= 2


def test_recurrent_minibatches_are_sequences():
    """A recurrent PPO agent's loss re-runs its core over whole sequences: ``samples`` is a
    one-line config error, ``auto`` and ``sequences`` pass."""
    with pytest.raises(ConfigError, match="^minibatch_kind: must be one of auto, sequences for a "
                                          "recurrent ppo"):
        prepare(_config(minibatch_kind="samples"))
    with pytest.raises(ConfigError, match="^recurrent: must be one of none, lstm, gru"):
        prepare(_config(recurrent="rnn"))
    prepare(_config(minibatch_kind="sequences"))


def _short(**overrides):
    return _config(**{"total_env_steps": 32 * 16 * 12, "log_every": 3, "updates_per_call": 4,
                      **overrides})


def test_recurrent_resume_continues_bitwise(tmp_path):
    """A GRU agent stopped after update 8 (log windows of 3 do not line up), resumed from
    its checkpoint (params, optimizer, envs and the envs' core states and episode starts):
    the metrics equal an uninterrupted run's, clock keys aside."""
    config = _short(recurrent="gru", checkpoint_every=8)
    full = tmp_path / "full"
    train(config, str(full), mesh=one_device_mesh())
    reference = reproducible_part(read_metrics(full))
    assert len(reference) == 4
    for step in os.listdir(full / "checkpoints"):
        if step.isdigit() and int(step) > 8:
            shutil.rmtree(full / "checkpoints" / step)
    train(config, str(full), mesh=one_device_mesh())
    assert reproducible_part(read_metrics(full)) == reference


@pytest.mark.smoke  # make test-newest
def test_recurrent_one_vs_four_devices():
    """An LSTM agent's run on 4 devices logs the losses and returns of 1 device (torch
    RMSProp with a large eps: a device-count-dependent gradient scale would show)."""
    if jax.device_count() < 4:
        pytest.skip("needs 4 (fake) devices")
    config = _short(total_env_steps=32 * 16 * 4, log_every=1, optimizer="rmsprop",
                    learning_rate=0.5, rmsprop_eps=10.0, max_grad_norm=0.0)
    one = train(config, None, mesh=one_device_mesh())
    four = train(config, None, mesh=data_mesh(jax.devices()[:4]))
    assert len(one) == len(four) == 4
    assert_rows_close(one, four, tol=1e-4)


def test_recurrent_num_seeds_equal_single_runs():
    """Two LSTM agents in one program (``num_seeds=2``): agent 1 logs what the single run
    with seed 1 logs."""
    small = dict(total_env_steps=32 * 16 * 4, log_every=2, updates_per_call=2)
    many = train(_short(num_seeds=2, **small), None, mesh=one_device_mesh())
    one = train(_short(seed=1, **small), None, mesh=one_device_mesh())
    mine = [r for r in many if r["seed"] == 1]
    assert [r["update"] for r in mine] == [r["update"] for r in one] == [2, 4]
    for a, b in zip(one, mine):
        for key in ("loss/total", "loss/entropy", "episode_return"):
            np.testing.assert_allclose(b[key], a[key], rtol=1e-5, atol=1e-7, err_msg=key)
