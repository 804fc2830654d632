"""DQN: Q-learning from a replay buffer with a target network (Mnih et al. 2015, "Human-level
control through deep reinforcement learning"), with Double DQN (van Hasselt et al. 2016,
arXiv 1509.06461) and n-step returns (Sutton and Barto 2018, section 7.1) as fields;
docs/algorithms.md, "DQN".

What it owns of the algorithm protocol (docs/design.md, "The algorithm protocol"):

- its heads: Q-values on the torso (``rlcore.networks.QHead``), as PQN's;
- its acting: epsilon-greedy, epsilon linear from ``epsilon_start`` to ``epsilon_finish``
  over the first ``epsilon_fraction`` of the run's updates (``base.linear_epsilon``, PQN's
  schedule; CleanRL's ``exploration_fraction``);
- its own state (``DQNState``): the target params and the replay ring
  (``rlcore.replay.Ring``, ``replay.capacity`` transitions split over the devices with the
  envs);
- its update: the rollout written into the ring (``remember``); from ``replay.warmup`` env
  steps on (``learns``), ``replay.ratio x num_envs x num_steps`` gradient steps of
  ``replay.batch_size`` n-step windows each, drawn per env (``rlcore.replay.
  sample_windows``); the target refreshed every ``target_every`` env steps, to the params
  (``tau = 1``) or by Polyak averaging (``tau < 1``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import optax
from flax import struct

from rlcore import replay
from rlcore.algorithms.base import (
    MEAN,
    SAMPLES,
    AlgorithmBase,
    Schedule,
    decay_updates,
    linear_epsilon,
    require_unit,
)
from rlcore.algorithms.pqn import HUBER, MSE, q_values
from rlcore.distributions import Distribution, epsilon_greedy
from rlcore.errors import ConfigError
from rlcore.losses import LossMetrics
from rlcore.networks import QHead
from rlcore.replay import ReplaySettings, Ring, Windows
from rlcore.staleness import NONE
from rlcore.types import ApplyFn, Array, EnvSpec, Params, PRNGKey, Trajectory, take_envs


@struct.dataclass
class DQNState:
    """DQN's own learner state: the ``target`` params and the replay ``ring``."""

    target: Params
    ring: Ring


@struct.dataclass
class DQNBatch:
    """A minibatch of n-step windows ``[S, b]`` and the target params they bootstrap on."""

    data: Windows
    target: Params

    @property
    def obs(self) -> Array:
        """``[S, b, *obs_shape]``: what micro-batches split (axis 1)."""
        return self.data.obs

    def take_envs(self, idx: Array) -> "DQNBatch":
        """Columns ``idx [c]`` of the minibatch (a micro-batch), the same target params."""
        return DQNBatch(data=take_envs(self.data, idx), target=self.target)


