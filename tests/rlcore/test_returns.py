"""GAE and V-trace against plain NumPy loops written from the papers' definitions."""

import numpy as np
import pytest

from rlcore import returns

pytestmark = pytest.mark.smoke  # the newest stack's subset (make test-newest)

T, B = 7, 5
GAMMA = 0.9
ATOL = RTOL = 1e-5


def _rollout(seed=0):
    """Random ``[T, B]`` rollout with terminations and truncations inside the sequence.

    Fixed flags on top of random ones make sure every case occurs: a truncation without a
    termination mid-sequence and at the last step, a termination at the last step, and a
    step that is both terminated and truncated.
    """
    rng = np.random.default_rng(seed)
    reward = rng.normal(size=(T, B)).astype(np.float32)
    value_tm1 = rng.normal(size=(T, B)).astype(np.float32)
    bootstrap = rng.normal(size=(B,)).astype(np.float32)
    terminated = rng.random((T, B)) < 0.15
    truncated = rng.random((T, B)) < 0.15
    terminated[:, 0] = False
    truncated[:, 0] = False  # env 0: one uninterrupted episode
    terminated[2, 1], truncated[2, 1] = False, True  # truncation mid-sequence
    terminated[4, 1], truncated[4, 1] = True, False  # termination mid-sequence
    terminated[T - 1, 2], truncated[T - 1, 2] = False, True  # truncation at the last step
    terminated[T - 1, 3], truncated[T - 1, 3] = True, False  # termination at the last step
    terminated[3, 4], truncated[3, 4] = True, True  # both at once
    return reward, terminated, truncated, value_tm1, bootstrap


def _final_values(truncated, seed=5):
    """``[T, B]`` values of final observations where truncated, 0 elsewhere."""
    v = np.random.default_rng(seed).normal(size=(T, B)).astype(np.float32) + 3.0
    return np.where(truncated, v, 0.0).astype(np.float32)


def _np_step_inputs(terminated, truncated, value_tm1, bootstrap, gamma, lam, final=None):
    """The rule documented in ``returns.py``, element by element (``final``: the values of
    the final observations, or None: the self bootstrap)."""
    discount = np.zeros((T, B))
    value_t = np.zeros((T, B))
    lambdas = np.zeros((T, B))
    for t in range(T):
        for b in range(B):
            discount[t, b] = 0.0 if terminated[t, b] else gamma
            if truncated[t, b] and not terminated[t, b]:
                # the final observation's value, or the cut state's own as its estimate
                value_t[t, b] = value_tm1[t, b] if final is None else final[t, b]
                lambdas[t, b] = 0.0  # trace cut: nothing from the next episode leaks back
            else:
                value_t[t, b] = value_tm1[t + 1, b] if t + 1 < T else bootstrap[b]
                lambdas[t, b] = lam
    return discount, value_t, lambdas


def _np_gae_double_loop(reward, discount, value_tm1, value_t, lambdas):
    """``A_t = sum_{k >= t} (prod_{j=t}^{k-1} discount_j lambda_j) delta_k`` as a double loop."""
    adv = np.zeros((T, B))
    for b in range(B):
        for t in range(T):
            weight, total = 1.0, 0.0
            for k in range(t, T):
                delta = reward[k, b] + discount[k, b] * value_t[k, b] - value_tm1[k, b]
                total += weight * delta
                weight *= discount[k, b] * lambdas[k, b]
            adv[t, b] = total
    return adv


def _np_gae_from_episodes(reward, terminated, truncated, value_tm1, bootstrap, gamma, lam,
                          final=None):
    """GAE straight from the raw rollout, without ``step_inputs``.

    Sums ``(gamma lambda)^(k - t) delta_k`` over the steps of the episode that step ``t``
    belongs to, stopping after the step that ends it. At a truncation the successor value is
    the final observation's (``final``) or, without it, the truncated state's own value; at
    a termination it is 0.
    """
    adv = np.zeros((T, B))
    for b in range(B):
        for t in range(T):
            total = 0.0
            for k in range(t, T):
                if terminated[k, b]:
                    next_v = 0.0
                elif truncated[k, b]:
                    next_v = value_tm1[k, b] if final is None else final[k, b]
                else:
                    next_v = value_tm1[k + 1, b] if k + 1 < T else bootstrap[b]
                total += (gamma * lam) ** (k - t) * (
                    reward[k, b] + gamma * next_v - value_tm1[k, b]
                )
                if terminated[k, b] or truncated[k, b]:
                    break
            adv[t, b] = total
    return adv


