"""Population-based training inside one Anakin program (docs/design.md, "Population-based
training"): the history and the metrics agree on 1 and 4 devices and across a resume, and
each metrics line's ``hparam/*`` values follow the history."""

from __future__ import annotations

import os
import shutil

import jax
import pytest

from anakin.train import train
from configs import cartpole_ppo
from runtime.distributed import data_mesh
from runtime.run.population import read_history
from tests.helpers import assert_rows_close, read_metrics, reproducible_part

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
