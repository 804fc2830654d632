"""Weights & Biases is optional: every metric reaches it when a project is set, offline mode
needs no network, and a missing wandb or a run W&B refuses to start (no API key) is a config
error, not a crash."""

from __future__ import annotations

import glob
import importlib.util
import os
import sys
import time
import types

import pytest

from anakin.train import prepare, train
from configs import cartpole_ppo
from rlcore.errors import ConfigError


def _config(**overrides):
    c = cartpole_ppo.get_config()
    c.num_envs, c.num_steps, c.total_env_steps = 8, 32, 8 * 32 * 8
    c.log_every, c.updates_per_call, c.eval_every, c.num_devices = 2, 4, 4, 1
    c.update_from_flattened_dict(overrides)
    return c


class FakeRun:
    def __init__(self):
        self.logged, self.finished = [], False

    def log(self, data, step):
        self.logged.append((step, dict(data)))

    def finish(self):
        self.finished = True


def test_every_metric_goes_to_wandb(tmp_path, monkeypatch):
    run, inits = FakeRun(), []
    fake = types.SimpleNamespace(Settings=lambda **kw: kw,
                                 init=lambda **kw: inits.append(kw) or run)
    monkeypatch.setitem(sys.modules, "wandb", fake)
    rows = train(_config(wandb_project="podracer-test"), str(tmp_path))
    assert inits[0]["project"] == "podracer-test" and inits[0]["mode"] == "online"
    assert inits[0]["config"]["env_id"] == "CartPole-v1" and inits[0]["dir"] == str(tmp_path)
    assert [s for s, _ in run.logged] == [r["env_steps"] for r in rows]  # one call a line
    for (_, data), row in zip(run.logged, rows):
        numbers = {k for k, v in row.items() if isinstance(v, float | int)
                   and not isinstance(v, bool)} - {"update", "env_steps"}
        assert set(data) == numbers
    assert any("eval/episode_return" in d for _, d in run.logged)
    assert any("time/update_s" in d for _, d in run.logged)
    assert run.finished


def test_one_wandb_run_per_agent_in_a_group(tmp_path, monkeypatch):
    runs, inits = [], []

    def init(**kw):
        inits.append(kw)
        runs.append(FakeRun())
        return runs[-1]

    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(Settings=lambda **kw: kw,
                                                                      init=init))
    rows = train(_config(wandb_project="podracer-test", num_seeds=2), str(tmp_path))
    name = os.path.basename(tmp_path)
    assert [(i["group"], i["name"], i["config"]["seed"]) for i in inits] == [
        (name, f"{name}/seed=0", 0), (name, f"{name}/seed=1", 1)]
    for seed, run in enumerate(runs):  # each run logs its own agent's lines, plain keys
        mine = [r for r in rows if r["seed"] == seed]
        assert [(s, d["episode_return"]) for s, d in run.logged if "episode_return" in d] == [
            (r["env_steps"], r["episode_return"]) for r in mine
            if r["episode_return"] is not None]
        assert run.finished


def test_no_project_never_imports_wandb(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # importing it would raise
    train(_config(), str(tmp_path))


def test_missing_wandb_is_a_config_error(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(ConfigError, match="wandb_project: is set but wandb is not installed"):
        prepare(_config(wandb_project="x"))
    with pytest.raises(ConfigError, match="wandb_mode"):
        prepare(_config(wandb_mode="cloud"))


def test_offline_mode_writes_the_run_without_network(tmp_path, monkeypatch, capfd):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DISABLE_GIT", "true")
    train(_config(wandb_project="podracer-test", wandb_mode="offline"), str(tmp_path))
    files = glob.glob(str(tmp_path / "wandb" / "offline-run-*" / "run-*.wandb"))
    assert len(files) == 1
    deadline = time.time() + 30  # wandb's service process may still be flushing the file
    while os.path.getsize(files[0]) < 1000 and time.time() < deadline:
        time.sleep(0.2)
    assert os.path.getsize(files[0]) > 1000
    assert "wandb:" not in capfd.readouterr().err


def test_offline_mode_writes_a_run_per_agent(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DISABLE_GIT", "true")
    train(_config(wandb_project="podracer-test", wandb_mode="offline", num_seeds=2),
          str(tmp_path))
    assert len(glob.glob(str(tmp_path / "wandb" / "offline-run-*" / "run-*.wandb"))) == 2


def test_online_without_an_api_key_is_a_config_error(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    for name in ("WANDB_API_KEY", "WANDB_MODE", "NETRC"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc, no wandb settings
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    with pytest.raises(ConfigError, match=r"^wandb_mode: W&B could not start a run in mode "
                                          r"'online' \(.*API key.*\); log in"):
        train(_config(wandb_project="podracer-test", wandb_mode="online"), str(tmp_path / "run"))
