"""benchmarks.peer_ppo: the side-by-side harness measures what it says, on our training loop
and on a stand-in peer with PureJaxRL's interface (the real peers are not in the
repository); our side trains with the peer's hyperparameters; the distrax stand-in is
distrax's math."""

from __future__ import annotations

import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from anakin import train as anakin_train
from benchmarks import peer_ppo

# A peer with PureJaxRL's interface: make_train(config) -> train(rng), which steps gymnax
# CartPole through the 5-tuple step the real one unpacks (the harness adapts gymnax 1.0).
FAKE_PEER = '''
import jax, jax.numpy as jnp, gymnax

def make_train(config):
    env, params = gymnax.make(config["ENV_NAME"])
    n = config["TOTAL_TIMESTEPS"] // config["NUM_STEPS"] // config["NUM_ENVS"]

    def train(rng):
        keys = jax.random.split(rng, config["NUM_ENVS"])
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)

        def step(carry, _):
            state, rng = carry
            rng, k = jax.random.split(rng)
            ks = jax.random.split(k, config["NUM_ENVS"])
            acts = jnp.zeros(config["NUM_ENVS"], jnp.int32)
            obs, state, reward, done, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                ks, state, acts, params)
            return (state, rng), done.sum()

        _, dones = jax.lax.scan(step, (state, rng), None, n * config["NUM_STEPS"])
        return dones.sum()

    return train
'''


def test_parse_sizes():
    assert peer_ppo.parse_sizes("4x128:500000,2048x16:2.6e6") == [(4, 128, 500000),
                                                                  (2048, 16, 2600000)]


@pytest.mark.slow
def test_peer_runs_with_the_classic_step_and_counts_whole_updates(tmp_path):
    (tmp_path / "ppo.py").write_text(textwrap.dedent(FAKE_PEER))
    r = peer_ppo.peer(str(tmp_path), 4, 8, 100)  # 3 whole updates of 4 x 8
    assert r["steps"] == 96
    assert r["compile_s"] > 0 and r["train_s"] > 0 and r["cpu_s"] >= 0


@pytest.mark.slow
def test_ours_times_from_the_first_call_to_the_last():
    # 4 envs x 16 steps, 40 updates a call (the config's): 120 updates are 3 calls, and the
    # span from the end of the first to the end of the last holds 80 updates.
    r = peer_ppo.ours(4, 16, 4 * 16 * 120)
    assert r["steps"] == 80 * 4 * 16
    assert r["compile_s"] > 0 and r["train_s"] > 0 and r["cpu_s"] > 0
    assert anakin_train._record_call.__name__ == "_record_call"  # restored


def test_summary_is_ours_over_the_peer():
    rows = [{"size": "4x128", "who": w, "compile_s": c, "sps": s, "cpu_1k": u}
            for w, c, s, u in [("ours", 5.0, 120.0, 0.01), ("peer", 9.0, 100.0, 0.02),
                               ("ours", 6.0, 130.0, 0.01), ("peer", 9.0, 100.0, 0.02)]]
    (row,) = peer_ppo.summary(rows)
    assert row[0] == "4x128" and row[3] == "1.25x" and row[4] == "0.50x"
    assert (row[5], row[6]) == ("9.0", "5.5")
    assert row[7] == "1.20-1.30x"  # each rep's ours over the peer's


def test_categorical_stand_in_is_the_categorical_math():
    """log_prob and entropy against NumPy's softmax; samples from each row's distribution."""
    logits = jnp.array([[0.3, -1.2, 2.0], [0.0, 0.0, 0.0]])
    dist = peer_ppo.CategoricalStandIn(logits)
    p = np.exp(np.asarray(logits)) / np.exp(np.asarray(logits)).sum(-1, keepdims=True)
    np.testing.assert_allclose(dist.log_prob(jnp.array([2, 1])), np.log([p[0, 2], p[1, 1]]),
                               rtol=1e-6)
    np.testing.assert_allclose(dist.entropy(), -(p * np.log(p)).sum(-1), rtol=1e-6)
    draws = jax.vmap(lambda k: dist.sample(seed=k))(jax.random.split(jax.random.key(0), 4000))
    freq = np.stack([np.bincount(np.asarray(draws[:, r]), minlength=3) / 4000 for r in (0, 1)])
    np.testing.assert_allclose(freq, p, atol=0.03)


def test_a_distrax_that_does_not_import_is_stood_in(monkeypatch):
    monkeypatch.setitem(sys.modules, "distrax", None)  # import distrax raises ImportError
    peer_ppo._distrax_or_stand_in()
    assert sys.modules["distrax"].Categorical is peer_ppo.CategoricalStandIn


def test_our_craftax_side_has_the_peers_hyperparameters():
    peer = peer_ppo.PEERS["craftax"].config
    c = peer_ppo.our_config("craftax", 64, 64, 64 * 64 * 8)
    ours = {"LR": c.learning_rate, "UPDATE_EPOCHS": c.num_epochs,
            "NUM_MINIBATCHES": c.num_minibatches, "GAMMA": c.gamma,
            "GAE_LAMBDA": c.gae_lambda, "CLIP_EPS": c.clip_eps, "ENT_COEF": c.ent_coef,
            "VF_COEF": c.vf_coef, "MAX_GRAD_NORM": c.max_grad_norm, "ANNEAL_LR": c.anneal_lr}
    assert ours == {k: peer[k] for k in ours}
    assert c.env_id == "craftax:" + peer["ENV_NAME"] and c.recurrent == "gru"
    assert (c.num_envs, c.num_steps, c.total_env_steps) == (64, 64, 64 * 64 * 8)


def test_peer_set_values_are_literals():
    assert peer_ppo.parse_peer_set(["LAYER_SIZE=256", "ENV_NAME=Craftax-Symbolic-v1",
                                    "USE_OPTIMISTIC_RESETS=False"]) == {
        "LAYER_SIZE": 256, "ENV_NAME": "Craftax-Symbolic-v1", "USE_OPTIMISTIC_RESETS": False}


@pytest.fixture(autouse=True)
def _restore_gymnax_make():
    import gymnax

    make = gymnax.make
    yield
    gymnax.make = make
