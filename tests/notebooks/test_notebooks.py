"""The Colab notebooks run top to bottom, headless (nbclient), on tiny sizes, as Colab runs
them after its install cell: on this tree's wheel installed non-editable into a fresh venv,
from a directory outside the checkout (tests/installed.py); and the installed package
trains from a shipped config named from outside the checkout."""

from __future__ import annotations

import json
import os
import re
import subprocess

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

from tests import installed
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
    """The training summary gives the mean and range over the agents, not one agent's; the
    notebook's own env trained through ``anakin.run``, its callback printing each line."""
    grid = os.path.join(out, "anakin_gridworld")
    with open(os.path.join(grid, "config.json")) as f:
        assert json.load(f)["env_id"] == "__main__:GridWorld"
    printed = [ln for t in texts for ln in t.splitlines() if ln.startswith("grid update")]
    with open(os.path.join(grid, "metrics.jsonl")) as f:
        assert len(printed) == len(f.readlines()) >= 2
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


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory):
    """This tree's wheel in a fresh venv (tests/installed.py) and its probe's report."""
    return installed.installed_venv(str(tmp_path_factory.mktemp("installed")))


def test_installed_package_is_whole(wheel_venv):
    """Every package of ours comes from the wheel, its declared requirements are met, and the
    data a user reaches from the package loads: the 57-game Atari table, a shipped config
    named from outside the checkout, the env registry."""
    venv, found = wheel_venv
    assert set(found["files"]) == set(installed.OURS)
    for package, path in found["files"].items():
        assert path.startswith(venv + os.sep) and not path.startswith(REPO + os.sep), package
    assert found["unmet"] == []
    assert found["atari_games"] == 57
    assert found["config"].startswith(venv + os.sep) and os.path.isfile(found["config"])
    assert found["env"] == ["gymnax", "CartPole-v1"]


def test_installed_trains_a_config_named_from_outside(wheel_venv, tmp_path):
    """``python -m anakin.main --config=configs/cartpole_ppo.py`` in a directory without
    configs/ trains the installed package's config."""
    venv, _ = wheel_venv
    workdir = tmp_path / "run"
    proc = subprocess.run(
        [installed.venv_python(venv), "-m", "anakin.main", "--config=configs/cartpole_ppo.py",
         f"--workdir={workdir}", "--config.total_env_steps=2048", "--config.log_every=2"],
        cwd=tmp_path, env=installed.clean_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = json.loads((workdir / "config.json").read_text())
    assert config["env_id"] == "CartPole-v1"
    assert (workdir / "metrics.jsonl").read_text().strip()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_headless(name, wheel_venv, tmp_path, monkeypatch):
    venv, _ = wheel_venv
    book = nbformat.read(os.path.join(REPO, "notebooks", f"{name}.ipynb"), as_version=4)
    assert any(c.cell_type == "markdown" for c in book.cells)
    monkeypatch.setenv("PODRACER_NOTEBOOK_SIZE", "tiny")
    monkeypatch.setenv("PODRACER_NOTEBOOK_OUT", str(tmp_path / "runs"))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    # The kernel is the venv's interpreter: it imports the installed wheel, not this checkout.
    monkeypatch.delenv("PYTHONPATH", raising=False)
    jupyter_path, kernel = installed.kernel_spec(str(tmp_path), venv)
    monkeypatch.setenv("JUPYTER_PATH", jupyter_path)
    client = NotebookClient(book, timeout=600, kernel_name=kernel,
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
