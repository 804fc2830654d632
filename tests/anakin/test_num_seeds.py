"""num_seeds: agent s of a many-agent run is the single-agent run with seed + s."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from anakin.train import train
from configs import cartpole_ppo
from runtime.distributed import data_mesh
from tests.helpers import is_clock_key


def _config(**overrides):
    c = cartpole_ppo.get_config()
    c.total_env_steps, c.num_envs, c.num_steps = 16 * 32 * 4, 16, 32
    c.log_every, c.updates_per_call = 2, 2
    for k, v in overrides.items():
        c[k] = v
    return c


def _same_logged_values(one, mine):
    """Every logged value of ``mine`` equals ``one``'s to 1e-5 relative (clock keys aside)."""
    assert [r["update"] for r in mine] == [r["update"] for r in one]
    for a, b in zip(one, mine):
        for key, value in a.items():
            if is_clock_key(key) or value is None:
                continue
            np.testing.assert_allclose(b[key], value, rtol=1e-5, atol=1e-7, err_msg=key)


@pytest.mark.parametrize("devices, lag", [(1, 0), pytest.param(4, 0, marks=pytest.mark.slow),
                                          pytest.param(1, 2, marks=pytest.mark.slow)])
def test_each_seed_equals_its_single_run(devices, lag):
    """At lag 2 too: each agent keeps its own lagged params."""
    if jax.device_count() < devices:
        pytest.skip("needs 4 (fake) devices")
    mesh = data_mesh(jax.devices()[:devices])
    many = train(_config(num_seeds=3, policy_lag=lag), None, mesh=mesh)
    assert sorted({r["seed"] for r in many}) == [0, 1, 2]
    for s in range(3):
        one = train(_config(seed=s, policy_lag=lag), None, mesh=mesh)
        mine = [r for r in many if r["seed"] == s]
        assert [r["update"] for r in one] == [2, 4]
        _same_logged_values(one, mine)


def test_sweep_agents_equal_their_single_runs():
    """A sweep of 2 learning rates x 1 entropy coefficient, crossed with 2 seeds: 4 agents
    in one program, each equal to the plain run of its values and seed."""
    config = _config(num_seeds=2)
    config.sweep.learning_rate = (1e-3, 1e-4)
    config.sweep.ent_coef = (0.05,)
    mesh = data_mesh(jax.devices()[:1])
    many = train(config, None, mesh=mesh)
    tags = [(r["learning_rate"], r["ent_coef"], r["seed"]) for r in many[:4]]
    assert tags == [(1e-3, 0.05, 0), (1e-3, 0.05, 1), (1e-4, 0.05, 0), (1e-4, 0.05, 1)]
    finals = []
    for lr, seed in [(1e-3, 0), (1e-4, 1)]:
        one = train(_config(seed=seed, learning_rate=lr, ent_coef=0.05), None, mesh=mesh)
        _same_logged_values(one, [r for r in many if (r["learning_rate"], r["seed"]) == (lr, seed)])
        finals.append(one[-1]["loss/value"])
    assert finals[0] != finals[1]  # the swept values reached the update
