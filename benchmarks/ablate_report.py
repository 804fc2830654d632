"""Ablation results: per-run records from run directories, group statistics, tables, plots.

A *run* is one seed of one cell. Its record comes from the run directory alone
(``metrics.jsonl`` and ``timing.json``, see ``runtime.run.directory``):

- ``sps``: steady-state env steps/s of one agent, ``steps_per_update x (updates after the
  first call) / (train_s - first_call_s)``; ``program_sps`` counts all agents of the program
  (Anakin's ``num_seeds``);
- ``compile_s``: timing.json's ``compile_s`` where the run compiled ahead of time (Anakin),
  else the first call's seconds minus its updates at the steady rate (compile and
  first-touch costs, Sebulba);
- ``steps_to_threshold`` / ``wall_to_threshold_s``: the first log line whose mean episode
  return reaches the threshold, its env steps and its wall-clock since the run's sinks opened
  (compile included); None when never reached;
- ``final_return``: mean episode return of the last ``FINAL_LINES`` log lines;
- ``return_last20``: mean episode return over the last ``LAST_FRACTION`` (20%) of the log
  lines that have one (the staleness report's statistic, kept in ``results.csv`` so that
  reports of several invocations can be merged: ``read_csv``);
- Sebulba: ``params_lag`` (mean, min, max), mean per-stage seconds per update, and the
  fractions of time the learner waits for rollouts and the actors wait for params or room.

Groups are runs that differ only in their seed; their final return is given as a mean with a
95% Student-t interval over seeds (one seed: no interval), and so are the plots' bands.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Sequence

import numpy as np

from benchmarks.figures import pyplot, save_figure
from rlcore.numbers import readable
from sebulba import timers

FINAL_LINES = 3
LAST_FRACTION = 0.2  # ``return_last20``'s share of a run's log lines
ACTOR_STAGES = timers.ACTOR_REPORT_ORDER
LEARNER_STAGES = timers.LEARNER
STAGE_COLORS = dict(zip(timers.REPORT_ORDER, ("#4c72b0", "#55a868", "#8172b2", "#c44e52",
                                              "#dd8452", "#937860", "#da8bc3")))


# --- records -------------------------------------------------------------------------------


def read_run_dir(workdir: str) -> tuple[list[dict], dict]:
    """``(metrics.jsonl rows, timing.json)`` of a finished run directory."""
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    with open(os.path.join(workdir, "timing.json")) as f:
        timing = json.load(f)
    return rows, timing


def steady_rate(timing: dict, steps_per_update: float) -> tuple[float | None, float | None]:
    """``(env steps/s per agent after the first call, compile seconds)`` from timing.json."""
    k = timing["first_call_updates"]
    later = timing["end_update"] - timing["start_update"] - k
    later_s = timing["train_s"] - timing["first_call_s"]
    if later <= 0 or later_s <= 0:
        return None, None
    per_update_s = later_s / later
    if "compile_s" in timing:  # compiled ahead of time (Anakin): measured, not estimated
        return steps_per_update / per_update_s, timing["compile_s"]
    return steps_per_update / per_update_s, max(timing["first_call_s"] - k * per_update_s, 0.0)


def first_reaching(rows: Sequence[dict], threshold: float | None) -> dict | None:
    """The first row whose ``episode_return`` is at least ``threshold``."""
    if threshold is None:
        return None
    return next((r for r in rows if r["episode_return"] is not None
                 and r["episode_return"] >= threshold), None)


def return_last20(returns: Sequence[float | None]) -> float | None:
    """Mean of the last ``LAST_FRACTION`` of a run's logged ``returns`` (None: a line without
    an episode, skipped; ``benchmarks.aggregate.run_score``); None when no line has one."""
    from benchmarks.aggregate import run_score

    kept = [r for r in returns if r is not None]
    return run_score(kept, LAST_FRACTION) if kept else None


def final_return(rows: Sequence[dict]) -> float | None:
    """Mean episode return of the last ``FINAL_LINES`` lines that have one."""
    returns = [r["episode_return"] for r in rows if r["episode_return"] is not None]
    return float(np.mean(returns[-FINAL_LINES:])) if returns else None


def stage_means(rows: Sequence[dict]) -> dict[str, float]:
    """Typical seconds per update of every Sebulba stage: the median over log lines after
    the first (compile waits land in the first two updates, the median drops them)."""
    later = rows[1:] or rows
    return {s: float(np.median([r.get(timers.metric_key(s), 0.0) for r in later]))
            for s in ACTOR_STAGES + LEARNER_STAGES}


def wait_fractions(stages: dict[str, float]) -> tuple[float, float]:
    """``(learner, actor)`` fraction of their time spent waiting."""
    learner = stages[timers.ROLLOUT_QUEUE_WAIT] + stages[timers.LEARNER_STEP]
    actor = sum(stages[s] for s in ACTOR_STAGES)
    wait_a = stages[timers.PARAMS_WAIT] + stages[timers.ACTOR_PUT_WAIT]
    return (stages[timers.ROLLOUT_QUEUE_WAIT] / learner if learner else 0.0,
            wait_a / actor if actor else 0.0)


def run_records(cell, rows: list[dict], timing: dict) -> list[dict]:
    """One record per seed of ``cell`` (see the module docstring); ``curve`` holds the
    ``(env_steps, wall_time, episode_return)`` of every line (not written to the CSV)."""
    records = []
    for seed in cell.seeds:
        mine = [r for r in rows if r.get("seed", seed) == seed]
        steps_per_update = mine[0]["env_steps"] / mine[0]["update"]
        sps, compile_s = steady_rate(timing, steps_per_update)
        hit = first_reaching(mine, cell.threshold)
        rec = {"suite": cell.suite, "cell": cell.name, **dict(cell.fields), "seed": seed,
               "env_steps": mine[-1]["env_steps"], "sps": sps,
               "program_sps": sps * len(cell.seeds) if sps else None,
               "compile_s": compile_s, "first_call_s": timing["first_call_s"],
               "total_s": timing["train_s"], "threshold": cell.threshold,
               "steps_to_threshold": hit["env_steps"] if hit else None,
               "wall_to_threshold_s": hit["wall_time"] if hit else None,
               "final_return": final_return(mine),
               "return_last20": return_last20([r["episode_return"] for r in mine]),
               "curve": [(r["env_steps"], r["wall_time"], r["episode_return"]) for r in mine]}
        if cell.mode == "sebulba":
            lags = [r["params_lag"] for r in mine]
            stages = stage_means(mine)
            learner_wait, actor_wait = wait_fractions(stages)
            rec.update(params_lag=float(np.mean(lags)), params_lag_min=min(lags),
                       params_lag_max=max(lags), learner_wait_frac=learner_wait,
                       actor_wait_frac=actor_wait,
                       **{f"{s}_s": v for s, v in stages.items()})
        records.append(rec)
    return records


def curve_spread(rows_a: Sequence[dict], rows_b: Sequence[dict]) -> float:
    """Largest absolute difference between two runs' reproducible values (episode return,
    losses, params lag), line by line; inf when their lines do not match."""
    if [r["update"] for r in rows_a] != [r["update"] for r in rows_b]:
        return math.inf
    worst = 0.0
    for a, b in zip(rows_a, rows_b):
        for key in a:
            if not (key == "episode_return" or key == "params_lag" or key.startswith("loss/")):
                continue
            if (a[key] is None) != (b.get(key) is None):
                return math.inf
            if a[key] is not None:
                worst = max(worst, abs(a[key] - b[key]))
    return worst


# --- statistics ----------------------------------------------------------------------------


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """``(mean, low, high)``: the Student-t interval of the mean over ``values`` (None
    skipped; ``runtime.commands.stats.t_interval``); ``low == high == mean`` for one value.

    (Not a bootstrap: over 2-3 seeds a percentile bootstrap of the mean is the range of the
    seeds, and covers far less than its nominal 95%.)"""
    x = np.asarray([v for v in values if v is not None], float)
    if x.size == 0:
        return (math.nan, math.nan, math.nan)
    if x.size < 2:
        return (float(x[0]),) * 3
    from runtime.commands.stats import t_interval

    m, half = t_interval(x, confidence)
    return (m, m - half, m + half)


def group_key(rec: dict, fields: Sequence[str]) -> tuple:
    return tuple(rec.get(f) for f in fields)


def groups(records: Sequence[dict], fields: Sequence[str]) -> dict[tuple, list[dict]]:
    """Records grouped by the values of ``fields`` (in first-seen order)."""
    out: dict[tuple, list[dict]] = {}
    for rec in records:
        out.setdefault(group_key(rec, fields), []).append(rec)
    return out


def _mean(values) -> float | None:
    vals = [v for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


# --- output files --------------------------------------------------------------------------


def write_csv(path: str, records: Sequence[dict]) -> None:
    """``results.csv``: one row per run, every field of the records except the curve."""
    keys: list[str] = []
    for rec in records:
        keys += [k for k in rec if k != "curve" and k not in keys]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        for rec in records:
            writer.writerow({k: rec.get(k) for k in keys})


def read_csv(path: str) -> list[dict]:
    """The records of a ``results.csv`` (``write_csv``), numbers typed back (an empty cell is
    None); they have no ``curve``."""
    def typed(v: str):
        if v == "":
            return None
        for kind in (int, float):
            try:
                return kind(v)
            except ValueError:
                pass
        return v

    with open(path, newline="") as f:
        return [{k: typed(v) for k, v in row.items()} for row in csv.DictReader(f)]


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def fmt(value, spec: str = ",.0f", none: str = "-") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return none
    return format(value, spec)


def ci_text(estimate: float, lo: float, hi: float) -> str:
    """``estimate [lo, hi]`` (``estimate`` alone where the interval is a point), each as a
    return reads (``rlcore.numbers.readable``)."""
    if lo == hi:
        return readable(estimate)
    return f"{readable(estimate)} [{readable(lo)}, {readable(hi)}]"


def fmt_ci(values) -> str:
    m, lo, hi = mean_ci(values)
    return "-" if math.isnan(m) else ci_text(m, lo, hi)


def reached(group_recs) -> str:
    hits = [r["steps_to_threshold"] for r in group_recs if r["steps_to_threshold"] is not None]
    mean = fmt(_mean(hits))
    return f"{mean} ({len(hits)}/{len(group_recs)})"


ARCH_FIELDS = ("env", "algorithm", "arch")


def architectures_table(records) -> str:
    headers = ("env", "algorithm", "arch", "SPS per agent", "program SPS",
               "env steps to threshold (runs reaching)", "wall-clock to threshold s",
               "compile s", "final return, mean [95% CI]", "seeds")
    rows = []
    for (env, alg, arch), recs in groups(records, ARCH_FIELDS).items():
        rows.append([env, alg, arch, fmt(_mean(r["sps"] for r in recs)),
                     fmt(_mean(r["program_sps"] for r in recs)), reached(recs),
                     fmt(_mean(r["wall_to_threshold_s"] for r in recs), ".1f"),
                     fmt(_mean(r["compile_s"] for r in recs), ".1f"),
                     fmt_ci([r["final_return"] for r in recs]), len(recs)])
    thresholds = sorted({(r["env"], r["threshold"]) for r in records})
    note = ", ".join(f"{e} {t:g}" for e, t in thresholds)
    return (markdown_table(headers, rows) + f"\n\nThresholds: {note}. Wall-clock to threshold "
            "includes compile (shown apart in its own column); Anakin trains all seeds in "
            "one program, so its wall-clock is that of all seeds together.")


PIPE_FIELDS = ("pipeline", "jitter_ms", "threads")


def pipeline_spreads(records, rows_of) -> dict[str, float]:
    """Per pipeline, the largest curve difference between any run and the run of the same
    seed with no jitter and one thread."""
    spread: dict[str, float] = {}
    for rec in records:
        ref = next((r for r in records if r["pipeline"] == rec["pipeline"]
                    and r["seed"] == rec["seed"] and r["jitter_ms"] == 0 and r["threads"] == 1),
                   None)
        d = math.inf if ref is None else curve_spread(rows_of(ref), rows_of(rec))
        spread[rec["pipeline"]] = max(spread.get(rec["pipeline"], 0.0), d)
    return spread


def pipelines_table(records, spreads: dict[str, float]) -> str:
    headers = ("pipeline", "jitter ms", "threads", "SPS", "params lag mean (min..max)",
               "final return", "seeds")
    rows = []
    for (pipe, jitter, threads), recs in groups(records, PIPE_FIELDS).items():
        lag = (f"{_mean(r['params_lag'] for r in recs):.2f} "
               f"({min(r['params_lag_min'] for r in recs):g}.."
               f"{max(r['params_lag_max'] for r in recs):g})")
        rows.append([pipe, jitter, threads, fmt(_mean(r["sps"] for r in recs)), lag,
                     fmt_ci([r["final_return"] for r in recs]), len(recs)])
    spread_rows = [[p, f"{d:.3g}", "identical" if d == 0 else "differ"]
                   for p, d in spreads.items()]
    return (markdown_table(headers, rows) + "\n\nLargest difference between a run's curve "
            "(episode return, losses, params lag, line by line) and the same seed's run with "
            "no jitter and one actor thread:\n\n"
            + markdown_table(("pipeline", "largest difference", "curves"), spread_rows))


def devices_table(records) -> str:
    headers = ("split (actors+learners)", "SPS", "learner waits (fraction)",
               "actors wait (fraction)", "learner step s/update", "actor inference s/update",
               "seeds")
    rows = []
    for (split,), recs in groups(records, ("split",)).items():
        rows.append([split, fmt(_mean(r["sps"] for r in recs)),
                     fmt(_mean(r["learner_wait_frac"] for r in recs), ".2f"),
                     fmt(_mean(r["actor_wait_frac"] for r in recs), ".2f"),
                     fmt(_mean(r["learner_step_s"] for r in recs), ".3f"),
                     fmt(_mean(r["inference_s"] for r in recs), ".3f"), len(recs)])
    return markdown_table(headers, rows)


def stages_table(records, fields) -> str:
    headers = (*fields, "SPS", *(f"{s} s" for s in ACTOR_STAGES + LEARNER_STAGES))
    rows = []
    for key, recs in groups(records, fields).items():
        rows.append([*key, fmt(_mean(r["sps"] for r in recs)),
                     *(fmt(_mean(r[f"{s}_s"] for r in recs), ".3f")
                       for s in ACTOR_STAGES + LEARNER_STAGES)])
    return markdown_table(headers, rows)


# --- plots ---------------------------------------------------------------------------------


LABELS = {"jitter_ms": "jitter {} ms", "threads": "{} thr", "split": "{}", "seed": "seed {}"}


def _label(key: tuple, fields: Sequence[str]) -> str:
    """A short legend or tick label of a group: ``sebulba, ppo``, ``jitter 10 ms, 2 thr``."""
    return ", ".join(LABELS.get(f, "{}").format(v) for f, v in zip(fields, key))


def band(curves: list[list[tuple[float, float]]], grid: np.ndarray,
         lowest: float | None = None, highest: float | None = None):
    """Mean and 95% Student-t band over seeds of curves interpolated on ``grid``, the band
    clipped to ``[lowest, highest]`` (None: no bound); returns ``(mean, lo, hi, clipped)``,
    ``clipped`` whether the bound cut the band anywhere."""
    ys = np.array([np.interp(grid, [p[0] for p in c], [p[1] for p in c]) for c in curves])
    stats = np.array([mean_ci(ys[:, i]) for i in range(grid.size)])
    mean, lo, hi = stats[:, 0], stats[:, 1], stats[:, 2]
    floor = -np.inf if lowest is None else lowest
    ceiling = np.inf if highest is None else highest
    clipped = bool(np.any(lo < floor) or np.any(hi > ceiling))
    return mean, np.clip(lo, floor, ceiling), np.clip(hi, floor, ceiling), clipped


def _curves(recs, x_index: int) -> list[list[tuple[float, float]]]:
    return [[(p[x_index], p[2]) for p in r["curve"] if p[2] is not None] for r in recs]


def panel_range(recs, return_range) -> tuple[float | None, float | None]:
    """The return range of a panel's env (``return_range(env_id)``) when all its records
    share one env; ``(None, None)`` otherwise or without ``return_range``."""
    envs = {r["env"] for r in recs}
    if return_range is None or len(envs) != 1:
        return None, None
    return return_range(envs.pop())


def plot_returns(path: str, records, panel_field: str, line_fields: Sequence[str],
                 x_index: int, title: str, return_range=None) -> str:
    """Return against env steps (``x_index`` 0) or wall-clock (1): one panel per value of
    ``panel_field``, one mean line with its 95% band over seeds per group; with
    ``return_range`` (``env_id -> (lowest, highest)``, None for no bound) the bands are
    clipped to what the panel's env's return can be, and the title says so."""
    plt = pyplot()
    panels = groups(records, (panel_field,))
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.2), squeeze=False)
    banded = clipped = False  # whether any line has a band; whether one was clipped
    for ax, ((panel,), recs) in zip(axes[0], panels.items()):
        lowest, highest = panel_range(recs, return_range)
        for key, grp in groups(recs, line_fields).items():
            curves = [c for c in _curves(grp, x_index) if c]
            if not curves:
                continue
            hi = min(c[-1][0] for c in curves)
            lo = max(c[0][0] for c in curves)
            grid = np.linspace(lo, hi, 60) if hi > lo else np.array([lo])
            mean, band_lo, band_hi, cut = band(curves, grid, lowest, highest)
            banded |= len(curves) > 1
            clipped |= cut
            line, = ax.plot(grid, mean, label=f"{_label(key, line_fields)} (n={len(grp)})")
            ax.fill_between(grid, band_lo, band_hi, color=line.get_color(), alpha=0.2)
        ax.set_title(f"{panel_field} {panel}" if panel_field not in ("env",) else panel)
        ax.set_xlabel("env steps" if x_index == 0 else "wall-clock (s, compile included)")
        ax.set_ylabel("mean episode return")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    what = "95% t-interval over seeds" + (", clipped to the env's return range" if clipped
                                          else "")
    fig.suptitle(f"{title}\n(bands: {what})" if banded else title, fontsize=11)
    return save_figure(fig, path)


def plot_sps(path: str, records, fields: Sequence[str], title: str) -> str:
    """Steady-state SPS per group as bars (mean over seeds, min..max as error bars)."""
    plt = pyplot()
    grps = groups(records, fields)
    labels = [_label(k, fields) for k in grps]
    means = [_mean(r["sps"] for r in g) or 0.0 for g in grps.values()]
    lo = [max(m - min((r["sps"] or 0.0) for r in g), 0.0) for m, g in zip(means, grps.values())]
    hi = [max(max((r["sps"] or 0.0) for r in g) - m, 0.0) for m, g in zip(means, grps.values())]
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(labels) + 2), 4.5))
    # Bars coloured by architecture where the groups differ in it, else by nothing.
    kinds = [k[fields.index("arch")] if "arch" in fields else "runs" for k in grps]
    colors = dict(zip(dict.fromkeys(kinds), ("#4c72b0", "#dd8452", "#55a868")))
    for kind, color in colors.items():
        idx = [i for i, k in enumerate(kinds) if k == kind]
        ax.bar(idx, [means[i] for i in idx], yerr=[[lo[i] for i in idx], [hi[i] for i in idx]],
               capsize=3, color=color, label=f"{kind}: mean over seeds (whiskers: min..max)")
    ax.set_xticks(range(len(labels)), labels, rotation=35, ha="right", fontsize=8)
    if max(means, default=0) > 20 * max(min(means, default=0), 1e-9):
        ax.set_yscale("log")
    ax.set_ylabel("env steps per second (per agent, after compile)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, path)


STAGE_FIG_WIDTH_IN = 9.0  # the stage plot's width, whatever its number of groups
STAGE_SLOT_IN = 0.2  # height of one bar slot (a group: actor bar, learner bar, a gap)


def stage_figure_size(num_groups: int) -> tuple[float, float]:
    """``(width, height)`` in inches of the stage plot: a fixed width, and a height that
    grows with the groups (three bar slots each) above the room for title, axis and
    legend."""
    return STAGE_FIG_WIDTH_IN, 2.2 + STAGE_SLOT_IN * 3 * num_groups


def stage_figure(records, fields: Sequence[str], title: str):
    """The figure of ``plot_stages``: one row per group and thread kind, horizontal bars
    stacked stage by stage, groups top to bottom in first-seen order, the legend below."""
    plt = pyplot()
    grps = groups([r for r in records if "learner_step_s" in r], fields)
    fig, ax = plt.subplots(figsize=stage_figure_size(len(grps)), layout="constrained")
    ticks, labels = [], []
    for i, (key, recs) in enumerate(grps.items()):
        for j, (who, stages) in enumerate((("actor", ACTOR_STAGES),
                                           ("learner", LEARNER_STAGES))):
            y, left = 3 * i + j, 0.0
            for s in stages:
                v = _mean(r[f"{s}_s"] for r in recs) or 0.0
                ax.barh(y, v, left=left, height=0.85, color=STAGE_COLORS[s],
                        label=s if i == 0 else None)
                left += v
            ticks.append(y)
            labels.append(f"{_label(key, fields)}: {who}")
    ax.set_yticks(ticks, labels, fontsize=8)
    ax.set_ylim(3 * len(grps) - 0.5, -0.7)  # the first group on top
    ax.set_xlabel("seconds per update (median over log lines, mean over seeds)", fontsize=9)
    ax.set_title("actor threads and the learner run at the same time: compare their bars, "
                 "do not add them", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    fig.suptitle(title, fontsize=11)
    fig.legend(loc="outside lower center", ncol=4, fontsize=8, title="stage",
               title_fontsize=8)
    return fig


def has_stages(records) -> bool:
    """Whether any record holds Sebulba stage times (a Sebulba run's)."""
    return any("learner_step_s" in r for r in records)


def plot_stages(path: str, records, fields: Sequence[str], title: str) -> str | None:
    """Sebulba stage seconds per update as stacked horizontal bars, an actor bar and a
    learner bar per group (they run concurrently), at a fixed width
    (``stage_figure_size``) however many groups there are; None (no file) when no record
    holds stage times (no Sebulba run: an empty plot would say nothing)."""
    if not has_stages(records):
        return None
    fig = stage_figure(records, fields, title)
    return save_figure(fig, path, tight=False)
