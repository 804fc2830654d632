"""num_seeds: agent s of a many-agent run is the single-agent run with seed + s."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from anakin.train import train
from configs import cartpole_ppo
from rlcore.distributed import data_mesh
from rlcore.metrics import is_clock_key


def _config(**overrides):
    c = cartpole_ppo.get_config()
    c.total_env_steps, c.num_envs, c.num_steps = 16 * 32 * 4, 16, 32
    c.log_every, c.updates_per_call = 2, 2
    for k, v in overrides.items():
        c[k] = v
    return c


@pytest.mark.parametrize("devices", [1, 4])
def test_each_seed_equals_its_single_run(devices):
    if jax.device_count() < devices:
        pytest.skip("needs 4 (fake) devices")
    mesh = data_mesh(jax.devices()[:devices])
    many = train(_config(num_seeds=3), None, mesh=mesh)
    assert sorted({r["seed"] for r in many}) == [0, 1, 2]
    for s in range(3):
        one = train(_config(seed=s), None, mesh=mesh)
        mine = [r for r in many if r["seed"] == s]
        assert [r["update"] for r in mine] == [r["update"] for r in one] == [2, 4]
        for a, b in zip(one, mine):
            for key, value in a.items():
                if is_clock_key(key) or value is None:
                    assert value is None or is_clock_key(key) or b[key] is None
                    continue
                # Batched (vmapped) GEMMs round differently from unbatched ones; near-zero
                # cancellation terms (loss/policy) get an absolute floor.
                np.testing.assert_allclose(b[key], value, rtol=1e-5, atol=1e-7, err_msg=key)
