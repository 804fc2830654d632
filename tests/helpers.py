"""Shared test helpers: run-directory comparison and small configs."""

from __future__ import annotations

import json
import os

import numpy as np

from runtime.commands.video import quiet_fork
from runtime.config.xla_flags import ISA_FLAG
from runtime.run.metrics import is_clock_key
from tests import fast_compile


def read_metrics(workdir: str) -> list[dict]:
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def reproducible_part(rows: list[dict]) -> list[dict]:
    """Rows without the keys that depend on the clock (``time``, ``sps``, ``wall``)."""
    return [{k: v for k, v in r.items() if not is_clock_key(k)} for r in rows]


def training_part(rows: list[dict]) -> list[dict]:
    """Rows without clock keys and without the evaluation keys (``eval/...``)."""
    return [{k: v for k, v in r.items() if not k.startswith("eval/")}
            for r in reproducible_part(rows)]


def best_return(rows: list[dict]) -> float:
    returns = [r["episode_return"] for r in rows if r["episode_return"] is not None]
    return max(returns) if returns else float("-inf")


def assert_rows_close(rows_a: list[dict], rows_b: list[dict], tol: float = 1e-4) -> None:
    """Same updates, losses equal to ``tol``, episode returns equal (or both absent)."""
    import numpy as np
    import pytest

    assert [r["update"] for r in rows_a] == [r["update"] for r in rows_b]
    for ra, rb in zip(rows_a, rows_b):
        for key in ra:
            if key.startswith("loss/"):
                np.testing.assert_allclose(ra[key], rb[key], rtol=tol, atol=tol, err_msg=key)
        if ra["episode_return"] is None:
            assert rb["episode_return"] is None
        else:
            assert rb["episode_return"] == pytest.approx(ra["episode_return"], rel=1e-5)


def assert_floats_close(rows: list[dict], expected: list[dict]) -> None:
    """Row for row, every float of ``expected`` (clock keys aside) equal in ``rows`` to
    1e-5 relative, 1e-7 absolute: an agent of a batched program against its single run."""
    import numpy as np

    for a, b in zip(expected, rows, strict=True):
        for key, value in a.items():
            if not is_clock_key(key) and isinstance(value, float):
                np.testing.assert_allclose(b[key], value, rtol=1e-5, atol=1e-7, err_msg=key)


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def xla_flags(*flags: str) -> str:
    """``XLA_FLAGS`` for a test's subprocess: the test session's instruction-set cap
    (``ISA_FLAG``, so that ``XLA_FLAGS=--xla_cpu_max_isa=AVX make test`` runs every process
    under it; a cap in ``flags`` wins), ``flags`` and this test's fast-compile flag
    (tests/fast_compile.py; none in an ``optimized`` test)."""
    session = os.environ.get("XLA_FLAGS", "").split()
    isa = [f for f in session if f.startswith(f"{ISA_FLAG}=")]
    fast = [f for f in session if f == fast_compile.XLA_FLAG]
    return " ".join((*isa, *flags, *fast))


