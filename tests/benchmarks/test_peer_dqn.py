"""benchmarks.peer_dqn: bad flags refused in one line with exit 2 before anything runs, the
episodes read from CleanRL's printed lines, the statistic on both sides' made-up curves,
and the torch stand-in's few names (the runs themselves need CleanRL's environment)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from benchmarks import peer_dqn
from benchmarks.peer_pqn import window_mean
from tests.helpers import assert_refused_before_running


@pytest.fixture
def good(tmp_path) -> list[str]:
    """Flags that pass the checks: a stand-in Python and a checkout with CleanRL's script."""
    python = tmp_path / "python"
    python.write_text("")
    (tmp_path / "peer" / "cleanrl").mkdir(parents=True)
    (tmp_path / "peer" / "cleanrl" / "dqn_jax.py").write_text("")
    return [f"--peer_python={python}", f"--peer_dir={tmp_path / 'peer'}",
            f"--out={tmp_path / 'out'}"]


def test_good_flags_pass(good):
    args = peer_dqn.parse_args(good)
    assert (args.seeds, args.total, args.speed_reps) == (3, 500_000, 1)


@pytest.mark.parametrize("argv,flag", [
    (["--seeds=0"], "--seeds"),
    (["--total=1234"], "--total"),
    (["--speed_total=7000"], "--speed_total"),
    (["--peer_dir=MISSING"], "--peer_dir"),
    (["--peer_python=MISSING"], "--peer_python"),
])
def test_bad_flags_are_one_line_exit_2_and_nothing_runs(good, argv, flag, tmp_path, capsys,
                                                        monkeypatch):
    fill = {"MISSING": str(tmp_path / "missing")}
    argv = [f"{name}={fill.get(value, value)}" for name, value in
            (a.split("=", 1) for a in argv)]
    assert_refused_before_running(peer_dqn.main, [*good, *argv], flag, tmp_path / "out", capsys,
                                  monkeypatch)


def test_cleanrls_printed_episodes_are_read_at_their_env_step(tmp_path):
    log = tmp_path / "seed_0.log"
    log.write_text("global_step=9, episodic_return=[10.]\nSPS: 2470\n"
                   "global_step=399999, episodic_return=[500.]\n"
                   "global_step=400000, episodic_return=[1.5e+02]\nSPS: 1800\n")
    episodes = peer_dqn.peer_episodes(str(log))
    assert episodes == [(10, 10.0), (400_000, 500.0), (400_001, 150.0)]
    assert window_mean(episodes, 500_000) == 150.0  # only after 80% of the run
    assert peer_dqn.SPS.findall(log.read_text())[-1] == "1800"


def test_the_torch_stand_in_gives_numpy_arrays_with_numpy():
    sys.path.insert(0, peer_dqn.STUB)
    try:
        import torch

        t = torch.tensor(np.arange(3.0), device=torch.device("auto"))
        assert t.numpy().tolist() == [0.0, 1.0, 2.0] and t.flatten().numpy().shape == (3,)
        assert not torch.cuda.is_available() and torch.device("auto").type == "cpu"
    finally:
        sys.path.remove(peer_dqn.STUB)
        sys.modules.pop("torch", None)
