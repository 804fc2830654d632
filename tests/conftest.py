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
