"""Run directories written by earlier versions, and what those versions did with them.

``tests/fixtures/old_runs/<commit>/<mode>/`` holds a run that the code at ``<commit>``
trained (``Spec``: a CartPole PPO run to ``first_steps``, checkpoints included; its
TensorBoard file and ``curve.png`` left out), and ``<mode>.expected.json`` what the same
code did next with copies of it, fixed seed, XLA's default compile:

- ``extended``: the run continued to ``extended_steps`` (the same command with a larger
  ``total_env_steps``): every ``metrics.jsonl`` row, clock keys aside;
- ``resumed``: the run resumed from its checkpoint at ``resume_from`` (the newer ones
  removed, as a kill before they were written leaves it): every row;
- ``evaluate``: the ``return`` and ``length`` rows of ``<mode>.evaluate``'s table.

tests/runtime/test_old_runs.py does the same with today's code and compares (docs/design.md,
"Runs outlive upgrades"). To add a commit, from the repository root (its code runs with
this checkout's virtual environment)::

    python -m tests.old_runs COMMIT
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile

from tests.helpers import REPO, entry_env, read_metrics, reproducible_part

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

    def train_args(self, workdir: str, steps: int) -> list[str]:
        return [f"--config={self.config}", *self.overrides,
                f"--config.total_env_steps={steps}", f"--workdir={workdir}"]


SPECS = (
    Spec("anakin", "configs/cartpole_ppo.py",
         ("--config.log_every=10", "--config.updates_per_call=10",
          "--config.checkpoint_every=20"), 20_480, 40_960, 20),
    Spec("sebulba", "configs/cartpole_ppo_sebulba.py", ("--config.checkpoint_every=5",),
         24_000, 48_000, 25),
)
COMMITS = ("a6ef962", "12bdebb")  # before the staleness fields; before run formats had versions


def run(code: str, module: str, args: list[str]) -> subprocess.CompletedProcess:
    """``python -m module *args`` with the code of the checkout ``code``, XLA's defaults."""
    env = dict(entry_env(optimized=True), PYTHONPATH=code)
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


def continued(code: str, spec: Spec, run_dir: str, scratch: str) -> dict:
    """What the code of ``code`` does with copies of ``run_dir``: the expected record."""
    out = {}
    for name, steps, keep in (("extended", spec.extended_steps, None),
                              ("resumed", spec.first_steps, spec.resume_from)):
        workdir = copy_run(run_dir, os.path.join(scratch, name), keep)
        checked(run(code, f"{spec.mode}.main", spec.train_args(workdir, steps)))
        out[name] = reproducible_part(read_metrics(workdir))
    workdir = copy_run(run_dir, os.path.join(scratch, "evaluate"))
    out["evaluate"] = evaluate_rows(
        checked(run(code, f"{spec.mode}.evaluate", [f"--workdir={workdir}"])).stdout)
    return out


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
    for commit in parser.parse_args(argv).commits:
        make(commit)


if __name__ == "__main__":
    main()
