"""Anakin PQN against purejaxql's own ``pqn_minatar.py`` (Gallici et al. 2024) on MinAtar, side
by side: learning per game over seeds, then alternating timed runs on Breakout.

Both sides train with the reference MinAtar yaml's values (``pqn_minatar.yaml`` at 47af6d7),
which ``configs/minatar_breakout_pqn.py`` mirrors: 128 envs x 32 steps, 2 epochs x 32
minibatches, RAdam lr 5e-4 annealed, grad norm 10, gamma 0.99, lambda 0.65, epsilon 1 ->
0.05 over the first 10% of the ``--total`` env steps (the peer's ``TOTAL_TIMESTEPS_DECAY``
is ``--total`` too), no evaluation during training. Ours is ``python -m anakin.main`` in a
process of its own; the peer's is ``benchmarks/peer_pqn_driver.py`` under ``--peer_python``
(the peer's pinned JAX), which jits ``vmap(make_train(config))`` over the seeds. Where the
two programs still differ: docs/algorithms.md, "PQN" (the learning rate decays per update
here and per gradient step there, initialisers, the peer's /255 input scaling and idle
input BatchNorm, truncation at the 1000-step limit bootstrapped here and a termination
there, stratified minibatches here), and the two sides' gymnax versions.

1. Learning, per game of ``--games``: ours with ``--config.num_seeds=S``, a row every update
   (``--config.log_every=1``) and the greedy evaluation off (``--config.eval_every=0``), in
   ``OUT/ours/GAME``; the peer's with ``--seeds=S --total=N`` in ``OUT/peer/GAME.json``;
   both run ``floor(N / 4096)`` whole updates.
   A run whose output is there for the same command is not run again (ours resumes an
   interrupted run from its checkpoint); ``--rerun`` runs everything afresh.
2. The statistic, per side, game and seed: the plain (unweighted) mean, over the updates
   whose env steps (per seed) are above 80% of ``--total``, of each update's training
   return, the mean return of the episodes that ended in that update (ours:
   ``episode_return`` of the seed's rows; the peer's: the driver's
   ``completed_episode_return_mean``); updates where none ended are skipped. Per game and
   side: the seeds' values, their mean, and rliable's IQM with a 95% stratified-bootstrap
   interval (``get_interval_estimates`` with ``aggregate_iqm``; scipy's 25% trimmed mean
   cuts ``floor(n/4)`` seeds from each end, none below 4 seeds, where the IQM is the mean).
   Table in ``OUT/peer_pqn.md``; mean training return against env steps, shaded over the
   seeds' min-max, in ``OUT/peer_pqn.png``.
3. Speed: ``--speed_reps`` rounds, each one ours run then one peer run, fresh processes, one
   seed, ``--speed_total`` env steps of Breakout-MinAtar. Ours is steady env steps/s from
   its ``metrics.jsonl``: env steps over ``wall_time`` from the end of its first compiled
   call to its last row (compile and first call excluded); the peer's is the driver's one
   timed call (compile excluded; the whole run is that one call, so its first updates are
   in it, where ours' first 25 are left out). Per round
   both rates and ours/peer, then the median ratio and the range.

It prints the exact commands it ran and both sides' JAX (and gymnax) versions, and writes
everything to ``OUT/peer_pqn.md`` and ``OUT/peer_pqn.json``.

Run: ``python -m benchmarks.peer_pqn --peer_python=PEER_VENV/bin/python
--peer_dir=PUREJAXQL_CHECKOUT --games=Breakout-MinAtar,Asterix-MinAtar --seeds=3
--total=10000000 --out=runs/peer_pqn [--speed_reps=3] [--speed_total=262144] [--rerun]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

from benchmarks.common import file_problem, flag_checks, format_table, path_check, read_rows
from benchmarks.seeds import LAST_FRACTION
from rlcore.errors import ConfigError
from rlcore.numbers import readable
from runtime.process.arguments import OneLineParser, doc_summary, str_list
from runtime.process.paths import output_dir_problem

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRIVER = os.path.join(REPO, "benchmarks", "peer_pqn_driver.py")
CONFIG = "configs/minatar_breakout_pqn.py"  # relative to REPO, where ours runs
PEER_SCRIPT = os.path.join("purejaxql", "pqn_minatar.py")
# MinAtar games both sides' gymnax register (the peer's gymnax 0.0.6 has no Seaquest).
GAMES = ("Asterix-MinAtar", "Breakout-MinAtar", "Freeway-MinAtar", "SpaceInvaders-MinAtar")
SPEED_GAME = "Breakout-MinAtar"
STEPS_PER_UPDATE = 128 * 32  # both sides' envs x steps (the reference yaml's)
UPDATES_PER_CALL = 25  # the config's updates_per_call: ours' first compiled call
# {seed: [(env steps per seed, the update's training return or None), ...]}, update order.
Curves = dict[int, list[tuple[int, float | None]]]
# {game: {"ours": Curves, "peer": Curves, "peer_result": the driver's JSON}}
Runs = dict[str, dict[str, Any]]
VERSIONS_SNIPPET = (
    "import json, sys, importlib.metadata as m, jax; "
    "print(json.dumps({'jax': jax.__version__, 'backend': jax.default_backend(), "
    "'gymnax': m.version('gymnax'), 'flax': m.version('flax'), 'optax': m.version('optax'), "
    "'python': sys.version.split()[0]}))"
)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line flags, checked (``check_args``) before any work."""
    p = OneLineParser(prog="python -m benchmarks.peer_pqn", description=doc_summary(__doc__),
                      check=check_args)
    p.add_argument("--peer_python", required=True,
                   help="the Python of the peer's environment (its pinned JAX)")
    p.add_argument("--peer_dir", required=True,
                   help="purejaxql's checkout (the folder holding purejaxql/)")
    p.add_argument("--games", type=str_list, default=["Breakout-MinAtar", "Asterix-MinAtar"],
                   help=f"comma-separated, of {', '.join(GAMES)}")
    p.add_argument("--seeds", type=int, default=3, help="seeds per game and side")
    p.add_argument("--total", type=int, default=10_000_000,
                   help="env steps per seed of each learning run (both sides run its "
                        f"whole updates of {STEPS_PER_UPDATE})")
    p.add_argument("--out", required=True, help="output directory (finished runs reused)")
    p.add_argument("--speed_reps", type=int, default=3,
                   help="timed rounds, each ours then the peer's (0: none)")
    p.add_argument("--speed_total", type=int, default=262_144,
                   help="env steps of each timed run (more than "
                        f"{UPDATES_PER_CALL} updates of {STEPS_PER_UPDATE})")
    p.add_argument("--bootstrap_reps", type=int, default=10_000,
                   help="bootstrap resamples of the IQM interval")
    p.add_argument("--rerun", action="store_true", help="run everything again, even if done")
    return p.parse_args(argv)


