"""Anakin DQN against CleanRL's own ``dqn_jax.py`` on CartPole-v1, side by side: learning
over seeds at equal settings and env steps, then alternating timed runs.

Both sides train with CleanRL's CartPole defaults, which ``configs/cartpole_dqn.py`` mirrors
(one env, buffer 10,000, batch 128, Adam 2.5e-4, gamma 0.99, a gradient step every 10 env
steps from 10,000 on, the target copied every 500, epsilon 1 -> 0.05 over half the run,
MSE). Ours is ``python -m anakin.main`` (gymnax CartPole, ``--config.num_seeds=S`` in one
program, a row every update); CleanRL's is its script, one process per seed (``--seed=s``,
Gymnasium's CartPole), under ``--peer_python`` with ``benchmarks/peer_dqn_torch`` on its
``PYTHONPATH``: a stand-in for the few ``torch`` names the script and its buffer touch
(tensor conversions, tensorboardX's writer), for a venv without PyTorch. What still differs:
docs/algorithms.md, "DQN" (network, a truncation's bootstrap, the first learning step).

1. Learning: ours in ``OUT/ours``; CleanRL's seed ``s`` in ``OUT/peer/seed_s.log`` (its
   printed ``episodic_return`` lines). A run whose output is there for the same command is
   reused; ``--rerun`` runs everything afresh.
2. The statistic, per side and seed: the plain mean of the returns of the episodes that
   ended after 80% of ``--total`` env steps (ours: each update's ``episode_return``, the
   mean of the episodes that ended in its 10 steps; an update where one ended counts once).
   Per side: the seeds' values, their mean and rliable's IQM with a 95% stratified-bootstrap
   interval (``benchmarks.peer_pqn.summarise``). Table in ``OUT/peer_dqn.md``; the mean
   return against env steps (a 10k-step moving window), shaded over the seeds' min-max, in
   ``OUT/peer_dqn.png``.
3. Speed: ``--speed_reps`` rounds of one seed of ``--speed_total`` env steps, ours then
   CleanRL's, fresh processes. Ours: env steps over wall time after its first compiled call
   (``benchmarks.peer_pqn.ours_steady_sps``); CleanRL's: its last printed ``SPS`` (env steps
   over the whole run's time, its jit compiles included). Per round both and ours/CleanRL's.

Run: ``python -m benchmarks.peer_dqn --peer_python=PEER_VENV/bin/python
--peer_dir=CLEANRL_CHECKOUT --seeds=3 --total=500000 --out=runs/peer_dqn [--speed_reps=1]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Sequence

from benchmarks import peer_pqn
from benchmarks.common import file_problem, flag_checks, format_table, path_check, read_rows
from benchmarks.peer_pqn import REPO, Runner, learning_table, summarise, window_mean
from rlcore.errors import ConfigError
from runtime.process.arguments import OneLineParser, doc_summary
from runtime.process.paths import output_dir_problem

CONFIG = "configs/cartpole_dqn.py"
PEER_SCRIPT = os.path.join("cleanrl", "dqn_jax.py")
STUB = os.path.join(REPO, "benchmarks", "peer_dqn_torch")
GAME = "CartPole-v1"
STEPS_PER_UPDATE = 10  # ours: one env x 10 steps, a gradient step each (CleanRL's rhythm)
EPISODE = re.compile(r"global_step=(\d+), episodic_return=\[([-\d.eE+]+)\]")
SPS = re.compile(r"^SPS: (\d+)", re.M)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line flags, checked (``check_args``) before any work."""
    p = OneLineParser(prog="python -m benchmarks.peer_dqn", description=doc_summary(__doc__),
                      check=check_args)
    p.add_argument("--peer_python", required=True,
                   help="the Python of CleanRL's environment (JAX, flax, gymnasium, tyro)")
    p.add_argument("--peer_dir", required=True,
                   help="CleanRL's checkout (the folder holding cleanrl/ and cleanrl_utils/)")
    p.add_argument("--seeds", type=int, default=3, help="seeds per side")
    p.add_argument("--total", type=int, default=500_000, help="env steps per seed")
    p.add_argument("--out", required=True, help="output directory (finished runs reused)")
    p.add_argument("--speed_reps", type=int, default=1,
                   help="timed rounds, each ours then CleanRL's (0: none)")
    p.add_argument("--speed_total", type=int, default=100_000,
                   help="env steps of each timed run")
    p.add_argument("--bootstrap_reps", type=int, default=10_000,
                   help="bootstrap resamples of the IQM interval")
    p.add_argument("--rerun", action="store_true", help="run everything again, even if done")
    return p.parse_args(argv)


