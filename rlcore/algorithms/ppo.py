"""PPO with the clipped surrogate and GAE (Schulman et al. 2017, arXiv 1707.06347).

GAE needs the values of the learner's params at the start of the update. Where the policy
lag is 0 (Anakin) those are the values the rollout computed, which the trajectory then
carries as ``behaviour_value``; only ``bootstrap_obs`` needs a forward pass. Where it does
not carry them (Sebulba: the actors do not ship values, and their params may be older) the
learner recomputes the values of the whole rollout (one forward pass over ``obs`` and
``bootstrap_obs``). The ratio uses ``behaviour_dist_params`` (the acting policy's distribution
parameters).

A recurrent agent's values come from one unroll of the core over each whole sequence
(``obs`` and ``bootstrap_obs``) from the trajectory's ``core_state``, the same unroll the
loss runs; its minibatches are whole sequences (``SEQUENCES``; validation refuses samples).

A staleness correction that needs the proximal policy (``rlcore.staleness.PROXIMAL``) runs
the learner's params over the whole rollout in that same pass (never the rollout's own
values): the values, and the proximal log-probabilities of the actions taken, which the
correction turns into the loss's per-sample inputs (``PPO.corrected``).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp

from rlcore import losses, returns, staleness
from rlcore.algorithms.base import MEAN, SAMPLES, SEQUENCES, AlgorithmBase
from rlcore.networks import unroll_network
from rlcore.types import ApplyFn, Array, Params, Trajectory

VALUE_CHUNK = 4096  # observations per forward pass when recomputing a rollout's values


def values_in_chunks(params: Params, apply_fn: ApplyFn, obs: Array) -> Array:
    """Values of ``obs [N, ...]`` in static chunks of ``VALUE_CHUNK`` (``[N]``).

    A whole Atari rollout (129 x 128 frames) in one pass of the IMPALA ResNet needs several
    GB of activations; chunks bound that. The chunks are a Python loop, not a rolled
    ``lax.map``: XLA on CPU runs conv nets in rolled loops far slower.
    """
    n = obs.shape[0]
    parts = [apply_fn(params, obs[i:i + VALUE_CHUNK])[1] for i in range(0, n, VALUE_CHUNK)]
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts)


def rollout_values(params: Params, apply_fn: ApplyFn, traj: Trajectory) -> tuple[Array, Array]:
    """``(value_tm1 [T, B], bootstrap_value [B])``: the values of ``params`` (the learner's
    at the update's start) of a rollout's observations and of its bootstrap one. A
    recurrent agent's from one unroll of each sequence from its ``core_state``; a
    feed-forward one's are the trajectory's ``behaviour_value`` where it carries them (the
    rollout ran these params, policy lag 0: only the bootstrap observation needs a pass),
    else one pass over all (``values_in_chunks``)."""
    t, b = traj.reward.shape
    if traj.core_state is not None:  # recurrent: one unroll from the stored state
        obs_all, first_all = losses.with_bootstrap(traj)
        value_all = unroll_network(apply_fn, params, obs_all, traj.core_state, first_all)[1]
        return value_all[:t], value_all[t]
    if traj.behaviour_value is not None:  # the rollout ran these params (lag 0)
        return traj.behaviour_value, apply_fn(params, traj.bootstrap_obs)[1]
    obs_all = jnp.concatenate([traj.obs, traj.bootstrap_obs[None]], axis=0)
    value_all = values_in_chunks(params, apply_fn, obs_all.reshape((-1,) + obs_all.shape[2:]))
    value_all = value_all.reshape((t + 1, b))
    return value_all[:t], value_all[t]


def log_probs_in_chunks(params: Params, apply_fn: ApplyFn, obs: Array, action: Array,
                        behaviour_dist_params: Array) -> tuple[Array, Array, Array]:
    """``(log pi(a), log mu(a), value)``, each ``[N]``, of ``obs [N, ...]`` and ``action
    [N, ...]`` in static chunks of ``VALUE_CHUNK`` (as ``values_in_chunks``): ``pi`` the
    policy of ``params``, ``mu`` the one of ``behaviour_dist_params [N, P]``, same family."""
    parts = []
    for i in range(0, obs.shape[0], VALUE_CHUNK):
        dist, value = apply_fn(params, obs[i:i + VALUE_CHUNK])
        a = action[i:i + VALUE_CHUNK]
        mu = type(dist).from_params(behaviour_dist_params[i:i + VALUE_CHUNK])
        parts.append((dist.log_prob(a), mu.log_prob(a), value))
    return tuple(jnp.concatenate(xs) for xs in zip(*parts))  # type: ignore[return-value]


def proximal_pass(params: Params, apply_fn: ApplyFn,
                  traj: Trajectory) -> tuple[Array, Array, Array, Array]:
    """The proximal policy (``params``, the update's start) over a whole rollout:
    ``(value_tm1 [T, B], bootstrap_value [B], log pi_prox(a) [T, B], log mu(a) [T, B])``;
    a recurrent agent's from one unroll of each sequence from its ``core_state``; a
    feed-forward one's values are the trajectory's ``behaviour_value`` where it carries
    them (they are the values of ``params``, see ``PPO.prepare``)."""
    t, b = traj.reward.shape
    if traj.core_state is not None:
        obs_all, first_all = losses.with_bootstrap(traj)
        dist_all, value_all = unroll_network(apply_fn, params, obs_all, traj.core_state,
                                             first_all)
        dist = jax.tree.map(lambda x: x[:t], dist_all)
        mu = type(dist).from_params(traj.behaviour_dist_params)
        return (value_all[:t], value_all[t], dist.log_prob(traj.action),
                mu.log_prob(traj.action))
    flat = lambda x: x.reshape((t * b,) + x.shape[2:])  # noqa: E731
    log_pa, mu_log_pa, value = log_probs_in_chunks(
        params, apply_fn, flat(traj.obs), flat(traj.action), flat(traj.behaviour_dist_params))
    bootstrap_value = values_in_chunks(params, apply_fn, traj.bootstrap_obs)
    shape = lambda x: x.reshape((t, b))  # noqa: E731
    # The rollout's own values where it ran these params (lag 0), as ``PPO.prepare`` uses
    # them: the correction then changes the values nothing.
    value_tm1 = shape(value) if traj.behaviour_value is None else traj.behaviour_value
    return value_tm1, bootstrap_value, shape(log_pa), shape(mu_log_pa)


@dataclasses.dataclass(frozen=True)
class PPO(AlgorithmBase):
    """PPO hyperparameters (``HParams`` fields of the same names; no defaults: configs/base.py
    holds them).

    Attributes:
      gamma: discount factor.
      gae_lambda: GAE lambda.
      clip_eps: ratio (and value) clip.
      clip_vloss: value clipping as in the PPO2 baselines.
      norm_adv: per-minibatch advantage normalisation (across devices).
      vf_coef: value-loss coefficient.
      ent_coef: entropy coefficient.
      clip_rho: V-trace's importance-weight clip of the targets (correction ``vtrace``).
      staleness_correction: one of ``rlcore.staleness.CORRECTIONS``.
      decoupled_max_weight: truncation of the importance weight (correction ``decoupled``).
      filter_threshold: bound on ``|pi_prox / mu - 1|`` (correction ``filter``).
    """

    gamma: float
    gae_lambda: float
    clip_eps: float
    clip_vloss: bool
    norm_adv: bool
    vf_coef: float
    ent_coef: float
    clip_rho: float
    staleness_correction: str
    decoupled_max_weight: float
    filter_threshold: float

    # Feed-forward PPO's loss is a mean over independent samples (GAE ran before the
    # epochs): minibatches of single (step, env) samples by default, whole sequences on
    # request (``minibatch_kind="sequences"``; docs/design.md, "One update loop").
    minibatch_kinds: ClassVar[tuple[str, ...]] = (SAMPLES, SEQUENCES)
    loss_reduction: ClassVar[str] = MEAN
    staleness_corrections: ClassVar[tuple[str, ...]] = staleness.CORRECTIONS

    def prepare(self, params: Params, apply_fn: ApplyFn,
                trajectory: Trajectory) -> losses.PPOBatch:
        """Values under ``params``, advantages and targets of a whole rollout (GAE, or V-trace
        under the correction ``vtrace``), and a staleness correction's per-sample inputs.

        Args:
          params: the learner's params at the start of the update (the proximal policy).
          apply_fn: ``(params, obs [N, ...]) -> (dist [N], value [N])``.
          trajectory: Trajectory ``[T, B, ...]``; its ``behaviour_value``, where present,
            must be the values of ``params`` (policy lag 0).

        Returns:
          PPOBatch ``[T, B, ...]``.
        """
        traj = trajectory
        if self.staleness_correction in staleness.PROXIMAL:
            return self.corrected(traj, *proximal_pass(params, apply_fn, traj))
        return self.batch(traj, *rollout_values(params, apply_fn, traj))

    def batch(self, traj: Trajectory, value_tm1: Array, bootstrap_value: Array,
              log_rhos: Array | None = None) -> losses.PPOBatch:
        """The PPOBatch of ``traj`` from the values ``value_tm1 [T, B]`` and
        ``bootstrap_value [B]``: GAE advantages and targets, or with ``log_rhos [T, B]``
        (``log pi_prox(a) - log mu(a)``) V-trace's (``returns.vtrace_advantages``, lambda
        ``gae_lambda``, clip ``clip_rho``)."""
        inputs = returns.step_inputs(
            traj.reward, traj.terminated, traj.truncated, value_tm1, bootstrap_value,
            self.gamma, self.gae_lambda, traj.final_value,
        )
        if log_rhos is None:
            adv, targets = returns.gae(traj.reward, inputs.discount_t, value_tm1,
                                       inputs.value_t, inputs.lambda_)
        else:
            adv, targets = returns.vtrace_advantages(
                value_tm1, inputs.value_t, traj.reward, inputs.discount_t, log_rhos,
                inputs.lambda_, self.clip_rho, cut=inputs.cut)
        return losses.PPOBatch(
            obs=traj.obs,
            action=traj.action,
            behaviour_dist_params=traj.behaviour_dist_params,
            old_value=value_tm1,
            advantages=adv,
            targets=targets,
            core_state=traj.core_state,
            first=traj.first,
        )

    def corrected(self, traj: Trajectory, value_tm1: Array, bootstrap_value: Array,
                  prox_log_prob: Array, behaviour_log_prob: Array) -> losses.PPOBatch:
        """The PPOBatch of a correction of ``staleness.PROXIMAL`` from ``proximal_pass``'s
        outputs (all ``[T, B]`` but ``bootstrap_value [B]``), with its per-sample inputs and
        statistics (``stale/prox_kl`` always; ``decoupled``: ``stale/weight_mean``,
        ``stale/truncated_frac``; ``filter``: ``stale/filtered_frac``)."""
        log_rho = prox_log_prob - behaviour_log_prob
        vtrace = self.staleness_correction == staleness.VTRACE
        batch = self.batch(traj, value_tm1, bootstrap_value, log_rho if vtrace else None)
        stats = {"prox_kl": jnp.expm1(log_rho) - log_rho}
        if self.staleness_correction == staleness.DECOUPLED:
            cap = self.decoupled_max_weight
            weight = staleness.decoupled_weight(prox_log_prob, behaviour_log_prob, cap)
            # Weights within CLIP_TOL of the cap are on-policy roundoff, not truncations.
            truncated = log_rho > jnp.log(cap) + losses.CLIP_TOL
            stats |= {"weight_mean": weight, "truncated_frac": truncated.astype(jnp.float32)}
            return dataclasses.replace(batch, prox_log_prob=prox_log_prob,
                                       sample_weight=weight, stale_stats=stats)
        if self.staleness_correction == staleness.FILTER:
            mask = staleness.divergence_mask(prox_log_prob, behaviour_log_prob,
                                             self.filter_threshold)
            stats["filtered_frac"] = 1.0 - mask
            return dataclasses.replace(batch, sample_weight=mask, stale_stats=stats)
        return dataclasses.replace(batch, stale_stats=stats)

    def split_ready(self, batch: losses.PPOBatch,
                    axis_name: str | None) -> tuple[losses.PPOBatch, "PPO"]:
        """Advantages normalised over the whole minibatch (across ``axis_name`` devices) where
        ``norm_adv``, and this PPO without normalisation for its chunks."""
        if not self.norm_adv:
            return batch, self
        return (dataclasses.replace(batch,
                                    advantages=losses.normalize(batch.advantages, axis_name)),
                dataclasses.replace(self, norm_adv=False))

    def loss(self, params: Params, apply_fn: ApplyFn, batch: losses.PPOBatch,
             axis_name: str | None) -> tuple[Array, losses.LossMetrics]:
        """``losses.ppo_loss`` with ``objective()``; advantage statistics across
        ``axis_name`` devices."""
        return losses.ppo_loss(
            params, apply_fn, batch, clip_eps=self.clip_eps, vf_coef=self.vf_coef,
            ent_coef=self.ent_coef, clip_vloss=self.clip_vloss, norm_adv=self.norm_adv,
            axis_name=axis_name, objective=self.objective(),
        )

    def objective(self) -> losses.Objective | None:
        """The per-sample policy objective of ``(r, A)``: None, the clipped surrogate. A
        PPO-family algorithm of the user's overrides this alone (docs/extending.md)."""
        return None
