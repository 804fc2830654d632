"""Paths are input too: through ``python -m anakin.main`` (and ``sebulba.main``), a workdir
that cannot be a directory and a missing ``--config`` file are one line naming the path,
exit 2; a damaged latest checkpoint is one line, and the run resumes from the previous one;
``--fresh`` moves the previous run aside and trains from update 0."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys

import jax.numpy as jnp
import pytest

from configs import base
from rlcore.errors import ConfigError
from rlcore.types import EpisodeSummary
from runtime.commands import train
from runtime.config.problems import config_file_problem
from runtime.config.xla_flags import THREADS_VARIABLE, apply_xla_cpu_flags, cpu_threads_for
from runtime.run import lock as workdir_lock
from runtime.run.directory import RunDir
from runtime.run.workdir import check_workdir, set_aside_previous_run
from tests.helpers import (
    checkpoint_steps,
    config_error_lines,
    entry_env,
    read_metrics,
    reproducible_part,
    run_entry,
)

CONFIG = "--config=configs/cartpole_ppo.py"
# 8 envs x 16 steps a update; a log line and a checkpoint every 2 updates.
TINY = ["--config.num_envs=8", "--config.num_steps=16", "--config.log_every=2",
        "--config.checkpoint_every=2", "--config.updates_per_call=2"]


def _steps(updates: int) -> str:
    return f"--config.total_env_steps={8 * 16 * updates}"


def _one_line(proc, prefix: str) -> str:
    """The only stderr line starting with ``prefix``; no traceback anywhere."""
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith(prefix)]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


# ---------------------------------------------------------------------- bad paths, exit 2


@pytest.mark.parametrize("module", ["anakin.main", "sebulba.main"])
def test_workdir_behind_a_file_exits_2_with_one_line(tmp_path, module):
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    workdir = blocker / "run"
    config = CONFIG if module == "anakin.main" else "--config=configs/cartpole_ppo_sebulba.py"
    proc = run_entry(module, [config, "--fresh", f"--workdir={workdir}"], timeout_s=60)
    assert proc.returncode == 2, proc.stderr
    lines = config_error_lines(proc.stderr)
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"config error: --workdir: {workdir} ")
    assert f"{blocker} is a file" in lines[0]


@pytest.mark.parametrize("overrides", [[], ["--config.seed=3"]], ids=["plain", "override"])
def test_missing_config_file_exits_2_naming_it(tmp_path, overrides):
    proc = run_entry("anakin.main", ["--config=configs/no_such_config.py", *overrides,
                                     f"--workdir={tmp_path}"], timeout_s=60)
    assert proc.returncode == 2, proc.stderr
    lines = config_error_lines(proc.stderr)
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("config error: --config: configs/no_such_config.py does not "
                               "exist")
    assert "--config=configs/cartpole_ppo.py" in lines[0]  # what to do
    assert not os.listdir(tmp_path)


def test_check_workdir(tmp_path):
    check_workdir(str(tmp_path / "new" / "run"))  # creatable: created
    assert (tmp_path / "new" / "run").is_dir()
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match=r"^--workdir: .*/file cannot be a directory: .*/file "
                                          r"is a file; pass a --workdir"):
        check_workdir(str(tmp_path / "file"))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "checkpoints").write_text("")
    with pytest.raises(ConfigError, match=r"^--workdir: .*/run/checkpoints is a file"):
        check_workdir(str(tmp_path / "run"))
    check_workdir(None)  # no run directory: nothing to check


def test_config_file_problem(tmp_path):
    assert "is not a file" in config_file_problem(str(tmp_path))
    assert config_file_problem("configs/cartpole_ppo.py") is None


# ------------------------------------------------------------- damaged checkpoint, fresh


def _damage(workdir, step: int) -> str:
    """Truncates the array data files of checkpoint ``step``; returns its path."""
    step_dir = os.path.join(workdir, "checkpoints", str(step))
    for d, _, files in os.walk(step_dir):
        if os.path.basename(d) == "d":
            for f in files:
                os.truncate(os.path.join(d, f), 0)
    return step_dir


@pytest.mark.slow  # 20-30 s (the default tier's 12 minutes)
def test_damaged_latest_checkpoint_resumes_from_the_previous(tmp_path):
    args = [CONFIG, *TINY, _steps(6), f"--workdir={tmp_path}"]
    first = run_entry("anakin.main", args, timeout_s=120)
    assert first.returncode == 0, first.stderr
    assert checkpoint_steps(tmp_path) == [2, 4, 6]
    reference = reproducible_part(read_metrics(tmp_path))
    damaged = _damage(tmp_path, 6)

    proc = run_entry("anakin.main", args, timeout_s=120)
    assert proc.returncode == 0, proc.stderr
    line = _one_line(proc, "checkpoint:")
    assert line.startswith(f"checkpoint: {damaged} is damaged (")
    assert line.endswith("; resuming from step 4 instead"), line
    assert "resuming from update 4" in proc.stderr
    assert checkpoint_steps(tmp_path) == [2, 4, 6]  # 6 saved anew
    assert (tmp_path / "checkpoints" / "damaged-6").is_dir()
    # Updates 5 and 6 trained again from the good step: the same metrics as before.
    assert reproducible_part(read_metrics(tmp_path)) == reference

    # None good: exit 1 with one line, all left in place, nothing trained.
    for step in (2, 4, 6):
        _damage(tmp_path, step)
    proc = run_entry("anakin.main", args, timeout_s=120)
    assert proc.returncode == 1, proc.stderr
    line = _one_line(proc, "checkpoint:")
    assert line.startswith(f"checkpoint: {damaged} is damaged (")
    assert "no older one restores either (tried 4, 2)" in line and "--fresh" in line
    assert checkpoint_steps(tmp_path) == [2, 4, 6]
    assert reproducible_part(read_metrics(tmp_path)) == reference


def _previous_run(workdir) -> None:
    """A finished run of another config in ``workdir``: checkpoints 2 and 4, metrics lines
    2 and 4 (a resume with the test's config would refuse it)."""
    config = base.get_config()
    config.log_every = config.checkpoint_every = 2
    rundir = RunDir(config, str(workdir), 4, 512)
    try:
        rundir.restore_or({"w": jnp.zeros(3)})
        for u in range(1, 5):
            rundir.record(u, {"loss/total": float(u)}, EpisodeSummary(0.0, 0.0, 0))
            rundir.checkpoint_or_exit(u, u - 1, {"w": jnp.full(3, float(u))}, None)
    finally:
        rundir.close()


def _tree(workdir) -> dict[str, bytes]:
    """``{relative path: content}`` of every file under ``workdir`` but the lock file."""
    out = {}
    for d, _, files in os.walk(workdir):
        for name in files:
            path = os.path.join(d, name)
            if os.path.relpath(path, workdir) != "run.lock":
                with open(path, "rb") as f:
                    out[os.path.relpath(path, workdir)] = f.read()
    return out


@pytest.mark.parametrize("overrides", [[], ["--config.learning_rate=-1"]],
                         ids=["changed_fields", "bad_value"])
def test_a_refused_resume_leaves_the_workdir_as_it_was(tmp_path, overrides):
    """A resume refused (a config whose fields differ from the run's, or a bad value): one
    line, exit 2, and every file of the workdir as it was, byte for byte (the lock file
    aside; no errors.log)."""
    _previous_run(tmp_path)
    before = _tree(tmp_path)
    proc = run_entry("anakin.main", [CONFIG, *TINY, _steps(6), f"--workdir={tmp_path}",
                                     *overrides], timeout_s=120)
    assert proc.returncode == 2, proc.stderr
    line = _one_line(proc, "config error:")
    assert (f"the checkpoint in {tmp_path} was made with " in line if not overrides
            else line.startswith("config error: learning_rate: must be >= 0")), line
    assert _tree(tmp_path) == before


def test_a_refused_resume_comes_before_the_trainer_loads(tmp_path):
    """The resume's config check, the shared fields and the lock need only the flags and
    the workdir's files: they refuse before the trainer's modules are imported."""
    _previous_run(tmp_path)
    config = base.get_config()
    config.num_envs = 8

    def trainer():
        raise AssertionError("the trainer loaded before the refusal")

    try:
        with pytest.raises(ConfigError, match=r"^num_envs: the checkpoint in .* was made with "
                           r"4, not 8; "):
            train._run(config, str(tmp_path), trainer, fresh=False)
    finally:
        workdir_lock.release(str(tmp_path))


def test_fresh_moves_the_previous_run_beside_and_starts_at_update_0(tmp_path):
    workdir = tmp_path / "demo"
    _previous_run(workdir)
    before = read_metrics(workdir)
    # The program of the test above (6 updates): compiled once per session.
    proc = run_entry("anakin.main", [CONFIG, *TINY, _steps(6), f"--workdir={workdir}",
                                     "--fresh"], timeout_s=120)
    assert proc.returncode == 0, proc.stderr
    line = _one_line(proc, "fresh start:")
    previous = [d for d in os.listdir(tmp_path) if d.startswith("demo.old-")]
    assert len(previous) == 1 and line.endswith(f"{tmp_path / previous[0]}/"), line
    assert not [d for d in os.listdir(workdir) if ".old-" in d]  # beside, not inside
    assert "resuming" not in proc.stderr
    assert [r["update"] for r in read_metrics(workdir)] == [2, 4, 6]
    assert read_metrics(workdir)[0]["env_steps"] == 256  # this run's, from update 0
    assert checkpoint_steps(workdir) == [2, 4, 6]
    # The previous run, kept whole.
    assert read_metrics(tmp_path / previous[0]) == before
    assert checkpoint_steps(tmp_path / previous[0]) == [2, 4]
    assert (tmp_path / previous[0] / "config.json").is_file()


def _written_run(workdir) -> None:
    """The files of a run in ``workdir``: a checkpoint folder, metrics and config."""
    os.makedirs(workdir / "checkpoints" / "2")
    (workdir / "metrics.jsonl").write_text('{"update": 2}\n')
    (workdir / "config.json").write_text("{}")


@pytest.mark.parametrize("name", [".", "./", "run/", "run/."])
def test_fresh_resolves_the_workdir_and_moves_beside_it(tmp_path, monkeypatch, name):
    """``--workdir=.`` (or a trailing slash) moves the run beside the workdir, not into a
    hidden folder inside it."""
    workdir = tmp_path / "run"
    _written_run(workdir)
    monkeypatch.chdir(workdir if name.startswith(".") else tmp_path)
    moved = set_aside_previous_run(name)
    assert os.path.dirname(moved) == str(tmp_path), moved
    assert os.path.basename(moved).startswith("run.old-")
    assert not [d for d in os.listdir(workdir) if ".old-" in d]
    assert (tmp_path / os.path.basename(moved) / "metrics.jsonl").is_file()


def test_fresh_across_file_systems_copies(tmp_path, monkeypatch):
    """A workdir that is its own mount point (renames out of it fail with EXDEV): the run
    is copied beside it, then removed from it."""
    workdir = tmp_path / "run"
    _written_run(workdir)
    rename = os.rename

    def no_cross_device(src, dst):
        if str(src).startswith(str(workdir) + os.sep):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return rename(src, dst)

    monkeypatch.setattr(os, "rename", no_cross_device)
    moved = set_aside_previous_run(str(workdir))
    assert sorted(os.listdir(moved)) == ["checkpoints", "config.json", "metrics.jsonl"]
    assert os.path.isdir(os.path.join(moved, "checkpoints", "2"))
    assert os.listdir(workdir) == []


def test_fresh_move_failure_is_one_line_and_removes_its_folder(tmp_path, monkeypatch):
    workdir = tmp_path / "run"
    _written_run(workdir)

    def full_disk(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "move", full_disk)
    with pytest.raises(ConfigError, match=r"^--fresh: could not move the previous run in .*run "
                       r"to .*run\.old-\S+ \(No space left on device\); move its files out by "
                       r"hand, or use a new --workdir$"):
        set_aside_previous_run(str(workdir))
    assert [d for d in os.listdir(tmp_path) if ".old-" in d] == []
    assert (workdir / "metrics.jsonl").is_file()


def test_xla_flags_of_the_config(monkeypatch):
    """The runtime flag fields go into XLA_FLAGS before JAX starts; a flag already there
    wins; ``deterministic`` adds XLA's deterministic GPU ops only when set."""
    config = base.get_config()
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    apply_xla_cpu_flags(config)
    assert os.environ["XLA_FLAGS"] == ("--xla_force_host_platform_device_count=2 "
                                       "--xla_cpu_multi_thread_eigen=true "
                                       "--xla_cpu_enable_concurrency_optimized_scheduler=true")
    config.xla_cpu_concurrency_scheduler = False  # as the Atari configs have it
    config.deterministic = True
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
    apply_xla_cpu_flags(config)
    assert os.environ["XLA_FLAGS"] == ("--xla_cpu_multi_thread_eigen=false "
                                       "--xla_cpu_enable_concurrency_optimized_scheduler=false "
                                       "--xla_gpu_deterministic_ops=true")


def test_cpu_threads_rule(monkeypatch):
    """``cpu_threads`` 0 (auto) gives one XLA CPU thread only to a small Anakin update on one
    device (at most 1024 env steps over all agents); a set value holds in every mode; a
    value validation refuses gives none (validation names it later)."""
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    config = base.get_config()
    config.update(num_envs=4, num_steps=128, num_devices=1)
    assert cpu_threads_for(config, "anakin") == 1
    assert cpu_threads_for(config, "sebulba") is None
    assert cpu_threads_for(config, None) is None
    config.num_envs = 8  # 1024 env steps: the bound
    assert cpu_threads_for(config, "anakin") == 1
    config.num_envs = 16
    assert cpu_threads_for(config, "anakin") is None
    config.update(num_envs=4, num_seeds=3)  # 3 agents: 1536 env steps per update
    assert cpu_threads_for(config, "anakin") is None
    config.update(num_seeds=1, num_devices=4)
    assert cpu_threads_for(config, "anakin") is None
    config.num_devices = 0  # every device: one without the fake-device flag, else its count
    assert cpu_threads_for(config, "anakin") == 1
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    assert cpu_threads_for(config, "anakin") is None
    config.cpu_threads = 3
    assert cpu_threads_for(config, "anakin") == cpu_threads_for(config, "sebulba") == 3
    config.cpu_threads = -1
    assert cpu_threads_for(config, "anakin") is None
    config.cpu_threads = 2
    monkeypatch.setenv(THREADS_VARIABLE, "5")  # set by the user: it wins
    apply_xla_cpu_flags(config, "anakin")
    assert os.environ[THREADS_VARIABLE] == "5"
    monkeypatch.delenv(THREADS_VARIABLE)
    apply_xla_cpu_flags(config, "anakin")
    assert os.environ[THREADS_VARIABLE] == "2"


# Parses a training command's flags as its ``python -m`` entry point does, starts JAX and
# prints PJRT_NPROC and the XLA CPU intra-op pool's thread count (threads "tf_XLAEigen").
_POOL_SCRIPT = """
import os, sys
import importlib
main = importlib.import_module(sys.argv[1] + ".main")
main.FLAGS.parse(["prog", *sys.argv[2:]])
import jax
jax.devices()
names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
print(os.environ.get("PJRT_NPROC"), names.count("tf_XLAEigen"))
"""


@pytest.mark.parametrize("module,args,expected", [
    ("anakin", [], "1 1"),  # cartpole_ppo: 4 envs x 128 steps on one device
    ("anakin", ["--config.num_envs=64"], "None {cores}"),
    ("sebulba", ["--config=configs/cartpole_ppo.py"], "None {cores}"),
    ("anakin", ["--config.cpu_threads=2"], "2 2"),
])
def test_cpu_threads_reach_xla(module, args, expected):
    """The command line's config sets the XLA CPU pool JAX starts with: one thread for the
    CartPole default in Anakin, one per core for a larger batch and in Sebulba."""
    env = entry_env()
    env.pop(THREADS_VARIABLE, None)
    proc = subprocess.run([sys.executable, "-c", _POOL_SCRIPT, module, *args], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cores = len(os.sched_getaffinity(0))
    assert proc.stdout.split("\n")[-2] == expected.format(cores=cores)


@pytest.mark.slow  # 15-25 s (the default tier's 12 minutes)
def test_deterministic_run_on_cpu_is_reproducible(tmp_path):
    """``--config.deterministic=True`` starts on CPU (XLA takes the GPU flag) and two runs
    of one seed log the same metrics."""
    args = ["--config=configs/cartpole_ppo.py", "--config.deterministic=True",
            "--config.total_env_steps=10240", "--config.log_every=5"]
    for name in ("a", "b"):
        proc = run_entry("anakin.main", [*args, f"--workdir={tmp_path / name}"])
        assert proc.returncode == 0, proc.stderr
    assert (reproducible_part(read_metrics(str(tmp_path / "a")))
            == reproducible_part(read_metrics(str(tmp_path / "b"))))
