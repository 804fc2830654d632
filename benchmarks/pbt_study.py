"""Population-based training against the best fixed learning rate of a sweep, at equal
env steps (docs/ablations/pbt; docs/design.md, "Population-based training").

``python -m benchmarks.pbt_study --out=docs/ablations/pbt --runs=runs/pbt_study`` trains, for
each study (MinAtar Breakout PPO, Pendulum PPO) and each repeat ``r`` (seed ``100 r``), two
programs of the same agents: a sweep of 4 learning rates x ``--seeds`` seeds, and the same
population with PBT on (``--config.pbt.interval``, explored: the learning rate, perturbed by
0.8 or 1.25 within wider bounds than the sweep's). Both programs take the same env steps per
agent, so the same in all. Each program is a ``python -m anakin.main`` process in
``RUNS/<study>-<kind>-r<r>``; a finished one is not run again (its rerun prints ``done:``).

Then it writes into ``OUT``: ``results.csv`` (one row per agent: its score, the mean
episode return over the last 20% of its log lines, ``benchmarks.ablate_report.
return_last20``), ``results.md`` (per study: each fixed learning rate, the best of them in
hindsight and PBT's agents as rliable IQMs with 95% bootstrap intervals over runs,
``benchmarks.aggregate.iqm_interval``), ``<study>_returns.png`` (return against env steps)
and ``<study>_schedule.png`` (the learning rates PBT's agents trained with).
"""

from __future__ import annotations

import csv
import dataclasses
import os
import subprocess
import sys
import time

import numpy as np

from benchmarks import ablate_report as report
from benchmarks.common import flag_checks, read_rows
from benchmarks.figures import pyplot, save_figure
from runtime.config.fields import ABOVE_ZERO, POSITIVE, Choice
from runtime.process.arguments import OneLineParser, doc_summary, str_list

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = ("sweep", "pbt")


@dataclasses.dataclass(frozen=True)
class Study:
    """One env's study: its config file, the swept learning rates, PBT's bounds and
    interval (updates), env steps per agent and the log cadence (updates)."""

    title: str
    config: str
    rates: tuple[float, ...]
    low: float
    high: float
    interval: int
    steps: int
    log_every: int


STUDIES = {
    "breakout": Study("MinAtar Breakout, PPO", "configs/minatar_breakout_ppo.py",
                      (1.25e-3, 2.5e-3, 5e-3, 1e-2), 6.25e-4, 2e-2, 10, 737_280, 5),
    "pendulum": Study("Pendulum, PPO", "configs/pendulum_ppo.py",
                      (5e-4, 1e-3, 2e-3, 4e-3), 2.5e-4, 8e-3, 20, 204_800, 5),
}


def command(study: Study, kind: str, repeat: int, seeds: int, scale: float,
            workdir: str) -> list[str]:
    """The ``anakin.main`` command of one program."""
    steps = int(study.steps * scale)
    args = [sys.executable, "-m", "anakin.main", f"--config={study.config}",
            f"--workdir={workdir}", f"--config.seed={100 * repeat}",
            f"--config.num_seeds={seeds}", f"--config.total_env_steps={steps}",
            f"--config.log_every={study.log_every}", "--config.num_devices=1",
            "--config.sweep.learning_rate=" + ",".join(f"{x:g}" for x in study.rates)]
    if kind == "pbt":
        args += [f"--config.pbt.interval={study.interval}", "--config.pbt.fraction=0.25",
                 f"--config.pbt.low={study.low:g},", f"--config.pbt.high={study.high:g},"]
    return args


def run_program(args: list[str], workdir: str) -> float:
    """Runs one program (its output in ``workdir.log``); returns its seconds."""
    os.makedirs(os.path.dirname(workdir) or ".", exist_ok=True)
    t = time.perf_counter()
    with open(workdir + ".log", "w") as log:
        subprocess.run(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, check=True)
    return time.perf_counter() - t


def agent_records(name: str, kind: str, repeat: int, rows: list[dict]) -> list[dict]:
    """One record per agent of a program: its swept learning rate, seed and score."""
    by_agent: dict[tuple, list[dict]] = {}
    for r in rows:
        by_agent.setdefault((r["learning_rate"], r["seed"]), []).append(r)
    return [{"study": name, "kind": kind, "repeat": repeat, "learning_rate": lr, "seed": seed,
             "score": report.return_last20([r["episode_return"] for r in agent_rows]),
             "env_steps": agent_rows[-1]["env_steps"]}
            for (lr, seed), agent_rows in sorted(by_agent.items())]


