"""The suites that install as optional extras (envs.registry.SUITES): the refusal where one is
missing, and per suite a smoke test of its adapter in Anakin's compiled training step
(skipped, naming the extra, where the suite is not installed; CI installs them with ``dev``).
The long tier runs each in Sebulba, with ``num_seeds``, evaluation and video."""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from anakin.train import prepare, train
from envs import registry
from rlcore.errors import ConfigError
from runtime.distributed import data_mesh

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def needs(library: str):
    """Skips a test where ``library``'s extra is not installed, saying which to install."""
    missing = registry.missing_extra(library)
    return pytest.mark.skipif(missing is not None,
                              reason=f"the '{library}' extra is not installed: "
                                     f"pip install -e '.[{library}]'")


def test_a_missing_extra_is_refused_naming_it(monkeypatch):
    """Every spelling of a suite's id, in both modes, is refused with the one line that names
    the extra while the suite's module is missing."""
    module, *rest = registry.SUITES["craftax"]
    monkeypatch.setitem(registry.SUITES, "craftax", ("no_such_module_for_test", *rest))
    for mode in (registry.ANAKIN, registry.SEBULBA):
        with pytest.raises(ConfigError) as e:
            registry.resolve("craftax:Craftax-Classic-Symbolic-v1", mode)
        assert str(e.value) == ("env_id: 'craftax:Craftax-Classic-Symbolic-v1' needs the "
                                "'craftax' extra, which is not installed: "
                                "pip install -e '.[craftax]'")


def test_the_train_command_refuses_a_missing_extra_with_exit_2(tmp_path):
    """``anakin.main`` with a Craftax config where Craftax is not importable (hidden with
    ``sys.modules['craftax'] = None``): exit 2, one ``error:`` line naming the extra,
    before JAX compiles anything."""
    code = ("import runpy, sys; sys.modules['craftax'] = None; "
            "sys.argv = ['anakin.main', '--config=configs/craftax_classic_ppo_rnn.py', "
            f"'--workdir={tmp_path}']; runpy.run_module('anakin.main', run_name='__main__')")
    env = {**os.environ, "PYTHONPATH": REPO}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines == ["config error: env_id: 'craftax:Craftax-Classic-Symbolic-v1' needs the "
                     "'craftax' extra, which is not installed: pip install -e '.[craftax]'"]


def test_suite_ids_are_prefixed_only():
    for library in registry.SUITES:
        for name in registry.library_ids(library):
            assert registry.split_prefix(f"{library}:{name}") == (library, name)
            with pytest.raises(ConfigError, match="unknown env"):
                registry.resolve(name, registry.ANAKIN)


def _train_tiny(config, monkeypatch, **env_overrides) -> list[dict]:
    """Trains ``config`` for two updates of 4 envs x 16 steps on one device, the env made
    with ``env_overrides`` (a short time limit, so that episodes end); checks the losses are
    finite; returns the rows."""
    make = registry.make_jax_env
    monkeypatch.setattr(registry, "make_jax_env",
                        functools.partial(make, **env_overrides) if env_overrides else make)
    config.num_envs, config.num_steps, config.num_epochs = 4, 16, 1
    config.num_minibatches, config.log_every, config.updates_per_call = 2, 1, 2
    config.total_env_steps = 4 * 16 * 2
    prepare(config)
    rows = train(config, None, mesh=data_mesh(jax.devices()[:1]))
    assert [r["update"] for r in rows] == [1, 2]
    for r in rows:
        losses = [v for k, v in r.items() if k.startswith("loss/")]
        assert losses and np.all(np.isfinite(losses)), r
    return rows


# ----------------------------------------------------------------------------- Craftax


@needs("craftax")
def test_craftax_episode_values_are_the_papers_measures():
    """``achievement/<name>``: 100 where unlocked; ``score_percent``: the achievements'
    reward over the most they pay (Classic 22 x 1; Craftax 226 over 67 weighted 1/3/5/8)."""
    import jax.numpy as jnp

    from envs.craftax import CLASSIC, FULL, SCORE, achievement_weights, episode_values

    names, w = achievement_weights(CLASSIC)
    assert len(names) == 22 and names[0] == "collect_wood" and (w == 1).all()
    got = np.zeros(22, bool)
    got[[0, 1, 5]] = True
    values = episode_values(jnp.asarray(got), jnp.asarray(w), names)
    assert float(values[SCORE]) == pytest.approx(300 / 22)
    assert float(values["achievement/collect_wood"]) == 100.0
    assert float(values["achievement/eat_cow"]) == 0.0
    names, w = achievement_weights(FULL)
    assert len(names) == 67 and w.sum() == 226
    got = np.zeros(67, bool)
    got[np.argmax(w)] = True  # one achievement of reward 8
    values = episode_values(jnp.asarray(got), jnp.asarray(w), names)
    assert float(values[SCORE]) == pytest.approx(800 / 226)


@needs("craftax")
def test_craftax_classic_in_anakin_logs_achievements(monkeypatch):
    """configs/craftax_classic_ppo_rnn.py (GRU agent) at a tiny size with a 10-step time
    limit: every env's episodes are cut at 10 steps (truncated, reset in the same step), and
    the metrics lines hold the score and every achievement, in [0, 100]."""
    from configs import craftax_classic_ppo_rnn

    rows = _train_tiny(craftax_classic_ppo_rnn.get_config(), monkeypatch, max_timesteps=10)
    spec = registry.jax_env_spec("craftax:Craftax-Classic-Symbolic-v1")
    assert spec.obs_shape == (1345,) and spec.num_actions == 17
    for r in rows:
        assert r["episode_length"] == 10.0, r
        for name in spec.episode_info:
            assert 0.0 <= r[f"episode/{name}"] <= 100.0, (name, r)
        assert r["episode/score_percent"] == pytest.approx(np.mean(
            [r[f"episode/{n}"] for n in spec.episode_info[:-1]]))


def test_extras_named_in_pyproject():
    """Every suite is an optional extra of pyproject.toml, under its library's name."""
    import tomllib

    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    for library in registry.SUITES:
        assert library in extras, library
