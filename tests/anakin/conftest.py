"""Runs shared by several Anakin test files: each trained once per session (the first test
that asks for it pays; the others read it). Nothing may write into a shared run's workdir."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import pytest

from anakin.train import train
from configs import cartpole_ppo
from runtime.distributed import data_mesh


@pytest.fixture(scope="session")
def anakin_cartpole_ppo_run(tmp_path_factory):
    """configs/cartpole_ppo.py unchanged (500k env steps, one device), its whole budget:
    ``workdir`` (checkpoints, metrics) and ``rows`` (the logged rows). The PPO threshold
    test asserts on ``rows``; the evaluate tests evaluate its final checkpoint."""
    workdir = tmp_path_factory.mktemp("anakin_cartpole_ppo")
    rows = train(cartpole_ppo.get_config(), str(workdir), mesh=data_mesh(jax.devices()[:1]))
    return SimpleNamespace(workdir=workdir, rows=rows)
