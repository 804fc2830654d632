"""An algorithm that owns its learning (docs/design.md, "The algorithm protocol"):
``examples/replay_q.py`` brings its own heads (Q-values), acting (epsilon-greedy on a
schedule), state (target params and a per-env replay ring, split over the devices) and update
(minibatches sampled from the ring), by import path, and keeps a built-in's guarantees: it
learns in both architectures, gives the same run on one and four devices, each of several
agents is its own single run, and a run killed with -9 resumes exactly."""

from __future__ import annotations

import json
import sys

import jax
import numpy as np
import pytest

import sebulba.train as sebulba_trainer
from anakin.train import prepare as anakin_prepare
from anakin.train import train
from configs import cartpole_ppo, cartpole_ppo_sebulba
from rlcore.distributions import epsilon_greedy
from rlcore.replay import replay_indices
from runtime.config.algo import fill_own
from runtime.distributed import data_mesh
from tests.helpers import (
    assert_floats_close,
    assert_rows_close,
    kill_and_resume,
    reproducible_part,
    set_path,
)

REPLAY_Q = "examples.replay_q:ReplayQ"
# Q-learning's settings over the PPO configs' (CleanRL's DQN learning rate is 2.5e-4 over
# 500k steps; these runs are 40k).
Q_FIELDS = {"algorithm": REPLAY_Q, "learning_rate": 1e-3, "anneal_lr": False,
            "max_grad_norm": 10.0}


def _anakin(**overrides):
    c = cartpole_ppo.get_config()
    c.update(Q_FIELDS)
    c.num_envs, c.num_steps, c.total_env_steps, c.log_every = 16, 32, 16 * 32 * 6, 1
    fill_own(c)  # config.algo and config.sweep.algo of its own hyperparameters
    for k, v in overrides.items():
        c[k] = v
    return c


def _mean_last(rows, n: int) -> float:
    return float(np.mean([r["episode_return"] for r in rows[-n:]]))


def test_epsilon_greedy_puts_epsilon_over_the_actions_and_the_rest_on_the_argmax():
    q = jax.numpy.asarray([[1.0, 3.0, 2.0], [0.0, -1.0, -2.0]])
    probs = np.exp(np.asarray(epsilon_greedy(q, 0.3).logits))
    np.testing.assert_allclose(probs, [[0.1, 0.8, 0.1], [0.8, 0.1, 0.1]], rtol=1e-6)
    greedy = epsilon_greedy(q, 0.0)
    keys = jax.random.split(jax.random.key(0), 2)
    assert greedy.sample_rows(keys).tolist() == [1, 0] == greedy.mode().tolist()