def _close(got, want):
    np.testing.assert_allclose(np.asarray(got), want, atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("final", [False, True], ids=["self", "final_obs"])
@pytest.mark.parametrize("lam", [0.0, 0.7, 1.0])
def test_step_inputs_follow_documented_rule(lam, final):
    reward, term, trunc, v, boot = _rollout()
    fv = _final_values(trunc) if final else None
    got = returns.step_inputs(reward, term, trunc, v, boot, GAMMA, lam, fv)
    want = _np_step_inputs(term, trunc, v, boot, GAMMA, lam, fv)
    for g, w in zip((got.discount_t, got.value_t, got.lambda_), want, strict=True):
        assert g.shape == (T, B)
        _close(g, w)


@pytest.mark.parametrize("final", [False, True], ids=["self", "final_obs"])
@pytest.mark.parametrize("lam", [0.0, 0.8, 0.95, 1.0])
def test_gae_matches_python_double_loop(lam, final):
    reward, term, trunc, v, boot = _rollout(seed=1)
    fv = _final_values(trunc) if final else None
    inputs = returns.step_inputs(reward, term, trunc, v, boot, GAMMA, lam, fv)
    adv, targets = returns.gae(reward, inputs.discount_t, v, inputs.value_t, inputs.lambda_)
    assert adv.shape == targets.shape == (T, B)
    discount, value_t, lambdas = _np_step_inputs(term, trunc, v, boot, GAMMA, lam, fv)
    want = _np_gae_double_loop(reward, discount, v, value_t, lambdas)
    _close(adv, want)
    _close(targets, want + v)
    # The same numbers from the raw rollout, episode by episode.
    _close(adv, _np_gae_from_episodes(reward, term, trunc, v, boot, GAMMA, lam, fv))
    if final:  # the target of the mid-sequence truncation of env 1: r + gamma V(final obs)
        _close(targets[2, 1], reward[2, 1] + GAMMA * fv[2, 1])


def test_gae_per_step_lambda_array():
    rng = np.random.default_rng(2)
    reward, term, trunc, v, boot = _rollout(seed=2)
    discount, value_t, _ = _np_step_inputs(term, trunc, v, boot, GAMMA, 1.0)
    lambdas = rng.uniform(0.0, 1.0, size=(T, B))
    args = [a.astype(np.float32) for a in (reward, discount, v, value_t, lambdas)]
    adv, _ = returns.gae(*args)
    _close(adv, _np_gae_double_loop(*args))


def test_gae_scalar_lambda_equals_broadcast_array():
    reward, term, trunc, v, boot = _rollout(seed=3)
    discount, value_t, _ = _np_step_inputs(term, trunc, v, boot, GAMMA, 1.0)
    discount, value_t = discount.astype(np.float32), value_t.astype(np.float32)
    adv_scalar, tgt_scalar = returns.gae(reward, discount, v, value_t, 0.6)
    adv_array, tgt_array = returns.gae(
        reward, discount, v, value_t, np.full((T, B), 0.6, np.float32)
    )
    _close(adv_scalar, np.asarray(adv_array))
    _close(tgt_scalar, np.asarray(tgt_array))
    _close(adv_scalar, _np_gae_double_loop(reward, discount, v, value_t, np.full((T, B), 0.6)))


def test_gae_lambda_zero_is_one_step_td():
    reward, term, trunc, v, boot = _rollout(seed=4)
    discount, value_t, _ = _np_step_inputs(term, trunc, v, boot, GAMMA, 0.0)
    adv, targets = returns.gae(reward, discount.astype(np.float32), v,
                               value_t.astype(np.float32), 0.0)
    _close(adv, reward + discount * value_t - v)
    _close(targets, reward + discount * value_t)


def test_gae_lambda_one_is_discounted_return_minus_value():
    """No truncations: ``A_t = sum_k gamma^(k-t) r_k (to the episode end or T) + bootstrap - V``."""
    reward, term, _, v, boot = _rollout(seed=5)
    trunc = np.zeros_like(term)
    inputs = returns.step_inputs(reward, term, trunc, v, boot, GAMMA, 1.0)
    adv, targets = returns.gae(reward, inputs.discount_t, v, inputs.value_t, 1.0)
    ret = np.zeros((T, B))
    for b in range(B):
        for t in range(T):
            g, scale = 0.0, 1.0
            for k in range(t, T):
                g += scale * reward[k, b]
                if term[k, b]:
                    scale = 0.0
                    break
                scale *= GAMMA
            ret[t, b] = g + scale * boot[b]  # scale is 0 if the episode ended before T
    _close(targets, ret)
    _close(adv, ret - v)


# ----------------------------------------------------------------------------- V-trace


def _np_vtrace(value_tm1, value_t, reward, discount, log_rhos, lambdas, clip_rho, clip_pg_rho,
               cut=None):
    """V-trace (Espeholt et al. 2018) as an explicit backward loop, in float64.

    Paper, Remark 1: ``v_s = V(x_s) + rho_s delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1}))``
    with ``delta_s = r_s + gamma_s V(x_{s+1}) - V(x_s)``, ``rho_s = min(rho_bar, pi/mu)``,
    ``c_s = lambda_s min(c_bar = 1, pi/mu)`` and ``v_T = V(x_T)`` (the bootstrap).
    ``V(x_{s+1})`` is ``value_t[s]`` (at a truncation, the estimate ``step_inputs`` puts
    there). Policy gradient advantage:
    ``min(pg_rho_bar, pi/mu) (r_s + gamma_s q_{s+1} - V(x_s))`` with ``q_{s+1} = v_{s+1}``,
    except at a truncation (``cut[s]``): there ``q_{s+1} = value_t[s]``, as vtrace's
    docstring says, because ``v_{s+1}`` belongs to the next episode.
    """
    value_tm1, value_t, reward, discount, log_rhos, lambdas = (
        np.asarray(a, np.float64)
        for a in (value_tm1, value_t, reward, discount, log_rhos, lambdas)
    )
    cut = np.zeros(reward.shape, bool) if cut is None else np.asarray(cut)
    n, m = reward.shape
    vs = np.zeros((n + 1, m))
    pg = np.zeros((n, m))
    for b in range(m):
        vs[n, b] = value_t[n - 1, b]
        for s in reversed(range(n)):
            ratio = np.exp(log_rhos[s, b])
            rho = min(clip_rho, ratio)
            c = lambdas[s, b] * min(1.0, ratio)
            delta = reward[s, b] + discount[s, b] * value_t[s, b] - value_tm1[s, b]
            vs[s, b] = (value_tm1[s, b] + rho * delta
                        + discount[s, b] * c * (vs[s + 1, b] - value_t[s, b]))
            q_next = value_t[s, b] if cut[s, b] else vs[s + 1, b]
            pg[s, b] = min(clip_pg_rho, ratio) * (
                reward[s, b] + discount[s, b] * q_next - value_tm1[s, b])
    return vs[:n], pg


def _vtrace_case(seed, lam, log_rho_scale=1.0):
    rng = np.random.default_rng(seed)
    reward, term, trunc, v, boot = _rollout(seed)
    inputs = returns.step_inputs(reward, term, trunc, v, boot, GAMMA, lam)
    log_rhos = (log_rho_scale * rng.normal(size=(T, B))).astype(np.float32)
    return v, inputs, reward, log_rhos, np.asarray(trunc) & ~np.asarray(term)


@pytest.mark.parametrize(
    "lam,clip_rho,clip_pg_rho",
    [
        (1.0, 1.0, 1.0),
        (1.0, 0.8, 0.5),  # clip_rho < 1
        (0.9, 2.0, 1.5),  # clip_rho > 1, lambda < 1
        (0.5, 0.6, 2.5),
        (0.0, 1.0, 1.0),  # lambda 0: one-step targets, pg advantages still use vs_{t+1}
    ],
)
def test_vtrace_matches_numpy_reference(lam, clip_rho, clip_pg_rho):
    v, inputs, reward, log_rhos, cut = _vtrace_case(seed=10, lam=lam)
    ratios = np.exp(log_rhos)
    # The data exercise every clip: ratios on both sides of 1, clip_rho and clip_pg_rho.
    for threshold in (1.0, clip_rho, clip_pg_rho):
        assert (ratios > threshold).any() and (ratios < threshold).any()
    out = returns.vtrace(v, inputs.value_t, reward, inputs.discount_t, log_rhos,
                         inputs.lambda_, clip_rho=clip_rho, clip_pg_rho=clip_pg_rho,
                         cut=inputs.cut)
    want_vs, want_pg = _np_vtrace(v, inputs.value_t, reward, inputs.discount_t, log_rhos,
                                  inputs.lambda_, clip_rho, clip_pg_rho,
                                  cut)
    _close(out.targets, want_vs)
    _close(out.errors, want_vs - v)
    _close(out.pg_advantages, want_pg)


def test_vtrace_scalar_lambda_without_cuts():
    """A scalar lambda (no truncations, so no per-step cuts) against the reference."""
    rng = np.random.default_rng(11)
    reward, term, _, v, boot = _rollout(seed=11)
    inputs = returns.step_inputs(reward, term, np.zeros_like(term), v, boot, GAMMA, 1.0)
    log_rhos = rng.normal(size=(T, B)).astype(np.float32)
    out = returns.vtrace(v, inputs.value_t, reward, inputs.discount_t, log_rhos, 0.7,
                         clip_rho=1.2, clip_pg_rho=0.9)
    want_vs, want_pg = _np_vtrace(v, inputs.value_t, reward, inputs.discount_t, log_rhos,
                                  np.full((T, B), 0.7), 1.2, 0.9)
    _close(out.targets, want_vs)
    _close(out.pg_advantages, want_pg)


def test_vtrace_truncation_cuts_trace():
    """Rewards after a truncation do not change the targets before it."""
    v, inputs, reward, log_rhos, cut = _vtrace_case(seed=12, lam=1.0)
    assert float(inputs.lambda_[2, 1]) == 0.0  # the fixed mid-sequence truncation of env 1
    assert cut[2, 1] and np.array_equal(np.asarray(inputs.cut), cut)
    out = returns.vtrace(v, inputs.value_t, reward, inputs.discount_t, log_rhos, inputs.lambda_,
                         cut=inputs.cut)
    reward2 = reward.copy()
    reward2[3:, 1] += 100.0
    out2 = returns.vtrace(v, inputs.value_t, reward2, inputs.discount_t, log_rhos,
                          inputs.lambda_, cut=inputs.cut)
    _close(out2.targets[:3, 1], np.asarray(out.targets[:3, 1]))
    _close(out2.pg_advantages[:3, 1], np.asarray(out.pg_advantages[:3, 1]))


def test_vtrace_truncation_bootstraps_on_final_value():
    """At a truncation (lambda 0 there) ``vs_t = V(x_t) + rho_t (r_t + gamma V(final) -
    V(x_t))`` and ``pg_adv_t = pg_rho_t (r_t + gamma V(final) - V(x_t))``."""
    reward, term, trunc, v, boot = _rollout(seed=13)
    fv = _final_values(trunc)
    log_rhos = np.random.default_rng(14).normal(scale=0.3, size=(T, B)).astype(np.float32)
    inputs = returns.step_inputs(reward, term, trunc, v, boot, GAMMA, 1.0, fv)
    out = returns.vtrace(v, inputs.value_t, reward, inputs.discount_t, log_rhos, inputs.lambda_,
                         clip_rho=1.2, clip_pg_rho=0.9, cut=inputs.cut)
    rho = np.exp(log_rhos)
    for t, b in ((2, 1), (T - 1, 2)):  # the fixed truncations, mid-sequence and last step
        delta = reward[t, b] + GAMMA * fv[t, b] - v[t, b]
        _close(out.targets[t, b], v[t, b] + min(1.2, rho[t, b]) * delta)
        _close(out.pg_advantages[t, b], min(0.9, rho[t, b]) * delta)


def test_vtrace_on_policy_is_n_step_return():
    """``log_rhos = 0, lambda = 1``: ``vs_t`` is the discounted n-step return bootstrapped
    with ``value_t`` at the end, and ``pg_adv_t = vs_t - V(x_t)``."""
    reward, term, _, v, boot = _rollout(seed=13)
    inputs = returns.step_inputs(reward, term, np.zeros_like(term), v, boot, GAMMA, 1.0)
    out = returns.vtrace(v, inputs.value_t, reward, inputs.discount_t,
                         np.zeros((T, B), np.float32), 1.0)
    discount = np.asarray(inputs.discount_t, np.float64)
    want = np.zeros((T, B))
    for b in range(B):
        for t in range(T):
            g, scale = 0.0, 1.0
            for k in range(t, T):
                g += scale * reward[k, b]
                scale *= discount[k, b]
            want[t, b] = g + scale * np.asarray(inputs.value_t)[T - 1, b]
    _close(out.targets, want)
    _close(out.pg_advantages, want - v)


def test_vtrace_on_policy_equals_gae_lambda_one():
    v, inputs, reward, _, _ = _vtrace_case(seed=14, lam=1.0)
    out = returns.vtrace(v, inputs.value_t, reward, inputs.discount_t,
                         np.zeros((T, B), np.float32), inputs.lambda_)
    adv, targets = returns.gae(reward, inputs.discount_t, v, inputs.value_t, inputs.lambda_)
    _close(out.targets, np.asarray(targets))
    _close(out.errors, np.asarray(adv))


# ------------------------------------------------------ V-trace advantages for PPO


def _np_q_advantages(vs, value_tm1, value_t, reward, discount, cut):
    """``r_s + gamma_s q_{s+1} - V(x_s)``, ``q_{s+1} = v_{s+1}`` (``vs`` of ``_np_vtrace``,
    ``v_T = value_t[T - 1]``), or ``value_t[s]`` at a truncation: IMPALA's policy-gradient
    advantage without its importance weight."""
    n = reward.shape[0]
    out = np.zeros(reward.shape)
    for s in range(n):
        for b in range(reward.shape[1]):
            nxt = value_t[s, b] if (cut[s, b] or s == n - 1) else vs[s + 1, b]
            out[s, b] = reward[s, b] + discount[s, b] * nxt - value_tm1[s, b]
    return out


@pytest.mark.parametrize("lam,clip_rho", [(1.0, 1.0), (0.9, 2.0), (0.5, 0.6)])
def test_vtrace_advantages_match_numpy_reference(lam, clip_rho):
    v, inputs, reward, log_rhos, cut = _vtrace_case(seed=20, lam=lam)
    adv, targets = returns.vtrace_advantages(v, inputs.value_t, reward, inputs.discount_t,
                                             log_rhos, inputs.lambda_, clip_rho,
                                             cut=inputs.cut)
    want_vs, _ = _np_vtrace(v, inputs.value_t, reward, inputs.discount_t, log_rhos,
                            inputs.lambda_, clip_rho, 1.0, cut)
    _close(targets, want_vs)
    _close(adv, _np_q_advantages(want_vs, v, np.asarray(inputs.value_t), reward,
                                 np.asarray(inputs.discount_t), cut))


@pytest.mark.parametrize("lam", [1.0, 0.9, 0.0])
def test_vtrace_advantages_of_equal_policies_are_gae_lambda_returns(lam):
    """``log_rhos = 0``: the targets are GAE's (the lambda-returns, as rlax documents for
    V-trace on-policy); the advantages ``r + gamma * G^lambda_{t+1} - V``, which are GAE's
    advantages where lambda = 1."""
    v, inputs, reward, _, cut = _vtrace_case(seed=21, lam=lam)
    adv, targets = returns.vtrace_advantages(v, inputs.value_t, reward, inputs.discount_t,
                                             np.zeros((T, B), np.float32), inputs.lambda_,
                                             cut=inputs.cut)
    gae_adv, gae_targets = returns.gae(reward, inputs.discount_t, v, inputs.value_t,
                                       inputs.lambda_)
    _close(targets, np.asarray(gae_targets))
    _close(adv, _np_q_advantages(np.asarray(gae_targets, np.float64), v,
                                 np.asarray(inputs.value_t), reward,
                                 np.asarray(inputs.discount_t), cut))
    if lam == 1.0:
        _close(adv, np.asarray(gae_adv))
