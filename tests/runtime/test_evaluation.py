"""runtime.commands.evaluation: argument checks, config loading (defaults passed in), damaged
config files."""

from __future__ import annotations

import json

import pytest

from rlcore.seeding import MAX_EVAL_ENVS
from runtime.commands import evaluation as ev


def _rundir(tmp_path, checkpoint=True):
    (tmp_path / "config.json").write_text(json.dumps({"seed": 0, "env_id": "CartPole-v1"}))
    if checkpoint:
        (tmp_path / "checkpoints" / "3").mkdir(parents=True)
    return str(tmp_path)


@pytest.mark.parametrize("change, flag", [
    (dict(episodes=0), "--episodes"),
    (dict(episodes=MAX_EVAL_ENVS + 1), "--episodes"),
    (dict(agent=-1), "--agent"),
    (dict(max_episode_steps=-5), "--max_episode_steps"),
    (dict(video="out.avi"), "--video"),
    (dict(video="/no/such/dir/out.mp4"), "--video"),
    (dict(video="/proc/out.mp4"), "--video"),
    (dict(workdir=""), "--workdir"),
    (dict(workdir="/no/such/run"), "--workdir"),
])
def test_check_args_rejects(change, flag, tmp_path):
    args = ev.EvalArgs(**{**dict(workdir=_rundir(tmp_path), episodes=3), **change})
    with pytest.raises(ev.EvalError, match=f"^{flag}: "):
        ev.check_args(args)


def test_video_path_that_cannot_be_written_rejected(tmp_path):
    """Checked by creating a file there (root passes permission checks on /proc)."""
    workdir = _rundir(tmp_path)
    with pytest.raises(ev.EvalError, match="^--video: /proc/out.mp4 cannot be written "):
        ev.check_args(ev.EvalArgs(workdir=workdir, episodes=1, video="/proc/out.mp4"))
    (tmp_path / "clip.mp4").mkdir()
    with pytest.raises(ev.EvalError, match=f"^--video: {tmp_path}/clip.mp4 is a directory$"):
        ev.check_args(ev.EvalArgs(workdir=workdir, episodes=1,
                                  video=str(tmp_path / "clip.mp4")))


def test_check_args_needs_config_and_checkpoint(tmp_path):
    with pytest.raises(ev.EvalError, match="no config.json"):
        ev.check_args(ev.EvalArgs(workdir=str(tmp_path), episodes=1))
    with pytest.raises(ev.EvalError, match="no checkpoint"):
        ev.check_args(ev.EvalArgs(workdir=_rundir(tmp_path, checkpoint=False), episodes=1))
    ev.check_args(ev.EvalArgs(workdir=_rundir(tmp_path), episodes=1, video="x.GIF"))


def test_load_config_restores_tuples_and_fills_defaults(tmp_path):
    from configs import base
    from runtime.run.metrics import write_config

    config = base.get_config()
    config.learner_device_ids = (1, 2)
    config.sweep.learning_rate = (1e-3, 3e-4)
    write_config(str(tmp_path), config)
    saved = json.loads((tmp_path / "config.json").read_text())
    del saved["clip_rho"]  # a run written before the field existed
    (tmp_path / "config.json").write_text(json.dumps(saved))
    loaded = ev.load_config(str(tmp_path), base.get_config())
    assert loaded.learner_device_ids == (1, 2)
    assert loaded.sweep.learning_rate == (1e-3, 3e-4)
    assert loaded.clip_rho == base.get_config().clip_rho
    assert loaded.to_dict() == config.to_dict()
    one = ev.one_device_config(loaded)
    assert (one.num_devices, one.actor_device_ids, one.learner_device_ids) == (1, (0,), (0,))


@pytest.mark.parametrize("text, problem", [('{"seed": 0,', "is not valid JSON"),
                                           ("[1, 2]", "holds a tuple, not a run's config")])
def test_a_damaged_config_json_is_one_line(tmp_path, text, problem):
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(ev.EvalError, match=f"^--workdir: .*config.json {problem}") as e:
        ev.load_config(str(tmp_path))
    assert "\n" not in str(e.value)


def test_restore_latest_lists_again_when_a_step_vanished_while_listed(tmp_path, monkeypatch):
    """A run training in the workdir deletes its oldest checkpoint as it saves one: opening
    the checkpoint manager (which lists every step's files) can then meet a step that is
    gone. The reader lists again (a full suite met it once: ``no such file or directory:
    .../checkpoints/147``); after ``LIVE_RETRIES`` such failures it gives up."""
    import jax.numpy as jnp
    import numpy as np

    from runtime.run import checkpoint

    state = {"w": jnp.arange(3.0)}
    saver = checkpoint.Checkpointer(str(tmp_path))
    saver.save(5, state)
    saver.close()
    opened = []

    class PrunedWhileListed(checkpoint.Checkpointer):
        def __init__(self, *args, **kwargs):
            opened.append(1)
            if len(opened) <= failures:
                raise FileNotFoundError(2, "No such file or directory", "checkpoints/4")
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(checkpoint, "Checkpointer", PrunedWhileListed)
    failures = ev.LIVE_RETRIES - 1
    restored, step = ev.restore_latest(str(tmp_path), state, "anakin")
    assert step == 5 and np.array_equal(restored["w"], state["w"])
    assert len(opened) == ev.LIVE_RETRIES
    opened.clear()
    failures = ev.LIVE_RETRIES
    with pytest.raises(FileNotFoundError):
        ev.restore_latest(str(tmp_path), state, "anakin")


def test_a_relative_video_path_is_inside_the_run_directory():
    from runtime.commands.evaluation import video_path

    assert video_path("runs/demo", "cartpole.mp4") == "runs/demo/cartpole.mp4"
    assert video_path("runs/demo", "videos/a.gif") == "runs/demo/videos/a.gif"
    assert video_path("runs/demo", "/tmp/a.mp4") == "/tmp/a.mp4"
    assert video_path("runs/demo", "") == ""


def test_a_video_without_the_video_extra_is_one_line(tmp_path, monkeypatch):
    import importlib.util

    from runtime.commands import evaluation as ev

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "imageio" else real(name, *a))
    with pytest.raises(ev.EvalError, match=r"^--video: needs the 'video' extra, which is not "
                       r"installed: pip install -e '\.\[video\]'$"):
        ev.check_args(ev.EvalArgs(workdir=str(tmp_path), episodes=1,
                                  video=str(tmp_path / "a.mp4")))
