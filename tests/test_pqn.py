"""PQN (``algorithm=pqn``, rlcore/algorithms/pqn.py; docs/algorithms.md, "PQN"): its
epsilon schedule, LayerNorm networks and RAdam; it learns CartPole in both architectures,
feed-forward and recurrent; it keeps a built-in's guarantees (one device against four,
each agent of seeds x a sweep its own single run, exact resume after kill -9, the
``cleanba`` pipeline identical under actor jitter, every pipeline and lag); and a stale
rollout gets the learner's fresh targets. The Q(lambda) targets: test_q_lambda.py."""

from __future__ import annotations

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from anakin.train import prepare as anakin_prepare
from anakin.train import train
from configs import cartpole_pqn
from envs.registry import env_spec
from rlcore.algorithms.pqn import PQN
from rlcore.errors import ConfigError
from rlcore.networks import make_network
from rlcore.optim import make_optimizer
from rlcore.types import EnvSpec, Trajectory
from runtime.config.algo import fill_own
from runtime.config.fields import hparams_of
from runtime.distributed import data_mesh
from tests.helpers import (
    REPO,
    assert_floats_close,
    assert_rows_close,
    entry_env,
    kill_and_resume,
    read_metrics,
    reproducible_part,
    set_path,
)

CARTPOLE = EnvSpec(obs_shape=(4,), obs_dtype="float32", num_actions=2)


def _config(**overrides):
    """configs/cartpole_pqn.py at 16 envs x 16 steps, 6 updates, a line each."""
    c = cartpole_pqn.get_config()
    c.num_envs, c.num_steps, c.num_minibatches = 16, 16, 4
    c.total_env_steps, c.log_every, c.updates_per_call = 16 * 16 * 6, 1, 3
    fill_own(c)
    for k, v in overrides.items():
        c[k] = v
    return c


def _pqn(**own) -> PQN:
    return PQN(gamma=0.99, gae_lambda=0.65, num_envs=128, num_steps=32,
               total_env_steps=10_000_000, **own)


def test_epsilon_decays_linearly_over_its_share_of_the_schedules_updates():
    """The reference's schedule: 1 at the first rollout, 0.05 after 10% of the 2441
    updates of 10M env steps (244.1), linear between; a run of 1M env steps with
    ``epsilon_env_steps`` 10M keeps it, one without decays ten times as fast."""
    pqn = _pqn()
    eps = [float(pqn.epsilon(jnp.int32(u))) for u in (0, 122, 244, 245, 2000)]
    np.testing.assert_allclose(eps, [1.0, 1.0 - 0.95 * 122 / 244.1, 0.05 + 0.95 * 0.1 / 244.1,
                                     0.05, 0.05], rtol=1e-6)
    short = dict(total_env_steps=1_000_000)
    kept = PQN(**{**_pqn().__dict__, **short, "epsilon_env_steps": 10_000_000})
    assert float(kept.epsilon(jnp.int32(122))) == pytest.approx(eps[1])
    faster = PQN(**{**_pqn().__dict__, **short})
    assert float(faster.epsilon(jnp.int32(24))) == pytest.approx(0.05, abs=0.02)
    probs = jnp.exp(pqn.act(make_dist([[1.0, 3.0, 2.0]]), jnp.int32(244 * 10)).logits)
    np.testing.assert_allclose(probs, [[0.05 / 3, 1 - 0.05 + 0.05 / 3, 0.05 / 3]], rtol=1e-5)


def make_dist(q):
    from rlcore.distributions import Categorical

    return Categorical(logits=jnp.asarray(q, jnp.float32))


