"""examples/: the gridworld env, torso and DPO of a package outside the repository, run from
a copy of examples/ placed outside it (so that nothing relies on being inside the checkout):
the command line in both architectures, Python with the progress callback, and (long tier)
each architecture trained to the stated return."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys

import pytest

from tests.helpers import REPO, entry_env, read_metrics

THRESHOLD = 0.92  # of 0.937, a straight walk's mean (examples/gridworld/env.py)
OWN = ["--config.env_id=gridworld.env:GridWorld", "--config.network=gridworld.torso:GridTorso",
       "--config.algorithm=gridworld.dpo:DPO"]


@pytest.fixture
def examples(tmp_path, monkeypatch):
    """A copy of examples/ outside the repository, importable (``gridworld``)."""
    copy = tmp_path / "examples"
    shutil.copytree(os.path.join(REPO, "examples"), copy)
    monkeypatch.syspath_prepend(str(copy))
    for name in [m for m in sys.modules if m == "gridworld" or m.startswith("gridworld.")]:
        monkeypatch.delitem(sys.modules, name)
    return copy


def _command(module: str, config: str, args: list[str], cwd, timeout_s: float = 300):
    """``python -m module`` from ``cwd`` (the copy), podracer-rl importable as installed."""
    env = dict(entry_env(), PYTHONPATH=os.pathsep.join([str(cwd), REPO]))
    return subprocess.run([sys.executable, "-m", module, f"--config={config}", *OWN, *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s)


@pytest.mark.slow  # 15-25 s (the default tier's 12 minutes)
def test_the_examples_run_from_the_command_line_in_both_architectures(examples, tmp_path):
    """A few updates each; DPO's own hyperparameters land in config.json."""
    import json

    for module, config, extra in (("anakin.main", "cartpole_ppo", ["--config.num_envs=16"]),
                                  ("sebulba.main", "cartpole_ppo_sebulba", [])):
        workdir = tmp_path / module.split(".")[0]
        proc = _command(module, config, [*extra, "--config.total_env_steps=4096",
                                         "--config.algo.dpo_beta=0.5", f"--workdir={workdir}"],
                        examples)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads((workdir / "config.json").read_text())["algo"] == {
            "dpo_alpha": 2.0, "dpo_beta": 0.5}
        assert read_metrics(workdir)
    # A relative --video path lands in the run directory, not where the command runs.
    env = dict(entry_env(), PYTHONPATH=os.pathsep.join([str(examples), REPO]))
    proc = subprocess.run([sys.executable, "-m", "anakin.evaluate",
                           f"--workdir={tmp_path / 'anakin'}", "--episodes=1", "--video=grid.gif"],
                          cwd=examples, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "anakin" / "grid.gif").is_file() and not (examples / "grid.gif").exists()


def _trained_to_threshold(run, config, workdir, **kwargs) -> list[dict]:
    """``run(config, workdir, env=..., network=..., algorithm=..., on_row=...)`` with the
    example's objects, stopped by the progress callback at the first row at ``THRESHOLD``."""
    from gridworld import dpo, env, torso

    class Reached(Exception):
        pass

    seen = []

    def on_row(row):
        seen.append(row)
        if (row["episode_return"] or -math.inf) >= THRESHOLD:
            raise Reached

    try:
        run(config, workdir, env=env.GridWorld, network=torso.GridTorso, algorithm=dpo.DPO,
            on_row=on_row, **kwargs)
    except Reached:
        pass
    return seen


def test_from_python_the_callback_sees_each_row(examples, tmp_path):
    """``anakin.run`` with the example's classes: ``on_row`` gets every row as it is logged
    (here it stops the run after the second)."""
    import anakin
    from configs import cartpole_ppo

    config = cartpole_ppo.get_config()
    config.num_envs, config.num_steps, config.total_env_steps = 16, 32, 16 * 32 * 8
    config.log_every, config.updates_per_call = 2, 2
    rows = []

    class Enough(Exception):
        pass

    def on_row(row):
        rows.append(row)
        if len(rows) == 2:
            raise Enough

    from gridworld import dpo, env, torso

    with pytest.raises(Enough):
        anakin.run(config, str(tmp_path / "run"), env=env.GridWorld, network=torso.GridTorso,
                   algorithm=dpo.DPO, on_row=on_row)
    assert [r["update"] for r in rows] == [2, 4]
    assert read_metrics(tmp_path / "run")[:2] == rows


@pytest.mark.slow
@pytest.mark.optimized
def test_anakin_trains_the_gridworld_with_dpo_to_its_threshold(examples, tmp_path):
    import anakin
    from configs import cartpole_ppo

    config = cartpole_ppo.get_config()
    config.num_envs, config.total_env_steps, config.log_every = 16, 200_000, 10
    rows = _trained_to_threshold(anakin.run, config, str(tmp_path / "run"))
    assert rows[-1]["episode_return"] >= THRESHOLD, [r["episode_return"] for r in rows]


@pytest.mark.slow
@pytest.mark.optimized
def test_sebulba_trains_the_gridworld_with_dpo_to_its_threshold(examples, tmp_path):
    import sebulba
    from configs import cartpole_ppo_sebulba

    config = cartpole_ppo_sebulba.get_config()
    config.total_env_steps = 200_000
    rows = _trained_to_threshold(sebulba.run, config, str(tmp_path / "run"))
    assert rows[-1]["episode_return"] >= THRESHOLD, [r["episode_return"] for r in rows]
