"""Corrections for stale rollouts (``rlcore.staleness``): each against plain NumPy written
from its definition (docs/algorithms.md, "Corrections for stale rollouts"), the decoupled
objective equal to PPO where behaviour and proximal policy coincide, and the learner's
update with each correction."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rlcore import learner, losses, staleness
from rlcore.algorithms import PPO
from rlcore.distributions import Categorical
from rlcore.networks import MLPActorCritic, make_network
from rlcore.optim import optimizer_for
from rlcore.types import EnvSpec, LearnerState, Trajectory

T, B, OBS, A = 6, 4, 3, 3
CLIP = 0.2
TOL = dict(atol=1e-5, rtol=1e-5)


def _linear_apply(params, obs):
    """Categorical logits ``obs @ wp``, value ``obs @ wv``."""
    return Categorical(obs @ params["wp"]), obs @ params["wv"]


def _np_log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def _case(seed=0, spread=0.6):
    """Params, a PPOBatch ``[T, B]`` (behaviour logits near the policy's, ``spread`` apart)
    and float32 ``(log pi_prox(a), log mu(a))``, the proximal policy a perturbed copy."""
    rng = np.random.default_rng(seed)
    params = {"wp": rng.normal(size=(OBS, A)).astype(np.float32),
              "wv": rng.normal(size=(OBS,)).astype(np.float32)}
    obs = rng.normal(size=(T, B, OBS)).astype(np.float32)
    logits = obs @ params["wp"]
    behaviour = (logits + spread * rng.normal(size=logits.shape)).astype(np.float32)
    prox_logits = (logits + spread * rng.normal(size=logits.shape)).astype(np.float32)
    action = rng.integers(0, A, size=(T, B)).astype(np.int32)
    batch = losses.PPOBatch(
        obs=obs, action=action, behaviour_dist_params=behaviour,
        old_value=rng.normal(size=(T, B)).astype(np.float32),
        advantages=rng.normal(size=(T, B)).astype(np.float32),
        targets=rng.normal(size=(T, B)).astype(np.float32))
    prox = Categorical(jnp.asarray(prox_logits)).log_prob(action)
    mu = Categorical(jnp.asarray(behaviour)).log_prob(action)
    return params, batch, np.asarray(prox), np.asarray(mu)


def _np_terms(params, batch):
    """float64 ``(log pi(a), log mu(a), entropy, value loss)`` of the linear policy."""
    obs = np.asarray(batch.obs, np.float64)
    log_p = _np_log_softmax(obs @ np.asarray(params["wp"], np.float64))
    take = lambda lp: np.take_along_axis(lp, batch.action[..., None], -1)[..., 0]  # noqa: E731
    mu_log_p = _np_log_softmax(np.asarray(batch.behaviour_dist_params, np.float64))
    value = obs @ np.asarray(params["wv"], np.float64)
    return (take(log_p), take(mu_log_p), -(np.exp(log_p) * log_p).sum(-1),
            0.5 * np.mean((value - batch.targets) ** 2))


def _ppo_loss(params, batch):
    return losses.ppo_loss(params, _linear_apply, batch, clip_eps=CLIP, vf_coef=0.5,
                           ent_coef=0.01, norm_adv=False)


def _assert_metrics(loss, m, policy, params, batch, clipped_ratio):
    log_pa, mu_log_pa, ent, value = _np_terms(params, batch)
    ratio = np.exp(log_pa - mu_log_pa)
    want = dict(policy=policy, value=value, entropy=np.mean(ent),
                total=policy + 0.5 * value - 0.01 * np.mean(ent),
                approx_kl=np.mean((ratio - 1.0) - np.log(ratio)),
                clip_frac=np.mean(np.abs(clipped_ratio - 1.0) > CLIP))
    np.testing.assert_allclose(loss, want["total"], **TOL)
    for name, w in want.items():
        np.testing.assert_allclose(getattr(m, name), w, **TOL, err_msg=name)


# ------------------------------------------------------------------- decoupled objective


@pytest.mark.parametrize("max_weight", [1.0, 1.5])
def test_decoupled_loss_matches_numpy(max_weight):
    """``-mean(min(c, pi_prox/mu) * min(r A, clip(r, 1 +- eps) A))``, ``r = pi/pi_prox``
    (Hilton et al. 2021), against float64 NumPy; the data truncate some weights, leave
    others, and clip ratios on both sides."""
    params, batch, prox, mu = _case(seed=1)
    weight = staleness.decoupled_weight(prox, mu, max_weight)
    corrected = dataclasses.replace(batch, prox_log_prob=prox, sample_weight=weight)
    loss, m = _ppo_loss(params, corrected)

    log_pa, np_mu, _, _ = _np_terms(params, batch)
    np.testing.assert_allclose(mu, np_mu, **TOL)
    rho = np.exp(prox.astype(np.float64) - np_mu)
    w = np.minimum(max_weight, rho)
    assert (rho > max_weight).any() and (rho < max_weight).any()
    np.testing.assert_allclose(weight, w, **TOL)
    r = np.exp(log_pa - prox)
    assert (r > 1 + CLIP).any() and (r < 1 - CLIP).any()
    adv = np.asarray(batch.advantages, np.float64)
    policy = -np.mean(w * np.minimum(r * adv, np.clip(r, 1 - CLIP, 1 + CLIP) * adv))
    _assert_metrics(loss, m, policy, params, batch, r)


def test_decoupled_with_behaviour_as_proximal_is_ppo_exactly():
    """``pi_prox = mu``: weight exactly 1, ratio against the same log-probabilities; loss,
    metrics and gradients bit for bit standard PPO's."""
    params, batch, _, mu = _case(seed=2)
    weight = staleness.decoupled_weight(mu, mu, 1.0)
    assert np.all(np.asarray(weight) == 1.0)
    corrected = dataclasses.replace(batch, prox_log_prob=mu, sample_weight=weight)
    grad = jax.jit(jax.value_and_grad(_ppo_loss, has_aux=True))
    (loss, m), g = grad(params, batch)
    (loss_c, m_c), g_c = grad(params, corrected)
    for a, b in zip(jax.tree.leaves((loss, m, g)), jax.tree.leaves((loss_c, m_c, g_c))):
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------------------- filter


def test_divergence_mask_drops_exactly_the_samples_over_the_threshold():
    """``|pi_prox/mu - 1| > threshold`` masked (0), the others kept (1); the loss's policy
    term is the mean of the kept samples' surrogates over all samples."""
    params, batch, prox, mu = _case(seed=3)
    threshold = 0.3
    mask = np.asarray(staleness.divergence_mask(prox, mu, threshold))
    over = np.abs(np.exp(prox.astype(np.float64) - mu) - 1.0) > threshold
    assert over.any() and (~over).any()
    np.testing.assert_array_equal(mask, np.where(over, 0.0, 1.0))
    loss, m = _ppo_loss(params, dataclasses.replace(batch, sample_weight=mask))

    log_pa, mu_log_pa, _, _ = _np_terms(params, batch)
    ratio = np.exp(log_pa - mu_log_pa)
    adv = np.asarray(batch.advantages, np.float64)
    surrogate = np.minimum(ratio * adv, np.clip(ratio, 1 - CLIP, 1 + CLIP) * adv)
    policy = -np.sum(np.where(over, 0.0, surrogate)) / surrogate.size
    _assert_metrics(loss, m, policy, params, batch, ratio)


# ---------------------------------------------------------------------- learning rate


def test_lag_scaled_learning_rate_is_the_base_rate_at_lag_0_and_falls_with_the_lag():
    rates = [staleness.lag_scaled_learning_rate(3e-4, s) for s in range(9)]
    assert rates[0] == 3e-4
    assert all(a > b for a, b in zip(rates, rates[1:]))
    np.testing.assert_allclose(rates, [3e-4 / (1 + s) for s in range(9)], rtol=1e-12)
    with pytest.raises(ValueError, match="policy_lag"):
        staleness.lag_scaled_learning_rate(3e-4, -1)


def _hparams(**fields):
    from configs import base
    from runtime.config.fields import hparams_of

    config = base.get_config()
    config.update(fields)
    return hparams_of(config)


def test_optimizer_for_scales_the_rate_by_the_lag_only_under_lr_scale():
    """Adam's first step is ``lr * g / (|g| + eps)``: its size follows the rate exactly, so
    lag 3 under ``lr_scale`` moves a quarter as far; without the correction the lag changes
    nothing."""
    params = {"w": jnp.asarray([0.3, -2.0, 0.05])}
    grads = {"w": jnp.asarray([0.1, -0.2, 0.4])}

    def first_step(hp, lag):
        opt = optimizer_for(hp, 10, lag)
        return np.asarray(opt.update(grads, opt.init(params), params)[0]["w"])

    scaled = _hparams(staleness_correction="lr_scale", anneal_lr=False)
    np.testing.assert_array_equal(first_step(scaled, 0), first_step(_hparams(anneal_lr=False), 0))
    np.testing.assert_allclose(first_step(scaled, 3), first_step(scaled, 0) / 4, rtol=1e-6)
    plain = _hparams(anneal_lr=False)
    np.testing.assert_array_equal(first_step(plain, 3), first_step(plain, 0))


# ------------------------------------------------------------------ PPO's prepare, update


def _ppo(correction="none", **kw):
    fields = dict(gamma=0.9, gae_lambda=0.8, clip_eps=CLIP, clip_vloss=False, norm_adv=True,
                  vf_coef=0.5, ent_coef=0.01, clip_rho=1.0, staleness_correction=correction,
                  decoupled_max_weight=1.0, filter_threshold=0.2)
    return PPO(**(fields | kw))


def _rollout(net, params, stale: float = 0.0, seed=0):
    """A Trajectory ``[T, B]`` whose behaviour logits are those of ``params`` (computed on the
    flat batch, as the proximal pass computes them) plus ``stale`` times noise."""
    rng = np.random.default_rng(seed)
    obs = jnp.asarray(rng.normal(size=(T, B, OBS)), jnp.float32)
    logits = net.apply(params, obs.reshape(T * B, OBS))[0].logits.reshape(T, B, A)
    terminated = np.zeros((T, B), bool)
    truncated = np.zeros((T, B), bool)
    terminated[1, 0], truncated[3, 2] = True, True
    return Trajectory(
        obs=obs, action=jnp.asarray(rng.integers(0, A, size=(T, B)), jnp.int32),
        reward=jnp.asarray(rng.normal(size=(T, B)), jnp.float32),
        terminated=jnp.asarray(terminated), truncated=jnp.asarray(truncated),
        behaviour_dist_params=logits + stale * jnp.asarray(rng.normal(size=logits.shape),
                                                           jnp.float32),
        behaviour_value=None, bootstrap_obs=jnp.asarray(rng.normal(size=(B, OBS)), jnp.float32))


def _net():
    net = MLPActorCritic(num_actions=A, hidden=(8,))
    return net, net.init(jax.random.key(0), jnp.zeros((1, OBS)))


def test_prepare_at_lag_0_gives_gae_batches_and_on_policy_statistics():
    """Behaviour = proximal policy (lag 0): every correction's batch has GAE's targets and
    values; ``decoupled`` and ``filter`` keep GAE's advantages, weights 1, nothing dropped,
    ``prox_kl`` 0."""
    net, params = _net()
    traj = _rollout(net, params)
    plain = _ppo().prepare(params, net.apply, traj)
    for correction in staleness.PROXIMAL:
        batch = _ppo(correction).prepare(params, net.apply, traj)
        np.testing.assert_allclose(batch.old_value, plain.old_value, **TOL)
        np.testing.assert_allclose(batch.targets, plain.targets, **TOL)
        np.testing.assert_array_equal(batch.stale_stats["prox_kl"], 0.0)
        if correction != staleness.VTRACE:
            np.testing.assert_allclose(batch.advantages, plain.advantages, **TOL)
            np.testing.assert_array_equal(batch.sample_weight, 1.0)
    decoupled = _ppo("decoupled").prepare(params, net.apply, traj)
    np.testing.assert_array_equal(decoupled.stale_stats["truncated_frac"], 0.0)
    # The rollout's own values (Anakin, lag 0) are used as plain PPO uses them: bit for bit.
    carried = traj.replace(behaviour_value=plain.old_value + 0.5)
    want = _ppo().prepare(params, net.apply, carried)
    for correction in staleness.PROXIMAL:
        batch = _ppo(correction).prepare(params, net.apply, carried)
        np.testing.assert_array_equal(batch.old_value, want.old_value)
        if correction != staleness.VTRACE:
            np.testing.assert_array_equal(batch.advantages, want.advantages)


def _update(algorithm, net, params, traj, microbatches=1):
    opt = optax.sgd(0.1)
    update = jax.jit(learner.make_update_fn(algorithm, net.apply, opt, num_epochs=2,
                                            num_minibatches=2, minibatch="samples",
                                            microbatches=microbatches))
    state = LearnerState(params=params, opt_state=opt.init(params), update=jnp.int32(0))
    return update(state, traj, jax.random.key(1))


@pytest.mark.parametrize("correction, keys", [
    ("decoupled", {"prox_kl", "weight_mean", "truncated_frac"}),
    ("vtrace", {"prox_kl"}),
    ("filter", {"prox_kl", "filtered_frac"}),
])
def test_update_with_each_correction(correction, keys):
    """At lag 0 ``decoupled`` and ``filter`` update as plain PPO does; on stale data they
    differ from it and report what they did (``stale/<key>``); micro-batches give the
    one-pass update."""
    net, params = _net()
    fresh, stale = _rollout(net, params), _rollout(net, params, stale=1.0)
    algorithm = _ppo(correction)
    plain_state, plain_m = _update(_ppo(), net, params, fresh)
    state, m = _update(algorithm, net, params, fresh)
    assert set(m.staleness) == keys and plain_m.staleness is None
    assert set(m.scalars()) == set(plain_m.scalars()) | {f"stale/{k}" for k in keys}
    if correction != "vtrace":
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, **TOL),
                     state.params, plain_state.params)
    state, m = _update(algorithm, net, params, stale)
    plain_state, _ = _update(_ppo(), net, params, stale)
    assert float(m.staleness["prox_kl"]) > 0.05
    diff = jax.tree.map(lambda a, b: float(jnp.max(jnp.abs(a - b))), state.params,
                        plain_state.params)
    assert max(jax.tree.leaves(diff)) > 1e-4
    if correction == "filter":
        assert 0.0 < float(m.staleness["filtered_frac"]) < 1.0
    if correction == "decoupled":
        assert 0.0 < float(m.staleness["truncated_frac"]) < 1.0
        assert float(m.staleness["weight_mean"]) < 1.0
    micro_state, micro_m = _update(algorithm, net, params, stale, microbatches=2)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, **TOL), micro_state.params,
                 state.params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, **TOL), micro_m, m)


