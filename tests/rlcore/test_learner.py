"""The update loop: one device against four, minibatch membership, and one plain step."""

import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rlcore import learner, losses, returns
from rlcore.algorithms import PPO, Impala, make_algorithm
from rlcore.networks import MLPActorCritic
from rlcore.types import LearnerState, Trajectory
from tests.helpers import xla_flags

SCRIPT = Path(__file__).with_name("multidevice_learner_script.py")
REPO = Path(__file__).resolve().parents[2]
TOL = dict(atol=1e-5, rtol=1e-5)


def _run_script(tmp_path_factory, which):
    """Results of ``multidevice_learner_script.py OUT which`` on 4 forced host devices."""
    out = tmp_path_factory.mktemp("multidevice") / "out.npz"
    # PYTHONPATH: the script runs as a file, so without it a git worktree's run would import
    # the packages of the editable install's checkout instead of the worktree's.
    env = dict(os.environ, XLA_FLAGS=xla_flags("--xla_force_host_platform_device_count=4"),
               JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO),
                                                        os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, str(SCRIPT), str(out), which], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with np.load(out) as data:
        return dict(data)


@pytest.fixture(scope="module")
def multidevice(tmp_path_factory):
    """The feed-forward results of the multi-device script."""
    return _run_script(tmp_path_factory, "feed_forward")


@pytest.fixture(scope="module")
def multidevice_recurrent(tmp_path_factory):
    """The recurrent results of the multi-device script (a process of their own)."""
    return _run_script(tmp_path_factory, "recurrent")


def _assert_runs_match(results, algorithm, run):
    keys = [k for k in results if k.startswith(f"{algorithm}/one/")]
    assert any("/params/" in k for k in keys) and any("/metrics/" in k for k in keys)
    for key in keys:
        np.testing.assert_allclose(results[key.replace("/one/", f"/{run}/")], results[key],
                                   err_msg=key, **TOL)


@pytest.mark.parametrize("algorithm", ["ppo", "ppo_sequences", "impala"])
def test_four_devices_match_one_device(multidevice, algorithm):
    """3 updates (PPO: 2 epochs x 2 minibatches of samples, or of whole sequences, B = 16,
    T = 5) sharded over 4 devices with ``jax.shard_map(..., check_vma=False)`` give the
    params and metrics of one device."""
    _assert_runs_match(multidevice, algorithm, "four_novma")


def test_four_devices_default_check_vma_match_one_device(multidevice):
    """As above under ``jax.shard_map``'s default ``check_vma=True``, as anakin/ and sebulba/
    call it: the gradient of replicated params must be the mean, not the sum, over devices
    (PPO; IMPALA goes through the same gradient step)."""
    _assert_runs_match(multidevice, "ppo", "four")


@pytest.mark.parametrize("algorithm,run", [("ppo_gaussian", "four"),
                                           ("impala_gaussian", "four_novma")])
def test_gaussian_four_devices_match_one_device(multidevice, algorithm, run):
    """A diagonal Gaussian policy (3-dimensional box actions, the learned log-std a
    replicated parameter like any other): 3 updates sharded over 4 devices give the params
    and metrics of one device."""
    _assert_runs_match(multidevice, algorithm, run)


@pytest.mark.parametrize("algorithm,run", [("ppo_lstm", "four"), ("ppo_lstm", "four_micro"),
                                           ("impala_gru", "four")])
def test_recurrent_four_devices_match_one_device(multidevice_recurrent, algorithm, run):
    """A recurrent agent (MLP torso, LSTM or GRU core; random start states and episode
    starts; the loss and PPO's GAE values re-run the core over each whole sequence): 3
    updates sharded over 4 devices (``check_vma=True``; PPO also with 2 micro-batches)
    give the params and metrics of one device."""
    _assert_runs_match(multidevice_recurrent, algorithm, run)


@pytest.mark.parametrize("run", ["four", "one_micro", "four_micro"])
def test_decoupled_correction_four_devices_and_micro_batches_match_one_device(multidevice,
                                                                              run):
    """PPO with the staleness correction ``decoupled`` on stale behaviour logits (the
    proximal pass per device, truncated weights, ``stale/*`` metrics averaged over devices):
    sharded over 4 devices and micro-batched, the params and metrics of one device."""
    assert any("/stale/weight_mean/" in k for k in multidevice if k.startswith("ppo_decoupled"))
    _assert_runs_match(multidevice, "ppo_decoupled", run)


