"""Property test of the command-line tools' arguments (docs/design.md, "Exit codes"): random
flags and values for ``benchmarks.ablate``, ``benchmarks.aggregate``, ``runtime.commands.launch``
and the evaluate commands' argument check. Every draw ends in exit 0 (the arguments are fine) or a
one-line exit 2 naming a flag; never a traceback or another exception.

Drawn in-process, so that a draw costs microseconds: the parsers (ablate, launch), the whole
of ``aggregate.main`` (it checks its arguments and reads the run directories before any
work), and ``runtime.commands.evaluation.check_args`` (what ``python -m anakin.evaluate`` runs
before loading anything; its flag parsing is absl's, whose errors are one line by
``runtime.process.flags.parse_flags``, tested in tests/runtime/test_evaluation.py).
"""

from __future__ import annotations

import contextlib
import io

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks import ablate, aggregate
from runtime.commands import evaluation, launch
from runtime.process import exits

VALUES = st.one_of(
    st.sampled_from(["", "0", "-1", "1", "3", "nan", "inf", "-inf", "1e400", "2**31",
                     "99999999999999999999", "abc", ",", ",,", "architectures", "pipelines",
                     "architectures,nope", "(", "^anakin-", "/proc/x", "/nonexistent/dir",
                     "/dev/null", "/tmp", "x.mp4", "/proc/x.mp4", "a b", "--", "\x00"]),
    st.text(max_size=12),
    st.integers(-10**20, 10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr))


def _argv(names):
    flag = st.tuples(st.sampled_from(names), VALUES).map(lambda nv: f"--{nv[0]}={nv[1]}")
    bare = st.sampled_from([f"--{n}" for n in names] + ["-x", "--", "positional"])
    return st.lists(st.one_of(flag, bare), max_size=6)


def _outcome(fn) -> tuple[int, str]:
    """``(exit code, stderr)`` of ``fn()``: 0 when it returns (or returns 0)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = fn()
    except SystemExit as e:
        code = e.code
    return (code or 0), err.getvalue()


def _assert_clean(code, err, argv):
    assert code in (0, 2), (argv, code, err)
    if code == 2:
        assert err.count("\n") == 1 and err.endswith("\n"), (argv, err)
        assert "Traceback" not in err, (argv, err)


SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(_argv(["suite", "seeds", "out", "budget_scale", "cell_timeout_s", "cells",
              "no_progress"]))
def test_ablate_arguments(argv):
    _assert_clean(*_outcome(lambda: ablate.parse_args(argv) and 0), argv)


@SETTINGS
@given(_argv(["out", "last_fraction", "reps", "seed", "key", "label", "drop_extra_runs"]))
def test_aggregate_arguments(argv):
    _assert_clean(*_outcome(lambda: aggregate.main(argv)), argv)


@SETTINGS
@given(_argv(["num_processes", "devices_per_process", "port", "timeout_s", "grace_s",
              "signal_grace_s"]), st.booleans())
def test_launch_arguments(argv, with_command):
    argv = argv + (["--", "true"] if with_command else [])
    _assert_clean(*_outcome(lambda: launch.parse_args(argv) and 0), argv)


@SETTINGS
@given(st.builds(evaluation.EvalArgs, workdir=VALUES, episodes=st.integers(-5, 10**6),
                 greedy=st.booleans(), video=VALUES, agent=st.integers(-5, 10**6),
                 max_episode_steps=st.integers(-5, 10**9)))
def test_evaluate_argument_check(args):
    """Through ``runtime.process.exits.run_command``, as the evaluate commands run it."""
    _assert_clean(*_outcome(lambda: exits.run_command(lambda: evaluation.check_args(args),
                                                        evaluation.EVALUATE_ERRORS)), args)
