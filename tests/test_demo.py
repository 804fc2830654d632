"""``make demo`` is for people: a progress line per log step and a summary, at most 40 lines
after the install step, and no library chatter."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers import REPO, entry_env


def test_make_demo_is_short_and_quiet(tmp_path):
    # -o: take the venv stamp as up to date (the install step is not what is measured);
    # PY: this interpreter, whatever venv runs the tests.
    proc = subprocess.run(
        ["make", "--no-print-directory", "-o", ".venv/.installed", "demo",
         f"PY={sys.executable}", f"DEMO_DIR={tmp_path / 'demo'}"],
        cwd=REPO, env=entry_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = (proc.stdout + proc.stderr).splitlines()
    assert len(lines) <= 40, "\n".join(lines)
    progress = [ln for ln in lines if ln.startswith("update ")]
    assert len(progress) >= 20 and "ETA" in progress[0] and "SPS" in progress[0]
    assert any(ln.startswith("learning curve") for ln in lines)
    assert not [ln for ln in lines if "INFO" in ln or "WARNING" in ln or ln.startswith("I1")]
    assert os.path.exists(tmp_path / "demo" / "metrics.jsonl")
