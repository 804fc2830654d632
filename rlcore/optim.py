"""Optimizer factories: Adam or RAdam with global-norm clipping and linear annealing; torch
RMSProp.

The learning rate anneals once per update, as CleanRL and PureJaxRL step it: every
gradient step of update ``u`` (of ``num_updates``) uses ``lr * (1 - u / num_updates)``.
"""

from __future__ import annotations

from typing import Any, Callable

import jax.numpy as jnp
import optax

from rlcore.hparams import HParams, gradient_steps
from rlcore.staleness import LR_SCALE, lag_scaled_learning_rate
from rlcore.types import Scalar


def linear_schedule(learning_rate: Scalar, num_updates: Any, steps_per_update: int,
                    anneal: bool) -> optax.Schedule:
    """Learning rate decaying linearly to 0 over ``num_updates`` updates, constant within an
    update of ``steps_per_update`` optimizer steps; or constant.

    Optimizer step ``k`` (counting from 0) is in update ``u = k // steps_per_update`` and uses
    ``learning_rate * max(0, 1 - u / num_updates)``. ``num_updates`` may be a traced ``[]``
    int: then the compiled program does not depend on the run's length (docs/design.md,
    "Compile time"). The quotient is taken as ``u * (1 / num_updates)`` in float32, as XLA
    compiles optax's linear schedule of a constant length, so that either gives the same
    rates to the last bit.
    """
    if not anneal:
        return optax.constant_schedule(learning_rate)
    total = jnp.maximum(num_updates, 1)
    per_update = 1.0 / jnp.asarray(total, jnp.float32)

    def schedule(count: Any) -> Any:
        """The rate of optimizer step ``count`` (an int ``[]``)."""
        done = jnp.clip(count // steps_per_update, 0, total).astype(jnp.float32)
        return learning_rate * (1 - done * per_update)

    return schedule


def torch_rmsprop(learning_rate: Scalar | optax.Schedule, decay: Scalar,
                  eps: Scalar) -> optax.GradientTransformation:
    """RMSProp as PyTorch defines it: ``g / (sqrt(v) + eps)``, ``v`` starting at 0.

    (eps outside the square root; Cleanba's IMPALA uses eps 0.01, decay 0.99.)
    """
    return optax.rmsprop(learning_rate, decay=decay, eps=eps, eps_in_sqrt=False,
                         initial_scale=0.0)


def _adam(schedule: optax.Schedule, *, adam_eps: Scalar,
          **_: Any) -> optax.GradientTransformation:
    """Adam on ``schedule`` (the other optimizers' constants ignored)."""
    return optax.adam(schedule, eps=adam_eps)


def _radam(schedule: optax.Schedule, *, adam_eps: Scalar,
           **_: Any) -> optax.GradientTransformation:
    """Rectified Adam (Liu et al. 2020, arXiv 1908.03265; PQN's optimizer) on ``schedule``,
    epsilon ``adam_eps``."""
    return optax.radam(schedule, eps=adam_eps)


def _rmsprop(schedule: optax.Schedule, *, rmsprop_decay: Scalar, rmsprop_eps: Scalar,
             **_: Any) -> optax.GradientTransformation:
    """``torch_rmsprop`` on ``schedule`` (the other optimizers' constants ignored)."""
    return torch_rmsprop(schedule, decay=rmsprop_decay, eps=rmsprop_eps)


# name -> factory(schedule, **optimizer constants); the config's ``optimizer`` choices.
OPTIMIZERS: dict[str, Callable[..., optax.GradientTransformation]] = {
    "adam": _adam, "radam": _radam, "rmsprop": _rmsprop}


def make_optimizer(
    name: str,
    learning_rate: Scalar,
    *,
    max_grad_norm: Scalar,
    num_updates: Any,
    steps_per_update: int,
    anneal_lr: bool,
    adam_eps: Scalar,
    rmsprop_decay: Scalar,
    rmsprop_eps: Scalar,
) -> optax.GradientTransformation:
    """Gradient clipping by global norm, then Adam, RAdam or torch-style RMSProp.

    Args:
      name: a key of ``OPTIMIZERS``.
      learning_rate: initial learning rate.
      max_grad_norm: global-norm clip (``<= 0`` disables clipping).
      num_updates: updates of the whole run (for annealing): an int, or a traced ``[]``
        int.
      steps_per_update: optimizer steps per update (epochs x minibatches).
      anneal_lr: decay the learning rate linearly to 0 over ``num_updates``, once per
        update.
      adam_eps, rmsprop_decay, rmsprop_eps: optimizer constants.

    Returns:
      An optax GradientTransformation.
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer: unknown '{name}' (expected one of {', '.join(OPTIMIZERS)})")
    schedule = linear_schedule(learning_rate, num_updates, steps_per_update, anneal_lr)
    opt = OPTIMIZERS[name](schedule, adam_eps=adam_eps, rmsprop_decay=rmsprop_decay,
                           rmsprop_eps=rmsprop_eps)
    if isinstance(max_grad_norm, (int, float)) and max_grad_norm <= 0:
        return opt
    # A traced max_grad_norm (a swept value, > 0 by validation) always clips.
    return optax.chain(optax.clip_by_global_norm(max_grad_norm), opt)


def optimizer_for(hp: HParams, num_updates: Any,
                  policy_lag: int = 0) -> optax.GradientTransformation:
    """The optimizer of ``hp`` over a run of ``num_updates`` updates (for annealing); under
    the staleness correction ``lr_scale`` its learning rate is
    ``rlcore.staleness.lag_scaled_learning_rate`` of the rollouts' ``policy_lag`` (updates
    between the acting params and the learner's; the trainer that knows it passes it)."""
    learning_rate = hp.learning_rate
    if hp.staleness_correction == LR_SCALE:
        learning_rate = lag_scaled_learning_rate(learning_rate, policy_lag)
    return make_optimizer(
        hp.optimizer, learning_rate, max_grad_norm=hp.max_grad_norm,
        num_updates=num_updates, steps_per_update=gradient_steps(hp.num_epochs, hp.num_minibatches),
        anneal_lr=hp.anneal_lr, adam_eps=hp.adam_eps,
        rmsprop_decay=hp.rmsprop_decay, rmsprop_eps=hp.rmsprop_eps,
    )
