"""PQN: Q-learning without a replay buffer or a target network, from the last rollout of
many envs (Gallici et al. 2024, "Simplifying Deep Temporal Difference Learning", arXiv
2407.04811); docs/algorithms.md, "PQN".

What it owns of the algorithm protocol (docs/design.md, "The algorithm protocol"):

- its heads: Q-values on the torso (``rlcore.networks.QHead``): the network's ``dist`` is
  the greedy policy (``Categorical(logits=Q)``) and its ``value`` ``max_a Q``; the paper's
  LayerNorm is the config's ``layer_norm``;
- its acting: epsilon-greedy (``rlcore.distributions.epsilon_greedy``), epsilon linear from
  ``epsilon_start`` to ``epsilon_finish`` over the first ``epsilon_fraction`` of the updates
  of ``epsilon_env_steps`` env steps (0: the run's ``total_env_steps``), the reference's
  ``TOTAL_TIMESTEPS_DECAY``: a shorter run keeps the schedule;
- its update: Q(lambda) targets over the rollout (``rlcore.returns.q_lambda``) from the
  greedy values of the learner's params at the update's start (``ppo.rollout_values``:
  the rollout's own where it ran those params, else recomputed, so a stale rollout of a
  Sebulba actor still gets a fresh target), then the platform's epochs of minibatches of
  ``0.5 (Q(s, a) - G)^2`` (or Huber's loss).

A recurrent agent (``recurrent=lstm|gru``, the reference's ``pqn_rnn``) re-runs its core
over whole sequences from their stored start states, for the targets and in the loss.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, cast

import jax
import jax.numpy as jnp
import optax
from flax import struct

from rlcore import returns
from rlcore.algorithms.base import (
    MEAN,
    SAMPLES,
    SEQUENCES,
    AlgorithmBase,
    decay_updates,
    linear_epsilon,
    require_unit,
)
from rlcore.algorithms.ppo import rollout_values
from rlcore.distributions import Categorical, Distribution, epsilon_greedy
from rlcore.errors import ConfigError
from rlcore.losses import LossMetrics
from rlcore.networks import QHead, unroll_network
from rlcore.staleness import NONE
from rlcore.types import (
    ApplyFn,
    Array,
    CoreState,
    EnvSpec,
    Params,
    Trajectory,
    map_env_axis,
    take_samples,
)

MSE, HUBER = "mse", "huber"  # the values of ``PQN.td_loss``


def q_values(dist: Distribution) -> Array:
    """``Q [..., A]``: the logits of ``QHead``'s categorical."""
    return cast(Categorical, dist).logits


@struct.dataclass
class PQNBatch:
    """A PQN minibatch, time-major ``[T, b, ...]``.

    Attributes:
      obs: ``[T, b, *obs_shape]``.
      action: ``[T, b]`` int32.
      targets: ``[T, b]`` Q(lambda) targets (constants of the loss).
      core_state: recurrent agents: CoreState ``[b, H]`` before step 0 (``Trajectory``);
        None for feed-forward agents.
      first: recurrent agents: ``[T, b]`` bool episode starts; None for feed-forward ones.
    """

    obs: jax.Array
    action: jax.Array
    targets: jax.Array
    core_state: CoreState | None = None
    first: jax.Array | None = None

    def take_envs(self, idx: Array) -> "PQNBatch":
        """The envs ``idx [b]``: leaves ``[T, b, ...]``, ``core_state`` ``[b, H]``."""
        return map_env_axis(self, lambda x, axis: jnp.take(x, idx, axis=axis), ("core_state",))

    def take_samples(self, steps: Array, envs: Array) -> "PQNBatch":
        """Single samples: step ``steps[i, j]`` of env ``envs[i, j]`` (both ``[T, b]``)."""
        return take_samples(self, steps, envs)


