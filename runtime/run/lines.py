"""The console lines of a training run: resuming, extending, stopping on a signal,
compiling, the first call. The run directory prints them on process 0 only."""

from __future__ import annotations

import signal

from runtime.process import signals
from runtime.run.console import clock


def resuming_line(update: int) -> str:
    """A run resumes from its checkpoint at ``update``."""
    return f"resuming from update {update}"


def damaged_line(damaged, moved: str, good_step: int) -> str:
    """A damaged checkpoint (``runtime.run.checkpoint.DamagedCheckpoint``) moved to ``moved``;
    the run resumes from ``good_step``."""
    return (f"checkpoint: {damaged}; moved it to {moved}; resuming from step "
            f"{good_step} instead")


def extension_line(old_total: int, config, total_updates: int) -> str:
    """The console line of a run extended by a larger ``total_env_steps``; says what
    happens to the learning rate's annealing."""
    line = (f"extending the run: total_env_steps {old_total:,} -> "
            f"{config.total_env_steps:,} ({total_updates} updates)")
    if config.get("anneal_lr"):
        line += ("; the learning rate anneals to 0 over the new total from here on (from "
                 "this update on as if the run had been planned this long)")
    return line


def asked_stop_line(row_update: int, update: int, saved: bool) -> str:
    """The console line of a run that ``on_row`` stopped at the row of ``row_update``,
    after ``update`` updates (Anakin: the end of that row's call): what was kept."""
    kept = (f"checkpoint {update} written: rerunning resumes from it" if saved
            else "no workdir: the result holds its params")
    return f"on_row returned False at update {row_update}: stopping after update {update}; {kept}"


def stopping_line(exit_code: int, update: int, saving: bool,
                  in_flight: int | None = None) -> str:
    """The console line of a run stopping on a signal after ``update`` updates (abandoning
    update ``in_flight`` where one was running): what it does, how to go on."""
    name = "SIGINT" if exit_code == signals.CODES[signal.SIGINT] else "SIGTERM"
    abandoning = "" if in_flight is None else f"abandoning update {in_flight} in flight, "
    if not saving:
        return (f"{name}: {abandoning}stopping after update {update} (no --workdir: nothing "
                f"is saved)")
    if update == 0:
        return (f"{name}: {abandoning}stopping before the first update completed (nothing "
                f"to save); run the same command to start again")
    return (f"{name}: {abandoning}saving a checkpoint at update {update}, then exiting; run "
            f"the same command to resume (a second {name} exits at once, keeping the last "
            f"checkpoint)")


def first_rollout_line(seconds: float, actors: str = "") -> str:
    """The learner got its first rollout (Sebulba), ``seconds`` after the start, from
    ``actors`` (e.g. ``"1 actor device x 2 threads x 64 envs"``)."""
    source = f" ({actors})" if actors else ""
    return f"first rollout after {seconds:.1f} s{source}; compiling the learner step"


def first_call_line(updates: int, seconds: float, compile_s: float | None,
                    from_cache: bool = False) -> str:
    """The run's first call of ``updates`` updates took ``seconds`` (compile included,
    unless ``compile_s``, the ahead-of-time compile's seconds, is given; ``from_cache``: the
    persistent compile cache served that compile)."""
    noun = "update" if updates == 1 else "updates"
    if compile_s is None:
        compiled = "loading its program from the compile cache" if from_cache else "compile"
        return f"first call ({updates} {noun}, incl. {compiled}) done after {seconds:.1f} s"
    compiled = (f"loading the compiled call from the compile cache in {compile_s:.1f} s"
                if from_cache else f"a compile of {compile_s:.1f} s")
    return f"first call ({updates} {noun}) ran in {seconds:.1f} s, after {compiled}"


def compiling_line(updates: int) -> str:
    """Anakin begins to compile its training call of ``updates`` updates."""
    noun = "update" if updates == 1 else "updates"
    return f"compiling the training call ({updates} {noun})..."


def still_compiling_line(seconds: float) -> str:
    """A compile has lasted ``seconds`` so far."""
    return f"still compiling ({clock(seconds)})"
