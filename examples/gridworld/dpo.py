"""Discovered Policy Optimisation (Lu et al. 2022, arXiv 2210.05639), an algorithm of the
user's own (docs/extending.md, "Your own algorithm").

DPO is PPO with the clipped surrogate replaced by a drift learned by meta-learning and then
written in closed form: the policy maximises ``r A - drift(r, A)`` with

    drift = relu((r - 1) A - alpha tanh((r - 1) A / alpha))   where A >= 0
    drift = relu(log(r) A - beta tanh(log(r) A / beta))        where A < 0

(``r`` the probability ratio, ``A`` the advantage; the paper's alpha = 2, beta = 0.6). Every
other part (GAE, the value loss, the entropy bonus, minibatches, normalised advantages) is
PPO's, so the class is PPO with two hyperparameters of its own and its objective.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from rlcore.algorithms.ppo import PPO


def dpo_objective(ratio: jax.Array, adv: jax.Array, alpha: float, beta: float) -> jax.Array:
    """``r A - drift(r, A)``, per sample (``[T, b]``)."""
    r_minus_1 = (ratio - 1.0) * adv
    log_r = jnp.log(ratio) * adv
    drift = jnp.where(adv >= 0.0,
                      jax.nn.relu(r_minus_1 - alpha * jnp.tanh(r_minus_1 / alpha)),
                      jax.nn.relu(log_r - beta * jnp.tanh(log_r / beta)))
    return ratio * adv - drift


@dataclasses.dataclass(frozen=True)
class DPO(PPO):
    """PPO's fields (read from the config's shared fields) and DPO's own: ``dpo_alpha``
    and ``dpo_beta`` (``--config.algo.dpo_alpha=...``)."""

    dpo_alpha: float = 2.0
    dpo_beta: float = 0.6

    def objective(self):
        return functools.partial(dpo_objective, alpha=self.dpo_alpha, beta=self.dpo_beta)