def test_replay_indices_are_the_same_whatever_the_device_count():
    """Minibatches drawn per global block of envs: four devices' draws, stacked, are one
    device's; rows stay under the filled count, envs inside their block."""
    key = jax.random.key(3)
    one = replay_indices(key, 40, 16, 4, 3, 5)
    rows, envs = one
    assert rows.shape == envs.shape == (3, 5, 4)
    assert int(rows.max()) < 40 and [int(e // 4) for e in envs[0, 0]] == [0, 1, 2, 3]
    mesh = data_mesh(jax.devices()[:4]) if jax.device_count() >= 4 else None
    if mesh is None:
        pytest.skip("needs 4 (fake) devices")
    from jax.sharding import PartitionSpec as P
    four = jax.jit(jax.shard_map(lambda k: replay_indices(k, 40, 4, 4, 3, 5, "data"),
                                 mesh=mesh, in_specs=P(), out_specs=P(None, None, "data")))(key)
    np.testing.assert_array_equal(four[0], rows)
    # Device d holds block d: its env indices are local to it.
    np.testing.assert_array_equal(np.asarray(four[1]) + 4 * np.arange(4), envs)


@pytest.mark.slow  # 19 s
def test_replay_q_learns_cartpole_in_both_architectures(tmp_path):
    """40,960 env steps each (random play: about 22): Anakin's and Sebulba's runs pass a
    mean return of 100 over their last 5 logged updates."""
    anakin_rows = train(_anakin(total_env_steps=16 * 32 * 80, log_every=4), None,
                        mesh=data_mesh(jax.devices()[:1]))
    assert _mean_last(anakin_rows, 5) > 100, [r["episode_return"] for r in anakin_rows]
    c = cartpole_ppo_sebulba.get_config()
    c.update(Q_FIELDS)
    c.total_env_steps, c.log_every = 40960, 4
    sebulba_trainer.prepare(c)
    sebulba_rows = sebulba_trainer.train(c, str(tmp_path / "sebulba"))
    assert _mean_last(sebulba_rows, 5) > 100, [r["episode_return"] for r in sebulba_rows]


def test_replay_q_gives_the_same_run_on_one_and_four_devices():
    """The ring is split over the devices (each keeps its envs' rows) and the minibatches
    are drawn per global block: the losses and returns of one device and of four agree."""
    if jax.device_count() < 4:
        pytest.skip("needs 4 (fake) devices")
    config = _anakin(updates_per_call=3)
    one = train(config, None, mesh=data_mesh(jax.devices()[:1]))
    four = train(config, None, mesh=data_mesh(jax.devices()[:4]))
    assert len(one) == len(four) == 6
    assert_rows_close(one, four, tol=1e-4)


@pytest.mark.slow  # 10 s
def test_each_agent_of_seeds_and_a_sweep_of_its_own_hyperparameter_is_its_single_run():
    """Two seeds x two swept ``algo.epsilon_end`` values: four agents in one program, each
    the plain run of its seed and value (the ring and target params per agent)."""
    config = _anakin(num_seeds=2, total_env_steps=16 * 32 * 4, updates_per_call=2)
    config.algo.epsilon_updates = 2
    config.sweep.algo.epsilon_end = (0.3, 0.01)
    mesh = data_mesh(jax.devices()[:1])
    many = train(config, None, mesh=mesh)
    for eps, seed in [(0.3, 0), (0.01, 1)]:
        single = _anakin(seed=seed, total_env_steps=16 * 32 * 4, updates_per_call=2)
        single.algo.epsilon_updates, single.algo.epsilon_end = 2, eps
        one = train(single, None, mesh=mesh)
        mine = [r for r in many if (r["algo.epsilon_end"], r["seed"]) == (eps, seed)]
        assert [r["update"] for r in mine] == [r["update"] for r in one] == [1, 2, 3, 4]
        assert_floats_close(mine, one)


def _command(module: str, workdir, delay_ms: int) -> list[str]:
    """Twelve updates of ReplayQ on CartPole, a log line and a checkpoint every 2."""
    config = ("configs/cartpole_ppo.py" if module == "anakin.main"
              else "configs/cartpole_ppo_sebulba.py")
    fields = [f"--config.{k}={v}" for k, v in Q_FIELDS.items()]
    sizes = (["--config.num_envs=16", "--config.num_steps=32", "--config.updates_per_call=1",
              "--config.num_devices=1"] if module == "anakin.main"
             else ["--config.num_envs=12", "--config.num_steps=16"])
    steps = 16 * 32 * 12 if module == "anakin.main" else 12 * 16 * 12
    return [sys.executable, "-m", module, f"--config={config}", f"--workdir={workdir}",
            *fields, *sizes, f"--config.total_env_steps={steps}", "--config.log_every=1",
            "--config.checkpoint_every=2", f"--config.debug.learner_delay_ms={delay_ms}"]


@pytest.mark.slow  # 21 s and 18 s
@pytest.mark.parametrize("module", ["anakin.main", "sebulba.main"])
def test_replay_q_resumes_exactly_after_kill_9(module, tmp_path):
    """Killed with -9 after 6 logged updates (each held 300 ms), the same command resumes
    from the newest checkpoint, ring and target params included: Anakin's run then logs
    what an uninterrupted run logs; Sebulba's, which re-seeds its envs on a resume
    (docs/design.md, "Pipelines and staleness"), what a second resume of a copy logs."""
    def holds_its_own_state(killed, newest):
        saved = json.loads((killed / "checkpoints" / str(newest) / "default" / "_METADATA")
                           .read_text())["tree_metadata"]
        own = [k for k in saved if "'extra', " in k]  # Anakin's under its learner state
        assert any(k.endswith("'extra', 'ring', 'data', 'obs')") for k in own) and any(
            "'extra', 'target', 'params'" in k for k in own), own

    kill_and_resume(module, lambda workdir, delay: _command(module, workdir, delay), tmp_path,
                    12, inspect=holds_its_own_state)


def test_a_restored_q_learner_samples_its_own_exploration_and_acts_greedily(tmp_path):
    """``load_policy`` of a ReplayQ run (epsilon 0.5 from the first update on): sampled
    actions are epsilon-greedy at the run's last update (about a quarter of 4,000 rows
    away from the greedy one, of 2 actions), greedy ones the argmax of its Q-values."""
    import jax.numpy as jnp

    import runtime

    config = _anakin(total_env_steps=16 * 32 * 2, updates_per_call=2)
    config.algo.epsilon_start, config.algo.epsilon_end = 0.5, 0.5
    train(config, str(tmp_path), mesh=data_mesh(jax.devices()[:1]))
    greedy, params = runtime.load_policy(str(tmp_path))
    sampled, _ = runtime.load_policy(str(tmp_path), greedy=False)
    obs = jax.random.normal(jax.random.key(1), (4000, 4)) * 0.1
    best = np.asarray(greedy(params, obs, None))
    drawn = np.asarray(sampled(params, obs, jax.random.key(2)))
    assert 0.2 < float(np.mean(drawn != best)) < 0.3
    from envs.registry import env_spec
    from runtime.config.agent import network
    q = network(config, env_spec(config.env_id, "anakin")).apply(params, obs)[0].logits
    np.testing.assert_array_equal(best, np.asarray(jnp.argmax(q, axis=-1)))


WHOLE = '''
from rlcore.networks import MLPActorCritic


def whole_mlp(spec):
    """The built-in MLP with its heads: a whole network, (dist, value) of observations."""
    return MLPActorCritic(num_actions=spec.num_actions)
'''


def test_a_whole_network_of_your_own_goes_with_its_own_heads(tmp_path, monkeypatch):
    """A network by import path that gives ``(dist, value)`` itself is used as it is: the
    built-in MLP with its heads, by path, logs what ``network=mlp`` logs; a recurrent
    agent, which needs a torso before its core, refuses it in one line."""
    from rlcore.errors import ConfigError

    (tmp_path / "wholenets.py").write_text(WHOLE)
    monkeypatch.syspath_prepend(str(tmp_path))
    mesh = data_mesh(jax.devices()[:1])
    rows = {}
    for name in ("mlp", "wholenets:whole_mlp"):
        c = cartpole_ppo.get_config()
        c.network, c.total_env_steps, c.num_envs, c.num_steps = name, 16 * 32 * 2, 16, 32
        c.log_every = 1
        rows[name] = reproducible_part(train(c, None, mesh=mesh))
    assert rows["mlp"] == rows["wholenets:whole_mlp"] and len(rows["mlp"]) == 2
    c = cartpole_ppo.get_config()
    c.network, c.recurrent = "wholenets:whole_mlp", "lstm"
    with pytest.raises(ConfigError, match="^recurrent: 'wholenets:whole_mlp' is a whole network"):
        anakin_prepare(c)


VARIANT = '''
import dataclasses

from rlcore import losses
from rlcore.algorithms.ppo import PPO


@dataclasses.dataclass(frozen=True)
class RawAdvantagePPO(PPO):
    """A variant that overrides loss alone: PPO's loss with its advantages normalised
    again inside, whatever norm_adv says."""

    def loss(self, params, apply_fn, batch, axis_name):
        return losses.ppo_loss(params, apply_fn, batch, clip_eps=self.clip_eps,
                               vf_coef=self.vf_coef, ent_coef=self.ent_coef,
                               clip_vloss=self.clip_vloss, norm_adv=True,
                               axis_name=axis_name, objective=self.objective())
'''


@pytest.mark.slow  # 8 s
def test_micro_batches_keep_an_algorithms_math_or_are_refused(tmp_path, monkeypatch):
    """A variant that overrides ``loss`` below PPO's ``split_ready`` is refused more than
    one micro-batch in one ``microbatches`` line (its chunks would see other advantage
    statistics); ReplayQ, whose ``split_ready`` is its loss's, logs on 2 micro-batches what
    it logs on 1."""
    from rlcore.errors import ConfigError

    (tmp_path / "variants.py").write_text(VARIANT)
    monkeypatch.syspath_prepend(str(tmp_path))
    c = cartpole_ppo.get_config()
    c.algorithm, c.num_envs, c.microbatches = "variants:RawAdvantagePPO", 16, 2
    with pytest.raises(ConfigError, match="^microbatches: variants:RawAdvantagePPO overrides "
                                          "loss below the class that splits it"):
        anakin_prepare(c)
    c.microbatches = 1
    anakin_prepare(c)
    from runtime.config.plan import candidates
    c.microbatches = -1  # the automatic plan: one pass for it, PPO's divisors for PPO
    assert candidates(c, 1, "cpu")[1] == [1]
    c.algorithm = "ppo"
    assert candidates(c, 1, "cpu")[1] == [1, 2, 4]
    mesh = data_mesh(jax.devices()[:1])
    one, two = (train(_anakin(total_env_steps=16 * 32 * 3, microbatches=k), None, mesh=mesh)
                for k in (1, 2))
    assert_rows_close(one, two, tol=1e-4)


@pytest.mark.parametrize("field, value, message", [
    ("algo.gradient_steps", 0, "algo.gradient_steps: must be an integer >= 1, got 0"),
    ("algo.replay_rollouts", 0, "algo.replay_rollouts: must be an integer >= 1, got 0"),
    ("sweep.algo.epsilon_end", (0.1, 1.5), "sweep.algo.epsilon_end: must be in [0, 1], got 1.5"),
    ("recurrent", "lstm", "recurrent: examples.replay_q:ReplayQ learns from samples only; a "
     "recurrent agent (lstm) needs whole sequences"),
])
def test_values_an_algorithm_cannot_run_are_refused_before_compiling(field, value, message):
    """The algorithm's own rules of its values (``Algorithm.check``, on the config's values
    and on each swept one) and an agent it cannot train: one line, before compiling (they
    ran into NaN losses, a shape error and an IndexError once compiling)."""
    from rlcore.errors import ConfigError

    c = _anakin()
    set_path(c, field, value)
    with pytest.raises(ConfigError) as e:
        anakin_prepare(c)
    assert str(e.value) == message