@pytest.mark.parametrize("name, spec, norms", [
    ("mlp", CARTPOLE, 2),
    ("minatar_cnn", EnvSpec(obs_shape=(10, 10, 4), obs_dtype="float32", num_actions=3), 2),
    pytest.param("nature_cnn", EnvSpec(obs_shape=(4, 84, 84), obs_dtype="uint8",
                                       num_actions=4), 4, marks=pytest.mark.slow),
])
def test_layer_norm_is_an_option_of_the_built_in_networks(name, spec, norms):
    """``layer_norm``: a LayerNorm before each hidden activation of the torso (the MLP's 2
    layers; the MinAtar conv and dense; the Nature CNN's 3 convs and dense), under PQN's
    Q head too; off, none, and the parameters are those of before the option."""
    def layer_norms(params):
        return [k for k in jax.tree_util.tree_flatten_with_path(params)[0]
                if "norm" in jax.tree_util.keystr(k[0])]

    obs = jnp.zeros((1, *spec.obs_shape), spec.obs_dtype)
    for heads in (None, PQN.heads(spec)):
        on = make_network(name, spec, heads=heads, layer_norm=True)
        off = make_network(name, spec, heads=heads)
        p_on, p_off = on.init(jax.random.key(0), obs), off.init(jax.random.key(0), obs)
        # a scale and a bias each, the actor's stream alone under a head of one's own
        expected = norms * 2 * (2 if name == "mlp" and heads is None else 1)
        assert len(layer_norms(p_on)) == expected, layer_norms(p_on)
        assert layer_norms(p_off) == []
        assert on.apply(p_on, obs)[1].shape == (1,)


def test_an_old_run_reads_as_without_layer_norm():
    """A ``config.json`` written before ``layer_norm`` (format 5) reads as off."""
    from runtime.config.saved import upgrade_saved

    assert upgrade_saved({"seed": 1, "format_version": 5})["layer_norm"] is False
    assert "layer_norm" not in upgrade_saved({"seed": 1, "format_version": 6})


def test_radam_is_optax_radam_after_the_clip():
    """``optimizer=radam``: optax's RAdam with ``adam_eps``, after the global-norm clip."""
    params = {"w": jnp.arange(3.0)}
    grads = {"w": jnp.array([30.0, -40.0, 0.0])}
    ours = make_optimizer("radam", 1e-3, max_grad_norm=10.0, num_updates=10,
                          steps_per_update=1, anneal_lr=False, adam_eps=1e-8,
                          rmsprop_decay=0.99, rmsprop_eps=0.01)
    ref = optax.chain(optax.clip_by_global_norm(10.0), optax.radam(1e-3, eps=1e-8))
    a, b = ours.init(params), ref.init(params)
    for _ in range(8):  # past RAdam's first steps without the adaptive term
        ua, a = ours.update(grads, a, params)
        ub, b = ref.update(grads, b, params)
        np.testing.assert_allclose(ua["w"], ub["w"], rtol=1e-6)


def test_a_stale_rollout_gets_the_learners_targets():
    """Without the rollout's own values (a Sebulba actor's, or a lagged Anakin rollout's)
    the targets are recomputed with the learner's params: equal to those of a rollout that
    carried the learner's values, and unlike those of the acting params."""
    config = _config()
    from runtime.config.agent import network

    net = network(config, env_spec(config.env_id, "anakin"))
    key = jax.random.key(0)
    fresh = net.init(key, jnp.zeros((1, 4)))
    stale = net.init(jax.random.key(1), jnp.zeros((1, 4)))
    t, b = 6, 3
    obs = jax.random.normal(key, (t, b, 4))
    flags = jnp.zeros((t, b), bool).at[2, 1].set(True)
    traj = Trajectory(obs=obs, action=jnp.zeros((t, b), jnp.int32), reward=jnp.ones((t, b)),
                      terminated=flags, truncated=jnp.zeros((t, b), bool),
                      behaviour_dist_params=jnp.zeros((t, b, 2)), behaviour_value=None,
                      bootstrap_obs=obs[0])
    pqn = PQN.from_hparams(hparams_of(config))
    recomputed = pqn.prepare(fresh, net.apply, traj).targets
    own = traj.replace(behaviour_value=net.apply(fresh, obs.reshape(-1, 4))[1].reshape(t, b))
    np.testing.assert_allclose(recomputed, pqn.prepare(fresh, net.apply, own).targets,
                               rtol=1e-6)
    acting = traj.replace(behaviour_value=net.apply(stale, obs.reshape(-1, 4))[1].reshape(t, b))
    assert not np.allclose(recomputed, pqn.prepare(fresh, net.apply, acting).targets)


