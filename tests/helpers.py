"""Shared test helpers: run-directory comparison and small configs."""

from __future__ import annotations

import json
import os

from rlcore.metrics import is_clock_key


def read_metrics(workdir: str) -> list[dict]:
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def reproducible_part(rows: list[dict]) -> list[dict]:
    """Rows without the keys that depend on the clock (``time``, ``sps``, ``wall``)."""
    return [{k: v for k, v in r.items() if not is_clock_key(k)} for r in rows]


def best_return(rows: list[dict]) -> float:
    returns = [r["episode_return"] for r in rows if r["episode_return"] is not None]
    return max(returns) if returns else float("-inf")
