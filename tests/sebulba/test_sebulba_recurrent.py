"""Sebulba with recurrent agents: actors carry each env's core state across
rollouts and ship the start state and episode starts; the cleanba pipeline stays identical
under actor jitter and with 1 or 2 actor threads; a resumed run restarts its actors from zero
core states and two resumes from one checkpoint agree; Recall (a memory task, own jittable env
on the host) is learnt with the LSTM core and not without it."""

from __future__ import annotations

import threading

import jax
import numpy as np
import pytest

from configs import memory_ppo
from runtime.commands.stats import parse_table
from sebulba.train import prepare, train
from tests.helpers import (
    checkpoint_steps,
    read_metrics,
    read_video,
    reproducible_part,
    run_entry,
)

needs_3 = pytest.mark.skipif(jax.device_count() < 3, reason="needs 3 (fake) devices")


@pytest.fixture(autouse=True)
def no_thread_outlives_a_test():
    yield
    assert [t for t in threading.enumerate() if t.name.startswith("actor-")] == []


def _config(**overrides):
    """configs/memory_ppo.py on Sebulba: actors on device 0, learners on 1 and 2, 2 actor
    threads, cleanba."""
    c = memory_ppo.get_config()
    c.actor_device_ids, c.learner_device_ids = (0,), (1, 2)
    c.num_actor_threads = 2
    for k, v in overrides.items():
        c[k] = v
    prepare(c)
    return c


