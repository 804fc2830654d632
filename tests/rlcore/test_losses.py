"""PPO and IMPALA losses: hand-worked values, a NumPy reference, and gradient checks."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads
from scipy import stats

from rlcore import losses, returns
from rlcore.distributions import Categorical, DiagGaussian
from rlcore.networks import MLPActorCritic
from rlcore.types import Trajectory

pytestmark = pytest.mark.smoke  # the newest stack's subset (make test-newest)

# ----------------------------------------------------------------------------- PPO by hand
#
# T = 1, b = 2, A = 2, one scalar parameter w = 1. The network ignores obs:
#   logits = w * [[0, ln 3], [0, 0]]   -> pi(.|env0) = [1/4, 3/4], pi(.|env1) = [1/2, 1/2]
#   value  = w * [1.0, -0.5]
# Behaviour logits [[0, 0], [0, ln(5/4)]] -> mu(.|env0) = [1/2, 1/2], mu(.|env1) = [4/9, 5/9].
# Both envs took action 1, so the ratios are
#   env0: (3/4) / (1/2) = 1.5   (outside 1 +- 0.2)
#   env1: (1/2) / (5/9) = 0.9   (inside)
# clip_eps = 0.2, vf_coef = 0.5, ent_coef = 0.01.
# Advantages [2, -1]; targets [3, -1]; old values [1.5, -0.2].
#
# Policy term, raw advantages:
#   env0: min(1.5 * 2, 1.2 * 2) = 2.4;  env1: min(0.9 * -1, 0.9 * -1) = -0.9
#   policy = -(2.4 - 0.9) / 2 = -0.75
# Policy term, normalised advantages: mean 0.5, std sqrt((1.5^2 + 1.5^2) / 2) = 1.5 -> [1, -1]
#   env0: min(1.5, 1.2) = 1.2;  env1: min(-0.9, -0.9) = -0.9;  policy = -(1.2 - 0.9) / 2 = -0.15
# Value term, unclipped: errors (1 - 3)^2 = 4, (-0.5 + 1)^2 = 0.25 -> 0.5 * 4.25 / 2 = 1.0625
# Value term, clipped (PPO2): V clipped to old +- 0.2:
#   env0: 1.5 + clip(-0.5) = 1.3, (1.3 - 3)^2 = 2.89, max(4, 2.89) = 4
#   env1: -0.2 + clip(-0.3) = -0.4, (-0.4 + 1)^2 = 0.36, max(0.25, 0.36) = 0.36
#   -> 0.5 * 4.36 / 2 = 1.09
# Entropy: env0 -(1/4 ln 1/4 + 3/4 ln 3/4) = 0.346574 + 0.215762 = 0.562335; env1 ln 2 = 0.693147
#   mean 0.627741
# Total = policy + 0.5 * value - 0.01 * 0.627741:
#   raw,  unclipped: -0.75 + 0.53125 - 0.00627741 = -0.22502741
#   raw,  clipped:   -0.75 + 0.545   - 0.00627741 = -0.21127741
#   norm, unclipped: -0.15 + 0.53125 - 0.00627741 =  0.37497259
#   norm, clipped:   -0.15 + 0.545   - 0.00627741 =  0.38872259
# approx_kl = mean((r - 1) - ln r) = ((0.5 - 0.405465) + (-0.1 + 0.105361)) / 2 = 0.049948
# clip_frac = mean(|r - 1| > 0.2) = mean(1, 0) = 0.5

_LOGITS = jnp.array([[0.0, math.log(3.0)], [0.0, 0.0]])
_VALUES = jnp.array([1.0, -0.5])


def _hand_apply(params, obs):
    del obs
    return Categorical(params["w"] * _LOGITS), params["w"] * _VALUES


def _hand_batch():
    return losses.PPOBatch(
        obs=jnp.zeros((1, 2, 1)),
        action=jnp.ones((1, 2), jnp.int32),
        behaviour_dist_params=jnp.array([[[0.0, 0.0], [0.0, math.log(5.0 / 4.0)]]]),
        old_value=jnp.array([[1.5, -0.2]]),
        advantages=jnp.array([[2.0, -1.0]]),
        targets=jnp.array([[3.0, -1.0]]),
    )


@pytest.mark.parametrize(
    "norm_adv,clip_vloss,policy,value,total",
    [
        (False, False, -0.75, 1.0625, -0.22502741),
        (False, True, -0.75, 1.09, -0.21127741),
        (True, False, -0.15, 1.0625, 0.37497259),
        (True, True, -0.15, 1.09, 0.38872259),
    ],
)
def test_ppo_loss_hand_worked(norm_adv, clip_vloss, policy, value, total):
    loss, m = losses.ppo_loss(
        {"w": jnp.float32(1.0)}, _hand_apply, _hand_batch(), clip_eps=0.2, vf_coef=0.5,
        ent_coef=0.01, clip_vloss=clip_vloss, norm_adv=norm_adv,
    )
    tol = dict(atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(loss, total, **tol)
    np.testing.assert_allclose(m.total, total, **tol)
    np.testing.assert_allclose(m.policy, policy, **tol)
    np.testing.assert_allclose(m.value, value, **tol)
    np.testing.assert_allclose(m.entropy, 0.627741, **tol)
    np.testing.assert_allclose(m.approx_kl, 0.049948, **tol)
    np.testing.assert_allclose(m.clip_frac, 0.5, **tol)


def test_ppo_loss_hand_worked_gradient():
    """d total / dw with raw advantages and no value clipping.

    Policy: env0 is clipped (constant 2.4), env1's logits are 0 * w: no gradient.
    Value: 0.5 * mean((w v - G)^2)' = 0.5 * ((1 - 3) * 1 + (-0.5 + 1) * -0.5) = -1.125,
      times vf_coef 0.5 -> -0.5625.
    Entropy: dH/dz_i = -p_i (ln p_i + H); env0 z = [0, w ln 3], so
      dH0/dw = -0.75 (ln 0.75 + 0.562335) ln 3 = -0.75 * 0.274653 * 1.098612 = -0.226302;
      env1 has none; mean -0.113151, times -ent_coef -> +0.00113151.
    Total: -0.5625 + 0.00113151 = -0.56136849.
    """
    grad = jax.grad(
        lambda p: losses.ppo_loss(p, _hand_apply, _hand_batch(), clip_eps=0.2, vf_coef=0.5,
                                  ent_coef=0.01, clip_vloss=False, norm_adv=False)[0]
    )({"w": jnp.float32(1.0)})
    np.testing.assert_allclose(grad["w"], -0.56136849, atol=1e-5, rtol=1e-5)


def test_ppo_loss_rejects_mismatched_shapes():
    batch = _hand_batch()
    bad = batch.replace(advantages=jnp.zeros((1, 3)))
    with pytest.raises(AssertionError):
        losses.ppo_loss({"w": jnp.float32(1.0)}, _hand_apply, bad, clip_eps=0.2, vf_coef=0.5,
                        ent_coef=0.01)


# ------------------------------------------------------------------- IMPALA against NumPy

_T, _B, _OBS, _A = 4, 3, 2, 3


def _linear_apply(params, obs):
    """A linear policy: categorical logits ``obs @ wp``, or (with ``log_std`` in
    ``params``) a Gaussian of mean ``obs @ wp`` and that state-independent log-std."""
    out = obs @ params["wp"]
    if "log_std" in params:
        return DiagGaussian(out, jnp.broadcast_to(params["log_std"], out.shape)), obs @ params["wv"]
    return Categorical(out), obs @ params["wv"]


def _impala_case(seed=0, gaussian=False):
    """Params and a Trajectory ``[T, B]``; ``gaussian``: ``_A``-dimensional box actions,
    behaviour means and log-stds near the policy's."""
    rng = np.random.default_rng(seed)
    params = {
        "wp": rng.normal(size=(_OBS, _A)).astype(np.float32),
        "wv": rng.normal(size=(_OBS,)).astype(np.float32),
    }
    if gaussian:
        params["log_std"] = rng.normal(scale=0.3, size=(_A,)).astype(np.float32)
    terminated = np.zeros((_T, _B), bool)
    truncated = np.zeros((_T, _B), bool)
    terminated[1, 0] = True
    truncated[2, 1] = True
    truncated[_T - 1, 2] = True
    obs = rng.normal(size=(_T, _B, _OBS)).astype(np.float32)
    if gaussian:
        mu_mean = obs @ params["wp"] + rng.normal(scale=0.3, size=(_T, _B, _A))
        mu_log_std = params["log_std"] + rng.normal(scale=0.2, size=(_T, _B, _A))
        action = (mu_mean + np.exp(mu_log_std) * rng.normal(size=(_T, _B, _A)))
        behaviour = np.concatenate([mu_mean, mu_log_std], -1)
    else:
        action = rng.integers(0, _A, size=(_T, _B))
        behaviour = rng.normal(size=(_T, _B, _A))
    traj = Trajectory(
        obs=obs,
        action=action.astype(np.float32 if gaussian else np.int32),
        reward=rng.normal(size=(_T, _B)).astype(np.float32),
        terminated=terminated,
        truncated=truncated,
        behaviour_dist_params=behaviour.astype(np.float32),
        behaviour_value=np.zeros((_T, _B), np.float32),
        bootstrap_obs=rng.normal(size=(_B, _OBS)).astype(np.float32),
    )
    return params, traj


