"""Corrections for stale rollouts: what a learner may do when the policy that acted (the
behaviour policy ``mu``) is older than the params at the start of the update (the proximal
policy ``pi_prox``), e.g. ``S`` updates older under a policy lag ``S``.

The config field ``staleness_correction`` chooses one (``CORRECTIONS``; ``none`` by
default, which changes nothing). Each is a pure function here (``returns.vtrace_advantages``
for ``vtrace``); the PPO algorithm (``rlcore.algorithms.ppo``) computes the proximal policy's
log-probabilities once per update, before the epochs, and the loss (``losses.ppo_loss``)
reads the per-sample results. See docs/algorithms.md, "Corrections for stale rollouts".

- ``decoupled``: PPO's ratio is clipped against ``pi_prox``, and each sample is weighted by
  ``min(c, pi_prox / mu)`` (``decoupled_weight``; Hilton et al. 2021, arXiv 2110.00641).
- ``vtrace``: PPO's advantages and value targets come from V-trace against ``pi_prox``
  (``returns.vtrace_advantages``; Espeholt et al. 2018, arXiv 1802.01561).
- ``lr_scale``: the learning rate is divided by ``1 + S`` (``lag_scaled_learning_rate``;
  the form implied by a stale-gradient bias of order ``S * lr``, arXiv 2607.01083).
- ``filter``: samples whose ``|pi_prox / mu - 1|`` exceeds a threshold are dropped from
  the policy term (``divergence_mask``; in the spirit of Align and Filter, arXiv 2603.01365).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rlcore.types import Array, Scalar

NONE, DECOUPLED, VTRACE, LR_SCALE, FILTER = CORRECTIONS = (
    "none", "decoupled", "vtrace", "lr_scale", "filter")
# The corrections that need the proximal policy's log-probabilities of the rollout's actions
# (a forward pass of the update's starting params over the whole rollout, before the epochs).
PROXIMAL = (DECOUPLED, VTRACE, FILTER)
# The corrections an algorithm without a proximal pass accepts (IMPALA: its V-trace already
# corrects for the behaviour policy with the current params, per minibatch).
ALGORITHM_FREE = (NONE, LR_SCALE)


def lag_scaled_learning_rate(learning_rate: Scalar, policy_lag: int) -> Scalar:
    """``learning_rate / (1 + policy_lag)``: the base rate at lag 0, decreasing in the lag.

    arXiv 2607.01083 bounds the bias of a stale surrogate gradient by ``O(S * lr)`` (``S``
    the rollout lag) and states the stability rule ``lr << R / (S * G)``; keeping ``(1 + S)
    * lr`` at the lag-0 value is the form that bound implies (not a formula quoted from the
    paper); the ``1 +`` keeps lag 0 at the base rate.

    Args:
      learning_rate: the base rate (a Python number or a traced swept value).
      policy_lag: ``S >= 0``, updates between the acting params and the learner's.
    """
    if policy_lag < 0:
        raise ValueError(f"policy_lag: {policy_lag} must be >= 0")
    return learning_rate / (1 + policy_lag)


def decoupled_weight(prox_log_prob: Array, behaviour_log_prob: Array,
                     max_weight: Scalar) -> Array:
    """The decoupled objective's importance weight ``min(max_weight, pi_prox(a) / mu(a))``
    (any shape, e.g. ``[T, B]``; a constant of the loss: gradients stopped)."""
    rho = jnp.exp(prox_log_prob - behaviour_log_prob)
    return jax.lax.stop_gradient(jnp.minimum(max_weight, rho))


def divergence_mask(prox_log_prob: Array, behaviour_log_prob: Array,
                    threshold: Scalar) -> Array:
    """1.0 where ``|pi_prox(a) / mu(a) - 1| <= threshold``, 0.0 where it exceeds it (float32,
    any shape, e.g. ``[T, B]``).

    ``E_mu |pi_prox / mu - 1| = 2 TV(pi_prox, mu)`` at a state, so the per-sample quantity is
    the one-sample estimate of the total-variation distance Align and Filter (arXiv
    2603.01365) constrains between the learning and the behaviour policy.
    """
    rho = jnp.exp(prox_log_prob - behaviour_log_prob)
    return (jnp.abs(rho - 1.0) <= threshold).astype(jnp.float32)


def proximal_kl(prox_log_prob: Array, behaviour_log_prob: Array) -> Array:
    """``mean((rho - 1) - log rho)``, ``rho = pi_prox / mu``: the estimate of
    ``KL(mu || pi_prox)`` the losses' ``approx_kl`` uses, between behaviour and proximal."""
    log_rho = prox_log_prob - behaviour_log_prob
    return jnp.mean(jnp.expm1(log_rho) - log_rho)