def test_recurrent_proximal_pass_reuses_the_unroll_of_the_values():
    """A recurrent agent: the proximal pass's values are those of the plain unroll, bit for
    bit (one unroll of each sequence from its stored state), and its log-probabilities
    those of the unroll's distribution."""
    spec = EnvSpec(obs_shape=(OBS,), obs_dtype="float32", num_actions=A)
    net = make_network("mlp", spec, recurrent="gru", hidden_size=8)
    from rlcore.networks import init_params, initial_core, unroll_network

    params = init_params(net, jax.random.key(0), spec)
    traj = _rollout(MLPActorCritic(num_actions=A, hidden=(8,)),
                    _net()[1], stale=0.5).replace(core_state=initial_core(net, B),
                                                  first=jnp.zeros((T, B), bool).at[0].set(True))
    plain = _ppo().prepare(params, net.apply, traj)
    batch = _ppo("decoupled").prepare(params, net.apply, traj)
    np.testing.assert_array_equal(batch.old_value, plain.old_value)
    np.testing.assert_array_equal(batch.advantages, plain.advantages)
    dist, _ = unroll_network(net.apply, params, traj.obs, traj.core_state, traj.first)
    np.testing.assert_allclose(batch.prox_log_prob, dist.log_prob(traj.action), **TOL)
