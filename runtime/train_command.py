"""What the training entry points (``anakin.main``, ``sebulba.main``) run once their flags
are parsed (``runtime.train_flags``): validation first, then training and a summary.

The exit codes are ``runtime.exits``' (shared with the evaluate commands): 0 done, 1
runtime failure (one summary line, the traceback and what the libraries said in
``<workdir>/errors.log``: ``runtime.failure``; a checkpoint that cannot be resumed from is
one ``checkpoint: ...`` line), 2 bad config (one ``config error: ...`` line naming the
field; a ``--config`` file or ``--workdir`` that cannot be used is one line naming the
path), 130/143 after SIGINT/SIGTERM (the trainer checkpoints first).
"""

from __future__ import annotations

import os

from rlcore.errors import ConfigError
from runtime import distributed, exits, failure, memory, signals, workdir_lock
from runtime.config import ModeChecks, validate, validate_distributed
from runtime.run_summary import next_steps_line, print_summary, whole_run
from runtime.workdir import check_workdir, start_fresh

# How a training command reports its errors (any other is a traceback and exit 1).
TRAIN_ERRORS = (
    exits.OneLine((ConfigError,), "config error", exits.EXIT_BAD_INPUT),
    # Checkpoints exist, none restores (``runtime.checkpoint`` imports orbax: it loads only
    # once the config is validated, so the class is named, not imported, here).
    exits.OneLine(("runtime.checkpoint.CheckpointError",), "checkpoint", exits.EXIT_FAILURE),
    # A rerun of a finished run: nothing to do, said in one line.
    exits.OneLine(("runtime.resume.RunComplete",), "done", exits.EXIT_OK),
)


def prepare(config, mode: ModeChecks) -> None:
    """Checks the process fields, joins the multi-process runtime, then checks every other
    field for ``mode`` and that the run fits in memory (``runtime.memory``, on this
    runtime's devices and host): all before anything compiles.

    Raises:
      ConfigError: ``"field: what is wrong"``.
    """
    validate_distributed(config)
    distributed.initialize(config)
    counts = distributed.device_counts()
    shards = validate(config, mode, counts)
    memory.check_run(config, mode, counts, shards)


def run_main(config, workdir, mode: ModeChecks, train, *, fresh: bool = False) -> None:
    """Runs ``prepare(config, mode)``, checks ``workdir`` and takes its lock (process 0;
    ``runtime.workdir_lock``), then (after moving the previous run aside when ``fresh``)
    ``train(config, workdir)`` and prints the summary of the whole run; exits with the
    code of the outcome (``runtime.exits.run_command``, ``TRAIN_ERRORS``)."""

    def body():
        handlers, installed = signals.start()  # a signal from here on exits within seconds
        try:
            _run(config, workdir, mode, train, fresh)
        finally:
            if installed:
                signals.finish(handlers)

    exits.run_command(body, TRAIN_ERRORS, details=details_file(config, workdir))


def details_file(config, workdir: str | None) -> failure.Details:
    """Where this process's tracebacks and library output go (``runtime.failure``):
    ``<workdir>/errors.log`` (``errors-p<k>.log`` for process k), without a workdir a file
    in the temporary directory."""
    name = failure.details_name(int(config.get("process_id", 0) or 0))
    return failure.Details(os.path.join(workdir, name) if workdir else None)


def _run(config, workdir, mode: ModeChecks, train, fresh: bool) -> None:
    """``run_main``'s work, under its signal handlers."""
    prepare(config, mode)
    check_workdir(workdir)
    if workdir and distributed.is_main_process():
        workdir_lock.hold(workdir)  # one run per workdir, before --fresh moves anything
    if fresh:
        start_fresh(workdir)
    rows = train(config, workdir)
    if distributed.is_main_process():  # one console for the run: process 0's
        print_summary(whole_run(workdir, rows))  # a resumed run's earlier lines too
        if workdir:
            print(next_steps_line(mode.name, workdir))
