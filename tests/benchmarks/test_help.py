"""``--help`` of the benchmark commands: a description that is the docstring's whole summary
sentence, and help text for every option."""

from __future__ import annotations

import importlib
import re

import pytest

from runtime.process.arguments import doc_summary

OPTIONS = {
    "aggregate": ["RUN_DIR", "--out", "--last_fraction", "--reps", "--seed", "--key", "--label",
                  "--drop_extra_runs"],
    "ablate": ["--suite", "--seeds", "--out", "--budget_scale", "--cell_timeout_s", "--cells",
               "--no_progress"],
    "seeds": ["--config", "--seeds", "--out", "--variant", "--set", "--threshold", "--rerun"],
    "curves": ["RUN", "--run", "--out", "--title", "--target"],
    "cpu_isa": ["--config", "--isas", "--rounds", "--seeds", "--total_env_steps",
                "--timing_env_steps", "--threshold", "--out"],
}


def _help_text(name: str, capsys) -> str:
    module = importlib.import_module(f"benchmarks.{name}")
    with pytest.raises(SystemExit) as exited:
        module.parse_args(["--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def _sections(text: str) -> tuple[str, dict[str, str]]:
    """``(description, {option: its help})`` of an argparse help text (entries at indent 2,
    their help after two spaces or on the lines below)."""
    description, helps, current, in_options = [], {}, None, False
    for line in text.splitlines()[1:]:
        if re.match(r"^(positional arguments|options):$", line):
            in_options = True
        elif not in_options:
            if line and not line.startswith(" "):  # usage continues indented
                description.append(line)
        elif re.match(r"^  \S", line):
            invocation, _, rest = re.split(r"(\s{2,})", line.strip() + "  ", maxsplit=1)
            current = invocation.split()[0].rstrip(",")
            helps[current] = rest.strip()
        elif line.strip() and current is not None:
            helps[current] = f"{helps[current]} {line.strip()}".strip()
    return " ".join(" ".join(description).split()), helps


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_help_has_a_whole_description_and_help_for_every_option(name, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    description, helps = _sections(_help_text(name, capsys))
    module = importlib.import_module(f"benchmarks.{name}")
    assert description == doc_summary(module.__doc__)
    assert description.endswith("."), description
    assert set(OPTIONS[name]) <= set(helps), helps
    assert all(helps.values()), {k: v for k, v in helps.items() if not v}


def test_aggregate_description_is_not_cut():
    from benchmarks import aggregate

    assert doc_summary(aggregate.__doc__) == (
        "Atari results the way papers report them: human-normalised median, mean, IQM and "
        "optimality gap over games and runs, with stratified-bootstrap 95% intervals "
        "(rliable).")


# One bad flag per benchmark command (``OUT`` is replaced by a fresh directory): the
# command refuses it in one line naming the flag, exit 2, before any work
# (docs/design.md, "Exit codes").
BAD_FLAGS = [
    ("ablate", ["--suite=nope", "--out=OUT"], "--suite"),
    ("ablate", ["--suite=staleness", "--out=OUT", "--seeds=0"], "--seeds"),
    ("aggregate", ["--reps=0", "OUT"], "--reps"),
    ("anakin_throughput", ["--num_envs=0"], "--num_envs"),
    ("anakin_throughput", ["--env_id=NoSuchEnv-v0"], "--env_id"),
    ("breakout", ["--minutes=0"], "--minutes"),
    ("conv_forms", ["--forms=bogus"], "--forms"),
    ("cpu_isa", ["--rounds=0"], "--rounds"),
    ("curves", ["--run=no-label"], "--run"),
    ("env_steps", ["--env_id=NoSuchEnv-v0"], "--env_id"),
    ("envpool_xla", ["--modes=bogus"], "--modes"),
    ("gpu_check_table", ["table"], "--out"),
    ("impala_scale", ["--steps=0"], "--steps"),
    ("memory_check", ["0"], "num_envs"),
    ("minatar_breakout", ["--select=no-equals"], "--select"),
    ("pbt_study", ["--studies=bogus"], "--studies"),
    ("peer_ppo", ["--peer_dir=OUT/missing"], "--peer_dir"),
    ("peer_dqn", ["--peer_python=OUT/missing", "--peer_dir=OUT", "--out=OUT"], "--peer_python"),
    ("peer_pqn", ["--peer_python=OUT/missing", "--peer_dir=OUT", "--out=OUT"], "--peer_python"),
    ("sebulba_throughput", ["--splits=bogus"], "--splits"),
    ("sebulba_throughput", ["--num_envs=0"], "--num_envs"),
    ("sebulba_throughput", ["--env_id=NoSuchEnv-v5"], "--env_id"),
    ("seeds", ["--config=configs/cartpole_ppo.py", "--out=OUT", "--seeds=0"], "--seeds"),
]


def _commands() -> set[str]:
    """The benchmark modules with a ``main``."""
    import pathlib

    folder = pathlib.Path(__file__).parents[2] / "benchmarks"
    return {p.stem for p in folder.glob("*.py") if "\ndef main(" in p.read_text()}


def test_every_command_has_a_bad_flag_case():
    assert {name for name, _, _ in BAD_FLAGS} == _commands()


# The default tier runs sebulba_throughput's (its three kinds of bad value) and one of the
# one-line parser's plain refusals; the long tier runs every case (each a Python start).
DEFAULT_TIER = {("sebulba_throughput", "--splits"), ("sebulba_throughput", "--num_envs"),
                ("sebulba_throughput", "--env_id"), ("anakin_throughput", "--num_envs")}


@pytest.mark.parametrize("name,argv,flag", [
    pytest.param(n, a, f, marks=() if (n, f) in DEFAULT_TIER else pytest.mark.slow)
    for n, a, f in BAD_FLAGS], ids=[f"{n}{a[0].split('=')[0]}" for n, a, _ in BAD_FLAGS])
def test_bad_flag_is_one_line_exit_2(name, argv, flag, tmp_path):
    import time

    from tests.helpers import run_entry

    argv = [a.replace("OUT", str(tmp_path)) for a in argv]
    t0 = time.perf_counter()
    proc = run_entry(f"benchmarks.{name}", argv, timeout_s=60)
    seconds = time.perf_counter() - t0
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(lines) == 1 and flag in lines[0], proc.stderr[-2000:]
    assert seconds < 30, seconds