def _late_mean(rows):
    values = [r["episode_return"] for r in rows if r["episode_return"] is not None]
    return float(np.mean(values[-max(1, len(values) // 5):]))


@pytest.mark.slow
@needs_3
def test_recall_needs_memory():
    """40,960 env steps of Recall (+1 for naming the cue shown 5 steps earlier, -1
    otherwise): the LSTM agent's mean return over the last 20% of training is >= 0.9 and
    its greedy evaluation (the host policy carrying the core) recalls every cue; the
    feed-forward agent of the same torso stays at chance (0, within 0.3)."""
    lstm = train(_config(log_every=5, eval_every=80, eval_episodes=16), None)
    ff = train(_config(recurrent="none", log_every=5), None)
    assert _late_mean(lstm) >= 0.9, [r["episode_return"] for r in lstm]
    assert abs(_late_mean(ff)) <= 0.3, [r["episode_return"] for r in ff]
    assert lstm[-1]["eval/episode_return"] == 1.0


def _small(threads, jitter=0, **overrides):
    debug = memory_ppo.get_config().debug  # every debug knob at its default but the jitter
    debug.actor_jitter_ms = jitter
    return _config(**{**dict(recurrent="gru", num_envs=8, num_steps=8,
                             total_env_steps=8 * 8 * 5, log_every=1,
                             num_actor_threads=threads, debug=debug,
                             checkpoint_every=3),  # with a workdir: checkpoints at 3 and 5
                      **overrides})


def _run(config, workdir=None):
    """The logged rows and the learner's batches (numpy) of a run."""
    batches = {}
    rows = train(config, workdir,
                 on_batch=lambda u, b: batches.__setitem__(u, jax.tree.map(np.asarray, b)))
    return rows, batches


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """``(rows, batches, workdir)`` of the plain small run (1 thread, no jitter), shared by
    the jitter and the resume tests."""
    workdir = tmp_path_factory.mktemp("plain") / "run"
    return (*_run(_small(1), str(workdir)), workdir)


@needs_3
def test_recurrent_cleanba_identical_under_jitter_and_threads(plain):
    """A GRU agent, cleanba: 1 actor thread with and without jitter, and 2 threads
    (jittered), log identical metrics; the 2 threads give the learner the same batches bit
    for bit (core start states, episode starts, observations, logits)."""
    plain, batches, _ = plain
    jittered, _ = _run(_small(1, jitter=20))
    two, two_batches = _run(_small(2, jitter=20))
    assert len(plain) == 5
    assert reproducible_part(plain) == reproducible_part(jittered)
    assert reproducible_part(plain) == reproducible_part(two)
    for u in batches:
        a, b = batches[u], two_batches[u]
        assert a.core_state.h.shape == (8, 32) and a.core_state.c is None
        assert a.first.shape == (8, 8) and a.first.dtype == bool
        for name in ("obs", "action", "reward", "first", "bootstrap_obs", "behaviour_dist_params"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
        np.testing.assert_array_equal(a.core_state.h, b.core_state.h)
    assert np.all(batches[0].core_state.h == 0) and batches[0].first[0].all()
    assert np.any(batches[2].core_state.h != 0)  # carried over from the previous rollout


@pytest.mark.slow
@needs_3
def test_recurrent_lag_4_identical_under_jitter_and_threads():
    """A GRU agent at policy lag 4, 8 updates: 1 actor thread and 2 jittered ones log the
    same metrics and hand the learner the same batches bit for bit."""
    lag = dict(policy_lag=4, total_env_steps=8 * 8 * 8)
    one, batches = _run(_small(1, **lag))
    two, two_batches = _run(_small(2, jitter=20, **lag))
    assert reproducible_part(one) == reproducible_part(two)
    assert [r["params_lag"] for r in one] == [0.0, 1.0, 2.0, 3.0, 4.0, 4.0, 4.0, 4.0]
    for u in batches:
        for name in ("obs", "action", "first", "behaviour_dist_params"):
            np.testing.assert_array_equal(getattr(batches[u], name),
                                          getattr(two_batches[u], name), err_msg=name)
        np.testing.assert_array_equal(batches[u].core_state.h, two_batches[u].core_state.h)


@needs_3
@pytest.mark.smoke  # make test-newest
def test_recurrent_resume_restarts_cores_and_agrees(plain, tmp_path):
    """A GRU agent, cleanba, 5 updates with a checkpoint at update 3, resumed there twice:
    what sebulba/actor.py documents. The resumed actors restart from zero core states with
    every episode starting (their envs re-seeded from (seed, update)) where the first run
    carried its states on; each run keeps the lines up to the checkpoint, and the two
    resumes give the same batches and metrics."""
    import shutil

    rows, first, workdir = plain
    assert checkpoint_steps(workdir) == [3, 5]
    shutil.copytree(workdir, tmp_path / "run")
    shutil.rmtree(tmp_path / "run" / "checkpoints" / "5")
    shutil.copytree(tmp_path / "run", tmp_path / "again")
    config = _small(1)
    _, resumed = _run(config, str(tmp_path / "run"))
    _, again = _run(config, str(tmp_path / "again"))
    assert sorted(resumed) == sorted(again) == [3, 4]
    assert np.any(first[3].core_state.h != 0)
    assert np.all(resumed[3].core_state.h == 0) and resumed[3].first[0].all()
    assert not np.array_equal(resumed[3].obs, first[3].obs)  # other cues: envs re-seeded
    assert np.any(resumed[4].core_state.h != 0)  # carried on after the restart
    for u in (3, 4):
        for a, b in zip(jax.tree.leaves(resumed[u]), jax.tree.leaves(again[u])):
            np.testing.assert_array_equal(a, b)
    lines = reproducible_part(read_metrics(tmp_path / "run"))
    assert [r["update"] for r in lines] == [1, 2, 3, 4, 5]
    assert lines[:3] == reproducible_part(rows)[:3]
    assert lines == reproducible_part(read_metrics(tmp_path / "again"))


@needs_3
@pytest.mark.smoke  # make test-newest
def test_evaluate_command_with_a_core(plain, tmp_path):
    """``sebulba.evaluate --greedy --video`` restores the GRU agent of the small run and
    plays Recall with the host policy carrying its core: every episode is 6 steps and
    scores +1 or -1, and the video shows the first one."""
    video = tmp_path / "recall.gif"
    proc = run_entry("sebulba.evaluate", [f"--workdir={plain[2]}", "--episodes=4",
                                          "--greedy", f"--video={video}"])
    assert proc.returncode == 0, proc.stderr
    table = parse_table(proc.stdout)
    assert table["length"]["min"] == table["length"]["max"] == 6.0, proc.stdout
    assert table["return"]["min"] >= -1.0 and table["return"]["max"] <= 1.0, proc.stdout
    # the writer's count (6 steps and the observation the episode ended on): a gif reader
    # merges the identical blank frames
    assert f"video: {video} (7 frames of " in proc.stdout
    assert read_video(str(video)).shape[0] >= 2
