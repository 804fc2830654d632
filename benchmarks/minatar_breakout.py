"""Anakin PPO on MinAtar Breakout for the full 10M env steps: wall-clock and learning curve.

Runs ``configs/minatar_breakout_ppo.py`` (or reads a finished run with ``--from_run``),
prints the return at a few points, the first env step where the mean return reaches
``--target`` (40 by default: where PureJaxRL's published MinAtar-Breakout PPO curve ends at
10M steps) and the wall-clock, and writes ``curve.png`` (mean episode return vs env steps)
into the run directory.

Run: ``python -m benchmarks.minatar_breakout [--workdir=runs/minatar_breakout]`` (about
15 min on a 2-core CPU) or ``python -m benchmarks.minatar_breakout --from_run=DIR``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from benchmarks.common import dir_problem, flag_checks, path_check
from benchmarks.figures import pyplot
from rlcore.errors import ConfigError
from runtime.config.fields import Number
from runtime.process.arguments import OneLineParser, doc_summary


def check_args(args: argparse.Namespace) -> None:
    """``--target`` a number, ``--from_run`` a directory, ``--select`` ``key=number``; raises
    ``ConfigError`` naming the flag (docs/design.md, "Exit codes")."""
    flag_checks({"target": Number()})(args)
    if args.from_run:
        path_check("from_run", dir_problem)(args)
    if args.select:
        key, equals, value = args.select.partition("=")
        try:
            float(value)
        except ValueError:
            equals = ""
        if not key or not equals:
            raise ConfigError(f"select: {args.select!r} is not key=number, e.g. "
                              "learning_rate=0.005")


def parse_args(argv=None) -> argparse.Namespace:
    """Command-line flags, checked (``check_args``) before any work."""
    p = OneLineParser(prog="python -m benchmarks.minatar_breakout",
                      description=doc_summary(__doc__), check=check_args)
    p.add_argument("--workdir", default="runs/minatar_breakout", help="the run's directory")
    p.add_argument("--from_run", default="", help="plot and summarise this run directory")
    p.add_argument("--target", type=float, default=40.0, help="mean episode return to reach")
    p.add_argument("--select", default="", help="key=value: the agent of a many-agent run "
                   "to read, e.g. learning_rate=0.005")
    return p.parse_args(argv)


def run(workdir: str) -> float:
    """Trains the config from scratch in ``workdir``; returns the wall-clock seconds."""
    from anakin.train import prepare, train
    from configs import minatar_breakout_ppo

    config = minatar_breakout_ppo.get_config()
    prepare(config)
    t0 = time.perf_counter()
    train(config, workdir)
    return time.perf_counter() - t0


def read_curve(workdir: str, select: str = "") -> list[tuple[int, float, float]]:
    """``[(env_steps, mean return, wall_time s)]`` from ``metrics.jsonl``; ``select``
    (``key=value``) keeps one agent's lines."""
    with open(os.path.join(workdir, "metrics.jsonl")) as fh:
        rows = [json.loads(line) for line in fh]
    if select:
        key, value = select.split("=", 1)
        rows = [r for r in rows if key in r and float(r[key]) == float(value)]
    return [(r["env_steps"], r["episode_return"], r["wall_time"]) for r in rows
            if r.get("episode_return") is not None]


def plot(curve, target: float, path: str, title: str) -> None:
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([s / 1e6 for s, _, _ in curve], [r for _, r, _ in curve], label="Anakin PPO")
    ax.axhline(target, color="grey", linestyle="--", label=f"target {target:g}")
    ax.set_xlabel("env steps (millions)")
    ax.set_ylabel("mean episode return")
    ax.set_title(title, fontsize=10)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> None:
    args = parse_args(argv)
    workdir = args.from_run or args.workdir
    wall = None if args.from_run else run(workdir)
    curve = read_curve(workdir, args.select)
    n = len(curve)
    print("env steps -> mean episode return (wall s)")
    for i in sorted({0, n // 4, n // 2, 3 * n // 4, n - 1}):
        s, r, w = curve[i]
        print(f"  {s:>12,} -> {r:7.2f} ({w:6.0f})")
    reached = next(((s, w) for s, r, w in curve if r >= args.target), None)
    print(f"target {args.target:g}: " + (f"reached at {reached[0]:,} env steps, {reached[1]:.0f} s"
                                         if reached else "not reached"))
    print(f"best {max(r for _, r, _ in curve):.2f}; final {curve[-1][1]:.2f}; "
          f"wall-clock {wall if wall is not None else curve[-1][2]:.0f} s")
    path = os.path.join(workdir, "curve.png")
    title = "Anakin PPO on Breakout-MinAtar\nconfigs/minatar_breakout_ppo.py" + (
        f", agent {args.select}" if args.select else "")
    plot(curve, args.target, path, title)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
