"""benchmarks.envpool_xla: EnvPool stepped inside one jitted ``lax.scan`` through its XLA
interface gives the observations and rewards of the same envs stepped from Python by the
same policy, env by env and step by step (episode ends and EnvPool's auto-reset included);
skipped where EnvPool's XLA interface does not import or does not run here."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import envpool_xla as ex


def _xla_works() -> str:
    """'' where ``env.xla()`` runs under ``jax.jit`` here, else why not."""
    reason = ex.xla_available()
    if reason:
        return reason
    import jax

    pool = ex.make_pool("CartPole-v1", 2, seed=0)
    try:
        handle, _, _, step = pool.xla()
        pool.reset()
        jax.block_until_ready(jax.jit(step)(handle, np.zeros(2, np.int32)))
    except Exception as e:  # noqa: BLE001 - any failure means: not usable here
        return f"envpool's env.xla() does not run under jax.jit here: {e!r}"
    finally:
        pool.close()
    return ""


@pytest.fixture(scope="module")
def xla_ready():
    reason = _xla_works()
    if reason:
        pytest.skip(reason)


def test_compiled_loop_equals_host_loop_on_cartpole(xla_ready):
    # 20 steps of 4 CartPole envs: a random-ish policy ends episodes from step ~9, so
    # the check crosses EnvPool's (delayed) auto-reset inside the compiled loop.
    out = ex.same_as_host("CartPole-v1", 4, 20, seed=3)
    assert out["equal"], out
    assert out["obs_max_diff"] == 0.0 and out["reward_max_diff"] == 0.0
    assert out["reward_sum"] < 4 * 20  # some step was a reset step (reward 0)


def test_rows_are_compared_in_env_id_order():
    rows = np.array([[[10.0], [11.0], [12.0]], [[20.0], [21.0], [22.0]]])  # [T=2, N=3, 1]
    ids = np.array([[2, 0, 1], [0, 1, 2]])
    np.testing.assert_array_equal(ex.by_env_id(rows, ids)[..., 0],
                                  [[11.0, 12.0, 10.0], [20.0, 21.0, 22.0]])


def test_float64_envs_are_refused_without_x64(xla_ready):
    # MuJoCo's float64 arrays would be copied into float32 buffers of half the size.
    import jax

    if jax.config.jax_enable_x64:
        pytest.skip("x64 is on in this process")
    pool = ex.make_pool("HalfCheetah-v4", 2, seed=0)
    try:
        with pytest.raises(RuntimeError, match="jax_enable_x64"):
            ex.make_compiled_call(pool, lambda *a: None, 2)
    finally:
        pool.close()