def peer_dir_problem(path: str) -> str | None:
    """Why ``path`` is not a purejaxql checkout to run (None: it is)."""
    if not os.path.isdir(path):
        return f"{path} is not a directory"
    if not os.path.isfile(os.path.join(path, PEER_SCRIPT)):
        return f"{path} has no {PEER_SCRIPT} (give purejaxql's repository root)"
    return None


def check_args(args: argparse.Namespace) -> None:
    """The flags' rules, before any run; raises ``ConfigError`` naming the flag
    (docs/design.md, "Exit codes")."""
    from runtime.config.fields import NATURAL, POSITIVE, Choice

    flag_checks({"seeds": POSITIVE, "total": POSITIVE, "speed_reps": NATURAL,
                 "speed_total": POSITIVE, "bootstrap_reps": POSITIVE, "games": Choice(GAMES)},
                path_check("peer_python", file_problem), path_check("peer_dir", peer_dir_problem),
                path_check("out", output_dir_problem))(args)
    if not args.games or len(set(args.games)) < len(args.games):
        raise ConfigError(f"games: {args.games} must be one or more distinct of "
                          f"{', '.join(GAMES)}")
    if args.total < STEPS_PER_UPDATE:
        raise ConfigError(f"total: {args.total} is less than one update "
                          f"({STEPS_PER_UPDATE} env steps: 128 envs x 32 steps)")
    if args.speed_reps and args.speed_total // STEPS_PER_UPDATE <= UPDATES_PER_CALL:
        raise ConfigError(f"speed_total: {args.speed_total} leaves ours no call after its "
                          f"first; give at least {(UPDATES_PER_CALL + 1) * STEPS_PER_UPDATE}")


