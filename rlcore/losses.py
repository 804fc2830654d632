"""PPO and IMPALA losses, pure functions of params and a time-major minibatch.

Both take ``apply_fn(params, obs) -> (dist, value)`` with ``obs`` ``[N, *obs_shape]``,
``dist`` an action distribution of batch ``[N]`` (``rlcore.distributions``: categorical or
diagonal Gaussian; the behaviour policy's is rebuilt from the stored parameters with the
same family's ``from_params``) and ``value`` ``[N]``, and return ``(loss, LossMetrics)``.
For a recurrent network (the minibatch carries a ``core_state``) ``apply_fn`` is its sequence
apply, ``(params, obs [T, b, ...], core [b, H], first [T, b]) -> (dist, value, core)``,
and the losses re-run the core over each whole sequence from the stored start state
(``rlcore.networks.unroll_network``): truncated backpropagation through the rollout.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import chex
import jax
import jax.numpy as jnp
from flax import struct

from rlcore import returns
from rlcore.distributions import Distribution
from rlcore.networks import unroll_network
from rlcore.types import (
    ApplyFn,
    Array,
    CoreState,
    Params,
    Scalar,
    Trajectory,
    map_env_axis,
    take_samples,
)

# A per-sample policy objective of the ratio and the advantage, both ``[T, b]`` (``ppo_loss``).
Objective = Callable[[Array, Array], Array]


@struct.dataclass
class PPOBatch:
    """A PPO minibatch, time-major ``[T, b, ...]``.

    Attributes:
      obs: ``[T, b, *obs_shape]``.
      action: ``[T, b]`` int32 or ``[T, b, D]`` float32 (see ``Trajectory``).
      behaviour_dist_params: ``[T, b, P]`` distribution parameters of the acting policy (the
        "old" policy; ``Trajectory.behaviour_dist_params``).
      old_value: ``[T, b]`` value estimates the targets were built from (for value clipping).
      advantages: ``[T, b]`` GAE advantages (not normalised).
      targets: ``[T, b]`` value targets.
      core_state: recurrent agents: CoreState ``[b, H]`` before step 0 (see
        ``Trajectory``); None for feed-forward agents.
      first: recurrent agents: ``[T, b]`` bool episode starts; None for feed-forward agents.
      prox_log_prob: staleness correction ``decoupled``: ``[T, b]`` ``log pi_prox(a)``, the
        proximal policy's (the params at the update's start), which the ratio is clipped
        against; None: the ratio is against the behaviour policy.
      sample_weight: ``[T, b]`` per-sample weights of the policy term (``decoupled``: the
        truncated importance weight; ``filter``: the 0/1 mask), constants; None: 1.
      stale_stats: per-sample ``[T, b]`` values whose minibatch means the loss reports as
        ``LossMetrics.staleness`` (``rlcore.staleness``); None without a correction.
    """

    obs: jax.Array
    action: jax.Array
    behaviour_dist_params: jax.Array
    old_value: jax.Array
    advantages: jax.Array
    targets: jax.Array
    core_state: CoreState | None = None
    first: jax.Array | None = None
    prox_log_prob: jax.Array | None = None
    sample_weight: jax.Array | None = None
    stale_stats: dict[str, jax.Array] | None = None

    def take_envs(self, idx: Array) -> "PPOBatch":
        """The envs ``idx [b]``: leaves ``[T, b, ...]``, ``core_state`` ``[b, H]``."""
        return map_env_axis(self, lambda x, axis: jnp.take(x, idx, axis=axis), ("core_state",))

    def take_samples(self, steps: Array, envs: Array) -> "PPOBatch":
        """Single samples: step ``steps[i, j]`` of env ``envs[i, j]`` (both ``[T, b]``) at
        ``[i, j]`` of every leaf (``[T, b, ...]``; the first axis is then no longer time)."""
        return take_samples(self, steps, envs)


# On-policy data (Anakin, the first minibatch of an update) has importance weights of exactly
# 1 up to float roundoff, which differs with batch shapes (device count); with clip_rho = 1 a
# plain ``rho > clip_rho`` count would then be a coin flip per sample. Weights within this
# relative margin of the clip are not counted as clipped.
CLIP_TOL = 1e-4


@struct.dataclass
class LossMetrics:
    """Scalars a loss reports (means over the minibatch).

    Attributes:
      total: the loss that is differentiated (PPO: a mean; IMPALA: a sum over the
        minibatch, see ``impala_loss``).
      policy: policy-gradient term.
      value: value (baseline) term before its coefficient.
      entropy: mean policy entropy.
      approx_kl: ``mean((ratio - 1) - log ratio)`` between behaviour and current policy.
      clip_frac: PPO: fraction of ratios outside ``1 +- clip_eps``; IMPALA: fraction of
        importance weights clipped at ``clip_rho`` by more than ``CLIP_TOL`` (relative).
      staleness: a staleness correction's scalars by name (``PPOBatch.stale_stats``), logged
        as ``stale/<name>``; None without one (no key is logged).
    """

    total: jax.Array
    policy: jax.Array
    value: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array
    clip_frac: jax.Array
    staleness: dict[str, jax.Array] | None = None

    def scalars(self) -> dict[str, float]:
        """``{"loss/<name>": float, "stale/<name>": float}`` of host (scalar) values, for
        metrics.jsonl."""
        out = {f"loss/{k}": float(v) for k, v in vars(self).items() if k != "staleness"}
        return out | {f"stale/{k}": float(v) for k, v in (self.staleness or {}).items()}

    @classmethod
    def combine(cls, policy: Array, value: Array, entropy: Array, *, vf_coef: Scalar,
                ent_coef: Scalar, approx_kl: Array, clip_frac: Array,
                staleness: dict[str, Array] | None = None) -> tuple[Array, "LossMetrics"]:
        """``(total, LossMetrics)`` with ``total = policy + vf_coef * value - ent_coef *
        entropy``, the actor-critic loss both algorithms differentiate."""
        total = policy + vf_coef * value - ent_coef * entropy
        return total, cls(total=total, policy=policy, value=value, entropy=entropy,
                          approx_kl=approx_kl, clip_frac=clip_frac, staleness=staleness)


def _apply_time_major(params: Params, apply_fn: ApplyFn, obs: Array,
                      core_state: CoreState | None = None,
                      first: Array | None = None) -> tuple[Distribution, Array]:
    """Network on ``[T, b, *obs_shape]`` (a recurrent one from ``core_state [b, H]`` with
    episode starts ``first [T, b]``); returns the distribution (batch ``[T, b]``) and
    ``[T, b]`` values."""
    return unroll_network(apply_fn, params, obs, core_state, first)


def with_bootstrap(trajectory: Trajectory) -> tuple[Array, Array | None]:
    """The rollout's observations with the bootstrap one, ``[T + 1, b, ...]``, and for a
    recurrent agent their episode starts ``[T + 1, b]`` (the bootstrap observation starts
    one where the last step ended one); None for feed-forward agents."""
    obs_all = jnp.concatenate([trajectory.obs, trajectory.bootstrap_obs[None]], axis=0)
    if trajectory.first is None:
        return obs_all, None
    done = trajectory.terminated[-1] | trajectory.truncated[-1]
    return obs_all, jnp.concatenate([trajectory.first, done[None]], axis=0)


def _apply_with_bootstrap(params: Params, apply_fn: ApplyFn,
                          trajectory: Trajectory) -> tuple[Distribution, Array, Array]:
    """The network over the rollout's observations and the bootstrap one in one pass (a
    recurrent core runs on into the bootstrap step): ``(dist [T, b], value_tm1 [T, b],
    bootstrap_value [b])``."""
    t = trajectory.reward.shape[0]
    obs_all, first_all = with_bootstrap(trajectory)
    dist_all, value_all = _apply_time_major(params, apply_fn, obs_all, trajectory.core_state,
                                            first_all)
    return jax.tree.map(lambda x: x[:t], dist_all), value_all[:t], value_all[t]


def _log_probs(dist: Distribution, behaviour_params: Array,
               action: Array) -> tuple[Array, Array, Array]:
    """``(log pi(a), log mu(a), H(pi))``, each ``[T, b]``: the current policy ``dist``, the
    behaviour policy of the same family rebuilt from ``behaviour_params [T, b, P]``."""
    old_log_pa = type(dist).from_params(behaviour_params).log_prob(action)
    log_pa, entropy = dist.log_prob_entropy(action)
    return log_pa, old_log_pa, entropy


def _mean(x: Array, axis_name: str | None) -> Array:
    """Mean over all elements, and over ``axis_name`` devices when given."""
    m = jnp.mean(x)
    return jax.lax.pmean(m, axis_name) if axis_name is not None else m


def normalize(x: Array, axis_name: str | None = None, eps: float = 1e-8) -> Array:
    """Standardises ``x`` (any shape, e.g. advantages ``[T, b]``) with mean and std over all
    of it, across ``axis_name`` devices; same shape."""
    mean = _mean(x, axis_name)
    var = _mean(jnp.square(x - mean), axis_name)
    return (x - mean) / (jnp.sqrt(var) + eps)


def _clipped_surrogate(log_pa: Array, ratio: Array, adv: Array, batch: PPOBatch,
                       clip_eps: Scalar, objective: Objective | None = None
                       ) -> tuple[Array, Array]:
    """``(-mean(w * min(r A, clip(r, 1 - eps, 1 + eps) A)), r)``, all ``[T, b]`` but the
    mean: ``r`` is ``ratio`` (``pi/mu``), or ``pi/pi_prox`` where the batch has
    ``prox_log_prob``; ``w`` its ``sample_weight``, or 1; ``objective(r, A)`` in place of
    the clipped one where given."""
    r = ratio if batch.prox_log_prob is None else jnp.exp(log_pa - batch.prox_log_prob)
    if objective is not None:
        surrogate = objective(r, adv)
    else:
        surrogate = jnp.minimum(r * adv, jnp.clip(r, 1.0 - clip_eps, 1.0 + clip_eps) * adv)
    if batch.sample_weight is not None:
        surrogate = batch.sample_weight * surrogate
    return -jnp.mean(surrogate), r


def _check_ppo_batch(batch: PPOBatch) -> None:
    """A PPO minibatch's ranks and shapes (``[T, b]`` values, ``[T, b, P]`` distribution
    parameters)."""
    chex.assert_rank([batch.old_value, batch.advantages, batch.targets], 2)
    chex.assert_equal_shape([batch.old_value, batch.advantages, batch.targets])
    chex.assert_equal_shape_prefix([batch.action, batch.old_value], 2)
    chex.assert_rank(batch.behaviour_dist_params, 3)


def ppo_loss(
    params: Params,
    apply_fn: ApplyFn,
    batch: PPOBatch,
    *,
    clip_eps: Scalar,
    vf_coef: Scalar,
    ent_coef: Scalar,
    clip_vloss: bool = False,
    norm_adv: bool = True,
    axis_name: str | None = None,
    objective: Objective | None = None,
) -> tuple[Array, LossMetrics]:
    """Clipped-surrogate PPO loss (Schulman et al. 2017, arXiv 1707.06347).

    ``L = -mean(min(r A, clip(r, 1-eps, 1+eps) A)) + vf_coef * 0.5 * mean((V - G)^2)
    - ent_coef * mean(H)`` with ``r = pi(a|s) / mu(a|s)``. With ``clip_vloss`` the value
    term is the larger of the plain and the clipped error, ``V`` clipped to
    ``old_value +- clip_eps``. With ``norm_adv`` advantages are standardised over the whole
    minibatch, across ``axis_name`` devices when given.

    Staleness corrections (``rlcore.staleness``) change the policy term through the batch;
    ``approx_kl`` is between behaviour and current policy, ``clip_frac`` of the ratio.

    Args:
      params: network parameters.
      apply_fn: ``(params, obs [N, ...]) -> (dist [N], value [N])``.
      batch: PPOBatch with leaves ``[T, b, ...]``.
      clip_eps: surrogate (and value) clipping range.
      vf_coef: value-loss coefficient.
      ent_coef: entropy-bonus coefficient.
      clip_vloss: clip the value loss as in the PPO2 baselines.
      norm_adv: standardise advantages per minibatch.
      axis_name: device axis the minibatch is split over, or None.
      objective: ``(r, A) -> [T, b]``, a per-sample policy objective maximised in place of
        the clipped surrogate (None).

    Returns:
      ``(loss, LossMetrics)``; the loss is this device's share (mean over local elements),
      so averaging gradients over ``axis_name`` gives the gradient of the global mean.
    """
    _check_ppo_batch(batch)
    dist, value = _apply_time_major(params, apply_fn, batch.obs, batch.core_state, batch.first)
    log_pa, old_log_pa, entropy = _log_probs(dist, batch.behaviour_dist_params, batch.action)
    log_ratio = log_pa - old_log_pa
    ratio = jnp.exp(log_ratio)
    adv = normalize(batch.advantages, axis_name) if norm_adv else batch.advantages
    policy, r = _clipped_surrogate(log_pa, ratio, adv, batch, clip_eps, objective)

    value_err = jnp.square(value - batch.targets)
    if clip_vloss:
        clipped = batch.old_value + jnp.clip(value - batch.old_value, -clip_eps, clip_eps)
        value_err = jnp.maximum(value_err, jnp.square(clipped - batch.targets))
    return LossMetrics.combine(
        policy, 0.5 * jnp.mean(value_err), jnp.mean(entropy), vf_coef=vf_coef,
        ent_coef=ent_coef, approx_kl=jnp.mean((ratio - 1.0) - log_ratio),
        clip_frac=jnp.mean((jnp.abs(r - 1.0) > clip_eps).astype(jnp.float32)),
        staleness=jax.tree.map(jnp.mean, batch.stale_stats),  # None stays None
    )


def global_sum(local_mean: Array, count: int, axis_name: str | None) -> Array:
    """The sum over a minibatch split over ``axis_name`` devices, from this device's mean over
    its ``count`` elements: the mean times the global count ``count * devices``, so the mean
    of the devices' gradients is the gradient of the global sum whatever the device count.
    (Cleanba sums per learner device and averages the devices' gradients; with one learner
    device the two agree.)"""
    devices = jax.lax.psum(1, axis_name) if axis_name is not None else 1
    return local_mean * (count * devices)


def _stopped_vtrace(trajectory: Trajectory, value_tm1: Array, bootstrap_value: Array,
                    log_rhos: Array, *, discount: Scalar, lambda_: Scalar, clip_rho: Scalar,
                    clip_pg_rho: Scalar) -> returns.VTraceOutput:
    """V-trace of a minibatch (``returns.step_inputs``, then ``returns.vtrace``) on values and
    log importance weights whose gradients are stopped: its targets and advantages are
    constants of the loss.

    Args:
      trajectory: Trajectory ``[T, b, ...]`` (rewards, episode ends, ``final_value``).
      value_tm1: ``[T, b]`` values of ``obs``.
      bootstrap_value: ``[b]`` values of ``bootstrap_obs``.
      log_rhos: ``[T, b]`` ``log pi(a|x) - log mu(a|x)``.
      discount, lambda_, clip_rho, clip_pg_rho: as ``impala_loss``.

    Returns:
      VTraceOutput of ``[T, b]`` arrays.
    """
    inputs = returns.step_inputs(
        trajectory.reward, trajectory.terminated, trajectory.truncated,
        jax.lax.stop_gradient(value_tm1), jax.lax.stop_gradient(bootstrap_value), discount,
        lambda_, trajectory.final_value)
    return returns.vtrace(
        jax.lax.stop_gradient(value_tm1), inputs.value_t, trajectory.reward, inputs.discount_t,
        jax.lax.stop_gradient(log_rhos), inputs.lambda_, clip_rho, clip_pg_rho, cut=inputs.cut)


def impala_loss(
    params: Params,
    apply_fn: ApplyFn,
    trajectory: Trajectory,
    *,
    discount: Scalar,
    vf_coef: Scalar,
    ent_coef: Scalar,
    lambda_: Scalar = 1.0,
    clip_rho: Scalar = 1.0,
    clip_pg_rho: Scalar = 1.0,
    axis_name: str | None = None,
) -> tuple[Array, LossMetrics]:
    """IMPALA actor-critic loss with V-trace targets (Espeholt et al. 2018, arXiv 1802.01561).

    ``L = -sum(stop_grad(pg_adv) * log pi(a|x)) + vf_coef * 0.5 * sum((stop_grad(vs) - V)^2)
    - ent_coef * sum(H)``, the sums over the minibatch's steps and envs, over all
    ``axis_name`` devices' envs (``global_sum``). The scale is the IMPALA authors',
    TorchBeast's and Cleanba's (they sum over time and batch), for which their RMSProp eps
    0.01 and gradient clip 40 were tuned: published hyperparameters mean here what they mean
    there. Truncations cut the trace and bootstrap on the trajectory's ``final_value`` where
    it has one (see ``returns.step_inputs``).

    Args:
      params: network parameters.
      apply_fn: ``(params, obs [N, ...]) -> (dist [N], value [N])``.
      trajectory: Trajectory with leaves ``[T, b, ...]`` and ``bootstrap_obs`` ``[b, ...]``.
      discount: gamma.
      vf_coef: baseline-loss coefficient.
      ent_coef: entropy-bonus coefficient.
      lambda_: V-trace lambda.
      clip_rho: importance-weight clip in the targets.
      clip_pg_rho: importance-weight clip in the policy gradient.
      axis_name: device axis the minibatch's envs are split over, or None.

    Returns:
      ``(loss, LossMetrics)``: the summed loss (also ``LossMetrics.total``); the other
      metrics are means over this device's ``T * b`` elements.
    """
    chex.assert_rank(trajectory.reward, 2)
    chex.assert_equal_shape([trajectory.reward, trajectory.terminated])
    chex.assert_equal_shape_prefix([trajectory.action, trajectory.reward], 2)
    t, b = trajectory.reward.shape
    dist, value_tm1, bootstrap_value = _apply_with_bootstrap(params, apply_fn, trajectory)
    log_pa, mu_log_pa, entropy = _log_probs(dist, trajectory.behaviour_dist_params,
                                            trajectory.action)
    log_rhos = log_pa - mu_log_pa
    vt = _stopped_vtrace(trajectory, value_tm1, bootstrap_value, log_rhos, discount=discount,
                         lambda_=lambda_, clip_rho=clip_rho, clip_pg_rho=clip_pg_rho)
    policy = -jnp.mean(jax.lax.stop_gradient(vt.pg_advantages) * log_pa)
    value_loss = 0.5 * jnp.mean(jnp.square(jax.lax.stop_gradient(vt.targets) - value_tm1))
    mean_total, metrics = LossMetrics.combine(
        policy, value_loss, jnp.mean(entropy), vf_coef=vf_coef, ent_coef=ent_coef,
        approx_kl=jnp.mean(jnp.expm1(log_rhos) - log_rhos),
        clip_frac=jnp.mean((log_rhos > jnp.log(clip_rho) + CLIP_TOL).astype(jnp.float32)),
    )
    total = global_sum(mean_total, t * b, axis_name)
    return total, dataclasses.replace(metrics, total=total)
