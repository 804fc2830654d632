"""One line per runtime failure (``runtime.process.failure``): the summary names what failed and
where, the traceback and library output go to a file, and nothing prints after the line.

Unit tests of the summary and the details file; then real training runs under faults: a
full disk (a 1 MiB tmpfs), a workdir made read-only mid-run (the tmpfs remounted), and a
damaged latest checkpoint resumed from ten times, each try its own process, with no line of
library traceback on the console in any of them. The tmpfs tests need root (mount).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from rlcore import names
from runtime.process import failure
from tests.helpers import REPO, checkpoint_steps, entry_env, run_entry
from tests.runtime.test_checkpoint_faults import _damage

# What a training run's console may hold (besides the one summary line of a failure).
PROGRESS = ("compiling the training call (", "still compiling (", "first call (",
            "first rollout after ", "update ", "resuming from update ", "learning curve", "  ",
            "best logged mean return", "final ", "library messages: ")


def test_summary_names_the_first_failure_its_work_and_our_frame(tmp_path):
    try:
        with failure.doing("saving checkpoint 3 in /w/checkpoints"):
            try:
                raise OSError(28, "No space left on device", "/w/checkpoints/3/d/x")
            except OSError:
                raise RuntimeError("handle is closed")  # noqa: B904 - a failure in handling
    except RuntimeError as e:
        line = failure.summary_line(e, str(tmp_path / "errors.log"))
    assert line.startswith("error: while saving checkpoint 3 in /w/checkpoints: "
                           "no space left on device: /w/checkpoints/3/d/x (OSError at "
                           "tests/runtime/test_failure.py:"), line
    assert line.endswith(f"; traceback in {tmp_path / 'errors.log'}") and "\n" not in line


def test_our_frame_is_found_where_the_package_is_installed(tmp_path, monkeypatch):
    """Installed, our packages sit in site-packages beside the libraries: the frame named is
    the innermost one of our packages (relative to site-packages), not a library's."""
    site_packages = tmp_path / "lib" / "site-packages"
    monkeypatch.setattr(failure, "REPO", str(site_packages))
    monkeypatch.setattr(names, "_library_dirs", lambda: (str(site_packages) + os.sep,))
    library = compile("def lib():\n    raise ValueError('bad')\n",
                      str(site_packages / "jax" / "core.py"), "exec")
    ours = compile("def run(lib):\n    lib()\n", str(site_packages / "runtime" / "x.py"),
                   "exec")
    scope: dict = {}
    exec(library, scope)
    exec(ours, scope)
    with pytest.raises(ValueError) as caught:
        scope["run"](scope["lib"])
    assert failure.where(caught.value) == "runtime/x.py:2 in run"


def test_os_problem_read_from_a_library_message():
    error = ValueError('RESOURCE_EXHAUSTED: Failed writing: "/w/c/5.tmp/d/ab": Failed to '
                       "write 7593 bytes to file 14: No space left on device [os_error_code=28]")
    assert failure.os_problem(error) == "no space left on device: /w/c/5.tmp/d/ab"
    assert failure.os_problem(ValueError("bad shape")) is None
    wrapped = RuntimeError("save failed")
    wrapped.__cause__ = OSError(30, "Read-only file system", "/w/metrics.jsonl")
    assert failure.os_problem(wrapped) == "read-only file system: /w/metrics.jsonl"


def test_long_messages_are_cut_and_newlines_escaped():
    line = failure.summary_line(ValueError("x" * 2000 + "\nsecond"), None)
    assert "\n" not in line and len(line) < failure.MESSAGE_CHARS + 200
    assert line.endswith("traceback above (no file could be written)")


