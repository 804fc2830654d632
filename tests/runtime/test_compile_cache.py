"""JAX's persistent compilation cache (``compile_cache_dir``; docs/design.md, "Run directory"):
where it lives, its bound, and that a warm cache changes no result."""

from __future__ import annotations

import json
import os

import ml_collections
import pytest

from rlcore.errors import ConfigError
from runtime.config import xla_flags
from tests.helpers import read_metrics, reproducible_part, run_entry

LEARNER_PROGRAM = "jit_device_step-"  # Sebulba's learner step in the cache (its jitted function)


def _config(value: str) -> ml_collections.ConfigDict:
    return ml_collections.ConfigDict({"compile_cache_dir": value})


def _program(entry: str) -> str:
    """The program name of a cache entry ``<name>-<key>-cache``."""
    return entry.split("-", 1)[0]


def test_cache_directory_rules(monkeypatch, tmp_path):
    """``off`` turns it off; a given directory wins over the environment; empty reads
    ``$JAX_COMPILATION_CACHE_DIR``, else ``$XDG_CACHE_HOME``, else ``~/.cache``."""
    assert xla_flags.compile_cache_dir(_config("off")) is None
    assert xla_flags.compile_cache_dir(_config(" OFF ")) is None
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "/env/cache")
    assert xla_flags.compile_cache_dir(_config(str(tmp_path))) == str(tmp_path)
    assert xla_flags.compile_cache_dir(_config("")) == "/env/cache"
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert xla_flags.compile_cache_dir(_config("")) == "/xdg/podracer-rl/jax"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert xla_flags.compile_cache_dir(_config("")) == str(tmp_path / ".cache/podracer-rl/jax")
    assert xla_flags.compile_cache_dir(_config("~/c")) == str(tmp_path / "c")


