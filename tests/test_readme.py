"""The README's Quickstart runs as written after ``make demo``: its ``python -m ...`` lines,
each through the interpreter a user gets from the block's own first line (``source
.venv/bin/activate``, the venv every ``make`` target creates), exit 0.

Where the checkout has no ``.venv`` (a test run from another venv) the lines run through
``sys.executable`` instead. Each line gets overrides appended, which win over its own
values, to take seconds: a small ``total_env_steps``, few episodes, and its ``--workdir``
and ``--video`` under the test's temporary directory (the evaluate line reads the run the
train line made). The default tier runs the first train and evaluate lines; the long tier
(``slow``) every line.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from tests.helpers import REPO, entry_env

VENV_ACTIVATE = ".venv/bin/activate"
ACTIVATE_LINE = f"source {VENV_ACTIVATE}"

# Appended to a line of each module: seconds instead of minutes.
OVERRIDES = {
    "anakin.main": ["--config.total_env_steps=2048", "--config.log_every=2"],
    "sebulba.main": ["--config.total_env_steps=1536", "--config.log_every=1"],
    "anakin.evaluate": ["--episodes=2"],
    "sebulba.evaluate": ["--episodes=2"],
}
PATH_FLAGS = ("--workdir", "--video")  # rebased under the test's directory


def quickstart_block() -> list[str]:
    """The lines of the first fenced block under README.md's ``## Quickstart``."""
    with open(os.path.join(REPO, "README.md")) as f:
        text = f.read()
    section = text.split("\n## Quickstart\n", 1)[1]
    block = re.search(r"```[^\n]*\n(.*?)```", section, re.DOTALL)
    assert block is not None, "README.md's Quickstart has no code block"
    return [ln.strip() for ln in block.group(1).splitlines() if ln.strip()]


def commands() -> list[list[str]]:
    """The ``python -m ...`` lines of the Quickstart block, split as a shell would."""
    return [shlex.split(ln) for ln in quickstart_block() if ln.startswith("python -m ")]


def with_overrides(argv: list[str], tmp: str) -> list[str]:
    """``argv`` (``python -m MODULE ...``) with ``OVERRIDES[MODULE]`` and its path flags
    rebased under ``tmp`` appended (absl takes a flag's last value)."""
    module = argv[2]
    assert module in OVERRIDES, f"README runs {module}: give it OVERRIDES in {__file__}"
    rebased = []
    for arg in argv[3:]:
        name, _, value = arg.partition("=")
        if name in PATH_FLAGS and value and not os.path.isabs(value):
            rebased.append(f"{name}={os.path.join(tmp, value)}")
    return [*argv, *OVERRIDES[module], *rebased]


def shell_line(argv: list[str]) -> str:
    """The line for ``bash -c``: after ``source .venv/bin/activate`` where the checkout has
    the venv (``python`` is then the venv's), else with ``sys.executable`` for ``python``."""
    if os.path.isfile(os.path.join(REPO, VENV_ACTIVATE)):
        return f"{ACTIVATE_LINE} && {shlex.join(argv)}"
    return shlex.join([sys.executable, *argv[1:]])


def test_quickstart_activates_the_venv_first():
    """The block starts with the line that puts the venv's ``python`` first on PATH, and
    every other line is a comment or a ``python -m`` command."""
    lines = quickstart_block()
    assert lines[0] == ACTIVATE_LINE, lines[0]
    assert all(ln.startswith(("#", "python -m ")) for ln in lines[1:]), lines
    assert [argv[2] for argv in commands()][:2] == ["anakin.main", "anakin.evaluate"]


@pytest.mark.parametrize("count", [2, pytest.param(None, marks=pytest.mark.slow)],
                         ids=["train_and_evaluate", "every_line"])
def test_quickstart_commands_run_as_written(count, tmp_path):
    """Each ``python -m`` line of the Quickstart (the first ``count``; None: all), in order,
    with ``OVERRIDES``: exit 0."""
    for argv in commands()[:count]:
        line = shell_line(with_overrides(argv, str(tmp_path)))
        proc = subprocess.run(["bash", "-c", line], cwd=REPO, env=entry_env(),
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{line}\n{proc.stderr[-3000:]}"
