"""The summary a training command prints at the end: the learning curve at a few points,
the best and final mean return (per variant of a sweep)."""

from __future__ import annotations

import sys

from runtime.metrics import group_by_variant, variant_keys


def print_summary(rows) -> None:
    """A short learning-curve summary: return at a few points of the run. With several
    agents the return is their mean per log step; with a sweep, one column per variant."""
    keys = variant_keys(rows[0]) if rows else []
    groups = group_by_variant(rows, keys) if keys else [("mean episode return", rows)]
    curves = [(label, _mean_curve(group)) for label, group in groups]
    steps = sorted({s for _, curve in curves for s in curve})
    if not steps:
        print("no episode finished", file=sys.stderr)
        return
    n = len(steps)
    picks = [steps[i] for i in sorted({0, n // 4, n // 2, 3 * n // 4, n - 1})]
    print("learning curve (env steps -> " + " | ".join(label for label, _ in curves) + "):")
    for step in picks:
        cells = [f"{curve[step]:8.1f}" if step in curve else "       -" for _, curve in curves]
        print(f"  {step:>12,} -> " + " | ".join(cells))
    for label, curve in curves:
        name = "" if len(curves) == 1 else f"{label}: "
        print(f"{name}best logged mean return {max(curve.values()):.1f}; "
              f"final {curve[max(curve)]:.1f}")


def _mean_curve(rows) -> dict[int, float]:
    """``{env_steps: mean episode return over the rows of that step}`` (steps with one)."""
    by_step: dict[int, list[float]] = {}
    for r in rows:
        if r.get("episode_return") is not None:
            by_step.setdefault(r["env_steps"], []).append(r["episode_return"])
    return {s: sum(v) / len(v) for s, v in by_step.items()}
