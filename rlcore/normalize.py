"""Observation normalisation and reward scaling by running statistics (CleanRL's
definitions: gym's ``NormalizeObservation`` and ``NormalizeReward`` wrappers).

- ``normalize_obs``: ``clip((obs - mean) / sqrt(var + 1e-8), -clip, clip)`` with the running
  mean and variance of every observation seen (per component; ``count`` starts at 1e-4).
- ``normalize_reward``: each env keeps a discounted return ``G = gamma * G + r`` (restarted at
  0 after the step that ends its episode); the reward is scaled to
  ``clip(r / sqrt(var_G + 1e-8), -clip, clip)`` with the running variance of ``G``.

Where the statistics live: in the params pytree, ``NormParams(net, obs, ret)`` (the
network's own params in ``net``), so they travel wherever params go: the train state and its
checkpoints, the Sebulba params hand-off (same version as the params), every evaluation. The
loss never moves them: ``Normalized.apply`` stops their gradient, so the optimizer's update of
them is exactly 0 (Adam and RMSProp divide a zero moment by ``eps``). They change only in
``observe``, once per update, after the gradient steps, from the whole batch: the update's
moments are summed over the mesh axis (``psum``), so every device and every device count
holds the same statistics. During a rollout they are frozen: the actors act, scale rewards
and the learner learns with the statistics of one version (Anakin: those at the update's
start; Sebulba: those handed over with the actor's params).

The trajectory keeps the raw observations (normalised inside ``Normalized.apply``) and the
scaled rewards, with each step's ``G`` in ``Trajectory.discounted_return`` for ``observe``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from rlcore.types import (
    Array,
    CoreState,
    Network,
    Observe,
    Params,
    PRNGKey,
    Scalar,
    Trajectory,
)

EPS = 1e-8
INITIAL_COUNT = 1e-4  # CleanRL's (gym's RunningMeanStd)


@struct.dataclass
class RunningStats:
    """Running mean and variance of a quantity, all float32.

    Attributes:
      mean: ``[*shape]``.
      var: ``[*shape]``.
      count: ``[]`` the samples seen (plus ``INITIAL_COUNT``).
    """

    mean: Any  # jax or (host copies) numpy arrays
    var: Any
    count: Any

    @classmethod
    def zero(cls, shape: tuple[int, ...] = ()) -> "RunningStats":
        """No sample seen: mean 0, variance 1, count ``INITIAL_COUNT``."""
        return cls(mean=jnp.zeros(shape, jnp.float32), var=jnp.ones(shape, jnp.float32),
                   count=jnp.asarray(INITIAL_COUNT, jnp.float32))


@struct.dataclass
class NormParams:
    """Params of a ``Normalized`` network: the network's own and the statistics.

    Attributes:
      net: the wrapped network's params.
      obs: RunningStats ``[*obs_shape]`` of the observations, or None (``normalize_obs`` off).
      ret: RunningStats ``[]`` of the discounted returns, or None (``normalize_reward`` off).
    """

    net: Params
    obs: RunningStats | None = None
    ret: RunningStats | None = None


def normalize(x: Array | np.ndarray, stats: RunningStats, clip: float, xp: Any = jnp) -> Any:
    """``clip((x - mean) / sqrt(var + EPS), -clip, clip)`` as float32; ``x [..., *shape]``."""
    x = xp.asarray(x, xp.float32)
    lead = (1,) * (x.ndim - xp.ndim(stats.mean))  # explicit broadcast over the batch axes
    mean = xp.reshape(stats.mean, lead + xp.shape(stats.mean))
    var = xp.reshape(stats.var, lead + xp.shape(stats.var))
    out = (x - mean) / xp.sqrt(var + xp.float32(EPS))
    return xp.clip(out, -clip, clip).astype(xp.float32)


def scale_rewards(reward: Any, ret_acc: Any, done: Any, stats: RunningStats, gamma: Scalar,
                  clip: float, xp: Any = jnp) -> tuple[Any, Any, Any]:
    """One step of reward scaling for a batch of envs (``jax.numpy`` or ``numpy``).

    Args:
      reward: ``[B]`` float32 raw rewards of the step.
      ret_acc: ``[B]`` float32 discounted returns before the step.
      done: ``[B]`` bool, the step ended the episode.
      stats: RunningStats ``[]`` of the returns (frozen for the rollout).
      gamma: discount.
      clip: bound of the scaled reward.
      xp: array module.

    Returns:
      ``(scaled [B], G [B], next ret_acc [B])``: the scaled rewards, the returns including
      this step (what the statistics learn from), and the returns to carry (0 where done).
    """
    g = (xp.float32(gamma) * ret_acc + reward).astype(xp.float32)
    scaled = xp.clip(reward / xp.sqrt(stats.var + xp.float32(EPS)), -clip, clip)
    return scaled.astype(xp.float32), g, xp.where(done, xp.float32(0), g).astype(xp.float32)


def update_stats(stats: RunningStats, x: Array, axis_name: str | None,
                 batch_dims: int) -> RunningStats:
    """``stats`` updated with the samples ``x [*batch, *shape]`` (``batch_dims`` leading
    axes) of every device of ``axis_name``: global count, mean and squared deviations from
    the global mean (two passes, each ``psum``'d), combined as Chan et al.'s parallel
    variance (CleanRL's ``update_mean_var_count_from_moments``)."""
    x = jnp.asarray(x, jnp.float32)
    axes = tuple(range(batch_dims))
    psum = (lambda v: jax.lax.psum(v, axis_name)) if axis_name is not None else (lambda v: v)
    n = psum(jnp.float32(np.prod(x.shape[:batch_dims])))
    mean = psum(jnp.sum(x, axis=axes)) / n
    m2 = psum(jnp.sum(jnp.square(x - mean.reshape((1,) * batch_dims + mean.shape)),
                      axis=axes))
    delta = mean - stats.mean
    total = stats.count + n
    new_mean = stats.mean + delta * n / total
    m2_all = stats.var * stats.count + m2 + jnp.square(delta) * stats.count * n / total
    return RunningStats(mean=new_mean, var=m2_all / total, count=total)


class Normalized:
    """A network whose params carry the normalisation statistics (``NormParams``).

    ``init`` and ``apply`` have the wrapped network's signatures; ``apply`` normalises the
    observations with the frozen (gradient-stopped) statistics first.

    Args:
      net: the network (flax module).
      obs_shape: the shape of one observation.
      normalize_obs: keep observation statistics and normalise with them.
      normalize_reward: keep return statistics (``scale_rewards`` reads them).
      obs_clip: bound of a normalised observation.
    """

    def __init__(self, net: Network, obs_shape: tuple[int, ...], normalize_obs: bool,
                 normalize_reward: bool, obs_clip: float) -> None:
        self.net = net
        self.obs_shape = tuple(obs_shape)
        self.normalize_obs = normalize_obs
        self.normalize_reward = normalize_reward
        self.obs_clip = float(obs_clip)

    def initial_core(self, n: int) -> CoreState | None:
        """The wrapped network's initial core state (``rlcore.networks.initial_core``)."""
        from rlcore.networks import initial_core

        return initial_core(self.net, n)

    def init(self, key: PRNGKey, *args: Any) -> NormParams:
        """The wrapped network's params and fresh statistics (``RunningStats.zero``)."""
        return NormParams(
            net=self.net.init(key, *args),
            obs=RunningStats.zero(self.obs_shape) if self.normalize_obs else None,
            ret=RunningStats.zero() if self.normalize_reward else None)

    def apply(self, params: NormParams, obs: Array, *rest: Any) -> Any:
        """The wrapped network's ``apply`` on ``obs`` normalised with the statistics."""
        if params.obs is not None:
            obs = normalize(obs, jax.lax.stop_gradient(params.obs), self.obs_clip)
        return self.net.apply(params.net, obs, *rest)

    def observe(self, params: NormParams, trajectory: Trajectory,
                axis_name: str | None) -> NormParams:
        """The statistics after one update's batch (``Trajectory [T, B_local]``: raw ``obs``
        and ``discounted_return``), over every device of ``axis_name``."""
        obs, ret = params.obs, params.ret
        if obs is not None:
            obs = update_stats(obs, trajectory.obs, axis_name, 2)
        if ret is not None:
            if trajectory.discounted_return is None:
                raise ValueError("normalize_reward: the trajectory has no discounted_return")
            ret = update_stats(ret, trajectory.discounted_return, axis_name, 2)
        return dataclasses.replace(params, obs=obs, ret=ret)


def maybe_normalized(net: Network, obs_shape: tuple[int, ...], normalize_obs: bool,
                     normalize_reward: bool, obs_clip: float) -> Network:
    """``net`` wrapped in ``Normalized`` where either statistic is kept; ``net`` itself
    otherwise (its params, and so every run without normalisation, unchanged)."""
    if not (normalize_obs or normalize_reward):
        return net
    return Normalized(net, obs_shape, normalize_obs, normalize_reward, obs_clip)


def return_stats(params: Params) -> RunningStats | None:
    """The return statistics of ``params`` (None: rewards are not scaled)."""
    return params.ret if isinstance(params, NormParams) else None


def observer(network: Network) -> Observe | None:
    """``network.observe`` of a ``Normalized`` network, None for any other."""
    return network.observe if isinstance(network, Normalized) else None
