"""Fast compiles for the tests (imports JAX only inside ``install``, so tests/conftest.py can
set the environment before JAX starts).

Most tests compile far more than they run. On CPU, JAX's ``jax_disable_most_optimizations``
(LLVM at -O0) together with XLA's older fusion emitters compiles a small program 3-4x faster
(measured on a 2-core CPU host); the programs compute the same functions, more slowly. So
every test runs with both, in process and in the processes it starts, except a test marked
``optimized`` (one that mostly runs: it trains long or on images): its own compiles and the
processes it starts keep XLA's defaults. Users' runs always keep XLA's defaults.

XLA reads ``XLA_FLAGS`` once per process, when JAX's backend starts, so a flag there cannot be
turned off for one test. The test processes themselves therefore start JAX without
``XLA_FLAG`` and get its effect per compile from ``install`` while ``CONFIG`` is on; the
processes the tests start inherit ``XLA_FLAGS`` with it. (With the flag process-wide, the
optimized in-process tests compiled with the old emitters and took twice as long: the Atari
smoke test 70 s instead of 33 s.)

jaxlib 0.11 removed the older emitters and the option with them (its XLA rejects it: "No such
compile option"); there ``OLD_EMITTERS`` is false and the tests get
``jax_disable_most_optimizations`` alone.
"""

from importlib.metadata import version

XLA_FLAG = "--xla_cpu_use_fusion_emitters=false"  # in XLA_FLAGS: one setting per process
ENV = "JAX_DISABLE_MOST_OPTIMIZATIONS"  # JAX's default for its flag, read when JAX starts
CONFIG = "jax_disable_most_optimizations"  # the flag itself, read at every compile


# The compile option that ``XLA_FLAG`` sets (one of XLA's DebugOptions).
OPTION = ("xla_cpu_use_fusion_emitters", False)


def _has_old_emitters() -> bool:
    """Whether this jaxlib's XLA still has the older CPU fusion emitters: jaxlib 0.10.2 has
    them, 0.11.2 does not (read from the installed version: JAX is not started here)."""
    return tuple(int(p) for p in version("jaxlib").split(".")[:2]) < (0, 11)


OLD_EMITTERS = _has_old_emitters()  # whether ``XLA_FLAG`` and ``OPTION`` exist in this XLA


def install() -> None:
    """Makes every compile of this process while ``CONFIG`` is on use ``OPTION``, as
    ``XLA_FLAG`` would: it wraps JAX's one function that builds compile options (explicit
    ``compiler_options`` of a call still win). Nothing where this XLA lacks the option
    (``OLD_EMITTERS``)."""
    if not OLD_EMITTERS:
        return
    from jax._src import compiler

    build = compiler.get_compile_options
    if getattr(build, "fast_compile", False):
        return

    def get_compile_options(*args, env_options_overrides=None, **kwargs):
        if compiler._DISABLE_MOST_OPTIMIZATIONS.value:  # CONFIG, as JAX reads it here
            env_options_overrides = {OPTION[0]: OPTION[1], **(env_options_overrides or {})}
        return build(*args, env_options_overrides=env_options_overrides, **kwargs)

    get_compile_options.fast_compile = True
    compiler.get_compile_options = get_compile_options


def xla_defaults(env) -> dict[str, str]:
    """The variables that give a process started with ``env`` XLA's defaults: ``ENV`` off and
    ``XLA_FLAGS`` without ``XLA_FLAG`` (its other flags kept)."""
    flags = [f for f in env.get("XLA_FLAGS", "").split() if f != XLA_FLAG]
    return {ENV: "0", "XLA_FLAGS": " ".join(flags)}
