"""rlcore type-checks: pyright in basic mode over ``rlcore`` (``[tool.pyright]`` in
pyproject.toml), as ``make lint`` runs it, so that ``make test`` catches a type error too."""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_rlcore_passes_pyright():
    """No pyright error in rlcore, over at least every module of the package."""
    # No version check against the registry: the dev extra pins the checker.
    env = dict(os.environ, PYRIGHT_PYTHON_IGNORE_WARNINGS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pyright", "--outputjson", "--pythonpath", sys.executable],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
    assert proc.stdout.startswith("{"), proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    errors = [f"{d['file']}:{d['range']['start']['line'] + 1}: {d['message']}"
              for d in report["generalDiagnostics"] if d["severity"] == "error"]
    assert not errors, "\n".join(errors)
    modules = len(list((REPO / "rlcore").rglob("*.py")))
    assert report["summary"]["filesAnalyzed"] >= modules, report["summary"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
