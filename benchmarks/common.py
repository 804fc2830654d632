"""Small helpers shared by the benchmark scripts."""

from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax

from rlcore.errors import ConfigError
from runtime.config.fields import Rule
from runtime.process.arguments import Check


def flag_checks(rules: Mapping[str, Rule], *more: Check) -> Check:
    """A benchmark command's check of its flags (``OneLineParser(check=...)``, run before any
    work): each flag of ``rules`` by the config fields' rule (``runtime.config.fields``:
    ``POSITIVE``, ``Number``, ``Choice``; each item of a list alone), then each of ``more``
    (docs/design.md, "Exit codes")."""
    from runtime.config.validation import check_values

    def check(args) -> None:
        check_values(vars(args), rules)
        for other in more:
            other(args)

    return check


def env_ids_known(flag: str, mode: str) -> Check:
    """A check: the env id (or each of the list) of ``flag`` runs in ``mode``
    (``envs.registry``'s ``ANAKIN`` or ``SEBULBA``, by the registry's own check, with its
    close matches), the error naming ``flag``."""
    def check(args) -> None:
        from envs import registry

        known = (registry.check_jax_env_id if mode == registry.ANAKIN
                 else registry.check_host_env_id)
        value = getattr(args, flag)
        for env_id in value if isinstance(value, list) else [value]:
            try:
                known(env_id)
            except ConfigError as e:
                raise ConfigError(f"{flag}: {str(e).removeprefix('env_id: ')}") from None

    return check


def path_check(flag: str, problem: Callable[[str], str | None]) -> Check:
    """A check: ``problem(value of flag)`` (e.g. ``runtime.process.paths.output_dir_problem``,
    ``file_problem``) is None, else its words name ``flag``."""
    def check(args) -> None:
        said = problem(getattr(args, flag))
        if said is not None:
            raise ConfigError(f"{flag}: {said}")

    return check


def file_problem(path: str) -> str | None:
    """Why ``path`` is not a file to read (None: it is)."""
    return None if os.path.isfile(path) else f"{path} is not a file"


def dir_problem(path: str) -> str | None:
    """Why ``path`` is not a directory to read (None: it is)."""
    return None if os.path.isdir(path) else f"{path} is not a directory"


def validate_configs(configs: Sequence[Any], mode: Any) -> None:
    """Each config checked as the training command checks it
    (``runtime.config.validation.validate``, ``mode`` the architecture's ``ModeChecks``, on
    this process's devices): a benchmark refuses its sizes and env before it runs;
    raises ``ConfigError`` naming the field."""
    from runtime.config.validation import DeviceCounts, validate

    counts = DeviceCounts(devices=jax.device_count(), local_devices=jax.local_device_count(),
                          processes=1)
    for config in configs:
        validate(config, mode, counts)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table with ``|`` separators, columns right-aligned to the widest cell."""
    cells = [list(map(str, headers))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = [" | ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """Runs ``fn()``, blocks on its result; returns ``(result, seconds)``."""
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - t0


def time_calls(step: Callable[[Any], Any], carry: Any, calls: int) -> tuple[Any, list[float]]:
    """Runs ``carry = step(carry)`` ``calls`` times, blocking after each.

    Returns ``(last carry, [seconds of each call])``.
    """
    seconds = []
    for _ in range(calls):
        t0 = time.perf_counter()
        carry = jax.block_until_ready(step(carry))
        seconds.append(time.perf_counter() - t0)
    return carry, seconds


def read_rows(workdir: str) -> list[dict]:
    """The lines of ``workdir/metrics.jsonl`` (none where it does not exist yet)."""
    path = os.path.join(workdir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def cpu_s_per_1k(cpu_s: float, env_steps: int) -> float:
    """Process CPU seconds (all threads) per 1000 env steps: ``cpu_s`` spent on
    ``env_steps`` (e.g. one update's mean CPU seconds and its env steps)."""
    return 1000.0 * cpu_s / env_steps


def in_fresh_process(threads: int | None, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a new Python process whose JAX starts with ``threads`` XLA CPU
    intra-op threads (None: XLA's default, one per core), as a run with that count would:
    the pool is sized once, when JAX starts, so rows of a table that runs of different
    sizes would start with different counts are measured each in a process of its own.
    ``PJRT_NPROC`` set by the user wins. ``fn`` and ``args`` must pickle (module-level)."""
    from runtime.config.xla_flags import THREADS_VARIABLE

    saved = os.environ.get(THREADS_VARIABLE)
    if saved is None and threads:
        os.environ[THREADS_VARIABLE] = str(threads)
    try:
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
            return pool.submit(fn, *args).result()
    finally:
        if saved is None:
            os.environ.pop(THREADS_VARIABLE, None)


def xla_cpu_threads() -> int:
    """The XLA CPU intra-op pool size of this process: ``PJRT_NPROC`` where set, else one
    per core the process may run on (XLA's default)."""
    from runtime.config.xla_flags import THREADS_VARIABLE

    return int(os.environ.get(THREADS_VARIABLE) or len(os.sched_getaffinity(0)))
