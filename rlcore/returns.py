"""Advantage and value-target estimators, pure and time-major ``[T, B]``.

Conventions shared by both estimators:

- ``discount_t[t]`` is ``gamma`` where step ``t`` did not terminate and ``0`` where it did.
- ``value_t[t]`` is the value of the state that follows step ``t``.
- ``lambda_`` may be a scalar or ``[T, B]``. A zero at step ``t`` cuts the trace there: no
  correction flows from ``t + 1`` back into ``t``.

Truncation (time limit): envs auto-reset in the step that ends an episode, so ``obs[t + 1]``
after a truncated step belongs to the next episode. ``step_inputs`` cuts the trace there
(``lambda_[t] := 0``, nothing from the next episode leaks back) and does not treat the cut as
terminal (``discount_t[t] = gamma``); the successor value ``value_t[t]`` is one of two rules:

- *final-observation bootstrap* (``final_value`` given; config ``bootstrap_time_limits``, on
  by default): the env adapter returns the episode's last observation before the reset
  (``TimeStep.final_obs``) and the actor stores its value under the acting params,
  ``final_value[t] = V(final obs)``; the value target is ``r_t + gamma * V(s_{t+1})``, the
  infinite-horizon target.
- *self bootstrap* (``final_value`` None: ``bootstrap_time_limits`` off, or an adapter
  without a final observation): ``value_t[t] := value_tm1[t]``, the truncated step's own
  state standing in for the lost successor; the target is ``r_t + gamma * V(s_t)``.

(docs/design.md, "Truncation and the final observation")
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
from flax import struct

from rlcore.types import Array, Scalar


@struct.dataclass
class ReturnsInputs:
    """Per-step inputs of ``gae`` and ``vtrace`` built from a rollout, all ``[T, B]``;
    ``cut`` (bool) marks the truncations, where the trace is cut."""

    discount_t: jax.Array
    value_t: jax.Array
    lambda_: jax.Array
    cut: jax.Array


@struct.dataclass
class VTraceOutput:
    """Outputs of ``vtrace``, all ``[T, B]``.

    Attributes:
      errors: ``vs - value_tm1``, the baseline's error against the V-trace target.
      pg_advantages: ``clipped_pg_rho * (r + discount * vs_{t+1} - value_tm1)``.
      targets: ``vs``, the V-trace value targets.
    """

    errors: jax.Array
    pg_advantages: jax.Array
    targets: jax.Array


def step_inputs(reward_t: Array, terminated: Array, truncated: Array, value_tm1: Array,
                bootstrap_value: Array, gamma: Scalar, lambda_: Scalar,
                final_value: Array | None = None) -> ReturnsInputs:
    """Builds discounts, successor values and trace-cutting lambdas for one rollout (the
    truncation rules: the module docstring).

    Args:
      reward_t: ``[T, B]`` rewards (only its shape is used).
      terminated: ``[T, B]`` bool.
      truncated: ``[T, B]`` bool.
      value_tm1: ``[T, B]`` values of ``obs[t]``.
      bootstrap_value: ``[B]`` value of the observation after the last step.
      gamma: discount factor.
      lambda_: trace parameter (scalar).
      final_value: ``[T, B]`` value of the final observation where ``truncated`` (read only
        there), or None: the self bootstrap.

    Returns:
      ReturnsInputs with ``discount_t``, ``value_t``, ``lambda_``, ``cut`` all ``[T, B]``.
    """
    chex.assert_equal_shape([reward_t, terminated, truncated, value_tm1])
    chex.assert_rank(bootstrap_value, 1)
    if final_value is not None:
        chex.assert_equal_shape([final_value, value_tm1])
    cut = truncated & ~terminated
    discount_t = gamma * (1.0 - terminated.astype(jnp.float32))
    next_value = jnp.concatenate([value_tm1[1:], bootstrap_value[None]], axis=0)
    successor = value_tm1 if final_value is None else final_value
    value_t = jnp.where(cut, successor, next_value)
    lambdas = jnp.where(cut, 0.0, jnp.asarray(lambda_, jnp.float32))
    return ReturnsInputs(discount_t=discount_t, value_t=value_t, lambda_=lambdas, cut=cut)


def _broadcast_lambda(lambda_: Scalar, like: Array) -> Array:
    """``lambda_`` (scalar or ``like``'s shape) as an array of ``like``'s shape and dtype."""
    return jnp.broadcast_to(jnp.asarray(lambda_, like.dtype), like.shape)


def _backward_sum(delta: Array, coeff: Array) -> Array:
    """``acc_t = delta_t + coeff_t * acc_{t+1}``, ``acc_T = 0``, over ``[T, B]`` arrays."""

    def backward(acc: Array, xs: tuple[Array, Array]) -> tuple[Array, Array]:
        delta_s, coeff_s = xs
        acc = delta_s + coeff_s * acc
        return acc, acc

    _, acc = jax.lax.scan(backward, jnp.zeros_like(delta[0]), (delta, coeff), reverse=True)
    return acc


def gae(reward_t: Array, discount_t: Array, value_tm1: Array, value_t: Array,
        lambda_: Scalar) -> tuple[Array, Array]:
    """Generalised advantage estimation (Schulman et al. 2016, arXiv 1506.02438).

    ``A_t = delta_t + discount_t * lambda_t * A_{t+1}`` with
    ``delta_t = r_t + discount_t * value_t - value_tm1``, and ``A_T = 0``. At a truncation
    (from ``step_inputs``) ``lambda_t = 0`` and ``value_t`` is the value of the episode's
    final observation (or, with that rule off, of ``x_t`` itself), so the target there is
    ``r_t + gamma * value_t``: a time limit is not a terminal state.

    Args:
      reward_t: ``[T, B]`` rewards.
      discount_t: ``[T, B]`` discounts (0 at terminations).
      value_tm1: ``[T, B]`` values of the states acted on.
      value_t: ``[T, B]`` values of the successor states.
      lambda_: scalar or ``[T, B]`` trace parameter.

    Returns:
      ``(advantages, targets)``, both ``[T, B]``; ``targets = advantages + value_tm1``.
    """
    chex.assert_rank([reward_t, discount_t, value_tm1, value_t], 2)
    chex.assert_equal_shape([reward_t, discount_t, value_tm1, value_t])
    lambdas = _broadcast_lambda(lambda_, reward_t)
    delta = reward_t + discount_t * value_t - value_tm1
    advantages = _backward_sum(delta, discount_t * lambdas)
    return advantages, advantages + value_tm1


def q_lambda(reward_t: Array, discount_t: Array, value_t: Array, lambda_: Scalar,
             bootstrap_value: Array) -> Array:
    """Q(lambda) returns, the targets of PQN (Gallici et al. 2024, arXiv 2407.04811; Peng's
    Q(lambda), Peng and Williams 1996): the lambda-return of the greedy values.

    ``G_t = r_t + discount_t * ((1 - lambda_t) * value_t + lambda_t * G_{t+1})`` with
    ``G_T = bootstrap_value``, where ``value_t[t] = max_a Q(x_{t + 1}, a)``. The inputs of
    ``step_inputs`` give the rules of this module: at a termination ``G_t = r_t``; at a
    truncation (``lambda_t = 0``) ``G_t = r_t + gamma * value_t``, the final observation's
    value (docs/algorithms.md, "PQN", says where the reference differs).

    Args:
      reward_t: ``[T, B]`` rewards.
      discount_t: ``[T, B]`` discounts (0 at terminations).
      value_t: ``[T, B]`` greedy values of the successor states.
      lambda_: scalar or ``[T, B]`` trace parameter.
      bootstrap_value: ``[B]`` greedy value of the observation after the last step.

    Returns:
      ``[T, B]`` targets; gradients are not stopped.
    """
    chex.assert_rank([reward_t, discount_t, value_t], 2)
    chex.assert_equal_shape([reward_t, discount_t, value_t])
    chex.assert_rank(bootstrap_value, 1)
    lambdas = _broadcast_lambda(lambda_, reward_t)

    def backward(g_next: Array, xs: tuple[Array, Array, Array, Array]) -> tuple[Array, Array]:
        r, d, v, lam = xs
        g = r + d * ((1.0 - lam) * v + lam * g_next)
        return g, g

    _, targets = jax.lax.scan(backward, bootstrap_value.astype(reward_t.dtype),
                              (reward_t, discount_t, value_t, lambdas), reverse=True)
    return targets


def vtrace(value_tm1: Array, value_t: Array, reward_t: Array, discount_t: Array,
           log_rhos: Array, lambda_: Scalar = 1.0, clip_rho: Scalar = 1.0,
           clip_pg_rho: Scalar = 1.0, cut: Array | None = None) -> VTraceOutput:
    """V-trace targets and policy-gradient advantages (Espeholt et al. 2018, arXiv 1802.01561).

    ``vs_t = V(x_t) + acc_t`` with
    ``acc_t = rho_t * delta_t + discount_t * c_t * acc_{t+1}``, ``acc_T = 0``,
    ``delta_t = r_t + discount_t * value_t - value_tm1``, ``rho_t = min(clip_rho, pi/mu)``,
    ``c_t = lambda_t * min(1, pi/mu)``. The policy-gradient advantage uses the target of the
    successor, ``value_t + acc_{t+1}`` (``= vs_{t+1}``), and ``value_t`` where ``cut[t]``
    (a truncation: ``vs_{t+1}`` belongs to the next episode; ``step_inputs`` makes
    ``value_t`` the value of the episode's final observation, or of ``x_t`` with that rule
    off, and ``lambda_t = 0``, so ``vs_t = V(x_t) + rho_t * (r_t + gamma * value_t - V(x_t))``):
    ``pg_adv_t = min(clip_pg_rho, pi/mu) * (r_t + discount_t * vs_{t+1} - value_tm1)``.

    Args:
      value_tm1: ``[T, B]`` baseline values of the states acted on.
      value_t: ``[T, B]`` values of the successor states.
      reward_t: ``[T, B]`` rewards.
      discount_t: ``[T, B]`` discounts (0 at terminations).
      log_rhos: ``[T, B]`` ``log pi(a|x) - log mu(a|x)``.
      lambda_: scalar or ``[T, B]`` trace parameter.
      clip_rho: clipping threshold of the importance weights in the targets.
      clip_pg_rho: clipping threshold of the importance weights in the pg advantages.
      cut: ``[T, B]`` bool, the truncations (``ReturnsInputs.cut``), or None (no cut). A
        ``lambda_`` of 0 alone is no cut: it only stops the trace of the targets.

    Returns:
      VTraceOutput of ``[T, B]`` arrays. Gradients are not stopped: callers do that.
    """
    targets, q_advantages = _vtrace_targets(value_tm1, value_t, reward_t, discount_t, log_rhos,
                                            lambda_, clip_rho, cut)
    pg_rhos = jnp.minimum(clip_pg_rho, jnp.exp(log_rhos))
    pg_advantages = pg_rhos * q_advantages
    return VTraceOutput(errors=targets - value_tm1, pg_advantages=pg_advantages, targets=targets)


def _vtrace_targets(value_tm1: Array, value_t: Array, reward_t: Array, discount_t: Array,
                    log_rhos: Array, lambda_: Scalar, clip_rho: Scalar,
                    cut: Array | None) -> tuple[Array, Array]:
    """``(vs, r + discount * vs_{t+1} - value_tm1)``, both ``[T, B]``: the V-trace targets
    and the advantage of the action taken without an importance weight (``vtrace``'s
    arguments and rules)."""
    chex.assert_rank([value_tm1, value_t, reward_t, discount_t, log_rhos], 2)
    chex.assert_equal_shape([value_tm1, value_t, reward_t, discount_t, log_rhos])
    lambdas = _broadcast_lambda(lambda_, reward_t)
    rhos = jnp.exp(log_rhos)
    clipped_rhos = jnp.minimum(clip_rho, rhos)
    cs = lambdas * jnp.minimum(1.0, rhos)
    delta = clipped_rhos * (reward_t + discount_t * value_t - value_tm1)
    acc = _backward_sum(delta, discount_t * cs)
    targets = value_tm1 + acc
    acc_tp1 = jnp.concatenate([acc[1:], jnp.zeros_like(acc[:1])], axis=0)
    vs_tp1 = value_t + (acc_tp1 if cut is None else jnp.where(cut, 0.0, acc_tp1))
    return targets, reward_t + discount_t * vs_tp1 - value_tm1


def vtrace_advantages(value_tm1: Array, value_t: Array, reward_t: Array, discount_t: Array,
                      log_rhos: Array, lambda_: Scalar = 1.0, clip_rho: Scalar = 1.0,
                      cut: Array | None = None) -> tuple[Array, Array]:
    """V-trace advantages and targets for a ratio-weighted surrogate (PPO's), against the
    policy of ``log_rhos`` (the staleness correction ``vtrace``, ``rlcore.staleness``).

    ``advantages_t = r_t + discount_t * vs_{t+1} - value_tm1`` (``vs_{t+1}`` as ``vtrace``
    uses it, ``value_t`` at a cut): IMPALA's policy-gradient advantage without its factor
    ``min(clip_pg_rho, pi/mu)``, which PPO's ratio ``pi/mu`` takes the place of;
    ``targets = vs``. With ``log_rhos = 0`` (equal policies) and ``clip_rho >= 1`` the
    targets are GAE's (the lambda-returns) and the advantages ``r_t + discount_t * G_{t+1}
    - V(x_t)``, ``G`` the lambda-return: GAE's advantages where ``lambda_ = 1``.

    Args:
      value_tm1, value_t, reward_t, discount_t, log_rhos, lambda_, clip_rho, cut: as
        ``vtrace``, all ``[T, B]`` but the scalars.

    Returns:
      ``(advantages, targets)``, both ``[T, B]``; gradients are not stopped.
    """
    targets, advantages = _vtrace_targets(value_tm1, value_t, reward_t, discount_t, log_rhos,
                                          lambda_, clip_rho, cut)
    return advantages, targets