def _np_log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def _np_log_probs(params, out, traj):
    """float64 ``(log pi(a), log mu(a), H(pi))`` ``[T, B]`` of the linear policy with head
    output ``out [T, B, A]``: categorical (softmax), or with ``params["log_std"]`` a diagonal
    Gaussian, from scipy's normal log-density and entropy."""
    a = np.asarray(traj.action)
    mu = np.asarray(traj.behaviour_dist_params, np.float64)
    if "log_std" not in params:
        log_p, mu_log_p = _np_log_softmax(out), _np_log_softmax(mu)
        take = lambda lp: np.take_along_axis(lp, a[..., None], -1)[..., 0]
        return take(log_p), take(mu_log_p), -(np.exp(log_p) * log_p).sum(-1)
    std = np.exp(np.asarray(params["log_std"], np.float64))
    mu_mean, mu_log_std = np.split(mu, 2, axis=-1)
    log_pa = stats.norm.logpdf(a, out, std).sum(-1)
    mu_log_pa = stats.norm.logpdf(a, mu_mean, np.exp(mu_log_std)).sum(-1)
    ent = np.broadcast_to(stats.norm.entropy(scale=std).sum(), log_pa.shape)
    return log_pa, mu_log_pa, ent


def _np_impala(params, traj, gamma, vf_coef, ent_coef, lam, clip_rho, clip_pg_rho):
    """IMPALA loss in float64 NumPy; V-trace as the paper's n-step sum (Espeholt et al. eq. 1).

    ``vs_s = V(x_s) + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} gamma_i c_i) rho_t delta_t``.
    """
    wp, wv = (np.asarray(params[k], np.float64) for k in ("wp", "wv"))
    obs = np.asarray(traj.obs, np.float64)
    boot_v = np.asarray(traj.bootstrap_obs, np.float64) @ wv
    value = obs @ wv
    log_pa, mu_log_pa, ent = _np_log_probs(params, obs @ wp, traj)
    log_rhos = log_pa - mu_log_pa
    ratio = np.exp(log_rhos)

    vs = np.zeros((_T, _B))
    pg = np.zeros((_T, _B))
    for b in range(_B):
        disc, v_next, lams = [], [], []
        for t in range(_T):
            term, trunc = traj.terminated[t, b], traj.truncated[t, b]
            disc.append(0.0 if term else gamma)
            cut = trunc and not term
            v_next.append(value[t, b] if cut else (value[t + 1, b] if t + 1 < _T else boot_v[b]))
            lams.append(0.0 if cut else lam)
        rho = np.minimum(clip_rho, ratio[:, b])
        c = np.array(lams) * np.minimum(1.0, ratio[:, b])
        delta = np.array([reward_t + d * vn - v for reward_t, d, vn, v in
                          zip(traj.reward[:, b], disc, v_next, value[:, b], strict=True)])
        for s in range(_T):
            acc, weight = 0.0, 1.0
            for t in range(s, _T):
                acc += weight * rho[t] * delta[t]
                weight *= disc[t] * c[t]
            vs[s, b] = value[s, b] + acc
        for s in range(_T):
            q = vs[s + 1, b] if (s + 1 < _T and lams[s] > 0) else v_next[s]
            pg[s, b] = min(clip_pg_rho, ratio[s, b]) * (
                traj.reward[s, b] + disc[s] * q - value[s, b])

    policy = -np.mean(pg * log_pa)
    value_loss = 0.5 * np.mean((vs - value) ** 2)
    ent = np.mean(ent)
    return dict(
        total=policy + vf_coef * value_loss - ent_coef * ent,
        policy=policy,
        value=value_loss,
        entropy=ent,
        approx_kl=np.mean((ratio - 1.0) - log_rhos),
        clip_frac=np.mean(log_rhos > np.log(clip_rho) + losses.CLIP_TOL),
    )


