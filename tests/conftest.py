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

import os
import warnings

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_force_host_platform_device_count=4").strip()

import jax

jax.config.update("jax_numpy_rank_promotion", "raise")
warnings.filterwarnings("error", category=DeprecationWarning, module=r"jax(\.|$)")
