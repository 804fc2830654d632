"""RunDir on a real run directory: log cadence and window means, checkpoint cadence,
checkpoint-then-exit on a signal, non-finite losses, resume (state, truncated metrics,
restored log window, config checks) and the files a run leaves behind.

Checkpoints are real orbax checkpoints of a tiny state.
"""

import json
import math
import os

import jax.numpy as jnp
import numpy as np
import pytest

from configs import base
from rlcore.errors import ConfigError
from rlcore.types import EpisodeSummary
from runtime.config.saved import FORMAT_VERSION
from runtime.run.directory import RunDir
from runtime.run.resume import RunComplete
from tests.helpers import is_clock_key

STEPS_PER_UPDATE = 512  # base config: 4 envs x 128 steps
NO_EPISODES = EpisodeSummary(0.0, 0.0, 0)


def _config(log_every: int, checkpoint_every: int = 0, **fields):
    config = base.get_config()
    config.log_every = log_every
    config.checkpoint_every = checkpoint_every
    for key, value in fields.items():
        config[key] = value
    return config


def _state(update: int):
    return {"w": jnp.arange(3.0) + update, "update": jnp.asarray(update, jnp.int32)}


def _scalars(update: int) -> dict:
    """Distinct per-update values: loss/total = u, loss/x = u * u."""
    return {"loss/total": float(update), "loss/x": float(update * update)}


def _episodes(update: int) -> EpisodeSummary:
    """Episodes that ended in ``update``: none in updates divisible by 4, else
    ``update % 3 + 1`` of them with return ``10 u`` and length ``u`` each."""
    if update % 4 == 0:
        return NO_EPISODES
    n = update % 3 + 1
    return EpisodeSummary(10.0 * update * n, float(update * n), n)


def _lines(workdir) -> list[dict]:
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def _steady(row: dict) -> dict:
    """A metrics row without its clock keys."""
    return {k: v for k, v in row.items() if not is_clock_key(k)}


# ----------------------------------------------------------------------------- cadence


def test_log_lines_are_window_means_every_log_every_and_at_the_end(tmp_path):
    config = _config(log_every=3)
    episodes = {1: EpisodeSummary(30.0, 12.0, 2), 2: NO_EPISODES, 3: EpisodeSummary(18.0, 9.0, 1),
                4: NO_EPISODES, 5: NO_EPISODES, 6: NO_EPISODES,
                7: EpisodeSummary(50.0, 20.0, 4)}
    rundir = RunDir(config, str(tmp_path), total_updates=7, steps_per_update=STEPS_PER_UPDATE)
    try:
        rundir.restore_or(_state(0))
        for u in range(1, 8):
            rundir.record(u, _scalars(u), episodes[u])
        history = rundir.history
    finally:
        rundir.close()

    assert [row["update"] for row in history] == [3, 6, 7]
    assert [row["env_steps"] for row in history] == [3 * 512, 6 * 512, 7 * 512]
    # loss/total: mean(1, 2, 3) = 2, mean(4, 5, 6) = 5, mean(7) = 7.
    assert [row["loss/total"] for row in history] == pytest.approx([2.0, 5.0, 7.0])
    # loss/x: mean(1, 4, 9) = 14/3, mean(16, 25, 36) = 77/3, 49.
    assert [row["loss/x"] for row in history] == pytest.approx([14 / 3, 77 / 3, 49.0])
    # Window 1..3: 3 episodes, returns 48, lengths 21; 4..6: none; 7: 4 episodes, 50, 20.
    assert history[0]["episode_return"] == pytest.approx(16.0)
    assert history[0]["episode_length"] == pytest.approx(7.0)
    assert history[1]["episode_return"] is None and history[1]["episode_length"] is None
    assert history[2]["episode_return"] == pytest.approx(12.5)
    assert history[2]["episode_length"] == pytest.approx(5.0)
    assert _lines(tmp_path) == history


# ------------------------------------------------------------------------ checkpoints


