"""Each optional suite's shipped config learns (the long tier): Anakin on one device, seed 0,
stopped at the first logged line at the suite's threshold (tests/threshold.py). The
thresholds and start levels come from the runs in docs/suites.md, "Measured results"
(seed 0's logged mean return there; each row's comment says when it got there)."""

from __future__ import annotations

import importlib

import jax
import pytest

import anakin.train as anakin_train
from envs import registry
from runtime.distributed import data_mesh
from tests.helpers import best_return
from tests.threshold import train_to_return

SUITES = [
    # GRU, 64 envs x 64 steps: 2.05 at the first line (40,960 env steps), 3.56 at 204,800.
    pytest.param("craftax_classic_ppo_rnn", "craftax", 2.5, 3.5, id="craftax"),
    # GRU on DoorKey-5x5: 0.2 at the first line, 1.0 by 163,840 env steps.
    pytest.param("doorkey_ppo_rnn", "xminigrid", 0.5, 0.9, id="xminigrid"),
    # Snake, fruits eaten: 0.1 for the first 245,760 env steps, 0.5 at 491,520.
    pytest.param("snake_ppo", "jumanji", 0.2, 0.5, id="jumanji"),
    # CartpoleBalance (at most 1000): 334 at the first line (76,800), 977 at 192,000.
    pytest.param("playground_cartpole_balance_ppo", "playground", 500.0, 900.0,
                 id="playground"),
]


@pytest.mark.slow
@pytest.mark.optimized
@pytest.mark.parametrize("module, library, start_below, threshold", SUITES)
def test_suite_config_learns_to_its_threshold(module, library, start_below, threshold,
                                              tmp_path):
    if registry.missing_extra(library):
        pytest.skip(f"the '{library}' extra is not installed: pip install -e '.[{library}]'")
    config = importlib.import_module(f"configs.{module}").get_config()
    anakin_train.prepare(config)
    rows = train_to_return(anakin_train, threshold, config, str(tmp_path),
                           mesh=data_mesh(jax.devices()[:1]))
    returns = [r["episode_return"] for r in rows]
    first = next(x for x in returns if x is not None)
    assert first < start_below, returns  # it starts near random play
    assert best_return(rows) >= threshold, returns
