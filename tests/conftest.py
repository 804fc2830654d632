"""Test-wide JAX settings (DESIGN.md, Style 4).

- ``jax_numpy_rank_promotion='raise'``: an implicit broadcast between arrays of different
  rank is an error, so a ``[T, B]`` vs ``[T]`` slip fails loudly instead of broadcasting.
- DeprecationWarnings raised from jax modules are errors. pytest's ``filterwarnings`` in
  pyproject.toml already does this inside tests; the filter here also covers code that runs
  at import and collection time.

XLA_FLAGS are deliberately not set here: tests that need several host devices start a
subprocess with ``--xla_force_host_platform_device_count`` in its environment.
"""

import warnings

import jax

jax.config.update("jax_numpy_rank_promotion", "raise")
warnings.filterwarnings("error", category=DeprecationWarning, module=r"jax(\.|$)")
