"""``anakin.run`` / ``sebulba.run`` from Python (docs/design.md, "From Python"): a
``RunResult`` with the rows, the final params and a policy, with a workdir or without; a
row for which ``on_row`` returns False stops the run with that update checkpointed and in
the result, so that rerunning resumes from it; a bad argument is one line before anything
compiles; a workdir's run of objects of ``__main__`` says once that no later process can
import them."""

from __future__ import annotations

import os
import sys
import time

import jax
import numpy as np
import pytest

import anakin
import sebulba
from configs import cartpole_ppo, cartpole_ppo_sebulba
from rlcore.errors import ConfigError
from runtime import load_policy
from runtime.commands.result import RunResult
from runtime.distributed import data_mesh
from runtime.run.checkpoint import Checkpointer

UPDATES = 4


def _tiny(get_config, updates: int = UPDATES):
    """A config of ``updates`` updates, a metrics line after each."""
    config = get_config()
    config.total_env_steps = config.num_envs * config.num_steps * updates
    config.log_every = config.updates_per_call = 1
    return config


def _run(mode: str, workdir, **kwargs) -> RunResult:
    """A tiny CartPole run of ``mode`` (Anakin on one device), as the tests' other tiny
    runs of it."""
    if mode == "anakin":
        return anakin.run(_tiny(cartpole_ppo.get_config), workdir,
                          mesh=data_mesh(jax.devices()[:1]), **kwargs)
    return sebulba.run(_tiny(cartpole_ppo_sebulba.get_config), workdir, **kwargs)


def _same_params(a, b) -> None:
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("mode", ["anakin", pytest.param("sebulba", marks=pytest.mark.slow)])
def test_a_run_gives_its_rows_params_and_policy(mode, tmp_path):
    """Without a workdir: the rows (also as a sequence), agent 0's params and a greedy
    policy that acts with them. With one: the params ``load_policy`` restores."""
    result = _run(mode, None)
    assert isinstance(result, RunResult) and result.update == UPDATES
    assert [r["update"] for r in result.rows] == list(range(1, UPDATES + 1))
    assert len(result) == UPDATES and result[-1] is result.rows[-1] and list(result) == list(
        result.rows)
    obs = np.zeros((3, 4), np.float32)
    actions = result.policy(result.params, obs, None)
    assert actions.shape == (3,) and result.policy.greedy
    assert result.agent_params[0] is result.params and len(result.agent_params) == 1
    workdir = str(tmp_path / "run")
    saved = _run(mode, workdir)
    policy, params = load_policy(workdir)
    _same_params(saved.params, params)
    np.testing.assert_array_equal(saved.policy(saved.params, obs, None),
                                  policy(params, obs, None))


def test_every_agent_of_a_num_seeds_run_is_in_the_result():
    config = _tiny(cartpole_ppo.get_config, 1)
    config.num_seeds = 2
    result = anakin.run(config, None, mesh=data_mesh(jax.devices()[:1]))
    assert len(result.agent_params) == 2 and len(result.rows) == 2
    first, second = (jax.tree.leaves(p)[0] for p in result.agent_params)
    assert first.shape == second.shape and not np.array_equal(first, second)


@pytest.mark.parametrize("mode", ["anakin", pytest.param("sebulba", marks=pytest.mark.slow)])
def test_on_row_false_stops_at_its_update_checkpointed(mode, tmp_path, capfd):
    """``on_row`` returns False at update 2 of 4: the run ends there, the checkpoint of
    update 2 is on disk and holds the result's params, and rerunning resumes from it."""
    workdir = str(tmp_path / "run")
    result = _run(mode, workdir, on_row=lambda row: row["update"] < 2)
    assert result.update == 2 and [r["update"] for r in result.rows] == [1, 2]
    assert Checkpointer.finished_steps(workdir)[-1] == 2
    assert "on_row returned False at update 2: stopping after update 2" in capfd.readouterr().err
    _, params = load_policy(workdir)
    _same_params(result.params, params)
    rest = _run(mode, workdir)
    assert [r["update"] for r in rest.rows] == [3, 4] and rest.update == UPDATES


@pytest.mark.parametrize("arguments, line", [
    ({"on_row": "print"}, "on_row: must be a function of each metrics row (a dict) or None, "
                          "got str 'print'"),
    ({"fresh": "yes"}, "fresh: must be True or False, got 'yes'"),
    ({"workdir": 3}, "workdir: must be a path (str) or None, got 3"),
])
def test_a_bad_argument_is_one_line_before_anything_runs(arguments, line, tmp_path,
                                                         monkeypatch):
    """Refused before the config is read or the trainer loads (no workdir made)."""
    monkeypatch.chdir(tmp_path)
    workdir = arguments.pop("workdir", str(tmp_path / "run"))
    started = time.perf_counter()
    with pytest.raises(ConfigError) as raised:
        anakin.run(cartpole_ppo.get_config(), workdir, **arguments)
    assert str(raised.value) == line
    assert time.perf_counter() - started < 1.0 and not os.listdir(tmp_path)


def test_objects_of_main_are_said_once(tmp_path, capfd, monkeypatch):
    """A workdir's run of an env of ``__main__`` (a function a notebook defines) says in
    one line, once, that a later process cannot import it; a run without a workdir says
    nothing."""
    def main_cartpole():
        import gymnax

        return gymnax.make("CartPole-v1")

    main_cartpole.__module__, main_cartpole.__qualname__ = "__main__", "main_cartpole"
    monkeypatch.setattr(sys.modules["__main__"], "main_cartpole", main_cartpole,
                        raising=False)
    config = _tiny(cartpole_ppo.get_config, 1)
    mesh = data_mesh(jax.devices()[:1])
    anakin.run(config, str(tmp_path / "run"), env=main_cartpole, mesh=mesh)
    notes = [ln for ln in capfd.readouterr().err.splitlines() if ln.startswith("note:")]
    assert notes == ["note: env_id=__main__:main_cartpole: defined in a notebook or script, "
                     "which a later process cannot import: resuming this workdir, evaluating "
                     "it or load_policy on it needs the code in a module"]
    anakin.run(config, None, env=main_cartpole, mesh=mesh)
    assert "note:" not in capfd.readouterr().err
