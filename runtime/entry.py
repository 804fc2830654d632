"""What the training entry points (``anakin.main``, ``sebulba.main``) share: their flags and
validation first, then training and a summary.

The flags parser and the exit codes are ``runtime.command``'s (shared with the evaluate
commands): 0 done, 1 runtime failure (one summary line, the traceback and what the
libraries said in ``<workdir>/errors.log``: ``runtime.failure``; a checkpoint that cannot be
resumed from is one ``checkpoint: ...`` line), 2 bad config (one ``config error: ...`` line
naming the field; a ``--config`` file or ``--workdir`` that cannot be used is one line
naming the path), 130/143 after SIGINT/SIGTERM (the trainer checkpoints first).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import sys
import tempfile
from typing import Any

from absl import flags
from ml_collections import config_flags

from rlcore.errors import ConfigError
from runtime import (
    cli,
    command,
    distributed,
    failure,
    launch,
    memory,
    run_files,
    signals,
    sweep,
    workdir_lock,
)
from runtime.config import ModeChecks, validate, validate_distributed
from runtime.metrics import group_by_variant, variant_keys
from runtime.workdir import set_aside_previous_run

# How a training command reports its errors (any other is a traceback and exit 1).
TRAIN_ERRORS = (
    command.OneLine((ConfigError,), "config error", command.EXIT_BAD_INPUT),
    # Checkpoints exist, none restores (``runtime.checkpoint`` imports orbax: it loads only
    # once the config is validated, so the class is named, not imported, here).
    command.OneLine(("runtime.checkpoint.CheckpointError",), "checkpoint",
                    command.EXIT_FAILURE),
    # A rerun of a finished run: nothing to do, said in one line.
    command.OneLine(("runtime.resume.RunComplete",), "done", command.EXIT_OK),
)


@dataclasses.dataclass(frozen=True)
class TrainFlags:
    """The flags of a training command (``define_flags``).

    Attributes:
      config, workdir, fresh: absl flag holders of ``--config``, ``--workdir``, ``--fresh``.
      default_config: the config file when the command line names none.
      mode: ``"anakin"`` or ``"sebulba"`` (its automatic CPU thread count, ``cpu_threads_for``).
    """

    config: Any
    workdir: Any
    fresh: Any
    default_config: str
    mode: str

    def parse(self, argv):
        """absl flags parser for ``app.run``: ``parse_flags`` of ``argv`` with
        ``--config=<default_config>`` in front when ``argv`` names no config file."""
        if not any(re.match(r"^--?config(=|$)", arg) for arg in argv[1:]):
            argv = [argv[0], f"--config={self.default_config}", *argv[1:]]
        return parse_flags(argv, self.mode)


def define_flags(config: str, workdir: str, mode: str) -> TrainFlags:
    """Defines ``--config`` (default file ``config``), ``--workdir`` (default ``workdir``)
    and ``--fresh``; the entry point adopts them as its key flags for ``--help`` to list
    them (``flags.adopt_module_key_flags(runtime.entry)``) and parses with ``.parse``.

    ``--config`` has no default of its own: ml_collections loads a default file, applying
    the command line's ``--config.<field>`` overrides, when the flag is defined, at import,
    where an unknown field would be a traceback instead of ``parse_flags``' one line.
    """
    holders = (
        config_flags.DEFINE_config_file(
            "config", None, "Config file, a Python file with get_config(); override its "
            "fields with --config.<field>=<value>."),
        flags.DEFINE_string(
            "workdir", workdir, "Run directory (config.json, metrics.jsonl, checkpoints/); a "
            "run there is resumed from its newest checkpoint."),
        flags.DEFINE_bool(
            "fresh", False, "Start over: move the previous run in --workdir aside (to "
            "previous-<time>/) instead of resuming from its checkpoint."),
    )
    flags.FLAGS["config"].default_as_str = repr(config)  # --help: the file .parse puts in
    return TrainFlags(*holders, default_config=config, mode=mode)


def parse_flags(argv, mode: str | None = None):
    """absl flags parser for ``app.run``: a bad ``--config`` file or override (wrong type,
    unknown field) becomes one ``config error: <field>: ...`` line and exit code 2. Library
    logging stays at WARNING unless ``--verbosity`` is given. ``mode``: the training
    command's architecture (``apply_xla_cpu_flags``)."""
    return command.parse_flags(argv, _config_problem, lambda rest: _check_config(mode))


