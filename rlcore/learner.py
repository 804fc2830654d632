"""The one update loop shared by every mode and algorithm.

``make_update_fn`` returns ``update(state, trajectory, key) -> (state, metrics)``: epochs x
minibatches of gradient steps in one ``lax.scan``. Minibatches split the env axis and keep
time whole. With ``axis_name`` the env axis is split over devices of that mesh axis and the
result does not depend on how many devices hold it:

- minibatch membership is stratified: the global env axis is cut into blocks of
  ``num_minibatches`` envs; every (epoch, block) permutes its block with a key folded from
  (update key, epoch, global block index); minibatch ``m`` takes the ``m``-th env of every
  permuted block. A device holding whole blocks computes its share locally, and the union
  over devices is the same minibatch for any device count that divides the blocks;
- advantage statistics and gradients are means over the whole minibatch across devices.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import optax

from rlcore import losses, returns
from rlcore.types import LearnerState, Trajectory


@dataclasses.dataclass(frozen=True)
class LossHParams:
    """Loss hyperparameters of both algorithms (unused ones are ignored).

    Attributes:
      gamma: discount factor.
      gae_lambda: PPO GAE lambda.
      clip_eps: PPO ratio (and value) clip.
      clip_vloss: PPO value clipping.
      norm_adv: PPO per-minibatch advantage normalisation.
      vf_coef: value-loss coefficient.
      ent_coef: entropy coefficient.
      vtrace_lambda: IMPALA V-trace lambda.
      clip_rho: IMPALA importance-weight clip in the targets.
      clip_pg_rho: IMPALA importance-weight clip in the policy gradient.
    """

    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    clip_vloss: bool = False
    norm_adv: bool = True
    vf_coef: float = 0.5
    ent_coef: float = 0.01
    vtrace_lambda: float = 1.0
    clip_rho: float = 1.0
    clip_pg_rho: float = 1.0


def init_learner_state(network, optimizer, key, spec) -> LearnerState:
    """Fresh params (``network.init`` on one dummy observation of ``spec``), optimizer state
    and update counter 0. Jit it with the sharding the caller wants."""
    dummy = jnp.zeros((1,) + tuple(spec.obs_shape), jnp.dtype(spec.obs_dtype))
    params = network.init(key, dummy)
    return LearnerState(params=params, opt_state=optimizer.init(params), update=jnp.int32(0))


def minibatch_indices(key, num_local_envs, num_minibatches, num_epochs, axis_name=None):
    """Local env indices of every minibatch of every epoch (stratified, device-count free).

    Args:
      key: the update's PRNG key, identical on every device.
      num_local_envs: envs this device holds, a multiple of ``num_minibatches``.
      num_minibatches: minibatches per epoch.
      num_epochs: epochs.
      axis_name: device axis holding consecutive slices of the env axis, or None.

    Returns:
      int32 ``[num_epochs * num_minibatches, num_local_envs // num_minibatches]``.
    """
    blocks = num_local_envs // num_minibatches
    first_block = jax.lax.axis_index(axis_name) * blocks if axis_name is not None else 0
    block_ids = first_block + jnp.arange(blocks)

    def epoch_indices(epoch):
        epoch_key = jax.random.fold_in(key, epoch)
        perms = jax.vmap(
            lambda g: jax.random.permutation(jax.random.fold_in(epoch_key, g), num_minibatches)
        )(block_ids)  # [blocks, M]
        local = perms + (jnp.arange(blocks) * num_minibatches)[:, None]
        return local.T  # [M, blocks]

    per_epoch = jax.vmap(epoch_indices)(jnp.arange(num_epochs))  # [E, M, blocks]
    return per_epoch.reshape((num_epochs * num_minibatches, blocks)).astype(jnp.int32)


def _take_envs(tree, idx):
    """Selects envs ``idx`` ``[b]`` along axis 1 of time-major leaves ``[T, B, ...]``."""
    return jax.tree.map(lambda x: jnp.take(x, idx, axis=1), tree)


VALUE_CHUNK = 4096  # observations per forward pass when recomputing a rollout's values


def _values_in_chunks(params, apply_fn, obs):
    """Values of ``obs [N, ...]`` in static chunks of ``VALUE_CHUNK`` (``[N]``).

    A whole Atari rollout (129 x 128 frames) in one pass of the IMPALA ResNet needs several
    GB of activations; chunks bound that. The chunks are a Python loop, not a rolled
    ``lax.map``: XLA on CPU runs conv nets in rolled loops far slower.
    """
    n = obs.shape[0]
    parts = [apply_fn(params, obs[i:i + VALUE_CHUNK])[1] for i in range(0, n, VALUE_CHUNK)]
    return parts[0] if len(parts) == 1 else jnp.concatenate(parts)


def _ppo_batch(params, apply_fn, traj: Trajectory, hp: LossHParams) -> losses.PPOBatch:
    """Values under the learner's params, GAE advantages and targets for a whole rollout."""
    t, b = traj.action.shape
    obs_all = jnp.concatenate([traj.obs, traj.bootstrap_obs[None]], axis=0)
    value_all = _values_in_chunks(params, apply_fn, obs_all.reshape((-1,) + obs_all.shape[2:]))
    value_all = value_all.reshape((t + 1, b))
    value_tm1 = value_all[:t]
    inputs = returns.step_inputs(
        traj.reward, traj.terminated, traj.truncated, value_tm1, value_all[t], hp.gamma,
        hp.gae_lambda,
    )
    adv, targets = returns.gae(traj.reward, inputs.discount_t, value_tm1, inputs.value_t,
                               inputs.lambda_)
    return losses.PPOBatch(
        obs=traj.obs,
        action=traj.action,
        behaviour_logits=traj.behaviour_logits,
        old_value=value_tm1,
        advantages=adv,
        targets=targets,
    )


def _loss_fn(algorithm, apply_fn, hp: LossHParams, axis_name):
    if algorithm == "ppo":
        return lambda params, batch: losses.ppo_loss(
            params, apply_fn, batch, clip_eps=hp.clip_eps, vf_coef=hp.vf_coef,
            ent_coef=hp.ent_coef, clip_vloss=hp.clip_vloss, norm_adv=hp.norm_adv,
            axis_name=axis_name,
        )
    if algorithm == "impala":
        return lambda params, batch: losses.impala_loss(
            params, apply_fn, batch, discount=hp.gamma, vf_coef=hp.vf_coef,
            ent_coef=hp.ent_coef, lambda_=hp.vtrace_lambda, clip_rho=hp.clip_rho,
            clip_pg_rho=hp.clip_pg_rho, axis_name=axis_name,
        )
    raise ValueError(f"algorithm: unknown '{algorithm}' (expected ppo or impala)")


def make_update_fn(
    algorithm: str,
    apply_fn: Callable,
    optimizer: optax.GradientTransformation,
    *,
    num_epochs: int,
    num_minibatches: int,
    axis_name: str | None = None,
    hparams: LossHParams = LossHParams(),
    unroll: int | bool = 1,
):
    """Builds the update shared by Anakin and Sebulba, PPO and IMPALA.

    Args:
      algorithm: ``"ppo"`` or ``"impala"``.
      apply_fn: ``(params, obs [N, ...]) -> (logits [N, A], value [N])``.
      optimizer: optax transformation (see ``rlcore.optim``).
      num_epochs: passes over the rollout.
      num_minibatches: minibatches per pass, splitting the env axis.
      axis_name: mesh axis the env axis is sharded over (inside ``shard_map``), or None.
      hparams: loss hyperparameters.
      unroll: ``lax.scan`` unroll of the gradient-step loop. XLA on CPU runs a conv-net
        step inside a rolled loop 10x slower than unrolled; MLPs do not care.

    Returns:
      ``update(state: LearnerState, trajectory: Trajectory [T, B_local], key) ->
      (LearnerState, LossMetrics)``, metrics averaged over steps (and devices).
    """
    loss_fn = _loss_fn(algorithm, apply_fn, hparams, axis_name)
    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def gradient_step(carry, batch):
        params, opt_state = carry
        if axis_name is not None:
            # Differentiate per-device copies: under shard_map's replication typing the
            # gradient of replicated params would otherwise arrive already summed over the
            # axis (N times the mean); the pmean below then averages the local gradients.
            local_params = jax.lax.pcast(params, axis_name, to="varying")
            (_, metrics), grads = grad_fn(local_params, batch)
            grads = jax.lax.pmean(grads, axis_name)
            metrics = jax.lax.pmean(metrics, axis_name)
        else:
            (_, metrics), grads = grad_fn(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), metrics

    def update(state: LearnerState, trajectory: Trajectory, key):
        if algorithm == "ppo":
            data = _ppo_batch(state.params, apply_fn, trajectory, hparams)
        else:
            data = trajectory
        num_local_envs = trajectory.action.shape[1]
        idx = minibatch_indices(key, num_local_envs, num_minibatches, num_epochs, axis_name)

        def step(carry, mb_idx):
            return gradient_step(carry, _take_minibatch(data, mb_idx))

        (params, opt_state), metrics = jax.lax.scan(
            step, (state.params, state.opt_state), idx, unroll=unroll
        )
        metrics = jax.tree.map(jnp.mean, metrics)
        new_state = LearnerState(params=params, opt_state=opt_state, update=state.update + 1)
        return new_state, metrics

    return update


def _take_minibatch(data, idx):
    """Selects envs ``idx`` ``[b]`` of a PPOBatch or Trajectory (leaves ``[T, B, ...]``)."""
    if isinstance(data, Trajectory):
        sel = _take_envs(data.replace(bootstrap_obs=None), idx)
        return sel.replace(bootstrap_obs=jnp.take(data.bootstrap_obs, idx, axis=0))
    return _take_envs(data, idx)
