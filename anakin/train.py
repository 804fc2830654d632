"""Anakin's training loop (docs/design.md, "Anakin calls"): the run directory, the compile
before the state, the calls of ``updates_per_call`` updates (``anakin.program.AnakinRun``),
their metrics lines, checkpoints and signals, and the result.
"""

from __future__ import annotations

import functools
import time

import jax

from anakin.mode import MODE
from anakin.program import AnakinRun, mesh_for
from anakin.state import AnakinState, UpdateOutput
from envs import registry
from runtime import distributed
from runtime.commands import train as train_command
from runtime.commands.result import RunResult, run_result
from runtime.config import pbt as population
from runtime.process.signals import SignalFlag
from runtime.run.directory import RunDir
from runtime.run.metrics import eval_scalars
from runtime.run.population import event_lines, hparam_scalars

__all__ = ["AnakinRun", "MODE", "mesh_for", "prepare", "train", "train_result"]


def _update_of(state: AnakinState) -> int:
    """The updates ``state`` has done (agent 0's: the agents move together)."""
    return int(distributed.to_host(state.learner.update).reshape(-1)[0])


def _call_sizes(start: int, total: int, per_call: int) -> list[int]:
    """Sizes of successive calls from update ``start`` to ``total``."""
    sizes, u = [], start
    while u < total:
        sizes.append(min(per_call, total - u))
        u += sizes[-1]
    return sizes


# A signal during a call lets it finish and save (``runtime.process.signals``) within its bound:
# the first call's (not measured yet; a call that has not returned by then is taken as hung),
# later ones twice the longest call so far.
FIRST_CALL_BOUND_S = 600.0


def train(config, workdir: str | None, *, mesh=None, on_row=None) -> list[dict]:
    """Runs Anakin training (``train_result``); returns the logged rows."""
    return list(train_result(config, workdir, mesh=mesh, on_row=on_row).rows)


def train_result(config, workdir: str | None, *, mesh=None, on_row=None) -> RunResult:
    """Runs Anakin training; writes the run directory; returns the logged rows, the final
    params and agent 0's policy (``runtime.commands.result.RunResult``); calls ``on_row``
    (where given) with each row as it is logged (a copy).

    Resumes from the latest checkpoint in ``workdir`` when there is one. Raises
    ``SystemExit(130/143)`` after a SIGINT/SIGTERM, once a checkpoint is written: a signal
    during a call lets the call finish and saves its last update (docs/design.md, "Signals
    and checkpoints"). A row for which ``on_row`` returns ``False`` ends the run after the
    call that logged it, checkpointed (docs/design.md, "From Python").
    """
    run = AnakinRun(config, mesh)
    total = run.derived.num_updates
    rundir = RunDir(config, workdir, total, run.derived.steps_per_update, run.agent_tags(),
                    return_label=registry.return_axis_label(config.env_id), on_row=on_row)
    # A resume restores first, so that a finished run says so before compiling.
    state = rundir.restore_or(run.init_state()) if rundir.resumes() else None
    first = _call_sizes(0 if state is None else _update_of(state), total,
                        config.updates_per_call)[0]  # announced as the call the compile serves
    try:
        with SignalFlag() as flag:
            flag.compiling()
            with rundir.compiling(first):
                compile_s = run.compile(run.abstract_state())  # a fresh run: before its state
            if state is None:
                state = rundir.restore_or(run.init_state())
            start = _update_of(state)
            longest = None  # the longest call so far, seconds
            for k in _call_sizes(start, total, config.updates_per_call):
                t_call = time.perf_counter()
                state, out, call_s = _timed_call(run, flag, state, start, k, longest)
                if longest is None:  # training time counts from here: the call's is real
                    rundir.first_call_done(k, call_s, compile_s=compile_s,
                                           steady_from=(start, t_call),
                                           from_cache=run.from_cache)
                else:  # debug.learner_delay_ms (a test knob): not the first call
                    _hold(config.debug.learner_delay_ms / 1000, flag)
                longest = max(longest or 0.0, call_s)
                per_update_s = (time.perf_counter() - t_call) / k
                _record_call(run, rundir, out, start, k, t_call, per_update_s)
                # A collective in multi-process runs: every process, after every call.
                exit_code, clock = distributed.agree_after_call(flag.exit_code,
                                                                rundir.clock_due())
                rundir.checkpoint_or_exit(start + k, start, state, exit_code, clock=clock)
                start += k
                if rundir.stopped is not None:
                    break
    finally:
        rundir.close()
    return run_result(rundir.history, state.learner.params, run.network, run.env.spec.obs_shape,
                      run.num_agents, _update_of(state))


def _timed_call(run: AnakinRun, flag: SignalFlag, state: AnakinState, start: int, k: int,
                longest: float | None) -> tuple[AnakinState, UpdateOutput, float]:
    """Updates ``start + 1 .. start + k`` in one call, which a signal lets finish (within
    its bound: ``FIRST_CALL_BOUND_S``, or twice ``longest``); returns the new state, the
    outputs on the host and the call's seconds."""
    t = time.perf_counter()
    flag.call_started(start + 1, start + k,
                      FIRST_CALL_BOUND_S if longest is None else 2 * longest)
    new_state, out = run.call(state, k)
    out = distributed.to_host(out)
    flag.call_done()
    return new_state, out, time.perf_counter() - t


def _record_call(run: AnakinRun, rundir: RunDir, out: UpdateOutput, start: int, k: int,
                 t_call: float, per_update_s: float) -> None:
    """The metrics lines of a call's ``k`` updates ``start + 1 .. start + k`` (``out``
    on the host, leaves ``[K]`` or ``[K, A]``), each ended, at the call's steady rate of
    ``per_update_s``, that long after ``t_call``."""
    for i in range(k):
        row = jax.tree.map(lambda x, i=i: x[i], out)
        rows = [row] if run.num_agents == 1 else [
            jax.tree.map(lambda x, a=a: x[a], row) for a in range(run.num_agents)]
        # Rollout u acts with version max(u - S, 0): a lag of min(u, S) updates (S > 0).
        lag = {"params_lag": float(min(start + i, run.lag))} if run.lag else {}
        scalars = [{**r.loss.scalars(), **eval_scalars(r.evals), **lag,
                    **_hparams(run, r), "time/update_s": per_update_s} for r in rows]
        if run.explore is not None:
            rundir.record_population(event_lines(
                start + i + 1, population.names(run.config), [r.population.events for r in rows]))
        rundir.record(start + i + 1, scalars, [r.episodes for r in rows],
                      sps=run.derived.steps_per_update / per_update_s,
                      at=t_call + (i + 1) * per_update_s)


def _hparams(run: AnakinRun, row: UpdateOutput) -> dict[str, float]:
    """An agent's ``hparam/<name>`` values of an update (one agent's ``row``, on the host):
    with population-based training, the values it trained with; else none."""
    if run.explore is None:
        return {}
    return hparam_scalars(population.names(run.config), row.population.values)


def _hold(seconds: float, flag: SignalFlag) -> None:
    """Waits ``seconds``, or until a signal comes."""
    end = time.perf_counter() + seconds
    while flag.exit_code is None and (left := end - time.perf_counter()) > 0:
        time.sleep(min(left, 0.05))


# ``prepare(config)``: joins the runtime and checks every field before anything compiles.
prepare = functools.partial(train_command.prepare, mode=MODE)