@pytest.mark.parametrize("lam,clip_rho,clip_pg_rho,gaussian", [
    (1.0, 1.0, 1.0, False), (0.8, 1.5, 0.7, False), (0.8, 1.5, 0.7, True)])
def test_impala_loss_matches_numpy(lam, clip_rho, clip_pg_rho, gaussian):
    params, traj = _impala_case(gaussian=gaussian)
    hp = dict(vf_coef=0.5, ent_coef=0.01, lambda_=lam, clip_rho=clip_rho,
              clip_pg_rho=clip_pg_rho)
    loss, m = losses.impala_loss(params, _linear_apply, traj, discount=0.9, **hp)
    want = _np_impala(params, traj, 0.9, 0.5, 0.01, lam, clip_rho, clip_pg_rho)
    assert 0.0 < want["clip_frac"] < 1.0
    # The loss is summed over the T x B elements (Cleanba's scale); the terms are means.
    want["total"] = want["total"] * _T * _B
    np.testing.assert_allclose(loss, want["total"], atol=1e-4, rtol=1e-5)
    for name, w in want.items():
        np.testing.assert_allclose(getattr(m, name), w, atol=1e-5, rtol=1e-5, err_msg=name)


# ---------------------------------------------------------------------- gradient checks

_GT, _GB, _GOBS, _GA = 3, 4, 5, 3


