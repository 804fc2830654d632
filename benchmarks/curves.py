"""Learning curves of runs, one PNG: the return against env steps and against wall-clock.

``python -m benchmarks.curves RUN [RUN...] [--out=PNG]`` draws every run directory (with
``metrics.jsonl``), labelled by its name; ``--run="LABEL:DIR[,DIR...]"`` (repeatable) draws
several directories as one label (runs of one program with different seeds). Inside a label
the agents are told apart by every swept field and the seed: each variant of a sweep is
its own line, the mean over its seeds with a band from the lowest to the highest seed. The
drawing is ``runtime.run.curves.draw``, the one every run uses for its own ``curve.png``. The
default ``--out`` is ``RUN/curve.png`` for one run, ``curves.png`` for several.
``--target`` adds a dashed line. It prints, per line, the statistic the learning
comparisons use: per agent the mean logged return over the last 20% of training (env steps
above 80% of its last logged step), their mean, and how many reach the target.

A run with nothing to plot (an empty ``metrics.jsonl``, or no finished episode yet: no line
with a finite ``episode_return``) and a file that is not what it should be (a
``metrics.jsonl`` line that is not a JSON object, a ``config.json`` that is not one) print
one ``config error:`` line naming the file (and the line) to stderr and exit 2: the rules
of ``benchmarks.aggregate`` (docs/design.md, "Run directory" and "Exit codes").
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence

from benchmarks.aggregate import InputError, read_json
from benchmarks.aggregate import read_metrics as read_metrics_lines
from envs.registry import return_axis_label
from rlcore.numbers import readable
from runtime.process.arguments import OneLineParser, doc_summary
from runtime.process.exits import EXIT_BAD_INPUT
from runtime.process.one_line import single_line
from runtime.run import files
from runtime.run.curves import Line, common_label, draw, run_lines

LAST_FRACTION = 0.2  # the statistic's share of training (benchmarks.seeds' too)


def parse_args(argv=None):
    p = OneLineParser(prog="python -m benchmarks.curves", description=doc_summary(__doc__))
    p.add_argument("RUN", nargs="*", help="run directories (with metrics.jsonl), one label "
                                          "each: the directory's name")
    p.add_argument("--run", action="append", default=[],
                   help="LABEL:DIR[,DIR...], repeatable: one label over several run "
                        "directories")
    p.add_argument("--out", default=None,
                   help="the PNG to write (default: RUN/curve.png for one run, else "
                        "curves.png)")
    p.add_argument("--title", default=None,
                   help="title of the plot (default: the runs' env)")
    p.add_argument("--target", type=float, default=None,
                   help="a dashed line at this return; the agents reaching it are counted")
    args = p.parse_args(argv)
    args.groups = [(os.path.basename(os.path.abspath(d)), [d]) for d in args.RUN]
    for spec in args.run:
        label, _, dirs = spec.partition(":")
        if not label or not dirs:
            p.exit(2, f"config error: --run: {spec!r} is not LABEL:DIR[,DIR...]\n")
        args.groups.append((label, dirs.split(",")))
    if not args.groups:
        p.exit(2, "config error: no run: name RUN directories or --run=LABEL:DIRS\n")
    for _, dirs in args.groups:
        for d in dirs:
            if not os.path.exists(os.path.join(d, "metrics.jsonl")):
                p.exit(2, f"config error: {d}/metrics.jsonl does not exist\n")
    return args


def finite_return(row: dict) -> bool:
    """Whether a metrics line has a finite ``episode_return`` (an episode ended since the
    line before; docs/design.md, "Metrics keys")."""
    value = row.get("episode_return")
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def read_run(workdir: str) -> tuple[list[dict], str | None]:
    """``(metrics lines, env_id)`` of a run directory (docs/design.md, "Run directory"; no
    ``config.json``: env_id None). InputError, naming the file (and the line), where a
    line or ``config.json`` is not a JSON object (``benchmarks.aggregate``'s readers) or
    there is nothing to plot: no lines, or no finished episode yet."""
    path = files.metrics_path(workdir)
    rows = read_metrics_lines(path)
    if not rows:
        raise InputError(path, "no lines, nothing to plot")
    if not any(finite_return(r) for r in rows):
        raise InputError(path, "no line has a finite episode_return (no episode has "
                               "finished yet), nothing to plot")
    config = files.config_path(workdir)
    return rows, read_json(config).get("env_id") if os.path.exists(config) else None


def final_mean(curve) -> float:
    """Mean return of an agent's lines past ``1 - LAST_FRACTION`` of its last logged step."""
    cut = (1 - LAST_FRACTION) * curve[-1][0]
    late = [r for s, r in curve if s > cut]
    return sum(late) / len(late)


def statistic(line: Line, target: float | None) -> str:
    """``LABEL: final-20% mean M (per agent a, b), k/n at >= T``."""
    finals = [final_mean(c) for c in line.steps if c]
    reached = (f", {sum(f >= target for f in finals)}/{len(finals)} at >= {target:g}"
               if target is not None else "")
    return (f"{line.label}: final-20% mean {readable(sum(finals) / len(finals))} (per agent "
            f"{', '.join(readable(f) for f in finals)}){reached}")


def main(argv: Sequence[str] | None = None) -> None:
    """Prints every line's statistic and draws the PNG; bad input (the module's) is one
    ``config error:`` line on stderr and exit 2 (docs/design.md, "Exit codes")."""
    args = parse_args(argv)
    try:
        runs = {d: read_run(d) for _, dirs in args.groups for d in dirs}
    except InputError as e:
        print(single_line(f"config error: {e}"), file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    lines = [line for label, dirs in args.groups
             for line in run_lines([r for d in dirs for r in runs[d][0]], label)]
    for line in lines:
        print(statistic(line, args.target))
    envs = {env_id for _, env_id in runs.values()}
    out = args.out or (os.path.join(args.groups[0][1][0], "curve.png")
                       if len(args.groups) == 1 and len(args.groups[0][1]) == 1
                       else "curves.png")
    title = args.title or ", ".join(sorted(e for e in envs if e)) or "episode return"
    draw(out, lines, title, common_label(return_axis_label(e) for e in envs if e),
         args.target)
    print(f"plot: {out}")


if __name__ == "__main__":
    main()
