"""Learning curves of finished runs, one PNG: episode return against env steps.

``python -m benchmarks.curves --out=curve.png --title=TEXT --target=20
--run="Anakin:DIR" --run="Sebulba:DIR1,DIR2,DIR3"`` draws, for every ``LABEL:DIRS``, the
mean over the agents of its run directories (a ``num_seeds`` run holds several, told apart
by their ``seed`` key) at the env steps all of them logged, with the 95% Student-t interval
of that mean as a band (benchmarks.ablate_report.band), clipped to the return range of the
runs' env (envs.registry.return_range, from their config.json); ``--each`` adds every
agent as a thin line; ``--target`` adds a dashed line. It prints, per label, the statistic the
learning comparisons use: per agent the mean logged return over the last 20% of training
(env steps above 80% of the last logged step), their mean, and how many reach the target.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict

import numpy as np

from benchmarks.common import read_rows
from benchmarks.seeds import final_means
from runtime.arguments import OneLineParser, doc_summary


def parse_args(argv=None):
    p = OneLineParser(prog="python -m benchmarks.curves", description=doc_summary(__doc__))
    p.add_argument("--run", action="append", required=True,
                   help="LABEL:DIR[,DIR...], repeatable: one curve per label over the run "
                        "directories (with metrics.jsonl)")
    p.add_argument("--out", required=True, help="the PNG to write")
    p.add_argument("--title", default="episode return",
                   help="title of the plot (default: %(default)s)")
    p.add_argument("--target", type=float, default=None,
                   help="a dashed line at this return; the agents reaching it are counted")
    p.add_argument("--each", action="store_true",
                   help="also draw every agent as a thin line")
    args = p.parse_args(argv)
    for spec in args.run:
        label, _, dirs = spec.partition(":")
        if not label or not dirs:
            p.exit(2, f"config error: --run: {spec!r} is not LABEL:DIR[,DIR...]\n")
        for d in dirs.split(","):
            if not os.path.exists(os.path.join(d, "metrics.jsonl")):
                p.exit(2, f"config error: --run: {d}/metrics.jsonl does not exist\n")
    return args


def agent_curves(workdir: str) -> list[list[tuple[int, float]]]:
    """``[(env_steps, episode_return)]`` of every agent in ``workdir/metrics.jsonl``."""
    by_agent = defaultdict(list)
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            if row.get("episode_return") is not None:
                by_agent[row.get("seed", 0)].append((row["env_steps"], row["episode_return"]))
    return [sorted(c) for _, c in sorted(by_agent.items())]


def env_range(dirs: list[str]) -> tuple[float | None, float | None]:
    """The return range of the env of the runs in ``dirs`` (their config.json's ``env_id``)
    when they share one; ``(None, None)`` (no bound) otherwise or without config.json."""
    from envs.registry import return_range

    envs = set()
    for d in dirs:
        path = os.path.join(d, "config.json")
        if not os.path.exists(path):
            return None, None
        with open(path) as f:
            envs.add(json.load(f).get("env_id"))
    return return_range(envs.pop()) if len(envs) == 1 and None not in envs else (None, None)


def mean_curve(curves) -> list[tuple[int, float]]:
    """The mean over ``curves`` at the env steps every one of them logged."""
    common = set.intersection(*(set(s for s, _ in c) for c in curves))
    values = [dict(c) for c in curves]
    return [(s, sum(v[s] for v in values) / len(values)) for s in sorted(common)]


def main(argv=None) -> None:
    args = parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.ablate_report import band

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    clipped = False
    for i, spec in enumerate(args.run):
        label, _, dirs = spec.partition(":")
        dirs = dirs.split(",")
        curves = [c for d in dirs for c in agent_curves(d)]
        # seeds.py's statistic, the budget taken as the last logged step (a stopped run)
        finals = [f for d in dirs for f in final_means(
            read_rows(d), max(r["env_steps"] for r in read_rows(d))).values()]
        color = f"C{i}"
        if args.each:
            for c in curves:
                ax.plot([s / 1e6 for s, _ in c], [r for _, r in c], color=color, lw=0.7,
                        alpha=0.4)
        grid = np.array([s for s, _ in mean_curve(curves)], float)
        mean, lo, hi, cut = band(curves, grid, *env_range(dirs))
        clipped |= cut
        ax.plot(grid / 1e6, mean, color=color, lw=2,
                label=f"{label}: mean of {len(curves)}" + (" (thin: each)" if args.each else ""))
        if len(curves) > 1:
            ax.fill_between(grid / 1e6, lo, hi, color=color, alpha=0.2)
        reached = (f", {sum(f >= args.target for f in finals)}/{len(finals)} at >= "
                   f"{args.target:g}" if args.target is not None else "")
        print(f"{label}: final-20% mean {sum(finals) / len(finals):.2f} (per agent "
              f"{', '.join(f'{f:.1f}' for f in finals)}){reached}")
    if args.target is not None:
        ax.axhline(args.target, color="grey", ls="--", lw=1, label=f"target {args.target:g}")
    ax.set_xlabel("env steps (millions)")
    ax.set_ylabel("mean episode return (game score)")
    what = "bands: 95% t-interval of the mean over agents" + (
        ", clipped to the env's return range" if clipped else "")
    ax.set_title(f"{args.title}\n({what})", fontsize=10)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    plt.close(fig)
    print(f"plot: {args.out}")


if __name__ == "__main__":
    main()
