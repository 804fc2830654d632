"""``make test``'s progress lines (tests/progress.py): counts instead of dots, then the
summary."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import REPO


def test_progress_lines_replace_the_dots(tmp_path):
    (tmp_path / "test_some.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.parametrize('i', range(5))\n"
        "def test_passes(i):\n    pass\n\n"
        "def test_fails():\n    assert False\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.progress", "--progress-lines",
         "-o", "console_output_style=classic", "-p", "no:cacheprovider",
         str(tmp_path / "test_some.py")],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    lines = proc.stdout.splitlines()
    assert any(ln.startswith("progress:    6/6 tests (100%) | ") and
               ln.endswith("| 1 failed, 0 skipped") for ln in lines), proc.stdout
    assert not any(set(ln) == {"."} for ln in lines if ln)  # no line of dots
    assert "F" in proc.stdout and lines[-1].startswith("1 failed, 5 passed")