@dataclasses.dataclass(frozen=True)
class DQN(AlgorithmBase):
    """DQN's hyperparameters: the config's ``gamma``, the run's size and ``replay`` fields,
    ``anneal_lr`` (refused: its gradient steps per update are the replay ratio's), and its
    own (``--config.algo.NAME``; the defaults are CleanRL ``dqn_jax.py``'s for its classic
    control runs).

    Attributes:
      n_step: steps of the return before bootstrapping (1: one-step DQN).
      double: Double DQN's target, the target net's value of the online net's argmax.
      td_loss: ``mse`` (``(Q - G)^2``, CleanRL's) or ``huber`` (delta 1, the paper's).
      target_every: env steps between target refreshes (a multiple of an update's).
      tau: the refresh's weight of the params (1: a copy; below 1: Polyak averaging).
      epsilon_start, epsilon_finish, epsilon_fraction: the acting schedule over the run.
    """

    gamma: float
    num_envs: int
    num_steps: int
    total_env_steps: int
    replay: ReplaySettings
    anneal_lr: bool
    n_step: int = 1
    double: bool = False
    td_loss: str = MSE
    target_every: int = 500
    tau: float = 1.0
    epsilon_start: float = 1.0
    epsilon_finish: float = 0.05
    epsilon_fraction: float = 0.5

    minibatch_kinds: ClassVar[tuple[str, ...]] = (SAMPLES,)
    loss_reduction: ClassVar[str] = MEAN
    # Its targets come from its own target params, whatever params acted.
    staleness_corrections: ClassVar[tuple[str, ...]] = (NONE,)

    @property
    def steps_per_update(self) -> int:
        """Env steps of one update's rollout, over all envs."""
        return self.num_envs * self.num_steps

    def gradient_steps(self) -> int:
        """Gradient steps per update: ``replay.ratio`` of its env steps."""
        return round(self.replay.ratio * self.steps_per_update)

    def check(self) -> None:
        """Its fields' rules, and the replay fields' against the run's size (a buffer of
        whole rollouts per env, whole gradient steps, an equal share of every env)."""
        require_unit(self, "epsilon_start", "epsilon_finish", "epsilon_fraction")
        _require(self.td_loss in (MSE, HUBER), "algo.td_loss",
                 f"must be {MSE} or {HUBER}, got {self.td_loss!r}")
        _require(0.0 < self.tau <= 1.0, "algo.tau", f"must be in (0, 1], got {self.tau}")
        _require(1 <= self.n_step <= self.num_steps, "algo.n_step",
                 f"must be in [1, num_steps = {self.num_steps}], got {self.n_step}")
        spu, r = self.steps_per_update, self.replay
        _require(self.target_every >= spu and self.target_every % spu == 0, "algo.target_every",
                 f"must be a positive multiple of an update's {spu} env steps "
                 f"(num_envs x num_steps), got {self.target_every}")
        _require(r.capacity % spu == 0, "replay.capacity",
                 f"must be a multiple of an update's {spu} env steps (num_envs x num_steps: "
                 f"each env keeps whole rollouts), got {r.capacity}")
        k = r.ratio * spu
        _require(abs(k - round(k)) < 1e-6 and round(k) >= 1, "replay.ratio",
                 f"{r.ratio} x {spu} env steps per update is {k:g} gradient steps; it must "
                 "be a whole number >= 1")
        _require(r.batch_size % self.num_envs == 0, "replay.batch_size",
                 f"must be a multiple of num_envs ({self.num_envs}: an equal share of every "
                 f"env), got {r.batch_size}")
        _require(not self.anneal_lr, "anneal_lr", "dqn takes a constant learning rate "
                 "(its gradient steps per update are replay.ratio's): set anneal_lr=False")

    @classmethod
    def heads(cls, spec: EnvSpec) -> QHead:
        """``QHead`` of the env's actions (refused for a box: its max needs finite actions)."""
        if spec.action_shape:
            raise ConfigError("algorithm: dqn needs discrete actions (this env's are a box "
                              f"of shape {tuple(spec.action_shape)}; sac takes them)")
        return QHead(spec.num_actions)

    def epsilon(self, update: Array) -> Array:
        """Epsilon of the rollout of update ``update`` (``base.linear_epsilon``)."""
        decay = decay_updates(self.epsilon_fraction, self.total_env_steps,
                              self.steps_per_update)
        return linear_epsilon(update, self.epsilon_start, self.epsilon_finish, decay)

    def act(self, dist: Distribution, update: Array) -> Distribution:
        """Epsilon-greedy on the Q-values at ``epsilon(update)``."""
        return epsilon_greedy(q_values(dist), self.epsilon(update))

    def init_state(self, params: Params, spec: EnvSpec, num_envs: int,
                   num_steps: int) -> DQNState:
        """The target (a copy of the params) and an empty ring of ``replay.capacity /
        num_envs`` rows per env."""
        del num_steps
        return DQNState(target=params,
                        ring=replay.ring_init(spec, self.replay.capacity // num_envs, num_envs))

    def prepare(self, params: Params, apply_fn: ApplyFn,
                trajectory: Trajectory) -> replay.Transitions:
        """The rollout's transitions (``rlcore.replay.transitions_of``)."""
        del params, apply_fn
        return replay.transitions_of(trajectory)

    def remember(self, extra: DQNState, data: replay.Transitions,
                 update: Array) -> tuple[DQNState, DQNState]:
        """The rollout written over the oldest rows of the ring; the source is the state."""
        del update
        extra = DQNState(target=extra.target, ring=replay.ring_add(extra.ring, data))
        return extra, extra

    def learns(self, extra: DQNState, update: Array) -> Array | bool:
        """From the update whose rollout brings the env steps past ``replay.warmup``."""
        del extra
        if self.replay.warmup == 0:
            return True
        return (update + 1) * self.steps_per_update > self.replay.warmup

    def schedule(self, source: DQNState, extra: Any, key: PRNGKey,
                 axis_name: str | None) -> Schedule:
        """``gradient_steps()`` minibatches of ``replay.batch_size / num_envs`` windows of
        every env (``rlcore.replay.sample_windows``)."""
        del extra
        idx = replay.sample_windows(key, source.ring, self.n_step, self.gradient_steps(),
                                    self.replay.batch_size // self.num_envs, axis_name)
        rows = source.ring.rows

        def take(src: DQNState, i: tuple[Array, Array]) -> DQNBatch:
            windows = replay.n_step(src.ring.data.data, *i, self.n_step, self.gamma, rows)
            return DQNBatch(data=windows, target=src.target)

        return idx, take

    def after_update(self, extra: DQNState, params: Params, update: Array) -> DQNState:
        """Every ``target_every`` env steps of a learning update, the target moves to the
        params by ``tau`` (``optax.incremental_update``; 1: a copy)."""
        refresh = (update * self.steps_per_update) % self.target_every == 0
        learned = self.learns(extra, update - 1)
        moved = optax.incremental_update(params, extra.target, self.tau)
        keep = jnp.logical_and(refresh, learned)
        return DQNState(target=jax.tree.map(lambda m, t: jnp.where(keep, m, t), moved,
                                            extra.target), ring=extra.ring)

    def split_ready(self, batch: DQNBatch, axis_name: str | None) -> tuple[DQNBatch, "DQN"]:
        """As it is: the loss is a mean over equal columns, so the chunks' mean is it."""
        del axis_name
        return batch, self

    def loss(self, params: Params, apply_fn: ApplyFn, batch: DQNBatch,
             axis_name: str | None) -> tuple[Array, LossMetrics]:
        """The mean over the minibatch of ``(Q(s, a) - y)^2`` (``mse``) or Huber's loss
        (``huber``), ``y = G_n + discount * Q_target(s_n, a*)`` (``a*`` the target's argmax,
        or the online net's with ``double``), a window that ends at a truncation counted as
        0 (every device's share keeps its weight). Reported as ``loss/value`` and
        ``loss/total``."""
        del axis_name
        d = batch.data
        flat = lambda x: x.reshape((-1,) + x.shape[2:])  # noqa: E731 - [S, b] -> [S b]
        dist, _ = apply_fn(params, flat(d.obs))
        q = jnp.take_along_axis(q_values(dist), flat(d.action)[:, None], axis=-1)[:, 0]
        target_dist, target_max = apply_fn(batch.target, flat(d.bootstrap_obs))
        if self.double:
            online, _ = apply_fn(params, flat(d.bootstrap_obs))
            best = jnp.argmax(q_values(online), axis=-1)
            next_q = jnp.take_along_axis(q_values(target_dist), best[:, None], axis=-1)[:, 0]
        else:
            next_q = target_max
        y = jax.lax.stop_gradient(flat(d.returns) + flat(d.discount) * next_q)
        delta = q - y
        per_sample = delta ** 2 if self.td_loss == MSE else optax.huber_loss(delta)
        loss = jnp.mean(flat(d.valid) * per_sample)
        zero = jnp.zeros(())
        return loss, LossMetrics(total=loss, policy=zero, value=loss, entropy=zero,
                                 approx_kl=zero, clip_frac=zero)


def _require(cond: bool, field: str, message: str) -> None:
    if not cond:
        raise ConfigError(f"{field}: {message}")
