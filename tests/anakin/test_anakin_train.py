"""Anakin: agents reach the CartPole threshold, runs are reproducible, 1 vs 4 devices agree,
bad configs exit 2, signals checkpoint first, resume continues bitwise."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

import anakin.train as anakin_trainer
from anakin.train import prepare, train
from configs import cartpole_impala, cartpole_ppo
from rlcore.errors import ConfigError
from runtime.distributed import data_mesh
from tests.helpers import (
    REPO,
    assert_rows_close,
    best_return,
    checkpoint_steps,
    config_error_lines,
    entry_env,
    read_metrics,
    reproducible_part,
    run_entry,
    sigterm_after_first_log,
)
from tests.threshold import train_to_return

SOLVED = 475.0


def one_device_mesh():
    return data_mesh(jax.devices()[:1])


def test_cartpole_ppo_reaches_threshold(cartpole_ppo_demo_run):
    """The whole ``make demo`` run, which test_anakin_evaluate.py evaluates too
    (tests/conftest.py)."""
    rows = cartpole_ppo_demo_run.rows
    assert rows[-1]["env_steps"] <= cartpole_ppo.get_config().total_env_steps
    assert best_return(rows) >= SOLVED, [r["episode_return"] for r in rows]


def test_cartpole_impala_reaches_threshold(tmp_path):
    """Stopped at the first line at SOLVED (tests/threshold.py): the run up to it is the whole
    budget's run."""
    config = cartpole_impala.get_config()
    rows = train_to_return(anakin_trainer, SOLVED, config, str(tmp_path), mesh=one_device_mesh())
    assert rows[-1]["env_steps"] <= config.total_env_steps
    assert best_return(rows) >= SOLVED, [r["episode_return"] for r in rows]


def _short_config(**overrides):
    config = cartpole_ppo.get_config()
    config.total_env_steps = 16 * 32 * 30
    config.num_envs = 16
    config.num_steps = 32
    config.log_every = 5
    config.updates_per_call = 10
    for k, v in overrides.items():
        config[k] = v
    return config


def test_same_seed_same_metrics(tmp_path):
    config = _short_config()
    train(config, str(tmp_path / "a"), mesh=one_device_mesh())
    train(config, str(tmp_path / "b"), mesh=one_device_mesh())
    a, b = read_metrics(tmp_path / "a"), read_metrics(tmp_path / "b")
    assert len(a) == 6
    with open(tmp_path / "a" / "timing.json") as f:
        timing = json.load(f)
    # Compiled ahead of time and timed apart: the updates' wall_time comes after it.
    assert 0 < timing["compile_s"] < timing["first_call_s"]
    assert timing["compile_s"] < a[0]["wall_time"]
    assert reproducible_part(a) == reproducible_part(b)
    other = _short_config(seed=1)
    train(other, str(tmp_path / "c"), mesh=one_device_mesh())
    assert reproducible_part(read_metrics(tmp_path / "c")) != reproducible_part(a)


def test_console_through_a_long_compile(tmp_path, monkeypatch, capfd):
    """A compile made slow (0.7 s more, a line due every 0.2 s): Anakin says it compiles,
    then that it still does, with the time so far; what native code writes on stderr
    meanwhile (XLA's slow-compile banner) reaches errors.log, not the console."""
    from runtime.process import failure
    from runtime.run import directory as rundir_module

    monkeypatch.setattr(rundir_module, "COMPILE_EVERY_S", 0.2)
    details = failure.Details(str(tmp_path / "errors.log"))
    monkeypatch.setattr(failure, "_captured", details)
    banner = b"E0000 slow_operation_alarm.cc:133] Very slow compile? If you want to file a bug"
    compile_call = anakin_trainer.AnakinRun.compile

    def slow_compile(run, state):
        seconds = compile_call(run, state)
        os.write(2, banner + b"\n")  # as XLA's C++ logging writes it
        time.sleep(0.7)
        return seconds

    monkeypatch.setattr(anakin_trainer.AnakinRun, "compile", slow_compile)
    train(_short_config(total_env_steps=16 * 32 * 10), str(tmp_path / "run"),
          mesh=one_device_mesh())
    lines = capfd.readouterr().err.splitlines()
    assert lines[0] == "compiling the training call (10 updates)..."
    still = [ln for ln in lines if ln.startswith("still compiling (0:00:0")]
    assert len(still) >= 2 and lines[1:1 + len(still)] == still, lines
    assert not [ln for ln in lines if "Very slow compile" in ln]
    assert banner.decode() in (tmp_path / "errors.log").read_text() and details.lines == 1


