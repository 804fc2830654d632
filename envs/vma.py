"""Loops and branches of env suites inside Anakin's ``shard_map``, made to type-check.

Anakin steps its envs inside ``jax.shard_map``, where every value has a type that says over
which mesh axes it varies (docs/design.md, "Suites inside shard_map"). The env state comes in
varying over the data axis; a suite that starts a ``lax.scan`` (or ``fori_loop``,
``while_loop``) from a constant carry (Craftax's renderer: a zero map, then its mobs drawn in)
gets a body whose output carry varies and an input carry that does not, which JAX refuses;
so does a ``lax.cond`` or ``switch`` with a branch that returns a constant where another
returns something of the state (XLand-MiniGrid's actions).

``patch_modules(prefix)`` points the ``jax`` and ``lax`` names of the suite's loaded modules
at stand-ins whose loops cast their carry, in and out of the body, to varying over every
manual axis in scope (``jax.lax.pcast(..., to="varying")``: a type cast, no computation;
MJX's bodies return some model constants as they are), and whose
``cond`` and ``switch`` run every branch and select the result (``lax.select_n``, which
mixes varying and constant operands; under ``vmap`` with a batched predicate JAX turns a
cond into the same select, so the values are the same bit for bit). Outside
``shard_map`` (Sebulba's host envs, the tests' jitted steps) no axis is manual and the loops
are JAX's own. Nothing outside the suite's modules changes.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import jax
import jax.numpy as jnp


def varying(tree: Any) -> Any:
    """``tree`` with every leaf varying over every manual mesh axis in scope (unchanged
    outside ``shard_map``)."""
    axes = tuple(jax.sharding.get_abstract_mesh().manual_axes)
    if not axes:
        return tree

    def cast(x):
        x = jnp.asarray(x)
        missing = tuple(a for a in axes if a not in jax.typeof(x).manual_axis_type.varying)
        return jax.lax.pcast(x, missing, to="varying") if missing else x

    return jax.tree.map(cast, tree)


def scan(f, init, *args, **kwargs):
    """``jax.lax.scan`` with its carry varying, in and out."""
    def body(carry, x):
        carry, y = f(carry, x)
        return varying(carry), y

    return jax.lax.scan(body, varying(init), *args, **kwargs)


def fori_loop(lower, upper, body_fun, init_val, **kwargs):
    """``jax.lax.fori_loop`` with its carry varying, in and out."""
    return jax.lax.fori_loop(lower, upper, lambda i, c: varying(body_fun(i, c)),
                             varying(init_val), **kwargs)


def while_loop(cond_fun, body_fun, init_val):
    """``jax.lax.while_loop`` with its carry varying, in and out."""
    return jax.lax.while_loop(cond_fun, lambda c: varying(body_fun(c)), varying(init_val))


def _manual() -> bool:
    return bool(jax.sharding.get_abstract_mesh().manual_axes)


def cond(pred, true_fun, false_fun, *operands, **kwargs):
    """``jax.lax.cond``; inside ``shard_map`` both branches run and ``pred`` selects (what
    ``vmap`` makes of a cond anyway), so that a constant branch meets a varying one."""
    if not _manual():
        return jax.lax.cond(pred, true_fun, false_fun, *operands, **kwargs)
    return jax.tree.map(lambda a, b: jax.lax.select_n(jnp.asarray(pred, bool), b, a),
                        true_fun(*operands), false_fun(*operands))


def switch(index, branches, *operands, **kwargs):
    """``jax.lax.switch``; inside ``shard_map`` every branch runs and ``index`` (clamped, as
    ``switch`` does) selects."""
    if not _manual():
        return jax.lax.switch(index, branches, *operands, **kwargs)
    index = jnp.clip(jnp.asarray(index, jnp.int32), 0, len(branches) - 1)
    outs = [b(*operands) for b in branches]
    return jax.tree.map(lambda *xs: jax.lax.select_n(index, *xs), *outs)


class _Lax(types.ModuleType):
    """``jax.lax`` but for its loops and branches (this module's)."""

    scan, fori_loop, while_loop = (staticmethod(scan), staticmethod(fori_loop),
                                   staticmethod(while_loop))
    cond, switch = staticmethod(cond), staticmethod(switch)

    def __getattr__(self, name: str):
        return getattr(jax.lax, name)


class _Jax(types.ModuleType):
    """``jax`` with ``lax`` the stand-in above."""

    lax = _Lax("jax.lax")

    def __getattr__(self, name: str):
        return getattr(jax, name)


JAX, LAX = _Jax("jax"), _Jax.lax


def patch_modules(prefix: str) -> None:
    """Points the ``jax`` and ``lax`` globals of every loaded module named ``prefix`` or
    ``prefix.*`` at the stand-ins (idempotent)."""
    for name, module in list(sys.modules.items()):
        if module is None or not (name == prefix or name.startswith(prefix + ".")):
            continue
        if getattr(module, "jax", None) is jax:
            module.jax = JAX
        if getattr(module, "lax", None) is jax.lax:
            module.lax = LAX
