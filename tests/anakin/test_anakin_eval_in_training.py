"""Anakin evaluation during training: greedy episodes inside the compiled program leave the
training metrics identical, on one device and on four, and with several agents."""

from __future__ import annotations

import jax
import pytest

from anakin.episodes import make_train_eval_fn
from anakin.train import prepare, train
from configs import cartpole_ppo
from envs import registry
from rlcore.errors import ConfigError
from rlcore.learner import init_learner_state
from rlcore.networks import make_network
from rlcore.optim import optimizer_for
from rlcore.seeding import Roots
from runtime.config.fields import hparams_of
from runtime.distributed import data_mesh
from tests.helpers import training_part

EVAL_KEYS = ("eval/episode_return", "eval/episode_length")


def _config(**overrides):
    c = cartpole_ppo.get_config()
    c.num_envs, c.num_steps, c.num_devices = 16, 32, 0
    c.total_env_steps = 16 * 32 * 24
    c.log_every, c.updates_per_call = 4, 8
    c.eval_episodes = 8
    c.update_from_flattened_dict(overrides)
    return c



# Two programs (with and without evaluation) train bitwise alike under XLA's defaults; with
# the tests' fast compiles (tests/fast_compile.py) their shared part may round differently.
@pytest.mark.slow
@pytest.mark.optimized
@pytest.mark.parametrize("devices", [1, 4])
def test_evaluation_leaves_training_identical(devices):
    mesh = data_mesh(jax.devices()[:devices])
    plain = train(_config(), None, mesh=mesh)
    evald = train(_config(eval_every=6), None, mesh=mesh)
    assert training_part(evald) == training_part(plain)
    assert all(k not in r for r in plain for k in EVAL_KEYS)
    # Lines at updates 4, 8, ..., 24; evaluations after updates 6, 12, 18, 24.
    has_eval = [r["update"] for r in evald if "eval/episode_return" in r]
    assert has_eval == [8, 12, 20, 24]
    for r in evald:
        if "eval/episode_return" in r:
            # CartPole's return is its length; greedy episodes end by the 500-step limit.
            assert r["eval/episode_return"] == r["eval/episode_length"]
            assert 8 <= r["eval/episode_return"] <= 500


@pytest.mark.slow
@pytest.mark.optimized  # as above
def test_evaluation_with_several_agents_and_validation():
    mesh = data_mesh(jax.devices()[:1])
    plain = train(_config(num_seeds=2), None, mesh=mesh)
    evald = train(_config(num_seeds=2, eval_every=12), None, mesh=mesh)
    assert training_part(evald) == training_part(plain)
    assert sorted({r["seed"] for r in evald if "eval/episode_return" in r}) == [0, 1]
    with pytest.raises(ConfigError, match="eval_episodes: 6 episodes do not split over 4"):
        prepare(_config(eval_episodes=6, eval_every=5))
    prepare(_config(eval_episodes=6))  # evaluation off: its size is not checked
    with pytest.raises(ConfigError, match="eval_every"):
        prepare(_config(eval_every=-1))


def test_eval_fn_counts_first_episodes_only():
    """Each env counts one episode, the first: with a policy that plays CartPole badly
    (episodes of ~10 steps) and many steps allowed, still exactly B episodes."""
    env = registry.make_jax_env("CartPole-v1")
    net = make_network("mlp", env.spec)
    config = cartpole_ppo.get_config()
    state = init_learner_state(net, optimizer_for(hparams_of(config), 10), jax.random.key(0),
                               env.spec)
    evaluate = jax.jit(make_train_eval_fn(env, net.apply, max_steps=2000))
    roots = Roots.from_seed(0)
    out = evaluate(state.params, roots.train_eval, jax.numpy.arange(5), 3)
    assert int(out.count) == 5
    assert float(out.return_sum) == float(out.length_sum) < 5 * 500
    again = evaluate(state.params, roots.train_eval, jax.numpy.arange(5), 3)
    assert float(again.return_sum) == float(out.return_sum)  # same keys, same episodes
    capped = jax.jit(make_train_eval_fn(env, net.apply, max_steps=3))(
        state.params, roots.train_eval, jax.numpy.arange(5), 3)
    assert int(capped.count) == 0  # no episode ends within 3 steps