def test_details_written_before_the_workdir_exists_move_into_it(tmp_path):
    """Library output before the workdir is made goes to the temporary directory, then
    into the workdir's file with the first write after it exists: one file, none left in
    the temporary directory."""
    path = tmp_path / "later" / "errors.log"
    details = failure.Details(str(path))
    first = details.write("one")
    assert first == details.fallback() and details.used == first
    os.makedirs(tmp_path / "later")
    assert details.write("two") == str(path)
    assert path.read_text() == "one\ntwo\n"
    assert not os.path.exists(first)
    # With nothing written after the workdir is made, ``settle`` moves it (the training
    # command calls it once its workdir exists).
    path = tmp_path / "quiet" / "errors.log"
    details = failure.Details(str(path))
    first = details.write("three")
    details.settle()  # the directory is still missing: nothing moves
    assert os.path.exists(first) and not path.exists()
    os.makedirs(tmp_path / "quiet")
    details.settle()
    assert path.read_text() == "three\n" and not os.path.exists(first)
    assert details.used == str(path)


def test_details_that_cannot_be_written_stay_in_the_fallback(tmp_path):
    """A file that cannot be written where its directory exists (here: a directory in the
    way): the fallback from then on, one file for the run's details, not two."""
    blocked = tmp_path / "errors.log"
    os.makedirs(blocked)
    details = failure.Details(str(blocked))
    first = details.write("one")
    assert first == details.fallback() and details.write("two") == first
    with open(first) as f:
        assert f.read() == "one\ntwo\n"
    os.remove(first)


def test_close_all_closes_every_one_then_raises_the_first():
    closed = []

    def fails(name):
        def close():
            closed.append(name)
            raise OSError(name)
        return close

    with pytest.raises(OSError, match="^a$"):
        failure.close_all(fails("a"), lambda: closed.append("b"), fails("c"))
    assert closed == ["a", "b", "c"]


def _train_args(workdir, **overrides) -> list[str]:
    settings = {"total_env_steps": 200_000, "checkpoint_every": 5, "log_every": 5,
                "updates_per_call": 5, **overrides}
    return ["--config=configs/cartpole_ppo.py", f"--workdir={workdir}",
            *(f"--config.{k}={v}" for k, v in settings.items())]


def _console_problems(stderr: str) -> list[str]:
    """The console lines that are neither progress nor a one-line report."""
    return [ln for ln in stderr.splitlines()
            if not ln.startswith(PROGRESS) and not ln.startswith(("checkpoint: ", "error: "))]


def _assert_one_failure_line(proc, *needles) -> str:
    """Exit 1, one ``error:`` line, the last one, holding every needle (case-insensitive),
    no other line but progress, and the file it names holds the traceback; returns that
    file."""
    lines = proc.stderr.splitlines()
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert proc.returncode == 1 and len(errors) == 1 and lines[-1] == errors[0], proc.stderr
    assert not _console_problems(proc.stderr) and "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle.lower() in errors[0].lower(), errors[0]
    path = errors[0].rsplit("; traceback in ", 1)[1]
    with open(path) as f:
        text = f.read()
    assert "Traceback (most recent call last)" in text and "runtime failure (exit 1)" in text
    return path


@contextlib.contextmanager
def _tmpfs(path, size: str):
    """A tmpfs of ``size`` mounted at ``path`` (skips the test where mounting is refused)."""
    os.makedirs(path, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or 'not root'})")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.mark.slow  # 15-25 s (the default tier's 12 minutes)
def test_full_disk_is_one_line_naming_the_path(tmp_path):
    with _tmpfs(tmp_path / "disk", "1m") as disk:
        workdir = disk / "run"
        proc = run_entry("anakin.main", _train_args(workdir))
        details = _assert_one_failure_line(proc, "no space left on device", str(workdir))
        assert "while saving checkpoint" in proc.stderr.splitlines()[-1]
    with open(details) as f:
        text = f.read()
    assert "No space left on device" in text
    # Where the checkpoint library's threads hit the full disk first (not our own write of
    # the step's files, which can fill it first), their reports went to the file, not the
    # console (which held only the one line).
    if "orbax" in text.split("Traceback")[-1]:
        assert "absl" in text
    os.remove(details)


