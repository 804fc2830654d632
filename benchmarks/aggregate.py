"""Atari results the way papers report them: human-normalised median, mean, IQM and
optimality gap over games and runs, with stratified-bootstrap 95% intervals (rliable).

    python -m benchmarks.aggregate RUN_DIR... [--out=DIR] [--last_fraction=0.1]
        [--reps=2000] [--seed=0] [--key=episode_return] [--drop_extra_runs]

Each RUN_DIR is a run directory (``config.json`` with ``env_id``, ``metrics.jsonl``;
docs/design.md, "Run directory"). A directory trained with ``num_seeds > 1`` holds one run
per ``seed`` tag of its lines. A run's score is the mean ``episode_return`` over the last
``last_fraction`` of its log lines that have one (at least one line); each line's value is
already the mean over the episodes that ended since the line before, so lines are weighted
equally, not episodes.
Raw scores are human-normalised with ``envs.atari_scores`` (Agent57's random and human
reference scores) and arranged as rliable's score matrix ``[runs per game, games]``.

The matrix needs the same number of runs for every game: games with unequal counts are
refused, unless ``--drop_extra_runs`` keeps the first ``k`` runs of each game (sorted by
path and seed), ``k`` the smallest count, which the report then says. The intervals come
from ``rliable.library.get_interval_estimates`` (stratified bootstrap: runs resampled within
each game, percentile intervals, ``--reps`` replications from a fixed ``--seed``; rliable 1.2
draws them from NumPy's global RNG, which is seeded for the call and restored after it).
Optimality gap is the mean shortfall below a human-normalised score of 1 (lower is better).

Writes into ``--out`` (default ``./aggregate``): ``aggregate.md`` (metric table, per-game raw
and normalised scores), ``aggregate.json`` (the same numbers and every run's score) and
``aggregate.png`` (rliable's interval plot); prints the markdown to stdout. Bad input (no
run directories, a missing or broken ``config.json``/``metrics.jsonl``, a non-Atari env id,
a run with no episodes, unequal runs per game) prints one line naming the path and the
problem to stderr and exits 2.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import sys
import warnings
from collections.abc import Sequence

import numpy as np

try:
    from rliable import library, metrics
except ModuleNotFoundError:  # the bench extra: one line, not a traceback
    sys.exit("benchmarks need the 'bench' extra, which is not installed: "
             "pip install -e '.[bench]'")

from benchmarks.figures import pyplot
from envs import atari_scores
from runtime.process.arguments import OneLineParser, doc_summary
from runtime.process.one_line import single_line
from runtime.process.paths import output_dir_problem

METRICS = ("median", "mean", "iqm", "optimality_gap")
METRIC_TITLES = {"median": "Median", "mean": "Mean", "iqm": "IQM",
                 "optimality_gap": "Optimality Gap"}
XLABEL = "human-normalised score"


class InputError(Exception):
    """Bad input: ``str(error)`` is the one line printed before exiting 2."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")


@dataclasses.dataclass(frozen=True)
class Run:
    """One agent's results: ``returns`` are its log lines' values, oldest first."""

    path: str
    seed: int | None
    game: str
    algorithm: str | None
    returns: tuple[float, ...]
    env_steps: int | None

    @property
    def name(self) -> str:
        return self.path if self.seed is None else f"{self.path}[seed={self.seed}]"


# --- reading run directories ---------------------------------------------------------------


def read_json(path: str) -> dict:
    """A JSON object from ``path``; InputError when missing or not an object."""
    if not os.path.isfile(path):
        raise InputError(os.path.dirname(path) or ".", f"no {os.path.basename(path)}")
    try:
        with open(path) as f:
            value = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(path, f"not readable JSON ({e})") from e
    if not isinstance(value, dict):
        raise InputError(path, "not a JSON object")
    return value


def read_metrics(path: str) -> list[dict]:
    """The lines of a ``metrics.jsonl``, each a dict; blank lines skipped."""
    if not os.path.isfile(path):
        raise InputError(os.path.dirname(path) or ".", "no metrics.jsonl")
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{path}:{number}", f"not valid JSON ({e})") from e
            if not isinstance(row, dict):
                raise InputError(f"{path}:{number}", "not a JSON object")
            rows.append(row)
    return rows


def game_of_config(config: dict, path: str) -> str:
    """The Atari game of a run's config; InputError for a non-Atari or a swept run."""
    env_id = config.get("env_id")
    if not isinstance(env_id, str):
        raise InputError(path, "config.json has no env_id")
    game = atari_scores.game_name(env_id)
    if game is None:
        raise InputError(path, f"env_id {env_id!r} is not one of the 57 Atari games")
    sweep = config.get("sweep") or {}
    swept = sorted(k for k, v in sweep.items() if v) if isinstance(sweep, dict) else []
    if swept:
        raise InputError(path, f"a sweep run (over {', '.join(swept)}): its variants are "
                               "not runs of one agent")
    return game


