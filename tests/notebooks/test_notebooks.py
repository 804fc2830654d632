"""The Colab notebooks run top to bottom, headless (nbclient), on tiny sizes."""

from __future__ import annotations

import json
import os
import re

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

from tests.helpers import REPO

pytestmark = pytest.mark.slow  # each notebook trains several runs (`make test-slow`)

NOTEBOOKS = ("anakin_colab_tpu", "sebulba_colab_tpu")


SUMMARY = re.compile(r"return (-?[\d.]+) mean over (\d+) agents \(min (-?[\d.]+), max "
                     r"(-?[\d.]+)\)")
DIFFERENCE = re.compile(r"^(\w+): largest difference (\S+) over (\d+) updates", re.M)


def _last_returns(metrics_path) -> list[float]:
    """Every agent's episode return at the last log step of a metrics.jsonl."""
    with open(metrics_path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r["episode_return"] for r in rows
            if r["update"] == rows[-1]["update"] and r["episode_return"] is not None]


def check_anakin(texts, out) -> None:
    """The training summary gives the mean and range over the agents, not one agent's."""
    found = [m for t in texts for m in SUMMARY.finditer(t)]
    assert len(found) == 1, texts
    mean, agents, low, high = (float(x) for x in found[0].groups())
    returns = _last_returns(os.path.join(out, "anakin_cartpole", "metrics.jsonl"))
    assert agents == len(returns) == 2
    assert mean == pytest.approx(np.mean(returns), abs=0.051)
    assert (low, high) == (pytest.approx(min(returns), abs=0.051),
                           pytest.approx(max(returns), abs=0.051))


def check_sebulba(texts, out) -> None:
    """The ablation prints the largest curve difference it measured per pipeline, and says
    so when async did not drift (the tiny run is short)."""
    ablation = texts[-1]
    diffs = {m.group(1): float(m.group(2)) for m in DIFFERENCE.finditer(ablation)}
    assert set(diffs) == {"cleanba", "async"}, ablation
    assert diffs["cleanba"] == 0.0
    assert ("async drifted nowhere in this run" in ablation) == (diffs["async"] == 0.0)


CHECKS = {"anakin_colab_tpu": check_anakin, "sebulba_colab_tpu": check_sebulba}


def _images(cell) -> int:
    return sum("image/png" in out.get("data", {}) for out in cell.get("outputs", []))


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_headless(name, tmp_path, monkeypatch):
    book = nbformat.read(os.path.join(REPO, "notebooks", f"{name}.ipynb"), as_version=4)
    assert any(c.cell_type == "markdown" for c in book.cells)
    monkeypatch.setenv("PODRACER_NOTEBOOK_SIZE", "tiny")
    monkeypatch.setenv("PODRACER_NOTEBOOK_OUT", str(tmp_path / "runs"))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    # The kernel imports this checkout's packages (not an installed copy of another one).
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (REPO, os.environ.get("PYTHONPATH")) if p))
    client = NotebookClient(book, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    code = [c for c in book.cells if c.cell_type == "code"]
    texts = ["".join(o.get("text", "") for o in c.outputs) for c in code]
    assert any("device(s):" in t for t in texts)  # the devices cell listed them
    assert any(_images(c) == 1 for c in code), "no inline learning curve"
    ablation = code[-1]
    assert _images(ablation) >= 3, "the ablation's plots are not shown"
    tables = [o for o in ablation.outputs if "text/markdown" in o.get("data", {})]
    assert tables, "the ablation's tables are not shown"
    md = tables[0]["data"]["text/markdown"]
    assert "| pipeline |" in md or "| env |" in md
    CHECKS[name](texts, str(tmp_path / "runs"))
