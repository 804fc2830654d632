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
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax.numpy as jnp

from rlcore import losses, returns
from rlcore.algorithms.base import MEAN, SAMPLES, SEQUENCES, FromHParams, ValuePass
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


@dataclasses.dataclass(frozen=True)
class PPO(FromHParams):
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
    """

    gamma: float
    gae_lambda: float
    clip_eps: float
    clip_vloss: bool
    norm_adv: bool
    vf_coef: float
    ent_coef: float

    # old value, advantages and targets: float32 each
    prepared_step_bytes: ClassVar[int] = 12
    # Feed-forward PPO's loss is a mean over independent samples (GAE ran before the
    # epochs): minibatches of single (step, env) samples by default, whole sequences on
    # request (``minibatch_kind="sequences"``; docs/design.md, "One update loop").
    minibatch_kinds: ClassVar[tuple[str, ...]] = (SAMPLES, SEQUENCES)
    loss_reduction: ClassVar[str] = MEAN

    @classmethod
    def value_pass(cls, num_steps: int, num_envs: int, rollout_values: bool) -> ValuePass:
        """With the rollout's values only the bootstrap values (``num_envs`` samples); else
        every value of the rollout, recomputed over a copy of obs and bootstrap obs in chunks
        of ``VALUE_CHUNK``."""
        if rollout_values:
            return ValuePass(copied_obs=0, forward_samples=num_envs)
        n = (num_steps + 1) * num_envs
        return ValuePass(copied_obs=n, forward_samples=min(VALUE_CHUNK, n))

    def prepare(self, params: Params, apply_fn: ApplyFn,
                trajectory: Trajectory) -> losses.PPOBatch:
        """Values under ``params``, GAE advantages and targets of a whole rollout.

        Args:
          params: the learner's params at the start of the update.
          apply_fn: ``(params, obs [N, ...]) -> (dist [N], value [N])``.
          trajectory: Trajectory ``[T, B, ...]``; its ``behaviour_value``, where present,
            must be the values of ``params`` (policy lag 0).

        Returns:
          PPOBatch ``[T, B, ...]``.
        """
        traj = trajectory
        t, b = traj.reward.shape
        if traj.core_state is not None:  # recurrent: one unroll from the stored state
            obs_all, first_all = losses.with_bootstrap(traj)
            value_all = unroll_network(apply_fn, params, obs_all, traj.core_state,
                                       first_all)[1]
            value_tm1, bootstrap_value = value_all[:t], value_all[t]
        elif traj.behaviour_value is not None:  # the rollout ran these params (lag 0)
            value_tm1 = traj.behaviour_value
            bootstrap_value = apply_fn(params, traj.bootstrap_obs)[1]
        else:
            obs_all = jnp.concatenate([traj.obs, traj.bootstrap_obs[None]], axis=0)
            value_all = values_in_chunks(params, apply_fn,
                                         obs_all.reshape((-1,) + obs_all.shape[2:]))
            value_all = value_all.reshape((t + 1, b))
            value_tm1, bootstrap_value = value_all[:t], value_all[t]
        inputs = returns.step_inputs(
            traj.reward, traj.terminated, traj.truncated, value_tm1, bootstrap_value,
            self.gamma, self.gae_lambda, traj.final_value,
        )
        adv, targets = returns.gae(traj.reward, inputs.discount_t, value_tm1, inputs.value_t,
                                   inputs.lambda_)
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
        """``losses.ppo_loss``; advantage statistics across ``axis_name`` devices."""
        return losses.ppo_loss(
            params, apply_fn, batch, clip_eps=self.clip_eps, vf_coef=self.vf_coef,
            ent_coef=self.ent_coef, clip_vloss=self.clip_vloss, norm_adv=self.norm_adv,
            axis_name=axis_name,
        )