@pytest.mark.parametrize("algorithm", ["ppo", "ppo_sequences", "impala"])
@pytest.mark.parametrize("run", ["one_micro", "four_micro"])
def test_micro_batched_gradients_match_one_pass(multidevice, algorithm, run):
    """Each minibatch's gradient accumulated over 2 chunks of its envs (PPO: advantages
    normalised over the whole minibatch first; IMPALA: the chunks' sums added), on one
    device and on four under ``check_vma=True``, gives the params and metrics of one pass."""
    _assert_runs_match(multidevice, algorithm, run)


@pytest.mark.parametrize("num_devices", [2, 4])
def test_minibatch_membership_independent_of_device_count(multidevice, num_devices):
    one = multidevice["mb/1dev"]
    many = multidevice[f"mb/{num_devices}dev"]
    assert one.shape == many.shape == (3 * 2, 8)  # [epochs * minibatches, envs // M]
    for row_one, row_many in zip(one, many, strict=True):
        assert set(row_one.tolist()) == set(row_many.tolist())
    for idx in (one, many):
        for epoch in idx.reshape(3, 2 * 8):
            assert sorted(epoch.tolist()) == list(range(16))  # every env once per epoch


@pytest.mark.parametrize("num_devices", [2, 4])
def test_sample_membership_independent_of_device_count(multidevice, num_devices):
    """Minibatches of single samples: the same sets of (step, env) on 1, 2 and 4 devices;
    every sample once per epoch; each minibatch mixes steps and envs."""
    one = multidevice["samples/1dev"]
    many = multidevice[f"samples/{num_devices}dev"]
    t, b, m = 5, 16, 2
    assert one.shape == many.shape == (3 * m, t * b // m)
    for row_one, row_many in zip(one, many, strict=True):
        assert set(row_one.tolist()) == set(row_many.tolist())
    for idx in (one, many):
        for epoch in idx.reshape(3, m * t * b // m):
            assert sorted(epoch.tolist()) == list(range(t * b))  # every sample once
    for row in one:
        steps, envs = row // b, row % b
        assert len(set(steps.tolist())) > 1 and len(set(envs.tolist())) > 1
    assert not np.array_equal(one[0], one[m])  # epochs reshuffle


def test_sample_minibatches_mix_the_steps_of_every_env_of_a_block():
    """With one block (B = M = 4, as the 4-env CartPole config), a minibatch draws from all
    four envs and from many steps, not one env's whole trajectory."""
    steps, envs = map(np.asarray, learner.sample_minibatch_indices(
        jax.random.key(0), 128, 4, 4, 2))
    assert steps.shape == envs.shape == (8, 128, 1) and steps.dtype == np.int32
    for k in range(8):
        assert set(envs[k, :, 0].tolist()) == {0, 1, 2, 3}
        assert len(set(steps[k, :, 0].tolist())) > 64
    epoch = sorted((steps[:4] * 4 + envs[:4]).ravel().tolist())
    assert epoch == list(range(512))


def test_minibatch_indices_one_device():
    num_envs, m, epochs = 12, 3, 4
    idx = np.asarray(learner.minibatch_indices(jax.random.key(0), num_envs, m, epochs))
    assert idx.shape == (epochs * m, num_envs // m) and idx.dtype == np.int32
    per_epoch = idx.reshape(epochs, m, num_envs // m)
    for epoch in per_epoch:
        assert sorted(epoch.ravel().tolist()) == list(range(num_envs))
        for minibatch in epoch:  # stratified: one env from every block of m envs
            assert sorted((minibatch // m).tolist()) == list(range(num_envs // m))
    assert len({tuple(e.ravel()) for e in per_epoch}) > 1  # epochs reshuffle
    again = learner.minibatch_indices(jax.random.key(0), num_envs, m, epochs)
    np.testing.assert_array_equal(again, idx)


# ------------------------------------------------------------ one step, spelled out

_T, _B, _OBS, _A = 4, 6, 3, 2
# PPO's staleness-correction fields at their defaults (configs/base.py's): no correction.
NO_CORRECTION = dict(clip_rho=1.0, staleness_correction="none", decoupled_max_weight=1.0,
                     filter_threshold=0.2)


def _setup():
    net = MLPActorCritic(num_actions=_A, hidden=(8,))
    params = net.init(jax.random.key(0), jnp.zeros((1, _OBS)))
    rng = np.random.default_rng(0)
    terminated = np.zeros((_T, _B), bool)
    truncated = np.zeros((_T, _B), bool)
    terminated[1, 0], truncated[2, 3] = True, True
    traj = Trajectory(
        obs=jnp.asarray(rng.normal(size=(_T, _B, _OBS)), jnp.float32),
        action=jnp.asarray(rng.integers(0, _A, size=(_T, _B)), jnp.int32),
        reward=jnp.asarray(rng.normal(size=(_T, _B)), jnp.float32),
        terminated=jnp.asarray(terminated),
        truncated=jnp.asarray(truncated),
        behaviour_dist_params=jnp.asarray(0.1 * rng.normal(size=(_T, _B, _A)), jnp.float32),
        behaviour_value=None,
        bootstrap_obs=jnp.asarray(rng.normal(size=(_B, _OBS)), jnp.float32),
    )
    return net, params, traj


@pytest.mark.parametrize("algorithm", ["ppo", "impala"])
def test_single_minibatch_update_is_one_gradient_step(algorithm):
    """1 epoch x 1 minibatch: the update is one optimizer step on the whole rollout, PPO's
    advantages and targets built from the params at the start of the update."""
    net, params, traj = _setup()
    hp = (PPO(gamma=0.9, gae_lambda=0.8, clip_eps=0.2, clip_vloss=False, norm_adv=True,
              vf_coef=0.5, ent_coef=0.01, **NO_CORRECTION) if algorithm == "ppo"
          else Impala(gamma=0.9, vf_coef=0.5, ent_coef=0.01, vtrace_lambda=0.9, clip_rho=1.0,
                      clip_pg_rho=1.0))
    opt = optax.sgd(0.1)
    update = jax.jit(learner.make_update_fn(hp, net.apply, opt, num_epochs=1,
                                            num_minibatches=1))
    state = LearnerState(params=params, opt_state=opt.init(params), update=jnp.int32(5))
    new_state, metrics = update(state, traj, jax.random.key(1))
    assert int(new_state.update) == 6

    if algorithm == "ppo":
        obs_all = jnp.concatenate([traj.obs, traj.bootstrap_obs[None]]).reshape(-1, _OBS)
        value_all = net.apply(params, obs_all)[1].reshape(_T + 1, _B)
        inputs = returns.step_inputs(traj.reward, traj.terminated, traj.truncated,
                                     value_all[:_T], value_all[_T], 0.9, 0.8)
        adv, targets = returns.gae(traj.reward, inputs.discount_t, value_all[:_T],
                                   inputs.value_t, inputs.lambda_)
        batch = losses.PPOBatch(obs=traj.obs, action=traj.action,
                                behaviour_dist_params=traj.behaviour_dist_params,
                                old_value=value_all[:_T], advantages=adv, targets=targets)
        loss = lambda p: losses.ppo_loss(p, net.apply, batch, clip_eps=hp.clip_eps,
                                         vf_coef=hp.vf_coef, ent_coef=hp.ent_coef,
                                         clip_vloss=hp.clip_vloss, norm_adv=hp.norm_adv)
    else:
        loss = lambda p: losses.impala_loss(p, net.apply, traj, discount=0.9,
                                            vf_coef=hp.vf_coef, ent_coef=hp.ent_coef,
                                            lambda_=0.9)
    (_, want_metrics), grads = jax.value_and_grad(loss, has_aux=True)(params)
    want_params = jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
    jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, **TOL),
                 new_state.params, want_params)
    jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, **TOL), metrics, want_metrics)


def test_algorithms_read_their_hyperparameters_from_the_config():
    from configs import base
    from runtime.config.fields import hparams_of

    config = base.get_config()
    config.algorithm, config.clip_eps, config.gae_lambda = "ppo", 0.3, 0.7
    assert make_algorithm(hparams_of(config)) == PPO(gamma=0.99, gae_lambda=0.7, clip_eps=0.3,
                                         clip_vloss=False, norm_adv=True, vf_coef=0.5,
                                         ent_coef=0.01, **NO_CORRECTION)
    config.algorithm, config.vtrace_lambda = "impala", 0.9
    assert make_algorithm(hparams_of(config)) == Impala(
        gamma=0.99, vf_coef=0.5, ent_coef=0.01, vtrace_lambda=0.9, clip_rho=1.0, clip_pg_rho=1.0)


def test_ppo_uses_rollout_values_when_the_trajectory_carries_them():
    """Lag 0 (Anakin): behaviour values equal to the learner's give the same PPO batch as
    recomputing them; values of other params change the advantages (so they are used)."""
    net, params, traj = _setup()
    ppo = PPO(gamma=0.9, gae_lambda=0.8, clip_eps=0.2, clip_vloss=False, norm_adv=True,
              vf_coef=0.5, ent_coef=0.01, **NO_CORRECTION)
    values = net.apply(params, traj.obs.reshape(_T * _B, _OBS))[1].reshape(_T, _B)
    recomputed = ppo.prepare(params, net.apply, traj)
    reused = ppo.prepare(params, net.apply, traj.replace(behaviour_value=values))
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6),
                 recomputed, reused)
    stale = ppo.prepare(params, net.apply, traj.replace(behaviour_value=values + 1.0))
    assert not np.allclose(stale.advantages, recomputed.advantages)
