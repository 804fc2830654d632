"""Everything around a run, apart from the RL math of ``rlcore``.

Config validation and derived sizes (``config``), the one command-line driver of every
entry point (``command``: absl flag parsing and exit codes), the training commands
(``entry``), argparse commands (``cli``), the run directory (``rundir``: config.json,
metrics, checkpoints), checkpoints (``checkpoint``), metrics sinks (``metrics``), the
multi-process runtime (``distributed``), the memory estimate (``memory``), sweeps
(``sweep``), the local launcher (``launch``), the offline evaluation driver
(``evaluation``), its statistics and tables (``stats``) and its videos (``video``). It
imports ``rlcore`` and nothing else of ours (tests/test_layout.py checks it).
"""
