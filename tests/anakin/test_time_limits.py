"""Time limits bootstrap on the final observation (docs/design.md, "Truncation and the final
observation"): on a cyclic env cut by a short time limit, PPO's learned values stay at the
infinite-horizon values up to the limit; with ``bootstrap_time_limits`` off (the self bootstrap)
the values before the limit collapse. An LSTM agent with normalised observations values the
final observation from a fresh core (``rlcore.networks.final_values``; from the continuing core
its values drift to ~2x)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import anakin.train as anakin_trainer
from configs import cartpole_ppo
from envs.autoreset import AutoResetJaxEnv
from rlcore.networks import initial_core, unroll_network
from rlcore.types import EnvSpec
from runtime.distributed import data_mesh

K = 4          # phases of the cycle, and the time limit: every episode is cut at phase K - 1
GAMMA = 0.9


class CycleEnv(AutoResetJaxEnv):
    """Phases 0, 1, ..., K - 1, 0, ... whatever the action; observation one-hot(phase);
    reward 1 for the step taken in phase 0; truncated after ``K`` steps, never terminated.

    Infinite-horizon values: ``V(k) = gamma^((K - k) % K) / (1 - gamma^K)``. The cut step is
    taken in phase K - 1 and its final observation is phase 0: bootstrapping on it gives those
    values; bootstrapping on the cut state itself gives ``V(K - 1) = gamma V(K - 1) = 0``,
    and so 0 for every phase but 0 (``V(0) = 1``).
    """

    spec = EnvSpec(obs_shape=(K,), obs_dtype="float32", num_actions=2)

    def _reset_inner(self, key):
        del key
        return jax.nn.one_hot(0, K), (jnp.int32(0), jnp.int32(0))

    def _step_inner(self, inner, action, key):
        del action, key
        phase, time = inner
        reward = (phase == 0).astype(jnp.float32)
        phase, time = (phase + 1) % K, time + 1
        return jax.nn.one_hot(phase, K), (phase, time), reward, False, time >= K


def _learned_values(bootstrap: bool, monkeypatch, lstm: bool = False) -> np.ndarray:
    """Values of phases 0..K-1 (one episode) after 60 PPO updates on CycleEnv."""
    config = cartpole_ppo.get_config()
    config.bootstrap_time_limits = bootstrap
    if lstm:
        config.recurrent, config.recurrent_hidden, config.normalize_obs = "lstm", 16, True
    config.gamma = GAMMA
    config.learning_rate = 3e-3
    config.anneal_lr = False
    config.num_envs = 4
    config.num_steps = 16
    config.updates_per_call = 60
    config.total_env_steps = 4 * 16 * 60
    monkeypatch.setattr(anakin_trainer.registry, "make_jax_env", lambda env_id: CycleEnv())
    run = anakin_trainer.AnakinRun(config, data_mesh(jax.devices()[:1]))
    state, _ = run.call(run.init_state(), config.updates_per_call)
    params = state.learner.params
    if not lstm:
        return np.asarray(run.network.apply(params, jnp.eye(K))[1])
    first = jnp.arange(K)[:, None] == 0  # [K, 1]: one episode, phases 0..K-1
    return np.asarray(unroll_network(run.network.apply, params, jnp.eye(K)[:, None],
                                     initial_core(run.network, 1), first)[1][:, 0])


@pytest.mark.parametrize("bootstrap, lstm", [(True, False), (False, False), (True, True)],
                         ids=["final_obs", "self", "final_obs-lstm"])
def test_value_before_the_time_limit_does_not_collapse(bootstrap, lstm, monkeypatch):
    values = _learned_values(bootstrap, monkeypatch, lstm)
    infinite = GAMMA ** ((K - np.arange(K)) % K) / (1 - GAMMA ** K)  # 2.91 2.12 2.36 2.62
    if bootstrap:
        np.testing.assert_allclose(values, infinite, atol=0.25)
    else:  # the self bootstrap: phase K - 1, the last before the limit, falls towards 0
        assert values[K - 1] < 0.5 * infinite[K - 1], values
