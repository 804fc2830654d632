"""Run directories written by earlier versions, and what those versions did with them.

``tests/fixtures/old_runs/<commit>/<mode>/`` holds a run that the code at ``<commit>``
trained (``Spec``: a CartPole PPO run to ``first_steps``, a row every update, checkpoints
included; its TensorBoard file and ``curve.png`` left out), and ``<mode>.expected.json`` what
the same code did next with copies of it, fixed seed, XLA's default compile:

- ``extended``: the run continued to ``extended_steps`` (the same command with a larger
  ``total_env_steps``): every ``metrics.jsonl`` row, clock keys aside;
- ``resumed``: the run resumed from its checkpoint at ``resume_from`` (the newer ones
  removed, as a kill before they were written leaves it): every row;
- ``evaluate``: the ``return`` and ``length`` rows of ``<mode>.evaluate``'s table.

tests/runtime/test_old_runs.py does the same with today's code and compares with
``differences``: integers and text exactly, floats to ``RTOL``. The continuations are 2
updates long, so the rounding of another CPU's instruction set (XLA compiles for the host's)
cannot grow into another trajectory (docs/design.md, "Determinism across hosts"). To add a
commit, from the repository root (its code runs with this checkout's virtual environment)::

    python -m tests.old_runs COMMIT

and to see how far another instruction set takes today's continuations (what ``RTOL``
covers)::

    python -m tests.old_runs --drift=host,AVX512,AVX2,AVX,SSE4_2
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

from tests.helpers import ISA_FLAG, REPO, entry_env, read_metrics, reproducible_part

FIXTURES = os.path.join(REPO, "tests", "fixtures", "old_runs")
LEFT_OUT = ("curve.png", "events.out.tfevents")  # not read by a resume; binary, large


@dataclasses.dataclass(frozen=True)
class Spec:
    """One mode's old run: ``python -m <mode>.main --config=<config> <overrides>``."""

    mode: str
    config: str
    overrides: tuple[str, ...]
    first_steps: int
    extended_steps: int
    resume_from: int  # a checkpoint older than the run's last

    evaluate_args: tuple[str, ...] = ()

    def train_args(self, workdir: str, steps: int) -> list[str]:
        return [f"--config={self.config}", *self.overrides,
                f"--config.total_env_steps={steps}", f"--workdir={workdir}"]


# Continuations of 2 updates: across CPU instruction sets the runs' floats first differ by
# 1e-7 (with FMA) to 3e-6 (without) relative, a difference grows about tenfold every 3
# updates, and without FMA Anakin's episode returns part in the 3rd (docs/design.md,
# "Determinism across hosts"). Anakin's greedy episodes are capped at 200 steps: gymnax
# CartPole's float32 physics, which XLA compiles too, is chaotic over a 500-step episode.
SPECS = (
    Spec("anakin", "configs/cartpole_ppo.py",
         ("--config.log_every=1", "--config.updates_per_call=2",
          "--config.checkpoint_every=2"), 10_240, 11_264, 18, ("--max_episode_steps=200",)),
    Spec("sebulba", "configs/cartpole_ppo_sebulba.py",
         ("--config.log_every=1", "--config.checkpoint_every=2"), 18_432, 19_968, 22),
)
COMMITS = ("a6ef962", "12bdebb")  # before the staleness fields; before run formats had versions
# Floats of a continuation agree to RTOL of the larger magnitude, or to ATOL for values near
# zero (approx_kl and the policy loss of a nearly converged policy are ~1e-6: float32's
# rounding of their terms, not a signal); integers and text agree exactly. Measured worst over
# the 2 updates (``python -m tests.old_runs --drift``): 0 under AVX-512 and AVX2, 1.6e-4
# (Anakin) and 1.8e-7 (Sebulba) capped at AVX, without FMA; docs/design.md, "Determinism
# across hosts".
RTOL = 1e-3
ATOL = 1e-6


def run(code: str, module: str, args: list[str], isa: str = "") -> subprocess.CompletedProcess:
    """``python -m module *args`` with the code of the checkout ``code``, XLA's defaults;
    ``isa``: XLA compiles for at most that instruction set (``ISA_FLAG``; "": the host's, or
    the cap the test session runs under, ``tests.helpers.xla_flags``)."""
    env = dict(entry_env(optimized=True), PYTHONPATH=code)
    if isa:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {ISA_FLAG}={isa}".strip()
    return subprocess.run([sys.executable, "-m", module, *args], cwd=code, env=env,
                          capture_output=True, text=True, timeout=600)