@pytest.mark.parametrize("every, update, previous, due", [
    (4, 5, 3, True),     # a multi-update call passes 4
    (4, 4, 3, True),     # reaches 4
    (4, 3, 0, False),
    (4, 7, 5, False),    # 6, 7: no multiple of 4
    (4, 9, 4, True),     # passes 8
    (4, 10, 9, True),    # the end (10 is no multiple of 4)
    (4, 10, 8, True),
    (0, 4, 3, False),    # 0: only at the end
    (0, 8, 0, False),
    (0, 9, 8, False),
    (0, 10, 9, True),
    (0, 10, 0, True),
])
def test_checkpoint_due(tmp_path, every, update, previous, due):
    rundir = RunDir(_config(log_every=1, checkpoint_every=every), str(tmp_path),
                    total_updates=10, steps_per_update=STEPS_PER_UPDATE)
    try:
        assert rundir.checkpoint_due(update, previous) is due
    finally:
        rundir.close()


def test_the_clock_checkpoints_between_update_points_and_restarts_after_a_save(tmp_path):
    """``checkpoint_every_minutes``: due once that long has passed since the last checkpoint
    (or the start); ``clock=True`` (the trainers' agreed answer) saves; a save restarts it."""
    rundir = RunDir(_config(log_every=1, checkpoint_every=0, checkpoint_every_minutes=0.01),
                    str(tmp_path), total_updates=10, steps_per_update=STEPS_PER_UPDATE)
    try:
        rundir.restore_or(_state(0))
        assert not rundir.clock_due()
        rundir.saved_at -= 0.6  # 0.01 minutes passed
        assert rundir.clock_due()
        rundir.record(1, _scalars(1), _episodes(1))
        rundir.checkpoint_or_exit(1, 0, _state(1), None, clock=rundir.clock_due())
        assert rundir.ckpt.latest_step() == 1 and not rundir.clock_due()
    finally:
        rundir.close()
    off = RunDir(_config(log_every=1, checkpoint_every_minutes=0), str(tmp_path / "off"),
                 total_updates=10, steps_per_update=STEPS_PER_UPDATE)
    off.saved_at -= 1e9
    assert not off.clock_due()
    off.close()


def test_checkpoint_or_exit_saves_when_due_and_before_exiting(tmp_path, capsys):
    rundir = RunDir(_config(log_every=2, checkpoint_every=4), str(tmp_path),
                    total_updates=10, steps_per_update=STEPS_PER_UPDATE)
    try:
        rundir.restore_or(_state(0))
        for u in range(1, 4):
            rundir.record(u, _scalars(u), _episodes(u))
        rundir.checkpoint_or_exit(3, 0, _state(3), None)
        assert rundir.ckpt.latest_step() is None  # 1..3 reach no multiple of 4

        rundir.record(4, _scalars(4), _episodes(4))
        rundir.record(5, _scalars(5), _episodes(5))
        rundir.checkpoint_or_exit(5, 3, _state(5), None)
        assert rundir.ckpt.latest_step() == 5  # 4 passed inside the call

        rundir.record(6, _scalars(6), _episodes(6))
        rundir.checkpoint_or_exit(6, 5, _state(6), None)
        assert rundir.ckpt.latest_step() == 5  # not due, no signal

        rundir.record(7, _scalars(7), _episodes(7))
        with pytest.raises(SystemExit) as info:
            rundir.checkpoint_or_exit(7, 6, _state(7), 143)
        assert info.value.code == 143
        assert rundir.ckpt.latest_step() == 7  # saved first, though not due
        assert capsys.readouterr().err.splitlines()[-1] == (
            "SIGTERM: saving a checkpoint at update 7, then exiting; run the same command "
            "to resume (a second SIGTERM exits at once, keeping the last checkpoint)")
        restored = rundir.ckpt.restore(_state(0), 7)
    finally:
        rundir.close()
    np.testing.assert_array_equal(restored["w"], np.arange(3.0) + 7)
    assert int(restored["update"]) == 7
    # The open window (update 7; the line at 6 closed 5..6) is kept beside the checkpoint.
    with open(tmp_path / "log_state" / "7.json") as f:
        saved = json.load(f)
    assert saved["window"] == [_scalars(7)]
    assert saved["episodes"] == _episodes(7).as_list()


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_loss_names_the_update(tmp_path, bad):
    rundir = RunDir(_config(log_every=10), str(tmp_path), total_updates=10,
                    steps_per_update=STEPS_PER_UPDATE)
    try:
        rundir.restore_or(_state(0))
        rundir.record(1, _scalars(1), NO_EPISODES)
        with pytest.raises(FloatingPointError, match=r"\bupdate 2\b"):
            rundir.record(2, {"loss/total": bad, "loss/x": 1.0}, NO_EPISODES)
    finally:
        rundir.close()