@pytest.mark.parametrize("field, value, message", [
    ("algo.epsilon_finish", 1.5, "algo.epsilon_finish: must be in [0, 1], got 1.5"),
    ("algo.td_loss", "l1", "algo.td_loss: must be mse or huber, got 'l1'"),
    ("algo.epsilon_env_steps", -1, "algo.epsilon_env_steps: must be >= 0 (0: "
     "total_env_steps), got -1"),
    ("env_id", "Pendulum-v1", "algorithm: pqn needs discrete actions (this env's are a box of "
     "shape (1,))"),
    ("staleness_correction", "decoupled", None),
])
def test_values_pqn_cannot_run_are_refused_before_compiling(field, value, message):
    c = _config()
    set_path(c, field, value)
    with pytest.raises(ConfigError) as e:
        anakin_prepare(c)
    assert message is None and "staleness_correction" in str(e.value) or str(e.value) == message


def _eval_returns(rows):
    return [r["eval/episode_return"] for r in rows if "eval/episode_return" in r]


@pytest.mark.slow  # 10-20 s
def test_pqn_learns_cartpole():
    """configs/cartpole_pqn.py for 196,608 env steps (96 of its 244 updates): the greedy
    evaluation return (32 episodes every 24 updates) reaches 400 or more
    (10 seeds of the whole run: 8 hold 500.0 over its last 20%, a ninth 499.8;
    WORKSPACE-notes.md)."""
    c = cartpole_pqn.get_config()
    c.total_env_steps, c.eval_every, c.eval_episodes = 64 * 32 * 96, 24, 32
    c.algo.epsilon_env_steps = 500_000  # the whole run's schedule
    rows = train(c, None, mesh=data_mesh(jax.devices()[:1]))
    evals = _eval_returns(rows)
    assert len(evals) == 4 and max(evals) >= 400, evals


