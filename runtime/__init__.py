"""Everything around a run, apart from the RL math of ``rlcore``.

Config validation and derived sizes (``config``), the command-line driver (``entry``,
``cli``), the run directory (``rundir``: config.json, metrics, checkpoints), checkpoints
(``checkpoint``), metrics sinks (``metrics``), the multi-process runtime (``distributed``),
the memory estimate (``memory``), sweeps (``sweep``), the local launcher (``launch``) and the
offline evaluation driver with its statistics (``evaluation``). It imports ``rlcore`` and
nothing else of ours (tests/test_layout.py checks it).
"""
