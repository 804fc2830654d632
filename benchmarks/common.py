"""Small helpers shared by the benchmark scripts."""

from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax


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
