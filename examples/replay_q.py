"""Q-learning from a replay of recent rollouts, an algorithm of the user's own that owns its
learning (docs/extending.md, "An algorithm that owns its learning"; docs/design.md, "The
algorithm protocol"):

- its heads: Q-values ``[N, A]`` on the torso (``rlcore.networks.QHead``), the greedy
  policy and ``max_a Q`` as the network's ``(dist, value)``;
- its acting: epsilon-greedy, epsilon linear from ``epsilon_start`` to ``epsilon_end`` over
  ``epsilon_updates`` updates (``rlcore.distributions.epsilon_greedy``);
- its own state: target params and a per-env ring of the last ``replay_rollouts`` rollouts'
  transitions (``rlcore.types.ByEnv``, split over the devices like the envs);
- its update: ``gradient_steps`` minibatches drawn uniformly from the filled rows
  (``rlcore.replay.replay_indices``), one-step TD targets of the target params, the target
  refreshed every ``target_every`` updates.

A small DQN (Mnih et al. 2015) without its tricks beyond the target network: no n-step
returns, no double Q, Huber-free squared TD error. Discrete actions only. Run it with
``--config.algorithm=examples.replay_q:ReplayQ``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from rlcore.algorithms.base import MEAN, SAMPLES, AlgorithmBase, Schedule, require_unit
from rlcore.distributions import Distribution, epsilon_greedy
from rlcore.errors import ConfigError
from rlcore.losses import LossMetrics
from rlcore.networks import QHead
from rlcore.replay import replay_indices
from rlcore.staleness import NONE
from rlcore.types import ApplyFn, Array, ByEnv, EnvSpec, Params, PRNGKey, Trajectory, take_envs


@struct.dataclass
class Transitions:
    """One-step transitions, leaves ``[R, B, ...]`` (a rollout's, or the ring's)."""

    obs: Array
    action: Array
    reward: Array
    terminal: Array  # float32: 1 where the step ended the episode in a terminal state
    valid: Array  # float32: 0 where the step was truncated (next_obs is a reset's)
    next_obs: Array

    def take_samples(self, rows: Array, envs: Array) -> "Transitions":
        """``x[rows, envs]`` of every leaf (index arrays of one shape)."""
        return jax.tree.map(lambda x: x[rows, envs], self)


@struct.dataclass
class ReplayState:
    """The algorithm's own state: ``target`` params and the ring ``ByEnv(Transitions)``
    ``[replay_rollouts * T, B, ...]``."""

    target: Params
    ring: ByEnv


@struct.dataclass
class QBatch:
    """A minibatch of transitions ``[S, b]`` and the target params it bootstraps on."""

    data: Transitions
    target: Params

    @property
    def obs(self) -> Array:
        """``[S, b, *obs_shape]``: what micro-batches split (axis 1)."""
        return self.data.obs

    def take_envs(self, idx: Array) -> "QBatch":
        """Columns ``idx [c]`` of the minibatch (a micro-batch), the same target params."""
        return QBatch(data=take_envs(self.data, idx), target=self.target)


def transitions_of(trajectory: Trajectory) -> Transitions:
    """The rollout's transitions ``[T, B]``: ``next_obs[t] = obs[t + 1]`` (the bootstrap
    observation after the last step)."""
    next_obs = jnp.concatenate([trajectory.obs[1:], trajectory.bootstrap_obs[None]])
    return Transitions(obs=trajectory.obs, action=trajectory.action, reward=trajectory.reward,
                       terminal=trajectory.terminated.astype(jnp.float32),
                       valid=1.0 - trajectory.truncated.astype(jnp.float32),
                       next_obs=next_obs)


@dataclasses.dataclass(frozen=True)
class ReplayQ(AlgorithmBase):
    """Hyperparameters: ``gamma`` and ``num_minibatches`` (the config's: the blocks of envs
    a minibatch draws from) and its own (``--config.algo.NAME``)."""

    gamma: float
    num_minibatches: int
    replay_rollouts: int = 16
    gradient_steps: int = 32
    samples_per_block: int = 128
    target_every: int = 2
    epsilon_start: float = 1.0
    epsilon_end: float = 0.05
    epsilon_updates: int = 40

    minibatch_kinds: ClassVar[tuple[str, ...]] = (SAMPLES,)
    loss_reduction: ClassVar[str] = MEAN
    staleness_corrections: ClassVar[tuple[str, ...]] = (NONE,)

    def check(self) -> None:
        """Counts of at least 1 (a ring of no rollouts, an update of no steps, a target
        never refreshed run nothing), epsilons in [0, 1], a schedule of 0 or more updates."""
        for name in ("replay_rollouts", "gradient_steps", "samples_per_block", "target_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"algo.{name}: must be an integer >= 1, got "
                                  f"{getattr(self, name)}")
        require_unit(self, "epsilon_start", "epsilon_end")
        if self.epsilon_updates < 0:
            raise ConfigError(f"algo.epsilon_updates: must be >= 0, got {self.epsilon_updates}")

    @classmethod
    def heads(cls, spec: EnvSpec) -> nn.Module:
        """``QHead`` of the env's actions (refused for a box: Q-learning needs a finite set)."""
        if spec.action_shape:
            raise ConfigError("algorithm: ReplayQ needs discrete actions")
        return QHead(spec.num_actions)

    def epsilon(self, update: Array) -> Array:
        """Epsilon at ``update``: linear from start to end over ``epsilon_updates``."""
        frac = jnp.clip(update / max(self.epsilon_updates, 1), 0.0, 1.0)
        return self.epsilon_start + frac * (self.epsilon_end - self.epsilon_start)

    def act(self, dist: Distribution, update: Array) -> Distribution:
        return epsilon_greedy(dist.logits, self.epsilon(update))

    def init_state(self, params: Params, spec: EnvSpec, num_envs: int,
                   num_steps: int) -> ReplayState:
        rows = self.replay_rollouts * num_steps
        zeros = lambda shape, dtype: jnp.zeros((rows, num_envs, *shape), dtype)
        obs = zeros(spec.obs_shape, spec.obs_dtype)
        ring = Transitions(obs=obs, action=zeros((), jnp.int32), reward=zeros((), jnp.float32),
                           terminal=zeros((), jnp.float32), valid=zeros((), jnp.float32),
                           next_obs=obs)
        return ReplayState(target=params, ring=ByEnv(ring))

    def prepare(self, params: Params, apply_fn: ApplyFn, trajectory: Trajectory) -> Transitions:
        del params, apply_fn
        return transitions_of(trajectory)

    def remember(self, extra: ReplayState, data: Transitions,
                 update: Array) -> tuple[ReplayState, tuple[Transitions, Array, Params]]:
        """The rollout written over the oldest in the ring; the source is the ring, its
        filled rows and the target params."""
        t = data.reward.shape[0]
        start = (update % self.replay_rollouts) * t
        ring = jax.tree.map(lambda r, x: jax.lax.dynamic_update_slice_in_dim(r, x, start, 0),
                            extra.ring.data, data)
        filled = jnp.minimum(update + 1, self.replay_rollouts) * t
        return extra.replace(ring=ByEnv(ring)), (ring, filled, extra.target)

    def schedule(self, source: Any, extra: Any, key: PRNGKey,
                 axis_name: str | None) -> Schedule:
        ring, filled, target = source
        idx = replay_indices(key, filled, ring.reward.shape[1], self.num_minibatches,
                             self.gradient_steps, self.samples_per_block, axis_name)
        return idx, lambda src, i: QBatch(data=src[0].take_samples(*i), target=src[2])

    def after_update(self, extra: ReplayState, params: Params, update: Array) -> ReplayState:
        refresh = update % self.target_every == 0
        return extra.replace(target=jax.tree.map(lambda p, q: jnp.where(refresh, p, q),
                                                 params, extra.target))

    def split_ready(self, batch: QBatch, axis_name: str | None) -> tuple[QBatch, "ReplayQ"]:
        """As it is: the loss is a mean over equal columns, so the chunks' mean is it."""
        del axis_name
        return batch, self

    def loss(self, params: Params, apply_fn: ApplyFn, batch: QBatch,
             axis_name: str | None) -> tuple[Array, LossMetrics]:
        """Mean squared one-step TD error over the minibatch's samples, a truncated step's
        counted as 0 (so every device's share has the same weight, and the platform's
        gradient mean across ``axis_name`` devices is the whole minibatch's)."""
        del axis_name
        d = batch.data
        flat = lambda x: x.reshape((-1,) + x.shape[2:])
        dist, _ = apply_fn(params, flat(d.obs))
        q = jnp.take_along_axis(dist.logits, flat(d.action)[:, None], axis=-1)[:, 0]
        _, next_value = apply_fn(batch.target, flat(d.next_obs))
        target = flat(d.reward) + self.gamma * (1.0 - flat(d.terminal)) * next_value
        td = q - jax.lax.stop_gradient(target)
        loss = jnp.mean(flat(d.valid) * td ** 2)
        zero = jnp.zeros(())
        return loss, LossMetrics(total=loss, policy=zero, value=loss, entropy=zero,
                                 approx_kl=zero, clip_frac=zero)
