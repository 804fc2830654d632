"""Sebulba on fake CPU devices: thresholds, timing-independent pipelines, layout-independent
data, seeds, Atari smoke runs, failures and thread hygiene."""

from __future__ import annotations

import functools
import threading

import jax
import numpy as np
import pytest

import sebulba.train as sebulba_trainer
from configs import (
    atari_impala,
    atari_ppo,
    atari_pqn_2core,
    cartpole_impala_sebulba,
    cartpole_ppo_sebulba,
)
from rlcore.errors import ConfigError
from rlcore.seeding import host_env_seed
from sebulba.layout import Layout
from sebulba.train import prepare, train
from tests.helpers import (
    best_return,
    checkpoint_steps,
    config_error_lines,
    read_metrics,
    reproducible_part,
    run_entry,
    sebulba_batches,
    sigterm_after_first_log,
)
from tests.threshold import train_to_return

SOLVED = 475.0

needs_4 = pytest.mark.skipif(jax.device_count() < 4, reason="needs 4 (fake) devices")


def actor_threads():
    return [t for t in threading.enumerate() if t.name.startswith("actor-")]


@pytest.fixture(autouse=True)
def no_thread_outlives_a_test():
    yield
    assert actor_threads() == []


def _split(config):
    config.actor_device_ids = (0,)
    config.learner_device_ids = (1, 2, 3)
    return config


@pytest.mark.slow
@pytest.mark.optimized
@needs_4
@pytest.mark.parametrize("make_config", [cartpole_ppo_sebulba.get_config,
                                         cartpole_impala_sebulba.get_config],
                         ids=["ppo", "impala"])
def test_cartpole_reaches_threshold_actor0_learners123(make_config, tmp_path):
    config = _split(make_config())
    prepare(config)
    # Stopped at the first line at SOLVED (tests/threshold.py).
    rows = train_to_return(sebulba_trainer, SOLVED, config, str(tmp_path))
    assert best_return(rows) >= SOLVED, [r["episode_return"] for r in rows]


def _small(pipeline_mode, threads, jitter=0, **overrides):
    config = _split(cartpole_ppo_sebulba.get_config())
    config.pipeline = pipeline_mode
    config.num_actor_threads = threads
    config.num_envs = 12
    config.num_steps = 16
    config.num_minibatches = 2
    config.total_env_steps = 12 * 16 * 6
    config.log_every = 1
    config.debug.actor_jitter_ms = jitter
    for k, v in overrides.items():
        config[k] = v
    prepare(config)
    return config


TIME_LIMIT = 20  # CartPole cut short, so that rollouts hold truncations (final values)


def _short_time_limit(monkeypatch):
    """The run's host envs truncate CartPole at ``TIME_LIMIT`` steps."""
    make = sebulba_trainer.make_host_env
    monkeypatch.setattr(sebulba_trainer, "make_host_env", lambda *a, **kw: make(
        *a, max_episode_steps=TIME_LIMIT, **kw))


def _lags(updates: int, lag: int, start: int = 0) -> list[float]:
    """``params_lag`` of rollouts ``start .. updates - 1``: rollout ``r`` uses version
    ``max(r - lag, start)``."""
    return [float(r - max(r - lag, start)) for r in range(start, updates)]


@needs_4
@pytest.mark.parametrize("lag", [4, pytest.param(8, marks=pytest.mark.slow)])
def test_policy_lag_identical_under_jitter_and_threads(lag, tmp_path, monkeypatch):
    """policy_lag over the cleanba pipeline, ``lag + 4`` updates (rollouts past the lag act
    with later params): 2 actor threads with 25 ms of jitter log the metrics of 1 thread
    without, and ``params_lag`` is the rule's."""
    _short_time_limit(monkeypatch)
    updates = lag + 4
    small = functools.partial(_small, "cleanba", policy_lag=lag,
                              total_env_steps=12 * 16 * updates)
    train(small(1), str(tmp_path / "plain"))
    train(small(2, jitter=25), str(tmp_path / "jitter"))
    plain, jittered = read_metrics(tmp_path / "plain"), read_metrics(tmp_path / "jitter")
    assert len(plain) == updates
    assert reproducible_part(plain) == reproducible_part(jittered)
    assert [r["params_lag"] for r in plain] == _lags(updates, lag)


@needs_4
@pytest.mark.parametrize("mode, threads", [
    pytest.param("cleanba", 1, id="1-cleanba"),
    pytest.param("sync", 1, id="1-sync", marks=pytest.mark.smoke),  # make test-newest
    pytest.param("cleanba", 2, id="2-cleanba"), pytest.param("sync", 2, id="2-sync")])
