"""``make demo`` is for people: a progress line per log step and a summary, at most 40 lines
after the install step, and no library chatter."""

from __future__ import annotations

import os


def test_make_demo_is_short_and_quiet(cartpole_ppo_demo_run):
    """(``make demo`` runs once per session in tests/conftest.py; other tests read its run.)"""
    proc, workdir = cartpole_ppo_demo_run.proc, cartpole_ppo_demo_run.workdir
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = (proc.stdout + proc.stderr).splitlines()
    assert len(lines) <= 40, "\n".join(lines)
    progress = [ln for ln in lines if ln.startswith("update ")]
    assert len(progress) >= 20 and "ETA" in progress[0] and "SPS" in progress[0]
    assert any(ln.startswith("learning curve") for ln in lines)
    assert not [ln for ln in lines if "INFO" in ln or "WARNING" in ln or ln.startswith("I1")]
    assert os.path.exists(workdir / "metrics.jsonl")
