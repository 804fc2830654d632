"""Test-wide JAX settings (DESIGN.md, Style 4).

- ``jax_numpy_rank_promotion='raise'``: an implicit broadcast between arrays of different
  rank is an error, so a ``[T, B]`` vs ``[T]`` slip fails loudly instead of broadcasting.
- DeprecationWarnings raised from jax modules are errors. pytest's ``filterwarnings`` in
  pyproject.toml already does this inside tests; the filter here also covers code that runs
  at import and collection time.

- The test session runs on 4 fake CPU devices (``--xla_force_host_platform_device_count=4``,
  set here before JAX starts), so one-device-versus-four tests and Sebulba's actor/learner
  splits run in-process; a test that wants one device builds a mesh of ``jax.devices()[:1]``.
  Tests that start a subprocess (multi-process, entry points) set their own environment.
"""

import atexit
import os
import shutil
import tempfile
import warnings

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_force_host_platform_device_count=4").strip()

import jax

jax.config.update("jax_numpy_rank_promotion", "raise")
warnings.filterwarnings("error", category=DeprecationWarning, module=r"jax(\.|$)")

# One persistent compilation cache for the session (a fresh directory each session): the
# many tests that train the same program with another seed or another device split of the
# same shapes compile it once. Subprocesses started by tests inherit it through the env.
_CACHE_DIR = tempfile.mkdtemp(prefix="podracer-jax-cache-")
os.environ["JAX_COMPILATION_CACHE_DIR"] = _CACHE_DIR
os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
jax.config.update("jax_compilation_cache_dir", _CACHE_DIR)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)


# --- runs shared by several test files -----------------------------------------------------
# Each is trained once per session: the first test that asks for it pays, the others read it.
# Nothing may write into a shared run's workdir. (How new tests share: WORKSPACE-notes.md.)


@pytest.fixture(scope="session")
def cartpole_ppo_demo_run(tmp_path_factory):
    """``make demo``: configs/cartpole_ppo.py unchanged, its whole budget (500k env steps, one
    CPU device) through the command line. ``proc`` (the finished ``make``, exit 0), ``workdir``
    (checkpoints, config.json, metrics.jsonl) and ``rows`` (metrics.jsonl). test_demo.py
    checks its console, the Anakin PPO threshold test its rows, the evaluate tests evaluate
    its final checkpoint: the one config trained once instead of three times."""
    import subprocess
    import sys
    from types import SimpleNamespace

    from tests.helpers import REPO, entry_env, read_metrics

    workdir = tmp_path_factory.mktemp("cartpole_ppo_demo") / "demo"
    # -o: take the venv stamp as up to date (the install step is not what is measured);
    # PY: this interpreter, whatever venv runs the tests.
    proc = subprocess.run(
        ["make", "--no-print-directory", "-o", ".venv/.installed", "demo",
         f"PY={sys.executable}", f"DEMO_DIR={workdir}"],
        cwd=REPO, env=entry_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return SimpleNamespace(proc=proc, workdir=workdir, rows=read_metrics(str(workdir)))