def _mlp():
    net = MLPActorCritic(num_actions=_GA, hidden=(8,))
    params = net.init(jax.random.key(0), jnp.zeros((1, _GOBS)))
    # Bigger heads than the 0.01 init so every term has a gradient of a useful size.
    params = jax.tree.map(lambda x: x * 30.0 if x.shape == (8, _GA) else x, params)
    return net, jax.tree.map(lambda x: jnp.asarray(x, jnp.float64), params)


@pytest.mark.parametrize("norm_adv,clip_vloss", [(False, False), (True, True)])
def test_ppo_loss_gradients(norm_adv, clip_vloss):
    """Behaviour logits equal the current ones (ratio 1, well inside the clip) and old values
    are 0.03 from the current ones, so the loss is smooth around these params."""
    with jax.enable_x64(True):
        net, params = _mlp()
        rng = np.random.default_rng(0)
        obs = jnp.asarray(rng.normal(size=(_GT, _GB, _GOBS)))
        dist, value = net.apply(params, obs.reshape(_GT * _GB, _GOBS))
        batch = losses.PPOBatch(
            obs=obs,
            action=jnp.asarray(rng.integers(0, _GA, size=(_GT, _GB)), jnp.int32),
            behaviour_dist_params=dist.params().reshape(_GT, _GB, _GA),
            old_value=value.reshape(_GT, _GB) - 0.03,
            advantages=jnp.asarray(rng.normal(size=(_GT, _GB))),
            targets=jnp.asarray(rng.normal(size=(_GT, _GB))),
        )
        assert batch.advantages.dtype == jnp.float64

        @jax.jit
        def f(p):
            return losses.ppo_loss(p, net.apply, batch, clip_eps=0.2, vf_coef=0.5,
                                   ent_coef=0.01, clip_vloss=clip_vloss, norm_adv=norm_adv)[0]

        check_grads(f, (params,), order=1, modes=["rev"], eps=1e-5, atol=1e-6, rtol=1e-6)


