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


def assert_rows_close(rows_a: list[dict], rows_b: list[dict], tol: float = 1e-4) -> None:
    """Same updates, losses equal to ``tol``, episode returns equal (or both absent)."""
    import numpy as np
    import pytest

    assert [r["update"] for r in rows_a] == [r["update"] for r in rows_b]
    for ra, rb in zip(rows_a, rows_b):
        for key in ra:
            if key.startswith("loss/"):
                np.testing.assert_allclose(ra[key], rb[key], rtol=tol, atol=tol, err_msg=key)
        if ra["episode_return"] is None:
            assert rb["episode_return"] is None
        else:
            assert rb["episode_return"] == pytest.approx(ra["episode_return"], rel=1e-5)
