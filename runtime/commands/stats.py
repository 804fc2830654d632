"""Statistics of evaluation episodes and the tables the evaluate commands print.

``summarize`` gives mean, 95% Student-t half-width, median, sample std, min and max;
``results_table`` prints them one row per quantity and ``parse_table`` reads a printed table
back (the tests and scripts read the commands' output with it). ``t_interval`` is also the
band of the ablation reports (``benchmarks.ablate_report``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class EpisodeResults:
    """The first episode of each evaluation env.

    Attributes:
      returns: ``[N]`` float64 raw (unclipped) returns.
      lengths: ``[N]`` int64 lengths in agent steps.
    """

    returns: np.ndarray
    lengths: np.ndarray


STAT_NAMES = ("mean", "ci95", "median", "std", "min", "max")


def t_interval(values, confidence: float = 0.95) -> tuple[float, float]:
    """``(mean, half-width)`` of the Student-t interval of the mean of ``values [N]``:
    ``t_{(1+confidence)/2, N-1} * s / sqrt(N)`` with the sample std ``s`` (ddof 1). The
    half-width is nan for N < 2 and 0 when all values are equal."""
    x = np.asarray(values, np.float64).reshape(-1)
    if x.size == 0:
        raise ValueError("t_interval: no values")
    m = float(x.mean())
    if x.size < 2:
        return m, math.nan
    from scipy.stats import t

    sem = float(x.std(ddof=1)) / math.sqrt(x.size)
    return m, float(t.ppf((1.0 + confidence) / 2.0, x.size - 1)) * sem


def summarize(values) -> dict[str, float]:
    """``{mean, ci95, median, std, min, max}`` of ``values [N]`` (N >= 1): ``ci95`` is the
    half-width of the 95% Student-t interval of the mean, ``std`` the sample standard
    deviation (ddof 1); both nan for one value."""
    x = np.asarray(values, np.float64).reshape(-1)
    if x.size == 0:
        raise ValueError("summarize: no values")
    mean, half = t_interval(x)
    std = float(x.std(ddof=1)) if x.size > 1 else math.nan
    return {"mean": mean, "ci95": half, "median": float(np.median(x)), "std": std,
            "min": float(x.min()), "max": float(x.max())}


def _cell(value: float) -> str:
    return f"{'-':>12}" if math.isnan(value) else f"{value:>12.3f}"


def results_table(rows: Mapping[str, Sequence[float]]) -> str:
    """A small table: one line per ``rows`` entry (label -> values), columns STAT_NAMES
    (``-`` where a statistic needs two values)."""
    width = max(len(label) for label in rows)
    lines = [" " * width + "".join(f"{name:>12}" for name in STAT_NAMES)]
    for label, values in rows.items():
        stats = summarize(values)
        lines.append(f"{label:<{width}}" + "".join(_cell(stats[n]) for n in STAT_NAMES))
    return "\n".join(lines)


def parse_table(text: str) -> dict[str, dict[str, float]]:
    """Reads a ``results_table`` back out of printed text: ``{label: {stat: value}}``."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.split() == list(STAT_NAMES))
    rows = {}
    for line in lines[start + 1:]:
        label, *cells = line.split() or [""]
        try:
            values = [math.nan if c == "-" else float(c) for c in cells]
        except ValueError:
            break
        if len(values) != len(STAT_NAMES):
            break
        rows[label] = dict(zip(STAT_NAMES, values))
    return rows


def result_rows(results: EpisodeResults,
                normalized: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The table rows: ``return``, ``length`` and, where the env has a score normaliser
    (Atari's human-normalised score), ``human-normalised`` (``normalized [N]``)."""
    rows = {"return": results.returns, "length": results.lengths}
    if normalized is not None:
        rows["human-normalised"] = normalized
    return rows
