"""The config fields that are XLA runtime settings: flags in ``XLA_FLAGS`` and the CPU
thread count in ``PJRT_NPROC``, both read when JAX starts its backends, and JAX's persistent
compilation cache (``compile_cache_dir``), read at the first compile, so a command applies
them first (``apply_xla_cpu_flags``)."""

from __future__ import annotations

import os
import re
import sys

from rlcore.errors import ConfigError
from runtime.config import sweep
from runtime.process.paths import output_dir_problem

# Config fields that are XLA runtime flags, read when JAX starts its backends: field ->
# (flag, its value for the field's value); a flag already in XLA_FLAGS wins.
XLA_FLAG_FIELDS = {
    "xla_cpu_multi_thread_eigen": lambda v: f"--xla_cpu_multi_thread_eigen={str(v).lower()}",
    # On by default (XLA's default); that scheduler orders an unrolled update so that every
    # gradient step's buffers are live at once (XLA's figure: benchmarks/memory_check.py),
    # which is why configs/atari_base.py turns it off. It orders ops, so results do not depend on it
    # (an LSTM, a feed-forward and a Brax config gave identical metrics with it off).
    "xla_cpu_concurrency_scheduler":
        lambda v: f"--xla_cpu_enable_concurrency_optimized_scheduler={str(v).lower()}",
    # Deterministic GPU ops (scatters, reductions) where XLA has them; no effect on CPU,
    # whose ops are deterministic already.
    "deterministic": lambda v: "--xla_gpu_deterministic_ops=true" if v else None,
}


def apply_xla_cpu_flags(config, mode: str | None = None, *, refuse_cache: bool = True) -> None:
    """Adds the config's XLA runtime flags (``XLA_FLAG_FIELDS``: the CPU thread pool, GPU
    determinism) to ``XLA_FLAGS`` and its CPU intra-op thread count (``cpu_threads_for``)
    to ``PJRT_NPROC``, both read when JAX starts its backends, so call this first; a flag
    or ``PJRT_NPROC`` already in the environment wins. ``mode``: ``"anakin"``,
    ``"sebulba"`` or None (evaluation, benchmarks: no automatic thread count);
    ``refuse_cache``: see ``usable_cache_dir``."""
    for field, flag_of in XLA_FLAG_FIELDS.items():
        value = config.get(field)
        flag = flag_of(value) if isinstance(value, bool) else None
        current = os.environ.get("XLA_FLAGS", "")
        if flag is not None and flag.split("=")[0] not in current:
            os.environ["XLA_FLAGS"] = f"{current} {flag}".strip()
    threads = cpu_threads_for(config, mode)
    if threads and THREADS_VARIABLE not in os.environ:
        os.environ[THREADS_VARIABLE] = str(threads)
    apply_compile_cache(config, refuse=refuse_cache)


# XLA's CPU client sizes its intra-op thread pool from this variable when it starts (else
# one thread per core it may run on).
THREADS_VARIABLE = "PJRT_NPROC"
# Automatic ``cpu_threads``: one intra-op thread for an Anakin update of at most this many
# env steps (all agents) on one device. Measured with configs/cartpole_ppo.py's network on
# a 2-core CPU host (docs/running.md, "CPU threads"): at 4 envs x 128 steps 1.31x the steps/s for
# 0.57x the CPU seconds; one thread against two: 1.13x at 8 envs, 0.94x at 16.
SMALL_UPDATE_ENV_STEPS = 1024


def cpu_threads_for(config, mode: str | None) -> int | None:
    """XLA CPU intra-op threads for a run: ``config.cpu_threads`` where > 0; for 0 (auto)
    1 when ``mode`` is ``"anakin"``, the run computes on one local device and one update
    takes at most ``SMALL_UPDATE_ENV_STEPS`` env steps over all its agents (such an update
    is a chain of small ops, for which a second pool thread costs more in hand-offs between
    cores than it computes), else None: XLA's default, one per core. Thread counts do not
    change results (CPU dots gave equal bits at 1 and 2 threads; docs/design.md, "Anakin
    calls").
    Values validation would refuse give None (it reports them before anything compiles).
    """
    value = config.get("cpu_threads", 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return None
    if value > 0:
        return value
    if mode != "anakin" or _local_devices(config) != 1:
        return None
    try:
        steps = config.num_envs * config.num_steps * sweep.num_agents(config)
    except (TypeError, AttributeError, KeyError):  # refused by validation later
        return None
    return 1 if isinstance(steps, int) and 0 < steps <= SMALL_UPDATE_ENV_STEPS else None


def _local_devices(config) -> int | None:
    """Devices this process computes on, as far as known before JAX starts: the config's
    ``num_devices`` where set, else the host platform's device count from ``XLA_FLAGS``
    (1 without the flag); None when the config gives no integer."""
    value = config.get("num_devices", 0)
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    if value > 0:
        return value
    return fake_devices(os.environ.get("XLA_FLAGS", "")) or 1


# XLA's flag that caps the instruction set it compiles CPU code for (SSE4_2, AVX, AVX2,
# AVX512, ...; docs/design.md, "Determinism across hosts"). Not a config field: a cap does
# not make two hosts' runs equal.
ISA_FLAG = "--xla_cpu_max_isa"

# The XLA flag that gives a CPU process fake devices (read once, when JAX starts).
FAKE_DEVICES_FLAG = re.compile(r"--xla_force_host_platform_device_count=(\d+)")


def fake_devices(xla_flags: str) -> int | None:
    """The fake CPU device count that ``xla_flags`` (an ``XLA_FLAGS`` value) asks for, or
    None when it has no such flag."""
    found = FAKE_DEVICES_FLAG.search(xla_flags)
    return int(found.group(1)) if found else None


# JAX's persistent compilation cache (docs/design.md, "Run directory"): ``compile_cache_dir``
# names it; this value turns it off.
CACHE_OFF = "off"
# The location where the field is empty and the environment names none (JAX reads this
# variable when it is imported: the tests point it at a directory of their own).
CACHE_VARIABLE = "JAX_COMPILATION_CACHE_DIR"
# At most this many bytes of compiled programs: a command's start removes the least
# recently used entries beyond (JAX's own bound, ``jax_compilation_cache_max_size``, needs
# the ``filelock`` package).
CACHE_MAX_BYTES = 2 * 2**30
# Programs that compile in less are not written: the eager ops' one-op programs compile in
# milliseconds; init, the update call, rollouts and evaluations take longer.
CACHE_MIN_COMPILE_S = 0.1


def compile_cache_dir(config) -> str | None:
    """The persistent compilation cache's directory for ``config.compile_cache_dir``: None
    for ``"off"`` (or a value validation refuses); the field's directory (``~`` expanded)
    where given; else ``$JAX_COMPILATION_CACHE_DIR`` where set, else
    ``$XDG_CACHE_HOME/podracer-rl/jax`` (``~/.cache/podracer-rl/jax`` without it)."""
    value = config.get("compile_cache_dir", "")
    if not isinstance(value, str) or value.strip().lower() == CACHE_OFF:
        return None
    if value:
        return os.path.expanduser(value)
    if os.environ.get(CACHE_VARIABLE):
        return os.environ[CACHE_VARIABLE]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "podracer-rl", "jax")