def peer_dir_problem(path: str) -> str | None:
    """Why ``path`` is not a CleanRL checkout to run (None: it is)."""
    if not os.path.isfile(os.path.join(path, PEER_SCRIPT)):
        return f"{path} has no {PEER_SCRIPT} (give CleanRL's repository root)"
    return None


def check_args(args: argparse.Namespace) -> None:
    """The flags' rules, before any run; raises ``ConfigError`` naming the flag."""
    from runtime.config.fields import NATURAL, POSITIVE

    flag_checks({"seeds": POSITIVE, "total": POSITIVE, "speed_reps": NATURAL,
                 "speed_total": POSITIVE, "bootstrap_reps": POSITIVE},
                path_check("peer_python", file_problem), path_check("peer_dir", peer_dir_problem),
                path_check("out", output_dir_problem))(args)
    if args.total % 500:
        raise ConfigError(f"total: {args.total} must be a multiple of 500 (ours' calls of "
                          "50 updates of 10 env steps)")
    if args.speed_total % 5000 or args.speed_total < 10_000:
        raise ConfigError(f"speed_total: {args.speed_total} must be a multiple of 5000 and "
                          "at least 10000 (ours' timed part starts after its first call of "
                          "500 updates of 10 env steps)")


def ours_cmd(seeds: int, total: int, workdir: str, every: int = 1) -> list[str]:
    """Our training command (``--fresh``: the runner reuses or starts afresh): a row every
    ``every`` updates (1 for learning; a timed run logs every 500, its call's size, as the
    config does every 2,500)."""
    return [sys.executable, "-m", "anakin.main", f"--config={CONFIG}",
            f"--config.num_seeds={seeds}", f"--config.total_env_steps={total}",
            f"--config.log_every={every}", f"--config.updates_per_call={max(every, 50)}",
            "--config.compile_cache_dir=off", f"--workdir={workdir}", "--fresh"]


def peer_cmd(args: argparse.Namespace, seed: int, total: int) -> list[str]:
    """CleanRL's command for ``seed`` (its seeds start at 1)."""
    return [args.peer_python, os.path.join(os.path.abspath(args.peer_dir), PEER_SCRIPT),
            f"--seed={seed + 1}", f"--total-timesteps={total}"]


def peer_env(args: argparse.Namespace) -> dict[str, str]:
    """The stand-in and CleanRL's checkout on ``PYTHONPATH`` (for ``cleanrl_utils``)."""
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return dict(base, PYTHONPATH=os.pathsep.join([STUB, os.path.abspath(args.peer_dir)]))


def run_once(runner: Runner, label: str, cmd: list[str], log: str, reuse: bool,
             env: dict, cwd: str | None = None) -> None:
    """``cmd`` into ``log``, reused where ``log + '.cmd'`` holds ``cmd`` and it finished."""
    stamp = log + ".cmd"
    if reuse and peer_pqn._read_json(stamp) == cmd:
        return runner.reused(label, cmd, cwd)
    runner.run(label, cmd, log, cwd=cwd, env=env)
    with open(stamp, "w") as f:
        f.write(json.dumps(cmd))


def peer_episodes(log: str) -> list[tuple[int, float]]:
    """``(env steps, return)`` of each episode CleanRL's run printed."""
    with open(log) as f:
        return [(int(m.group(1)) + 1, float(m.group(2))) for m in EPISODE.finditer(f.read())]


def learn(args: argparse.Namespace, runner: Runner) -> dict[str, dict[int, list]]:
    """Both sides' learning runs: ``{side: {seed: [(env steps, return), ...]}}``."""
    out = os.path.abspath(args.out)
    workdir = os.path.join(out, "ours", "learning")
    os.makedirs(os.path.dirname(workdir), exist_ok=True)
    run_once(runner, "learning ours", ours_cmd(args.seeds, args.total, workdir),
             workdir + ".log", not args.rerun, peer_pqn.ours_env(), REPO)
    peer: dict[int, list] = {}
    for s in range(args.seeds):
        log = os.path.join(out, "peer", f"seed_{s}.log")
        os.makedirs(os.path.dirname(log), exist_ok=True)
        run_once(runner, f"learning seed {s} peer", peer_cmd(args, s, args.total), log,
                 not args.rerun, peer_env(args), os.path.dirname(log))
        peer[s] = peer_episodes(log)
    return {"ours": peer_pqn.ours_curves(read_rows(workdir)), "peer": peer}