def _check_config(mode: str | None) -> None:
    """A config that failed to load raises here; its XLA CPU flags and thread count go in
    before JAX starts."""
    config = flags.FLAGS["config"].value
    config.to_dict()
    apply_xla_cpu_flags(config, mode)


def _config_problem(e: Exception, argv) -> str:
    """The one ``config error:`` line of a failed parse (any failure is a bad config)."""
    problem = config_file_problem(_config_argument(argv))
    if problem is not None:
        return f"config error: --config: {problem}"
    if isinstance(e, (AttributeError, KeyError)):  # ml_collections: an unknown field
        unknown = _unknown_override(argv)
        if unknown is not None:
            return f"config error: {unknown}"
    message = " ".join(str(e).split())
    found = re.search(r"--config\.([\w.]+)", message)
    field = found.group(1) if found else "config"
    if isinstance(e, OSError):  # the config file itself did not load
        message = message.split(" Attempted")[0]
    return f"config error: {field}: {message}"


def _unknown_override(argv) -> str | None:
    """``unknown_field``'s line for the first ``--config.<path>`` override in ``argv`` (and
    its flag files) that the config file lacks; None when none does or the file does not
    load.

    The line is found from the command line and the config, not from ml_collections' error:
    that names only the unknown component, and when it has a close match the text is the
    repr of ``KeyError("'lerning_rate'\\nDid you mean ...")`` inside an AttributeError,
    quotes escaped, so the name was lost.
    """
    try:
        config = flags.FLAGS["config"].parser.parse(_config_value(argv))
        argv = flags.FLAGS.read_flags_from_files(list(argv), force_gnu=False)
    except Exception:  # noqa: BLE001 - then the parse error's own text is the message
        return None
    for arg in argv:
        if re.match(r"-{1,2}(no)?config\.", arg):  # ml_collections' own test for overrides
            line = unknown_field(config, arg.split("=", 1)[0].split(".", 1)[1])
            if line is not None:
                return line
    return None


def unknown_field(config, path: str) -> str | None:
    """``"<path>: no such config field (did you mean <close fields>?)"`` when the dotted
    ``path`` of an override (``debug.nope``) is not a field of ``config``; None when it is.

    The path is cut after its first unknown component (``nope`` for ``nope.deeper``); close
    matches come from that component's parent ``ConfigDict`` (``difflib``). A component after
    a value that is not a ``ConfigDict`` is unknown too; a subscript (``a[0]``) ends the check.
    """
    from ml_collections import ConfigDict
    from ml_collections.config_flags import config_path

    try:
        parts = config_path.split(path)
    except ValueError:
        return None
    node, walked = config, []
    for part in parts:
        if not isinstance(part, str):
            return None
        parent = ".".join(walked)
        walked.append(part)
        if not isinstance(node, ConfigDict):
            kind = "None" if node is None else f"a {type(node).__name__}"
            return (f"{'.'.join(walked)}: no such config field ({parent} is {kind}, not a "
                    "group of fields)")
        if part not in node:
            return f"{'.'.join(walked)}: no such config field ({_close_fields(part, node, parent)})"
        node = node[part]
    return None


MAX_LISTED_FIELDS = 10  # a group with no close match lists its fields up to this many


def _close_fields(name: str, group, parent: str) -> str:
    """``"did you mean a, b or c?"``: the fields of ``group`` (a ConfigDict at the dotted
    ``parent``, "" for the top) closest to ``name``; without one, the group's fields (or how
    many there are)."""
    prefix = f"{parent}." if parent else ""
    keys = {k.lower(): k for k in group.keys()}
    close = [f"{prefix}{keys[k]}" for k in difflib.get_close_matches(name.lower(), keys, n=3)]
    if close:
        return f"did you mean {_or_list(close)}?"
    where = parent or "the config"
    if len(keys) <= MAX_LISTED_FIELDS:
        return f"{where} has {_or_list(sorted(keys.values()), 'and')}"
    return f"no close match among the {len(keys)} fields of {where}"


