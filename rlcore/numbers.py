"""How a return or a loss reads on the console, in tables and in plots' text: the one rule
(docs/design.md, "Metrics keys"). No imports of ours, so every room may use it."""

from __future__ import annotations

import math

SIGNIFICANT = 3  # digits a value keeps, at least one decimal (196.6, 23.4, 9.50, 0.934)
MAX_DECIMALS = 6  # below 10**-(MAX_DECIMALS - SIGNIFICANT + 1): scientific (1.23e-07)


def readable(value: float) -> str:
    """``value`` with ``SIGNIFICANT`` significant digits and at least one decimal: a
    return in the tens or hundreds keeps its one decimal (``196.6``, ``23.4``), one in ``[-1, 1]``
    gets the digits that tell it apart (``0.934``, ``-0.0412``), a tiny loss reads in
    scientific form (``1.23e-07``); ``nan`` and ``inf`` as Python writes them.

    Args:
      value: a float (or int).

    Returns:
      The text, e.g. ``readable(0.93421) == "0.934"``, ``readable(196.64) == "196.6"``.
    """
    value = float(value)
    if value == 0 or not math.isfinite(value):
        return f"{value:.1f}" if value == 0 else str(value)
    decimals = SIGNIFICANT - 1 - math.floor(math.log10(abs(value)))
    if decimals > MAX_DECIMALS:
        return f"{value:.{SIGNIFICANT - 1}e}"
    return f"{value:.{max(1, decimals)}f}"