def test_jitter_does_not_change_metrics(mode, threads, tmp_path, monkeypatch):
    _short_time_limit(monkeypatch)  # the actors' final values are timing-independent too
    # cleanba with 2 threads: with both normalisations too (their statistics reach the
    # actors with the params, in the same version).
    norm = dict.fromkeys(("normalize_obs", "normalize_reward"), mode == "cleanba" and threads == 2)
    train(_small(mode, threads, **norm), str(tmp_path / "plain"))
    train(_small(mode, threads, jitter=25, **norm), str(tmp_path / "jitter"))
    plain, jittered = read_metrics(tmp_path / "plain"), read_metrics(tmp_path / "jitter")
    assert len(plain) == 6
    assert reproducible_part(plain) == reproducible_part(jittered)
    expected_lag = 0.0 if mode == "sync" else 1.0
    assert [r["params_lag"] for r in plain[2:]] == [expected_lag] * 4


@pytest.fixture(scope="module")
def one_actor_thread_batches():
    """The first 3 batches with one actor thread on device 0 (learners on 2, 3): the
    reference of every layout below (trained once for them all)."""
    return sebulba_batches(_small("sync", 1, actor_device_ids=(0,), learner_device_ids=(2, 3)),
                           3)


@needs_4
@pytest.mark.parametrize("actors, threads", [((0,), 2), ((0, 1), 1), ((0, 1), 2)])
def test_learner_data_independent_of_actor_layout(actors, threads, one_actor_thread_batches):
    base = one_actor_thread_batches
    other = sebulba_batches(_small("sync", threads, actor_device_ids=actors,
                                   learner_device_ids=(2, 3)), 3)
    for u in base:
        b, o = base[u], other[u]
        for name in ("obs", "action", "reward", "terminated", "truncated", "bootstrap_obs"):
            np.testing.assert_array_equal(getattr(b, name), getattr(o, name), err_msg=name)
        np.testing.assert_allclose(b.behaviour_dist_params, o.behaviour_dist_params, atol=1e-5)
        np.testing.assert_allclose(b.final_value, o.final_value, atol=1e-5)
        assert b.behaviour_value is None  # actors do not ship values to the learner


@pytest.mark.slow
@needs_4
def test_actors_ship_final_values_of_truncations(monkeypatch):
    """Where a step was truncated the batch holds the acting params' value of the episode's
    final observation (CartPole's values are positive), 0 elsewhere."""
    _short_time_limit(monkeypatch)
    batch = sebulba_batches(_small("sync", 1), 2)[1]
    truncated, final_value = batch.truncated, batch.final_value
    assert truncated.any() and final_value.shape == truncated.shape
    assert np.all(final_value[truncated] != 0) and np.all(final_value[~truncated] == 0)


def test_no_two_envs_share_a_seed():
    """Seeds are base + global env index; thread blocks tile the global index range."""
    num_envs, processes, actors, threads = 48, 2, 2, 3
    firsts = []
    for p in range(processes):
        layout = Layout(num_envs=num_envs, num_processes=processes, process_index=p,
                                 actor_devices=tuple(range(actors)), num_threads=threads,
                                 learner_mesh=None)
        firsts += [layout.thread_offset(a, j) for a in range(actors) for j in range(threads)]
        per_thread = layout.envs_per_thread
    seeds = [host_env_seed(0) + f + i for f in firsts for i in range(per_thread)]
    assert sorted(seeds) == list(range(num_envs))
    resumed = [host_env_seed(0, 7) + f + i for f in firsts for i in range(per_thread)]
    assert len(set(resumed)) == num_envs and set(resumed) != set(seeds)


@pytest.mark.optimized
@pytest.mark.parametrize("make_config", [
    pytest.param(atari_ppo.get_config, id="ppo", marks=pytest.mark.smoke),
    pytest.param(atari_impala.get_config, id="impala", marks=pytest.mark.slow),
    pytest.param(atari_pqn_2core.get_config, id="pqn", marks=pytest.mark.slow)])
def test_atari_smoke_three_updates(make_config):
    """Three updates of an Atari config at 4 envs x 8 steps: finite losses (PQN's with its
    episodic life, minimal action set and LayerNorm CNN)."""
    config = make_config()
    config.num_envs = 4
    config.num_actor_threads = 2
    config.num_steps = 8
    config.num_minibatches = 2
    config.num_epochs = 1             # two gradient steps, unrolled: a conv net's step runs
    config.update_unroll = 0          # 10x slower inside a rolled loop on CPU
    config.microbatches = 1           # an explicit plan: nothing compiled to plan it
    config.total_env_steps = 4 * 8 * 3
    config.log_every = 1
    prepare(config)
    rows = train(config, None)
    assert [r["update"] for r in rows] == [1, 2, 3]
    for r in rows:
        losses = [v for k, v in r.items() if k.startswith("loss/")]
        assert losses and np.all(np.isfinite(losses)), r