def speed_round(args: argparse.Namespace, runner: Runner, k: int) -> dict:
    """Round ``k``: ours then CleanRL's, one seed, fresh processes."""
    folder = os.path.join(os.path.abspath(args.out), "speed", f"round_{k}")
    os.makedirs(folder, exist_ok=True)
    workdir = os.path.join(folder, "ours")
    runner.run(f"speed round {k} ours", ours_cmd(1, args.speed_total, workdir, 500),
               workdir + ".log", cwd=REPO, env=peer_pqn.ours_env())
    log = os.path.join(folder, "peer.log")
    runner.run(f"speed round {k} peer", peer_cmd(args, 0, args.speed_total), log,
               cwd=folder, env=peer_env(args))
    with open(log) as f:
        printed = SPS.findall(f.read())
    return {"round": k, "ours": peer_pqn.ours_steady_sps(workdir)["sps"],
            "peer": float(printed[-1]) if printed else float("nan")}


def speed_table(rounds: Sequence[dict]) -> str:
    """Per round ours, CleanRL's and the ratio; the median ratio below."""
    ratios = [r["ours"] / r["peer"] for r in rounds]
    lines = [[r["round"], f"{r['ours']:,.0f}", f"{r['peer']:,.0f}", f"{q:.1f}x"]
             for r, q in zip(rounds, ratios, strict=True)]
    table = format_table(["round", "ours env steps/s", "CleanRL env steps/s", "ours / CleanRL"],
                         lines)
    return f"{table}\nours / CleanRL: median {statistics.median(ratios):.1f}x"


def plot(args: argparse.Namespace, runs: dict, path: str) -> str:
    """The mean return against env steps (10k-step window), both sides, shaded min-max."""
    import numpy as np

    from benchmarks.figures import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    grid = np.arange(10_000, args.total + 1, 5_000)
    for side, color, label in (("ours", "tab:blue", "ours (anakin DQN)"),
                               ("peer", "tab:orange", "CleanRL dqn_jax.py")):
        per_seed = [[np.mean([r for s, r in pts if g - 10_000 < s <= g and r is not None]
                             or [np.nan]) for g in grid] for pts in runs[side].values()]
        values = np.asarray(per_seed)
        ax.plot(grid, np.nanmean(values, 0), color=color, label=label)
        ax.fill_between(grid, np.nanmin(values, 0), np.nanmax(values, 0), color=color,
                        alpha=0.2, linewidth=0)
    ax.axvline(0.8 * args.total, color="grey", linestyle=":",
               label="statistic's window starts (80% of the run)")
    ax.set(title=f"DQN on CartPole-v1: training return, {args.seeds} seed(s)\n"
                 "(line: mean over seeds; band: min-max)", xlabel="env steps (per seed)",
           ylabel="episode return (10k-step window)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return save_figure(fig, path)


def main(argv: Sequence[str] | None = None) -> None:
    """Flags, the learning runs with their table and plot, the speed rounds, the report."""
    t0 = time.perf_counter()
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    runner = Runner()
    runs = learn(args, runner)
    stats = {GAME: {side: summarise([window_mean(runs[side][s], args.total)
                                     for s in sorted(runs[side])], args.bootstrap_reps)
                    for side in ("ours", "peer")}}
    png = plot(args, runs, os.path.join(args.out, "peer_dqn.png"))
    rounds = [speed_round(args, runner, k) for k in range(args.speed_reps)]
    lines = [f"learning: {args.seeds} seed(s) x {args.total:,} env steps per side; host: "
             f"{os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f} at the end",
             "", "## Learning", "", learning_table(stats), "",
             "Statistic: per seed, the plain mean of the returns of the episodes that ended "
             "after 80% of the run; IQM with a 95% stratified-bootstrap interval over seeds."]
    if rounds:
        lines += ["", "## Speed", "", speed_table(rounds)]
    lines += ["", "## Commands", "", *runner.commands, "",
              f"wall: {time.perf_counter() - t0:.0f} s"]
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(args.out, "peer_dqn.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "peer_dqn.json"), "w") as f:
        json.dump({"learning": stats, "speed": rounds, "commands": runner.commands}, f, indent=1)
    print(f"plot: {png}\ntable: {os.path.join(args.out, 'peer_dqn.md')}")


if __name__ == "__main__":
    main()
