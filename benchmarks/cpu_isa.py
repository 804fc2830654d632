"""One Anakin config under several CPU instruction sets: how far the runs part, and what a cap
costs (docs/design.md, "Determinism across hosts").

``python -m benchmarks.cpu_isa [--config=configs/cartpole_ppo.py] [--isas=host,AVX2,AVX]
[--seeds=1] [--total_env_steps=40960] [--rounds=3] [--timing_env_steps=409600]
[--out=runs/cpu_isa]`` trains the config (fixed seed) under each instruction set, as
``python -m anakin.main`` with ``XLA_FLAGS=--xla_cpu_max_isa=ISA`` (``host``: no cap, XLA
compiles for this CPU): once for ``--total_env_steps`` with a row every update, then
``--rounds`` timed runs of ``--timing_env_steps`` as the config logs, the sets alternating
within each round. It prints, per set: the first update whose floats differ from the first
set's run, their relative difference there, the first update whose episode return differs,
the final-20% mean return over seeds (as benchmarks.seeds) and how many seeds reach
``--threshold``, and the steady env steps/s of the timed runs (median, compile excluded) as
a ratio to the first set's. ``OUT/cpu_isa.png`` plots the relative
difference and the return against the update; the table goes to ``OUT/cpu_isa.md``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

from benchmarks.ablate_report import steady_rate
from benchmarks.common import file_problem, flag_checks, format_table, path_check, read_rows
from benchmarks.figures import pyplot, save_figure
from benchmarks.seeds import final_means
from rlcore.errors import ConfigError
from rlcore.numbers import readable
from runtime.config.fields import POSITIVE, Choice, Number
from runtime.config.xla_flags import ISA_FLAG
from runtime.process.arguments import OneLineParser, doc_summary, str_list

# XLA's caps (xla_cpu_max_isa); "host" is none.
ISAS = ("host", "SSE4_2", "AVX", "AVX2", "AVX512", "AVX512_VNNI", "AVX512_BF16", "AMX")
TINY = 1e-6  # floats below this are float32 rounding of their terms (tests/old_runs.py, ATOL)


def host_isa(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The newest of XLA's caps this CPU has (its flags in ``cpuinfo``), or "unknown"."""
    try:
        with open(cpuinfo) as f:
            flags = set(next((ln for ln in f if ln.startswith("flags")), "").split())
    except OSError:
        return "unknown"
    for isa, flag in (("AVX512", "avx512f"), ("AVX2", "avx2"), ("AVX", "avx"),
                      ("SSE4_2", "sse4_2")):
        if flag in flags:
            return isa + (" with FMA" if "fma" in flags and isa in ("AVX", "AVX2") else "")
    return "unknown"


def parse_args(argv=None):
    p = OneLineParser(prog="python -m benchmarks.cpu_isa", description=doc_summary(__doc__),
                      check=check_args)
    p.add_argument("--config", default="configs/cartpole_ppo.py", help="an Anakin config file")
    p.add_argument("--isas", type=str_list, default=["host", "AVX2", "AVX"],
                   help=f"comma-separated, the first the reference; of {', '.join(ISAS)}")
    p.add_argument("--rounds", type=int, default=3, help="runs per set, alternating")
    p.add_argument("--seeds", type=int, default=1, help="num_seeds of each run")
    p.add_argument("--total_env_steps", type=int, default=40_960,
                   help="the compared runs' budget")
    p.add_argument("--timing_env_steps", type=int, default=409_600,
                   help="the timed runs' budget")
    p.add_argument("--threshold", type=float, default=475.0,
                   help="a seed reaches it when its final-20%% mean is >= this")
    p.add_argument("--out", default="runs/cpu_isa", help="output directory")
    return p.parse_args(argv)


def check_args(args) -> None:
    """The flags' rules, before any run; raises ``ConfigError`` naming the flag
    (docs/design.md, "Exit codes")."""
    flag_checks({"isas": Choice(ISAS), "rounds": POSITIVE, "seeds": POSITIVE,
                 "total_env_steps": POSITIVE, "timing_env_steps": POSITIVE,
                 "threshold": Number()}, path_check("config", file_problem))(args)
    if len(args.isas) < 2 or len(set(args.isas)) < len(args.isas):
        raise ConfigError(f"isas: {args.isas} must be two or more distinct of "
                          f"{', '.join(ISAS)}")


def train(args, isa: str, workdir: str, steps: int, every_update: bool) -> None:
    """One fixed-seed run of ``args.config`` for ``steps`` env steps with XLA capped at
    ``isa``; a row every update where ``every_update``, else as the config logs."""
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
             if not f.startswith(f"{ISA_FLAG}=")]
    if isa != "host":
        flags.append(f"{ISA_FLAG}={isa}")
    env = dict(os.environ, XLA_FLAGS=" ".join(flags), JAX_PLATFORMS="cpu")
    cmd = [sys.executable, "-m", "anakin.main", f"--config={args.config}",
           f"--config.num_seeds={args.seeds}", f"--config.total_env_steps={steps}",
           *(["--config.log_every=1"] * every_update), "--config.compile_cache_dir=off",
           f"--workdir={workdir}", "--fresh"]
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def relative_gap(a: dict, b: dict) -> float:
    """The largest relative difference of two rows' float keys above ``TINY``."""
    gaps = [abs(a[k] - b[k]) / max(abs(a[k]), abs(b[k])) for k in a
            if isinstance(a[k], float) and isinstance(b.get(k), float)
            and max(abs(a[k]), abs(b[k])) > TINY and not k.startswith(("sps", "wall", "time"))]
    return max(gaps, default=0.0)


