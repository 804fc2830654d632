"""``benchmarks.breakout``'s driver: a signal to it reaches the run it started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import REPO, checkpoint_steps, entry_env


@pytest.mark.slow  # 15-25 s (the default tier's 12 minutes)
def test_sigterm_to_the_driver_stops_its_run_with_a_checkpoint(tmp_path):
    """SIGTERM to ``python -m benchmarks.breakout`` (here on the Sebulba CartPole config with
    a line every update, so that it logs within seconds): the run checkpoints and exits 143,
    no run is left training, and the driver still prints its summary and writes the curve."""
    workdir, config = tmp_path / "run", tmp_path / "config.py"
    config.write_text("from configs import cartpole_ppo_sebulba\n\n\ndef get_config():\n"
                      "    c = cartpole_ppo_sebulba.get_config()\n    c.log_every = 1\n"
                      "    return c\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.breakout", f"--workdir={workdir}",
         f"--config={config}", "--target=1e9", "--minutes=30"],
        cwd=REPO, env=entry_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = workdir / "metrics.jsonl"
    deadline = time.monotonic() + 180
    while not (metrics.exists() and metrics.read_text().strip()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert "exit code 143" in stdout, stdout
    assert checkpoint_steps(workdir), os.listdir(workdir)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(workdir) not in ps  # the run is not left training on
    assert (workdir / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_summary_leaves_out_lines_without_a_rate(tmp_path):
    """A line's sps is None before a steady rate exists: the summary's mean skips it, and
    says so where no line has one (a run stopped right after its first update)."""
    import json

    from benchmarks.breakout import summary
    from sebulba import timers

    step = timers.metric_key(timers.LEARNER_STEP)
    rows = [{"update": u, "env_steps": 768 * u, "wall_time": float(u), "episode_return": 1.0,
             "sps": sps, step: 0.5} for u, sps in [(1, None), (2, None), (3, 300.0), (4, 500.0)]]
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert "SPS (mean of logged lines after the first): 400" in summary(str(tmp_path), 1e9)
    metrics.write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    assert "SPS: not measured" in summary(str(tmp_path), 1e9)
