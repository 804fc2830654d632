"""A replay buffer inside the learner state: a per-env ring of transitions, split over the
devices with the envs, sampled the same way on any device count (docs/design.md, "Replay").

- ``ReplaySettings``: the run's ``replay`` fields (capacity, warm-up, ratio, batch size);
- ``Transitions`` / ``transitions_of``: a rollout ``[T, B]`` as one-step transitions;
- ``Ring``: ``ByEnv(Transitions)`` rows ``[R, B]`` (``R = capacity // num_envs``) with its
  fill count and write position; ``ring_add`` writes a rollout over the oldest rows;
- ``sample_windows``: the (row, env) pairs of a step's minibatches, uniform over the
  windows of ``n`` consecutive steps the ring holds, drawn per env with ``replay_indices``
  (so one device's draws are four devices' stacked);
- ``n_step``: the n-step return, discount and bootstrap observation of each window, ended at
  the first terminal or truncated step (Sutton and Barto 2018, section 7.1).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import struct

from rlcore.types import Array, ByEnv, EnvSpec, PRNGKey, Trajectory


@dataclasses.dataclass(frozen=True)
class ReplaySettings:
    """The ``replay`` fields of a run (docs/configuration.md): the buffer's ``capacity`` in
    transitions over all envs, ``warmup`` env steps before the first gradient step,
    ``ratio`` gradient steps per env step and ``batch_size`` transitions per gradient
    step."""

    capacity: int = 10_000
    warmup: int = 10_000
    ratio: float = 0.1
    batch_size: int = 128


@struct.dataclass
class Transitions:
    """One-step transitions, time-major leaves ``[R, B, ...]`` (a rollout's or the ring's).

    Attributes:
      obs: ``[R, B, *obs_shape]``, what ``action`` was taken on.
      action: ``[R, B]`` int32 or ``[R, B, D]`` float32.
      reward: ``[R, B]`` float32.
      terminal: ``[R, B]`` float32, 1 where the step reached a terminal state.
      truncated: ``[R, B]`` float32, 1 where the step was cut by a time limit (its
        ``next_obs`` is then the next episode's first: no bootstrap on it).
      next_obs: ``[R, B, *obs_shape]``, the observation after the step.
    """

    obs: Array
    action: Array
    reward: Array
    terminal: Array
    truncated: Array
    next_obs: Array


def transitions_of(trajectory: Trajectory) -> Transitions:
    """The rollout's transitions ``[T, B]``: ``next_obs[t] = obs[t + 1]``, the bootstrap
    observation after the last step."""
    next_obs = jnp.concatenate([trajectory.obs[1:], trajectory.bootstrap_obs[None]])
    return Transitions(obs=trajectory.obs, action=trajectory.action, reward=trajectory.reward,
                       terminal=trajectory.terminated.astype(jnp.float32),
                       truncated=trajectory.truncated.astype(jnp.float32), next_obs=next_obs)


@struct.dataclass
class Ring:
    """The buffer: ``data``, ``ByEnv(Transitions)`` ``[R, B]`` (split over the devices on
    the env axis), ``filled`` rows written (int32 ``[]``, at most R) and ``position``, the
    row the next rollout starts at (int32 ``[]``; the oldest row once full)."""

    data: ByEnv
    filled: Array
    position: Array

    @property
    def rows(self) -> int:
        """R, the rows per env."""
        return self.data.data.reward.shape[0]


def ring_init(spec: EnvSpec, rows: int, num_envs: int) -> Ring:
    """An empty ring of ``rows`` per env for ``num_envs`` envs of ``spec`` (zeros)."""
    zeros = lambda shape, dtype: jnp.zeros((rows, num_envs, *shape), dtype)  # noqa: E731
    obs = zeros(spec.obs_shape, spec.obs_dtype)
    data = Transitions(obs=obs, action=zeros(spec.action_shape, spec.action_dtype),
                       reward=zeros((), jnp.float32), terminal=zeros((), jnp.float32),
                       truncated=zeros((), jnp.float32), next_obs=obs)
    return Ring(data=ByEnv(data), filled=jnp.int32(0), position=jnp.int32(0))


def ring_add(ring: Ring, rollout: Transitions) -> Ring:
    """``rollout`` (``[T, B_local]``; ``T`` divides R) written at ``position``, over the
    oldest rows once the ring is full."""
    t = rollout.reward.shape[0]
    data = jax.tree.map(lambda r, x: jax.lax.dynamic_update_slice_in_dim(r, x, ring.position, 0),
                        ring.data.data, rollout)
    return Ring(data=ByEnv(data), filled=jnp.minimum(ring.filled + t, ring.rows),
                position=(ring.position + t) % ring.rows)


def sample_windows(key: PRNGKey, ring: Ring, n: int, num_batches: int, per_env: int,
                   axis_name: str | None = None) -> tuple[Array, Array]:
    """The first rows and envs of ``num_batches`` minibatches of windows of ``n``
    consecutive steps: ``per_env`` windows of every env each, uniform with replacement over
    the ``filled - n + 1`` windows the ring holds in order (oldest first), drawn per env with
    ``replay_indices`` (blocks of one env: device-count free).

    Returns:
      ``(rows, envs)``, int32 ``[K, per_env, B_local]``: physical rows of the windows' first
      steps and local env indices.
    """
    envs_local = ring.data.data.reward.shape[1]
    starts = jnp.maximum(ring.filled - n + 1, 1)
    offsets, envs = replay_indices(key, starts, envs_local, 1, num_batches, per_env, axis_name)
    oldest = jnp.where(ring.filled < ring.rows, 0, ring.position)
    return (oldest + offsets) % ring.rows, envs


def replay_indices(key: PRNGKey, filled: Array, num_local_envs: int, block: int,
                   num_batches: int, per_block: int,
                   axis_name: str | None = None) -> tuple[Array, Array]:
    """(row, env) indices of ``num_batches`` minibatches drawn uniformly, with replacement,
    from the first ``filled`` rows of a per-env store ``[R, B_local, ...]`` (a replay
    buffer in ``rlcore.types.ByEnv``); device-count free as ``sample_minibatch_indices``:
    the global env axis is cut into blocks of ``block`` envs, and minibatch ``k`` takes
    ``per_block`` samples of every block, drawn with ``fold_in(fold_in(key, k), g)`` for
    global block ``g``.

    Args:
      key: the update's PRNG key, identical on every device.
      filled: int ``[]``, rows written so far (``1 <= filled <= R``).
      num_local_envs: envs this device holds, a multiple of ``block``.
      block: envs per block.
      num_batches: minibatches K.
      per_block: samples of each block in a minibatch.
      axis_name: device axis holding consecutive slices of the env axis, or None.

    Returns:
      ``(rows, envs)``, int32 ``[K, per_block, num_local_envs // block]`` each (a
      ``take_samples`` pair).
    """
    blocks = num_local_envs // block
    first_block = jax.lax.axis_index(axis_name) * blocks if axis_name is not None else 0

    def draw(k: Array, g: Array) -> tuple[Array, Array]:
        row_key, env_key = jax.random.split(jax.random.fold_in(jax.random.fold_in(key, k), g))
        return (jax.random.randint(row_key, (per_block,), 0, filled, jnp.int32),
                jax.random.randint(env_key, (per_block,), 0, block, jnp.int32))

    ids = first_block + jnp.arange(blocks)
    rows, envs = jax.vmap(lambda k: jax.vmap(lambda g: draw(k, g))(ids))(
        jnp.arange(num_batches))  # [K, blocks, per_block]
    envs = envs + (jnp.arange(blocks, dtype=jnp.int32) * block)[None, :, None]
    return rows.transpose((0, 2, 1)), envs.transpose((0, 2, 1))


@struct.dataclass
class Windows:
    """Minibatch of n-step windows, leaves ``[*S, ...]``.

    Attributes:
      obs, action: of the window's first step.
      returns: ``sum_k gamma^k r_k`` up to and including the first step that ends the
        episode (terminal or truncated), else over all ``n``.
      discount: ``gamma^m`` to bootstrap with after the ``m`` steps taken; 0 where the
        window ended at a terminal state.
      bootstrap_obs: ``next_obs`` of the window's last counted step.
      valid: float32, 0 where the window ended at a truncation (its ``next_obs`` is a reset's
        and the episode's final observation is not stored), else 1.
    """

    obs: Array
    action: Array
    returns: Array
    discount: Array
    bootstrap_obs: Array
    valid: Array


def n_step(data: Transitions, rows: Array, envs: Array, n: int, gamma: float | Array,
           num_rows: int) -> Windows:
    """The windows of ``n`` steps starting at ``rows`` (physical, ``[*S]``) of ``envs``
    (``[*S]``) in ``data`` (``[R, B]``, ``num_rows = R``; the next steps at ``rows + k``
    modulo R)."""
    steps = (rows[None] + jnp.arange(n).reshape((n,) + (1,) * rows.ndim)) % num_rows  # [n,*S]
    at = lambda x: x[steps, envs[None]]  # noqa: E731 - [n, *S, ...]
    reward, terminal, truncated = at(data.reward), at(data.terminal), at(data.truncated)
    ended = jnp.maximum(terminal, truncated)
    alive = jnp.cumprod(jnp.concatenate([jnp.ones_like(ended[:1]), 1.0 - ended[:-1]]), axis=0)
    powers = jnp.asarray(gamma, jnp.float32) ** jnp.arange(n, dtype=jnp.float32)
    powers = powers.reshape((n,) + (1,) * rows.ndim)
    returns = jnp.sum(powers * alive * reward, axis=0)
    last = jnp.sum(alive, axis=0).astype(jnp.int32) - 1  # [*S]: the last counted step
    pick = lambda x: jnp.take_along_axis(  # noqa: E731 - x [n, *S] at ``last``
        x, last[None], axis=0)[0]
    taken = (last + 1).astype(jnp.float32)
    discount = jnp.asarray(gamma, jnp.float32) ** taken * (1.0 - pick(terminal))
    last_row = (rows + last) % num_rows
    return Windows(obs=data.obs[rows, envs], action=data.action[rows, envs], returns=returns,
                   discount=discount, bootstrap_obs=data.next_obs[last_row, envs],
                   valid=1.0 - pick(truncated))
