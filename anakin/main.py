"""Anakin entry point: ``python -m anakin.main --config=configs/cartpole_ppo.py``.

Resumes from the newest good checkpoint in ``--workdir``; ``--fresh`` moves the previous run
aside (to ``previous-<time>/``) and starts over.
Exit codes: 0 done, 1 runtime failure, 2 bad config, 130/143 after a signal.
"""

from absl import app, flags
from ml_collections import config_flags

from runtime.entry import parse_flags, run_main

_CONFIG = config_flags.DEFINE_config_file("config", "configs/cartpole_ppo.py", "Config file.")
_WORKDIR = flags.DEFINE_string("workdir", "runs/anakin", "Run directory.")
_FRESH = flags.DEFINE_bool(
    "fresh", False, "Start over: move the previous run in --workdir aside (to "
    "previous-<time>/) instead of resuming from its checkpoint.")


def _main(argv):
    del argv
    from anakin.train import MODE, train

    return run_main(_CONFIG.value, _WORKDIR.value, MODE, train, fresh=_FRESH.value)


if __name__ == "__main__":
    app.run(_main, flags_parser=parse_flags)