def checked(proc: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    if proc.returncode != 0:
        raise RuntimeError(f"{proc.args} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


def copy_run(src: str, dst: str, keep_until: int | None = None) -> str:
    """A copy of run ``src`` at ``dst``; without the checkpoints after ``keep_until``."""
    shutil.copytree(src, dst)
    if keep_until is not None:
        checkpoints = os.path.join(dst, "checkpoints")
        for name in os.listdir(checkpoints):
            if name.isdigit() and int(name) > keep_until:
                shutil.rmtree(os.path.join(checkpoints, name))
    return dst


def evaluate_rows(stdout: str) -> list[str]:
    """The ``return`` and ``length`` rows of an evaluate command's table."""
    return [ln for ln in stdout.splitlines() if ln.split()[:1] in (["return"], ["length"])]


def continued(code: str, spec: Spec, run_dir: str, scratch: str, isa: str = "") -> dict:
    """What the code of ``code`` does with copies of ``run_dir`` (``isa``: see ``run``): the
    expected record."""
    out = {}
    for name, steps, keep in (("extended", spec.extended_steps, None),
                              ("resumed", spec.first_steps, spec.resume_from)):
        workdir = copy_run(run_dir, os.path.join(scratch, name), keep)
        checked(run(code, f"{spec.mode}.main", spec.train_args(workdir, steps), isa))
        out[name] = reproducible_part(read_metrics(workdir))
    workdir = copy_run(run_dir, os.path.join(scratch, "evaluate"))
    args = [f"--workdir={workdir}", *spec.evaluate_args]
    out["evaluate"] = evaluate_rows(checked(run(code, f"{spec.mode}.evaluate", args, isa)).stdout)
    return out


def differences(now, expected, rtol: float = RTOL, atol: float = ATOL,
                where: str = "") -> list[str]:
    """Where ``now`` and ``expected`` (records of ``continued``: dicts, lists, numbers,
    text; an evaluate row's numbers read as floats) differ: a float by more than ``atol``
    and more than ``rtol`` of the larger magnitude, an integer, a bool, None or a word at
    all, a structure in its keys or length. One line each, naming the place
    (``extended[3].loss/policy``)."""
    if isinstance(expected, str) and isinstance(now, str):
        now, expected = now.split(), expected.split()
        if len(now) != len(expected) or len(expected) <= 1:
            return [] if now == expected else [f"{where}: {' '.join(now)!r}, expected "
                                                 f"{' '.join(expected)!r}"]
        now, expected = [_number(w) for w in now], [_number(w) for w in expected]
    if isinstance(expected, dict) and isinstance(now, dict):
        if now.keys() != expected.keys():
            return [f"{where}: keys {sorted(now)}, expected {sorted(expected)}"]
        return [d for k in expected
                for d in differences(now[k], expected[k], rtol, atol, f"{where}.{k}".lstrip("."))]
    if isinstance(expected, list) and isinstance(now, list):
        if len(now) != len(expected):
            return [f"{where}: {len(now)} items, expected {len(expected)}"]
        return [d for i, (a, b) in enumerate(zip(now, expected))
                for d in differences(a, b, rtol, atol, f"{where}[{i}]")]
    if type(now) is float and type(expected) is float:
        if abs(now - expected) <= max(atol, rtol * max(abs(now), abs(expected))):
            return []
    elif type(now) is type(expected) and now == expected:
        return []
    return [f"{where}: {now!r}, expected {expected!r}"]


def worst_relative(now, expected) -> float:
    """The largest relative difference of ``differences`` between the records, floats
    within ``ATOL`` aside (0.0 where they are equal; inf where they differ in anything but
    floats)."""
    worst = 0.0
    for line in differences(now, expected, rtol=0.0):
        got, want = (_number(v.strip()) for v in line.split(": ", 1)[1].split(", expected "))
        if not (isinstance(got, float) and isinstance(want, float)):
            return math.inf
        worst = max(worst, abs(got - want) / max(abs(got), abs(want)))
    return worst


def drift(isas: list[str]) -> None:
    """Prints, for each fixture and instruction set (``run``'s ``isa``), the worst relative
    difference of today's continuation from the stored one: what ``RTOL`` must cover."""
    for commit in COMMITS:
        for spec in SPECS:
            run_dir = os.path.join(FIXTURES, commit, spec.mode)
            with open(f"{run_dir}.expected.json") as f:
                expected = json.load(f)
            for isa in isas:
                with tempfile.TemporaryDirectory() as tmp:
                    now = continued(REPO, spec, run_dir, tmp, isa)
                print(f"{commit} {spec.mode:8s} {isa or 'host':7s} worst relative difference "
                      f"{worst_relative(now, expected):.2e}", flush=True)


def _number(word: str):
    """A table cell as a float where it reads as one, else the word."""
    try:
        return float(word)
    except ValueError:
        return word


def make(commit: str) -> None:
    """Writes ``FIXTURES/<commit>``: each spec's run and expected record, by ``commit``'s code."""
    with tempfile.TemporaryDirectory() as tmp:
        code = os.path.join(tmp, "code")
        checked(subprocess.run(["git", "worktree", "add", "--detach", code, commit], cwd=REPO,
                               capture_output=True, text=True))
        try:
            for spec in SPECS:
                target = os.path.join(FIXTURES, commit, spec.mode)
                shutil.rmtree(target, ignore_errors=True)
                checked(run(code, f"{spec.mode}.main",
                            spec.train_args(os.path.join(tmp, spec.mode), spec.first_steps)))
                shutil.copytree(os.path.join(tmp, spec.mode), target,
                                ignore=lambda _, names: [n for n in names
                                                         if n.startswith(LEFT_OUT)])
                expected = continued(code, spec, target, os.path.join(tmp, f"{spec.mode}-next"))
                with open(f"{target}.expected.json", "w") as f:
                    json.dump(expected, f, indent=1)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", code], cwd=REPO)


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m tests.old_runs",
        description="Writes tests/fixtures/old_runs/COMMIT: old runs and what their code did.")
    parser.add_argument("commits", nargs="*", default=list(COMMITS),
                        help=f"commits to check out and run (default: {' '.join(COMMITS)})")
    parser.add_argument("--drift", metavar="ISA,...",
                        help="instead: continue the stored fixtures with today's code under "
                             "these instruction sets ('host', or XLA's names: AVX2, AVX, "
                             "...) and print the worst relative difference of each")
    args = parser.parse_args(argv)
    if args.drift:
        drift(["" if isa == "host" else isa for isa in args.drift.split(",")])
        return
    for commit in args.commits:
        make(commit)


if __name__ == "__main__":
    main()