def scores_table(name: str, records: list[dict]) -> tuple[str, str]:
    """The study's table (one row per fixed learning rate, the best of them, PBT) and its
    verdict line."""
    from benchmarks.aggregate import iqm_interval

    mine = [r for r in records if r["study"] == name and r["score"] is not None]
    fixed = {}
    for lr in sorted({r["learning_rate"] for r in mine if r["kind"] == "sweep"}):
        fixed[lr] = [r["score"] for r in mine if r["kind"] == "sweep" and r["learning_rate"] == lr]
    pbt = [r["score"] for r in mine if r["kind"] == "pbt"]
    if not fixed or not pbt:
        return "(no finished programs)", ""
    est = {lr: iqm_interval(s) for lr, s in fixed.items()}
    best = max(est, key=lambda lr: est[lr][0])
    est_pbt = iqm_interval(pbt)
    steps = max(r["env_steps"] for r in mine)
    rows = [(f"fixed lr {lr:g}" + (" (best in hindsight)" if lr == best else ""),
             _ci(est[lr]), len(fixed[lr]), f"{steps:,}") for lr in fixed]
    rows.append(("PBT (every agent of the population)", _ci(est_pbt), len(pbt), f"{steps:,}"))
    table = report.markdown_table(("method", "IQM [95% CI]", "runs (agents)",
                                   "env steps per agent"), rows)
    return table, verdict(est[best], est_pbt, best)


def _ci(e: tuple[float, float, float]) -> str:
    return report.ci_text(*e)


def verdict(best: tuple[float, float, float], pbt: tuple[float, float, float],
            lr: float) -> str:
    """Whether PBT beat the best fixed learning rate: IQM above and intervals apart."""
    if pbt[0] > best[0] and pbt[1] > best[2]:
        return f"PBT beat the best fixed learning rate ({lr:g}): its interval lies above."
    if pbt[0] > best[0]:
        return (f"PBT's IQM is above the best fixed learning rate's ({lr:g}), but the "
                "intervals overlap: not a clear win at this number of runs.")
    if pbt[2] < best[1]:
        return f"PBT did worse than the best fixed learning rate ({lr:g}): its interval lies below."
    return (f"PBT did not beat the best fixed learning rate ({lr:g}): its IQM is below, the "
            "intervals overlap.")


def _curve(rows: list[dict]) -> list[tuple[float, float]]:
    return [(r["env_steps"] / 1e3, r["episode_return"]) for r in rows
            if r["episode_return"] is not None]


def plot_returns(path: str, study: Study, programs: dict[tuple, list[dict]]) -> str:
    """Return against env steps: mean and 95% band over every agent of each fixed learning
    rate and of PBT's populations."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    groups: dict[str, list] = {}
    for (kind, _), rows in programs.items():
        for lr in sorted({r["learning_rate"] for r in rows}):
            for seed in sorted({r["seed"] for r in rows}):
                agent = [r for r in rows if r["learning_rate"] == lr and r["seed"] == seed]
                label = "PBT (all agents)" if kind == "pbt" else f"fixed lr {lr:g}"
                groups.setdefault(label, []).append(_curve(agent))
    for label, curves in groups.items():
        curves = [c for c in curves if len(c) > 1]
        if not curves:
            continue
        grid = np.linspace(max(c[0][0] for c in curves), min(c[-1][0] for c in curves), 60)
        mean, lo, hi, _ = report.band(curves, grid)
        style = dict(color="black", linewidth=2.2) if label.startswith("PBT") else {}
        (line,) = ax.plot(grid, mean, label=f"{label} ({len(curves)} agents)", **style)
        ax.fill_between(grid, lo, hi, color=line.get_color(), alpha=0.15)
    ax.set_xlabel("env steps per agent (thousands)")
    ax.set_ylabel("mean episode return")
    ax.set_title(f"{study.title}: PBT against a fixed learning-rate sweep\n(mean over agents, "
                 "95% Student-t band)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def plot_schedule(path: str, study: Study, programs: dict[tuple, list[dict]]) -> str:
    """The learning rate each PBT agent trained with against env steps (one panel per
    repeat), with the sweep's values as dotted lines."""
    plt = pyplot()
    pbt = {r: rows for (kind, r), rows in sorted(programs.items()) if kind == "pbt"}
    fig, axes = plt.subplots(1, max(len(pbt), 1), figsize=(4.2 * max(len(pbt), 1), 4.6),
                             squeeze=False, sharey=True, layout="constrained")
    for ax, (repeat, rows) in zip(axes[0], pbt.items()):
        agents = sorted({(r["learning_rate"], r["seed"]) for r in rows})
        for i, (lr, seed) in enumerate(agents):
            mine = [r for r in rows if (r["learning_rate"], r["seed"]) == (lr, seed)]
            ax.step([r["env_steps"] / 1e3 for r in mine],
                    [r["hparam/learning_rate"] for r in mine],
                    where="post", label=f"agent {i} (started at {lr:g})")
        for lr in study.rates:
            ax.axhline(lr, color="grey", linestyle=":", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_xlabel("env steps per agent (thousands)")
        ax.set_title(f"repeat {repeat} (seed {100 * repeat})", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("learning rate (log scale)")
    if pbt:
        fig.legend(*axes[0][0].get_legend_handles_labels(), loc="outside lower center",
                   ncol=4, fontsize=7)
    fig.suptitle(f"{study.title}: the learning rates PBT's agents trained with\n(dotted: the "
                 "sweep's values)", fontsize=10)
    return save_figure(fig, path, tight=False)


def write_report(out: str, runs: str, names: list[str], seeds: int, scale: float) -> None:
    """results.csv, results.md and the plots from every finished program under ``runs``."""
    os.makedirs(out, exist_ok=True)
    records, sections, walls = [], [], {}
    for name in names:
        study = STUDIES[name]
        programs = {}
        for kind in KINDS:
            for repeat in range(100):
                workdir = os.path.join(runs, f"{name}-{kind}-r{repeat}")
                if not os.path.isdir(workdir):
                    break
                rows = read_rows(workdir)
                if rows and rows[-1]["env_steps"] >= int(study.steps * scale) - 1:
                    programs[(kind, repeat)] = rows
                    walls.setdefault(f"{name} {kind}", []).append(rows[-1]["wall_time"])
                    records += agent_records(name, kind, repeat, rows)
        table, line = scores_table(name, records)
        plots = [plot_returns(os.path.join(out, f"{name}_returns.png"), study, programs),
                 plot_schedule(os.path.join(out, f"{name}_schedule.png"), study, programs)]
        repeats = sorted({r for k, r in programs if k == "pbt"})
        sections.append(_section(study, name, table, line, repeats, seeds, scale, plots))
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(records[0]) if records else ["study"])
        w.writeheader()
        w.writerows(records)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    wall = ", ".join(f"{k} {np.mean(v):.0f} s" for k, v in walls.items())
    head = (f"# PBT against a fixed learning-rate sweep\n\n"
            f"Written by `python -m benchmarks.pbt_study` on {os.cpu_count()} CPU cores (one "
            f"JAX CPU device), load average {load} when written. Wall-clock per program "
            f"(mean, compile included): {wall or 'none'}.\n")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join([head, *sections]))