def test_unusable_cache_directory(monkeypatch, tmp_path, capsys):
    """A cache directory that cannot be used: named by the field, a refusal naming it; from
    the environment or the default, one line and no cache (the run goes on)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match=rf"^compile_cache_dir: {blocker} is a file; give a "
                       r"writable directory, or off$"):
        xla_flags.usable_cache_dir(_config(str(blocker)))
    with pytest.raises(ConfigError, match=rf"^compile_cache_dir: {blocker / 'jax'} cannot be "
                       rf"a directory: {blocker} is a file;"):
        xla_flags.usable_cache_dir(_config(str(blocker / "jax")))
    said = (f"compile cache: {blocker} is a file; running without one "
            "(compile_cache_dir names another directory, off turns it off)")
    # An evaluation of a run whose saved config names it: said, not refused.
    assert xla_flags.usable_cache_dir(_config(str(blocker)), refuse=False) is None
    assert capsys.readouterr().err.splitlines() == [said]
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(blocker))
    assert xla_flags.usable_cache_dir(_config("")) is None
    assert capsys.readouterr().err.splitlines() == [said]
    fresh = tmp_path / "new" / "cache"  # a directory that can be made is made
    assert xla_flags.usable_cache_dir(_config(str(fresh))) == str(fresh) and fresh.is_dir()


def test_unusable_cache_directory_field_is_one_line_and_exit_2(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = run_entry("anakin.main", ["--config=configs/cartpole_ppo.py",
                                     f"--workdir={tmp_path / 'run'}",
                                     f"--config.compile_cache_dir={blocker}"])
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [
        f"config error: compile_cache_dir: {blocker} is a file; give a writable directory, "
        "or off"], proc.stderr


def test_tests_do_not_use_the_users_cache():
    """tests/conftest.py names a session directory of its own, which the default reads."""
    default = xla_flags.compile_cache_dir(_config(""))
    assert default == os.environ["PODRACER_TEST_JAX_CACHE"]


def test_trim_removes_least_recently_used_first(tmp_path):
    for i, name in enumerate(["old", "mid", "new"]):
        path = tmp_path / name
        path.write_bytes(b"x" * 100)
        os.utime(path, (1000 + i, 1000 + i))
    assert xla_flags.trim_cache(str(tmp_path), 250) == ["old"]
    assert xla_flags.trim_cache(str(tmp_path), 250) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mid", "new"]
    assert xla_flags.trim_cache(str(tmp_path / "missing"), 0) == []


@pytest.mark.slow  # 20-30 s (the default tier's 12 minutes)
def test_warm_cache_changes_no_result_and_compiles_less(tmp_path):
    """Two equal tiny Anakin runs on one fresh cache: the first writes the programs, the
    second loads them (its compile is shorter) and logs the same metrics, clock keys
    aside."""
    cache = tmp_path / "cache"

    def train(name: str) -> dict:
        workdir = tmp_path / name
        done = run_entry("anakin.main", [
            "--config=configs/cartpole_ppo.py", f"--workdir={workdir}",
            "--config.num_envs=8", "--config.num_steps=16", "--config.updates_per_call=5",
            "--config.log_every=5", "--config.total_env_steps=1280",
            f"--config.compile_cache_dir={cache}"])
        assert done.returncode == 0, done.stderr
        return json.loads((workdir / "timing.json").read_text())

    cold = train("cold")
    entries = sorted(os.listdir(cache))
    assert any(e.startswith("jit__device_call-") for e in entries), entries
    warm = train("warm")
    after = sorted(os.listdir(cache))
    assert set(entries) <= set(after)
    # A program whose compile is near ``CACHE_MIN_COMPILE_S`` may be written by one run and
    # not the other; what must not happen is a program cached cold getting a new key warm.
    assert not {_program(e) for e in after if e not in entries} & {_program(e) for e in entries}
    assert warm["compile_s"] < cold["compile_s"]
    assert (reproducible_part(read_metrics(str(tmp_path / "warm")))
            == reproducible_part(read_metrics(str(tmp_path / "cold"))))


def test_a_longer_run_or_an_extension_compiles_nothing_new(tmp_path):
    """The training call takes the run's length as an argument: a run of another
    ``total_env_steps`` on a warm cache, and the extension of a finished run, load the
    training call from the cache (no new ``_device_call`` entry) and say so."""
    cache = tmp_path / "cache"

    def train(name: str, total: int) -> list[str]:
        done = run_entry("anakin.main", [
            "--config=configs/cartpole_ppo.py", f"--workdir={tmp_path / name}",
            "--config.num_envs=8", "--config.num_steps=16", "--config.updates_per_call=5",
            "--config.log_every=5", f"--config.total_env_steps={total}",
            f"--config.compile_cache_dir={cache}"])
        assert done.returncode == 0, done.stderr
        return done.stderr.splitlines()

    first = train("a", 1280)
    calls = {e for e in os.listdir(cache) if e.startswith("jit__device_call-")}
    assert len(calls) == 1 and any(", after a compile of " in ln for ln in first), first
    for lines in (train("b", 2560), train("a", 1920)):  # a longer run; an extension
        assert any("after loading the compiled call from the compile cache in" in ln
                   for ln in lines), lines
        assert {e for e in os.listdir(cache) if e.startswith("jit__device_call-")} == calls


@pytest.mark.slow  # 20-30 s (the default tier's 12 minutes)
def test_sebulba_longer_run_or_extension_loads_its_learner_step(tmp_path):
    """Sebulba's learner step takes the run's length as an argument too: a longer run on a
    warm cache and the extension of a finished run load it (no new entry of its program)
    and say so in the first-call line."""
    cache = tmp_path / "cache"

    def train(name: str, total: int) -> list[str]:
        done = run_entry("sebulba.main", [
            "--config=configs/cartpole_ppo_sebulba.py", f"--workdir={tmp_path / name}",
            "--config.num_envs=8", "--config.num_steps=16", "--config.log_every=2",
            f"--config.total_env_steps={total}", f"--config.compile_cache_dir={cache}"])
        assert done.returncode == 0, done.stderr
        return done.stderr.splitlines()

    def learner_entries() -> set[str]:
        return {e for e in os.listdir(cache) if e.startswith(LEARNER_PROGRAM)}

    first = train("a", 512)
    entries = learner_entries()
    assert len(entries) == 1, sorted(os.listdir(cache))
    assert any("incl. compile)" in ln for ln in first), first
    for lines in (train("b", 1024), train("a", 768)):  # a longer run; an extension
        assert any("incl. loading its program from the compile cache)" in ln
                   for ln in lines), lines
        assert learner_entries() == entries
