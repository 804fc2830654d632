"""What the training entry points (``anakin.main``, ``sebulba.main``) run once their flags
are parsed (``runtime.commands.train_flags``): validation first, then training and a summary.

What needs only the flags and the files of an existing ``--workdir`` is checked before the
trainer's modules load, JAX starts its backends or a checkpoint is restored, so that those
refusals come within seconds: the shared fields by their rules, the workdir lock (every
process of a multi-process run: process 0 takes it, the others check that no other run
holds it), and whether the run there may be resumed with this config
(``runtime.run.resume.check_files``). See docs/design.md, "Validation".

The exit codes are ``runtime.process.exits``' (shared with the evaluate commands): 0 done, 1
runtime failure (one summary line, the traceback and what the libraries said in
``<workdir>/errors.log``: ``runtime.process.failure``; a checkpoint that cannot be resumed from is
one ``checkpoint: ...`` line), 2 bad config (one ``config error: ...`` line naming the
field; a ``--config`` file or ``--workdir`` that cannot be used is one line naming the
path), 130/143 after SIGINT/SIGTERM (the trainer checkpoints first).
"""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Callable
from typing import Any, TypedDict

from rlcore.errors import ConfigError
from rlcore.imports import path_of
from runtime import distributed
from runtime.config import memory_check
from runtime.config.algo import fill_own
from runtime.config.validation import ModeChecks, validate, validate_distributed, validate_fields
from runtime.process import exits, failure, signals
from runtime.run import files as run_files
from runtime.run import lock as workdir_lock
from runtime.run import resume
from runtime.run.summary import curve_line, next_steps_line, print_summary, whole_run
from runtime.run.workdir import check_workdir, start_fresh

# How a training command reports its errors (any other is a traceback and exit 1).
TRAIN_ERRORS = (
    exits.OneLine((ConfigError,), "config error", exits.EXIT_BAD_INPUT),
    # Checkpoints exist, none restores (``runtime.run.checkpoint`` imports orbax: it loads only
    # once the config is validated, so the class is named, not imported, here).
    exits.OneLine(("runtime.run.checkpoint.CheckpointError",), "checkpoint", exits.EXIT_FAILURE),
    # A rerun of a finished run: nothing to do, said in one line.
    exits.OneLine(("runtime.run.resume.RunComplete",), "done", exits.EXIT_OK),
)


def prepare(config, mode: ModeChecks) -> None:
    """Checks the process fields, joins the multi-process runtime, then checks every other
    field for ``mode``, that the mode's host buffers fit the host
    (``runtime.config.memory_check.host_refusal``) and that the state known from shapes fits
    a device (``shape_refusal``): all before anything compiles. The devices'
    memory is checked once the trainer has compiled its program, by XLA's figure
    (``check_memory``).

    Raises:
      ConfigError: ``"field: what is wrong"``.
    """
    validate_distributed(config)
    mode.check_before_join(config)
    distributed.initialize(config)
    counts = distributed.device_counts()
    validate(config, mode, counts)
    check_memory(config, memory_check.host_refusal(config, mode, counts.processes)
                 or memory_check.shape_refusal(config, mode, counts.devices,
                                              counts.processes))


def check_memory(config, refusal: str | None) -> None:
    """Acts on a memory check's verdict (``runtime.config.memory_check``: ``refusal`` is its
    one line, None where the run fits), every process alike: a collective in multi-process
    runs, so that a process whose devices do not fit stops them all.

    Raises:
      ConfigError: some process refused and ``memory_check`` is on; with it off, the line
        is said (process 0) and the run goes on.
    """
    if distributed.all_processes_agree(refusal is None):
        return
    line = refusal or "memory_check: another process's devices do not fit (its line says why)"
    if config.memory_check:
        raise ConfigError(line)
    if distributed.is_main_process():
        print(f"memory: {line.removesuffix(memory_check.OVERRIDE)}; running anyway "
              "(memory_check=False)", file=sys.stderr, flush=True)


# What a training command runs: ``() -> (mode, train)``, importing the trainer's modules
# (the entry point's ``anakin.train`` or ``sebulba.train``) only when called; ``train(config,
# workdir, **kwargs)`` returns a ``runtime.commands.result.RunResult``.
Trainer = Callable[[], tuple[ModeChecks, Callable]]


