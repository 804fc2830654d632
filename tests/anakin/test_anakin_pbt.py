"""Population-based training inside one Anakin program (docs/design.md, "Population-based
training"): the history and the metrics agree on 1 and 4 devices and across a resume, and
each metrics line's ``hparam/*`` values follow the history."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import jax
import pytest

from anakin.train import train
from configs import cartpole_ppo
from runtime.distributed import data_mesh
from runtime.run.population import read_history
from tests.helpers import (
    REPO,
    assert_rows_close,
    checkpoint_steps,
    entry_env,
    kill_when,
    read_metrics,
    reproducible_part,
)

LEARNING_RATES = (0.5, 0.25)


def one_device_mesh():
    return data_mesh(jax.devices()[:1])


def _config(**overrides):
    """4 agents (2 learning rates x 2 seeds), an exploit every 3 updates, 12 updates. The
    optimizer is the one-vs-four test's (``test_anakin_train.test_one_vs_four_devices``):
    RMSProp with a large eps, close to SGD, so a device-count-dependent gradient would show."""
    c = cartpole_ppo.get_config()
    c.total_env_steps, c.num_envs, c.num_steps = 16 * 32 * 12, 16, 32
    c.log_every, c.updates_per_call, c.num_seeds = 2, 4, 2
    c.optimizer, c.rmsprop_eps, c.max_grad_norm = "rmsprop", 10.0, 0.0
    c.sweep.learning_rate = LEARNING_RATES
    c.pbt.interval, c.pbt.fraction = 3, 0.5
    c.pbt.low, c.pbt.high = (0.1,), (1.0,)
    for k, v in overrides.items():
        c[k] = v
    return c


@pytest.fixture(scope="module")
def one_device_run(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("pbt") / "one")
    train(_config(), workdir, mesh=one_device_mesh())
    return read_metrics(workdir), read_history(workdir)


def test_history_records_exploits_and_the_metrics_follow_it(one_device_run):
    """Two agents copy at each of updates 3, 6, 9, 12, the worst from the best, with the
    source's value times 0.8 or 1.25 in the bounds; a line's ``hparam/learning_rate`` is
    the value the agent trained with in that update."""
    rows, history = one_device_run
    assert [h["update"] for h in history] == [3, 3, 6, 6, 9, 9, 12, 12]
    for h in history:
        assert h["target_statistic"] <= h["source_statistic"]
        assert h["target"] != h["source"]
    tags = [(lr, seed) for lr in LEARNING_RATES for seed in (0, 1)]  # agent order
    for r in rows:
        agent = tags.index((r["learning_rate"], r["seed"]))
        want = LEARNING_RATES[agent // 2]
        for h in history:
            if h["update"] < r["update"] and h["target"] == agent:
                want = h["new"]["learning_rate"]
        assert r["hparam/learning_rate"] == want, (r["update"], agent)
    for h in history:
        lr = h["new"]["learning_rate"]
        assert 0.1 <= lr <= 1.0


def test_one_vs_four_devices(tmp_path, one_device_run):
    """The same history, and the same metrics to the one-vs-four test's tolerance (1e-4 on
    losses; returns equal), on 4 devices."""
    if jax.device_count() < 4:
        pytest.skip("needs 4 (fake) devices")
    rows, history = one_device_run
    workdir = str(tmp_path / "four")
    four = train(_config(), workdir, mesh=data_mesh(jax.devices()[:4]))
    assert read_history(workdir) == history
    assert_rows_close(rows, four, tol=1e-4)
    assert [r["hparam/learning_rate"] for r in four] == [r["hparam/learning_rate"] for r in rows]


def test_resume_continues_the_history_bitwise(tmp_path, one_device_run):
    """Checkpoints past update 5 removed (mid-window: the statistic's window is in the
    checkpoint), the run resumed: the same metrics (clock keys aside) and history."""
    rows, history = one_device_run
    workdir = tmp_path / "resumed"
    train(_config(checkpoint_every=5), str(workdir), mesh=one_device_mesh())
    for step in os.listdir(workdir / "checkpoints"):
        if step.isdigit() and int(step) > 5:
            shutil.rmtree(workdir / "checkpoints" / step)
    train(_config(checkpoint_every=5), str(workdir), mesh=one_device_mesh())
    assert reproducible_part(read_metrics(workdir)) == reproducible_part(rows)
    assert read_history(str(workdir)) == history


# A command-line PBT run of 24 one-update calls: 2 learning rates x 2 seeds, an exploit every
# 3 updates, a wall-clock checkpoint cadence of 1.2 s and no update cadence.
PBT_COMMAND = [
    sys.executable, "-m", "anakin.main", "--config=configs/cartpole_ppo.py",
    f"--config.total_env_steps={16 * 32 * 24}", "--config.num_envs=16",
    "--config.num_steps=32", "--config.log_every=1", "--config.updates_per_call=1",
    "--config.num_devices=1", "--config.num_seeds=2", "--config.sweep.learning_rate=0.001,0.0003",
    "--config.pbt.interval=3", "--config.pbt.fraction=0.5", "--config.pbt.low=0.0001,",
    "--config.pbt.high=0.01,", "--config.checkpoint_every=0",
    "--config.checkpoint_every_minutes=0.02"]


def _logged_update(workdir) -> int:
    """The last update of the complete metrics lines so far (one line per agent)."""
    path = os.path.join(workdir, "metrics.jsonl")
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        lines = f.read().splitlines()[:-1]  # the last may be being written
    return max((json.loads(ln)["update"] for ln in lines if ln.strip()), default=0)


@pytest.mark.slow  # 20-35 s (the default tier's 12 minutes)
def test_a_kill_and_the_same_command_give_the_uninterrupted_history(tmp_path):
    """kill -9 once 12 updates are logged (calls held 0.3 s), then the same command: the
    metrics (clock keys aside) and ``pbt.jsonl`` equal an uninterrupted run's, although
    the killed run had logged updates and exploits past its last checkpoint."""
    full, killed = tmp_path / "full", tmp_path / "killed"
    done = subprocess.run([*PBT_COMMAND, f"--workdir={full}"], cwd=REPO, env=entry_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    kill_when([*PBT_COMMAND, f"--workdir={killed}", "--config.debug.learner_delay_ms=300"],
              lambda: _logged_update(killed) >= 12)
    newest = checkpoint_steps(killed)[-1]
    assert newest < _logged_update(killed)  # lines past the checkpoint, to be rewritten
    resumed = subprocess.run([*PBT_COMMAND, f"--workdir={killed}"], cwd=REPO,
                             env=entry_env(), capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0 and f"resuming from update {newest}" in resumed.stderr
    assert reproducible_part(read_metrics(killed)) == reproducible_part(read_metrics(full))
    assert read_history(str(killed)) == read_history(str(full))
    assert [h["update"] for h in read_history(str(full))] == [3, 3, 6, 6, 9, 9, 12, 12, 15,
                                                              15, 18, 18, 21, 21, 24, 24]


def test_a_population_explores_an_algorithms_own_hyperparameter(tmp_path):
    """``--config.pbt.explore=algo.dpo_alpha,`` (the docs' comma form) on the DPO example
    (examples/gridworld/dpo.py) with bounds and no sweep: the run trains, each exploit
    changes the copier's ``algo.dpo_alpha`` within the bounds, and every line's
    ``hparam/algo.dpo_alpha`` is the value the history gave that agent."""
    workdir = tmp_path / "own"
    env = dict(entry_env(), PYTHONPATH=os.pathsep.join([os.path.join(REPO, "examples"), REPO]))
    proc = subprocess.run([
        sys.executable, "-m", "anakin.main", "--config=configs/cartpole_ppo.py",
        "--config.algorithm=gridworld.dpo:DPO", f"--config.total_env_steps={16 * 32 * 6}",
        "--config.num_envs=16", "--config.num_steps=32", "--config.log_every=1",
        "--config.num_seeds=4", "--config.pbt.interval=2", "--config.pbt.explore=algo.dpo_alpha,",
        "--config.pbt.low=0.5,", "--config.pbt.high=4.0,", f"--workdir={workdir}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((workdir / "config.json").read_text())["pbt"]["explore"] == [
        "algo.dpo_alpha"]
    history, rows = read_history(str(workdir)), read_metrics(str(workdir))
    assert [h["update"] for h in history] == [2, 4, 6]
    assert all(0.5 <= h["new"]["algo.dpo_alpha"] <= 4.0 for h in history)
    assert any(h["new"]["algo.dpo_alpha"] != 2.0 for h in history)
    for r in rows:
        want = 2.0  # DPO's default
        for h in history:
            if h["update"] < r["update"] and h["target"] == r["seed"]:
                want = h["new"]["algo.dpo_alpha"]
        assert r["hparam/algo.dpo_alpha"] == pytest.approx(want), (r["update"], r["seed"])
    assert rows[-1]["episode_return"] is not None
