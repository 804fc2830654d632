"""Messages and help of the entry points: an unknown ``--config.<field>`` is one line naming
the field as written and its closest fields (exit 2, before anything compiles); ``--help``
of the training and evaluate commands lists their own flags, each with its help."""

from __future__ import annotations

import re

import ml_collections
import pytest

from runtime.config.problems import unknown_field
from tests.helpers import run_entry

CONFIG = "--config=configs/cartpole_ppo.py"


def _config() -> ml_collections.ConfigDict:
    return ml_collections.ConfigDict(dict(
        learning_rate=2.5e-4, seed=0, num_seeds=1, num_envs=8, num_steps=16,
        debug=dict(actor_jitter_ms=0, nan_at_update=-1),
        **{f"field_{i}": i for i in range(10)}))


@pytest.mark.parametrize("path, line", [
    ("lerning_rate", "lerning_rate: no such config field (did you mean learning_rate?)"),
    ("LEARNING_RATE", "LEARNING_RATE: no such config field (did you mean learning_rate?)"),
    ("num_env", "num_env: no such config field (did you mean num_envs, num_steps or "
                "num_seeds?)"),
    ("debug.actor_jiter_ms",
     "debug.actor_jiter_ms: no such config field (did you mean debug.actor_jitter_ms?)"),
    ("debug.nope", "debug.nope: no such config field (debug has actor_jitter_ms and "
                   "nan_at_update)"),
    ("nope.deeper", "nope: no such config field (no close match among the 16 fields of the "
                    "config)"),
    ("learning_rate.x", "learning_rate.x: no such config field (learning_rate is a float, not "
                        "a group of fields)"),
])
def test_unknown_field_names_it_and_its_closest_fields(path, line):
    assert unknown_field(_config(), path) == line


@pytest.mark.parametrize("path", ["learning_rate", "debug.nan_at_update", "debug", "seed[0]"])
def test_a_known_field_is_not_unknown(path):
    assert unknown_field(_config(), path) is None


@pytest.mark.parametrize("config", [[CONFIG], []], ids=["config_given", "default_config"])
@pytest.mark.parametrize("override, line", [
    ("--config.lerning_rate=1e-3",
     "config error: lerning_rate: no such config field (did you mean learning_rate?)"),
    ("--config.debug.actor_jiter_ms=5", "config error: debug.actor_jiter_ms: no such config "
                                         "field (did you mean debug.actor_jitter_ms?)"),
])
def test_unknown_override_exits_2_with_one_line(override, line, config, tmp_path):
    workdir = tmp_path / "run"
    proc = run_entry("anakin.main", [*config, override, f"--workdir={workdir}"], timeout_s=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [line]
    assert not workdir.exists()  # refused before the run began


def _flag_helps(text: str) -> dict[str, str]:
    """``{flag: its help}`` of an absl ``--help`` text (``  --name: help`` lines)."""
    found = re.findall(r"^  --(?:\[no\])?(\w+): (.*)$", text, flags=re.MULTILINE)
    return {name: help_.strip() for name, help_ in found}


@pytest.mark.parametrize("module, names", [
    ("anakin.main", ["config", "workdir", "fresh"]),
    ("sebulba.main", ["config", "workdir", "fresh"]),
    ("anakin.evaluate", ["workdir", "episodes", "greedy", "video", "agent", "max_episode_steps"]),
    ("sebulba.evaluate", ["workdir", "episodes", "greedy", "video", "agent",
                          "max_episode_steps"]),
])
def test_help_lists_the_commands_own_flags(module, names):
    proc = run_entry(module, ["--help"], timeout_s=60)  # exit 0 (absl's own would be 1)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "Traceback" not in proc.stdout
    helps = _flag_helps(proc.stdout)
    assert sorted(helps) == sorted(names), proc.stdout
    assert all(len(h) > 10 for h in helps.values()), helps
