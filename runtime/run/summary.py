"""The summary a training command prints at the end: the learning curve of the whole run
(``metrics.jsonl``, so a resumed run's earlier invocations count too) at a few points, the
best and final mean return (per variant of a sweep), the evaluation returns where the run
evaluated, and the commands that go on from there."""

from __future__ import annotations

import os
import sys

from rlcore.numbers import readable
from runtime.run import files
from runtime.run.metrics import group_by_variant, variant_keys
from runtime.run.population import now_text

EVAL_RETURN = "eval/episode_return"


def whole_run(workdir: str | None, rows: list[dict]) -> list[dict]:
    """The run's rows: ``workdir``'s ``metrics.jsonl`` (every invocation of a resumed run),
    or ``rows`` (this invocation's) without a workdir or its file."""
    return (files.read_metrics(workdir) if workdir else []) or rows


def print_summary(rows) -> None:
    """A short learning-curve summary: return at a few points of the run. With several
    agents the return is their mean per log step; with a sweep, one column per variant.
    Then the best and final return, and the evaluation's where the run has it."""
    keys = variant_keys(rows[0]) if rows else []
    groups = group_by_variant(rows, keys) if keys else [("mean episode return", rows)]
    curves = [(label + now_text(group), _mean_curve(group), _mean_curve(group, EVAL_RETURN))
              for label, group in groups]
    steps = sorted({s for _, curve, _ in curves for s in curve})
    if not steps:
        print("no episode finished", file=sys.stderr)
        return
    n = len(steps)
    picks = [steps[i] for i in sorted({0, n // 4, n // 2, 3 * n // 4, n - 1})]
    print("learning curve (env steps -> " + " | ".join(label for label, *_ in curves) + "):")
    for step in picks:
        cells = [f"{readable(curve[step]):>8}" if step in curve else "       -"
                 for _, curve, _ in curves]
        print(f"  {step:>12,} -> " + " | ".join(cells))
    for label, curve, evals in curves:
        name = "" if len(curves) == 1 else f"{label}: "
        print(f"{name}best logged mean return {readable(max(curve.values()))}; "
              f"final {readable(curve[max(curve)])}")
        if evals:
            print(f"{name}evaluation return (in training): best "
                  f"{readable(max(evals.values()))}; final {readable(evals[max(evals)])} "
                  f"(at {max(evals):,} env steps)")


def next_steps_line(mode: str, workdir: str, agents: int = 1) -> str:
    """What to run next on a finished run in ``workdir`` of ``mode`` (anakin, sebulba) that
    trained ``agents`` agents (more than one: ``--agent`` picks which is scored)."""
    which = ("scores the agent" if agents == 1 else
             f"--agent=K scores agent K (0..{agents - 1}, seeds within sweep values)")
    return (f"next: python -m {mode}.evaluate --workdir={workdir} {which}; the same command "
            "with a larger --config.total_env_steps trains it further")


def curve_line(workdir: str) -> str | None:
    """The line that names the run's ``curve.png`` (None where none was written)."""
    path = files.curve_path(workdir)
    return f"curve: {path} (mean episode return against env steps)" if os.path.exists(
        path) else None


def _mean_curve(rows, key: str = "episode_return") -> dict[int, float]:
    """``{env_steps: mean of key over the rows of that step}`` (steps with one)."""
    by_step: dict[int, list[float]] = {}
    for r in rows:
        if r.get(key) is not None:
            by_step.setdefault(r["env_steps"], []).append(r[key])
    return {s: sum(v) / len(v) for s, v in by_step.items()}
