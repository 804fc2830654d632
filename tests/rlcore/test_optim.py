"""Optimizers against their formulas written in NumPy."""

import jax.numpy as jnp
import numpy as np
import optax
import pytest

from rlcore import optim

TOL = dict(atol=1e-6, rtol=1e-5)


def _grads(step):
    rng = np.random.default_rng(step)
    return {"a": rng.normal(size=(3, 2)).astype(np.float32),
            "b": rng.normal(size=(4,)).astype(np.float32)}


def _np_torch_rmsprop(params, grads_seq, lr, alpha, eps):
    """``torch.optim.RMSprop``: ``v = alpha v + (1 - alpha) g^2; p -= lr g / (sqrt(v) + eps)``,
    ``v`` starting at 0."""
    params = {k: np.asarray(v, np.float64) for k, v in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    for g, step_lr in zip(grads_seq, lr, strict=True):
        for k in params:
            v[k] = alpha * v[k] + (1 - alpha) * np.square(g[k])
            params[k] = params[k] - step_lr * g[k] / (np.sqrt(v[k]) + eps)
    return params


def _run(opt, params, grads_seq):
    state = opt.init(params)
    for g in grads_seq:
        updates, state = opt.update(g, state, params)
        params = optax.apply_updates(params, updates)
    return params


@pytest.mark.parametrize("steps", [1, 2, 5])
def test_torch_rmsprop_matches_pytorch_formula(steps):
    params = {"a": np.ones((3, 2), np.float32), "b": np.zeros((4,), np.float32)}
    grads_seq = [_grads(s) for s in range(steps)]
    got = _run(optim.torch_rmsprop(0.01, decay=0.9, eps=0.01), params, grads_seq)
    want = _np_torch_rmsprop(params, grads_seq, [0.01] * steps, 0.9, 0.01)
    for k in params:
        np.testing.assert_allclose(got[k], want[k], err_msg=k, **TOL)


def test_torch_rmsprop_first_step_by_hand():
    """g = 2, alpha = 0.99, eps = 0.01: v = 0.01 * 4 = 0.04, sqrt(v) = 0.2,
    step = lr * 2 / 0.21 = 0.1 * 9.5238095 = 0.95238095."""
    got = _run(optim.torch_rmsprop(0.1, decay=0.99, eps=0.01), {"w": jnp.float32(0.0)},
               [{"w": jnp.float32(2.0)}])
    np.testing.assert_allclose(got["w"], -0.95238095, **TOL)


def test_make_optimizer_rmsprop_anneals_linearly_to_zero_once_per_update():
    """With ``anneal_lr`` every step of update u (counting from 0, ``steps_per_update``
    steps each) uses ``lr (1 - u / num_updates)``; the steps after the last update do not
    move the params."""
    updates, per_update = 2, 2
    total = updates * per_update
    opt = optim.make_optimizer("rmsprop", 0.02, max_grad_norm=0.0, num_updates=updates,
                               steps_per_update=per_update, anneal_lr=True, adam_eps=1e-5,
                               rmsprop_decay=0.9, rmsprop_eps=0.01)
    params = {"a": np.ones((3, 2), np.float32), "b": np.zeros((4,), np.float32)}
    grads_seq = [_grads(s) for s in range(total + 1)]
    lrs = [0.02 * (1 - (k // per_update) / updates) for k in range(total + 1)]
    assert lrs == [0.02, 0.02, 0.01, 0.01, 0.0]
    state = opt.init(params)
    p = params
    for k, g in enumerate(grads_seq):
        updates, state = opt.update(g, state, p)
        p = optax.apply_updates(p, updates)
        want = _np_torch_rmsprop(params, grads_seq[: k + 1], lrs[: k + 1], 0.9, 0.01)
        for name in params:
            np.testing.assert_allclose(p[name], want[name], err_msg=f"{name} step {k}", **TOL)
    for name in params:  # the last step was a no-op
        np.testing.assert_array_equal(updates[name], 0.0)


def test_linear_schedule():
    """100 updates of 4 steps: constant within an update, linear over updates, then 0."""
    sched = optim.linear_schedule(0.5, 100, 4, anneal=True)
    np.testing.assert_allclose(
        [sched(0), sched(3), sched(4), sched(200), sched(203), sched(400), sched(600)],
        [0.5, 0.5, 0.495, 0.25, 0.25, 0.0, 0.0], atol=1e-7)
    const = optim.linear_schedule(0.5, 100, 4, anneal=False)
    np.testing.assert_allclose([const(0), const(100), const(10**6)], [0.5] * 3)


def test_make_optimizer_adam_first_step():
    """Adam's bias-corrected first step: ``-lr g / (|g| + eps)`` (eps = 1e-5)."""
    opt = optim.make_optimizer("adam", 0.1, max_grad_norm=0.0, num_updates=10, steps_per_update=1,
                               anneal_lr=False, adam_eps=1e-5, rmsprop_decay=0.99,
                               rmsprop_eps=0.01)
    g = _grads(0)
    params = {k: np.zeros_like(v) for k, v in g.items()}
    got = _run(opt, params, [g])
    for k in g:
        np.testing.assert_allclose(got[k], -0.1 * g[k] / (np.abs(g[k]) + 1e-5), **TOL)


@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_make_optimizer_clips_by_global_norm(max_norm):
    """The gradient is scaled by ``min(1, max_norm / ||g||)``, the norm over all leaves."""
    g = _grads(1)
    global_norm = np.sqrt(sum(np.sum(np.square(v)) for v in g.values()))
    assert global_norm > 0.5  # the small threshold clips, the large one does not
    scale = min(1.0, max_norm / global_norm)
    opt = optim.make_optimizer("rmsprop", 0.1, max_grad_norm=max_norm,
                               num_updates=10, steps_per_update=1,
                               anneal_lr=False, adam_eps=1e-5, rmsprop_decay=0.9,
                               rmsprop_eps=0.01)
    params = {k: np.zeros_like(v) for k, v in g.items()}
    got = _run(opt, params, [g])
    clipped = {k: scale * v for k, v in g.items()}
    want = _np_torch_rmsprop(params, [clipped], [0.1], 0.9, 0.01)
    for k in g:
        np.testing.assert_allclose(got[k], want[k], err_msg=k, **TOL)


def test_make_optimizer_unknown_name():
    with pytest.raises(ValueError, match="optimizer"):
        optim.make_optimizer("sgd", 0.1, max_grad_norm=0.5,
                             num_updates=10, steps_per_update=1, anneal_lr=True,
                             adam_eps=1e-5, rmsprop_decay=0.99, rmsprop_eps=0.01)
