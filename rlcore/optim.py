"""Optimizer factories: Adam with global-norm clipping and linear annealing; torch RMSProp."""

from __future__ import annotations

import optax

from rlcore.hparams import HParams


def linear_schedule(learning_rate: float, total_steps: int, anneal: bool):
    """Learning rate decaying linearly to 0 over ``total_steps`` optimizer steps, or constant."""
    if not anneal:
        return optax.constant_schedule(learning_rate)
    return optax.linear_schedule(learning_rate, 0.0, max(int(total_steps), 1))


def torch_rmsprop(learning_rate, decay, eps):
    """RMSProp as PyTorch defines it: ``g / (sqrt(v) + eps)``, ``v`` starting at 0.

    (eps outside the square root; Cleanba's IMPALA uses eps 0.01, decay 0.99.)
    """
    return optax.rmsprop(learning_rate, decay=decay, eps=eps, eps_in_sqrt=False,
                         initial_scale=0.0)


def _adam(schedule, *, adam_eps, **_):
    return optax.adam(schedule, eps=adam_eps)


def _rmsprop(schedule, *, rmsprop_decay, rmsprop_eps, **_):
    return torch_rmsprop(schedule, decay=rmsprop_decay, eps=rmsprop_eps)


# name -> factory(schedule, **optimizer constants); the config's ``optimizer`` choices.
OPTIMIZERS = {"adam": _adam, "rmsprop": _rmsprop}


def make_optimizer(
    name: str,
    learning_rate: float,
    *,
    max_grad_norm: float,
    total_steps: int,
    anneal_lr: bool,
    adam_eps: float,
    rmsprop_decay: float,
    rmsprop_eps: float,
) -> optax.GradientTransformation:
    """Gradient clipping by global norm, then Adam or torch-style RMSProp.

    Args:
      name: a key of ``OPTIMIZERS``.
      learning_rate: initial learning rate.
      max_grad_norm: global-norm clip (``<= 0`` disables clipping).
      total_steps: optimizer steps over the whole run (for annealing).
      anneal_lr: decay the learning rate linearly to 0 over ``total_steps``.
      adam_eps, rmsprop_decay, rmsprop_eps: optimizer constants.

    Returns:
      An optax GradientTransformation.
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer: unknown '{name}' (expected one of {', '.join(OPTIMIZERS)})")
    schedule = linear_schedule(learning_rate, total_steps, anneal_lr)
    opt = OPTIMIZERS[name](schedule, adam_eps=adam_eps, rmsprop_decay=rmsprop_decay,
                           rmsprop_eps=rmsprop_eps)
    if isinstance(max_grad_norm, (int, float)) and max_grad_norm <= 0:
        return opt
    # A traced max_grad_norm (a swept value, > 0 by validation) always clips.
    return optax.chain(optax.clip_by_global_norm(max_grad_norm), opt)


def optimizer_for(hp: HParams, total_steps: int) -> optax.GradientTransformation:
    """The optimizer of ``hp`` over ``total_steps`` gradient steps (for annealing)."""
    return make_optimizer(
        hp.optimizer, hp.learning_rate, max_grad_norm=hp.max_grad_norm,
        total_steps=total_steps, anneal_lr=hp.anneal_lr, adam_eps=hp.adam_eps,
        rmsprop_decay=hp.rmsprop_decay, rmsprop_eps=hp.rmsprop_eps,
    )
