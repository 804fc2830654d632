"""The one update loop shared by every mode and algorithm.

``make_update_fn`` returns ``update(state, trajectory, key) -> (state, metrics)``: epochs x
minibatches of gradient steps in one ``lax.scan``. An algorithm declares the minibatches it
needs (``minibatch_kinds``): whole sequences (IMPALA: V-trace runs along time) or single
(step, env) samples (feed-forward PPO, as CleanRL, PureJaxRL and Cleanba shuffle). With
``axis_name`` the env axis is split over devices of that mesh axis and the result does not
depend on how many devices hold it:

- minibatch membership is stratified: the global env axis is cut into blocks of
  ``num_minibatches`` envs; every (epoch, block) permutes its block with a key folded from
  (update key, epoch, global block index): its envs for sequences (minibatch ``m`` takes
  the ``m``-th env of every permuted block), its ``T * num_minibatches`` samples for
  samples (minibatch ``m`` takes the ``m``-th run of ``T``). A device holding whole blocks
  computes its share locally, and the union over devices is the same minibatch for any
  device count that divides the blocks;
- advantage statistics and gradients are means over the whole minibatch across devices.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax

from rlcore.algorithms import Algorithm, make_algorithm
from rlcore.algorithms.base import SAMPLES, SEQUENCES, SUM, minibatch_kind
from rlcore.hparams import HParams
from rlcore.losses import LossMetrics
from rlcore.networks import NO_CORE, init_params
from rlcore.seeding import permutation
from rlcore.types import (
    ApplyFn,
    Array,
    EnvSpec,
    LearnerState,
    Network,
    Observe,
    Params,
    PRNGKey,
    Trajectory,
)

# The carry of the gradient-step loop, ``(params, opt_state)``.
OptCarry = tuple[Params, optax.OptState]
# One optimizer step on one minibatch: ``(carry, minibatch) -> (carry, LossMetrics)``.
GradientStep = Callable[[OptCarry, Any], tuple[OptCarry, LossMetrics]]
# The update: ``(state, trajectory [T, B_local], key) -> (state, LossMetrics)``.
UpdateFn = Callable[[LearnerState, Trajectory, PRNGKey], tuple[LearnerState, LossMetrics]]


def init_learner_state(network: Network, optimizer: optax.GradientTransformation,
                       key: PRNGKey, spec: EnvSpec,
                       init_state: Callable[[Params], Any] | None = None) -> LearnerState:
    """Fresh params (``network.init`` on one dummy observation of ``spec``, see
    ``rlcore.networks.init_params``), optimizer state, update counter 0 and the algorithm's
    own state ``init_state(params)`` (``own_state_init``; None: none). Jit it with the
    sharding the caller wants (``rlcore.types.state_partition``)."""
    params = init_params(network, key, spec)
    extra = None if init_state is None else init_state(params)
    return LearnerState(params=params, opt_state=optimizer.init(params), update=jnp.int32(0),
                        extra=extra)


def own_state_init(hp: HParams, spec: EnvSpec, num_envs: int,
                   num_steps: int) -> Callable[[Params], Any]:
    """``params -> extra``: the own state (``Algorithm.init_state``) of ``hp``'s algorithm
    for a run of rollouts ``[num_steps, num_envs]`` (all devices' envs) on ``spec``."""
    algorithm = make_algorithm(hp)
    return lambda params: algorithm.init_state(params, spec, num_envs, num_steps)


def block_permutations(key: PRNGKey, num_local_envs: int, num_minibatches: int,
                       num_epochs: int, size: int, axis_name: str | None = None) -> Array:
    """A permutation of ``size`` items for every (epoch, global block) of this device.

    The global env axis is cut into blocks of ``num_minibatches`` envs; block ``g`` of epoch
    ``e`` draws its permutation with ``fold_in(fold_in(key, e), g)``, so a device holding
    whole blocks computes its share locally whatever the device count.

    Returns:
      int32 ``[num_epochs, num_local_envs // num_minibatches, size]``.
    """
    blocks = num_local_envs // num_minibatches
    first_block = jax.lax.axis_index(axis_name) * blocks if axis_name is not None else 0
    block_ids = first_block + jnp.arange(blocks)

    def epoch_perms(epoch: Array) -> Array:
        epoch_key = jax.random.fold_in(key, epoch)
        return jax.vmap(
            lambda g: permutation(jax.random.fold_in(epoch_key, g), size))(block_ids)

    return jax.vmap(epoch_perms)(jnp.arange(num_epochs)).astype(jnp.int32)


def minibatch_indices(key: PRNGKey, num_local_envs: int, num_minibatches: int, num_epochs: int,
                      axis_name: str | None = None) -> Array:
    """Local env indices of every minibatch of every epoch (stratified, device-count free):
    each (epoch, block) permutes its ``num_minibatches`` envs; minibatch ``m`` takes the
    ``m``-th env of every permuted block.

    Args:
      key: the update's PRNG key, identical on every device.
      num_local_envs: envs this device holds, a multiple of ``num_minibatches``.
      num_minibatches: minibatches per epoch.
      num_epochs: epochs.
      axis_name: device axis holding consecutive slices of the env axis, or None.

    Returns:
      int32 ``[num_epochs * num_minibatches, num_local_envs // num_minibatches]``.
    """
    m = num_minibatches
    perms = block_permutations(key, num_local_envs, m, num_epochs, m, axis_name)  # [E, b, M]
    blocks = perms.shape[1]
    local = perms + (jnp.arange(blocks, dtype=jnp.int32) * m)[None, :, None]
    return local.transpose((0, 2, 1)).reshape((num_epochs * m, blocks))  # [E * M, blocks]


def sample_minibatch_indices(key: PRNGKey, num_steps: int, num_local_envs: int,
                             num_minibatches: int, num_epochs: int,
                             axis_name: str | None = None) -> tuple[Array, Array]:
    """(step, env) indices of every minibatch of every epoch, for minibatches of single
    samples (device-count free, like ``minibatch_indices``).

    Every (epoch, global block) permutes the block's ``num_steps * num_minibatches`` samples
    (``block_permutations``), and minibatch ``m`` takes the ``m``-th run of ``num_steps``
    samples of every permuted block. So each minibatch mixes steps and envs (as CleanRL's,
    PureJaxRL's and Cleanba's flat shuffles do) and keeps the size and the device split of a
    minibatch of sequences.

    Args:
      key: the update's PRNG key, identical on every device.
      num_steps: rollout length T.
      num_local_envs: envs this device holds, a multiple of ``num_minibatches``.
      num_minibatches: minibatches per epoch.
      num_epochs: epochs.
      axis_name: device axis holding consecutive slices of the env axis, or None.

    Returns:
      ``(steps, envs)``, int32 ``[num_epochs * num_minibatches, T, num_local_envs //
      num_minibatches]`` each: sample ``[k, i, j]`` of minibatch ``k`` is step
      ``steps[k, i, j]`` of local env ``envs[k, i, j]``.
    """
    m, t = num_minibatches, num_steps
    perms = block_permutations(key, num_local_envs, m, num_epochs, t * m, axis_name)
    e, blocks = perms.shape[:2]
    perms = perms.reshape((e, blocks, m, t))  # sample p of a block: step p // m, env p % m
    steps = perms // m
    envs = perms % m + (jnp.arange(blocks, dtype=jnp.int32) * m)[None, :, None, None]
    shape = (e * m, t, blocks)
    return (steps.transpose((0, 2, 3, 1)).reshape(shape),
            envs.transpose((0, 2, 3, 1)).reshape(shape))  # [E * M, T, blocks]


def scan_unroll(update_unroll: int) -> int | bool:
    """``lax.scan`` unroll of the gradient-step loop from the config field ``update_unroll``
    (0: fully unrolled; an automatic -1 must be resolved before, by the runtime, which knows
    the device and its memory)."""
    if update_unroll < 0:
        raise ValueError(f"update_unroll: {update_unroll} must be resolved to >= 0 first")
    return True if update_unroll == 0 else update_unroll


def micro_count(microbatches: int) -> int:
    """Chunks per minibatch from the config field ``microbatches`` (an automatic -1 must be
    resolved before, by the runtime, which knows the device and its memory)."""
    if microbatches < 1:
        raise ValueError(f"microbatches: {microbatches} must be resolved to >= 1 first")
    return microbatches


def make_gradient_step(algorithm: Algorithm, apply_fn: ApplyFn,
                       optimizer: optax.GradientTransformation, axis_name: str | None = None,
                       microbatches: int = 1) -> GradientStep:
    """One optimizer step on one minibatch: ``((params, opt_state), batch) -> ((params,
    opt_state), LossMetrics)``; gradients and metrics averaged over ``axis_name``.

    With ``microbatches`` k > 1 the minibatch's gradient is accumulated over k equal chunks
    of its envs (``micro_gradient``) in a rolled loop, so only one chunk's activations are
    live: the same step up to float roundoff, in about 1/k of the activation memory.
    """
    grad_fn = jax.value_and_grad(
        lambda params, batch: algorithm.loss(params, apply_fn, batch, axis_name), has_aux=True)

    def gradient(params: Params, batch: Any) -> tuple[LossMetrics, Params]:
        if microbatches > 1:
            return micro_gradient(algorithm, apply_fn, params, batch, microbatches, axis_name)
        (_, metrics), grads = grad_fn(params, batch)
        return metrics, grads

    def gradient_step(carry: OptCarry, batch: Any) -> tuple[OptCarry, LossMetrics]:
        params, opt_state = carry
        if axis_name is not None:
            # Differentiate per-device copies: under shard_map's replication typing the
            # gradient of replicated params would otherwise arrive already summed over the
            # axis (N times the mean); the pmean below then averages the local gradients.
            local_params = jax.lax.pcast(params, axis_name, to="varying")
            metrics, grads = gradient(local_params, batch)
            grads = jax.lax.pmean(grads, axis_name)
            metrics = jax.lax.pmean(metrics, axis_name)
        else:
            metrics, grads = gradient(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), metrics

    return gradient_step


def micro_gradient(algorithm: Algorithm, apply_fn: ApplyFn, params: Params, batch: Any,
                   microbatches: int,
                   axis_name: str | None = None) -> tuple[LossMetrics, Params]:
    """``(LossMetrics, grads)`` of ``algorithm``'s loss on ``batch``, accumulated over
    ``microbatches`` equal chunks of its envs in a rolled ``lax.scan``.

    ``algorithm.split_ready`` first computes what the loss needs of the whole minibatch
    (PPO: the advantage statistics) and returns the algorithm whose loss on the chunks,
    combined by ``algorithm.loss_reduction`` (``"mean"``: the mean of the chunks'
    gradients; ``"sum"``: their sum), is the loss on the whole minibatch. Metrics are the
    chunks' means, ``total`` combined like the gradients.

    Args:
      algorithm: the algorithm (``split_ready``, ``loss``, ``loss_reduction``).
      apply_fn: ``(params, obs [N, ...]) -> (dist [N], value [N])``.
      params: network parameters (per-device copies inside ``shard_map``).
      batch: a minibatch record, leaves ``[T, b, ...]`` (``take_envs``), ``b`` a multiple
        of ``microbatches``.
      microbatches: chunks, each of ``b // microbatches`` envs (or sample columns).
      axis_name: device axis the minibatch is split over, or None.
    """
    ready, chunk_algorithm = algorithm.split_ready(batch, axis_name)
    b = ready.obs.shape[1]
    grad_fn = jax.value_and_grad(
        lambda p, chunk: chunk_algorithm.loss(p, apply_fn, chunk, axis_name), has_aux=True)

    def chunk_step(acc: Params, idx: Array) -> tuple[Params, LossMetrics]:
        (_, metrics), grads = grad_fn(params, ready.take_envs(idx))
        return jax.tree.map(jnp.add, acc, grads), metrics

    zeros = jax.tree.map(jnp.zeros_like, params)
    chunks = jnp.arange(b, dtype=jnp.int32).reshape((microbatches, b // microbatches))
    grads, per_chunk = jax.lax.scan(chunk_step, zeros, chunks)  # rolled: one chunk live
    metrics = jax.tree.map(lambda x: jnp.mean(x, axis=0), per_chunk)
    if algorithm.loss_reduction == SUM:
        return metrics.replace(total=jnp.sum(per_chunk.total)), grads
    return metrics, jax.tree.map(lambda g: g / microbatches, grads)


def minibatch_schedule(
    key: PRNGKey, num_steps: int, num_local_envs: int, *, minibatch: str, num_minibatches: int,
    num_epochs: int, axis_name: str | None = None,
) -> tuple[Array | tuple[Array, Array], Callable[[Any, Any], Any]]:
    """Every minibatch of every epoch of one update: ``(idx, take)``, the index arrays the
    gradient-step loop scans over (leading axis ``num_epochs * num_minibatches``) and
    ``take(data, idx_k)``, minibatch ``k`` of the prepared record ``data`` ``[T, B_local,
    ...]``.

    Args:
      key: the update's PRNG key, identical on every device.
      num_steps: rollout length T.
      num_local_envs: envs this device holds.
      minibatch: ``SEQUENCES`` (``minibatch_indices``, ``data.take_envs``) or ``SAMPLES``
        (``sample_minibatch_indices``, ``data.take_samples``).
      num_minibatches, num_epochs, axis_name: as ``make_update_fn``.
    """
    if minibatch == SAMPLES:
        idx = sample_minibatch_indices(key, num_steps, num_local_envs, num_minibatches,
                                       num_epochs, axis_name)
        return idx, lambda data, mb_idx: data.take_samples(*mb_idx)
    idx = minibatch_indices(key, num_local_envs, num_minibatches, num_epochs, axis_name)
    return idx, lambda data, mb_idx: data.take_envs(mb_idx)


def make_update_fn(algorithm: Algorithm, apply_fn: ApplyFn,
                   optimizer: optax.GradientTransformation, *, num_epochs: int,
                   num_minibatches: int, minibatch: str = SEQUENCES, axis_name: str | None = None,
                   unroll: int | bool = 1, microbatches: int = 1,
                   observe: Observe | None = None) -> UpdateFn:
    """Builds the update shared by Anakin and Sebulba and every algorithm: ``prepare``, its
    own state's ``remember``, the gradient steps of its ``schedule`` (None: of
    ``minibatch_schedule``) in one ``lax.scan``, then ``observe`` and ``after_update``
    (docs/design.md, "The algorithm protocol").

    Args:
      algorithm: an ``rlcore.algorithms`` object (``prepare`` and ``loss``).
      apply_fn: ``(params, obs [N, ...]) -> (dist [N], value [N])``.
      optimizer: optax transformation (see ``rlcore.optim``).
      num_epochs: passes over the rollout.
      num_minibatches: minibatches per pass, splitting the env axis.
      minibatch: ``"sequences"`` (whole sequences of envs, ``take_envs``) or ``"samples"``
        (single (step, env) samples, ``take_samples``); one of the algorithm's
        ``minibatch_kinds``.
      axis_name: mesh axis the env axis is sharded over (inside ``shard_map``), or None.
      unroll: ``lax.scan`` unroll of the gradient-step loop. XLA on CPU runs a conv-net
        step inside a rolled loop 10x slower than unrolled; MLPs do not care.
      microbatches: chunks each minibatch's gradient is accumulated over (``micro_gradient``;
        1: one pass), a divisor of the minibatch's local envs.
      observe: ``(params, trajectory, axis_name) -> params`` after the gradient steps: the
        normalisation statistics learn from the batch (``rlcore.normalize.observer``); None:
        nothing.

    Returns:
      ``update(state: LearnerState, trajectory: Trajectory [T, B_local], key) ->
      (LearnerState, LossMetrics)``, metrics averaged over steps (and devices).
    """
    gradient_step = make_gradient_step(algorithm, apply_fn, optimizer, axis_name, microbatches)
    epochs = lambda key, trajectory: minibatch_schedule(  # noqa: E731 - the default schedule
        key, *trajectory.reward.shape, minibatch=minibatch, num_minibatches=num_minibatches,
        num_epochs=num_epochs, axis_name=axis_name)  # reward [T, B_local]

    def update(state: LearnerState, trajectory: Trajectory,
               key: PRNGKey) -> tuple[LearnerState, LossMetrics]:
        data = algorithm.prepare(state.params, apply_fn, trajectory)
        extra, source = algorithm.remember(state.extra, data, state.update)
        idx, take = algorithm.schedule(source, extra, key, axis_name) or epochs(key, trajectory)

        def step(carry: OptCarry, mb_idx: Any) -> tuple[OptCarry, LossMetrics]:
            return gradient_step(carry, take(source, mb_idx))

        def steps(carry: OptCarry) -> tuple[OptCarry, LossMetrics]:
            carry, metrics = jax.lax.scan(step, carry, idx, unroll=unroll)
            return carry, jax.tree.map(jnp.mean, metrics)

        learns = getattr(algorithm, "learns", lambda extra, update: True)(extra, state.update)
        (params, opt_state), metrics = run_or_skip(learns, steps,
                                                   (state.params, state.opt_state))
        if observe is not None:
            params = observe(params, trajectory, axis_name)
        extra = algorithm.after_update(extra, params, state.update + 1)
        return LearnerState(params=params, opt_state=opt_state, update=state.update + 1,
                            extra=extra), metrics

    return update


def run_or_skip(learns: Array | bool, steps: Callable[[Any], tuple[Any, Any]],
                carry: Any) -> tuple[Any, Any]:
    """``steps(carry) -> (carry, metrics)``; where ``learns`` (``Algorithm.learns``) is a
    traced bool, under one ``lax.cond`` whose other branch skips them (the carry as it is,
    the metrics zero: a replay buffer's warm-up); ``True`` runs them with no branch."""
    if learns is True:
        return steps(carry)

    def skip(c: Any) -> tuple[Any, Any]:
        shapes = jax.eval_shape(steps, c)[1]
        return c, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

    return jax.lax.cond(learns, steps, skip, carry)


def make_update_fn_for(hp: HParams, apply_fn: ApplyFn,
                       optimizer: optax.GradientTransformation, axis_name: str | None = None,
                       observe: Observe | None = None) -> UpdateFn:
    """``make_update_fn`` with the algorithm, epochs, minibatches (their kind:
    ``hp.minibatch_kind``, ``"auto"`` for the algorithm's own; sequences for a recurrent
    agent), unroll and micro-batches of ``hp``; ``observe`` as there."""
    algorithm = make_algorithm(hp)
    kind = minibatch_kind(type(algorithm), hp.minibatch_kind, hp.recurrent != NO_CORE)
    return make_update_fn(
        algorithm, apply_fn, optimizer, num_epochs=hp.num_epochs,
        num_minibatches=hp.num_minibatches, minibatch=kind,
        axis_name=axis_name, unroll=scan_unroll(hp.update_unroll),
        microbatches=micro_count(hp.microbatches), observe=observe)
