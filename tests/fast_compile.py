"""Fast compiles for the tests (imports nothing, so tests/conftest.py applies it before JAX).

Most tests compile far more than they run. On CPU, JAX's ``jax_disable_most_optimizations``
(LLVM at -O0) together with XLA's older fusion emitters compiles a small program 3-4x faster
(WORKSPACE-notes.md, tenth session); the programs compute the same functions, more slowly. So
every test runs with both, in process and in the processes it starts, except a test marked
``optimized`` (one that mostly runs: it trains long or on images): its own compiles keep
LLVM's optimisations (the emitter setting is one per process) and the processes it starts
run with XLA's defaults. Users' runs always keep XLA's defaults.
"""

XLA_FLAG = "--xla_cpu_use_fusion_emitters=false"  # in XLA_FLAGS: one setting per process
ENV = "JAX_DISABLE_MOST_OPTIMIZATIONS"  # JAX's default for its flag, read when JAX starts
CONFIG = "jax_disable_most_optimizations"  # the flag itself, read at every compile


def xla_defaults(env) -> dict[str, str]:
    """The variables that give a process started with ``env`` XLA's defaults: ``ENV`` off and
    ``XLA_FLAGS`` without ``XLA_FLAG`` (its other flags kept)."""
    flags = [f for f in env.get("XLA_FLAGS", "").split() if f != XLA_FLAG]
    return {ENV: "0", "XLA_FLAGS": " ".join(flags)}