def run_main(config, workdir, trainer: Trainer, *, fresh: bool = False) -> None:
    """Checks what the flags and an existing ``workdir`` allow (``check_early``), then
    loads the trainer (``trainer()``), runs ``prepare(config, mode)``, checks ``workdir``
    and takes its lock where not yet done (process 0; ``runtime.run.lock``), then
    (after moving the previous run aside when ``fresh``) ``train(config, workdir)`` and
    prints the summary of the whole run; exits with the code of the outcome
    (``runtime.process.exits.run_command``, ``TRAIN_ERRORS``)."""

    def body():
        handlers, installed = signals.start()  # a signal from here on exits within seconds
        try:
            _run(config, workdir, trainer, fresh)
        finally:
            if installed:
                signals.finish(handlers)

    exits.run_command(body, TRAIN_ERRORS, details=details_file(config, workdir))


def details_file(config, workdir: str | None) -> failure.Details:
    """Where this process's tracebacks and library output go (``runtime.process.failure``):
    ``<workdir>/errors.log`` (``errors-p<k>.log`` for process k), without a workdir a file
    in the temporary directory."""
    name = failure.details_name(int(config.get("process_id", 0) or 0))
    return failure.Details(os.path.join(workdir, name) if workdir else None)


def check_early(config, workdir: str | None, fresh: bool) -> bool:
    """The checks that need only the flags and, where ``workdir`` exists (a run may be
    there), its files: the process fields and the shared fields by their rules, the
    workdir, its lock (``claim_workdir``) and, unless ``fresh``, the resume
    (``runtime.run.resume.check_files``). Returns whether the lock is claimed (a new workdir's
    is claimed once validation passed, so that a refused config creates nothing).

    Raises:
      ConfigError: the first refusal's line.
    """
    validate_distributed(config)
    validate_fields(config)
    if not workdir or not os.path.isdir(workdir):
        return False
    check_workdir(workdir)
    claimed = claim_workdir(config, workdir)
    if not fresh:
        resume.check_files(workdir, config)
    return claimed


def claim_workdir(config, workdir: str) -> bool:
    """Before the processes join: process 0 takes the lock of ``workdir``, any other
    process checks that no other run holds it (``runtime.run.lock``). Returns False,
    claiming nothing, where a process learns its index only when it joins (a cluster JAX
    detects by itself: process 0 takes the lock after ``prepare``)."""
    multi = config.num_processes > 1
    if not multi and distributed.detected_cluster() is not None:
        return False
    tag = workdir_lock.run_tag(config.num_processes, config.coordinator_address)
    if config.process_id == 0:
        workdir_lock.hold(workdir, tag)
    else:
        workdir_lock.check_free(workdir, tag)
    return True


def _ready(config, workdir, trainer: Trainer, fresh: bool) -> tuple[ModeChecks, Callable]:
    """Every check of a training run in its order, the workdir's lock taken and, where
    ``fresh``, the previous run moved aside; returns the trainer's ``(mode, train)``."""
    claimed = check_early(config, workdir, fresh)
    mode, train = trainer()
    prepare(config, mode)
    check_workdir(workdir)
    if workdir and (details := failure.captured()) is not None:
        details.settle()  # what the libraries said before the workdir existed goes into it
    if workdir and not claimed and distributed.is_main_process():
        # One run per workdir, before --fresh moves anything.
        workdir_lock.hold(workdir, workdir_lock.run_tag(config.num_processes,
                                                        config.coordinator_address))
    if fresh:
        start_fresh(workdir)
    return mode, train


# Where an env built with arguments from Python goes instead (docs/extending.md, "Your own
# env"): a lambda or an instance made in a function has no import path to record.
ENV_HINT = ", with its arguments in config.env_kwargs (e.g. env=MyEnv, config.env_kwargs.size=7)"


def with_own_code(config, *, env: Any = None, network: Any = None, algorithm: Any = None):
    """A copy of ``config`` whose ``env_id``, ``network`` and ``algorithm`` name ``env``,
    ``network`` and ``algorithm`` (objects of the caller's, or import paths; None keeps the
    config's) by import path (``rlcore.imports.path_of``), with the algorithm's own
    hyperparameters filled in (``runtime.config.algo.fill_own``), so that ``config.json``
    says what the run used.

    Raises:
      ConfigError: an object that has no import path.
    """
    out = copy.deepcopy(config)
    for field, obj in (("env_id", env), ("network", network), ("algorithm", algorithm)):
        if obj is not None:
            out[field] = path_of(obj, field, ENV_HINT if field == "env_id" else "")
    fill_own(out)
    return out