def _or_list(names: list[str], word: str = "or") -> str:
    """``"a, b or c"``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {word} {names[-1]}"


def _config_value(argv) -> str | None:
    """The ``--config`` argument as given (with a ``:args`` suffix): the parsed flag's, else
    the last ``--config=X`` / ``--config X`` in ``argv`` (None without one)."""
    try:
        return config_flags.get_config_filename(flags.FLAGS["config"])
    except Exception:  # noqa: BLE001 - not parsed (the parse failed before it)
        value = None
        for i, arg in enumerate(argv[1:], start=1):
            if (found := re.match(r"^--?config=(.*)$", arg)) is not None:
                value = found.group(1)
            elif re.match(r"^--?config$", arg) and i + 1 < len(argv):
                value = argv[i + 1]
        return value


def _config_argument(argv) -> str | None:
    """The ``--config`` file as given (``_config_value``) without a ``:args`` suffix."""
    value = _config_value(argv)
    return value.split(":", 1)[0] if value else value


def config_file_problem(path: str | None) -> str | None:
    """What keeps ``path`` from being loaded as a config file, in one line naming it and
    what to do; None when it is a readable file (its problem is elsewhere)."""
    hint = "pass --config=<file>.py, e.g. --config=configs/cartpole_ppo.py"
    if not path:
        return f"no config file given; {hint}"
    if not os.path.exists(path):
        return f"{path} does not exist (from {os.getcwd()}); {hint}"
    if not os.path.isfile(path):
        return f"{path} is not a file; {hint}"
    if not os.access(path, os.R_OK):
        return f"{path} cannot be read (permission denied); {hint}"
    return None


def check_workdir(workdir: str | None) -> None:
    """Makes sure ``workdir`` (None or empty: no run directory) is a writable directory,
    creating it if needed, before anything compiles.

    Raises:
      ConfigError: ``"--workdir: <path> ...; <what to do>"``.
    """
    if not workdir:
        return
    hint = "pass a --workdir that is a writable directory or can be created"
    blocker = cli.file_in_the_way(workdir)
    if blocker is not None:
        raise ConfigError(f"--workdir: {workdir} cannot be a directory: {blocker} is a file; "
                          f"{hint}")
    try:
        os.makedirs(workdir, exist_ok=True)
        with tempfile.TemporaryFile(dir=workdir):
            pass
    except OSError as e:
        raise ConfigError(f"--workdir: {workdir} is not usable ({e.strerror}); {hint}") from None
    checkpoints = os.path.join(workdir, run_files.CHECKPOINTS)
    if os.path.exists(checkpoints) and not os.path.isdir(checkpoints):
        raise ConfigError(f"--workdir: {checkpoints} is a file, not a directory; move it "
                          f"away or {hint}")


def start_fresh(workdir: str | None) -> None:
    """``--fresh``: the main process moves the previous run in ``workdir`` aside (one line
    says where); every process waits for it before training starts."""
    if workdir and distributed.is_main_process():
        moved = set_aside_previous_run(workdir)
        if moved is not None:
            print(f"fresh start: moved the previous run in {workdir} to {moved}/",
                  file=sys.stderr)
    if distributed.device_counts().processes > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices("fresh start")


# Config fields that are XLA runtime flags, read when JAX starts its backends: field ->
# (flag, its value for the field's value); a flag already in XLA_FLAGS wins.
XLA_FLAG_FIELDS = {
    "xla_cpu_multi_thread_eigen": lambda v: f"--xla_cpu_multi_thread_eigen={str(v).lower()}",
    # Off (the default here; XLA's is on): that scheduler orders an unrolled update so that
    # every gradient step's buffers are live at once (runtime.memory.live_steps).
    "xla_cpu_concurrency_scheduler":
        lambda v: f"--xla_cpu_enable_concurrency_optimized_scheduler={str(v).lower()}",
    # Deterministic GPU ops (scatters, reductions) where XLA has them; no effect on CPU,
    # whose ops are deterministic already.
    "deterministic": lambda v: "--xla_gpu_deterministic_ops=true" if v else None,
}


def apply_xla_cpu_flags(config, mode: str | None = None) -> None:
    """Adds the config's XLA runtime flags (``XLA_FLAG_FIELDS``: the CPU thread pool, GPU
    determinism) to ``XLA_FLAGS`` and its CPU intra-op thread count (``cpu_threads_for``)
    to ``PJRT_NPROC``, both read when JAX starts its backends, so call this first; a flag
    or ``PJRT_NPROC`` already in the environment wins. ``mode``: ``"anakin"``,
    ``"sebulba"`` or None (evaluation, benchmarks: no automatic thread count)."""
    for field, flag_of in XLA_FLAG_FIELDS.items():
        value = config.get(field)
        flag = flag_of(value) if isinstance(value, bool) else None
        current = os.environ.get("XLA_FLAGS", "")
        if flag is not None and flag.split("=")[0] not in current:
            os.environ["XLA_FLAGS"] = f"{current} {flag}".strip()
    threads = cpu_threads_for(config, mode)
    if threads and THREADS_VARIABLE not in os.environ:
        os.environ[THREADS_VARIABLE] = str(threads)


# XLA's CPU client sizes its intra-op thread pool from this variable when it starts (else
# one thread per core it may run on).
THREADS_VARIABLE = "PJRT_NPROC"
# Automatic ``cpu_threads``: one intra-op thread for an Anakin update of at most this many
# env steps (all agents) on one device. Measured with configs/cartpole_ppo.py's network on
# a 2-core host (WORKSPACE-notes.md, twelfth session): at 4 envs x 128 steps 1.31x the
# steps/s for 0.57x the CPU seconds; one thread against two: 1.13x at 8 envs, 0.94x at 16.
SMALL_UPDATE_ENV_STEPS = 1024


def cpu_threads_for(config, mode: str | None) -> int | None:
    """XLA CPU intra-op threads for a run: ``config.cpu_threads`` where > 0; for 0 (auto)
    1 when ``mode`` is ``"anakin"``, the run computes on one local device and one update
    takes at most ``SMALL_UPDATE_ENV_STEPS`` env steps over all its agents (such an update
    is a chain of small ops, for which a second pool thread costs more in hand-offs between
    cores than it computes), else None: XLA's default, one per core. Thread counts do not
    change results (CPU dots gave equal bits at 1 and 2 threads, WORKSPACE-notes.md).
    Values validation would refuse give None (it reports them before anything compiles).
    """
    value = config.get("cpu_threads", 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return None
    if value > 0:
        return value
    if mode != "anakin" or _local_devices(config) != 1:
        return None
    try:
        steps = config.num_envs * config.num_steps * sweep.num_agents(config)
    except (TypeError, AttributeError, KeyError):  # refused by validation later
        return None
    return 1 if isinstance(steps, int) and 0 < steps <= SMALL_UPDATE_ENV_STEPS else None


def _local_devices(config) -> int | None:
    """Devices this process computes on, as far as known before JAX starts: the config's
    ``num_devices`` where set, else the host platform's device count from ``XLA_FLAGS``
    (1 without the flag); None when the config gives no integer."""
    value = config.get("num_devices", 0)
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    if value > 0:
        return value
    return launch.fake_devices(os.environ.get("XLA_FLAGS", "")) or 1


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
    ``train(config, workdir)`` and prints the summary; exits with the code of the outcome
    (``runtime.command.run_command``, ``TRAIN_ERRORS``)."""

    def body():
        handlers, installed = signals.start()  # a signal from here on exits within seconds
        try:
            _run(config, workdir, mode, train, fresh)
        finally:
            if installed:
                signals.finish(handlers)

    command.run_command(body, TRAIN_ERRORS, details=details_file(config, workdir))


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
        print_summary(rows)