# --- the statistic -------------------------------------------------------------------------


def window_mean(points: Iterable[tuple[float, float | None]], total: int,
                fraction: float = LAST_FRACTION) -> float | None:
    """The plain mean of the returns of ``points`` ``(env steps, return or None)`` whose env
    steps are above ``(1 - fraction) * total``, the Nones skipped; None when none is left."""
    cut = (1 - fraction) * total
    kept = [r for step, r in points if step > cut and r is not None]
    return sum(kept) / len(kept) if kept else None


def ours_curves(rows: Sequence[dict]) -> Curves:
    """``{seed: [(env steps, episode_return), ...]}`` of our ``metrics.jsonl`` rows, in update
    order (rows without a ``seed`` key are seed 0's)."""
    curves: dict[int, list[tuple[int, int, float | None]]] = {}
    for r in rows:
        curves.setdefault(int(r.get("seed", 0)), []).append(
            (r["update"], r["env_steps"], r.get("episode_return")))
    return {s: [(step, ret) for _, step, ret in sorted(v, key=lambda x: x[0])]
            for s, v in sorted(curves.items())}


def peer_curves(result: dict) -> Curves:
    """``{seed: [(env steps, completed_episode_return_mean), ...]}`` of the driver's JSON."""
    return {int(s["index"]): list(zip(s["env_step"], s["completed_episode_return_mean"],
                                      strict=True))
            for s in result["seeds"]}


def final_values(curves: Curves, total: int) -> list:
    """Each seed's ``window_mean`` (seed order)."""
    return [window_mean(curves[s], total) for s in sorted(curves)]


def iqm_interval(values: Sequence[float], reps: int, seed: int = 0) -> tuple[float, float,
                                                                                  float]:
    """``(IQM, lo, hi)`` of ``values`` (one per seed, one task): rliable's ``aggregate_iqm``
    with its 95% stratified-bootstrap percentile interval, reproducible: rliable 1.2's
    resampling draws from NumPy's global generator whatever ``random_state`` it is given,
    so that generator is seeded with ``seed`` for the call and put back after."""
    import numpy as np
    from rliable import library, metrics

    scores = np.asarray(values, dtype=np.float64).reshape(-1, 1)  # (runs, tasks)
    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        point, interval = library.get_interval_estimates(
            {"x": scores}, lambda x: np.array([metrics.aggregate_iqm(x)]), reps=reps)
    finally:
        np.random.set_state(saved)
    return float(point["x"][0]), float(interval["x"][0, 0]), float(interval["x"][1, 0])


def summarise(values: Sequence[float | None], reps: int) -> dict[str, Any]:
    """Per-seed values, their mean and the IQM interval (seeds with no value left out)."""
    kept = [v for v in values if v is not None]
    out: dict[str, Any] = {"per_seed": list(values), "mean": None, "iqm": None, "lo": None,
                           "hi": None}
    if kept:
        out["mean"] = statistics.mean(kept)
        out["iqm"], out["lo"], out["hi"] = iqm_interval(kept, reps)
    return out


def _num(value: float | None) -> str:
    """A value as the tables write returns (``readable``); "-" for none."""
    return "-" if value is None else readable(value)