class RunArguments(TypedDict, total=False):
    """The keyword arguments ``anakin.run`` and ``sebulba.run`` share (``train_in_python``).

    Attributes:
      env: your env (docs/extending.md, "Your own env"): a class, function or object with a
        name at the top level of a module, or an import path; absent: ``config.env_id``.
      network: your torso (docs/extending.md, "Your own network"), as ``env``; absent:
        ``config.network``.
      algorithm: your algorithm class (docs/extending.md, "Your own algorithm"), as
        ``env``; absent: ``config.algorithm``. Its own hyperparameters: ``config.algo``.
      on_row: called with each ``metrics.jsonl`` row (a dict) as it is logged; returning
        ``False`` stops the run after that row's update, checkpointed (docs/design.md,
        "From Python").
      fresh: move a previous run in ``workdir`` aside first (``--fresh``).
    """

    env: Any
    network: Any
    algorithm: Any
    on_row: Callable[[dict], Any] | None
    fresh: bool


def check_python_arguments(workdir: Any, on_row: Any, fresh: Any) -> None:
    """The Python entry points' own arguments, checked before anything else (docs/design.md,
    "From Python"): ``workdir`` a path or None, ``on_row`` a callable or None, ``fresh`` a
    bool.

    Raises:
      ConfigError: ``"<argument>: what is wrong"``, one line.
    """
    if workdir is not None and not isinstance(workdir, (str, os.PathLike)):
        raise ConfigError(f"workdir: must be a path (str) or None, got {workdir!r:.60}")
    if on_row is not None and not callable(on_row):
        raise ConfigError(f"on_row: must be a function of each metrics row (a dict) or None, "
                          f"got {type(on_row).__name__} {on_row!r:.60}")
    if not isinstance(fresh, bool):
        raise ConfigError(f"fresh: must be True or False, got {fresh!r:.60}")


# The prefix of the import path of an object a notebook or script defines.
MAIN = "__main__:"


def main_module_line(config) -> str | None:
    """The one line that says which of ``config``'s code fields name an object of
    ``__main__`` (a notebook's or script's own, ``rlcore.imports.path_of``), which no later
    process can import (a resume, the evaluate commands, ``runtime.load_policy``); None
    where none does (docs/extending.md, "From Python")."""
    fields = [f for f in ("env_id", "network", "algorithm") if config[f].startswith(MAIN)]
    if not fields:
        return None
    named = ", ".join(f"{f}={config[f]}" for f in fields)
    return (f"note: {named}: defined in a notebook or script, which a later process cannot "
            "import: resuming this workdir, evaluating it or load_policy on it needs the "
            "code in a module")


def train_in_python(config, workdir: str | None, trainer: Trainer, *, env: Any = None,
                    network: Any = None, algorithm: Any = None, fresh: bool = False,
                    on_row: Callable[[dict], Any] | None = None, **train_kwargs):
    """A training run called from Python (``anakin.run``, ``sebulba.run``): the arguments
    checked (``check_python_arguments``), ``config`` with the caller's code
    (``with_own_code``; a workdir's run of objects of ``__main__`` said in one line,
    ``main_module_line``), the command's checks in its order (``_ready``), then
    ``train(config, workdir, on_row=on_row, **train_kwargs)``; returns its
    ``runtime.commands.result.RunResult``. A refusal raises (``ConfigError``: its one line)
    instead of exiting; the workdir's lock is given back when the run ends, so the same
    process may train there again."""
    check_python_arguments(workdir, on_row, fresh)
    workdir = os.fspath(workdir) if workdir is not None else None
    config = with_own_code(config, env=env, network=network, algorithm=algorithm)
    clean = False
    try:
        _, train = _ready(config, workdir, trainer, fresh)
        if workdir and (line := main_module_line(config)) is not None:
            print(line, file=sys.stderr)
        result = train(config, workdir, on_row=on_row, **train_kwargs)
        clean = True
        return result
    finally:
        if workdir:
            workdir_lock.release(workdir, remove=clean)


def _run(config, workdir, trainer: Trainer, fresh: bool) -> None:
    """``run_main``'s work, under its signal handlers."""
    mode, train = _ready(config, workdir, trainer, fresh)
    rows = list(train(config, workdir).rows)
    if distributed.is_main_process():  # one console for the run: process 0's
        print_summary(whole_run(workdir, rows))  # a resumed run's earlier lines too
        if workdir:
            for line in (curve_line(workdir), next_steps_line(mode.name, workdir,
                                                             mode.num_agents(config))):
                if line:
                    print(line)
            run_files.remove_empty(workdir)  # no empty errors.log or event file is left
            workdir_lock.release(workdir, remove=True)  # a clean end leaves no run.lock