def _section(study: Study, name: str, table: str, line: str, repeats: list[int],
             seeds: int, scale: float, plots: list[str]) -> str:
    steps = int(study.steps * scale)
    rates = ", ".join(f"{x:g}" for x in study.rates)
    return "\n".join([
        f"## {study.title}", "",
        f"`{study.config}`, {steps:,} env steps per agent. Each repeat (seed 100 r, "
        f"repeats {repeats}) trains one program of {len(study.rates)} learning rates "
        f"({rates}) x {seeds} seeds without PBT and one of the same agents with PBT (every "
        f"{study.interval} updates the bottom 25% copy an agent of the top 25% and multiply "
        f"its learning rate by 0.8 or 1.25 within [{study.low:g}, {study.high:g}]; ranked by "
        "the mean return since the previous exploit). Equal env steps: each program trains "
        f"{len(study.rates) * seeds} agents of {steps:,} env steps.", "",
        table, "",
        "Score: an agent's mean episode return over the last 20% of its log lines; IQM over "
        "runs (each agent of a program a run) with its 95% percentile bootstrap interval "
        "(rliable, 2000 replications, seed 0). The best fixed learning rate is chosen in "
        "hindsight on these same runs, which favours it. Both configs anneal the learning "
        "rate linearly to 0: the values swept and explored, and those the schedule plot "
        "shows, are the rate the annealing starts from.", "",
        f"**{line}**" if line else "", "",
        *[f"![{os.path.basename(p)}]({os.path.basename(p)})" for p in plots], ""])


def parse_args(argv=None):
    p = OneLineParser(prog="python -m benchmarks.pbt_study", description=doc_summary(__doc__),
                      check=flag_checks({"studies": Choice(tuple(STUDIES)), "repeats": POSITIVE,
                                         "seeds": POSITIVE,
                                         "scale": ABOVE_ZERO}))
    p.add_argument("--out", default="docs/ablations/pbt", help="where the report goes")
    p.add_argument("--runs", default="runs/pbt_study", help="where the programs' run dirs go")
    p.add_argument("--studies", type=str_list, default=["pendulum", "breakout"],
                   help=f"comma-separated, of {', '.join(STUDIES)}")
    p.add_argument("--repeats", type=int, default=3, help="programs of each kind per study")
    p.add_argument("--seeds", type=int, default=2, help="seeds per learning rate")
    p.add_argument("--scale", type=float, default=1.0, help="multiplies env steps per agent")
    p.add_argument("--report_only", action="store_true", help="write the report, run nothing")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    names = args.studies
    for repeat in range(0 if args.report_only else args.repeats):
        for name in names:
            for kind in KINDS:
                workdir = os.path.join(args.runs, f"{name}-{kind}-r{repeat}")
                cmd = command(STUDIES[name], kind, repeat, args.seeds, args.scale, workdir)
                seconds = run_program(cmd, workdir)
                print(f"{name}-{kind}-r{repeat}: {seconds:.0f} s", flush=True)
    write_report(args.out, args.runs, names, args.seeds, args.scale)


if __name__ == "__main__":
    main()