def learning_table(stats: dict[str, dict[str, dict]]) -> str:
    """``stats[game][side]`` (``summarise``) as one table."""
    lines = []
    for game, sides in stats.items():
        for side, s in sides.items():
            iqm = "-" if s["iqm"] is None else (
                f"{readable(s['iqm'])} [{readable(s['lo'])}, {readable(s['hi'])}]")
            lines.append([game, side, ", ".join(_num(v) for v in s["per_seed"]),
                          _num(s["mean"]), iqm])
    return format_table(["game", "side", "per seed", "mean", "IQM [95% CI]"], lines)


# --- running -------------------------------------------------------------------------------


class Runner:
    """Runs the commands, logs each to a file, and keeps the list of what it ran."""

    def __init__(self) -> None:
        """No command run yet."""
        self.commands: list[str] = []
        self.seconds: dict[str, float] = {}

    def run(self, label: str, cmd: list[str], log: str, cwd: str | None = None,
            env: dict | None = None) -> None:
        """``cmd`` to completion, stdout and stderr to ``log``; a failure exits 1 in one
        line naming the log."""
        shown = shlex.join(cmd) if cwd is None else f"cd {shlex.quote(cwd)} && {shlex.join(cmd)}"
        self.commands.append(shown)
        print(f"{label}: {shown}", flush=True)
        os.makedirs(os.path.dirname(log), exist_ok=True)
        t0 = time.perf_counter()
        with open(log, "w") as f:
            done = subprocess.run(cmd, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT)
        self.seconds[label] = time.perf_counter() - t0
        if done.returncode != 0:
            raise SystemExit(f"{label} failed with exit code {done.returncode}; see {log}")
        print(f"{label}: done in {self.seconds[label]:.0f} s", flush=True)

    def reused(self, label: str, cmd: list[str], cwd: str | None = None) -> None:
        """Notes ``cmd`` as reused (its output was there), not run."""
        shown = shlex.join(cmd) if cwd is None else f"cd {shlex.quote(cwd)} && {shlex.join(cmd)}"
        self.commands.append(f"(reused, not run again) {shown}")
        print(f"{label}: reused {shown}", flush=True)


def ours_env() -> dict[str, str]:
    """This environment with the repository first on ``PYTHONPATH``."""
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=REPO + (os.pathsep + path if path else ""))


def peer_env() -> dict[str, str]:
    """This environment without our ``PYTHONPATH`` (the peer imports its own packages)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def ours_cmd(game: str, seeds: int, total: int, workdir: str) -> list[str]:
    """Our training command (without ``--fresh``)."""
    return [sys.executable, "-m", "anakin.main", f"--config={CONFIG}", f"--config.env_id={game}",
            f"--config.num_seeds={seeds}", f"--config.total_env_steps={total}",
            "--config.eval_every=0", "--config.log_every=1", "--config.compile_cache_dir=off",
            f"--workdir={workdir}"]


def peer_cmd(args: argparse.Namespace, game: str, seeds: int, total: int, out: str) -> list[str]:
    """The driver's command under the peer's Python."""
    return [args.peer_python, DRIVER, f"--purejaxql={args.peer_dir}", f"--env={game}",
            f"--seeds={seeds}", f"--total={total}", f"--out={out}"]


def _read_json(path: str) -> Any:
    """The JSON at ``path``, or None where it is missing or unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def run_ours(runner: Runner, label: str, cmd: list[str], workdir: str, reuse: bool) -> None:
    """Ours into ``workdir``: reused where ``<workdir>.done.json`` holds ``cmd``; resumed
    from its checkpoint where an interrupted run of ``cmd`` is there
    (``<workdir>.started.json``); else afresh (``--fresh`` moves an older run aside)."""
    started, done = f"{workdir}.started.json", f"{workdir}.done.json"
    if reuse and _read_json(done) == cmd:
        return runner.reused(label, cmd, REPO)
    resume = reuse and _read_json(started) == cmd
    for path in (done, started):
        if os.path.exists(path):
            os.remove(path)
    os.makedirs(os.path.dirname(workdir), exist_ok=True)
    with open(started, "w") as f:
        json.dump(cmd, f)
    runner.run(label, cmd if resume else [*cmd, "--fresh"], f"{workdir}.log", cwd=REPO,
               env=ours_env())
    os.replace(started, done)


