"""The Colab notebooks run top to bottom, headless (nbclient), on tiny sizes."""

from __future__ import annotations

import os

import nbformat
import pytest
from nbclient import NotebookClient

from tests.helpers import REPO

NOTEBOOKS = ("anakin_colab_tpu", "sebulba_colab_tpu")


def _images(cell) -> int:
    return sum("image/png" in out.get("data", {}) for out in cell.get("outputs", []))


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_headless(name, tmp_path, monkeypatch):
    book = nbformat.read(os.path.join(REPO, "notebooks", f"{name}.ipynb"), as_version=4)
    assert any(c.cell_type == "markdown" for c in book.cells)
    monkeypatch.setenv("PODRACER_NOTEBOOK_SIZE", "tiny")
    monkeypatch.setenv("PODRACER_NOTEBOOK_OUT", str(tmp_path / "runs"))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
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