# ----------------------------------------------------------------------------- resume


def _run(config, workdir, start_state, updates, checkpoint_until=math.inf, total=10):
    """Records ``updates`` of a ``total``-update run; checkpoints (when due) after each
    update up to ``checkpoint_until``, as if the process died before the next checkpoint.
    Returns (restored state, history)."""
    rundir = RunDir(config, str(workdir), total_updates=total,
                    steps_per_update=STEPS_PER_UPDATE)
    try:
        restored = rundir.restore_or(start_state)
        for u in updates:
            rundir.record(u, _scalars(u), _episodes(u))
            if u <= checkpoint_until:
                rundir.checkpoint_or_exit(u, u - 1, _state(u), None)
        return restored, rundir.history
    finally:
        rundir.close()


def test_resume_restores_state_truncates_metrics_and_continues_identically(tmp_path):
    config = _config(log_every=4, checkpoint_every=6)
    # Run A: updates 1..10, lines at 4, 8, 10; checkpoint at 6; dies before the final one.
    _, history_a = _run(config, tmp_path, _state(0), range(1, 11), checkpoint_until=9)
    lines_a = _lines(tmp_path)
    assert [row["update"] for row in lines_a] == [4, 8, 10]
    assert lines_a == history_a
    # The window 5..8 holds episodes of 5 and 6 (before the checkpoint) and 7.
    assert lines_a[1]["episode_return"] == pytest.approx((150 + 60 + 140) / (3 + 1 + 2))

    rundir = RunDir(config, str(tmp_path), total_updates=10, steps_per_update=STEPS_PER_UPDATE)
    try:
        restored = rundir.restore_or(_state(0))
        assert [row["update"] for row in _lines(tmp_path)] == [4]  # truncated past 6
        for u in range(7, 11):
            rundir.record(u, _scalars(u), _episodes(u))
            rundir.checkpoint_or_exit(u, u - 1, _state(u), None)
        history_b = rundir.history
    finally:
        rundir.close()

    assert int(restored["update"]) == 6
    np.testing.assert_array_equal(restored["w"], np.arange(3.0) + 6)
    assert [row["update"] for row in history_b] == [8, 10]
    lines = _lines(tmp_path)
    assert [row["update"] for row in lines] == [4, 8, 10]
    assert [_steady(row) for row in lines] == [_steady(row) for row in lines_a]
    assert [_steady(row) for row in history_b] == [_steady(row) for row in lines_a[1:]]


def test_resume_refuses_a_changed_field_that_matters(tmp_path):
    _run(_config(log_every=2, checkpoint_every=1), tmp_path, _state(0), range(1, 3),
         checkpoint_until=2)
    changed = _config(log_every=2, num_steps=64)
    rundir = RunDir(changed, str(tmp_path), 10, STEPS_PER_UPDATE)
    try:
        with pytest.raises(ConfigError, match=r"^num_steps: .*128.*64") as raised:
            rundir.restore_or(_state(0))
        assert str(raised.value) == (
            f"num_steps: the checkpoint in {tmp_path} was made with 128, not 64; resume "
            "with the same value, use a new --workdir, or pass --fresh to move the previous "
            "run aside and start over")
    finally:
        rundir.close()


def test_resume_of_a_complete_run_is_one_line_naming_what_to_do(tmp_path):
    four = dict(log_every=2, checkpoint_every=2, total_env_steps=4 * STEPS_PER_UPDATE)
    _run(_config(**four), tmp_path, _state(0), range(1, 5), total=4)
    rundir = RunDir(_config(**four), str(tmp_path), 4, STEPS_PER_UPDATE)
    try:
        with pytest.raises(RunComplete, match=rf"^{tmp_path} is already complete at update "
                           r"4 \(2,048 env steps\); raise --config.total_env_steps to "
                           r"continue it, or pass --fresh to start over$"):
            rundir.restore_or(_state(0))
    finally:
        rundir.close()