@dataclasses.dataclass(frozen=True)
class PQN(AlgorithmBase):
    """PQN's hyperparameters: the config's ``gamma``, its ``gae_lambda`` as Q(lambda)'s
    lambda, the run's size (for the epsilon schedule), and its own (``--config.algo.NAME``;
    the defaults are the reference's MinAtar settings).

    Attributes:
      gamma: discount factor.
      gae_lambda: the lambda of the Q(lambda) targets.
      num_envs, num_steps, total_env_steps: the run's size (the config's).
      epsilon_start, epsilon_finish: epsilon of the first update and after the decay.
      epsilon_fraction: the share of the schedule's updates epsilon decays over.
      epsilon_env_steps: env steps the schedule spans (0: ``total_env_steps``).
      td_loss: ``mse`` (``0.5 delta^2``, the reference's) or ``huber`` (delta 1).
      reward_scale: rewards are multiplied by it in the targets (the reference's
        ``REW_SCALE``).
    """

    gamma: float
    gae_lambda: float
    num_envs: int
    num_steps: int
    total_env_steps: int
    epsilon_start: float = 1.0
    epsilon_finish: float = 0.05
    epsilon_fraction: float = 0.1
    epsilon_env_steps: int = 0
    td_loss: str = MSE
    reward_scale: float = 1.0

    minibatch_kinds: ClassVar[tuple[str, ...]] = (SAMPLES, SEQUENCES)
    loss_reduction: ClassVar[str] = MEAN
    # Its targets come from the learner's own params, whatever params acted: Q-learning
    # needs no correction of the acting policy's lag.
    staleness_corrections: ClassVar[tuple[str, ...]] = (NONE,)

    def check(self) -> None:
        """Epsilons and the fraction in [0, 1], a schedule of 0 or more env steps, a known
        ``td_loss``."""
        require_unit(self, "epsilon_start", "epsilon_finish", "epsilon_fraction")
        if self.epsilon_env_steps < 0:
            raise ConfigError(f"algo.epsilon_env_steps: must be >= 0 (0: total_env_steps), "
                              f"got {self.epsilon_env_steps}")
        if self.td_loss not in (MSE, HUBER):
            raise ConfigError(f"algo.td_loss: must be {MSE} or {HUBER}, got {self.td_loss!r}")

    @classmethod
    def heads(cls, spec: EnvSpec) -> QHead:
        """``QHead`` of the env's actions (refused for a box: Q-learning's max needs a
        finite set of actions)."""
        if spec.action_shape:
            raise ConfigError("algorithm: pqn needs discrete actions (this env's are a box "
                              f"of shape {tuple(spec.action_shape)})")
        return QHead(spec.num_actions)

    def epsilon(self, update: Array) -> Array:
        """Epsilon of the rollout of update ``update`` (updates done before it; int32 ``[]``):
        linear from ``epsilon_start`` to ``epsilon_finish`` over ``epsilon_fraction`` of the
        schedule's updates (``base.linear_epsilon``)."""
        budget = self.epsilon_env_steps or self.total_env_steps
        decay = decay_updates(self.epsilon_fraction, budget, self.num_envs * self.num_steps)
        return linear_epsilon(update, self.epsilon_start, self.epsilon_finish, decay)

    def act(self, dist: Distribution, update: Array) -> Distribution:
        """Epsilon-greedy on the Q-values (``dist.logits``) at ``epsilon(update)``."""
        return epsilon_greedy(q_values(dist), self.epsilon(update))

    def prepare(self, params: Params, apply_fn: ApplyFn, trajectory: Trajectory) -> PQNBatch:
        """Q(lambda) targets of the rollout from the greedy values of ``params`` (the
        learner's at the update's start); a truncation bootstraps on its final observation's
        value (``Trajectory.final_value``, the acting params'; ``rlcore.returns``).

        Args:
          params: the learner's params at the start of the update.
          apply_fn: ``(params, obs [N, ...]) -> (dist [N], max_a Q [N])``.
          trajectory: Trajectory ``[T, B, ...]``.

        Returns:
          PQNBatch ``[T, B, ...]``.
        """
        traj = trajectory
        value_tm1, bootstrap_value = rollout_values(params, apply_fn, traj)
        reward = traj.reward * self.reward_scale
        inputs = returns.step_inputs(reward, traj.terminated, traj.truncated, value_tm1,
                                     bootstrap_value, self.gamma, self.gae_lambda,
                                     traj.final_value)
        targets = returns.q_lambda(reward, inputs.discount_t, inputs.value_t, inputs.lambda_,
                                   bootstrap_value)
        return PQNBatch(obs=traj.obs, action=traj.action,
                        targets=jax.lax.stop_gradient(targets), core_state=traj.core_state,
                        first=traj.first)

    def split_ready(self, batch: PQNBatch, axis_name: str | None) -> tuple[PQNBatch, "PQN"]:
        """As it is: the loss is a mean over equal chunks, so their mean is it."""
        del axis_name
        return batch, self

    def loss(self, params: Params, apply_fn: ApplyFn, batch: PQNBatch,
             axis_name: str | None) -> tuple[Array, LossMetrics]:
        """The mean over the minibatch of ``0.5 (Q(s, a) - G)^2`` (``mse``) or Huber's loss
        of ``Q(s, a) - G`` (``huber``, delta 1); reported as ``loss/value`` and
        ``loss/total`` (the policy terms are 0). The platform averages the gradient across
        ``axis_name`` devices, each holding an equal share."""
        del axis_name
        dist, _ = unroll_network(apply_fn, params, batch.obs, batch.core_state, batch.first)
        q = jnp.take_along_axis(q_values(dist), batch.action[..., None], axis=-1)[..., 0]
        delta = q - batch.targets
        per_sample = 0.5 * delta ** 2 if self.td_loss == MSE else optax.huber_loss(delta)
        loss = jnp.mean(per_sample)
        zero = jnp.zeros(())
        return loss, LossMetrics(total=loss, policy=zero, value=loss, entropy=zero,
                                 approx_kl=zero, clip_frac=zero)