def test_a_call_is_announced_as_the_call_it_is(tmp_path, capfd):
    """A resumed run whose first call is shorter than ``updates_per_call`` announces that
    call's size when it compiles, and runs it so (one announcement, one size)."""
    config = _short_config(total_env_steps=16 * 32 * 10, updates_per_call=4)
    train(config, str(tmp_path), mesh=one_device_mesh())
    capfd.readouterr()
    train(_short_config(total_env_steps=16 * 32 * 13, updates_per_call=4), str(tmp_path),
          mesh=one_device_mesh())
    err = capfd.readouterr().err.splitlines()
    assert "compiling the training call (3 updates)..." in err, err
    assert any(ln.startswith("first call (3 updates) ran in") for ln in err), err


def test_a_lagged_run_logs_its_lag_in_the_metrics_and_on_the_console(capfd):
    """At policy lag 2, rollout u acts with version max(u - 2, 0): ``params_lag`` is 0, 1,
    then 2, as Sebulba logs it; each progress line shows it. A run without lag has no key."""
    rows = train(_short_config(total_env_steps=16 * 32 * 4, log_every=1, updates_per_call=4,
                               policy_lag=2), None, mesh=one_device_mesh())
    assert [r["params_lag"] for r in rows] == [0.0, 1.0, 2.0, 2.0]
    err = capfd.readouterr().err
    assert [ln.split("| lag ")[1].split(" |")[0] for ln in err.splitlines()
            if ln.startswith("update ")] == ["0.0", "1.0", "2.0", "2.0"]
    assert "params_lag" not in train(_short_config(total_env_steps=16 * 32), None,
                                     mesh=one_device_mesh())[0]


@pytest.mark.slow  # 20-30 s (the default tier's 12 minutes)
def test_summary_after_an_extension_covers_the_whole_run(tmp_path):
    """A run extended by a second command: its summary reads the whole metrics.jsonl (the
    first command's lines too), gives the evaluation returns and the next commands."""
    workdir = tmp_path / "run"

    def args(total):
        return ["--config=configs/cartpole_ppo.py", f"--workdir={workdir}",
                "--config.num_envs=8", "--config.num_steps=16", "--config.anneal_lr=False",
                "--config.log_every=5", "--config.updates_per_call=5",
                "--config.eval_every=10", "--config.eval_episodes=2",
                "--config.eval_max_steps=500", f"--config.total_env_steps={total}"]

    assert run_entry("anakin.main", args(128 * 10)).returncode == 0
    longer = run_entry("anakin.main", args(128 * 20))
    assert longer.returncode == 0, longer.stderr
    rows = read_metrics(str(workdir))
    assert [r["update"] for r in rows] == [5, 10, 15, 20]
    out = longer.stdout.splitlines()
    assert out[0].startswith("learning curve") and out[1].startswith("           640 ->"), out
    evals = [r["eval/episode_return"] for r in rows if "eval/episode_return" in r]
    assert len(evals) == 2 and any(ln.startswith("evaluation return (in training): ")
                                   and ln.endswith(f"final {evals[-1]:.1f} (at 2,560 env "
                                                   "steps)") for ln in out), out
    assert out[-1].startswith(f"next: python -m anakin.evaluate --workdir={workdir} "), out
    assert out[-2] == f"curve: {workdir}/curve.png (mean episode return against env steps)"
    assert not os.path.exists(os.path.join(workdir, "run.lock"))  # a clean end removes it
    assert not [p for p in pathlib.Path(workdir).rglob("*") if p.is_file()
                and p.stat().st_size == 0 and "checkpoints" not in p.parts]  # no empty file


@pytest.mark.parametrize("algorithm, lag", [
    pytest.param("ppo", 0, marks=pytest.mark.smoke),  # make test-newest
    pytest.param("impala", 0, marks=pytest.mark.smoke), ("ppo", 2)])
def test_one_vs_four_devices(algorithm, lag):
    if jax.device_count() < 4:
        pytest.skip("needs 4 (fake) devices")
    # Adam (and clipped RMSProp) are nearly blind to the gradient's scale; torch RMSProp
    # with a large eps outside the root and no clipping is close to SGD, so a
    # device-count-dependent gradient scale would show in the losses.
    # IMPALA's loss sums over the minibatch's 32 steps x 4 envs: the same SGD-like step
    # takes a learning rate 128 times smaller.
    # IMPALA runs with both normalisations: their statistics are global over the mesh.
    lr = 0.5 if algorithm == "ppo" else 0.5 / (32 * 4)
    norm = algorithm == "impala"
    config = _short_config(algorithm=algorithm, total_env_steps=16 * 32 * 5, log_every=1,
                           updates_per_call=5, optimizer="rmsprop", learning_rate=lr,
                           rmsprop_eps=10.0, max_grad_norm=0.0, normalize_obs=norm,
                           normalize_reward=norm, policy_lag=lag)
    one = train(config, None, mesh=one_device_mesh())
    four = train(config, None, mesh=data_mesh(jax.devices()[:4]))
    assert len(one) == len(four) == 5
    assert_rows_close(one, four, tol=1e-4)


