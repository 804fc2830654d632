"""Sebulba entry point: ``python -m sebulba.main --config=configs/atari_ppo.py``.

Resumes from the newest good checkpoint in ``--workdir``; ``--fresh`` moves the previous run
beside the workdir (to ``<workdir>.old-<time>/``) and starts over.
Exit codes: 0 done, 1 runtime failure, 2 bad config, 130/143 after a signal.
"""

if __name__ == "__main__":  # from here on a signal ends the command with its one line
    from runtime.process import signals

    signals.start()

from absl import app, flags  # noqa: E402 - after the handlers: imports take seconds

import configs  # noqa: E402 - the shipped configs' file locator only
import sebulba  # noqa: E402 - its trainer, imported when called
from runtime.commands import train as train_command  # noqa: E402
from runtime.commands import train_flags

FLAGS = train_flags.define_flags(config="configs/atari_ppo.py", workdir="runs/sebulba",
                                 mode="sebulba", locate=configs.locate)
flags.adopt_module_key_flags(train_flags)  # absl's --help lists only the main's key flags


def _main(argv):
    del argv
    return train_command.run_main(FLAGS.config.value, FLAGS.workdir.value, sebulba.trainer,
                                  fresh=FLAGS.fresh.value)


if __name__ == "__main__":
    app.run(_main, flags_parser=FLAGS.parse)
