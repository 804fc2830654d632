"""Threefry on CPU as straight-line code instead of a rolled loop, where that compiles faster
(docs/design.md, "Compile time").

JAX lowers its threefry2x32 hash, behind every ``jax.random`` draw, to a ``while`` loop of 5
iterations on CPU, and to the same rounds written out on every other platform. A loop is a
boundary XLA does not fuse across, and each one is compiled as a computation of its own, so
a training call with a dozen draws compiles a dozen small loops. The unrolled form is the
same function of the same bits (the rounds and key injections in the same order), so every
random number, and so every result, is unchanged; only the compiled program differs.

That holds up to jaxlib 0.10. jaxlib 0.11's CPU compiler does the opposite: a program whose
draws feed several fusions compiles for minutes with the straight-line rounds (Anakin's
reset of 4 gymnax envs: no compile within 200 s, against 0.3 s with JAX's own loop), so
from jaxlib 0.11 on (``UNROLL_BEFORE``) JAX's own CPU lowering stays.

JAX offers no public switch for this: ``use_unrolled_cpu_lowering`` registers JAX's own
non-CPU lowering rule for the CPU platform through ``jax._src``. Where a JAX version moves
those names it does nothing and returns False (draws stay correct, compiles stay slower);
``tests/rlcore/test_seeding.py`` fails on such a version, so the next upgrade sees it.
"""

from __future__ import annotations

from importlib.metadata import version

UNROLL_BEFORE = (0, 11)  # the first jaxlib whose CPU compiler is slower with the unrolled rounds
_done = False


def unrolling_helps() -> bool:
    """Whether this jaxlib compiles the straight-line rounds faster than the loop (it is older
    than ``UNROLL_BEFORE``)."""
    return tuple(int(p) for p in version("jaxlib").split(".")[:2]) < UNROLL_BEFORE


def use_unrolled_cpu_lowering() -> bool:
    """Lowers ``threefry2x32`` on CPU to straight-line rounds from now on where
    ``unrolling_helps``; idempotent. Returns whether the unrolled rule is registered (False:
    this jaxlib compiles the loop faster, or this JAX lacks the hook)."""
    global _done
    if _done:
        return True
    if not unrolling_helps():
        return False
    try:
        from jax._src.interpreters import mlir
        from jax._src.random import threefry2x32 as threefry
        rule = threefry._threefry2x32_lowering_rule  # JAX's lowering for non-CPU platforms
        mlir.register_lowering(threefry.threefry2x32_p, rule, platform="cpu")
    except (ImportError, AttributeError):
        return False
    _done = True
    return True
