"""PQN's Q(lambda) targets (``rlcore.returns.q_lambda`` on ``step_inputs``) against two
NumPy references written from the definitions: the backward recursion of the PQN paper
(Gallici et al. 2024, arXiv 2407.04811), and the lambda-weighted mixture of n-step returns
within each episode. Random rollouts from hypothesis, with terminations and truncations
anywhere, the last step included."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlcore import returns

pytestmark = pytest.mark.smoke  # the newest stack's subset (make test-newest)


def _rollout(seed: int, t: int, b: int, a: int):
    """Rewards, flags and Q-values of a random ``[t, b]`` rollout with ``a`` actions: Q of
    each observation ``[t, b, a]``, of the bootstrap one ``[b, a]`` and of each truncated
    episode's final one ``[t, b, a]``."""
    rng = np.random.default_rng(seed)
    reward = rng.normal(size=(t, b)).astype(np.float32)
    terminated = rng.random((t, b)) < 0.2
    truncated = rng.random((t, b)) < 0.2
    q = rng.normal(size=(t, b, a)).astype(np.float32)
    q_boot = rng.normal(size=(b, a)).astype(np.float32)
    q_final = rng.normal(size=(t, b, a)).astype(np.float32) + 2.0
    return reward, terminated, truncated, q, q_boot, q_final


def _np_recursion(reward, terminated, truncated, q, q_boot, q_final, gamma, lam):
    """The paper's backward recursion, ``G_t = r_t + gamma (1 - done_t) [lambda G_{t+1} +
    (1 - lambda) max_a Q(x_{t+1}, a)]``, with ``G_T = max_a Q(bootstrap)``, ``done`` the
    terminations; a truncation (not terminated) bootstraps on its final observation alone."""
    t_len, b_len = reward.shape
    g = np.zeros((t_len, b_len))
    for b in range(b_len):
        g_next = q_boot[b].max()
        for t in reversed(range(t_len)):
            next_q = q[t + 1, b].max() if t + 1 < t_len else q_boot[b].max()
            if terminated[t, b]:
                g[t, b] = reward[t, b]
            elif truncated[t, b]:
                g[t, b] = reward[t, b] + gamma * q_final[t, b].max()
            else:
                g[t, b] = reward[t, b] + gamma * ((1 - lam) * next_q + lam * g_next)
            g_next = g[t, b]
    return g


def _np_n_step_mixture(reward, terminated, truncated, q, q_boot, q_final, gamma, lam):
    """``G_t = (1 - lambda) sum_{n=1}^{N-1} lambda^(n-1) G_t^(n) + lambda^(N-1) G_t^(N)``:
    ``G_t^(n)`` the n-step return bootstrapped on the greedy value ``n`` steps on, ``N``
    the steps to the end of the episode or of the rollout (its last n-step return takes
    the end's value: 0 after a termination, the final observation's after a truncation,
    the bootstrap observation's at the rollout's end)."""
    t_len, b_len = reward.shape
    g = np.zeros((t_len, b_len))
    for b in range(b_len):
        for t in range(t_len):
            n_returns, ret, disc = [], 0.0, 1.0
            for k in range(t, t_len):
                ret += disc * reward[k, b]
                disc *= gamma
                if terminated[k, b]:
                    n_returns.append(ret)
                    break
                if truncated[k, b]:
                    n_returns.append(ret + disc * q_final[k, b].max())
                    break
                nxt = q[k + 1, b].max() if k + 1 < t_len else q_boot[b].max()
                n_returns.append(ret + disc * nxt)
            n = len(n_returns)
            weights = [(1 - lam) * lam ** (i - 1) for i in range(1, n)] + [lam ** (n - 1)]
            g[t, b] = sum(w * r for w, r in zip(weights, n_returns, strict=True))
    return g


def _ours(reward, terminated, truncated, q, q_boot, q_final, gamma, lam):
    """The targets as ``PQN.prepare`` builds them."""
    v = q.max(-1)
    final_value = np.where(truncated, q_final.max(-1), 0.0).astype(np.float32)
    inputs = returns.step_inputs(reward, terminated, truncated, v, q_boot.max(-1), gamma, lam,
                                 final_value)
    return np.asarray(returns.q_lambda(reward, inputs.discount_t, inputs.value_t,
                                       inputs.lambda_, q_boot.max(-1)))


@settings(max_examples=40, deadline=None, database=None)
@given(seed=st.integers(0, 2**31 - 1), t=st.integers(1, 9), b=st.integers(1, 4),
       a=st.integers(2, 5), gamma=st.floats(0.0, 0.999), lam=st.floats(0.0, 1.0))
def test_q_lambda_matches_both_numpy_references(seed, t, b, a, gamma, lam):
    rollout = _rollout(seed, t, b, a)
    got = _ours(*rollout, gamma, lam)
    assert got.shape == (t, b)
    np.testing.assert_allclose(got, _np_recursion(*rollout, gamma, lam), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, _np_n_step_mixture(*rollout, gamma, lam), rtol=1e-4,
                               atol=1e-4)


def test_q_lambda_edges():
    """lambda 0: one-step Q-learning targets; lambda 1: the discounted return to the end,
    bootstrapped there; a termination at the last step ignores the bootstrap; a truncation
    at the last step takes the final observation's value, not the bootstrap's."""
    rollout = _rollout(3, 6, 3, 3)
    reward, terminated, truncated, q, q_boot, q_final = rollout
    terminated[:], truncated[:] = False, False
    terminated[5, 1] = True
    truncated[5, 2] = True
    one_step = _ours(*rollout, 0.9, 0.0)
    next_v = np.concatenate([q.max(-1)[1:], q_boot.max(-1)[None]])
    want = reward + 0.9 * next_v
    want[5, 1] = reward[5, 1]
    want[5, 2] = reward[5, 2] + 0.9 * q_final[5, 2].max()
    np.testing.assert_allclose(one_step, want, rtol=1e-6)
    monte_carlo = _ours(*rollout, 0.9, 1.0)
    ret = 0.0 * reward[0, 0] + q_boot[0].max()
    for t in reversed(range(6)):
        ret = reward[t, 0] + 0.9 * ret
    np.testing.assert_allclose(monte_carlo[0, 0], ret, rtol=1e-5)
    assert monte_carlo[5, 1] == pytest.approx(reward[5, 1])