def entry_env(optimized: bool = False) -> dict:
    """Environment for an entry-point subprocess: CPU, one device (no fake-device flag), this
    test's compile settings, or XLA's defaults where ``optimized`` (tests/fast_compile.py)."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=xla_flags())
    if optimized:
        env.update(fast_compile.xla_defaults(env))
    if not env["XLA_FLAGS"]:
        env.pop("XLA_FLAGS")
    return env


def sigterm_after_first_log(module: str, args: list[str], timeout_s: float = 120) -> int:
    """Starts ``python -m module *args``, sends SIGTERM once it printed its first progress
    line, and returns its exit code."""
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-m", module, *args], cwd=REPO, env=entry_env(),
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + timeout_s
    try:
        for line in proc.stderr:
            if line.startswith("update ") or time.time() > deadline:
                break
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=60)
    finally:
        proc.kill()


def kill_when(command: list[str], ready, timeout_s: float = 240) -> None:
    """Starts ``command`` (an entry point, from the repository, output dropped) and kills it
    with -9 as soon as ``ready()`` holds; fails if it ends first or takes ``timeout_s``."""
    import subprocess
    import time

    proc = subprocess.Popen(command, cwd=REPO, env=entry_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout_s
    try:
        while not ready():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        proc.kill()
        proc.wait()


def set_path(config, field: str, value) -> None:
    """Sets the config field of dotted name ``field`` (``algo.NAME``, ``sweep.algo.NAME``)."""
    *parents, leaf = field.split(".")
    node = config
    for name in parents:
        node = node[name]
    node[leaf] = value


def kill_and_resume(module: str, command, tmp_path, updates: int, lines: int = 7,
                    inspect=None) -> None:
    """Runs ``command(workdir, delay_ms)`` (a training command of ``updates`` updates, a log
    line and a checkpoint every 2) with each update held 300 ms, kills it with -9 once
    ``metrics.jsonl`` has ``lines`` lines and reruns it to the end; asserts that the rerun
    resumed from the newest checkpoint and logged, update for update, what a reference run
    logs: an uninterrupted one (Anakin), or a second resume of a copy of the killed run
    directory (Sebulba, which re-seeds its envs on a resume; docs/design.md, "Pipelines and
    staleness"). ``inspect(killed_dir, newest_checkpoint)`` looks at the killed run before
    it resumes."""
    import shutil
    import subprocess

    killed = tmp_path / "killed"
    kill_when(command(killed, 300), lambda: os.path.exists(killed / "metrics.jsonl")
              and len((killed / "metrics.jsonl").read_text().splitlines()) >= lines)
    newest = checkpoint_steps(killed)[-1]
    assert 2 <= newest < updates
    if inspect is not None:
        inspect(killed, newest)
    other = tmp_path / ("whole" if module == "anakin.main" else "copy")
    if module == "sebulba.main":
        shutil.copytree(killed, other)
    done = [subprocess.run(command(workdir, 0), cwd=REPO, env=entry_env(),
                           capture_output=True, text=True, timeout=300)
            for workdir in (killed, other)]
    assert [d.returncode for d in done] == [0, 0], done[0].stderr + done[1].stderr
    assert f"resuming from update {newest}" in done[0].stderr
    resumed = {r["update"]: r for r in reproducible_part(read_metrics(killed))}
    reference = reproducible_part(read_metrics(other))
    assert [r["update"] for r in reference] == list(range(1, updates + 1))
    assert [resumed[r["update"]] for r in reference] == reference


def lock_holder(workdir, run: str = ""):
    """A process that takes the lock of ``workdir`` (``runtime.run.lock.hold(workdir,
    run)``) and sleeps; returned (a ``Popen``) once it holds it. The caller kills it."""
    import subprocess
    import sys

    hold = ("import sys, time; from runtime.run import lock; "
            "lock.hold(sys.argv[1], sys.argv[2]); print('held', flush=True); "
            "time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", hold, str(workdir), run], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def checkpoint_steps(workdir) -> list[int]:
    return sorted(int(d) for d in os.listdir(os.path.join(workdir, "checkpoints"))
                  if d.isdigit())


def run_entry(module: str, args: list[str], timeout_s: float = 300, env: dict | None = None):
    """``python -m module *args`` to completion (``env``: default ``entry_env()``); returns
    the CompletedProcess (text)."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO,
                          env=entry_env() if env is None else env,
                          capture_output=True, text=True, timeout=timeout_s)


def config_error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("config error:")]


class _EnoughBatches(Exception):
    pass


def sebulba_batches(config, updates: int) -> dict:
    """``{update: batch as numpy}`` of the first ``updates`` updates of a Sebulba training
    run of ``config`` (through ``train``'s ``on_batch`` hook), which stops there (the run's
    later updates do not change these batches)."""
    import jax
    import numpy as np

    from sebulba.train import train

    seen = {}

    def on_batch(update, batch):
        seen[update] = jax.tree.map(np.asarray, batch)
        if len(seen) == updates:
            raise _EnoughBatches

    try:
        train(config, None, on_batch=on_batch)
    except _EnoughBatches:
        pass
    assert sorted(seen) == list(range(updates)), sorted(seen)
    return seen


def read_video(path: str) -> np.ndarray:
    """Decodes an mp4 or gif (e.g. one ``write_video`` wrote): uint8 ``[N, H, W, 3]``."""
    import imageio.v2 as iio2
    import imageio.v3 as iio3

    if os.path.splitext(path)[1].lower() == ".gif":
        return np.asarray(iio3.imread(path, index=None))[..., :3]
    with quiet_fork():
        with iio2.get_reader(path, format="FFMPEG") as reader:
            return np.stack([frame for frame in reader.iter_data()])


def cell_config(cell):
    """The config an ablation cell (``benchmarks.ablate_suites.Cell``) runs: its config file
    with its overrides."""
    import importlib

    c = importlib.import_module(f"configs.{cell.config[:-3]}").get_config()
    c.update_from_flattened_dict(dict(cell.overrides))
    return c


def assert_refused_before_running(main, argv: list[str], flag: str, out, capsys,
                                  monkeypatch) -> None:
    """``main(argv)`` (a benchmark command's) exits 2 with one ``config error: <flag>:`` line
    on stderr, nothing on stdout, no subprocess started and no ``out`` directory made."""
    import subprocess

    import pytest

    ran = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: ran.append(a))
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"config error: {flag}:"), err
    assert captured.out == "" and ran == [] and not out.exists()