def parting(ref: list[dict], rows: list[dict]) -> dict:
    """Where ``rows`` part from ``ref`` (same updates): the first update with a float
    difference, its size, the first update whose episode return differs, and the gap per
    update."""
    gaps = [relative_gap(a, b) for a, b in zip(ref, rows)]
    first = next((i for i, g in enumerate(gaps) if g > 0), None)
    returns = next((a["update"] for a, b in zip(ref, rows)
                    if a["episode_return"] != b["episode_return"]), None)
    return {"first": None if first is None else ref[first]["update"],
            "size": None if first is None else gaps[first], "returns": returns, "gaps": gaps}


def compared(args, workdir: str) -> dict:
    """A compared run's rows (seed 0) and final-20% means over seeds."""
    rows = read_rows(workdir)
    return {"rows": [r for r in rows if int(r.get("seed", 0)) == 0],
            "means": list(final_means(rows, args.total_env_steps).values())}


def steady_sps(args, workdir: str) -> float:
    """A timed run's env steps/s after its first call (``steady_rate``, all agents)."""
    with open(os.path.join(workdir, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(workdir, "timing.json")) as f:
        timing = json.load(f)
    sps, _ = steady_rate(timing, config["num_envs"] * config["num_steps"] * args.seeds)
    if sps is None:
        raise SystemExit(f"{workdir}: one call only; give a longer --timing_env_steps")
    return sps


def table(args, runs: dict[str, dict]) -> str:
    ref = runs[args.isas[0]]
    ref_sps = statistics.median(ref["sps"])
    headers = ["isa", "first float difference", "relative there", "first return difference",
               "final-20% mean", f">= {args.threshold:g}", "steps/s", "ratio"]
    lines = []
    for isa in args.isas:
        means = runs[isa]["means"]
        part = parting(ref["rows"], runs[isa]["rows"])
        sps = statistics.median(runs[isa]["sps"])
        lines.append([isa, part["first"] or "-",
                      "-" if part["size"] is None else f"{part['size']:.1e}",
                      part["returns"] or "-", readable(statistics.mean(means)),
                      f"{sum(m >= args.threshold for m in means)}/{len(means)}",
                      f"{sps:,.0f}", f"{sps / ref_sps:.2f}"])
    return format_table(headers, lines)


def plot(args, runs: dict[str, dict], path: str) -> None:
    plt = pyplot()
    fig, (gap_ax, ret_ax) = plt.subplots(1, 2, figsize=(11, 4))
    ref = runs[args.isas[0]]["rows"]
    for isa in args.isas:
        rows = runs[isa]["rows"]
        updates = [r["update"] for r in rows]
        if isa != args.isas[0]:
            gaps = [max(g, 1e-9) for g in parting(ref, rows)["gaps"]]
            gap_ax.semilogy(updates, gaps, label=f"{isa} vs {args.isas[0]}")
        ret_ax.plot(updates, [r["episode_return"] for r in rows], label=isa)
    gap_ax.set(title="Largest relative difference of the row's floats\n(seed 0; 1e-9: equal)",
               xlabel="update", ylabel="relative difference")
    ret_ax.set(title=f"Episode return, seed 0\n{os.path.basename(args.config)}",
               xlabel="update", ylabel="mean return of the episodes ended")
    for ax in (gap_ax, ret_ax):
        ax.legend()
        ax.grid(alpha=0.3)
    save_figure(fig, path)


def main(argv=None) -> None:
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    runs: dict[str, dict] = {}
    for isa in args.isas:
        workdir = os.path.join(args.out, f"{isa}-rows")
        train(args, isa, workdir, args.total_env_steps, every_update=True)
        runs[isa] = dict(compared(args, workdir), sps=[])
    for r in range(args.rounds):
        for isa in args.isas:
            workdir = os.path.join(args.out, f"{isa}-timed")
            train(args, isa, workdir, args.timing_env_steps, every_update=False)
            runs[isa]["sps"].append(steady_sps(args, workdir))
            print(f"round {r + 1}/{args.rounds}: {isa} {runs[isa]['sps'][-1]:,.0f} steps/s",
                  flush=True)
    text = (f"host: {host_isa()}; {args.config}, {args.seeds} seed(s), compared over "
            f"{args.total_env_steps:,} env steps, timed over {args.timing_env_steps:,} in "
            f"{args.rounds} alternating round(s)\n{table(args, runs)}")
    print(text)
    with open(os.path.join(args.out, "cpu_isa.md"), "w") as f:
        f.write(text + "\n")
    plot(args, runs, os.path.join(args.out, "cpu_isa.png"))
    print(f"plot: {os.path.join(args.out, 'cpu_isa.png')}")


if __name__ == "__main__":
    main()