def test_a_larger_total_extends_the_run_and_a_smaller_one_is_refused(tmp_path, capsys):
    _run(_config(log_every=2, checkpoint_every=2, total_env_steps=4 * STEPS_PER_UPDATE),
         tmp_path, _state(0), range(1, 5), total=4)
    short = _config(log_every=2, total_env_steps=3 * STEPS_PER_UPDATE)
    rundir = RunDir(short, str(tmp_path), 3, STEPS_PER_UPDATE)
    try:
        with pytest.raises(ConfigError, match=r"^total_env_steps: 1536 is 3 updates, but the "
                           r"checkpoint .* is at update 4 \(2,048 env steps\); .*--fresh"):
            rundir.restore_or(_state(0))
    finally:
        rundir.close()
    longer = _config(log_every=2, checkpoint_every=2, total_env_steps=8 * STEPS_PER_UPDATE)
    restored, history = _run(longer, tmp_path, _state(0), range(5, 9), total=8)
    assert int(restored["update"]) == 4 and [r["update"] for r in history] == [6, 8]
    assert "extending the run: total_env_steps 2,048 -> 4,096 (8 updates); the learning " \
        "rate anneals to 0 over the new total" in capsys.readouterr().err
    with open(tmp_path / "config.json") as f:
        assert json.load(f)["total_env_steps"] == 8 * STEPS_PER_UPDATE  # the next compares


def test_resume_allows_a_changed_log_every(tmp_path):
    _run(_config(log_every=2, checkpoint_every=3), tmp_path, _state(0), range(1, 5),
         checkpoint_until=4)
    restored, history = _run(_config(log_every=5, checkpoint_every=3), tmp_path, _state(0),
                             range(4, 11), checkpoint_until=10)
    assert int(restored["update"]) == 3
    assert [row["update"] for row in history] == [5, 10]


def test_a_run_saved_under_a_former_field_name_resumes(tmp_path):
    """An older run's config.json names ``minibatch`` (now ``minibatch_kind``): the resume
    check reads it under the new name, so the same value resumes and another is refused."""
    _run(_config(log_every=2, checkpoint_every=3), tmp_path, _state(0), range(1, 5),
         checkpoint_until=4)
    with open(tmp_path / "config.json") as f:
        saved = json.load(f)
    saved["minibatch"] = saved.pop("minibatch_kind")
    with open(tmp_path / "config.json", "w") as f:
        json.dump(saved, f)
    rundir = RunDir(_config(log_every=2, minibatch_kind="sequences"), str(tmp_path), 10,
                    STEPS_PER_UPDATE)
    try:
        with pytest.raises(ConfigError, match=r"^minibatch_kind: .* with 'auto', not "
                                              r"'sequences'"):
            rundir.restore_or(_state(0))
    finally:
        rundir.close()
    restored, _ = _run(_config(log_every=2, checkpoint_every=3), tmp_path, _state(0),
                       range(4, 7))
    assert int(restored["update"]) == 3


# ----------------------------------------------------------------------------- close


def test_close_leaves_metrics_and_config(tmp_path):
    config = _config(log_every=2)
    rundir = RunDir(config, str(tmp_path), total_updates=4, steps_per_update=STEPS_PER_UPDATE)
    try:
        rundir.restore_or(_state(0))
        for u in range(1, 5):
            rundir.record(u, _scalars(u), _episodes(u))
            rundir.checkpoint_or_exit(u, u - 1, _state(u), None)
        history = rundir.history
    finally:
        rundir.close()
    assert _lines(tmp_path) == history and len(history) == 2
    with open(tmp_path / "config.json") as f:
        assert json.load(f) == {**json.loads(config.to_json_best_effort()),
                                "format_version": FORMAT_VERSION}
    assert (tmp_path / "checkpoints" / "4").is_dir()


def _tb_session_starts(workdir) -> list[list[int]]:
    """Per event file (oldest first), the steps of its SessionLog START events: where
    TensorBoard drops the events earlier files logged at that step or later."""
    import glob
    import struct

    from tensorboardX.proto import event_pb2

    starts = []
    for path in sorted(glob.glob(os.path.join(workdir, "events.out.tfevents.*")),
                       key=os.path.getmtime):
        found, data = [], open(path, "rb").read()
        pos = 0
        while pos + 12 <= len(data):  # TFRecord: u64 length, u32 crc, data, u32 crc
            (length,) = struct.unpack("<Q", data[pos:pos + 8])
            event = event_pb2.Event.FromString(data[pos + 12:pos + 12 + length])
            pos += 12 + length + 4
            if event.HasField("session_log") and event.session_log.status == 1:  # START
                found.append(event.step)
        starts.append(found)
    return starts


