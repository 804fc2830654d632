"""benchmarks.peer_ppo: the side-by-side harness measures what it says, on our training loop
and on a stand-in peer with PureJaxRL's interface (the real peer is not in the repository)."""

from __future__ import annotations

import textwrap

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


@pytest.fixture(autouse=True)
def _restore_gymnax_make():
    import gymnax

    make = gymnax.make
    yield
    gymnax.make = make