@pytest.mark.slow  # 20-40 s each
@pytest.mark.parametrize("module", ["anakin.main", "sebulba.main"])
def test_recurrent_pqn_learns_cartpole(module, tmp_path):
    """An LSTM core (the reference's ``pqn_rnn``): 65,536 env steps of CartPole, sequences
    of 64 steps, in both architectures; the training return (epsilon still 0.5 to 0.2)
    climbs from about 22 (random play) past 50."""
    proc = subprocess.run(
        [sys.executable, "-m", module, "--config=configs/cartpole_pqn.py",
         f"--workdir={tmp_path}", "--config.recurrent=lstm", "--config.recurrent_hidden=32",
         "--config.total_env_steps=65536", "--config.log_every=4",
         "--config.algo.epsilon_env_steps=500000"],
        cwd=REPO, env=entry_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    returns = [r["episode_return"] for r in read_metrics(tmp_path)]
    assert returns[0] < 30 and max(returns) > 50, returns


def test_pqn_gives_the_same_run_on_one_and_four_devices():
    if jax.device_count() < 4:
        pytest.skip("needs 4 (fake) devices")
    one = train(_config(), None, mesh=data_mesh(jax.devices()[:1]))
    four = train(_config(), None, mesh=data_mesh(jax.devices()[:4]))
    assert len(one) == len(four) == 6
    assert_rows_close(one, four, tol=1e-4)


@pytest.mark.slow  # 10 s
def test_each_agent_of_seeds_and_a_sweep_of_epsilon_is_its_single_run():
    """Two seeds x two swept ``algo.epsilon_finish`` values in one program: each agent is
    the plain run of its seed and value."""
    mesh = data_mesh(jax.devices()[:1])
    many_config = _config(num_seeds=2)
    many_config.algo.epsilon_fraction = 0.5
    many_config.sweep.algo.epsilon_finish = (0.3, 0.01)
    many = train(many_config, None, mesh=mesh)
    for eps, seed in [(0.3, 0), (0.01, 1)]:
        single = _config(seed=seed)
        single.algo.epsilon_fraction, single.algo.epsilon_finish = 0.5, eps
        one = train(single, None, mesh=mesh)
        mine = [r for r in many if (r["algo.epsilon_finish"], r["seed"]) == (eps, seed)]
        assert [r["update"] for r in mine] == [r["update"] for r in one] == list(range(1, 7))
        assert_floats_close(mine, one)


def _command(module: str, workdir, delay_ms: int) -> list[str]:
    """Twelve updates of PQN on CartPole, a log line and a checkpoint every 2."""
    return [sys.executable, "-m", module, "--config=configs/cartpole_pqn.py",
            f"--workdir={workdir}", "--config.num_envs=16", "--config.num_steps=16",
            "--config.num_minibatches=4", "--config.updates_per_call=1",
            f"--config.total_env_steps={16 * 16 * 12}", "--config.log_every=1",
            "--config.checkpoint_every=2", f"--config.debug.learner_delay_ms={delay_ms}"]


@pytest.mark.slow  # 20 s and 18 s
@pytest.mark.parametrize("module", ["anakin.main", "sebulba.main"])
def test_pqn_resumes_exactly_after_kill_9(module, tmp_path):
    """Killed with -9 after 6 logged updates (each held 300 ms), the same command resumes
    from the newest checkpoint: Anakin's run then logs what an uninterrupted run logs;
    Sebulba's (which re-seeds its envs on a resume) what a second resume of a copy logs."""
    kill_and_resume(module, lambda workdir, delay: _command(module, workdir, delay), tmp_path,
                    12)


needs_4 = pytest.mark.skipif(jax.device_count() < 4, reason="needs 4 (fake) devices")
TIME_LIMIT = 20  # CartPole cut short, so that rollouts hold truncations (final values)


def _sebulba(pipeline: str, threads: int, jitter: int = 0, updates: int = 6, **overrides):
    """configs/cartpole_pqn.py on Sebulba: actors on device 0, learners on 1-3, 12 envs x
    16 steps, ``updates`` updates."""
    from sebulba.train import prepare

    c = cartpole_pqn.get_config()
    c.actor_device_ids, c.learner_device_ids = (0,), (1, 2, 3)
    c.pipeline, c.num_actor_threads, c.debug.actor_jitter_ms = pipeline, threads, jitter
    c.num_envs, c.num_steps, c.num_minibatches = 12, 16, 2
    c.total_env_steps, c.log_every = 12 * 16 * updates, 1
    c.algo.epsilon_env_steps = 12 * 16 * 20  # epsilon still falling at the end
    for k, v in overrides.items():
        c[k] = v
    prepare(c)
    return c


def _short_time_limit(monkeypatch):
    import sebulba.train as sebulba_trainer

    make = sebulba_trainer.make_host_env
    monkeypatch.setattr(sebulba_trainer, "make_host_env", lambda *a, **kw: make(
        *a, max_episode_steps=TIME_LIMIT, **kw))


@needs_4
@pytest.mark.parametrize("lag", [1, pytest.param(0, marks=pytest.mark.slow),
                                 pytest.param(2, marks=pytest.mark.slow),
                                 pytest.param(8, marks=pytest.mark.slow)])
def test_sebulba_pqn_is_identical_under_jitter_and_threads_at_every_lag(lag, tmp_path,
                                                                        monkeypatch):
    """The cleanba pipeline at policy lag ``lag`` (1: its own), ``lag + 4`` updates: 2
    actor threads with 25 ms of jitter log the metrics of 1 thread without, epsilon-greedy
    acting and truncations included, and ``params_lag`` is the rule's."""
    from sebulba.train import train as sebulba_train

    _short_time_limit(monkeypatch)
    updates = lag + 4
    plain = sebulba_train(_sebulba("cleanba", 1, updates=updates, policy_lag=lag), None)
    jittered = sebulba_train(_sebulba("cleanba", 2, 25, updates=updates, policy_lag=lag), None)
    assert len(plain) == updates
    assert reproducible_part(plain) == reproducible_part(jittered)
    assert [r["params_lag"] for r in plain] == [float(r - max(r - lag, 0))
                                                for r in range(updates)]


@needs_4
@pytest.mark.slow  # 12 s
@pytest.mark.parametrize("pipeline", ["sync", "async"])
def test_sebulba_pqn_runs_in_every_pipeline(pipeline, tmp_path):
    """sync (lag 0, identical under jitter too) and async (lag as it comes): six updates
    with finite losses."""
    from sebulba.train import train as sebulba_train

    rows = sebulba_train(_sebulba(pipeline, 2, 25), None)
    assert len(rows) == 6 and all(np.isfinite(r["loss/total"]) for r in rows)
    if pipeline == "sync":
        again = sebulba_train(_sebulba(pipeline, 1), None)
        assert reproducible_part(again) == reproducible_part(rows)
        assert [r["params_lag"] for r in rows] == [0.0] * 6
