"""Throughput, ablation, learning-curve and seed benchmarks (docs/performance.md); each
module is a command, ``python -m benchmarks.curves`` and the rest."""

from rlcore import names

names.claim()  # our package names are ours in this process (docs/design.md, "Installed package")