def run_peer(runner: Runner, label: str, cmd: list[str], out: str, reuse: bool) -> dict:
    """The driver writing ``out``: reused where ``out`` holds the result of ``cmd``."""
    result = _read_json(out) if reuse else None
    if result is not None and result.get("argv") == cmd[2:]:
        runner.reused(label, cmd)
        return result
    runner.run(label, cmd, os.path.splitext(out)[0] + ".log", env=peer_env())
    return _read_json(out)


def learn(args: argparse.Namespace, runner: Runner) -> Runs:
    """Every game's two learning runs: ``{game: {"ours": curves, "peer": curves}}`` and the
    peer's result (its versions, timings) under ``"peer_result"``."""
    runs: Runs = {}
    for game in args.games:
        workdir = os.path.join(os.path.abspath(args.out), "ours", game)
        run_ours(runner, f"learning {game} ours", ours_cmd(game, args.seeds, args.total,
                                                             workdir), workdir, not args.rerun)
        out = os.path.join(os.path.abspath(args.out), "peer", f"{game}.json")
        result = run_peer(runner, f"learning {game} peer",
                          peer_cmd(args, game, args.seeds, args.total, out), out,
                          not args.rerun)
        runs[game] = {"ours": ours_curves(read_rows(workdir)), "peer": peer_curves(result),
                      "peer_result": result}
    return runs


def learning_stats(args: argparse.Namespace, runs: Runs) -> dict[str, dict[str, dict]]:
    """``{game: {side: summarise(...)}}`` of the learning runs."""
    return {game: {side: summarise(final_values(r[side], args.total), args.bootstrap_reps)
                   for side in ("ours", "peer")} for game, r in runs.items()}


def ours_steady_sps(workdir: str) -> dict[str, float]:
    """Ours' steady env steps/s (one agent): env steps over ``wall_time`` from the row that
    ends its first compiled call (``timing.json``'s ``first_call_updates``) to its last row;
    and its compile seconds."""
    rows = read_rows(workdir)
    timing = _read_json(os.path.join(workdir, "timing.json"))
    first = next(r for r in rows if r["update"] == timing["first_call_updates"])
    last = rows[-1]
    if last["update"] <= first["update"]:
        raise SystemExit(f"{workdir}: one compiled call only; give a longer --speed_total")
    return {"sps": (last["env_steps"] - first["env_steps"]) / (last["wall_time"]
                                                                  - first["wall_time"]),
            "compile_s": timing["compile_s"],
            "timed_env_steps": last["env_steps"] - first["env_steps"]}


def speed_round(args: argparse.Namespace, runner: Runner, k: int) -> dict[str, Any]:
    """Round ``k``: ours then the peer's, one seed of Breakout, fresh processes; reused where
    the round's ``round.json`` is there for the same size."""
    folder = os.path.join(os.path.abspath(args.out), "speed", f"round_{k}")
    workdir, out = os.path.join(folder, "ours"), os.path.join(folder, "peer.json")
    cmds = {"ours": [*ours_cmd(SPEED_GAME, 1, args.speed_total, workdir), "--fresh"],
            "peer": peer_cmd(args, SPEED_GAME, 1, args.speed_total, out)}
    done = None if args.rerun else _read_json(os.path.join(folder, "round.json"))
    if done is not None and done.get("commands") == cmds:
        runner.reused(f"speed round {k} ours", cmds["ours"], REPO)
        runner.reused(f"speed round {k} peer", cmds["peer"])
        return done
    runner.run(f"speed round {k} ours", cmds["ours"], f"{workdir}.log", cwd=REPO,
               env=ours_env())
    runner.run(f"speed round {k} peer", cmds["peer"], os.path.join(folder, "peer.log"),
               env=peer_env())
    peer = _read_json(out)
    result = {"round": k, "commands": cmds, "ours": ours_steady_sps(workdir),
              "peer": {"sps": peer["env_steps_per_second"],
                       "compile_s": peer["compile_seconds"],
                       "timed_env_steps": peer["env_steps_total"]}}
    with open(os.path.join(folder, "round.json"), "w") as f:
        json.dump(result, f, indent=1)
    return result