def episode_returns(rows: Sequence[dict], key: str, where: str) -> tuple[float, ...]:
    """The non-null ``key`` values of ``rows`` in order; InputError on a non-number."""
    values = []
    for row in rows:
        value = row.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(where, f"{key} {value!r} is not a number")
        if not math.isfinite(value):
            raise InputError(where, f"{key} is {value}")
        values.append(float(value))
    return tuple(values)


def read_runs(path: str, key: str = "episode_return") -> list[Run]:
    """The runs of one run directory: one, or one per ``seed`` tag of its metrics lines."""
    path = os.path.normpath(path)
    if not os.path.isdir(path):
        raise InputError(path, "not a directory")
    config = read_json(os.path.join(path, "config.json"))
    game = game_of_config(config, path)
    rows = read_metrics(os.path.join(path, "metrics.jsonl"))
    by_seed: dict[int | None, list[dict]] = {}
    for row in rows:
        by_seed.setdefault(row.get("seed"), []).append(row)
    runs = []
    for seed, seed_rows in sorted(by_seed.items(), key=lambda kv: (kv[0] is not None, kv[0])):
        where = path if seed is None else f"{path}[seed={seed}]"
        returns = episode_returns(seed_rows, key, where)
        if not returns:
            raise InputError(where, f"no metrics.jsonl line has an {key} (no episode ended)")
        steps = [r["env_steps"] for r in seed_rows if isinstance(r.get("env_steps"), int)]
        runs.append(Run(path=path, seed=seed, game=game, algorithm=config.get("algorithm"),
                        returns=returns, env_steps=max(steps) if steps else None))
    if not runs:
        raise InputError(os.path.join(path, "metrics.jsonl"), "no log lines")
    return runs


# --- scores --------------------------------------------------------------------------------


def run_score(returns: Sequence[float], last_fraction: float) -> float:
    """Mean of the last ``ceil(last_fraction * len(returns))`` values (at least one)."""
    count = max(1, math.ceil(last_fraction * len(returns) - 1e-9))
    return float(np.mean(returns[-count:]))