@pytest.mark.parametrize("override, field", [
    ("--config.env_id=CartPol-v1", "env_id"),
    ("--config.num_minibatches=3", "num_minibatches"),
    ("--config.algorithm=sarsa", "algorithm"),
    ("--config.learning_rate=-1.0", "learning_rate"),
    ("--config.env_id=Breakout-v5", "env_id"),
    ("--config.debug.nope=1", "debug.nope"),  # unknown fields named by their whole path
    ("--config.nope.deeper=3", "nope"),
    ("--config.policy_lag=-2", "policy_lag"),
    ("--config.pbt.interval=5", "pbt.fraction"),  # one agent: nobody to copy
    ("--config.pbt.interval=1000 --config.num_seeds=4 --config.pbt.low=1e-4, "
     "--config.pbt.high=1e-3,", "pbt.interval"),  # longer than the run's 976 updates
])
def test_bad_config_exits_2_with_one_line(override, field, tmp_path):
    proc = run_entry("anakin.main",
                     ["--config=configs/cartpole_ppo.py", *override.split(),
                      f"--workdir={tmp_path}"])
    assert proc.returncode == 2, proc.stderr
    lines = config_error_lines(proc.stderr)
    assert len(lines) == 1 and f"config error: {field}:" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not os.path.exists(tmp_path / "checkpoints")


def test_prepare_rejects_before_compiling():
    config = cartpole_ppo.get_config()
    config.updates_per_call = 0
    with pytest.raises(ConfigError, match="^updates_per_call:"):
        prepare(config)


def test_sigterm_checkpoints_then_exits_143(tmp_path):
    code = sigterm_after_first_log("anakin.main", [
        "--config=configs/cartpole_ppo.py", "--config.total_env_steps=100000000",
        "--config.log_every=10", "--config.updates_per_call=10", f"--workdir={tmp_path}"])
    assert code == 143
    steps = checkpoint_steps(tmp_path)
    assert steps and steps[-1] >= 10
    assert read_metrics(tmp_path)[-1]["update"] <= steps[-1]