def test_impala_loss_gradients():
    """``impala_loss`` stops gradients through V-trace's targets and advantages; it and its
    gradient equal those of the same loss with those frozen at the current params, written
    with sums over time and batch (Cleanba's scale), whose gradient is checked against
    finite differences."""
    with jax.enable_x64(True):
        net, params = _mlp()
        rng = np.random.default_rng(1)
        terminated = np.zeros((_GT, _GB), bool)
        truncated = np.zeros((_GT, _GB), bool)
        terminated[1, 0], truncated[0, 1] = True, True
        traj = Trajectory(
            obs=jnp.asarray(rng.normal(size=(_GT, _GB, _GOBS))),
            action=jnp.asarray(rng.integers(0, _GA, size=(_GT, _GB)), jnp.int32),
            reward=jnp.asarray(rng.normal(size=(_GT, _GB))),
            terminated=jnp.asarray(terminated),
            truncated=jnp.asarray(truncated),
            behaviour_dist_params=jnp.asarray(rng.normal(size=(_GT, _GB, _GA))),
            behaviour_value=jnp.zeros((_GT, _GB)),
            bootstrap_obs=jnp.asarray(rng.normal(size=(_GB, _GOBS))),
        )
        hp = dict(discount=0.9, vf_coef=0.5, ent_coef=0.01, lambda_=0.9, clip_rho=1.0,
                  clip_pg_rho=1.0)

        @jax.jit
        def loss(p):
            return losses.impala_loss(p, net.apply, traj, **hp)[0]

        # The frozen quantities, from the NumPy-checked forward pass of impala_loss itself.
        obs_flat = traj.obs.reshape(_GT * _GB, _GOBS)
        dist0, value0 = net.apply(params, obs_flat)
        _, boot0 = net.apply(params, traj.bootstrap_obs)
        log_p0 = jax.nn.log_softmax(dist0.logits.reshape(_GT, _GB, _GA))
        mu = jax.nn.log_softmax(traj.behaviour_dist_params)
        log_rhos = (jnp.take_along_axis(log_p0, traj.action[..., None], -1)
                    - jnp.take_along_axis(mu, traj.action[..., None], -1))[..., 0]
        value0 = value0.reshape(_GT, _GB)
        inputs = returns.step_inputs(traj.reward, traj.terminated, traj.truncated, value0,
                                     boot0, 0.9, 0.9)
        vt = returns.vtrace(value0, inputs.value_t, traj.reward, inputs.discount_t, log_rhos,
                            inputs.lambda_, cut=inputs.cut)

        @jax.jit
        def frozen(p):
            dist, value = net.apply(p, obs_flat)
            log_p = jax.nn.log_softmax(dist.logits.reshape(_GT, _GB, _GA))
            log_pa = jnp.take_along_axis(log_p, traj.action[..., None], -1)[..., 0]
            ent = -jnp.sum(jnp.exp(log_p) * log_p, -1)
            return (-jnp.sum(vt.pg_advantages * log_pa)  # sums over time and batch
                    + 0.5 * 0.5 * jnp.sum(jnp.square(vt.targets - value.reshape(_GT, _GB)))
                    - 0.01 * jnp.sum(ent))

        np.testing.assert_allclose(loss(params), frozen(params), rtol=1e-6, atol=1e-8)
        jax.tree.map(
            lambda g, w: np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-9),
            jax.grad(loss)(params), jax.grad(frozen)(params),
        )
        check_grads(frozen, (params,), order=1, modes=["rev"], eps=1e-5, atol=1e-6, rtol=1e-6)