def group_runs(runs: Sequence[Run], drop_extra_runs: bool) -> tuple[dict[str, list[Run]], int]:
    """``({game: runs sorted by (path, seed)}, runs per game)``, games sorted by name.

    Unequal counts per game raise InputError, or with ``drop_extra_runs`` keep the first
    ``k`` runs of each game, ``k`` the smallest count.
    """
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(run.game, []).append(run)
    groups = {g: sorted(rs, key=lambda r: (r.path, r.seed is not None, r.seed))
              for g, rs in sorted(groups.items())}
    names = [r.name for rs in groups.values() for r in rs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InputError(duplicates[0], "given more than once")
    counts = {g: len(rs) for g, rs in groups.items()}
    k = min(counts.values())
    if not drop_extra_runs and max(counts.values()) != k:
        listed = ", ".join(f"{g} {n}" for g, n in counts.items())
        raise InputError("RUN_DIR", f"games have unequal numbers of runs ({listed}); give the "
                                    "same number for each, or pass --drop_extra_runs")
    return {g: rs[:k] for g, rs in groups.items()}, k


def score_matrices(groups: dict[str, list[Run]], last_fraction: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``(raw, normalised)`` score matrices ``[runs per game, games]``, games in dict order."""
    raw = np.array([[run_score(r.returns, last_fraction) for r in rs]
                    for rs in groups.values()]).T
    hns = np.stack([atari_scores.human_normalized(g, raw[:, j])
                    for j, g in enumerate(groups)], axis=1)
    return raw, hns


def aggregate_fn(scores: np.ndarray) -> np.ndarray:
    """``[median, mean, IQM, optimality gap]`` of a ``[runs, games]`` normalised matrix."""
    return np.array([metrics.aggregate_median(scores), metrics.aggregate_mean(scores),
                     metrics.aggregate_iqm(scores), metrics.aggregate_optimality_gap(scores)])


@contextlib.contextmanager
def global_numpy_seed(seed: int):
    """Seeds NumPy's global RNG for the block and restores its previous state afterwards.

    rliable 1.2's ``StratifiedBootstrap.update_indices`` draws its resamples with the global
    ``np.random.choice`` and never uses the ``random_state`` it is given, so only the global
    RNG makes the intervals reproducible.
    """
    saved = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(saved)


def interval_estimates(hns: np.ndarray, reps: int, seed: int
                       ) -> dict[str, tuple[float, float, float]]:
    """``{metric: (point, ci_low, ci_high)}``: rliable's stratified bootstrap, 95% percentile
    intervals from ``reps`` replications, NumPy's global RNG seeded with ``seed`` (and
    ``random_state=RandomState(seed)`` for rliable versions that use it)."""
    with warnings.catch_warnings(), global_numpy_seed(seed):
        # rliable hands arch a RandomState through the argument arch deprecates.
        warnings.filterwarnings("ignore", message="random_state is deprecated",
                                category=FutureWarning)
        points, intervals = library.get_interval_estimates(
            {"agent": hns}, aggregate_fn, reps=reps, random_state=np.random.RandomState(seed))
    point, interval = points["agent"], intervals["agent"]
    return {m: (float(point[i]), float(interval[0, i]), float(interval[1, i]))
            for i, m in enumerate(METRICS)}


def iqm_interval(scores: Sequence[float], reps: int = 2000, seed: int = 0
                 ) -> tuple[float, float, float]:
    """``(IQM, ci_low, ci_high)`` of one group's run scores ``[runs]``: rliable's IQM (the 25%
    trimmed mean) with its 95% percentile bootstrap interval over runs, ``reps``
    replications, NumPy's global RNG seeded with ``seed`` (as ``interval_estimates``)."""
    matrix = np.asarray(scores, float).reshape(-1, 1)
    with warnings.catch_warnings(), global_numpy_seed(seed):
        warnings.filterwarnings("ignore", message="random_state is deprecated",
                                category=FutureWarning)
        points, intervals = library.get_interval_estimates(
            {"agent": matrix}, lambda s: np.array([metrics.aggregate_iqm(s)]), reps=reps,
            random_state=np.random.RandomState(seed))
    return (float(points["agent"][0]), float(intervals["agent"][0, 0]),
            float(intervals["agent"][1, 0]))


# --- reports -------------------------------------------------------------------------------


def label_of(runs: Sequence[Run]) -> str:
    """The runs' algorithm name ("agent" when the configs do not say); InputError on a mix."""
    names = sorted({r.algorithm for r in runs if r.algorithm})
    if len(names) > 1:
        raise InputError("RUN_DIR", f"runs of different algorithms ({', '.join(names)}): "
                                    "aggregate each separately")
    return names[0] if names else "agent"


def summary(groups: dict[str, list[Run]], runs_per_game: int, dropped: int,
            raw: np.ndarray, hns: np.ndarray, estimates: dict, settings: dict) -> dict:
    """Everything the reports show, JSON-ready."""
    per_game = {}
    for j, (game, runs) in enumerate(groups.items()):
        random, human = atari_scores.REFERENCE[game]
        per_game[game] = {
            "random": random, "human": human,
            "raw_mean": float(raw[:, j].mean()), "normalised_mean": float(hns[:, j].mean()),
            "runs": [{"run": r.name, "path": r.path, "seed": r.seed, "env_steps": r.env_steps,
                      "log_lines_with_returns": len(r.returns), "raw": float(raw[i, j]),
                      "normalised": float(hns[i, j])} for i, r in enumerate(runs)],
        }
    return {
        **settings,
        "games": list(groups), "runs_per_game": runs_per_game, "dropped_runs": dropped,
        "metrics": {m: {"point": p, "ci95": [lo, hi]} for m, (p, lo, hi) in estimates.items()},
        "per_game": per_game, "normalised_score_matrix": hns.tolist(),
    }


def _fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def markdown(report: dict) -> str:
    """The markdown report: method, metric table, notes, per-game table."""
    k, games = report["runs_per_game"], report["games"]
    percent = 100 * report["last_fraction"]
    lines = [
        f"# Atari human-normalised scores: {report['label']}", "",
        f"{k * len(games)} runs: {len(games)} games x {k} run{'s' * (k > 1)} per game. A run's "
        f"score is the mean `{report['key']}` over the last {percent:g}% of its log lines "
        "that have one, normalised as (score - random) / (human - random) with "
        "Agent57's reference scores. 95% intervals: rliable's stratified bootstrap (runs "
        f"resampled within each game), percentile method, {report['reps']} replications, "
        f"seed {report['seed']}.", "",
        "| metric | point estimate | 95% CI |", "| --- | --- | --- |",
    ]
    for m in METRICS:
        e = report["metrics"][m]
        lines.append(f"| {METRIC_TITLES[m]} | {_fmt(e['point'])} | "
                     f"[{_fmt(e['ci95'][0])}, {_fmt(e['ci95'][1])}] |")
    notes = ["Optimality gap: mean shortfall below a normalised score of 1 (lower is better)."]
    if k == 1:
        notes.append("Each game has a single run, so the stratified bootstrap has nothing to "
                     "resample: the intervals collapse to the point estimates.")
    if report["dropped_runs"]:
        notes.append(f"Games had unequal numbers of runs: {report['dropped_runs']} run(s) "
                     f"beyond the first {k} of each game (by path and seed) were left out.")
    for note in notes:
        lines += ["", note]
    lines += ["", "| game | runs | raw score | human-normalised | random | human |",
              "| --- | --- | --- | --- | --- | --- |"]
    for game, g in report["per_game"].items():
        lines.append(f"| {game} | {len(g['runs'])} | {_fmt(g['raw_mean'], 1)} | "
                     f"{_fmt(g['normalised_mean'])} | {g['random']:g} | {g['human']:g} |")
    lines += ["", "Raw and normalised scores per game are means over its runs; every run's "
                  "score is in aggregate.json."]
    return "\n".join(lines) + "\n"


def write_plot(report: dict, path: str) -> None:
    """rliable's interval plot of the four metrics, saved as a PNG."""
    plt = pyplot()
    from rliable import plot_utils

    label = report["label"]
    point = {label: np.array([report["metrics"][m]["point"] for m in METRICS])}
    interval = {label: np.array([report["metrics"][m]["ci95"] for m in METRICS]).T}
    fig, _ = plot_utils.plot_interval_estimates(
        point, interval, metric_names=[METRIC_TITLES[m] for m in METRICS],
        algorithms=[label], xlabel=XLABEL, max_ticks=3, subfigure_width=4.2, row_height=1.4,
        xlabel_y_coordinate=-0.45)
    k, n = report["runs_per_game"], len(report["games"])
    fig.suptitle(f"Atari, {label}: {n} games x {k} run{'s' * (k > 1)} per game, 95% CIs",
                 x=0.45, y=1.3, fontsize="xx-large")
    fig.savefig(path, bbox_inches="tight", dpi=120)
    plt.close(fig)


# --- entry point ---------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line arguments (usage errors: one line, exit 2)."""
    p = OneLineParser(prog="python -m benchmarks.aggregate", error_prefix="aggregate: ",
                      description=doc_summary(__doc__))
    p.add_argument("run_dirs", nargs="*", metavar="RUN_DIR",
                   help="run directories (config.json, metrics.jsonl); a num_seeds run "
                        "holds one run per seed")
    p.add_argument("--out", default=os.path.join(os.getcwd(), "aggregate"),
                   help="directory for aggregate.md, .json and .png (default: ./aggregate)")
    p.add_argument("--last_fraction", type=float, default=0.1,
                   help="a run scores its mean return over this last fraction of its log "
                        "lines (default: %(default)s)")
    p.add_argument("--reps", type=int, default=2000,
                   help="bootstrap replications of the 95%% intervals (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the bootstrap (default: %(default)s)")
    p.add_argument("--key", default="episode_return",
                   help="metrics key to score, e.g. eval/episode_return (default: "
                        "%(default)s)")
    p.add_argument("--label", default=None, help="name in the report (default: algorithm)")
    p.add_argument("--drop_extra_runs", action="store_true",
                   help="keep the first k runs of every game, k the smallest count, instead "
                        "of refusing unequal counts")
    return p.parse_args(argv)


def check_args(args: argparse.Namespace) -> None:
    """InputError for argument values argparse cannot check."""
    if not args.run_dirs:
        raise InputError("RUN_DIR", "no run directories given")
    if not 0 < args.last_fraction <= 1:
        raise InputError("--last_fraction", f"must be in (0, 1], got {args.last_fraction}")
    if args.reps < 1:
        raise InputError("--reps", f"must be at least 1, got {args.reps}")
    problem = output_dir_problem(args.out)
    if problem is not None:
        raise InputError("--out", f"{problem}; pass a directory that exists or can be created")


def build_report(args: argparse.Namespace) -> dict:
    """Reads the runs and computes everything; InputError on bad input."""
    check_args(args)
    runs = [run for path in args.run_dirs for run in read_runs(path, args.key)]
    label = args.label or label_of(runs)
    groups, k = group_runs(runs, args.drop_extra_runs)
    raw, hns = score_matrices(groups, args.last_fraction)
    estimates = interval_estimates(hns, args.reps, args.seed)
    settings = {"label": label, "key": args.key, "last_fraction": args.last_fraction,
                "reps": args.reps, "seed": args.seed}
    return summary(groups, k, len(runs) - k * len(groups), raw, hns, estimates, settings)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the aggregation; returns the exit code (0 done, 2 bad input)."""
    args = parse_args(argv)
    try:
        report = build_report(args)
    except InputError as e:
        print(single_line(f"aggregate: {e}"), file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    text = markdown(report)
    with open(os.path.join(args.out, "aggregate.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "aggregate.json"), "w") as f:
        json.dump(report, f, indent=2)
    write_plot(report, os.path.join(args.out, "aggregate.png"))
    print(text, end="")
    print(f"wrote {os.path.join(args.out, 'aggregate.{md,json,png}')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