@pytest.mark.slow  # 20-30 s (the default tier's 12 minutes)
def test_a_kill_after_the_wall_clock_checkpoint_cadence_loses_at_most_one_cadence(tmp_path):
    """No update cadence (``checkpoint_every=0``), a wall-clock one of 1.2 s, calls of one
    update held 0.3 s: kill -9 once 12 updates are logged leaves a checkpoint at most one
    cadence (and the call in flight) behind the last logged update; the same command resumes
    from it and recomputes the lost updates exactly."""
    command = [sys.executable, "-m", "anakin.main", "--config=configs/cartpole_ppo.py",
               f"--workdir={tmp_path}", f"--config.total_env_steps={16 * 32 * 40}",
               "--config.num_envs=16", "--config.num_steps=32", "--config.log_every=1",
               "--config.updates_per_call=1", "--config.num_devices=1",
               "--config.checkpoint_every=0", "--config.checkpoint_every_minutes=0.02"]
    proc = subprocess.Popen([*command, "--config.debug.learner_delay_ms=300"], cwd=REPO,
                            env=entry_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    try:
        while len(_lines(tmp_path)) < 12:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait()
    before = _lines(tmp_path)
    newest = checkpoint_steps(tmp_path)[-1]
    fastest_update_s = min(r["time/update_s"] for r in before[1:])  # held: not the first
    assert before[-1]["update"] - newest <= 1.2 / fastest_update_s + 2, (newest, before[-1])
    done = subprocess.run(command, cwd=REPO, env=entry_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and f"resuming from update {newest}" in done.stderr
    after = {r["update"]: r for r in reproducible_part(read_metrics(tmp_path))}
    assert [after[r["update"]] for r in reproducible_part(before)] == reproducible_part(before)


def _lines(workdir) -> list[dict]:
    """The metrics lines written so far (a line being written left out)."""
    path = os.path.join(workdir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(ln) for ln in f.read().splitlines()[:-1] if ln.strip()]


def test_learner_delay_holds_every_call_but_the_first():
    """``debug.learner_delay_ms`` (a test knob): each device call after the first (it
    compiles) lasts that much longer, which the logged update time shows."""
    config = _short_config(total_env_steps=16 * 32 * 4, updates_per_call=1, log_every=1)
    config.debug.learner_delay_ms = 300
    times = [r["time/update_s"] for r in train(config, None, mesh=one_device_mesh())]
    assert len(times) == 4 and times[0] < 0.3 <= min(times[1:]), times


@pytest.mark.parametrize("lag", [pytest.param(0, marks=pytest.mark.smoke), 4])  # smoke: newest
def test_resume_continues_bitwise(lag, tmp_path):
    """Stopped after update 10 (log windows of 4 do not line up with it), resumed: the
    metrics equal an uninterrupted run's, clock keys aside. With both normalisations: their
    statistics (in the params) and the envs' discounted returns are in the checkpoint; at
    lag 4 the lagged params are too."""
    config = _short_config(checkpoint_every=10, log_every=4, normalize_obs=True,
                           normalize_reward=True, policy_lag=lag)
    full = tmp_path / "full"
    train(config, str(full), mesh=one_device_mesh())
    reference = reproducible_part(read_metrics(full))
    for step in os.listdir(full / "checkpoints"):
        if step.isdigit() and int(step) > 10:
            shutil.rmtree(full / "checkpoints" / step)
    train(config, str(full), mesh=one_device_mesh())
    assert reproducible_part(read_metrics(full)) == reference


def test_resume_with_other_config_is_a_config_error(tmp_path):
    config = _short_config(total_env_steps=16 * 32 * 10)
    train(config, str(tmp_path), mesh=one_device_mesh())
    with pytest.raises(ConfigError, match="^num_steps: the checkpoint"):
        train(_short_config(total_env_steps=16 * 32 * 10, num_steps=16), str(tmp_path),
              mesh=one_device_mesh())


def test_nan_rewards_fail_the_run():
    config = _short_config()
    config.debug.nan_at_update = 3
    with pytest.raises(FloatingPointError, match="non-finite loss .* in update 4"):
        train(config, None, mesh=one_device_mesh())


@pytest.mark.slow
@pytest.mark.optimized
def test_minatar_breakout_return_rises():
    """The MinAtar Breakout config (MinAtar CNN), shrunk to 32 envs and 102k steps: the mean
    return rises from near the random policy's (~1) by at least 2 (measured with lines
    every 5 updates: 0.42 and 1.0 at updates 5 and 10, 6.4 at 50, 8.4 at 100). The full
    10M-step run is ``benchmarks/minatar_breakout.py``."""
    from configs import minatar_breakout_ppo

    config = minatar_breakout_ppo.get_config()
    config.num_devices = 1
    config.num_envs = 32
    config.num_steps = 64
    config.num_minibatches = 4
    config.total_env_steps = 32 * 64 * 50
    config.log_every = 10
    config.updates_per_call = 10
    prepare(config)
    rows = train(config, None)
    returns = [r["episode_return"] for r in rows]
    assert all(np.isfinite(r["loss/total"]) for r in rows)
    assert returns[-1] >= returns[0] + 2.0, returns


@pytest.mark.slow
def test_rerun_of_a_finished_run_says_so_and_a_larger_budget_extends_it(tmp_path):
    """A finished run rerun: one ``done:`` line, exit 0. Rerun with a larger
    ``total_env_steps`` (no lr annealing, whose schedule depends on the total): it continues,
    and its metrics equal those of a run planned that long from the start."""
    def args(workdir, total):
        return ["--config=configs/cartpole_ppo.py", f"--workdir={workdir}",
                "--config.num_envs=8", "--config.num_steps=16", "--config.anneal_lr=False",
                "--config.log_every=5", "--config.updates_per_call=5",
                f"--config.total_env_steps={total}"]

    short, planned = tmp_path / "short", tmp_path / "planned"
    assert run_entry("anakin.main", args(short, 128 * 20)).returncode == 0
    again = run_entry("anakin.main", args(short, 128 * 20))
    assert again.returncode == 0 and again.stderr.splitlines() == [
        f"done: {short} is already complete at update 20 (2,560 env steps); raise "
        f"--config.total_env_steps to continue it, or pass --fresh to start over"], again.stderr
    longer = run_entry("anakin.main", args(short, 128 * 40))
    assert longer.returncode == 0, longer.stderr
    assert "extending the run: total_env_steps 2,560 -> 5,120 (40 updates)" in longer.stderr
    assert run_entry("anakin.main", args(planned, 128 * 40)).returncode == 0
    extended_rows = reproducible_part(read_metrics(str(short)))
    assert [r["update"] for r in extended_rows] == list(range(5, 41, 5))
    assert extended_rows == reproducible_part(read_metrics(str(planned)))