def test_failed_sebulba_thread_is_one_line_naming_the_thread_code(tmp_path):
    proc = run_entry("sebulba.main", ["--config=configs/cartpole_ppo_sebulba.py",
                                      f"--workdir={tmp_path}", "--config.total_env_steps=20000",
                                      "--config.debug.fail_actor_at_update=3"])
    details = _assert_one_failure_line(proc, "a Sebulba thread failed",
                                       "actor failed at update 3", "at sebulba/actor.py:")
    assert details == str(tmp_path / "errors.log")


def test_workdir_made_read_only_mid_run_is_one_line(tmp_path):
    """The workdir turns read-only under the run (a read-only bind mount over it, as a
    network disk that went read-only: new files cannot be made; the files open stay)."""
    workdir, empty = tmp_path / "run", tmp_path / "empty"
    os.makedirs(empty)
    proc = subprocess.Popen([sys.executable, "-m", "anakin.main",
                             *_train_args(workdir, total_env_steps=5_000_000)],
                            cwd=REPO, env=entry_env(), stderr=subprocess.PIPE, text=True)
    lines, mounted = [], False
    try:
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("update 15/"):  # checkpoints 5, 10, 15 are on disk
                break
        # Read-only from the start (util-linux binds and remounts in one command): a rw
        # bind first would let the run fail into ``empty`` before the remount below.
        done = subprocess.run(["mount", "--bind", "-o", "ro", str(empty), str(workdir)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot bind-mount here ({done.stderr.strip() or 'not root'})")
        mounted = True
        # The remount fails with "mount point is busy" while the run has a file it made
        # there open for writing (an orbax save in flight): try again until it is closed.
        for _ in range(40):
            ro = subprocess.run(["mount", "-o", "remount,bind,ro", str(workdir)],
                                capture_output=True, text=True)
            if ro.returncode == 0 or "busy" not in ro.stderr:
                break
            time.sleep(0.25)
        assert ro.returncode == 0, ro.stderr
        lines += proc.stderr.readlines()
        proc.wait(timeout=120)
    finally:
        proc.kill()
        if mounted:
            subprocess.run(["umount", "-l", str(workdir)], capture_output=True)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, "", "".join(lines))
    # The mount hides the files of a save in flight (no such file) or refuses new ones.
    last = done.stderr.splitlines()[-1].lower()
    problem = ("read-only file system" if "read-only file system" in last
               else "no such file or directory")
    details = _assert_one_failure_line(done, problem, str(workdir), "while saving")
    assert not details.startswith(str(workdir))  # it could not go in the workdir
    assert checkpoint_steps(workdir)[-1] >= 10  # what was saved stays
    os.remove(details)


@pytest.mark.slow
def test_damaged_checkpoint_resumed_ten_times_without_library_tracebacks(tmp_path):
    base = tmp_path / "base"
    args = dict(total_env_steps=40 * 512, checkpoint_every=10, log_every=10)
    first = run_entry("anakin.main", _train_args(base, **args))
    assert first.returncode == 0, first.stderr
    assert checkpoint_steps(base) == [20, 30, 40]
    kinds = ["truncate", "overwrite", "metadata"]

    def attempt(i: int):
        workdir = tmp_path / f"try{i}"
        shutil.copytree(base, workdir)
        _damage(workdir / "checkpoints" / "40", kinds[i % 3])
        t = time.perf_counter()
        proc = run_entry("anakin.main", _train_args(workdir, **args))
        return i, proc, time.perf_counter() - t

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(attempt, range(10)))
    for i, proc, _ in results:
        assert proc.returncode == 0, (i, proc.stderr)
        assert not _console_problems(proc.stderr), (i, kinds[i % 3], proc.stderr)
        assert "Traceback" not in proc.stderr and "Exception" not in proc.stderr, proc.stderr
        moved = [ln for ln in proc.stderr.splitlines() if ln.startswith("checkpoint: ")]
        assert len(moved) == 1 and "resuming from step 30 instead" in moved[0], proc.stderr