def apply_compile_cache(config, *, refuse: bool = True) -> None:
    """Turns JAX's persistent compilation cache on at ``usable_cache_dir(config, refuse)``
    (or off for None), trimmed to ``CACHE_MAX_BYTES``, for programs that compile in at least
    ``CACHE_MIN_COMPILE_S``; call it before the first compile. A cached program is the
    compiled program (its key covers the HLO, the XLA flags and the devices), so the cache
    changes no result. An environment's ``JAX_COMPILATION_CACHE_DIR`` keeps its own
    threshold (the tests' session cache)."""
    import jax

    directory = usable_cache_dir(config, refuse)
    if directory is None:
        jax.config.update("jax_enable_compilation_cache", False)
        return
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", directory)
    if directory != os.environ.get(CACHE_VARIABLE):
        jax.config.update("jax_persistent_cache_min_compile_time_secs", CACHE_MIN_COMPILE_S)
    trim_cache(directory, CACHE_MAX_BYTES)


def usable_cache_dir(config, refuse: bool = True) -> str | None:
    """``compile_cache_dir(config)`` where it can be a writable directory (created if
    missing); else, where the field names it and ``refuse`` (a training command: the
    user's own config), a refusal; otherwise (the environment's or the default directory,
    or an evaluation of a run whose saved config names it) one line on stderr and None: the
    command goes on without a cache, which changes no result.

    Raises:
      ConfigError: ``compile_cache_dir`` names a directory that cannot be used.
    """
    directory = compile_cache_dir(config)
    if directory is None:
        return None
    problem = output_dir_problem(directory)
    if problem is None:
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as e:
            problem = f"{directory} cannot be created ({e.strerror})"
    if problem is None:
        return directory
    if refuse and config.get("compile_cache_dir", ""):
        raise ConfigError(f"compile_cache_dir: {problem}; give a writable directory, or "
                          f"{CACHE_OFF}")
    print(f"compile cache: {problem}; running without one (compile_cache_dir names another "
          f"directory, {CACHE_OFF} turns it off)", file=sys.stderr)
    return None


def trim_cache(directory: str, max_bytes: int) -> list[str]:
    """Removes the least recently used (read or written) files of ``directory`` until the
    rest hold at most ``max_bytes``; returns the removed names. A missing directory, or a
    file another process removes meanwhile, is no error."""
    try:
        entries = [e for e in os.scandir(directory) if e.is_file(follow_symlinks=False)]
        stats = [(max(e.stat().st_atime, e.stat().st_mtime), e.stat().st_size, e)
                 for e in entries]
    except OSError:
        return []
    total = sum(size for _, size, _ in stats)
    removed = []
    for _, size, entry in sorted(stats, key=lambda s: s[0]):
        if total <= max_bytes:
            break
        try:
            os.remove(entry.path)
        except OSError:
            continue
        total -= size
        removed.append(entry.name)
    return removed


CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"  # JAX's event for a program it loaded
_cache_hits = [0, False]  # programs loaded from the persistent cache; whether counted


def compile_cache_hits() -> int:
    """Programs this process has loaded from the persistent compile cache so far (counted
    from JAX's monitoring event from the first call on): a compile that raises it was served
    by the cache."""
    if not _cache_hits[1]:
        import jax

        def count(event: str, **_) -> None:
            if event == CACHE_HIT_EVENT:
                _cache_hits[0] += 1

        jax.monitoring.register_event_listener(count)
        _cache_hits[1] = True
    return _cache_hits[0]