def test_impala_clip_frac_ignores_on_policy_roundoff():
    """rho = 1 up to float roundoff (on-policy data) is not clipped; rho = 1.01 is."""
    t, b, a = 3, 2, 4
    logits = jnp.asarray(np.random.default_rng(0).normal(size=(t, b, a)), jnp.float32)
    traj = Trajectory(
        obs=jnp.zeros((t, b, 1)), action=jnp.zeros((t, b), jnp.int32),
        reward=jnp.zeros((t, b)), terminated=jnp.zeros((t, b), bool),
        truncated=jnp.zeros((t, b), bool), behaviour_dist_params=logits, behaviour_value=None,
        bootstrap_obs=jnp.zeros((b, 1)))

    def clip_frac(shift):
        # [T + 1, b] observations: the rollout's and the bootstrap's (same logits as the last).
        rows = jnp.concatenate([logits, logits[-1:]]).reshape((t + 1) * b, a)
        apply = lambda p, obs: (Categorical(rows.at[:, 0].add(shift)), jnp.zeros((t + 1) * b))
        _, m = losses.impala_loss({}, apply, traj, discount=0.9, vf_coef=0.5, ent_coef=0.0)
        return float(m.clip_frac)

    assert clip_frac(1e-6) == 0.0
    assert clip_frac(-1e-6) == 0.0
    assert clip_frac(0.05) == 1.0


# ------------------------------------------------------------------ PPO with a Gaussian


def test_ppo_loss_gaussian_matches_numpy():
    """PPO's clipped surrogate, value and entropy terms with a diagonal Gaussian policy
    against float64 NumPy/scipy (normal log-densities and entropies): ratios spread around
    the clip, both sides of it."""
    params, traj = _impala_case(seed=3, gaussian=True)
    rng = np.random.default_rng(4)
    adv = rng.normal(size=(_T, _B)).astype(np.float32)
    targets = rng.normal(size=(_T, _B)).astype(np.float32)
    old_value = rng.normal(size=(_T, _B)).astype(np.float32)
    batch = losses.PPOBatch(obs=traj.obs, action=traj.action,
                            behaviour_dist_params=traj.behaviour_dist_params, old_value=old_value,
                            advantages=adv, targets=targets)
    loss, m = losses.ppo_loss(params, _linear_apply, batch, clip_eps=0.2, vf_coef=0.5,
                              ent_coef=0.01, clip_vloss=False, norm_adv=False)
    obs = np.asarray(traj.obs, np.float64)
    log_pa, mu_log_pa, ent = _np_log_probs(params, obs @ np.asarray(params["wp"], np.float64),
                                           traj)
    ratio = np.exp(log_pa - mu_log_pa)
    assert 0.0 < np.mean(np.abs(ratio - 1.0) > 0.2) < 1.0
    policy = -np.mean(np.minimum(ratio * adv, np.clip(ratio, 0.8, 1.2) * adv))
    value = 0.5 * np.mean((obs @ np.asarray(params["wv"], np.float64) - targets) ** 2)
    want = dict(policy=policy, value=value, entropy=np.mean(ent),
                total=policy + 0.5 * value - 0.01 * np.mean(ent),
                approx_kl=np.mean((ratio - 1.0) - np.log(ratio)),
                clip_frac=np.mean(np.abs(ratio - 1.0) > 0.2))
    np.testing.assert_allclose(loss, want["total"], atol=1e-5, rtol=1e-5)
    for name, w in want.items():
        np.testing.assert_allclose(getattr(m, name), w, atol=1e-5, rtol=1e-5, err_msg=name)
    # The log-std is learned through the surrogate and the entropy bonus.
    grad = jax.grad(lambda p: losses.ppo_loss(p, _linear_apply, batch, clip_eps=0.2,
                                              vf_coef=0.5, ent_coef=0.01)[0])(params)
    assert np.all(np.asarray(grad["log_std"]) != 0.0)