def speed_table(rounds: Sequence[dict]) -> str:
    """Per round ours, the peer's and ours/peer; the median ratio and range below it."""
    lines, ratios = [], []
    for r in rounds:
        ratios.append(r["ours"]["sps"] / r["peer"]["sps"])
        lines.append([r["round"], f"{r['ours']['sps']:,.0f}", f"{r['peer']['sps']:,.0f}",
                      f"{ratios[-1]:.2f}x", f"{r['ours']['compile_s']:.1f}",
                      f"{r['peer']['compile_s']:.1f}"])
    table = format_table(["round", "ours env steps/s", "peer env steps/s", "ours / peer",
                          "ours compile s", "peer compile s"], lines)
    return (f"{table}\nours / peer: median {statistics.median(ratios):.2f}x, range "
            f"{min(ratios):.2f}-{max(ratios):.2f}x over {len(ratios)} round(s)")


def versions(python: str, env: dict[str, str]) -> dict[str, str]:
    """JAX (version, backend), gymnax, flax and optax of ``python``'s environment."""
    done = subprocess.run([python, "-c", VERSIONS_SNIPPET], env=env, capture_output=True,
                          text=True)
    if done.returncode != 0:
        return {"jax": "unknown", "error": " ".join(done.stderr.strip().splitlines()[-1:])}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _band(curves: Curves) -> tuple[Any, Any, Any, Any]:
    """``(env steps, mean, min, max)`` over the seeds of ``curves`` (NaN: no episode)."""
    import numpy as np

    seeds = sorted(curves)
    steps = np.array([s for s, _ in curves[seeds[0]]], dtype=np.float64)
    values = np.array([[np.nan if r is None else r for _, r in curves[s]] for s in seeds],
                      dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an update with no episode anywhere
        return steps, np.nanmean(values, 0), np.nanmin(values, 0), np.nanmax(values, 0)


def plot(args: argparse.Namespace, runs: Runs, labels: dict[str, str], path: str) -> str:
    """The mean training return against env steps per game, both sides, shaded min-max."""
    from benchmarks.figures import pyplot, save_figure

    plt = pyplot()
    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 4.4), squeeze=False)
    for ax, (game, r) in zip(axes[0], runs.items(), strict=True):
        for side, color in (("ours", "tab:blue"), ("peer", "tab:orange")):
            steps, mean, lo, hi = _band(r[side])
            ax.plot(steps, mean, color=color, label=labels[side])
            ax.fill_between(steps, lo, hi, color=color, alpha=0.2, linewidth=0)
        ax.axvline((1 - LAST_FRACTION) * args.total, color="grey", linestyle=":",
                   label="statistic's window starts (80% of the run)")
        ax.set(title=f"PQN on {game}: training return, {args.seeds} seed(s)\n"
                     f"(line: mean over seeds; band: min-max)",
               xlabel="env steps (per seed)",
               ylabel="return of the episodes ended in the update")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    return save_figure(fig, path)


STATISTIC_NOTE = (
    "Statistic: per seed, the plain (unweighted) mean over the updates with env steps above "
    "80% of the run of the update's training return (the mean return of the episodes that "
    "ended in it; updates with none skipped), the same rule on both sides. IQM: rliable's "
    "aggregate_iqm (scipy's 25% trimmed mean, floor(n/4) seeds cut from each end: none below "
    "4 seeds, where it is the mean) with a 95% stratified-bootstrap percentile interval "
    "over the seeds.")