def print_summary(rows) -> None:
    """A short learning-curve summary: return at a few points of the run. With several
    agents the return is their mean per log step; with a sweep, one column per variant."""
    keys = variant_keys(rows[0]) if rows else []
    groups = group_by_variant(rows, keys) if keys else [("mean episode return", rows)]
    curves = [(label, _mean_curve(group)) for label, group in groups]
    steps = sorted({s for _, curve in curves for s in curve})
    if not steps:
        print("no episode finished", file=sys.stderr)
        return
    n = len(steps)
    picks = [steps[i] for i in sorted({0, n // 4, n // 2, 3 * n // 4, n - 1})]
    print("learning curve (env steps -> " + " | ".join(label for label, _ in curves) + "):")
    for step in picks:
        cells = [f"{curve[step]:8.1f}" if step in curve else "       -" for _, curve in curves]
        print(f"  {step:>12,} -> " + " | ".join(cells))
    for label, curve in curves:
        name = "" if len(curves) == 1 else f"{label}: "
        print(f"{name}best logged mean return {max(curve.values()):.1f}; "
              f"final {curve[max(curve)]:.1f}")


def _mean_curve(rows) -> dict[int, float]:
    """``{env_steps: mean episode return over the rows of that step}`` (steps with one)."""
    by_step: dict[int, list[float]] = {}
    for r in rows:
        if r.get("episode_return") is not None:
            by_step.setdefault(r["env_steps"], []).append(r["episode_return"])
    return {s: sum(v) / len(v) for s, v in by_step.items()}