def test_a_run_that_died_before_its_first_checkpoint_starts_its_logs_over(tmp_path):
    config = _config(log_every=2, checkpoint_every=100)
    _run(config, tmp_path, _state(0), range(1, 5), checkpoint_until=0)  # dies: no checkpoint
    assert [row["update"] for row in _lines(tmp_path)] == [2, 4]
    _run(config, tmp_path, _state(0), range(1, 5), checkpoint_until=0)
    assert [row["update"] for row in _lines(tmp_path)] == [2, 4]  # not [2, 4, 2, 4]
    # TensorBoard: the second writer purges every step >= 1 the first one logged.
    assert _tb_session_starts(tmp_path)[-1] == [1]


def test_a_resumed_run_purges_tensorboard_past_its_checkpoint(tmp_path):
    config = _config(log_every=2, checkpoint_every=3)
    _run(config, tmp_path, _state(0), range(1, 6), checkpoint_until=5)  # checkpoint at 3
    _run(config, tmp_path, _state(0), range(4, 6), checkpoint_until=5)
    assert _tb_session_starts(tmp_path)[-1] == [3 * STEPS_PER_UPDATE + 1]


def test_stopping_lines_name_the_update_abandoned_and_what_is_saved():
    """The line of a signal that abandons an update in flight (Sebulba), also before any
    update completed (nothing saved) and without a workdir."""
    from runtime.run.lines import stopping_line

    assert stopping_line(130, 7, True, in_flight=8) == (
        "SIGINT: abandoning update 8 in flight, saving a checkpoint at update 7, then "
        "exiting; run the same command to resume (a second SIGINT exits at once, keeping the "
        "last checkpoint)")
    assert stopping_line(143, 0, True, in_flight=1) == (
        "SIGTERM: abandoning update 1 in flight, stopping before the first update completed "
        "(nothing to save); run the same command to start again")
    assert stopping_line(130, 3, False, in_flight=4) == (
        "SIGINT: abandoning update 4 in flight, stopping after update 3 (no --workdir: "
        "nothing is saved)")


def test_a_signal_before_the_first_update_completed_saves_nothing(tmp_path):
    """Sebulba abandoning update 1 of a fresh run: exit with the code, no checkpoint 0 (a
    rerun starts over the same way)."""
    rundir = RunDir(_config(log_every=1, checkpoint_every=1), str(tmp_path),
                    total_updates=10, steps_per_update=STEPS_PER_UPDATE)
    try:
        rundir.restore_or(_state(0))
        with pytest.raises(SystemExit) as info:
            rundir.checkpoint_or_exit(0, 0, _state(0), 130, in_flight=1)
        assert info.value.code == 130 and rundir.ckpt.steps() == []
    finally:
        rundir.close()


def test_the_closing_lines_name_the_curve_and_the_agent_to_score(tmp_path):
    from runtime.run.summary import curve_line, next_steps_line

    assert curve_line(str(tmp_path)) is None  # none written
    (tmp_path / "curve.png").write_bytes(b"png")
    assert curve_line(str(tmp_path)) == (f"curve: {tmp_path}/curve.png (mean episode return "
                                         "against env steps)")
    assert "scores the agent;" in next_steps_line("anakin", "runs/x")
    many = next_steps_line("anakin", "runs/x", agents=4)
    assert many.startswith("next: python -m anakin.evaluate --workdir=runs/x --agent=K scores "
                           "agent K (0..3, ")


def test_a_finished_run_keeps_no_empty_log_or_event_file(tmp_path):
    from runtime.run import files

    (tmp_path / "errors.log").write_text("")
    (tmp_path / "errors-p1.log").write_text("a warning\n")
    (tmp_path / "events.out.tfevents.1.host").write_bytes(b"")
    agent = tmp_path / "tb" / "seed=1"
    agent.mkdir(parents=True)
    (agent / "events.out.tfevents.2.host").write_bytes(b"")
    (agent / "events.out.tfevents.3.host").write_bytes(b"x")
    (tmp_path / "metrics.jsonl").write_text("")  # not ours to remove
    removed = files.remove_empty(str(tmp_path))
    assert sorted(os.path.relpath(p, tmp_path) for p in removed) == [
        "errors.log", "events.out.tfevents.1.host", "tb/seed=1/events.out.tfevents.2.host"]
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [
        "errors-p1.log", "events.out.tfevents.3.host", "metrics.jsonl"]