def header(args: argparse.Namespace, ours_v: dict, peer_v: dict) -> str:
    """The report's first lines: both sides' versions and the settings."""
    return (f"ours: jax {ours_v.get('jax')} ({ours_v.get('backend')}), gymnax "
            f"{ours_v.get('gymnax')}, flax {ours_v.get('flax')}, optax {ours_v.get('optax')}"
            f"\npeer: purejaxql pqn_minatar.py at {os.path.abspath(args.peer_dir)}, jax "
            f"{peer_v.get('jax')} ({peer_v.get('backend')}), gymnax {peer_v.get('gymnax')}, "
            f"flax {peer_v.get('flax')}, optax {peer_v.get('optax')}\n"
            f"learning: {args.seeds} seed(s) x {args.total:,} env steps per game and side; "
            f"speed: {args.speed_reps} round(s) x {args.speed_total:,} env steps, 1 seed, "
            f"{SPEED_GAME}\nhost: {os.cpu_count()} CPU cores, load average "
            f"{os.getloadavg()[0]:.1f} at the start (timings on a shared host spread)")


def part_seconds(seconds: dict[str, float]) -> str:
    """The runs' seconds summed per part and side (labels ``learning GAME side``, ``speed
    round K side``), then each run's."""
    sums: dict[str, float] = {}
    for label, s in seconds.items():
        words = label.split()
        key = f"{words[0]} {words[-1]}"
        sums[key] = sums.get(key, 0.0) + s
    total = ", ".join(f"{k} {v:.0f} s" for k, v in sums.items())
    each = ", ".join(f"{k} {v:.0f} s" for k, v in seconds.items())
    return f"runs' seconds: {total or 'nothing run'}\neach: {each or '-'}"


def report(parts: dict[str, str], runner: Runner, wall: dict[str, float]) -> str:
    """The whole text: versions, tables, commands and the seconds each part took."""
    lines = [parts["header"], "", "## Learning", "", parts["learning"], "", STATISTIC_NOTE]
    if "speed" in parts:
        lines += ["", "## Speed", "", parts["speed"]]
    lines += ["", "## Commands", "", *runner.commands, "", "## Seconds", "",
              part_seconds(runner.seconds),
              "wall: " + ", ".join(f"{k} {v:.0f} s" for k, v in wall.items())]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Flags, then the learning runs and their table and plot, the speed rounds, the report."""
    t0 = time.perf_counter()
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    runner, wall = Runner(), {}
    ours_v, peer_v = versions(sys.executable, ours_env()), versions(args.peer_python,
                                                                    peer_env())
    wall["versions"], t = time.perf_counter() - t0, time.perf_counter()
    runs = learn(args, runner)
    wall["learning runs"], t = time.perf_counter() - t, time.perf_counter()
    stats = learning_stats(args, runs)
    parts = {"header": header(args, ours_v, peer_v), "learning": learning_table(stats)}
    labels = {"ours": f"ours (anakin PQN, jax {ours_v.get('jax')})",
              "peer": f"purejaxql pqn_minatar.py (jax {peer_v.get('jax')})"}
    png = plot(args, runs, labels, os.path.join(args.out, "peer_pqn.png"))
    wall["statistic and plot"], t = time.perf_counter() - t, time.perf_counter()
    rounds = [speed_round(args, runner, k) for k in range(args.speed_reps)]
    if rounds:
        parts["speed"] = speed_table(rounds)
    wall["speed rounds"] = time.perf_counter() - t
    wall["total"] = time.perf_counter() - t0
    text = report(parts, runner, wall)
    print(text)
    with open(os.path.join(args.out, "peer_pqn.md"), "w") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "peer_pqn.json"), "w") as f:
        json.dump({"versions": {"ours": ours_v, "peer": peer_v}, "learning": stats,
                   "speed": rounds, "commands": runner.commands, "seconds": runner.seconds,
                   "wall": wall}, f, indent=1)
    print(f"plot: {png}\ntable: {os.path.join(args.out, 'peer_pqn.md')}")


if __name__ == "__main__":
    main()