@needs_4
def test_actor_failure_reaches_main_thread_and_stops_all():
    config = _small("cleanba", 2, fail_actor_at_update=-1, queue_timeout_s=60.0)
    config.debug.fail_actor_at_update = 2
    with pytest.raises(RuntimeError, match="fail_actor_at_update"):
        train(config, None)


@needs_4
def test_nan_rewards_fail_the_run():
    config = _small("sync", 1)
    config.debug.nan_at_update = 1  # rollout index 1, learned from in update 2 (1-based)
    with pytest.raises(FloatingPointError, match="non-finite loss .* in update 2"):
        train(config, None)


@pytest.mark.parametrize("override, field", [
    ("--config.pipeline=fast", "pipeline"),
    ("--config.learner_device_ids=5", "learner_device_ids"),
    ("--config.num_envs=25", "num_envs"),
    ("--config.env_id=CartPole-v9", "env_id"),
    ("--config.num_actor_threads=-1", "num_actor_threads"),
    ("--config.policy_lag=9", "policy_lag"),
    ("--config.pbt.interval=5", "pbt.interval"),  # population-based training is Anakin's
])
def test_bad_config_exits_2_with_one_line(override, field, tmp_path):
    proc = run_entry("sebulba.main", ["--config=configs/cartpole_ppo_sebulba.py", override,
                                      f"--workdir={tmp_path}"], timeout_s=120)
    assert proc.returncode == 2, proc.stderr
    lines = config_error_lines(proc.stderr)
    assert len(lines) == 1 and f"config error: {field}:" in lines[0], proc.stderr


def test_prepare_rejects_a_lag_on_the_async_pipeline():
    with pytest.raises(ConfigError, match="^policy_lag: the async pipeline has no fixed lag"):
        _small("async", 1, policy_lag=2)


def test_prepare_rejects_envs_that_do_not_split():
    config = cartpole_ppo_sebulba.get_config()
    config.num_actor_threads = 5
    with pytest.raises(ConfigError, match="^num_envs:"):
        prepare(config)


def test_sigterm_checkpoints_then_exits_143(tmp_path):
    code = sigterm_after_first_log("sebulba.main", [
        "--config=configs/cartpole_ppo_sebulba.py", "--config.total_env_steps=100000000",
        "--config.log_every=5", f"--workdir={tmp_path}"])
    assert code == 143
    steps = checkpoint_steps(tmp_path)
    assert steps and steps[-1] >= 5
    assert read_metrics(tmp_path)[-1]["update"] <= steps[-1]


@needs_4
@pytest.mark.smoke  # make test-newest
def test_async_pipeline_runs_with_bounded_lag():
    """async takes the newest params: the lag varies with timing but stays within what one
    queued rollout allows."""
    config = _small("async", 2, jitter=5)
    rows = train(config, None)
    assert [r["update"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert all(0.0 <= r["params_lag"] <= 2.0 for r in rows)
    assert all(np.isfinite(r["loss/total"]) for r in rows)


@needs_4
@pytest.mark.parametrize("lag", [pytest.param(-1, marks=pytest.mark.smoke),  # make test-newest
                                 4], ids=["cleanba", "lag4"])
def test_resume_from_checkpoint_continues(lag, tmp_path):
    """Resumed at update 3 (learner state restored, envs re-seeded from (seed, update)): the
    run finishes its budget, keeps the lines up to the checkpoint and replaces the rest;
    two resumes from one checkpoint agree. With both normalisations: their statistics are
    in the params (checkpointed, restored, handed to the actors with them). The resume rule
    of a lag: the resumed rollouts 3 .. 3 + lag use the restored params (the versions in
    flight are not checkpointed)."""
    import shutil

    config = _small("cleanba", 2, checkpoint_every=3, normalize_obs=True,
                    normalize_reward=True, policy_lag=lag)
    train(config, str(tmp_path / "run"))
    original = reproducible_part(read_metrics(tmp_path / "run"))
    for step in checkpoint_steps(tmp_path / "run"):
        if step > 3:
            shutil.rmtree(tmp_path / "run" / "checkpoints" / str(step))
    shutil.copytree(tmp_path / "run", tmp_path / "again")
    train(config, str(tmp_path / "run"))
    train(config, str(tmp_path / "again"))
    resumed = reproducible_part(read_metrics(tmp_path / "run"))
    assert [r["update"] for r in resumed] == [1, 2, 3, 4, 5, 6]
    assert resumed[:3] == original[:3]
    assert resumed == reproducible_part(read_metrics(tmp_path / "again"))
    lag = 1 if lag < 0 else lag
    assert [r["params_lag"] for r in read_metrics(tmp_path / "run")] == (
        _lags(3, lag) + _lags(6, lag, start=3))
