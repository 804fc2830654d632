"""The staleness correction ``lr_scale`` gets the run's policy lag in both architectures:
a run with it trains bit for bit like the same run without it at the learning rate
``rlcore.staleness.lag_scaled_learning_rate`` gives (docs/algorithms.md, "Corrections for
stale rollouts"); the async pipeline, which has no fixed lag, refuses it."""

from __future__ import annotations

import pytest

import anakin.train as anakin_train
import sebulba.train as sebulba_train
from configs import cartpole_ppo, cartpole_ppo_sebulba
from rlcore.errors import ConfigError
from rlcore.staleness import lag_scaled_learning_rate
from runtime.run.files import read_metrics

CLOCK = ("wall_time", "sps")


def _plain(rows):
    return [{k: v for k, v in r.items() if k not in CLOCK and not k.startswith("time/")}
            for r in rows]


def _anakin(lag, correction, lr):
    c = cartpole_ppo.get_config()
    c.num_envs, c.num_steps, c.updates_per_call, c.log_every = 4, 16, 4, 4
    c.total_env_steps = 4 * 16 * 8
    c.policy_lag, c.staleness_correction, c.learning_rate = lag, correction, lr
    anakin_train.prepare(c)
    return c


def _sebulba(pipeline, correction, lr):
    c = cartpole_ppo_sebulba.get_config()
    c.actor_device_ids = c.learner_device_ids = (0,)
    c.num_envs, c.num_steps, c.num_minibatches, c.log_every = 8, 16, 2, 1
    c.total_env_steps = 8 * 16 * 5
    c.pipeline, c.staleness_correction, c.learning_rate = pipeline, correction, lr
    sebulba_train.prepare(c)
    return c


def test_anakin_lr_scale_is_the_scaled_rate_at_lag_3(tmp_path):
    lr, lag = 5e-4, 3
    anakin_train.train(_anakin(lag, "lr_scale", lr), str(tmp_path / "scaled"))
    anakin_train.train(_anakin(lag, "none", lag_scaled_learning_rate(lr, lag)),
                       str(tmp_path / "by_hand"))
    scaled, by_hand = (read_metrics(tmp_path / d) for d in ("scaled", "by_hand"))
    assert len(scaled) == 2 and _plain(scaled) == _plain(by_hand)
    anakin_train.train(_anakin(lag, "none", lr), str(tmp_path / "unscaled"))
    assert _plain(read_metrics(tmp_path / "unscaled")) != _plain(scaled)


@pytest.mark.slow
def test_sebulba_cleanba_lr_scale_is_the_scaled_rate_at_lag_1(tmp_path):
    lr = 5e-4
    sebulba_train.train(_sebulba("cleanba", "lr_scale", lr), str(tmp_path / "scaled"))
    sebulba_train.train(_sebulba("cleanba", "none", lag_scaled_learning_rate(lr, 1)),
                        str(tmp_path / "by_hand"))
    scaled, by_hand = (read_metrics(tmp_path / d) for d in ("scaled", "by_hand"))
    assert len(scaled) == 5 and _plain(scaled) == _plain(by_hand)


def test_async_refuses_lr_scale():
    with pytest.raises(ConfigError, match="staleness_correction"):
        _sebulba("async", "lr_scale", 5e-4)
